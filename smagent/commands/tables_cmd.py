"""`smagent lft ...` and `smagent mft ...`: show, dump, load and set forwarding tables.

Text output follows infiniband-diags byte for byte (trailing spaces included), so what
parses ibroute's output parses ours:

* `lft show` prints what ``ibroute SWITCH`` prints, the destinations found by discovery
  (``-n``: ``ibroute -n``, the switch's Gets only; ``-a``: ``ibroute -a``),
* `lft dump` prints what ``dump_lfts`` / ``dump_fts`` print (``--all``: ``-a``), a file
  OpenSM's file routing engine loads (``opensm -R file -U FILE``) and `lft load` reads back,
* `mft show` prints what ``ibroute -M -n SWITCH`` prints.

One deliberate difference: ibroute 44 never reads the block holding LID LinearFDBTop when
the top is a multiple of 64 (``ALIGN(top, 64) / 64`` blocks), so it drops that LID; we read
blocks 0..top//64 and show it (docs/PITFALLS.md).

Every writing command plans first (current state read from the switch, never assumed),
validates everything before the first Set, and with ``--dry-run`` prints the plan and sends
no Set. The GetResp of each Set is the read-back.

`lft set`, `lft load`, `mft set` and `rft set` run the plan check a sweep runs
(`smagent.api.Session.edit_check`: the fabric's tables read whole, as `verify` reads them,
then the edit applied in memory): what the edit would break is refused, exit 4, before
the first Set, unless --allow-defects; a dry run prints it as warnings and exits 1, as
`sweep --dry-run` does; so does a write with --allow-defects that leaves defects. Where
what was overwritten was saved is printed (`# tables overwritten were saved to FILE`;
JSON ``backup``).
"""
from __future__ import annotations

import json
import sys

import click

from mad import forwarding as fw
from smagent.commands.common import check_output, emit_json, finish_write, int_arg, write_output
from smagent.errors import EXIT_DEFECTS, EXIT_FABRIC
from smagent.model import lftdump as text

FORCE_HELP = "Write even if another SM is MASTER (it will overwrite the change on its next re-route)."
ALLOW_DEFECTS_HELP = ("Write even if the edit would break the fabric: a LID sent into a port with no ACTIVE link, a "
                      "loop, a switch's own LID off port 0, pairs delivered today and not after, a credit loop, a "
                      "multicast tree damaged (checked before the first Set on the tables read whole, as `verify` "
                      "checks them; exit 4 without this flag).")


def allow_defects_option(fn):
    return click.option("--allow-defects", is_flag=True, help=ALLOW_DEFECTS_HELP)(fn)


def report_write(obj, r, as_json: bool) -> None:
    """The end of a table-writing command: the plan, what was sent, where the backup went,
    the defects the edit leaves (exit 1: a dry run, or written with --allow-defects),
    problems (exit 3)."""
    for u in r.unreachable:
        click.echo(f"warning: unreachable: {u}", err=True)
    for line in r.plan_defect_lines():
        click.echo(f"warning: planned tables: {line}", err=True)
    extra = {"backup": r.backup_file, "plan_defects": r.plan_defects, **obj.transient_write(r.dry_run)}
    if r.backup_file and not as_json:
        click.echo(f"# tables overwritten were saved to {r.backup_file} (smagent lft restore FILE)")
    finish_write(as_json, r.dry_run, r.plan, r.changes, r.planned, r.problems, r.notes, extra)
    if r.plan_defects:
        sys.exit(EXIT_DEFECTS)


def _switch_json(f, target) -> dict:
    return {"guid": f"0x{f.guid:016x}", "description": f.name, "target": target.describe(), "num_ports": f.num_ports}


@click.group()
def lft():
    """Linear forwarding tables: show, dump, load, set (ibroute / dump_lfts formats)."""


@lft.command("show")
@click.argument("switch")
@click.option("-a", "--all", "dump_all", is_flag=True, help="Every LID up to LinearFDBTop, also invalid ones (ibroute -a).")
@click.option("-n", "--no-dests", is_flag=True,
              help="Leave the Destination column empty, as ibroute -n does: no discovery, only the switch's Gets.")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON document: the switch, LinearFDBTop, every routed LID with its port and destination.")
@click.pass_obj
def lft_show(obj, switch, dump_all, no_dests, as_json):
    """Print SWITCH's LFT as `ibroute` does: each LID's exit port and the port that holds
    the LID (found by discovering the fabric; -n: not). SWITCH: a LID (5, 0x5), a DR path
    (0,1,3), a node GUID or a node description."""
    from smagent import api
    api.check_query("lft", switch)  # a malformed SWITCH is refused before the discovery
    s = obj.session()
    index = None
    if not no_dests:  # first: a SWITCH named by GUID or description is then found on it
        topo = s.discover()
        warn_unreachable(topo)
        index = text.lid_index(topo)
    t = s.lft_show(switch)
    f = t.switch
    if as_json:
        emit_json({"switch": _switch_json(f, t.target), "linear_fdb_cap": f.lft_cap, "linear_fdb_top": t.top,
                   "routes": [{"lid": lid, "port": port, **_destination(index, lid)}
                              for lid, port in t.routes(dump_all).items()]})
    else:
        dest = text.DestResolver(index) if index is not None else None
        click.echo("\n".join(text.format_lft(text.portid_str(t.target), f.guid, f.name, t.top, t.table, f.num_ports,
                                             dump_all=dump_all, dest=dest)))


