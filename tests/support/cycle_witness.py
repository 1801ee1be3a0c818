"""The tests' own cycle finder for dependency graphs (an independent witness: it shares
no code with `smagent.routing.cycles`, which dfsssp and verify use), and the tests' own
walk of routes over a `RoutingInput`: every pair routed, credit loops per VL, link loads."""


def graph_cycle(deps: dict) -> list | None:
    """A cycle of ``deps`` ({node: set of nodes it depends on}) as the nodes on the DFS
    stack when it closed, or None if the graph is acyclic. Iterative three-colour DFS."""
    state: dict = {}
    for start in deps:
        if state.get(start):
            continue
        state[start] = 1
        stack = [(start, iter(deps[start]))]
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
    return graph_cycle(deps)


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
