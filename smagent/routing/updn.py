"""Up*/down* routing: deadlock-free shortest legal paths on any topology.

Ranks. Every switch gets a rank, its hop distance from the nearest root. A move from x
to a neighbour y is *up* when y's rank is lower, or, at equal rank, when y's GUID is
bigger (OpenSM's tie-break); otherwise it is *down*. That is a strict total order on
switches, so a route that never goes up after it has gone down ("up*, then down*")
cannot close a cycle in the channel dependency graph: order all up channels before all
down channels, up channels by their head's order, down channels by the reverse. Hence
no credit-loop deadlock, whatever the topology (a ring, a torus, a mesh).

Roots. Given (``--routing updn:GUID[,GUID...]``), or chosen per connected piece of the
switch graph by this rule:

1. for every switch, the hop distance to the nearest switch that has a channel adapter
   (a "leaf");
2. if some switch is further than 0 from every leaf, the roots are the switches at the
   greatest such distance: the spines of a 2-level fat tree, the cores of a 3-level one;
3. otherwise (every switch carries CAs, as in a torus with hosts everywhere, or none
   does) a single root: a centre of the switch graph (least eccentricity), ties to the
   lowest GUID.

Routes. For a destination switch d, a switch that can reach d going only down does so,
along a shortest down-only path; any other switch goes up, to a neighbour whose own
route to d is shortest. (A switch that could go down to d but has a shorter path going
up first must not take it: a packet that arrived at it going down would then turn up.)
Among the ports that qualify, LIDs are balanced exactly as minhop balances them
(`smagent.routing._core`).

Switch-to-switch pairs without a legal path. With several roots some exist: spine to
spine in a fat tree (down to a leaf, then up). OpenSM leaves those LIDs unrouted; we
route them along a shortest path through a neighbour that has a route (`extend_routes`).
Only the switch's own port 0 (management) traffic takes such an entry: a legal route
never enters it, so no CA traffic crosses the down-then-up turn and the channel
dependency graph of data traffic stays acyclic (`smagent verify` builds it from CA
traffic for that reason).

Failure. If a switch with CAs has no legal path to some LID (possible with badly placed
roots given by hand), routing fails with a `RoutingError` naming the pair: we never
fall back to another engine (OpenSM silently falls back to minhop).
"""
from __future__ import annotations

from smagent.routing import RoutingError, RoutingInput
from smagent.routing._core import (
    Graph, assign_switch, bits, finish, group_destinations, hop_levels, new_table, next_hop_mask,
)


def parse_roots(text: str, rin: RoutingInput) -> list[int]:
    """``"0x1a,0x1b"`` -> [GUID, ...]; each must be a switch of this fabric."""
    roots, bad = [], []
    for tok in text.replace(";", ",").split(","):
        tok = tok.strip()
        if not tok:
            continue
        try:
            g = int(tok, 0) if tok.lower().startswith("0x") else int(tok, 16)
        except ValueError:
            raise RoutingError(f"updn root {tok!r} is not a GUID (hex, e.g. 0x0002c90300001234)") from None
        if g not in rin.num_ports:
            bad.append(tok)
        roots.append(g)
    if bad:
        raise RoutingError(f"updn root {', '.join(bad)} is not a switch of this fabric")
    if not roots:
        raise RoutingError("--routing updn:GUID[,GUID...]: no root GUID given")
    return roots


def choose_roots(G: Graph, comp: list[int]) -> list[int]:
    """Root switch indices by the rule in the module docstring, per connected piece."""
    leaves = [x for x in range(G.S) if G.ca_lids[x]]
    # multi-source BFS from the leaves: distance to the nearest leaf
    dist = [-1] * G.S
    frontier = list(leaves)
    for x in leaves:
        dist[x] = 0
    while frontier:
        nxt = []
        for x in frontier:
            for y in G.nbrs[x]:
                if dist[y] < 0:
                    dist[y] = dist[x] + 1
                    nxt.append(y)
        frontier = nxt
    roots = []
    for c in sorted(set(comp), key=lambda m: bits(m)[0]):
        members = bits(c)
        far = max(dist[x] for x in members)
        if far > 0:
            roots += [x for x in members if dist[x] == far]
        else:
            roots.append(min(members, key=lambda x: (_eccentricity(G, x, c), G.guids[x])))
    return roots


def _eccentricity(G: Graph, s: int, comp: int) -> int:
    seen, frontier, e = 1 << s, [s], 0
    while frontier:
        nxt = []
        for x in frontier:
            for y in G.nbrs[x]:
                if not seen >> y & 1:
                    seen |= 1 << y
                    nxt.append(y)
        if nxt:
            e += 1
        frontier = nxt
    return e


def ranks(G: Graph, roots: list[int]) -> list[int]:
    rank = [-1] * G.S
    frontier = list(dict.fromkeys(roots))
    for r in frontier:
        rank[r] = 0
    while frontier:
        nxt = []
        for x in frontier:
            for y in G.nbrs[x]:
                if rank[y] < 0:
                    rank[y] = rank[x] + 1
                    nxt.append(y)
        frontier = nxt
    return rank


