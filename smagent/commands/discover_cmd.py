"""`smagent discover`: the fabric by directed route, as ibnetdiscover prints it (or JSON)."""
from __future__ import annotations

import json
import sys

import click

from smagent import render
from smagent.commands.common import check_output, write_output
from smagent.errors import EXIT_FABRIC


@click.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON document: nodes, ports, links.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write to FILE instead of stdout.")
@click.pass_obj
def discover(obj, as_json, output):
    """Discover the fabric by directed route; print it as ibnetdiscover does."""
    from smagent import discovery, netfile
    check_output(output)
    topo = obj.session().discover()
    if as_json:
        text = json.dumps(topology_json(topo), indent=2) + "\n"
    else:
        text = netfile.dumps(discovery.to_fabric(topo), style="ibnetdiscover")
    if output:
        write_output(output, text)
    else:
        click.echo(text, nl=False)
    for u in topo.unreachable:
        click.echo(f"warning: unreachable: {u}", err=True)
    if topo.unreachable:
        sys.exit(EXIT_FABRIC)


def _peer(topo, guid, port):
    pe = topo.links.get((guid, port))
    return None if pe is None else {"guid": f"{pe[0]:#018x}", "port": pe[1]}


def topology_json(topo) -> dict:
    nodes = []
    for n in topo.nodes.values():
        nodes.append({
            "guid": f"{n.guid:#018x}", "type": "switch" if n.is_switch else "ca", "description": n.description,
            "num_ports": n.num_ports, "path": ",".join(map(str, n.path)),
            "ports": {str(p): {"lid": pi.lid, "lmc": pi.lmc, "port_state": pi.port_state,
                               "port_physical_state": pi.port_physical_state,
                               "guid": f"{n.port_guids[p]:#018x}" if p in n.port_guids else None,
                               "peer": _peer(topo, n.guid, p)}
                      for p, pi in sorted(n.ports.items())},
            "switch_info": render.jsonable(n.switch_info) if n.switch_info else None,
        })
    return {"local": {"guid": f"{topo.local[0]:#018x}", "port": topo.local[1]}, "nodes": nodes,
            "links": topo.num_links(), "smps": topo.smps, "unreachable": topo.unreachable}
