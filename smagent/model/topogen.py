"""Generators for common fabric shapes, deterministic and ibsim-friendly.

Every generator adds the hosts first, so host ``H0`` is the first node of
the fabric and of any net file written from it: ibsim attaches its SM port
(and every client started without ``SIM_HOST``) to the first node's first
port, and an SM belongs on a host, not on a switch's port 0. Switches
follow, then links are made in a fixed order, so the same arguments always
give the same file.

Names are short and stable: ``H<n>`` hosts (single-port CAs), ``L<n>``
leaf/edge switches, ``A<n>`` aggregation switches, ``S<n>`` spine/core
switches, ``T<x>_<y>`` grid switches. Hosts use port 1; switch port
layouts are documented per generator so tests and routing can rely on
them.
"""
from __future__ import annotations

from smagent.errors import BadInput
from smagent.model.fabric import HCA, SWITCH, Fabric

__all__ = ["fat_tree_2", "fat_tree_3", "torus_2d", "mesh_2d", "dragonfly_plus", "two_switch", "variant"]


def _even_radix(k: int) -> int:
    if not isinstance(k, int) or k < 2 or k % 2 or k > 254:
        raise BadInput(f"switch radix k must be an even integer in 2..254, got {k!r}")
    return k // 2


def _hosts(fabric: Fabric, count: int, ports: int = 1) -> None:
    for h in range(count):
        fabric.add_node(name=f"H{h}", node_type=HCA, num_ports=ports)


def _switches(fabric: Fabric, prefix: str, count: int, ports: int) -> None:
    for i in range(count):
        fabric.add_node(name=f"{prefix}{i}", node_type=SWITCH, num_ports=ports)


def fat_tree_2(k: int) -> Fabric:
    """Two-level fat tree (leaf/spine) of k-port switches, full bisection.

    k leaves ``L0..`` each carry k/2 hosts on ports 1..k/2 and one uplink
    to every one of the k/2 spines ``S0..`` on ports k/2+1..k (leaf i port
    k/2+1+j <-> spine j port i+1). Hosts ``H0..`` go in leaf order.
    k=36: 36 leaves, 18 spines, 648 hosts, 1296 links.
    """
    half = _even_radix(k)
    f = Fabric()
    _hosts(f, k * half)
    _switches(f, "L", k, k)
    _switches(f, "S", half, k)
    for leaf in range(k):
        for h in range(half):
            f.connect(f"H{leaf * half + h}", 1, f"L{leaf}", h + 1)
    for leaf in range(k):
        for s in range(half):
            f.connect(f"L{leaf}", half + 1 + s, f"S{s}", leaf + 1)
    return f


