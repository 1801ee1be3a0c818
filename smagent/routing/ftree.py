"""Fat-tree routing: every destination goes down its downward path, upward traffic is
spread so that the uplinks of a switch carry equal shares (the idea of OpenSM's
``ftree`` engine, implemented from the idea).

Levels. Switches with channel adapters are the leaves (level 1, hosts being level 0);
every other switch's level is one more than its hop distance to the nearest leaf. In a
fat tree every switch-to-switch link joins adjacent levels; that is the whole test
(`tree_levels`), so pruned trees, missing links and missing switches are fine, while a
torus, a ring or a host hanging off a spine are refused with the link that breaks it.

Routes (up*/down*, hence deadlock-free: up channels ordered by level before down
channels, no route turns up after going down):

* a switch with the destination's switch below it (reachable going only down) routes
  down; every down path from level a to level b is a - b hops, so all are shortest;
* any other switch routes up, to a neighbour from which the destination is reachable
  with the fewest up hops (`_up_hops`), then down.

Balance. Each CA LID gets a *chain*: from its leaf upward, at each switch the uplink
with the fewest destinations so far coming down it (leaf by leaf, ports in order:
"down-going" counts). The chain's last switch is the LID's *top*. Where a switch has a
choice, it prefers the neighbour the chain uses (down) or a neighbour below the LID's
top (up), so all traffic to a LID meets on one downward path, and destinations spread
over the tops evenly; what remains tied goes to the least-loaded port, counting up- and
down-going assignments separately (`_core.fill`). On a regular tree every uplink of a
switch then carries the same number of destinations, which is the ideal link load.
With LMC > 0 a CA port's LIDs take chains through different neighbours where they can,
so its 2^LMC paths use disjoint uplinks.

Damaged trees. A leaf with more CA LIDs than uplinks leaves its last partial round of
LIDs *free* (no chain, rather than doubling one downlink), and a source that cannot reach
a LID's top has no preferred neighbour: both kinds are spread by each source over its
uplinks from its own offset, so one destination's traffic enters its leaf on many links.

Switch LIDs (management traffic only) get chains too but are not counted. A switch LID
that some switch cannot reach up-then-down (a spine whose link to a leaf is missing)
is routed along a shortest path through neighbours that have a route (`_extend`).

Not a fat tree: `NotFatTree` (a RoutingError) says why, unless the spec names a fallback:
``ftree:fallback=updn`` (or ``minhop``, ``updn:GUID,...``) routes with that engine then,
with a warning on the ``smagent.routing`` logger.

Vectorised with numpy over LIDs per switch (11,664 hosts: 1,620 switches x 13,284
LIDs), the per-LID work in Python is only the chains (one per CA LID).
"""
from __future__ import annotations

import numpy as np

from smagent.routing.base import NO_PORT, PatchRule, RoutingError, RoutingInput
from smagent.routing._core import Graph, fill, finish

INF = np.int16(0x3FFF)


class NotFatTree(RoutingError):
    """The fabric is not a fat tree (the message says why)."""


def tree_levels(nbrs: list[list[int]], leaves: list[bool], name=str) -> list[int]:
    """Level of every switch (leaves 1), from the switch graph ``nbrs`` (indices) and
    which switches carry CAs; raises NotFatTree when a link does not join adjacent
    levels, a switch reaches no leaf, or there is no leaf."""
    S = len(nbrs)
    level = [0] * S
    frontier = [x for x in range(S) if leaves[x]]
    if not frontier:
        raise NotFatTree("not a fat tree: no switch has a channel adapter, so there is no bottom level")
    for x in frontier:
        level[x] = 1
    while frontier:
        nxt = []
        for x in frontier:
            for y in nbrs[x]:
                if not level[y]:
                    level[y] = level[x] + 1
                    nxt.append(y)
        frontier = nxt
    lost = [x for x in range(S) if not level[x]]
    if lost:
        raise NotFatTree(f"not a fat tree: {len(lost)} switch(es) have no path to any host ({name(lost[0])})")
    for x in range(S):
        for y in nbrs[x]:
            if abs(level[x] - level[y]) != 1:
                why = "carry hosts" if level[x] == 1 else "are as far from the nearest host"
                raise NotFatTree(f"not a fat tree: {name(x)} and {name(y)} are linked but both {why} "
                                 f"(level {level[x]}); a fat tree links only adjacent levels")
    return level


