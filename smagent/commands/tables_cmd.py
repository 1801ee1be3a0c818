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
from smagent import tables

from smagent.tableops import (  # the formats and plans these commands drive
    DestResolver, DumpError, _Problem, apply_tops, check_lft_entry, check_mft_entry,
    dump_portid_str, facts_from_topology, format_lft, format_mft, lft_changes_json, lft_plan_lines, lid_index,
    load_blocks_to_read, master_sm_warning, mft_blocks_to_read, mft_ports, mft_range, parse_lft_dump, plan_load,
    plan_mft_set, portid_str, raise_top, read_lft, read_mft, read_switch, validate_sections,
)
from smagent.commands.common import check_output, emit_json
from smagent.commands.common import bad as _bad, finish_write as _finish_write, int_arg as _int_arg
from smagent.commands.common import parse_target as _parse_target
from smagent.errors import EXIT_FABRIC, BadInput


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
        sr = read_switch(t, target)
        f = sr.facts
        top = f.lft_top
        blocks = read_lft(t, target, list(range(top // fw.LFT_BLOCK_SIZE + 1)))
        return f, top, b"".join(blocks[b] for b in sorted(blocks))

    f, top, table = work()
    if as_json:
        emit_json({"switch": {"guid": f"0x{f.guid:016x}", "description": f.name, "target": target.describe(),
                           "num_ports": f.num_ports},
                "linear_fdb_cap": f.lft_cap, "linear_fdb_top": top,
                "routes": [{"lid": lid, "port": table[lid]} for lid in range(top + 1)
                           if table[lid] <= f.num_ports or dump_all]})
    else:
        click.echo("\n".join(format_lft(portid_str(target), f.guid, f.name, top, table, f.num_ports,
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
    check_output(output)  # before the first SMP

    def work():
        t = obj.transport()
        topo = _discover(t)
        sws = sorted((n for n in topo.switches() if n.switch_info is not None), key=lambda n: (len(n.path), n.path))
        wanted = [(n.guid, n.path, b) for n in sws
                  for b in range(min(n.switch_info.linear_fdb_top, fw.UNICAST_LID_MAX) // fw.LFT_BLOCK_SIZE + 1)]
        got, errors = tables.read_lft_blocks(t, wanted)
        if errors:
            raise _Problem("reading LFTs: " + "; ".join(errors[:5]) + (f" (+{len(errors) - 5} more)" if len(errors) > 5 else ""))
        index = lid_index(topo)
        lines, doc = [], []
        for n in sws:
            top = min(n.switch_info.linear_fdb_top, fw.UNICAST_LID_MAX)
            table = b"".join(got[(n.guid, b)] for b in range(top // fw.LFT_BLOCK_SIZE + 1))
            lines += format_lft(dump_portid_str(n.path), n.guid, n.description, top, table, n.num_ports,
                                dump_all=dump_all, dest=DestResolver(index))
            doc.append({"guid": f"{n.guid:#018x}", "description": n.description,
                        "path": ",".join(map(str, n.path)), "linear_fdb_top": top,
                        "lft": {str(lid): table[lid] for lid in range(top + 1) if table[lid] <= n.num_ports}})
        if as_json:
            import json
            return json.dumps({"switches": doc, "unreachable": topo.unreachable}, indent=2) + "\n", topo
        return "\n".join(lines) + "\n", topo

    text, topo = work()
    if output:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        click.echo(text, nl=False)
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
        with open(file, encoding="utf-8", errors="replace") as fh:
            sections = parse_lft_dump(fh.read(), file)
    except DumpError as e:
        _bad(e.problems)
    except OSError as e:
        raise BadInput(str(e)) from None

    def work():
        t = obj.transport()
        topo = _discover(t)
        facts = facts_from_topology(topo)
        others = {n.guid: n.description for n in topo.nodes.values() if not n.is_switch}
        problems = validate_sections(sections, facts, file, others)
        if problems:
            return None, problems
        current, errors = tables.read_lft_blocks(t, load_blocks_to_read(sections, facts))
        if errors:
            raise _Problem("reading LFTs: " + "; ".join(errors[:5]))
        return plan_load(sections, facts, current), []

    planned, problems = work()
    if problems:
        _bad(problems)
    changes, tops = planned
    plan, changes_json = lft_plan_lines(changes, tops), lft_changes_json(changes, tops)
    sets = {"switchinfo": len(tops), "lft_blocks": len(changes)}
    problems = []
    if not dry_run:
        t = obj.transport()

        def apply():
            p = apply_tops(t, tops)
            _w, p2 = tables.write_lft_blocks(t, changes)
            return p + p2

        problems = apply()
    _finish_write(as_json, dry_run, plan, changes_json, sets, problems, [])


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
        f = sr.facts
        problems = check_lft_entry(f, lid, port)
        if problems:
            return sr, None, None, problems
        block, i = fw.lft_block(lid)
        old = read_lft(t, target, [block])[block]
        new = bytearray(old)
        new[i] = port
        ch = [] if bytes(new) == old else [tables.BlockChange(f.guid, f.name, target, block, old, bytes(new))]
        top = raise_top(f, lft_top=lid) if port != fw.LFT_NO_PORT else None
        return sr, ch, [top] if top else [], []

    sr, changes, tops, problems = work()
    if problems:
        _bad(problems)
    warnings = []
    plan = lft_plan_lines(changes, tops)
    if plan:
        w = master_sm_warning(obj.transport(), sr)
        warnings = [w] if w else []
    problems = []
    if not dry_run and plan:
        t = obj.transport()
        problems = apply_tops(t, tops) + tables.write_lft_blocks(t, changes)[1]
    _finish_write(as_json, dry_run, plan, lft_changes_json(changes, tops),
                  {"switchinfo": len(tops), "lft_blocks": len(changes)}, problems, warnings)


@click.group()
def mft():
    """Multicast forwarding tables: show, set (ibroute -M format)."""


def _read_mft_switch(t, target, *, for_set=False):
    sr = read_switch(t, target, for_set=for_set)
    f = sr.facts
    positions = fw.mft_positions_for(f.num_ports)
    si = f.switch_info
    masks = read_mft(t, target, mft_blocks_to_read(si.multicast_fdb_cap, si.multicast_fdb_top), positions)
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
    first, last = mft_range(si.multicast_fdb_cap, si.multicast_fdb_top)
    if as_json:
        groups = []
        for mlid in range(first, last + 1):
            ports = mft_ports(masks, mlid, positions)
            if ports:
                groups.append({"mlid": f"0x{mlid:04x}", "ports": ports})
        emit_json({"switch": {"guid": f"0x{f.guid:016x}", "description": f.name, "target": target.describe(),
                           "num_ports": f.num_ports},
                "multicast_fdb_cap": si.multicast_fdb_cap, "multicast_fdb_top": si.multicast_fdb_top,
                "positions": positions, "groups": groups})
    else:
        click.echo("\n".join(format_mft(portid_str(target), f.guid, f.name, first, last, masks, positions)))


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
        problems = check_mft_entry(f, mlid, ports)
        if problems:
            return sr, None, None, problems
        positions = fw.mft_positions_for(f.num_ports)
        block, _i = fw.mft_block(mlid)
        current = read_mft(t, target, [block], positions)
        changes = plan_mft_set(f, mlid, ports, current)
        top = raise_top(f, mft_top=mlid) if ports else None
        return sr, changes, [top] if top else [], []

    sr, changes, tops, problems = work()
    if problems:
        _bad(problems)
    plan = [line for tc in tops for line in tc.describe()] + [line for c in changes for line in c.lines()]
    changes_json = [{"switch": c.name, "guid": f"0x{c.switch:016x}", "table": "MFT", "block": c.block,
                     "position": c.position, "mlid": f"0x{mlid:04x}", "old": c.old[fw.mft_block(mlid)[1]],
                     "new": c.new[fw.mft_block(mlid)[1]]} for c in changes]
    warnings = []
    if plan:
        w = master_sm_warning(obj.transport(), sr)
        warnings = [w] if w else []
    problems = []
    if not dry_run and plan:
        t = obj.transport()
        problems = apply_tops(t, tops) + tables.write_mft_units(t, changes)[1]
    _finish_write(as_json, dry_run, plan, changes_json, {"switchinfo": len(tops), "mft_blocks": len(changes)},
                  problems, warnings)
