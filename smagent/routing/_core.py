"""What the shortest-path engines share: the switch graph as indices, all-pairs hop counts
as bitsets, candidate exits grouped per switch, and the balancing of LIDs over them.

Speed is the point of this module (a 3-level fat tree of 36-port switches: 1,620
switches, 13,284 LIDs, 21.5 million table entries, in pure Python):

* Hop counts for *all* destinations at once: ``at[x][k]`` is a bitset (a Python int)
  of the switches exactly k hops from x, built level by level with one OR per edge per
  level, so the whole matrix costs (diameter x edges) big-int ORs instead of a BFS per
  destination.
* Per switch, the destinations are split into groups that share the same set of
  candidate exit ports (one AND per port and group). A fat tree has a few dozen groups
  per switch, so the per-LID work is a list build and a table write.
* The LIDs of one group are balanced in one go ("water filling", `fill`), which gives
  exactly the answer of the per-LID greedy rule below, without a heap operation per LID.
* With LMC > 0 the per-LID rule cannot be filled in bulk, but its answer depends only
  on the shape of a switch's situation, which the leaves (and the aggregation switches)
  of a fat tree share: it is computed once per shape and written a run of consecutive
  LIDs at a time (`_assign_lmc`). LMC 2 on the fabric above (48,276 LIDs, 78 million
  entries) routes in about the time LMC 0 takes.

Measured against OpenSM 3.3.23 `-R minhop` on ibsim with the same LIDs
(tests/live/test_routing_live.py): identical tables on 2- and 3-level fat trees, tori and
meshes, LMC 0-2. What we do not model: OpenSM keeping a switch's *existing* entry when
it is still a shortest path (on re-sweeps, without ignore_existing_lfts), and its
optional port_shifting, scatter_ports, hop weights and guid_routing_order files.

The balancing rule is OpenSM's (osm_switch_recommend_path + ucast_mgr_process_tbl):
every switch handles the LIDs in one order, each going out of the candidate port with
the fewest routes so far, ties to the lowest port number. The order is OpenSM's
port_order_list: channel-adapter ports grouped by the switch they hang off, switches
with more CA links first, equal ones in the order of OpenSM's sw_guid_tbl (a qmap keyed
by the GUID in *network byte order* read as a host integer: byte-swapped GUID order),
each switch's CA ports in port-number order; switch LIDs after them (after the first
pass when LMC > 0). Switch LIDs are routed but not counted (OpenSM's
port_profile_switch_nodes FALSE default). Destinations whose candidate sets overlap
only partly (a torus: east-or-north vs east only) are taken LID by LID in that order;
disjoint or identical sets (a fat tree) are filled in bulk: the same answer. With
LMC > 0 the LIDs go in passes (every port's first LID, then every port's second ...),
and a port's later LIDs prefer exits towards neighbours its earlier LIDs did not use
(least-loaded among those; when every candidate neighbour is used, least-loaded and
then least used, with OpenSM's quirks: `_lmc_choice`), ties to the ports after the
previous LID's port (OpenSM's start_from rotation), so they spread over different paths
where the fabric has them.
"""
from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from typing import Sequence

from smagent.routing.base import NO_PORT, Routes, RouteTable, RoutingError, RoutingInput
from smagent.model.order import opensm_key

_BYTE_BITS = [tuple(i for i in range(8) if b >> i & 1) for b in range(256)]


