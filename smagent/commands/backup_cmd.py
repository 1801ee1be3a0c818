"""`smagent lft backup` and `smagent lft restore`: save every switch's LFT, write it back.

    smagent lft backup -o tables.dump     # dump_lfts format (also what `lft load` reads)
    smagent lft restore tables.dump --dry-run
    smagent lft restore lft-before-....json   # saved before an apply (smagent.fdb.backup)

The commands are attached to the existing `lft` group (smagent.commands.tables_cmd);
`backup_commands` is what smagent.cli registers.
"""
from __future__ import annotations

import click

from smagent import paths, render
from smagent.commands import tables_cmd as tc
from smagent.commands.common import bad, check_output, finish_write, write_output
from smagent.errors import EXIT_FABRIC
from smagent.fdb import backup
from smagent.fdb.text import DumpError, parse_lft_dump

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
    text, topo = backup.backup_lfts(obj.transport())
    for u in topo.unreachable:
        click.echo(f"warning: unreachable: {u}", err=True)
    if output:
        write_output(output, text)
        click.echo(f"# saved {render.count(len(topo.switches()), 'switch')} to {output}", err=True)
    if as_json:
        import json
        click.echo(json.dumps({"switches": len(topo.switches()), "file": output,
                               "text": None if output else text, "unreachable": topo.unreachable}, indent=2))
    elif not output:
        click.echo(text, nl=False)
    if topo.unreachable:
        raise SystemExit(EXIT_FABRIC)


@click.command("restore")
@click.argument("file", type=click.Path(dir_okay=False, exists=True))
@click.option("--dry-run", is_flag=True, help="Print the plan; send no Set.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def lft_restore(obj, file, dry_run, as_json):
    """Write back a backup: an `lft backup`/`lft dump`/dump_lfts file (each switch's whole
    table) or a block file saved before an apply (only those blocks). Only blocks that
    differ are written; every problem with the file is reported before anything is sent."""
    text = paths.read_text(file, "backup", errors="replace")
    is_blocks = text.lstrip().startswith("{")
    if is_blocks:
        saved = backup.load_backup(file)
    else:
        try:  # parse before the first SMP: a file that does not parse sends nothing
            parse_lft_dump(text, file)
        except DumpError as e:
            bad(e.problems)

    def work():
        t = obj.transport()
        if is_blocks:
            return backup.plan_restore_saved(t, saved)
        return backup.plan_restore_text(t, text, file)

    plan, problems = work()
    if problems:
        bad(problems)
    problems = []
    if not dry_run and plan:
        problems, _saved = tc._apply(obj, plan)
    # a restore is not a full undo: say what it leaves as the sweep made it
    warnings = [f"note: {backup.CANNOT_UNDO}"] if is_blocks else []
    finish_write(as_json, dry_run, plan.lines(), plan.to_json(), plan.sets(), problems, warnings)


tc.lft.add_command(lft_backup)
tc.lft.add_command(lft_restore)

# what smagent.cli adds to `main`: nothing new at the top level (both live under `lft`)
backup_commands: list = []