def fat_tree_3(k: int, hosts: int | None = None) -> Fabric:
    """Three-level k-ary fat tree (k pods), optionally cut to `hosts` hosts.

    Pod p has k/2 leaves and k/2 aggregation switches; leaf ``L(p*k/2+e)``
    carries hosts on ports 1..k/2 and reaches every aggregation switch of
    its pod on ports k/2+1..k (leaf e port k/2+1+a <-> agg a port e+1).
    Aggregation switch ``A(p*k/2+a)`` reaches cores ``S(a*k/2+c)`` on
    ports k/2+1..k; core ports are indexed by pod (core port p+1 <-> pod
    p). Full size: k^3/4 hosts and 5k^2/4 switches (k=36: 11,664 hosts,
    1,620 switches).

    With `hosts`, only hosts ``H0..H(hosts-1)`` are built, filling leaves
    and pods in order, and switches nothing would use are pruned: leaves
    without hosts, aggregation switches when a single leaf remains, cores
    when a single pod remains. Used pods keep all their aggregation
    switches and all cores are kept once two pods are in use, so the cut
    fabric keeps full bisection between the hosts it has.
    """
    half = _even_radix(k)
    total = k * half * half
    if hosts is None:
        hosts = total
    if not isinstance(hosts, int) or not 1 <= hosts <= total:
        raise BadInput(f"hosts must be in 1..{total} for k={k}, got {hosts!r}")
    leaves = -(-hosts // half)  # ceil: leaves in use, numbered globally
    pods = -(-leaves // half)
    use_aggs = leaves > 1
    use_cores = pods > 1

    f = Fabric()
    _hosts(f, hosts)
    _switches(f, "L", leaves, k)
    if use_aggs:
        _switches(f, "A", pods * half, k)
    if use_cores:
        _switches(f, "S", half * half, k)
    for h in range(hosts):
        f.connect(f"H{h}", 1, f"L{h // half}", h % half + 1)
    if use_aggs:
        for leaf in range(leaves):
            pod, e = divmod(leaf, half)
            for a in range(half):
                f.connect(f"L{leaf}", half + 1 + a, f"A{pod * half + a}", e + 1)
    if use_cores:
        for agg in range(pods * half):
            pod, a = divmod(agg, half)
            for c in range(half):
                f.connect(f"A{agg}", half + 1 + c, f"S{a * half + c}", pod + 1)
    return f


def _grid(x: int, y: int, hosts_per_switch: int, switch_ports: int, wrap: bool) -> Fabric:
    for name, v in (("x", x), ("y", y)):
        if not isinstance(v, int) or v < 1:
            raise BadInput(f"{name} must be a positive integer, got {v!r}")
    if not isinstance(hosts_per_switch, int) or hosts_per_switch < 0:
        raise BadInput(f"hosts_per_switch must be >= 0, got {hosts_per_switch!r}")
    need = hosts_per_switch + 4
    if not isinstance(switch_ports, int) or not need <= switch_ports <= 254:
        raise BadInput(
            f"switch_ports must be in {need}..254: {hosts_per_switch} host ports + 4 grid ports, "
            f"got {switch_ports!r}"
        )
    east, west, north, south = (hosts_per_switch + i for i in range(1, 5))
    f = Fabric()
    _hosts(f, x * y * hosts_per_switch)
    for j in range(y):
        for i in range(x):
            f.add_node(name=f"T{i}_{j}", node_type=SWITCH, num_ports=switch_ports)
    for j in range(y):
        for i in range(x):
            base = (j * x + i) * hosts_per_switch
            for h in range(hosts_per_switch):
                f.connect(f"H{base + h}", 1, f"T{i}_{j}", h + 1)
    for j in range(y):
        for i in range(x):
            # a dimension of size 1 has no links; size 2 wrapped gives two parallel links
            if x > 1 and (wrap or i + 1 < x):
                f.connect(f"T{i}_{j}", east, f"T{(i + 1) % x}_{j}", west)
            if y > 1 and (wrap or j + 1 < y):
                f.connect(f"T{i}_{j}", north, f"T{i}_{(j + 1) % y}", south)
    return f


def torus_2d(x: int, y: int, hosts_per_switch: int = 1, switch_ports: int = 8) -> Fabric:
    """x-by-y 2-D torus of switches ``T<i>_<j>``, hosts on ports 1..h.

    Grid ports follow the hosts: h+1 east (+x), h+2 west, h+3 north (+y),
    h+4 south; switch i's east port is cabled to the west port of switch
    (i+1) mod x, and likewise north to south. Links: x*y*h host links plus
    x*y per dimension longer than 1.
    """
    return _grid(x, y, hosts_per_switch, switch_ports, wrap=True)


def mesh_2d(x: int, y: int, hosts_per_switch: int = 1, switch_ports: int = 8) -> Fabric:
    """x-by-y 2-D mesh: `torus_2d` without the wrap-around links, same ports.

    Links: x*y*h host links plus (x-1)*y + x*(y-1) grid links.
    """
    return _grid(x, y, hosts_per_switch, switch_ports, wrap=False)


def dragonfly_plus(groups: int, leaves: int = 2, spines: int = 2, hosts_per_leaf: int = 2,
                   switch_ports: int | None = None) -> Fabric:
    """Dragonfly+: ``groups`` groups, each a 2-level tree of ``leaves`` leaves and ``spines``
    spines (every leaf cabled to every spine of its group), groups joined by global cables
    between spines: spine j of every group is cabled once to spine j of every other group
    (so each pair of groups has ``spines`` global cables, one per spine plane).

    Group g has leaves ``L<g*leaves+i>`` and spines ``S<g*spines+j>``. A leaf carries its
    hosts on ports 1..h and spine j on port h+1+j; a spine carries leaf i of its group on
    port i+1 and the other groups' spines on ports leaves+1.. in group order. Hosts ``H0..``
    go in leaf order. ``switch_ports``: default the fewest that fit, rounded up to even.
    groups=4, leaves=2, spines=2, h=2: 16 switches, 16 hosts, 16 + 16 + 12 links.
    """
    for name, v, lo in (("groups", groups, 2), ("leaves", leaves, 1), ("spines", spines, 1),
                        ("hosts_per_leaf", hosts_per_leaf, 1)):
        if not isinstance(v, int) or v < lo:
            raise BadInput(f"dragonfly_plus: {name} must be an integer >= {lo}, got {v!r}")
    need = max(hosts_per_leaf + spines, leaves + groups - 1)
    ports = switch_ports if switch_ports is not None else need + need % 2
    if not isinstance(ports, int) or not need <= ports <= 254:
        raise BadInput(f"dragonfly_plus: switches need {need}..254 ports (hosts + spines on a leaf, "
                       f"leaves + other groups on a spine), got {switch_ports!r}")
    f = Fabric()
    _hosts(f, groups * leaves * hosts_per_leaf)
    _switches(f, "L", groups * leaves, ports)
    _switches(f, "S", groups * spines, ports)
    for leaf in range(groups * leaves):
        for h in range(hosts_per_leaf):
            f.connect(f"H{leaf * hosts_per_leaf + h}", 1, f"L{leaf}", h + 1)
    for g in range(groups):
        for i in range(leaves):
            for j in range(spines):
                f.connect(f"L{g * leaves + i}", hosts_per_leaf + 1 + j, f"S{g * spines + j}", i + 1)
    for a in range(groups):
        for b in range(a + 1, groups):
            for j in range(spines):  # spine j: port leaves+1+k is its k-th other group
                f.connect(f"S{a * spines + j}", leaves + 1 + b - 1, f"S{b * spines + j}", leaves + 1 + a)
    return f


def two_switch() -> Fabric:
    """ibsim's ``net-examples/net.2sw2path4hca``: two 8-port switches joined
    by two cables (ports 3 and 5), two 2-port HCAs on each (port 1 used).

    Equal (as a Fabric) to that file loaded; the only difference is node
    order: ``Hca1`` comes first, so ibsim attaches the SM to a host rather
    than to Switch1's port 0 as the original file does.
    """
    f = Fabric()
    for h in range(1, 5):
        f.add_node(name=f"Hca{h}", node_type=HCA, num_ports=2)
    for s in (1, 2):
        f.add_node(name=f"Switch{s}", node_type=SWITCH, num_ports=8)
    f.connect("Hca1", 1, "Switch1", 1)
    f.connect("Hca3", 1, "Switch1", 2)
    f.connect("Hca2", 1, "Switch2", 1)
    f.connect("Hca4", 1, "Switch2", 2)
    f.connect("Switch1", 3, "Switch2", 3)
    f.connect("Switch1", 5, "Switch2", 5)
    return f


def variant(fabric: Fabric, drop_nodes=(), drop_links=(), dual=()) -> Fabric:
    """A damaged copy of ``fabric``: without the nodes ``drop_nodes`` (names) and the
    links ``drop_links`` (pairs of (node, port) ends, either order), plus dual-port hosts
    ``dual``: (name, (switch, port), (switch, port)) cabled on ports 1 and 2 to switch
    ports that the drops freed. Node order is kept, new hosts last."""
    f = Fabric()
    for n in fabric:
        if n.name not in drop_nodes:
            f.add_node(name=n.name, node_type=n.node_type, num_ports=n.num_ports)
    for name, _a, _b in dual:
        f.add_node(name=name, node_type=HCA, num_ports=2)
    drop = {frozenset(x) for x in drop_links}
    for a, b in fabric.links():
        if a.node in drop_nodes or b.node in drop_nodes or frozenset([tuple(a), tuple(b)]) in drop:
            continue
        f.connect(a.node, a.num, b.node, b.num)
    for name, (s1, p1), (s2, p2) in dual:
        f.connect(name, 1, s1, p1)
        f.connect(name, 2, s2, p2)
    return f


def damaged_fat_tree_2() -> Fabric:
    """A damaged 2-level tree (the irregular case deadlock-free routing is checked on):
    fat_tree_2(8) without three hosts and a spine link, with a dual-port host across two
    leaves, and a switch X hanging under leaf L0 (on a freed host port) with two hosts."""
    f = variant(fat_tree_2(8), drop_nodes={"H1", "H6", "H8"}, drop_links=[(("L1", 5), ("S0", 2))],
                dual=[("D0", ("L1", 3), ("L2", 1))])
    f.add_node(name="X", node_type=SWITCH, num_ports=8)
    for h in ("XH0", "XH1"):
        f.add_node(name=h, node_type=HCA, num_ports=1)
    f.connect("X", 8, "L0", 2)
    f.connect("XH0", 1, "X", 1)
    f.connect("XH1", 1, "X", 2)
    return f
