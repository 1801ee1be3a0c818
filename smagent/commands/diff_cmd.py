"""`smagent diff BASELINE`: what differs between the fabric and a snapshot or a plan's JSON."""
from __future__ import annotations

import sys

import click

from smagent.commands.common import emit_json
from smagent.errors import EXIT_DEFECTS


@click.command()
@click.argument("baseline", type=click.Path(dir_okay=False))
@click.option("--mft-blocks", type=click.IntRange(1, 512), default=2, show_default=True,
              help="MFT blocks of 32 MLIDs compared on every switch, from 0xC000 (more up to its MulticastFDBTop).")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON document: the differences as records (table, node, where, baseline, now).")
@click.pass_obj
def diff(obj, baseline, mft_blocks, as_json):
    """List every difference between the fabric and BASELINE, table by table: a snapshot
    (`smagent snapshot`), or the JSON of `smagent plan --json` (then: what the fabric does not
    hold of that plan). `--transport replay --fixture SNAPSHOT` compares a snapshot instead of
    the fabric. Gets only. Exit 0: no difference; 1: differences."""
    d = obj.session().diff(baseline, mft_blocks=mft_blocks)
    if as_json:
        emit_json(d.as_json())
    else:
        for line in d.lines():
            click.echo(line)
        counts = ", ".join(f"{k} {v}" for k, v in d.by_table().items())
        click.echo(f"# {len(d.records)} difference{'s' if len(d.records) != 1 else ''} from {baseline}"
                   + (f" ({counts})" if counts else ""), err=True)
    if not d.ok:
        sys.exit(EXIT_DEFECTS)
