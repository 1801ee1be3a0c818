"""`smagent rft show|set`: a switch's RandomForwardingTable (RFT) by entries.

infiniband-diags has no RFT output, so `show` prints one line per valid entry
(`entry  base-lid  lmc  lids  port`) under a header with RandomFDBCap, LIDsPerPort and
DefaultPort. `set SWITCH LID PORT [--lmc N]` makes the LIDs LID..LID+2^N-1 leave by PORT
(PORT 255 removes them): overlapping entries are replaced, the rest keep their slots,
the LIDsPerPort and RandomFDBCap limits are checked before any Set, and only changed
blocks are written (their GetResps are the read-back). ibsim does not implement the
RFT; the simulator does (`--transport sim` with a switch whose caps say so).
"""
from __future__ import annotations

import json

import click

from mad import forwarding as fw
from smagent import rft, tables
from smagent.commands.common import bad as _bad, int_arg as _int_arg, parse_target as _parse_target
from smagent.errors import EXIT_FABRIC
from smagent.tableops import _Bad, _Problem, read_switch


@click.group("rft")
def rft_group():
    """Random forwarding tables: show and set entries (for switches that have one)."""


def _read_table(transport, target, si) -> list[int]:
    nb = rft.blocks_for(si.random_fdb_cap)
    got, errors = tables.read_rft_blocks(transport, [(0, target, b) for b in range(nb)])
    if errors:
        raise _Problem(errors[0])
    return [e for b in range(nb) for e in got[(0, b)]]


def _read(obj, switch):
    target = _parse_target(switch, obj)

    def work():
        t = obj.transport()
        sr = read_switch(t, target)
        si = sr.facts.switch_info
        if not si.random_fdb_cap:
            raise _Bad(f"{sr.facts.name} ({target.describe()}) has no random forwarding table "
                           f"(RandomFDBCap 0; LinearFDBCap {si.linear_fdb_cap})")
        return t, target, sr, _read_table(t, target, si)
    return work()


def _entries(table):
    for i, packed in enumerate(table):
        e = tables.rft_unpack(packed)
        if e is not None:
            yield i, e


@rft_group.command("show")
@click.argument("switch")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def rft_show(obj, switch, as_json):
    """Print SWITCH's valid RFT entries (SWITCH: LID, DR path, GUID or description)."""
    _t, target, sr, table = _read(obj, switch)
    f, si = sr.facts, sr.facts.switch_info
    rows = [{"entry": i, "base_lid": b, "lmc": lmc, "lids": [r.start, r.stop - 1], "port": p}
            for i, (b, lmc, p) in _entries(table) for r in [fw.rft_lid_range(b, lmc)]]
    if as_json:
        click.echo(json.dumps({"switch": {"guid": f"0x{f.guid:016x}", "description": f.name,
                                          "target": target.describe()},
                               "random_fdb_cap": si.random_fdb_cap, "lids_per_port": si.lids_per_port,
                               "default_port": si.default_port, "entries": rows}, indent=2))
        return
    click.echo(f"Random forwarding table of switch {target.describe()} guid 0x{f.guid:016x} ({f.name}): "
               f"RandomFDBCap {si.random_fdb_cap}, LIDsPerPort {si.lids_per_port}, DefaultPort {si.default_port}")
    click.echo("Entry  BaseLid  LMC  Lids           Port")
    for r in rows:
        lo, hi = r["lids"]
        click.echo(f"{r['entry']:5d}  0x{r['base_lid']:04x}   {r['lmc']:3d}  0x{lo:04x}-0x{hi:04x}  {r['port']:03d}")
    click.echo(f"{len(rows)} valid entries dumped")


@rft_group.command("set")
@click.argument("switch")
@click.argument("lid", callback=_int_arg)
@click.argument("port", callback=_int_arg)
@click.option("--lmc", type=click.IntRange(0, 7), default=0, show_default=True,
              help="The entry covers 2^LMC LIDs from LID (LID must be aligned).")
@click.option("--dry-run", is_flag=True, help="Print the plan; send no Set.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def rft_set(obj, switch, lid, port, lmc, dry_run, as_json):
    """Route LID (and its 2^LMC range) out of PORT on SWITCH; PORT 255 removes the route."""
    pre = []
    if not 1 <= lid <= fw.UNICAST_LID_MAX:
        pre.append(f"LID 0x{lid:x} ({lid}) is not a unicast LID (1..0xbfff)")
    elif lid % (1 << lmc) or lid + (1 << lmc) - 1 > fw.UNICAST_LID_MAX:
        pre.append(f"LID 0x{lid:x} is not aligned to LMC {lmc} (a multiple of {1 << lmc} within the unicast range)")
    if not 0 <= port <= fw.LFT_NO_PORT:
        pre.append(f"port {port} is not a port (0..254, or 255 to remove)")
    if pre:
        _bad(pre)
    t, target, sr, table = _read(obj, switch)
    f, si = sr.facts, sr.facts.switch_info
    if port != fw.LFT_NO_PORT and port > f.num_ports:
        _bad([f"port {port} does not exist on {f.name}: ports 0..{f.num_ports}, or 255 to remove"])
    span = set(fw.rft_lid_range(lid, lmc))
    keep = [rft.Entry(b, m, p) for _i, (b, m, p) in _entries(table) if not span & set(fw.rft_lid_range(b, m))]
    cut = [rft.Entry(b, m, p) for _i, (b, m, p) in _entries(table) if span & set(fw.rft_lid_range(b, m))]
    # an old entry only partly inside the new range keeps its other LIDs, re-covered
    rest = {x: e.port for e in cut for x in e.lids() if x not in span}
    wanted = keep + rft.cover(rest) + ([rft.Entry(lid, lmc, port)] if port != fw.LFT_NO_PORT else [])
    per_port: dict[int, int] = {}
    for e in wanted:
        per_port[e.port] = per_port.get(e.port, 0) + 1
    problems = [f"{f.name}: port {p} would have {n} RFT entries, LIDsPerPort is {si.lids_per_port}"
                for p, n in sorted(per_port.items()) if p and si.lids_per_port and n > si.lids_per_port]
    if len(wanted) > si.random_fdb_cap:
        problems.append(f"{f.name}: {len(wanted)} entries do not fit RandomFDBCap {si.random_fdb_cap}")
    if problems:
        _bad(problems)
    plan = rft.RftPlan(f.guid, f.name, wanted, None)
    changes = rft.changes(plan, target, table, si)
    lines = [f"SubnSet(RandomForwardingTable) {c.describe()}" for c in changes]
    problems = []
    if changes and not dry_run:
        problems = tables.write_rft_blocks(t, changes)[1]
    if as_json:
        click.echo(json.dumps({"dry_run": dry_run, "plan": lines, "sets": {"rft_blocks": 0 if dry_run else len(changes)},
                               "problems": problems}, indent=2))
    else:
        click.echo("\n".join(lines) if lines else "# nothing to change")
    if problems:
        for p in problems:
            click.echo(f"error: {p}", err=True)
        raise SystemExit(EXIT_FABRIC)
