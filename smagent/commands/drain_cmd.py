"""`smagent drain NODE|NODE[PORT] ...`: route around what is to be taken out, in an order
that breaks no pair in flight, and prove no entry leads into it (`smagent.sweep.drain`)."""
from __future__ import annotations

import sys

import click

from smagent.commands.common import emit_json
from smagent.errors import EXIT_DEFECTS


@click.command()
@click.argument("targets", nargs=-1, required=True, metavar="NODE|NODE[PORT]...")
@click.option("--routing", "engine", default=None, help="The engine to route with (default: the sweep's).")
@click.option("--dry-run", is_flag=True, help="Plan and check only: what would be rerouted; no Set.")
@click.option("--force", is_flag=True, help="Drain even if another SM is MASTER.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document: what was drained, Sets, entries left.")
@click.pass_obj
def drain(obj, targets, engine, dry_run, force, as_json):
    """Take switches, hosts or cables (NODE[PORT]: the cable on that port) out of the routes:
    every pair is routed around them with the engine, the new tables written so that no pair
    routable before and after breaks meanwhile, then every switch's tables are read back.
    Exit 0: no LFT or MFT entry leads into them, safe to remove; 1: entries still do (listed);
    4: the drain would cut off other hosts (refused, nothing sent); 2 bad input."""
    r = obj.session().drain(list(targets), routing=engine, dry_run=dry_run, force=force)
    if as_json:
        emit_json(r.as_json())
    else:
        click.echo("\n".join(r.lines()))
    if r.entries_left:
        sys.exit(EXIT_DEFECTS)
