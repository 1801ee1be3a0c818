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

from mad.forwarding import LMC_MAX
from smagent.commands.common import int_arg
from smagent.commands.tables_cmd import FORCE_HELP, allow_defects_option, report_write


@click.group("rft")
def rft_group():
    """Random forwarding tables: show and set entries (for switches that have one)."""


@rft_group.command("show")
@click.argument("switch")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON document: the switch and its valid RFT entries.")
@click.pass_obj
def rft_show(obj, switch, as_json):
    """Print SWITCH's valid RFT entries (SWITCH: LID, DR path, GUID or description)."""
    t = obj.session().rft_show(switch)
    f, si, target = t.switch, t.switch.switch_info, t.target
    if as_json:
        rows = [{"entry": e.entry, "base_lid": e.base_lid, "lmc": e.lmc, "lids": list(e.lids), "port": e.port}
                for e in t.entries]
        click.echo(json.dumps({"switch": {"guid": f"0x{f.guid:016x}", "description": f.name,
                                          "target": target.describe()},
                               "random_fdb_cap": si.random_fdb_cap, "lids_per_port": si.lids_per_port,
                               "default_port": si.default_port, "entries": rows}, indent=2))
        return
    click.echo(f"Random forwarding table of switch {target.describe()} guid 0x{f.guid:016x} ({f.name}): "
               f"RandomFDBCap {si.random_fdb_cap}, LIDsPerPort {si.lids_per_port}, DefaultPort {si.default_port}")
    click.echo("Entry  BaseLid  LMC  Lids           Port")
    for e in t.entries:
        lo, hi = e.lids
        click.echo(f"{e.entry:5d}  0x{e.base_lid:04x}   {e.lmc:3d}  0x{lo:04x}-0x{hi:04x}  {e.port:03d}")
    click.echo(f"{len(t.entries)} valid entries dumped")


@rft_group.command("set")
@click.argument("switch")
@click.argument("lid", callback=int_arg)
@click.argument("port", callback=int_arg)
@click.option("--lmc", type=click.IntRange(0, LMC_MAX), default=0, show_default=True,
              help="The entry covers 2^LMC LIDs from LID (LID must be aligned).")
@click.option("--dry-run", is_flag=True, help="Print the plan; send no Set.")
@click.option("--force", is_flag=True, help=FORCE_HELP)
@allow_defects_option
@click.option("--json", "as_json", is_flag=True,
              help="One JSON document: dry_run, plan, changes, sets sent, planned, problems, warnings, backup, "
                   "plan_defects.")
@click.pass_obj
def rft_set(obj, switch, lid, port, lmc, dry_run, force, allow_defects, as_json):
    """Route LID (and its 2^LMC range) out of PORT on SWITCH; PORT 255 removes the route."""
    r = obj.session().rft_set(switch, lid, port, lmc=lmc, dry_run=dry_run, force=force, allow_defects=allow_defects)
    report_write(obj, r, as_json)