def route(rin: RoutingInput):
    """Route a fat tree; NotFatTree when it is not one (`smagent.routing.route` then
    applies the spec's fallback, if any)."""
    return _route(rin)


class _Tree:
    """The switch graph with levels, and per-switch reach as dense matrices."""

    def __init__(self, G: Graph):
        S = self.S = G.S
        self.G = G
        self.level = tree_levels(G.nbrs, [bool(G.ca_lids[x]) for x in range(S)], G.name)
        lv = self.level
        self.up = [[y for y in G.nbrs[x] if lv[y] > lv[x]] for x in range(S)]
        self.down = [[y for y in G.nbrs[x] if lv[y] < lv[x]] for x in range(S)]
        self.top_level = max(lv)
        rising = sorted(range(S), key=lv.__getitem__)
        # below[x, m]: switch m reachable from x going only down (x itself included)
        below = np.zeros((S, S), bool)
        for x in rising:
            below[x, x] = True
            for y in self.down[x]:
                below[x] |= below[y]
        self.below = below
        self.above = np.ascontiguousarray(below.T)  # above[y, t]: t reachable from y going only up
        # hup[x, m]: fewest up hops from x to a switch with m below it
        hup = np.full((S, S), INF, np.int16)
        for x in reversed(rising):
            if self.up[x]:
                m = np.minimum.reduce([hup[y] for y in self.up[x]]) + 1
                hup[x] = np.minimum(m, INF)
            hup[x][below[x]] = 0
        self.hup = hup


def _chains(G: Graph, T: _Tree):
    """Per LID its chain (the switch at each level, -1 below its leaf / above its top)
    and its top switch (-1: a *free* LID, see below). CA LIDs are counted: per switch
    port the chains going down it, per switch the chains through it; the least-counted
    uplink wins, then the least-used switch (so tops even out across leaves), then the
    lowest port. A CA port's later LIDs (LMC > 0) avoid the neighbours its earlier ones
    took. A leaf with more CA LIDs than uplinks (a damaged tree) leaves the last partial
    round free: no chain, so each source spreads its traffic to them by its own rotation
    (`_route`) instead of doubling one downlink."""
    L = G.max_lid + 1
    chain = np.full((T.top_level + 1, L), -1, np.int32)
    top = np.full(L, -1, np.int32)
    ups = [[(p, y) for y in T.up[z] for p in G.nbr_ports[z][y]] for z in range(G.S)]
    count = [[0] * (G.rin.num_ports[G.guids[z]] + 1) for z in range(G.S)]
    through = [0] * G.S

    def climb(x, lid, used, counted):
        z = x
        chain[T.level[z], lid] = z
        while ups[z]:
            cz = count[z]
            p, y = min(ups[z], key=lambda py: (py[1] in used, cz[py[0]], through[py[1]], py[0]))
            if counted:
                cz[p] += 1
                through[y] += 1
            used.add(y)
            z = y
            chain[T.level[z], lid] = z
        top[lid] = z

    order: list[list[tuple[int, int]]] = [[] for _ in range(G.S)]  # per leaf: (port index, LID)
    passes = max((len(h) for hs in G.home_lids for h in hs), default=0)
    for i in range(passes):
        for x in range(G.S):
            order[x] += [(hi, lids[i]) for hi, lids in enumerate(G.home_lids[x]) if i < len(lids)]
    used: dict[tuple[int, int], set] = {}
    for x in range(G.S):
        u = len(ups[x])
        free = len(order[x]) % u if u and len(order[x]) > u else 0
        for hi, lid in order[x][:len(order[x]) - free]:
            climb(x, lid, used.setdefault((x, hi), set()), True)
        for _hi, lid in order[x][len(order[x]) - free:]:
            chain[T.level[x], lid] = x
    for x in range(G.S):
        for lid in G.sw_lids[x]:
            climb(x, lid, set(), False)
    return chain, top