def route(rin: RoutingInput, roots: list[int] | None = None):
    G = Graph(rin)
    comp = G.components()
    if roots is None:
        root_idx = choose_roots(G, comp)
    else:
        root_idx = [G.index[g] for g in roots]
    rank = ranks(G, root_idx)
    lost = [x for x in range(G.S) if rank[x] < 0]
    if lost:
        names = ", ".join(G.name(x) for x in lost[:5])
        raise RoutingError(f"updn: {len(lost)} switch(es) are not connected to any root ({names}); "
                           f"give a root in every part of the fabric")
    # up = towards a smaller key: lower rank, or equal rank and bigger GUID
    key = [(rank[x], -G.guids[x]) for x in range(G.S)]
    up = [[y for y in G.nbrs[x] if key[y] < key[x]] for x in range(G.S)]
    down = [[y for y in G.nbrs[x] if key[y] > key[x]] for x in range(G.S)]
    # dd[x][k]: destinations x reaches in exactly k down moves (shortest down-only path)
    dd = hop_levels(G.S, down)
    dreach = []
    for lv in dd:
        m = 0
        for v in lv:
            m |= v
        dreach.append(m)
    # rl[x][k]: destinations x reaches by a legal route of k hops. The up-phase part
    # depends on the up-neighbours' routes, so go from the top (smallest key) down.
    rl: list[list[int]] = [[] for _ in range(G.S)]
    for x in sorted(range(G.S), key=lambda i: key[i]):
        lv = list(dd[x])
        rest = comp[x] & ~dreach[x]
        k = 1
        while rest:
            if all(k - 1 >= len(rl[y]) for y in up[x]):
                break
            cand = 0
            for y in up[x]:
                if k - 1 < len(rl[y]):
                    cand |= rl[y][k - 1]
            cand &= rest
            if cand:
                while len(lv) <= k:
                    lv.append(0)
                lv[k] |= cand
                rest &= ~cand
            k += 1
        rl[x] = lv
    legal = []
    for x in range(G.S):
        m = 0
        for v in rl[x]:
            m |= v
        legal.append(m)
    # A switch with CAs must reach every LID legally: its CAs' traffic starts there.
    for x in range(G.S):
        if G.ca_lids[x] and comp[x] & ~legal[x]:
            d = bits(comp[x] & ~legal[x])[0]
            raise RoutingError(
                f"updn cannot route from {G.name(x)} to {G.name(d)}: no up*/down* path with roots "
                f"{', '.join(G.name(r) for r in root_idx[:5])}{' ...' if len(root_idx) > 5 else ''}; "
                f"choose one root, or roots every switch reaches going up (the spines of a fat tree)")
    # Switches without CAs may lack a legal path to another switch (spine to spine when
    # every spine is a root: down to a leaf, then up). Those pairs get a shortest path
    # through a neighbour that has a route. Only the switch's own port 0 (management)
    # traffic takes it: no legal route ever enters such an entry, so no CA traffic
    # crosses the down-then-up turn and the data channel dependency graph stays acyclic.
    ext = extend_routes(G, comp, rl, legal)
    tables = []
    for x in range(G.S):
        port_masks = []
        for y in down[x]:
            port_masks.append((tuple(G.nbr_ports[x][y]), next_hop_mask(dd[x], dd[y])))
        up_only = [v & ~dreach[x] for v in rl[x]]
        for y in up[x]:
            port_masks.append((tuple(G.nbr_ports[x][y]), next_hop_mask(up_only, rl[y])))
        if any(ext[x]):
            for y in G.nbrs[x]:
                ey = [a | b for a, b in _zip_longest(rl[y], ext[y])]
                port_masks.append((tuple(G.nbr_ports[x][y]), next_hop_mask(ext[x], ey)))
        groups = group_destinations(G.all & ~(1 << x), port_masks)
        table = new_table(G)
        missing = assign_switch(G, x, groups, table)
        bad = [d for d in missing if comp[x] >> d & 1]
        if bad:  # cannot happen if the levels above are right; never route half a fabric
            raise RoutingError(f"updn: internal error, no exit from {G.name(x)} towards {G.name(bad[0])}")
        tables.append(table)
    return finish(G, tables)


def _zip_longest(a: list[int], b: list[int]):
    n = max(len(a), len(b))
    return zip(a + [0] * (n - len(a)), b + [0] * (n - len(b)))


def extend_routes(G: Graph, comp: list[int], rl: list[list[int]], legal: list[int]) -> list[list[int]]:
    """``ext[x][k]``: destinations with no legal route from x, reached in k hops through
    neighbours (any direction) that have a route, legal or extended: a unit-weight
    shortest-path relaxation, level by level, over the pairs that need it."""
    rest = [comp[x] & ~legal[x] & ~(1 << x) for x in range(G.S)]
    ext: list[list[int]] = [[] for _ in range(G.S)]
    if not any(rest):
        return ext
    limit = max(len(v) for v in rl) + G.S + 1
    k = 1
    while any(rest) and k <= limit:
        new = [0] * G.S
        for x in range(G.S):
            r = rest[x]
            if not r:
                continue
            c = 0
            for y in G.nbrs[x]:
                if k - 1 < len(rl[y]):
                    c |= rl[y][k - 1]
                if k - 1 < len(ext[y]):
                    c |= ext[y][k - 1]
            new[x] = c & r
        for x in range(G.S):
            if new[x]:
                while len(ext[x]) <= k:
                    ext[x].append(0)
                ext[x][k] |= new[x]
                rest[x] &= ~new[x]
        k += 1
    return ext