def _destination(index, lid: int) -> dict:
    """A route's destination for JSON: the port holding the LID (null: none does), or
    nothing at all with -n."""
    if index is None:
        return {}
    ref = index.get(lid)
    if ref is None:
        return {"destination": None}
    return {"destination": {"node_type": text.NODE_TYPE_NAMES.get(ref.node_type, str(ref.node_type)),
                            "port_guid": f"{ref.port_guid:#018x}", "description": ref.description,
                            "base_lid": ref.base_lid, "lmc": ref.lmc}}


def warn_unreachable(topo) -> None:
    for u in topo.unreachable:
        click.echo(f"warning: unreachable: {u}", err=True)


@lft.command("dump")
@click.option("-a", "--all", "dump_all", is_flag=True, help="Also LIDs without a valid port (dump_lfts -a).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write to FILE instead of stdout.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document: every switch's routed LIDs.")
@click.pass_obj
def lft_dump(obj, dump_all, output, as_json):
    """Dump every switch's LFT as dump_lfts does: OpenSM loads it with `-R file -U FILE`."""
    if output:
        check_output(output)  # before the first SMP
    s = obj.session()
    if as_json:
        topo = s.discover()
        warn_unreachable(topo)
        tables, doc = s.read_lfts(topo), []
        for n in text.dump_order(topo):
            top, table = min(n.switch_info.linear_fdb_top, fw.UNICAST_LID_MAX), tables[n.guid]
            doc.append({"guid": f"{n.guid:#018x}", "description": n.description,
                        "path": ",".join(map(str, n.path)), "linear_fdb_top": top,
                        "lft": {str(lid): table[lid] for lid in range(top + 1) if table[lid] <= n.num_ports}})
        out = json.dumps({"switches": doc, "unreachable": topo.unreachable}, indent=2) + "\n"
    else:
        topo = s.discover()
        warn_unreachable(topo)
        out = s.lft_dump(dump_all, topology=topo)
    if output:
        write_output(output, out)
    else:
        click.echo(out, nl=False)
    if topo.unreachable:
        sys.exit(EXIT_FABRIC)


@lft.command("load")
@click.argument("file", type=click.Path(dir_okay=False, exists=True))
@click.option("--dry-run", is_flag=True, help="Print the plan; send no Set.")
@click.option("--force", is_flag=True, help=FORCE_HELP)
@allow_defects_option
@click.option("--json", "as_json", is_flag=True,
              help="One JSON document: dry_run, plan, changes, sets sent, planned, problems, warnings, backup, plan_defects.")
@click.pass_obj
def lft_load(obj, file, dry_run, force, allow_defects, as_json):
    """Load a dump (lft dump, dump_lfts, ibroute) and write only the blocks that differ.

    Each section is its switch's whole table, as OpenSM's file routing engine reads it:
    LIDs it does not list forward nowhere (255). Switches are matched by GUID."""
    report_write(obj, obj.session().lft_load(file, dry_run=dry_run, force=force, allow_defects=allow_defects), as_json)


@lft.command("set")
@click.argument("switch")
@click.argument("lid", callback=int_arg)
@click.argument("port", callback=int_arg)
@click.option("--dry-run", is_flag=True, help="Print the plan; send no Set.")
@click.option("--force", is_flag=True, help=FORCE_HELP)
@allow_defects_option
@click.option("--json", "as_json", is_flag=True,
              help="One JSON document: dry_run, plan, changes, sets sent, planned, problems, warnings, backup, plan_defects.")
@click.pass_obj
def lft_set(obj, switch, lid, port, dry_run, force, allow_defects, as_json):
    """Route LID out of PORT on SWITCH (PORT 255: no route). Raises LinearFDBTop if needed."""
    report_write(obj, obj.session().lft_set(switch, lid, port, dry_run=dry_run, force=force,
                                          allow_defects=allow_defects), as_json)


@click.group()
def mft():
    """Multicast forwarding tables: show, set (ibroute -M format)."""


@mft.command("show")
@click.argument("switch")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON document: the switch and every MLID with its ports.")
@click.pass_obj
def mft_show(obj, switch, as_json):
    """Print SWITCH's MFT as `ibroute -M -n` does: MLIDs with any port set."""
    t = obj.session().mft_show(switch)
    f = t.switch
    si = f.switch_info
    if as_json:
        emit_json({"switch": _switch_json(f, t.target),
                   "multicast_fdb_cap": si.multicast_fdb_cap, "multicast_fdb_top": si.multicast_fdb_top,
                   "positions": t.positions,
                   "groups": [{"mlid": f"0x{mlid:04x}", "ports": ports} for mlid, ports in t.groups().items()]})
    else:
        click.echo("\n".join(text.format_mft(text.portid_str(t.target), f.guid, f.name, t.first, t.last, t.masks,
                                             t.positions)))


@mft.command("set")
@click.argument("switch")
@click.argument("mlid", callback=int_arg)
@click.argument("ports", nargs=-1, callback=int_arg)
@click.option("--dry-run", is_flag=True, help="Print the plan; send no Set.")
@click.option("--force", is_flag=True, help=FORCE_HELP)
@allow_defects_option
@click.option("--json", "as_json", is_flag=True,
              help="One JSON document: dry_run, plan, changes, sets sent, planned, problems, warnings, backup, plan_defects.")
@click.pass_obj
def mft_set(obj, switch, mlid, ports, dry_run, force, allow_defects, as_json):
    """Make PORTS the whole port set of MLID on SWITCH (no PORTS: remove the MLID)."""
    report_write(obj, obj.session().mft_set(switch, mlid, ports, dry_run=dry_run, force=force,
                                          allow_defects=allow_defects), as_json)
