"""`smagent partitions show`: who is a member of which partition, by port and by
partition: as the ports' P_Key tables hold it (block 0 of every end port), or, with
``--partitions FILE``, as that partitions.conf would make it on this fabric."""
from __future__ import annotations

import click

from smagent.commands.common import emit_json


@click.group()
def partitions():
    """Partitions (P_Keys): show membership; `sweep --partitions FILE` writes them."""


def _read(transport, topo) -> tuple[dict, list[str]]:
    """Block 0 of every end port's P_Key table: (guid, port) -> keys, and what failed."""
    from mad import forwarding as fw
    from mad.attributes import P_KeyTable
    from smagent.fdb.porttables import Want
    from smagent.config.partitions import end_ports
    wants = []
    for (g, p) in sorted(end_ports(topo)):
        n = topo.nodes[g]
        if n.node_info.partition_cap:
            path = n.path if n.is_switch else n.port_paths[p]
            wants.append(((g, p), Want("pkeys", g, n.description, path, fw.pkey_modifier(0), None)))
    tables, problems = {}, []
    for (key, w), rep in zip(wants, transport.execute([w.get() for _k, w in wants])):
        if rep.ok:
            tables[key] = list(rep.value(P_KeyTable).p_keys)
        else:
            problems.append(f"{w.name}: {rep.request.describe()} failed ({rep.error})")
    return tables, problems


@partitions.command("show")
@click.option("--partitions", "partitions_file", type=click.Path(dir_okay=False), default=None,
              help="Show what this partitions.conf would give every end port (nothing is written).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: ports and partitions.")
@click.pass_obj
def show(obj, partitions_file, as_json):
    """Membership by port and by partition (full / limited), read from the ports' P_Key
    tables (block 0), or planned from a partitions FILE."""
    from smagent.config import partitions as partmod
    config = partmod.load(partitions_file) if partitions_file else None  # before any SMP
    session = obj.session()
    topo = session.discover()
    problems: list[str] = []
    if config is not None:
        a = partmod.resolve(config, topo)
        tables, problems = a.ports, a.warnings
    else:
        tables, problems = _read(obj.transport(), topo)
    v = partmod.view(topo, tables, config)
    v["source"] = partitions_file or "fabric"
    v["problems"] = problems
    if as_json:
        emit_json(v)
        return
    click.echo(f"# partitions of {'the P_Key tables' if config is None else partitions_file}: "
               f"{len(v['partitions'])} partitions, {len(v['ports'])} end ports")
    for e in v["partitions"]:
        click.echo(f"{e['pkey']}{' ' + e['name'] if e['name'] else ''}: full {', '.join(e['full']) or '-'}; "
                   f"limited {', '.join(e['limited']) or '-'}")
    for e in v["ports"]:
        keys = ", ".join(f"{k['pkey']} {k['membership']}" for k in e["pkeys"]) or "no P_Key"
        click.echo(f"{e['port']} {e['guid']}: {keys}")
    for p in problems:
        click.echo(f"warning: {p}", err=True)