def _classes(M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Columns of the bool matrix M grouped by pattern: (class of every column, a
    representative column of every class)."""
    if len(M) <= 62:
        keys = (np.int64(1) << np.arange(len(M), dtype=np.int64)) @ M
    else:
        packed = np.ascontiguousarray(np.packbits(M, axis=0, bitorder="little").T)
        keys = packed.view(np.dtype((np.void, packed.shape[1]))).ravel()
    _, first, inv = np.unique(keys, return_index=True, return_inverse=True)
    return inv.ravel(), first


def _choose(cand: np.ndarray, pref: np.ndarray, hk: np.ndarray, pk: np.ndarray, nb_ports: list[list[int]],
            lids: np.ndarray, is_ca: np.ndarray, load: list[int], table: np.ndarray, rotate: int | None = None) -> None:
    """Route ``lids`` (ascending) at one switch. Neighbour j (ports nb_ports[j]) is a
    candidate for LID i if cand[j, hk[i]], preferred if also pref[j, pk[i]] (hk: the
    LID's home switch, pk: its chain switch or top). Preferred candidates win where a
    LID has any; ties go to the least-loaded port (CA LIDs counted in ``load``), the
    lowest port first. With ``rotate`` (a per-switch offset), LIDs none of whose
    candidates is preferred (their top is out of reach: a damaged tree) go round the
    ports from that offset on instead, so that the sources, each with its own offset,
    do not all send one destination down the same least-loaded link.
    LIDs are handled in classes of equal (candidates, preferences): a few per switch."""
    hc, hrep = _classes(cand)
    pc, prep = _classes(pref)
    npc = len(prep)
    key = hc[hk] * npc + pc[pk]
    kvs = np.flatnonzero(np.bincount(key, minlength=len(hrep) * npc))
    c = cand[:, hrep[kvs // npc]]
    p = c & pref[:, prep[kvs % npc]]
    eff = np.where(p.any(0), p, c)  # per present class: the neighbours it may take
    width = np.array([len(ps) for ps in nb_ports])
    first = np.array([ps[0] for ps in nb_ports])
    n_ports = width @ eff
    dec = np.full(len(hrep) * npc, -1, np.int64)
    one = n_ports == 1
    dec[kvs[one]] = first[eff[:, one].argmax(0)]
    hit = p.any(0)
    multi = [(kv, sorted(q for j in np.flatnonzero(eff[:, i]) for q in nb_ports[j]), hit[i])
             for i, kv in enumerate(kvs) if n_ports[i] > 1]
    chosen = dec[key]
    one = chosen >= 0
    table[lids[one]] = chosen[one]
    for q, n in enumerate(np.bincount(chosen[one & is_ca[lids]], minlength=len(load))):
        load[q] += int(n)
    for kv, ports, preferred in multi:
        members = lids[key == kv]
        ca = members[is_ca[members]]
        if len(ca) and (preferred or rotate is None):
            table[ca] = fill(ports, load, len(ca))
        elif len(ca) and rotate is not None:
            picked = np.array(ports)[(rotate + np.arange(len(ca))) % len(ports)]
            rotate += len(ca)
            table[ca] = picked
            for q, n in zip(*np.unique(picked, return_counts=True)):
                load[q] += int(n)
        sw = members[~is_ca[members]]
        if len(sw):
            table[sw] = min(ports, key=lambda q: (load[q], q))


def _route(rin: RoutingInput):
    G = Graph(rin)
    T = _Tree(G)
    S, L = G.S, G.max_lid + 1
    home = np.full(L, -1, np.int32)
    is_ca = np.zeros(L, bool)
    for x in range(S):
        for lid, port in G.local[x]:
            home[lid] = x
            is_ca[lid] = port != 0
    all_lids = np.array(G.all_lids, np.int64)
    homes = home[all_lids]
    for x in range(S):  # a host's traffic must reach every CA LID up-then-down
        if G.ca_lids[x]:
            bad = (T.hup[x][homes] >= INF) & is_ca[all_lids]
            if bad.any():
                d = int(homes[np.argmax(bad)])
                raise NotFatTree(f"not a fat tree: no up-then-down path from {G.name(x)} to {G.name(d)}")
    chain, top = _chains(G, T)
    free = np.cumsum((top < 0) & is_ca)  # free LIDs numbered, for the sources' rotations
    tables = np.full((S, L), NO_PORT, np.uint8)
    for x in range(S):
        nports = rin.num_ports[G.guids[x]] + 1
        table = tables[x]
        for lid, port in G.local[x]:
            table[lid] = port
        rest = all_lids[homes != x]
        h = T.hup[x][home[rest]]
        down = rest[h == 0]
        if len(down):
            ys = T.down[x]
            pref = np.zeros((len(ys), S + 1), bool)  # chain switch at the level below (S: none)
            pref[np.arange(len(ys)), ys] = True
            at = chain[T.level[x] - 1][down]
            _choose(T.below[ys], pref, home[down], np.where(at >= 0, at, S), [G.nbr_ports[x][y] for y in ys],
                    down, is_ca, [0] * nports, table)
        upm = (h > 0) & (h < INF)
        if upm.any():
            ups = rest[upm]
            ys = T.up[x]
            cand = T.hup[ys] == T.hup[x] - 1
            tops = top[ups]  # free LIDs (-1): each switch its own rotation over its uplinks
            tops = np.where(tops >= 0, tops, np.array(ys)[(x + free[ups]) % len(ys)])
            _choose(cand, T.above[ys], home[ups], tops, [G.nbr_ports[x][y] for y in ys],
                    ups, is_ca, [0] * nports, table, rotate=x)
    _extend(G, T, home, all_lids, tables)
    routes = finish(G, [bytearray(t.tobytes()) for t in tables])
    routes.patch_rule = PatchRule("ftree", {g: T.level[x] for x, g in enumerate(G.guids)})
    return routes


def _extend(G: Graph, T: _Tree, home: np.ndarray, all_lids: np.ndarray, tables: np.ndarray) -> None:
    """LIDs some switch cannot reach up-then-down (only switch LIDs get here: CA LIDs
    were checked): a shortest path through neighbours that have a route, by repeated
    relaxation of hop counts over all switches at once (each step strictly closer, so
    no loops)."""
    routed = tables[:, all_lids] != NO_PORT
    cols = np.flatnonzero(~routed.all(0))
    if not len(cols):
        return
    S = G.S
    deg = max(len(G.nbr_ports[x]) for x in range(S))
    nb = np.full((S, deg), S, np.int64)  # neighbour indices, padded with S (a row of INF)
    port = np.zeros((S, deg), np.int64)
    for x in range(S):
        for k, (y, ps) in enumerate(sorted(G.nbr_ports[x].items())):
            nb[x, k], port[x, k] = y, ps[0]
    lv = np.array(T.level, np.int16)
    for a in range(0, len(cols), 256):
        c = cols[a:a + 256]
        lids = all_lids[c]
        hd = home[lids]
        fixed = routed[:, c]
        # legal route length: h up, then down from level(x) + h to the home's level
        dist = np.where(fixed, 2 * T.hup[:, hd] + lv[:, None] - lv[hd][None, :], INF).astype(np.int16)
        dist = np.vstack([dist, np.full((1, len(c)), INF, np.int16)])
        while True:
            via = dist[nb]  # S x deg x cols
            k = via.argmin(1)
            best = np.take_along_axis(via, k[:, None, :], 1)[:, 0, :] + 1
            better = ~fixed & (best < dist[:S])
            if not better.any():
                break
            dist[:S][better] = best[better]
            xs, js = np.nonzero(better)
            tables[xs, lids[js]] = port[xs, k[xs, js]]
