"""`smagent discover`: the fabric by directed route, as ibnetdiscover prints it (or JSON)."""
from __future__ import annotations

import json
import sys

import click

from smagent.commands import render
from smagent.commands.common import check_output, write_output
from smagent.errors import EXIT_FABRIC

DEGRADED_SHOWN = 5  # degraded links named on stderr; --json has every one


@click.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON document: nodes, ports, links.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write to FILE instead of stdout.")
@click.pass_obj
def discover(obj, as_json, output):
    """Discover the fabric by directed route; print it as ibnetdiscover does."""
    from smagent import discovery
    from smagent.model import netfile
    check_output(output)
    topo = obj.session().discover()
    degraded = discovery.degraded_links(topo)
    if as_json:
        text = json.dumps(render.topology_dict(topo, degraded), indent=2) + "\n"
    else:
        text = netfile.dumps(discovery.to_fabric(topo), style="ibnetdiscover")
    if output:
        write_output(output, text)
    else:
        click.echo(text, nl=False)
    for a, pa, b, pb, why in degraded[:DEGRADED_SHOWN]:
        click.echo(f"warning: degraded link {a.description}[{pa}] <-> {b.description}[{pb}]: {', '.join(why)}",
                   err=True)
    if len(degraded) > DEGRADED_SHOWN:
        click.echo(f"warning: {len(degraded) - DEGRADED_SHOWN} more degraded links (--json lists them all)", err=True)
    for g, p in topo.loopbacks:
        click.echo(f"warning: {topo.nodes[g].description} port {p} is cabled back to itself; not used", err=True)
    for u in topo.unreachable:
        click.echo(f"warning: unreachable: {u}", err=True)
    if topo.unreachable:
        sys.exit(EXIT_FABRIC)
