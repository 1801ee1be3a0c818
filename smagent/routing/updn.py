"""Up*/down* routing: deadlock-free shortest legal paths on any topology.

Ranks. Every switch gets a rank, its hop distance from the nearest root. A move from x
to a neighbour y is *up* when y's rank is lower, or, at equal rank, when y's GUID is
bigger (OpenSM's tie-break); otherwise it is *down*. That is a strict total order on
switches, so a route that never goes up after it has gone down ("up*, then down*")
cannot close a cycle in the channel dependency graph: order all up channels before all
down channels, up channels by their head's order, down channels by the reverse. Hence
no credit-loop deadlock, whatever the topology (a ring, a torus, a mesh).

Roots. Given (``--routing updn:GUID[,GUID...]``), or chosen by the first of these rules
(`ROOT_RULES`) under which every switch with channel adapters has an up*/down* route to
every switch, hence every CA to every LID (`auto_plan`):

1. the switches farthest from the switches that carry CAs ("leaves"), per connected
   piece: the spines of a 2-level fat tree, the cores of a 3-level one; where every
   switch carries CAs (a torus with hosts everywhere) or none does, a single root, a
   centre of the switch graph (least eccentricity), ties to the lowest GUID;
2. those of them that are equally far from every leaf: what a damaged fat tree has left
   (a spine that lost a leaf would make that leaf's path to it go down and then up);
3. OpenSM's rule (osm_ucast_updn.c): a switch from which one hop count holds over 90%
   of the CA ports and no other hop count over 5%;
4. one central switch per piece, which always works (up the BFS tree, then down it).

The engine's result notes the roots taken, the rule, and why earlier rules were passed
over: never a silent fallback. (OpenSM tries only its rule, and without roots falls
back to minhop.)

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

from smagent.routing.base import PatchRule, RoutingError, RoutingInput, Routes
from smagent.routing._core import (
    Graph, assign_switch, bits, finish, group_destinations, hop_levels, new_table, next_hop_mask,
)


def check_roots(roots, rin: RoutingInput) -> list[int]:
    """The root GUIDs a spec names (`smagent.routing.parse_spec`), each a switch of this fabric."""
    bad = [f"0x{g:016x}" for g in roots if g not in rin.num_ports]
    if bad:
        raise RoutingError(f"updn root {', '.join(bad)} is not a switch of this fabric")
    return list(roots)


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


def _leaf_hist(G: Graph, x: int) -> list[int]:
    """CA ports by hop count from switch x (as OpenSM's root detection counts them)."""
    hist = []
    for level in G.levels()[x]:
        hist.append(sum(len(G.home_lids[y]) for y in bits(level) if G.home_lids[y]))
    return hist


def complete_tops(G: Graph, comp: list[int]) -> list[int]:
    """Those of `choose_roots`'s switches that are as far from every switch with CAs as
    from the nearest one (a spine still linked to every leaf, a core still reaching every
    pod in two hops): the tops a damaged fat tree has left."""
    out = []
    for x in choose_roots(G, comp):
        hops = [k for k, level in enumerate(G.levels()[x]) if any(G.home_lids[y] for y in bits(level))]
        if len(hops) == 1:
            out.append(x)
    return out


def opensm_roots(G: Graph, comp: list[int]) -> list[int]:
    """OpenSM's automatic roots (osm_ucast_updn.c, by min hop): a switch from which one
    hop count holds over 90% of the CA ports of the fabric and no other over 5%."""
    out = []
    for c in set(comp):
        members = bits(c)
        total = sum(len(G.home_lids[x]) for x in members)
        for x in members:
            hist = _leaf_hist(G, x)
            if sum(h > 0.9 * total for h in hist) == 1 and sum(h > 0.05 * total for h in hist) == 1:
                out.append(x)
    return sorted(out)


def centres(G: Graph, comp: list[int]) -> list[int]:
    """One switch of least eccentricity per connected piece, ties to the lowest GUID: a
    single root gives every pair an up*/down* route (up the BFS tree, then down it)."""
    return sorted(min(bits(c), key=lambda x: (len(G.levels()[x]), G.guids[x])) for c in set(comp))


# Tried in order when no roots are given (`auto_plan`): (what the note calls them, rule)
ROOT_RULES = (
    ("farthest from the channel adapters", choose_roots),
    ("farthest from the channel adapters and equally far from all of them", complete_tops),
    ("by OpenSM's min-hop rule", opensm_roots),
    ("a central switch of each part of the fabric", centres),
)


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


class _Plan:
    """Up/down directions and legal route levels for one set of roots."""

    def __init__(self, G: Graph, comp: list[int], root_idx: list[int]):
        self.roots = root_idx
        rank = ranks(G, root_idx)
        self.lost = [x for x in range(G.S) if rank[x] < 0]
        if self.lost:
            return
        # up = towards a smaller key: lower rank, or equal rank and bigger GUID
        self.keys = key = [(rank[x], -G.guids[x]) for x in range(G.S)]
        self.up = up = [[y for y in G.nbrs[x] if key[y] < key[x]] for x in range(G.S)]
        self.down = [[y for y in G.nbrs[x] if key[y] > key[x]] for x in range(G.S)]
        # dd[x][k]: destinations x reaches in exactly k down moves (shortest down-only path)
        self.dd = dd = hop_levels(G.S, self.down)
        self.dreach = dreach = [_union(lv) for lv in dd]
        # rl[x][k]: destinations x reaches by a legal route of k hops. The up-phase part
        # depends on the up-neighbours' routes, so go from the top (smallest key) down.
        self.rl: list[list[int]] = [[] for _ in range(G.S)]
        rl = self.rl
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
        self.legal = [_union(lv) for lv in rl]

    def illegal(self, G: Graph, comp: list[int]) -> tuple[int, int] | None:
        """A (switch with CAs, destination switch) pair without a legal route, if any:
        CA traffic starts at such a switch and must reach every LID."""
        if self.lost:
            return self.lost[0], self.roots[0] if self.roots else self.lost[0]
        for x in range(G.S):
            if G.ca_lids[x] and comp[x] & ~self.legal[x]:
                return x, bits(comp[x] & ~self.legal[x])[0]
        return None


def _union(levels: list[int]) -> int:
    m = 0
    for v in levels:
        m |= v
    return m


def _names(G: Graph, idx: list[int], limit: int = 8) -> str:
    shown = ", ".join(G.name(x) for x in idx[:limit])
    return shown + (f" ... ({len(idx)} in all)" if len(idx) > limit else "")


def auto_plan(G: Graph, comp: list[int]) -> tuple[_Plan, list[str]]:
    """Roots when none are given: the first rule of `ROOT_RULES` under which every
    switch with channel adapters has an up*/down* route to every switch (so every CA
    reaches every LID); the last rule (one central switch per piece) always does. The
    notes say which roots were taken and why earlier rules were passed over."""
    notes = []
    tried = set()
    for why, rule in ROOT_RULES:
        roots = rule(G, comp)
        if not roots or tuple(roots) in tried:
            continue
        tried.add(tuple(roots))
        plan = _Plan(G, comp, roots)
        bad = plan.illegal(G, comp)
        if bad is None:
            notes.append(f"updn roots ({why}): {_names(G, roots)}")
            return plan, notes
        notes.append(f"updn: roots {why} ({_names(G, roots, 4)}) leave {G.name(bad[0])} without an "
                     f"up*/down* route to {G.name(bad[1])}; trying the next rule")
    raise RoutingError("updn: internal error, no root choice routes this fabric")  # the centres always do


def route(rin: RoutingInput, roots: list[int] | None = None) -> Routes:
    G = Graph(rin)
    comp = G.components()
    if roots is None:
        plan, notes = auto_plan(G, comp)
    else:
        plan, notes = _Plan(G, comp, [G.index[g] for g in roots]), []
        if plan.lost:
            raise RoutingError(f"updn: {len(plan.lost)} switch(es) are not connected to any root "
                               f"({_names(G, plan.lost, 5)}); give a root in every part of the fabric")
        bad = plan.illegal(G, comp)
        if bad is not None:
            x, d = bad
            raise RoutingError(
                f"updn cannot route from {G.name(x)} to {G.name(d)}: no up*/down* path with roots "
                f"{_names(G, plan.roots, 5)}; choose one root, or roots every switch reaches going up "
                f"(the spines of a fat tree), or give no roots to have them chosen")
    # Switches without CAs may lack a legal path to another switch (spine to spine when
    # every spine is a root: down to a leaf, then up). Those pairs get a shortest path
    # through a neighbour that has a route. Only the switch's own port 0 (management)
    # traffic takes it: no legal route ever enters such an entry, so no CA traffic
    # crosses the down-then-up turn and the data channel dependency graph stays acyclic.
    rl, dd, dreach = plan.rl, plan.dd, plan.dreach
    ext = extend_routes(G, comp, rl, plan.legal)
    tables = []
    for x in range(G.S):
        port_masks = []
        for y in plan.down[x]:
            port_masks.append((tuple(G.nbr_ports[x][y]), next_hop_mask(dd[x], dd[y])))
        up_only = [v & ~dreach[x] for v in rl[x]]
        for y in plan.up[x]:
            port_masks.append((tuple(G.nbr_ports[x][y]), next_hop_mask(up_only, rl[y])))
        if any(ext[x]):
            for y in G.nbrs[x]:
                ey = [a | b for a, b in _zip_longest(rl[y], ext[y])]
                port_masks.append((tuple(G.nbr_ports[x][y]), next_hop_mask(ext[x], ey)))
        groups = group_destinations(G.all & ~(1 << x), port_masks)
        table = new_table(G)
        missing = assign_switch(G, x, groups, table)
        stuck = [d for d in missing if comp[x] >> d & 1]
        if stuck:  # cannot happen if the levels above are right; never route half a fabric
            raise RoutingError(f"updn: internal error, no exit from {G.name(x)} towards {G.name(stuck[0])}")
        tables.append(table)
    routes = finish(G, tables, notes)
    # the patch's heights: up is towards a smaller key, so the order of keys reversed
    keys = plan.keys
    routes.patch_rule = PatchRule("updn", {G.guids[x]: -i for i, x in enumerate(sorted(range(G.S), key=keys.__getitem__))})
    return routes


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
