"""DFSSSP: deadlock-free single-source shortest paths (Domke, Hoefler, Nagel, "Deadlock-Free
Oblivious Routing for Arbitrary Topologies", IPDPS 2011; OpenSM's ``-R dfsssp`` is the
behaviour we measure against).

Two steps:

1. **SSSP.** Destination LID by destination LID, every switch takes the path to the LID's
   switch whose channels carry the least weight so far, among its shortest (fewest-hop)
   paths; then every channel the new routes use gains the number of CA ports whose
   traffic to that LID crosses it. Later LIDs so avoid loaded links: the hottest link
   carries fewer routes than minhop's per-switch balancing gives. Ties go to the lowest
   port. Switch LIDs are routed the same way but weigh nothing (as minhop: traffic to a
   switch is management traffic). The order of the LIDs matters: switch by switch first
   (what balances a complete tree); then the LIDs are routed again interleaved round
   the switches (first LID of each switch, then the second, ...), and the result with
   the cooler hottest link, then fewer layers, is kept: on tori and meshes the
   interleaved order loads the rings evenly (bench/dfsssp_vs_opensm.py), and on a
   damaged tree it can too (a 3-level tree without a core and an aggregation switch:
   172 routes against 188; bench/routing_default_vs_opensm.py). Both orders cost about
   twice one on a tree.
2. **Layers.** A path is (source switch with CA ports, destination LID): its packets
   follow the LFTs from that switch. The channel dependency graph of all paths (channel =
   a switch's output port towards another switch; a path through c1 then c2 makes c1
   depend on c2) must have no cycle on any one virtual lane. When it has one, paths are
   moved to the next layer: in a cycle of layer l, the dependency with the fewest paths
   is broken by moving those paths to layer l+1, until layer l is acyclic; then layer
   l+1 is treated the same way. A layer is an SL, and the SL2VL tables map SL l to VL l
   on every port (OpenSM's default SL2VL table folded into the VLs a port runs does
   exactly that while the layers fit: `smagent.linkconf.qos`). Then the layers are balanced
   over the VLs every port runs (``RoutingInput.data_vls``): the fullest layer is split
   in two while a VL is free (a subset of an acyclic layer is acyclic), as OpenSM
   spreads its paths over the available VLs (one layer: the paths go round-robin).

Needing more layers than the ports have data VLs is a `RoutingError` (exit 2) naming both.
The SL of every path is in ``Routes.sls`` ({source switch GUID: SL by DLID}); the hosts
learn it from SA PathRecords (the SA's part); until then the sweep keeps it in the state
directory (`smagent.planning.pathsl`) for ``verify --path-sls`` and ``smagent paths``.

Speed: the SSSP step is numpy over arrays of channels, level by level (hop distance to
the destination): a 3-level fat tree of 36-port switches (11,664 hosts) routes in
seconds (bench/routing.py); its dependency graph is checked acyclic in a few numpy
passes (Kahn's peeling), and the per-path layering, Python over dicts, runs only when a
cycle exists (tori, meshes, damaged fabrics).
"""
from __future__ import annotations

import numpy as np

from smagent.routing._core import bits, hop_levels
from smagent.routing.base import NO_PORT, Routes, RouteTable, RoutingError, RoutingInput

DEFAULT_DATA_VLS = 8  # when the input does not say what the ports run (tests, benchmarks)
_CACHED_LEVELS = 64  # destination switches whose candidate levels are kept (LIDs of one switch run together)
_CACHE_ALL = 20_000_000  # switches x channels up to which every destination's levels are kept
_MAX_LAYERS = 15  # data VLs a port can run at most
_SHIFT = 24  # key = cost << _SHIFT | candidate position (a level has < 2^24 candidates)


class TooFewVLs(RoutingError):
    """The layers needed to break every credit loop exceed the data VLs the ports run
    (``auto`` then takes updn)."""