def bits(m: int) -> list[int]:
    """Indices of the set bits of ``m``, ascending."""
    out: list[int] = []
    if not m:
        return out
    ext = out.extend
    for i, byte in enumerate(m.to_bytes((m.bit_length() + 7) // 8, "little")):
        if byte:
            base = i * 8
            ext([base + o for o in _BYTE_BITS[byte]])
    return out


class Graph:
    """The switch graph as indices 0..S-1, numbered in OpenSM's routing order, and where
    every LID lives."""

    def __init__(self, rin: RoutingInput):
        self.rin = rin
        homes: dict[tuple[int, int], list[int]] = {}
        for lid, home in rin.lid_homes.items():
            homes.setdefault(home, []).append(lid)
        ca_count: dict[int, int] = {}
        for (g, p) in homes:
            if p != 0:
                ca_count[g] = ca_count.get(g, 0) + 1
        order = sorted(rin.switches, key=lambda g: (-ca_count.get(g, 0), opensm_key(g)))
        self.guids: list[int] = order
        self.index: dict[int, int] = {g: i for i, g in enumerate(order)}
        S = self.S = len(order)
        self.all = (1 << S) - 1
        # neighbours: per x, {neighbour index: [ports]} and port -> neighbour index
        self.nbr_ports: list[dict[int, list[int]]] = [dict() for _ in range(S)]
        self.port_nbr: list[dict[int, int]] = [dict() for _ in range(S)]
        for g, lst in rin.adjacency.items():
            x = self.index.get(g)
            if x is None:
                continue
            for p, g2 in lst:
                y = self.index.get(g2)
                if y is None or y == x:
                    continue
                self.nbr_ports[x].setdefault(y, []).append(p)
                self.port_nbr[x][p] = y
        for d in self.nbr_ports:
            for ps in d.values():
                ps.sort()
        self.nbrs: list[list[int]] = [sorted(d) for d in self.nbr_ports]
        # LIDs per destination switch: CA LIDs (counted) in OpenSM order, switch LIDs
        self.lmc_homes = any(len(v) > 1 for (g, p), v in homes.items() if p != 0)
        self.local: list[list[tuple[int, int]]] = [[] for _ in range(S)]  # (lid, port) homed here
        self.ca_lids: list[list[int]] = [[] for _ in range(S)]
        self.sw_lids: list[list[int]] = [[] for _ in range(S)]
        # for LMC > 0: per destination, its CA ports' LID lists in port order
        self.home_lids: list[list[list[int]]] = [[] for _ in range(S)]
        for (g, p), lids in sorted(homes.items(), key=lambda kv: kv[0][1]):
            x = self.index.get(g)
            if x is None:
                raise RoutingError(f"LID {min(lids)} hangs off {rin.name(g)}, which is not a switch of this fabric")
            lids.sort()
            for lid in lids:
                self.local[x].append((lid, p))
            if p == 0:
                self.sw_lids[x].extend(lids)
            else:
                self.ca_lids[x].extend(lids)
                self.home_lids[x].append(lids)
        self.max_lid = max(rin.lid_homes, default=0)
        self.all_lids = sorted(rin.lid_homes)
        self._levels: list[list[int]] | None = None
        if self.lmc_homes:
            self._lmc_layout()

    def _lmc_layout(self) -> None:
        """For LMC > 0, per destination switch d: its CA LIDs port by port ("port-major",
        the layout of the choices `_assign_lmc` computes) as runs of consecutive LIDs,
        so that a switch's table is written a run at a time, not a LID at a time; the
        LID count of each of d's ports (``lmc_shape``), their offsets in d's block
        (``lmc_offs``) and the block's size; and the memo of `_assign_lmc`."""
        self.lmc_shape: list[tuple[int, ...]] = []
        self.lmc_offs: list[list[int]] = []
        self.lmc_size: list[int] = []
        self.lmc_runs: list[list[tuple[int, int]]] = []
        for hl in self.home_lids:
            offs: list[int] = []
            runs: list[tuple[int, int]] = []
            n = 0
            for lids in hl:
                offs.append(n)
                n += len(lids)
                for lid in lids:
                    if runs and runs[-1][0] + runs[-1][1] == lid:
                        runs[-1] = (runs[-1][0], runs[-1][1] + 1)
                    else:
                        runs.append((lid, 1))
            self.lmc_shape.append(tuple(len(lids) for lids in hl))
            self.lmc_offs.append(offs)
            self.lmc_size.append(n)
            self.lmc_runs.append(runs)
        self.lmc_memo: dict = {}

    def name(self, x: int) -> str:
        return self.rin.name(self.guids[x])

    def levels(self) -> list[list[int]]:
        """`hop_levels` over the whole switch graph, computed once."""
        if self._levels is None:
            self._levels = hop_levels(self.S, self.nbrs)
        return self._levels

    def components(self) -> list[int]:
        """Connected-component bitset of every switch."""
        comp = [0] * self.S
        for s in range(self.S):
            if comp[s]:
                continue
            m = 1 << s
            frontier = [s]
            while frontier:
                nxt = []
                for x in frontier:
                    for y in self.nbrs[x]:
                        if not m >> y & 1:
                            m |= 1 << y
                            nxt.append(y)
                frontier = nxt
            for x in bits(m):
                comp[x] = m
        return comp


def hop_levels(S: int, nbrs: list[list[int]]) -> list[list[int]]:
    """``at[x][k]``: bitset of the switches exactly k hops from x (over ``nbrs``)."""
    reach = [1 << x for x in range(S)]
    at = [[r] for r in reach]
    while True:
        new = []
        changed = False
        for x in range(S):
            r = reach[x]
            for y in nbrs[x]:
                r |= reach[y]
            new.append(r)
        for x in range(S):
            diff = new[x] & ~reach[x]
            if diff:
                changed = True
            at[x].append(diff)
        reach = new
        if not changed:
            for lv in at:
                lv.pop()
            return at


def next_hop_mask(lx: list[int], ly: list[int]) -> int:
    """Destinations d for which a step to y is one hop closer: level_x(d) = level_y(d) + 1."""
    m = 0
    for k in range(1, min(len(lx), len(ly) + 1)):
        m |= lx[k] & ly[k - 1]
    return m


def group_destinations(everything: int, port_masks: list[tuple[tuple[int, ...], int]]
                       ) -> list[tuple[int, tuple[int, ...]]]:
    """Split ``everything`` into (bitset, ports) groups: the destinations in a group are
    exactly those for which each of ``ports`` (and no other) is a candidate."""
    groups: list[tuple[int, tuple[int, ...]]] = [(everything, ())]
    for ports, m in port_masks:
        if not m:
            continue
        ng = []
        for g, ps in groups:
            a = g & m
            if a:
                ng.append((a, ps + ports))
                b = g ^ a
                if b:
                    ng.append((b, ps))
            else:
                ng.append((g, ps))
        groups = ng
    return groups


def fill(ports: list[int] | tuple[int, ...], load: list[int], n: int) -> list[int]:
    """The exits the greedy rule (fewest routes, then lowest port) gives n LIDs in a row,
    all with candidates ``ports`` (sorted): the n smallest slots (load + i, port).
    Updates ``load``."""
    m = len(ports)
    lv = [load[p] for p in ports]
    v, top = min(lv), max(lv)
    out: list[int] = []
    while len(out) < n and v < top:
        need = n - len(out)
        out.extend([p for p, l in zip(ports, lv) if l <= v][:need])
        v += 1
    for p, c in Counter(out).items():
        load[p] += c
    r = n - len(out)
    if r > 0:
        q, rem = divmod(r, m)
        if q:
            out.extend(ports * q)
            for p in ports:
                load[p] += q
        out.extend(ports[:rem])
        for p in ports[:rem]:
            load[p] += 1
    return out


# (candidate ports, destinations, their CA LIDs: None when `_assign_lmc` works per destination)
Counted = tuple[list[int] | tuple[int, ...], list[int], list[int] | None]


def _components_of(groups: Sequence[Counted]) -> list[list[int]]:
    """Indices of ``groups`` (ports, dests, lids) bunched where their port sets overlap."""
    parent: dict[int, int] = {}

    def find(p):
        while parent[p] != p:
            parent[p] = parent[parent[p]]
            p = parent[p]
        return p

    for ports, _d, _l in groups:
        for p in ports:
            parent.setdefault(p, p)
        r = find(ports[0])
        for p in ports[1:]:
            parent[find(p)] = r
    by_root: dict[int, list[int]] = {}
    for i, (ports, _d, _l) in enumerate(groups):
        by_root.setdefault(find(ports[0]), []).append(i)
    return list(by_root.values())


def assign_switch(G: Graph, x: int, groups, table: bytearray) -> list[int]:
    """Write switch x's routes into ``table`` (an LFT image). ``groups`` are (bitset of
    destination switches, candidate ports) as from `group_destinations`. Returns the
    destination switches x has no candidate for."""
    num_ports = G.rin.num_ports[G.guids[x]]
    load = [0] * (num_ports + 1)
    for lid, port in G.local[x]:
        table[lid] = port
        if port:
            load[port] += 1
    unreachable: list[int] = []
    counted: list[Counted] = []
    uncounted: list[tuple[list[int], list[int]]] = []  # (ports, lids)
    for mask, ports in groups:
        dests = bits(mask)
        if not ports:
            unreachable.extend(dests)
            continue
        exits = sorted(ports)
        ca = G.ca_lids
        if G.lmc_homes:  # `_assign_lmc` works per destination, never builds the LID list
            with_ca = [d for d in dests if ca[d]]
            if with_ca:
                counted.append((tuple(exits), with_ca, None))
        else:
            lids = [lid for d in dests for lid in ca[d]]
            if lids:
                counted.append((exits, dests, lids))
        sw = [lid for d in dests for lid in G.sw_lids[d]]
        if sw:
            uncounted.append((exits, sw))
    if G.lmc_homes:
        _assign_lmc(G, x, counted, uncounted, load, table)
        return unreachable
    else:
        for comp in _components_of(counted):
            if len(comp) == 1:
                cports, _d, clids = counted[comp[0]]
                assert clids is not None  # without LMC homes every group lists its LIDs
                if len(cports) == 1:
                    p = cports[0]
                    for lid in clids:
                        table[lid] = p
                    load[p] += len(clids)
                else:
                    for lid, p in zip(clids, fill(cports, load, len(clids))):
                        table[lid] = p
                continue
            # overlapping candidate sets: per LID, in the global order
            seq: list[tuple[int, int, int, list[int] | tuple[int, ...]]] = []
            for i in comp:
                cports, cdests, _l = counted[i]
                for d in cdests:
                    for pos, lid in enumerate(G.ca_lids[d]):
                        seq.append((d, pos, lid, cports))
            seq.sort()
            for _dest, _pos, lid, cports in seq:
                best = cports[0]
                bl = load[best]
                for p in cports:
                    if load[p] < bl:
                        best, bl = p, load[p]
                table[lid] = best
                load[best] = bl + 1
    _assign_uncounted(uncounted, load, table)
    return unreachable


def _assign_uncounted(uncounted, load: list[int], table: bytearray) -> None:
    """Switch LIDs: the least-loaded candidate, lowest port on ties; not counted."""
    for ports, lids in uncounted:
        best = min(ports, key=lambda p: (load[p], p))
        for lid in lids:
            table[lid] = best


def _assign_lmc(G: Graph, x: int, counted, uncounted, load: list[int], table: bytearray) -> None:
    """LMC > 0: pass i routes every CA port's i-th LID, in the global order; a port's
    later LIDs prefer neighbours its earlier LIDs did not go to (path diversity), then
    the least-loaded exit, then ports from the previous LID's port + 1 on. Switch LIDs
    (one each) are routed after the first pass, as in OpenSM.

    Components of overlapping candidate sets are independent (disjoint ports, and a CA
    port's LIDs all share one candidate set), so each is done on its own: a single
    forced port in bulk, the others by `_lmc_component`. What a component decides
    depends only on its shape (its ports and their neighbours as a pattern, their loads,
    and per destination in order: candidate set and LIDs per CA port), not on which
    LIDs or switches are involved; switches of one shape (every leaf of a fat tree, every
    aggregation switch) share one answer through ``G.lmc_memo``, which is what makes LMC
    routing cost about what LMC 0 costs per LID."""
    nbr = G.port_nbr[x]
    nports = G.rin.num_ports[G.guids[x]] + 1
    size, runs = G.lmc_size, G.lmc_runs
    for comp in _components_of(counted):
        groups = [counted[i] for i in comp]
        if len(groups) == 1 and len(groups[0][0]) == 1:
            p = groups[0][0][0]
            for d in groups[0][1]:
                for lo, n in runs[d]:
                    table[lo:lo + n] = bytes((p,)) * n
                load[p] += size[d]
            continue
        order: int | tuple[int, ...]  # the destinations' group pattern (see `_lmc_component`)
        if len(groups) == 1:  # the usual case (a fat tree's up ports): dests already in order
            dests, gi_of, order = groups[0][1], None, len(groups[0][1])
        else:
            gi_of = {d: gi for gi, (_ports, dests, _l) in enumerate(groups) for d in dests}
            dests = sorted(gi_of)
            order = tuple(map(gi_of.__getitem__, dests))
        used = sorted({p for ports, _d, _l in groups for p in ports})
        pattern: dict[int, int] = {}
        key = (nports, tuple(ports for ports, _d, _l in groups), tuple(used),
               tuple(pattern.setdefault(nbr.get(p, -1), len(pattern)) for p in used),
               tuple(load[p] for p in used), order, tuple(map(G.lmc_shape.__getitem__, dests)))
        got = G.lmc_memo.get(key)
        if got is None:
            if gi_of is None:
                gi_of = dict.fromkeys(dests, 0)
            got = G.lmc_memo[key] = _lmc_component(G, groups, gi_of, dests, used, load, nbr, nports)
        flat, pass0 = got
        flat = memoryview(flat)
        off = 0
        for d in dests:
            for lo, n in runs[d]:
                table[lo:lo + n] = flat[off:off + n]
                off += n
        for p, c in zip(used, pass0):
            load[p] = c
    _assign_uncounted(uncounted, load, table)


def _lmc_component(G: Graph, groups, gi_of, dests, used_ports, load: list[int], nbr: dict[int, int],
                   nports: int) -> tuple[bytes, tuple[int, ...]]:
    """One component's exits, LID by LID in OpenSM's order: pass 0 of a single group
    with `fill` (nothing is used yet, so OpenSM's scan is plain least-loaded-lowest-port),
    everything else through `_lmc_choice`. Returns the exits in the port-major layout of
    ``dests`` (see `Graph._lmc_layout`) and the loads of ``used_ports`` after pass 0 (the
    switch LIDs are routed then). ``load`` is not changed."""
    load = list(load)
    home, offs = G.home_lids, G.lmc_offs
    base, total = {}, 0
    for d in dests:
        base[d] = total
        total += G.lmc_size[d]
    flat = bytearray(total)
    used: dict[tuple[int, int], dict[int, int]] = {}
    prev: dict[tuple[int, int], int] = {}
    passes = max(len(h) for d in dests for h in home[d])
    pass0: tuple[int, ...] = ()
    for i in range(passes):
        if i == 0 and len(groups) == 1:
            firsts = [(d, hi) for d in dests for hi in range(len(home[d]))]
            for (d, hi), p in zip(firsts, fill(groups[0][0], load, len(firsts))):
                flat[base[d] + offs[d][hi]] = p
                used[(d, hi)] = {nbr.get(p, -1): 1}
                prev[(d, hi)] = p
        else:
            for d in dests:
                ports = groups[gi_of[d]][0]
                for hi, lids in enumerate(home[d]):
                    if i >= len(lids):
                        continue
                    key = (d, hi)
                    u = used.setdefault(key, {})
                    best = _lmc_choice(ports, load, u, nbr, prev[key] + 1 if i else 1, nports)
                    flat[base[d] + offs[d][hi] + i] = best
                    load[best] += 1
                    n = nbr.get(best, -1)
                    u[n] = u.get(n, 0) + 1
                    prev[key] = best
        if i == 0:
            pass0 = tuple(load[p] for p in used_ports)
    return bytes(flat), pass0


def new_table(G: Graph) -> bytearray:
    return bytearray([NO_PORT]) * (G.max_lid + 1)


def finish(G: Graph, tables: list[bytearray], notes=()) -> Routes:
    lids = G.all_lids
    return Routes({G.guids[x]: RouteTable(tables[x], lids) for x in range(G.S)}, notes)


def _lmc_choice(ports, load: list[int], used: dict[int, int], nbr: dict[int, int], start: int,
                nports: int) -> int:
    """One LID of a port with LMC > 0: OpenSM's osm_switch_recommend_path scan (no DOR,
    scatter or shifting). Ports are scanned from ``start`` round; a port towards a
    neighbour this CA port's LIDs have not used (``used``: neighbour -> LIDs sent there)
    wins (the least-loaded such, first found); otherwise the least-loaded port, replaced
    by a later equally loaded one only if its neighbour's use count is below the smallest
    use count seen so far in the scan (OpenSM's least_forwarded_to, which also remembers
    busier ports)."""
    start %= nports
    k = bisect_left(ports, start)
    least_paths = least_other = least_fwd = 1 << 62
    best, best_other = -1, None  # best: set by the first candidate (there is always one)
    for p in ports[k:] + ports[:k]:  # the candidates in scan order: start, start+1, ... round
        c = load[p]
        f = used.get(nbr.get(p, -1), 0)
        if not f:
            if c < least_other:
                least_other, best_other, least_fwd = c, p, 0
        if c < least_paths:
            best, least_paths = p, c
            if f and f < least_fwd:
                least_fwd = f
        elif f and c == least_paths and f < least_fwd:
            least_fwd, best = f, p
    return best_other if best_other is not None else best
