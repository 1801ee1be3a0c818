"""`smagent lft ...` and `smagent mft ...`: show, dump, load and set forwarding tables.

Text output follows infiniband-diags byte for byte (trailing spaces included), so what
parses ibroute's output parses ours:

* `lft show` prints what ``ibroute -n SWITCH`` prints (``-a``: ``ibroute -a -n``),
* `lft dump` prints what ``dump_lfts`` / ``dump_fts`` print (``--all``: ``-a``), a file
  OpenSM's file routing engine loads (``opensm -R file -U FILE``) and `lft load` reads back,
* `mft show` prints what ``ibroute -M -n SWITCH`` prints.

One deliberate difference: ibroute 44 never reads the block holding LID LinearFDBTop when
the top is a multiple of 64 (``ALIGN(top, 64) / 64`` blocks), so it drops that LID; we read
blocks 0..top//64 and show it (DESIGN.md, Known pitfalls).

Every writing command plans first (current state read from the switch, never assumed),
validates everything before the first Set, and with ``--dry-run`` prints the plan and sends
no Set. The GetResp of each Set is the read-back.
"""
from __future__ import annotations

import sys

import click

from mad import forwarding as fw
from smagent.fdb import apply as fdbapply
from smagent.fdb import linear, text
from smagent.fdb import tops as fdbtops
from smagent.fdb import multicast as mfttab
from smagent.fdb.switch import master_sm_warning, read_switch
from smagent.fdb.text import DumpError
from smagent import paths
from smagent.commands.common import bad as _bad, check_output, emit_json, finish_write as _finish_write
from smagent.commands.common import write_output
from smagent.commands.common import int_arg as _int_arg, parse_target as _parse_target
from smagent.errors import EXIT_FABRIC, BadInput
from smagent.paths import default_state_dir

def _state_dir(obj):
    """Where an apply keeps its backups and journal: the sweep's default for umad (the
    in-process simulator and replays have nothing to keep)."""
    if obj.opts.get("transport") != "umad":
        return None
    return default_state_dir()


def _apply(obj, plan, topology=None) -> tuple[list[str], str | None]:
    """The one apply path (smagent.fdb.apply): backup, journal, write, read-back."""
    t = obj.transport()
    a = fdbapply.apply(t, plan, state_dir=_state_dir(obj), topology=topology)
    return a.problems, a.backup_file


@click.group()
def lft():
    """Linear forwarding tables: show, dump, load, set (ibroute / dump_lfts formats)."""


