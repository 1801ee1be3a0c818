"""dfsssp: every pair routed, no credit loop on any VL (checked here from the tables and
the SLs, independently of the engine and of verify), the VLs within what ports run,
balance against minhop."""
import pytest

from smagent import routing, topogen
from smagent.fabric import HCA, SWITCH
from smagent.routing import RoutingError, RoutingInput


def damaged_tree():
    """fat_tree_2(8) without a host, a spine link and with a dual-port host across two
    leaves, and a switch X hanging under leaf L0 (on the freed host port) with two hosts."""
    f = topogen.variant(topogen.fat_tree_2(8), drop_nodes={"H1", "H6", "H8"},
                        drop_links=[(("L1", 5), ("S0", 2))], dual=[("D0", ("L1", 3), ("L2", 1))])
    f.add_node(name="X", node_type=SWITCH, num_ports=8)
    for h in ("XH0", "XH1"):
        f.add_node(name=h, node_type=HCA, num_ports=1)
    f.connect("X", 8, "L0", 2)
    f.connect("XH0", 1, "X", 1)
    f.connect("XH1", 1, "X", 2)
    return f


FABRICS = {
    "torus": lambda: topogen.torus_2d(5, 3, 2),
    "mesh": lambda: topogen.mesh_2d(4, 3, 2),
    "ft3": lambda: topogen.fat_tree_3(4),
    "damaged_tree": damaged_tree,
    "ring": lambda: topogen.torus_2d(6, 1, 1),
}


def walk(rin, routes, src, lid):
    """The switch channels (switch, out port) from source switch ``src`` to ``lid``."""
    nb = {(g, p): g2 for g in rin.switches for p, g2 in rin.adjacency[g]}
    home, home_port = rin.lid_homes[lid]
    g, chain = src, []
    for _ in range(len(rin.switches) + 1):
        p = routes[g].ports[lid]
        assert p != 0xFF, f"no route from {rin.name(g)} to LID {lid}"
        if g == home:
            assert p == home_port
            return chain
        chain.append((g, p))
        g = nb[(g, p)]
    raise AssertionError(f"routing loop from {rin.name(src)} to LID {lid}")


def vl_cycle(rin, routes, sls=None):
    """A cycle in the dependency graph of (channel, VL) from every CA-carrying switch to
    every LID, SL n on VL n (None: every path on VL 0); None if acyclic. Own DFS."""
    sources = sorted({g for g, p in rin.lid_homes.values() if p})
    deps: dict = {}
    for lid in rin.lid_homes:
        for s in sources:
            vl = sls[s][lid] if sls else 0
            chain = walk(rin, routes, s, lid)
            for a, b in zip(chain, chain[1:]):
                deps.setdefault((a, vl), set()).add((b, vl))
    state: dict = {}
    for start in deps:
        stack = [(start, iter(deps.get(start, ())))]
        if state.get(start):
            continue
        state[start] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return [n for n, _ in stack]
            elif not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, iter(deps.get(nxt, ()))))
    return None


def link_loads(rin, routes):
    """Routes (CA source switch, CA LID) per switch channel, counting each CA port."""
    ca = {}
    for g, p in rin.lid_homes.values():
        if p:
            ca[g] = ca.get(g, 0) + 1
    load: dict = {}
    for lid, (g, p) in rin.lid_homes.items():
        if not p:
            continue
        for s, n in ca.items():
            for c in walk(rin, routes, s, lid):
                load[c] = load.get(c, 0) + n
    return load


@pytest.mark.parametrize("name", sorted(FABRICS))
def test_dfsssp_routes_every_pair_without_a_credit_loop_on_any_vl(name):
    rin = RoutingInput.from_fabric(FABRICS[name](), lmc=1 if name == "mesh" else 0)
    routes = routing.route("dfsssp", rin)
    assert routes.sls is not None and 1 <= routes.layers <= 8
    assert max(max(v) for v in routes.sls.values()) < routes.layers
    assert vl_cycle(rin, routes, routes.sls) is None  # also: every pair routed, no loop
    if name in ("torus", "mesh", "ring"):  # the check can fail: shortest paths alone loop
        assert vl_cycle(rin, routes) is not None
        assert vl_cycle(rin, routing.route("minhop", rin)) is not None


def test_layers_fit_the_vls_the_ports_run_or_the_engine_refuses():
    f = topogen.torus_2d(5, 3, 2)
    rin = RoutingInput.from_fabric(f)
    rin.data_vls = 1
    with pytest.raises(RoutingError, match=r"dfsssp needs 3 virtual lanes .* only 1 data VL"):
        routing.route("dfsssp", rin)
    rin.data_vls = 4
    routes = routing.route("dfsssp", rin)
    assert routes.layers == 4 and vl_cycle(rin, routes, routes.sls) is None
    counts = [0] * 4
    for sl_of in routes.sls.values():
        for lid in rin.lid_homes:
            counts[sl_of[lid]] += 1
    assert min(counts) > 0  # every VL carries paths: the layers are spread


def test_dfsssp_loads_the_hottest_link_no_more_than_minhop_or_updn():
    rin = RoutingInput.from_fabric(topogen.torus_2d(5, 3, 2))
    hot = {e: max(link_loads(rin, routing.route(e, rin)).values()) for e in ("dfsssp", "minhop", "updn")}
    assert hot["dfsssp"] <= hot["minhop"] and hot["dfsssp"] < hot["updn"], hot


def test_the_spec_parser_knows_dfsssp():
    assert routing.parse_spec("DFSSSP").engine == "dfsssp"
    with pytest.raises(RoutingError, match="dfsssp takes no argument"):
        routing.parse_spec("dfsssp:x")
