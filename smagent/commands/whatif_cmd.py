"""`smagent whatif --fail NODE|NODE[PORT] ... [--from SNAPSHOT]`: what a failure would do,
offline (`smagent.verify.whatif`)."""
from __future__ import annotations

import click

from smagent.commands.common import emit_json


@click.command()
@click.option("--fail", "fail", multiple=True, metavar="NODE|NODE[PORT]", required=True,
              help="What fails: a node (name, GUID, LID or DR path, as targets are named), or NODE[PORT] for the "
                   "cable on that port. Repeat for several.")
@click.option("--from", "snapshot", type=click.Path(dir_okay=False, exists=True), default=None, metavar="SNAPSHOT",
              help="The fabric as a snapshot recorded by `smagent snapshot` (default: the --transport's fabric, "
                   "which must be the simulator or a replay: whatif sends no SMP).")
@click.option("--routing", "engine", default=None, help="The engine to route with (default: the sweep's).")
@click.option("--json", "as_json", is_flag=True, help="One JSON document.")
@click.pass_obj
def whatif(obj, fail, snapshot, engine, as_json):
    """What losing switches, hosts or cables would do under the active engine: host pairs
    lost, pairs rerouted, the hottest link before and after, credit loops. Two plans
    computed offline, no SMP sent. Exit 0 whatever it finds; 2 on bad input."""
    if snapshot is not None:
        from smagent import api
        session = api.connect("replay", fixture=snapshot)
    else:
        session = obj.session()
    w = session.whatif(list(fail), routing=engine)
    if as_json:
        emit_json(w.as_json())
    else:
        click.echo("\n".join(w.lines()))