class _Channels:
    """The switch graph as arrays: switch indices in ``rin.switches`` order; channel c goes
    from switch ``src[c]`` out of ``port[c]`` to switch ``dst[c]``; ``of[x, p]`` is the
    channel of (x, p), -1 when p leads to no switch; ``hops[x, t]`` the fewest hops from
    x to t (-1: not connected)."""

    def __init__(self, rin: RoutingInput):
        self.guids = list(rin.switches)
        index = {g: i for i, g in enumerate(self.guids)}
        S = self.S = len(self.guids)
        src, dst, port = [], [], []
        for g in self.guids:
            for p, g2 in rin.adjacency.get(g, ()):
                if g2 in index and g2 != g:
                    src.append(index[g])
                    dst.append(index[g2])
                    port.append(p)
        order = np.lexsort((np.array(port, dtype=np.int64), np.array(src, dtype=np.int64)))
        self.src = np.array(src, dtype=np.int64)[order]
        self.dst = np.array(dst, dtype=np.int64)[order]
        self.port = np.array(port, dtype=np.int64)[order]
        self.C = len(self.src)
        self.of = np.full((S, 256), -1, dtype=np.int64)
        self.of[self.src, self.port] = np.arange(self.C)
        nbrs: list[list[int]] = [[] for _ in range(S)]
        for a, b in zip(self.src.tolist(), self.dst.tolist()):
            nbrs[a].append(b)
        self.hops = np.full((S, S), -1, dtype=np.int64)
        for x, at in enumerate(hop_levels(S, nbrs)):
            for k, m in enumerate(at):
                self.hops[x, bits(m)] = k
        self.index = index

    def levels_towards(self, t: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """For destination switch t, level by level (1, 2, ... hops away): (candidate
        channels one hop closer to t, sorted by source switch then port; the start of each
        source's run; the source switches)."""
        h = self.hops[:, t]
        hs, hd = h[self.src], h[self.dst]
        ok = (hs > 0) & (hd == hs - 1)
        cand = np.nonzero(ok)[0]
        out = []
        lv = hs[cand]
        for k in range(1, int(lv.max(initial=0)) + 1):
            idx = cand[lv == k]  # already sorted by (src, port)
            s = self.src[idx]
            starts = np.nonzero(np.r_[True, s[1:] != s[:-1]])[0]
            out.append((idx, starts, s[starts]))
        return out


def route(rin: RoutingInput) -> Routes:
    ch = _Channels(rin)
    S = ch.S
    max_lid = max(rin.lid_homes, default=0)
    base = np.full((S, max_lid + 1), NO_PORT, dtype=np.uint8)
    ca_count = np.zeros(S, dtype=np.int64)  # CA LIDs' sources: CA ports per switch
    dests: dict[int, list[int]] = {}
    counted: set[int] = set()
    for lid, (g, p) in sorted(rin.lid_homes.items()):
        x = ch.index.get(g)
        if x is None:
            raise RoutingError(f"LID {lid} hangs off {rin.name(g)}, which is not a switch of this fabric")
        base[x, lid] = p
        dests.setdefault(x, []).append(lid)
        if p:
            counted.add(lid)
    for g, _p in {home for home in rin.lid_homes.values() if home[1]}:
        ca_count[ch.index[g]] += 1
    vls = rin.data_vls or DEFAULT_DATA_VLS
    best = None
    for rank, order in enumerate((_by_switch, _interleaved)):
        table = base.copy()
        weight = np.zeros(ch.C, dtype=np.int64)
        via = _sssp(ch, order(dests), dests, counted, ca_count, weight, table)
        layer_paths = None if _acyclic_routes(ch, via, ca_count) else _break_cycles(ch, table, via, ca_count)
        needed = 1 if layer_paths is None else len(layer_paths)
        key = (needed > vls, int(weight.max(initial=0)), needed, rank)
        if best is None or key < best[0]:
            best = (key, table, layer_paths)
    assert best is not None
    (_over, hottest, needed, _rank), table, layer_paths = best
    if needed > vls:
        raise TooFewVLs(
            f"dfsssp needs {needed} virtual lanes to route this fabric without credit loops, but the "
            f"ports run only {vls} data VL{'s' if vls != 1 else ''} (the fewest of any linked port; "
            f"raise OperationalVLs / the links' max VLs, or use updn)")
    sls = np.zeros(table.shape, dtype=np.uint8)
    used = _balance(sls, table, ca_count, vls, layer_paths)
    notes = [f"dfsssp: {needed} layer{'s' if needed != 1 else ''} needed to break every credit loop, "
             f"paths spread over {used} of {vls} VLs (SL n -> VL n); hottest link {hottest} routes"]
    tables = {ch.guids[x]: RouteTable(bytearray(table[x].tobytes()), sorted(rin.lid_homes)) for x in range(S)}
    routes = Routes(tables, notes)
    routes.sls = {ch.guids[x]: bytes(sls[x].tobytes()) for x in range(S)}
    routes.layers = used
    routes.needed = needed
    return routes


def _by_switch(dests: dict[int, list[int]]) -> list[int]:
    """Destination LIDs switch by switch: what balances a tree (the LIDs of one leaf spread
    over its uplinks while the weights see them together)."""
    return [lid for t in sorted(dests) for lid in dests[t]]


def _interleaved(dests: dict[int, list[int]]) -> list[int]:
    """The first LID of every switch, then every second one, ...: on a torus or mesh this
    spreads the load round the rings (measured: 6x6 torus, hottest link 120 routes against
    164 switch by switch, and 3 layers against 5)."""
    out: list[int] = []
    for rank in range(max((len(v) for v in dests.values()), default=0)):
        out += [dests[t][rank] for t in sorted(dests) if rank < len(dests[t])]
    return out


def _sssp(ch: _Channels, order: list[int], dests: dict[int, list[int]], counted: set[int], ca_count: np.ndarray,
          weight: np.ndarray, table: np.ndarray) -> dict[int, list]:
    """Route the LIDs in ``order`` into ``table``, ``weight`` growing as they go; returns
    LID -> [(source switches, channels)] per level (for the layers)."""
    home = {lid: t for t, ls in dests.items() for lid in ls}
    keep_all = ch.S * ch.C <= _CACHE_ALL  # small fabric: every destination's levels kept
    cache: dict[int, list] = {}
    via: dict[int, list] = {}
    for lid in order:
        t = home[lid]
        levels = cache.get(t)
        if levels is None:
            if not keep_all and len(cache) >= _CACHED_LEVELS:
                del cache[next(iter(cache))]
            levels = cache[t] = ch.levels_towards(t)
        via[lid] = _sssp_one(ch, levels, weight, table, lid, ca_count if lid in counted else None)
    return via


def _sssp_one(ch: _Channels, levels, weight: np.ndarray, table: np.ndarray, lid: int,
              ca_count: np.ndarray | None) -> list:
    """Route one LID: per level, each switch takes the candidate channel with the least
    path weight (channel weight + the weight of the rest of the path), lowest port on ties;
    then, for a counted LID, each chosen channel gains the CA ports routed across it."""
    cost = np.zeros(ch.S, dtype=np.int64)
    chosen = []
    for idx, starts, srcs in levels:
        key = ((weight[idx] + cost[ch.dst[idx]]) << _SHIFT) | np.arange(len(idx), dtype=np.int64)
        best = np.minimum.reduceat(key, starts)
        sel = idx[best & ((1 << _SHIFT) - 1)]
        cost[srcs] = best >> _SHIFT
        table[srcs, lid] = ch.port[sel]
        chosen.append((srcs, sel))
    if ca_count is not None:
        behind = ca_count.copy()  # CA ports whose route to this LID crosses each switch
        for srcs, sel in reversed(chosen):
            n = behind[srcs]
            weight[sel] += n
            np.add.at(behind, ch.dst[sel], n)
    return chosen


def _path_edges(ch: _Channels, chosen: list, ca_count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The dependencies (c1, c2) of one LID's routes that some CA port's traffic takes:
    c1 chosen at a switch with CA ports at or behind it, c2 the next switch's choice."""
    S = ch.S
    nxt = np.full(S, -1, dtype=np.int64)
    behind = ca_count.copy()
    for srcs, sel in reversed(chosen):
        nxt[srcs] = sel
        np.add.at(behind, ch.dst[sel], behind[srcs])
    x = np.nonzero((nxt >= 0) & (behind > 0))[0]
    c1 = nxt[x]
    c2 = nxt[ch.dst[c1]]
    keep = c2 >= 0
    return c1[keep], c2[keep]


def _acyclic(C: int, c1: np.ndarray, c2: np.ndarray) -> bool:
    """Whether the graph on C channels with edges c1 -> c2 (repeats allowed) has no
    cycle: Kahn's peeling, every channel nothing depends on removed at once, a round per
    step of the longest chain; a cycle leaves edges behind."""
    indeg = np.bincount(c2, minlength=C)
    alive = np.ones(len(c1), dtype=bool)
    removed = np.zeros(C, dtype=bool)
    while alive.any():
        ready = (indeg == 0) & ~removed
        if not ready.any():
            return False
        removed |= ready
        gone = alive & ready[c1]
        indeg -= np.bincount(c2[gone], minlength=C)
        alive &= ~gone
    return True


def _acyclic_routes(ch: _Channels, via: dict, ca_count: np.ndarray) -> bool:
    """Whether the dependency graph of every path (one layer) has no cycle."""
    parts = [_path_edges(ch, chosen, ca_count) for chosen in via.values()]
    c1 = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
    c2 = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
    return _acyclic(ch.C, c1, c2)


def _sources(table: np.ndarray, ca_count: np.ndarray, lid: int) -> np.ndarray:
    """Switches with CA ports that route ``lid`` onwards (not its own switch)."""
    col = table[:, lid]
    return np.nonzero((ca_count > 0) & (col != NO_PORT))[0]


def _paths(ch: _Channels, table: np.ndarray, lids, ca: np.ndarray) -> tuple[list[tuple[int, int]], list[list[int]]]:
    """Every path (source switch with CA ports, LID) whose route crosses two channels or
    more, and its dependencies (c1 * C + c2), following the LFTs."""
    paths, edges = [], []
    of, dst, C = ch.of, ch.dst, ch.C
    for lid in lids:
        col = table[:, lid]
        for x in _sources(table, ca, lid).tolist():
            c = int(of[x, col[x]])
            chain: list[int] = []
            while c >= 0 and len(chain) <= ch.S:
                chain.append(c)
                y = int(dst[c])
                c = int(of[y, col[y]])
            if len(chain) > 1:
                paths.append((x, lid))
                edges.append([a * C + b for a, b in zip(chain, chain[1:])])
    return paths, edges


def _break_cycles(ch: _Channels, table: np.ndarray, via: dict, ca_count: np.ndarray) -> list[list[tuple[int, int]]]:
    """The paths in layers, each layer's dependency graph acyclic: in a cycle of the
    current layer, the dependency with the fewest paths (ties: the lowest) sends those
    paths to the next layer, until no cycle is left; then the next layer likewise."""
    from smagent.routing.cycles import find_cycle
    paths, edges = _paths(ch, table, sorted(via), ca_count)
    C = ch.C
    layers: list[list[tuple[int, int]]] = []
    current = list(range(len(paths)))
    while current:
        users: dict[int, set[int]] = {}
        for pid in current:
            for e in edges[pid]:
                users.setdefault(e, set()).add(pid)
        moved: set[int] = set()
        while True:
            adj: dict[int, list[int]] = {}
            for e in users:
                adj.setdefault(e // C, []).append(e % C)
            cycle = find_cycle(adj)
            if cycle is None:
                break
            ring = [cycle[k] * C + cycle[(k + 1) % len(cycle)] for k in range(len(cycle))]
            weakest = min(ring, key=lambda e: (len(users[e]), e))
            for pid in sorted(users[weakest]):
                moved.add(pid)
                for e in edges[pid]:
                    u = users[e]
                    u.discard(pid)
                    if not u:
                        del users[e]
        layers.append([paths[p] for p in current if p not in moved])
        current = sorted(moved)
        if len(layers) > _MAX_LAYERS:  # only a path that loops by itself could get here
            raise RoutingError(f"dfsssp: credit loops left after {_MAX_LAYERS} layers (a routing loop?)")
    return layers or [[]]


def _balance(sls: np.ndarray, table: np.ndarray, ca_count: np.ndarray, vls: int,
             layer_paths: list[list[tuple[int, int]]] | None) -> int:
    """Spread the paths over the ``vls`` VLs: the fullest layer split in two while a VL is
    free. ``layer_paths`` None: one layer holding every path (written round-robin, the
    same split). Writes ``sls``; returns the VLs used."""
    if layer_paths is None:
        offset = 0
        for lid in range(table.shape[1]):
            srcs = _sources(table, ca_count, lid)
            if len(srcs):
                sls[srcs, lid] = (offset + np.arange(len(srcs))) % vls
                offset += len(srcs)
        return min(vls, max(offset, 1))
    layers = [list(p) for p in layer_paths]
    while len(layers) < vls:
        big = max(range(len(layers)), key=lambda i: len(layers[i]))
        if len(layers[big]) < 2:
            break
        layers.append(layers[big][1::2])
        layers[big] = layers[big][0::2]
    for sl, paths in enumerate(layers):
        for x, lid in paths:
            sls[x, lid] = sl
    return len(layers)
