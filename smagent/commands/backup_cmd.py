"""`smagent lft backup` and `smagent lft restore`: save every switch's LFT, write it back.

    smagent lft backup -o tables.dump     # dump_lfts format (also what `lft load` reads)
    smagent lft restore tables.dump --dry-run
    smagent lft restore lft-before-....json   # saved before an apply (smagent.fdb.backup), link tables too

The commands are attached to the existing `lft` group (smagent.commands.tables_cmd);
`lft` here is that group with them, what smagent.cli registers.
"""
from __future__ import annotations

import json

import click

from smagent.commands import render
from smagent.commands import tables_cmd as tc
from smagent.commands.common import check_output, write_output
from smagent.errors import EXIT_FABRIC

# BackupError is a BadInput (exit 2), RestoreFailed a FabricFailure (exit 3)


@click.command("backup")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write to FILE instead of stdout.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document: where it went, or the text itself.")
@click.pass_obj
def lft_backup(obj, output, as_json):
    """Save every switch's LFT in the `lft dump` format (restore with `lft restore`)."""
    if output:
        check_output(output)  # before the first SMP
    s = obj.session()
    text = s.lft_backup()
    topo = s.topology
    tc.warn_unreachable(topo)
    # a switch without an LFT (LinearFDBCap 0, RFT only) has nothing to save here
    saved = sum(1 for n in topo.switches() if n.switch_info is not None and n.switch_info.linear_fdb_cap)
    if output:
        write_output(output, text)
        click.echo(f"# saved {render.count(saved, 'switch')} to {output}", err=True)
    if as_json:
        click.echo(json.dumps({"switches": saved, "file": output,
                               "text": None if output else text, "unreachable": topo.unreachable}, indent=2))
    elif not output:
        click.echo(text, nl=False)
    if topo.unreachable:
        raise SystemExit(EXIT_FABRIC)


@click.command("restore")
@click.argument("file", type=click.Path(dir_okay=False, exists=True))
@click.option("--dry-run", is_flag=True, help="Print the plan; send no Set.")
@click.option("--force", is_flag=True, help=tc.FORCE_HELP)
@click.option("--json", "as_json", is_flag=True,
              help="One JSON document: dry_run, plan, changes, sets sent, planned, problems, warnings.")
@click.pass_obj
def lft_restore(obj, file, dry_run, force, as_json):
    """Write back a backup: an `lft backup`/`lft dump`/dump_lfts file (each switch's whole
    table) or a file saved before an apply (only what it overwrote: LFT/MFT/RFT blocks,
    SwitchInfo fields, SL2VL/VLArb/P_Key tables). Only what differs is written; every
    problem with the file is reported before anything is sent."""
    tc.report_write(obj, obj.session().lft_restore(file, dry_run=dry_run, force=force), as_json)


tc.lft.add_command(lft_backup)
tc.lft.add_command(lft_restore)

# what smagent.cli adds to `main`: nothing new at the top level (both live under `lft`)
lft = tc.lft
