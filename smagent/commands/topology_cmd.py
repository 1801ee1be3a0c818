"""`smagent topology generate`: common fabric shapes as net files (ibsim and the simulator load them)."""
from __future__ import annotations

import click

from smagent.commands.common import check_output, emit_json


@click.group()
def topology():
    """Topology files (ibsim net-file format, which the simulator and ibsim both load)."""


def _build(shape, radix, hosts, x, y, hosts_per_switch, switch_ports, groups=4, leaves=2, spines=2):
    from smagent.model import topogen
    if shape == "fat-tree-2":
        return topogen.fat_tree_2(radix)
    if shape == "fat-tree-3":
        return topogen.fat_tree_3(radix, hosts=hosts)
    if shape == "torus-2d":
        return topogen.torus_2d(x, y, hosts_per_switch=hosts_per_switch, switch_ports=switch_ports)
    if shape == "mesh-2d":
        return topogen.mesh_2d(x, y, hosts_per_switch=hosts_per_switch, switch_ports=switch_ports)
    if shape == "dragonfly-plus":
        return topogen.dragonfly_plus(groups, leaves, spines, hosts_per_switch,
                                      None if ctx_default(switch_ports) else switch_ports)
    return topogen.two_switch()


def ctx_default(value) -> bool:
    """Was --switch-ports left at its default (dragonfly-plus then sizes its switches)?"""
    from click.core import ParameterSource
    ctx = click.get_current_context(silent=True)
    return ctx is not None and ctx.get_parameter_source("switch_ports") == ParameterSource.DEFAULT


@topology.command("generate")
@click.argument("shape", type=click.Choice(["fat-tree-2", "fat-tree-3", "torus-2d", "mesh-2d", "dragonfly-plus",
                                            "two-switch"]))
@click.option("-k", "--radix", type=click.IntRange(4, 254), default=36, show_default=True,
              help="Switch ports (fat trees).")
@click.option("--hosts", type=click.IntRange(1, None), default=None, help="fat-tree-3: keep this many hosts.")
@click.option("-x", type=click.IntRange(2, 64), default=4, show_default=True, help="torus/mesh: width.")
@click.option("-y", type=click.IntRange(2, 64), default=4, show_default=True, help="torus/mesh: height.")
@click.option("--hosts-per-switch", type=click.IntRange(0, 200), default=1, show_default=True,
              help="torus/mesh: hosts per switch; dragonfly-plus: hosts per leaf.")
@click.option("--groups", type=click.IntRange(2, 254), default=4, show_default=True, help="dragonfly-plus: groups.")
@click.option("--leaves", type=click.IntRange(1, 254), default=2, show_default=True,
              help="dragonfly-plus: leaves per group.")
@click.option("--spines", type=click.IntRange(1, 254), default=2, show_default=True,
              help="dragonfly-plus: spines per group (each cabled to the same spine of every other group).")
@click.option("--switch-ports", type=click.IntRange(4, 254), default=8, show_default=True,
              help="torus/mesh; dragonfly-plus: default the fewest that fit.")
@click.option("--style", type=click.Choice(["ibsim", "ibnetdiscover"]), default="ibsim", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None)
@click.option("--json", "as_json", is_flag=True, help="One JSON document: counts, ibsim's size flags, the file.")
def topology_generate(shape, radix, hosts, x, y, hosts_per_switch, groups, leaves, spines, switch_ports, style, output,
                      as_json):
    """Write a common fabric shape as a net file (print ibsim's -N/-S/-P needs on stderr)."""
    from smagent.model import netfile
    check_output(output)
    fab = _build(shape, radix, hosts, x, y, hosts_per_switch, switch_ports, groups, leaves, spines)
    size = netfile.ibsim_size_args(fab)
    if output:
        netfile.save(fab, output, style=style)
    else:
        text = netfile.dumps(fab, style=style)
    if as_json:
        emit_json({"shape": shape, "switches": len(fab.switches()), "hosts": len(fab.cas()),
                   "links": fab.num_links, "ibsim_args": size, "file": output, "net": None if output else text})
        return
    if not output:
        click.echo(text, nl=False)
    click.echo(f"# {len(fab.switches())} switches, {len(fab.cas())} hosts, {fab.num_links} links"
               + (f"; ibsim needs: {' '.join(size)}" if size else ""), err=True)