@lft.command("show")
@click.argument("switch")
@click.option("-a", "--all", "dump_all", is_flag=True, help="Every LID up to LinearFDBTop, also invalid ones (ibroute -a).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def lft_show(obj, switch, dump_all, as_json):
    """Print SWITCH's LFT as `ibroute -n` does. SWITCH: a LID (5, 0x5), a DR path (0,1,3), a
    node GUID or a node description."""
    target = _parse_target(switch, obj)

    def work():
        t = obj.transport()
        f = read_switch(t, target).facts
        top = f.lft_top
        blocks = linear.read_lft(t, target, list(range(top // fw.LFT_BLOCK_SIZE + 1)))
        return f, top, b"".join(blocks[b] for b in sorted(blocks))

    f, top, table = work()
    if as_json:
        emit_json({"switch": {"guid": f"0x{f.guid:016x}", "description": f.name, "target": target.describe(),
                                      "num_ports": f.num_ports},
                           "linear_fdb_cap": f.lft_cap, "linear_fdb_top": top,
                           "routes": [{"lid": lid, "port": table[lid]} for lid in range(top + 1)
                                      if table[lid] <= f.num_ports or dump_all]})
    else:
        click.echo("\n".join(text.format_lft(text.portid_str(target), f.guid, f.name, top, table, f.num_ports,
                                             dump_all=dump_all)))


def _discover(transport):
    from smagent import discovery
    topo = discovery.discover(transport)
    for u in topo.unreachable:
        click.echo(f"warning: unreachable: {u}", err=True)
    return topo


@lft.command("dump")
@click.option("-a", "--all", "dump_all", is_flag=True, help="Also LIDs without a valid port (dump_lfts -a).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write to FILE instead of stdout.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document: every switch's routed LIDs.")
@click.pass_obj
def lft_dump(obj, dump_all, output, as_json):
    """Dump every switch's LFT as dump_lfts does: OpenSM loads it with `-R file -U FILE`."""

    def work():
        t = obj.transport()
        topo = _discover(t)
        sws = text.dump_order(topo)
        tables = linear.read_all(t, sws)
        if not as_json:
            return "\n".join(text.format_lft_dump(topo, tables, dump_all=dump_all)) + "\n", topo
        import json
        doc = []
        for n in sws:
            top, table = min(n.switch_info.linear_fdb_top, fw.UNICAST_LID_MAX), tables[n.guid]
            doc.append({"guid": f"{n.guid:#018x}", "description": n.description,
                        "path": ",".join(map(str, n.path)), "linear_fdb_top": top,
                        "lft": {str(lid): table[lid] for lid in range(top + 1) if table[lid] <= n.num_ports}})
        return json.dumps({"switches": doc, "unreachable": topo.unreachable}, indent=2) + "\n", topo

    if output:
        check_output(output)  # before the first SMP
    out, topo = work()
    if output:
        write_output(output, out)
    else:
        click.echo(out, nl=False)
    if topo.unreachable:
        sys.exit(EXIT_FABRIC)


@lft.command("load")
@click.argument("file", type=click.Path(dir_okay=False, exists=True))
@click.option("--dry-run", is_flag=True, help="Print the plan; send no Set.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def lft_load(obj, file, dry_run, as_json):
    """Load a dump (lft dump, dump_lfts, ibroute) and write only the blocks that differ.

    Each section is its switch's whole table, as OpenSM's file routing engine reads it:
    LIDs it does not list forward nowhere (255). Switches are matched by GUID."""
    try:
        sections = text.parse_lft_dump(paths.read_text(file, "dump", errors="replace"), file)
    except DumpError as e:
        _bad(e.problems)

    def work():
        t = obj.transport()
        topo = _discover(t)
        return topo, linear.plan_dump(t, topo, sections, file)

    topo, (changes, tops, problems) = work()
    if problems:
        _bad(problems)
    plan = fdbapply.Plan(tops=tops, lft=changes)
    problems = []
    if not dry_run and plan:
        problems, _saved = _apply(obj, plan, topo)
    _finish_write(as_json, dry_run, plan.lines(), plan.to_json(),
                  {"switchinfo": len(tops), "lft_blocks": len(changes)}, problems, [])


@lft.command("set")
@click.argument("switch")
@click.argument("lid", callback=_int_arg)
@click.argument("port", callback=_int_arg)
@click.option("--dry-run", is_flag=True, help="Print the plan; send no Set.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def lft_set(obj, switch, lid, port, dry_run, as_json):
    """Route LID out of PORT on SWITCH (PORT 255: no route). Raises LinearFDBTop if needed."""
    pre = []
    if not 1 <= lid <= fw.UNICAST_LID_MAX:
        pre.append(f"LID 0x{lid:x} ({lid}) is not a unicast LID (1..0xbfff)")
    if not 0 <= port <= fw.LFT_NO_PORT:
        pre.append(f"port {port} is not a port (0..254, or 255 for none)")
    if pre:
        _bad(pre)
    target = _parse_target(switch, obj)

    def work():
        t = obj.transport()
        sr = read_switch(t, target, for_set=True)
        problems = linear.check_lft_entry(sr.facts, lid, port)
        if problems:
            return sr, None, problems
        changes, tops = linear.plan_set(t, sr.facts, lid, port)
        return sr, fdbapply.Plan(tops=tops, lft=changes), []

    sr, plan, problems = work()
    if problems:
        _bad(problems)
    _write_planned(obj, sr, plan, dry_run, as_json, plan.lines(), plan.to_json(),
                   {"switchinfo": len(plan.tops), "lft_blocks": len(plan.lft)})


def _write_planned(obj, sr, plan, dry_run, as_json, lines, changes_json, sets) -> None:
    """A one-switch Set command after its plan: warn about a master SM, apply, report."""
    warnings = []
    if lines:
        w = master_sm_warning(obj.transport(), sr)
        warnings = [w] if w else []
    problems = []
    if not dry_run and plan:
        problems, _saved = _apply(obj, plan)
    _finish_write(as_json, dry_run, lines, changes_json, sets, problems, warnings)


@click.group()
def mft():
    """Multicast forwarding tables: show, set (ibroute -M format)."""


def _read_mft_switch(t, target, *, for_set=False):
    sr = read_switch(t, target, for_set=for_set)
    f = sr.facts
    positions = fw.mft_positions_for(f.num_ports)
    si = f.switch_info
    masks = mfttab.read_mft(t, target, mfttab.mft_blocks_to_read(si.multicast_fdb_cap, si.multicast_fdb_top),
                            positions)
    return sr, positions, masks


@mft.command("show")
@click.argument("switch")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def mft_show(obj, switch, as_json):
    """Print SWITCH's MFT as `ibroute -M -n` does: MLIDs with any port set."""
    target = _parse_target(switch, obj)
    sr, positions, masks = _read_mft_switch(obj.transport(), target)
    f = sr.facts
    si = f.switch_info
    first, last = mfttab.mft_range(si.multicast_fdb_cap, si.multicast_fdb_top)
    if as_json:
        groups = []
        for mlid in range(first, last + 1):
            ports = mfttab.mft_ports(masks, mlid, positions)
            if ports:
                groups.append({"mlid": f"0x{mlid:04x}", "ports": ports})
        emit_json({"switch": {"guid": f"0x{f.guid:016x}", "description": f.name, "target": target.describe(),
                                      "num_ports": f.num_ports},
                           "multicast_fdb_cap": si.multicast_fdb_cap, "multicast_fdb_top": si.multicast_fdb_top,
                           "positions": positions, "groups": groups})
    else:
        click.echo("\n".join(text.format_mft(text.portid_str(target), f.guid, f.name, first, last, masks,
                                             positions)))


@mft.command("set")
@click.argument("switch")
@click.argument("mlid", callback=_int_arg)
@click.argument("ports", nargs=-1, callback=_int_arg)
@click.option("--dry-run", is_flag=True, help="Print the plan; send no Set.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def mft_set(obj, switch, mlid, ports, dry_run, as_json):
    """Make PORTS the whole port set of MLID on SWITCH (no PORTS: remove the MLID)."""
    ports = sorted(set(ports or []))
    pre = []
    if not fw.MULTICAST_LID_MIN <= mlid <= fw.MULTICAST_LID_MAX:
        pre.append(f"MLID 0x{mlid:x} is not a multicast LID (0xc000..0xfffe)")
    pre += [f"port {p} is not a port (0..254)" for p in ports if not 0 <= p <= fw.MAX_PORT]
    if pre:
        _bad(pre)
    target = _parse_target(switch, obj)

    def work():
        t = obj.transport()
        sr = read_switch(t, target, for_set=True)
        f = sr.facts
        problems = mfttab.check_mft_entry(f, mlid, ports)
        if problems:
            return sr, None, problems
        current = mfttab.read_mft(t, target, [fw.mft_block(mlid)[0]], fw.mft_positions_for(f.num_ports))
        top = fdbtops.raise_top(f, mft_top=mlid) if ports else None
        return sr, fdbapply.Plan(tops=[top] if top else [], mft=mfttab.plan_mft_set(f, mlid, ports, current)), []

    sr, plan, problems = work()
    if problems:
        _bad(problems)
    _write_planned(obj, sr, plan, dry_run, as_json, plan.lines(), mfttab.mft_changes_json(plan.mft, mlid),
                   {"switchinfo": len(plan.tops), "mft_blocks": len(plan.mft)})
