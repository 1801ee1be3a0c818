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
from smagent.commands.common import bad as _bad, emit_json, int_arg as _int_arg, parse_target as _parse_target
from smagent.commands.tables_cmd import _apply
from smagent.fdb import apply as fdbapply
from smagent.fdb import random as rft
from smagent.fdb.switch import TableBadInput, read_switch


@click.group("rft")
def rft_group():
    """Random forwarding tables: show and set entries (for switches that have one)."""


def _read(obj, switch):
    target = _parse_target(switch, obj)

    def work():
        t = obj.transport()
        sr = read_switch(t, target)
        si = sr.facts.switch_info
        if not si.random_fdb_cap:
            raise TableBadInput(f"{sr.facts.name} ({target.describe()}) has no random forwarding table "
                                f"(RandomFDBCap 0; LinearFDBCap {si.linear_fdb_cap})")
        return t, target, sr, rft.read_table(t, target, si)
    return work()


@rft_group.command("show")
@click.argument("switch")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def rft_show(obj, switch, as_json):
    """Print SWITCH's valid RFT entries (SWITCH: LID, DR path, GUID or description)."""
    _t, target, sr, table = _read(obj, switch)
    f, si = sr.facts, sr.facts.switch_info
    rows = [{"entry": i, "base_lid": b, "lmc": lmc, "lids": [r.start, r.stop - 1], "port": p}
            for i, (b, lmc, p) in rft.valid_entries(table) for r in [fw.rft_lid_range(b, lmc)]]
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
    _t, target, sr, table = _read(obj, switch)
    f = sr.facts
    if port != fw.LFT_NO_PORT and port > f.num_ports:
        _bad([f"port {port} does not exist on {f.name}: ports 0..{f.num_ports}, or 255 to remove"])
    changes, problems = rft.plan_set(f, target, table, lid, lmc, port)
    if problems:
        _bad(problems)
    plan = fdbapply.Plan(rft=changes)
    lines = plan.lines()
    problems = []
    if changes and not dry_run:
        problems, _saved = _apply(obj, plan)
    if as_json:
        click.echo(json.dumps({"dry_run": dry_run, "plan": lines, "sets": {"rft_blocks": 0 if dry_run else len(changes)},
                               "problems": problems}, indent=2))
    else:
        click.echo("\n".join(lines) if lines else "# nothing to change")
    if problems:
        for p in problems:
            click.echo(f"error: {p}", err=True)
        raise SystemExit(3)
