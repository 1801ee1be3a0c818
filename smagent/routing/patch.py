"""Incremental route repair: the routes the switches hold, with only the entries whose
path crosses a lost link or a lost switch moved.

A repair that only LOST one cable, or the links of one switch (a switch gone, drained),
and perhaps LIDs, or only hosts' LIDs (a host cable pulled: their entries cleared; a new
host: its LIDs' entries routed; nothing else moves), need not route the fabric again: an
engine that rebalances from scratch (ftree) would rewrite a third of every LFT for one
cut. `patch` keeps every (switch, DLID) entry whose path to the DLID still exists and
moves only the *broken* ones: an entry whose exit now leads nowhere, and every entry
upstream of it (whose next-hop chain reaches such an entry).

The new exits keep the promise the engine made (`PatchRule`):

* up*/down* engines (ftree: its levels; updn: its ranks from its roots, ties by GUID) give
  every switch a height; a hop to a higher switch is *up*. Old up*/down* paths and new
  up*/down* paths under one ranking have no credit loop together (up channels ordered
  before down ones), so a broken switch that can still reach the DLID going only down
  does so along a shortest such path, else it goes up towards the shortest legal path
  (updn's rule: a switch entered going down must continue down, and every switch that
  enters a broken one is itself broken, so the patch chooses every way in). A switch
  with no channel adapters left without a legal path (a core whose only way into a pod
  was the lost link), and any switch towards a switch LID, gets a shortest path of any
  shape, as the engines extend such pairs: legal paths never enter it, so only
  management traffic takes it. A switch with channel adapters and no legal path to a
  channel adapter's LID means the rule splits the fabric: `PatchRefused`, and the caller
  routes afresh. Paths to switch LIDs extended that way are not up*/down*, as the
  engines' are not: with several cables cut at once they closed a credit loop in
  tests where the engine's did not, so only one cable or one switch's links are
  patched (`losses`); more is routed afresh.
* shortest-path engines (minhop, no deadlock promise): the shortest path through what
  is left.

When what was lost is known (`Lost`: the link ends gone, the lost switches' tables), a DLID
whose old paths through the loss can keep their length and shape moves its dead exits
alone (`_dead_only`): each takes a neighbour whose kept path is no longer than the old one
and no worse in shape (down only if that was, up*/down* if that was). Every entry behind
it keeps its exit and its path's length and shape, and a fabric that only lost has no
shorter path, so the promise above holds for them untouched: a lost core of a 39,366-host
tree moves its neighbours' exits, not the 2.5 million entries whose paths crossed it.
Any other DLID gets the repair above.

Among the exits of least cost the least-loaded port wins (channel-adapter LIDs counted,
as the engines count them), so a leaf's lost uplink spreads its DLIDs over the uplinks
left. dfsssp (layers and SLs per path) and file routing give no rule: they are routed
afresh.

What a patch moved is kept (`Undo`): when what it lost comes back and the fabric is again
the one the routes before it were made on, `restore` puts those routes back instead of
routing afresh (a relink, a lost switch back: the blocks the loss changed, written back).

Pure: numpy over the LFT images, the columns of the affected DLIDs only, and within them
work in proportion to what is broken: the broken cells found by walking back from the
dead exits, the kept paths' costs walked only where a broken cell looks (`_upstream`,
`_chains`; the whole columns at once where most of them are broken).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from smagent.routing.base import NO_PORT, PatchRule, Routes, RouteTable, RoutingError, RoutingInput
from smagent.routing._core import Graph, fill

INF = np.int32(1 << 20)
_COLUMNS = 512  # DLIDs handled at once: bounds the (cells x neighbours) arrays
UNDO_KEPT = 16  # patches a running SM can still put back (`Undo`), the newest


class PatchRefused(RoutingError):
    """The routes cannot be patched under the rule (the message says why): route afresh."""


@dataclasses.dataclass
class Basis:
    """What the routes the switches hold were made on: the rule they keep, the spec that
    made them, the switch-to-switch link ends (switch, port, neighbour) and the LID homes.
    A running SM keeps it from sweep to sweep (`smagent.routing.auto.AutoMemory.basis`);
    a patch keeps its rule (the ranking of the routes it kept) and takes the new fabric."""
    rule: PatchRule
    spec: object
    links: frozenset[tuple[int, int, int]]
    homes: dict[int, tuple[int, int]]

    @classmethod
    def of(cls, rule: PatchRule, spec: object, rin: RoutingInput) -> "Basis":
        return cls(rule, spec, _link_ends(rin), dict(rin.lid_homes))


def _link_ends(rin: RoutingInput) -> frozenset[tuple[int, int, int]]:
    return frozenset((g, p, g2) for g, lst in rin.adjacency.items() for p, g2 in lst)


@dataclasses.dataclass
class Lost:
    """What the fabric lost since its routes were made, enough to follow the old paths
    through it and to undo a patch (`Undo.of`): ``ends``, (switch GUID, port) -> the GUID
    cabled there then, for the link ends gone; ``tables``: LFT images holding the lost
    switches' (a lost core's path crossed it)."""
    ends: dict[tuple[int, int], int]
    tables: Mapping[int, bytes | bytearray]

    @classmethod
    def of(cls, basis: Basis, rin: RoutingInput, tables: Mapping[int, bytes | bytearray]) -> "Lost":
        return cls({(g, p): g2 for g, p, g2 in basis.links - _link_ends(rin)}, tables)


def losses(basis: Basis, rin: RoutingInput) -> tuple[set[int] | None, int, str | None]:
    """What ``rin`` lost since ``basis``: the switches that lost a link end (None: scan
    them all), how many link ends were lost, and why the routes cannot be patched (None:
    they can, only links, switches and LIDs were lost, or hosts' LIDs alone came or went)."""
    now = _link_ends(rin)
    gained = now - basis.links
    if gained:
        g, p, _ = min(gained)
        return set(), 0, f"a link came up ({rin.name(g)} port {p})"
    moved = [lid for lid, home in rin.lid_homes.items() if basis.homes.get(lid) != home]
    lost = basis.links - now
    if moved and (lost or any(lid in basis.homes for lid in moved)):
        return set(), 0, f"LID {min(moved)} is new or moved"
    if not lost:  # only hosts' LIDs gone or new: their entries cleared, or routed as a patch
        if moved:  # every switch is scanned: the new LIDs' entries lead nowhere yet
            return None, 0, None
        return set(), 0, None if len(rin.lid_homes) < len(basis.homes) else "no link was lost"
    common = set.intersection(*({g, g2} for g, _, g2 in lost))
    if not common:  # measured: several cuts at once can close a loop through switch-LID paths
        return set(), len(lost), f"{len(lost) // 2} links lost at once, not one cable or one switch's links"
    return {g for g, _, _ in lost if g in rin.num_ports}, len(lost), None


@dataclasses.dataclass
class Patched:
    """What `patch` did: the routes, entries moved, DLIDs they belong to, switches touched;
    ``cells``: per switch the entries that changed (LIDs, ports before, ports after), what
    an `Undo` keeps."""
    routes: Routes
    moved: int
    dlids: int
    switches: int
    cells: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]


@dataclasses.dataclass
class Undo:
    """What one patch changed, to be put back when what it lost comes back (`restore`):
    the rule and spec of the routes it patched, the link ends and LID homes it lost (the
    fabric before it is the basis after it with these: not a second copy of the fabric),
    its `Patched.cells` and the tables of the switches it lost. A lost core of 11,664
    hosts: 49,429 entries moved and one 13 KB table (167,944 and 43 KB at 39,366 hosts)."""
    rule: PatchRule
    spec: object
    links: frozenset[tuple[int, int, int]]
    homes: dict[int, tuple[int, int]]
    cells: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]
    lost: dict[int, bytes]

    @classmethod
    def of(cls, before: Basis, rin: RoutingInput, done: Patched, lost: Lost) -> "Undo":
        """The undo of ``done``, a patch of the routes made on ``before`` for the fabric
        ``rin`` (which only lost since: ``lost``, whose tables hold the lost switches')."""
        links = frozenset((g, p, g2) for (g, p), g2 in lost.ends.items())
        homes = {lid: home for lid, home in before.homes.items() if rin.lid_homes.get(lid) != home}
        gone = {g for g, _p in lost.ends} - set(rin.switches)
        return cls(before.rule, before.spec, links, homes, done.cells,
                   {g: bytes(lost.tables[g]) for g in gone if g in lost.tables})


def restore(rin: RoutingInput, tables: Mapping[int, bytes | bytearray], undo: Undo, now: Basis) -> Routes | str:
    """The routes before the patch ``undo`` records, once the fabric ``rin`` is again the
    one they were made on (``now``, the basis of the patched routes, with what the patch
    lost): ``tables`` (switch GUID -> its LFT image as the switches hold it, the patch's
    output) with the moved entries put back, the lost switches' tables as they were. Those
    routes were checked and held before the loss; an engine routing afresh would rewrite
    them all (ftree: a third of each LFT). Returns why not, as a string, when the fabric
    or the tables differ."""
    if _link_ends(rin) != now.links | undo.links:
        return "the links differ from those before the loss"
    if dict(rin.lid_homes) != {**now.homes, **undo.homes}:
        return "the LIDs differ from those before the loss"
    lids = sorted(rin.lid_homes)
    out = Routes()
    for g in rin.switches:
        held = tables.get(g)
        table = np.array(bytearray(held if held is not None else undo.lost.get(g, b"")), np.uint8)
        if len(table) <= (lids[-1] if lids else 0):
            return f"no known forwarding table of {rin.name(g)}"
        if g in undo.cells:
            at, before, after = undo.cells[g]
            if held is not None and not np.array_equal(table[at], after):
                return f"{rin.name(g)}'s table changed since the patch"
            table[at] = before
        out[g] = RouteTable(bytearray(table.tobytes()), lids)
    out.patch_rule = undo.rule
    return out


def _cells(changed: np.ndarray, before: np.ndarray, after: np.ndarray, guids: list[int]
           ) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per switch, the entries ``changed`` marks: (LIDs, ports in ``before``, in ``after``)."""
    xs, ls = np.nonzero(changed)  # row by row: each switch's entries together
    starts = np.flatnonzero(np.diff(xs, prepend=-1))
    return {guids[xs[a]]: (ls[a:b], before[xs[a], ls[a:b]], after[xs[a], ls[a:b]])
            for a, b in zip(starts, [*starts[1:], len(xs)])}


def patch(rin: RoutingInput, old: Mapping[int, bytes | bytearray], rule: PatchRule,
          suspects: set[int] | None = None, lost: Lost | None = None) -> Patched:
    """The routes of ``old`` (switch GUID -> its LFT image, as the switches hold it) on
    the fabric ``rin`` (which only lost links, switches or LIDs since), broken entries
    moved under ``rule``. ``suspects``: the switches that lost a link (None: every switch
    is scanned for exits that lead nowhere); ``lost``: what was lost (None: not known), so
    that a DLID whose old paths can keep their length and shape keeps every entry but
    the dead exits (`_dead_only`). PatchRefused when the rule finds no path."""
    G = Graph(rin)
    S, L = G.S, G.max_lid + 1
    missing = [g for g in G.guids if g not in old]
    if missing:
        raise PatchRefused(f"no known forwarding table of {rin.name(missing[0])}")
    heights = None
    if rule.heights is not None:
        absent = [g for g in G.guids if g not in rule.heights]
        if absent:
            raise PatchRefused(f"{rin.name(absent[0])} has no place in the ranking the routes were made under")
        heights = np.array([rule.heights[g] for g in G.guids], np.int64)
    T = np.full((S, L), NO_PORT, np.uint8)
    for x, g in enumerate(G.guids):
        row = np.frombuffer(old[g], np.uint8)[:L]  # a view: the image is copied once, into T
        T[x, :len(row)] = row
    home_x = np.full(L, -1, np.int64)
    home_p = np.zeros(L, np.int64)
    is_ca = np.zeros(L, bool)
    for x in range(S):
        for lid, p in G.local[x]:
            home_x[lid], home_p[lid], is_ca[lid] = x, p, p != 0
    routed = home_x >= 0
    before = T.copy()
    T[:, ~routed] = NO_PORT  # LIDs gone from the fabric: no route
    homed = np.flatnonzero(routed)
    T[home_x[homed], homed] = home_p[homed]  # the home switch delivers (port 0: itself)
    portmap = np.full((S, 256), -1, np.int64)  # (switch, port) -> neighbour index
    for x in range(S):
        for p, y in G.port_nbr[x].items():
            portmap[x, p] = y
    rows = range(S) if suspects is None else sorted(G.index[g] for g in suspects if g in G.index)
    cols = _affected(T, portmap, home_x, routed, rows)
    table = _neighbour_table(G.nbrs, S)
    ups = None if heights is None else (table >= 0) & (heights[np.maximum(table, 0)] > heights[:, None])
    tables = (table, _neighbour_table(_senders(G), S), ups)
    loads: dict[int, list[int]] = {}  # per switch, CA LIDs routed out of each port (`_assign`)
    for a in range(0, len(cols), _COLUMNS):
        _repair(G, T, portmap, heights, home_x, is_ca, cols[a:a + _COLUMNS], tables, loads,
                None if lost is None else (lost, rule.heights))
    changed = T != before
    routes = Routes({g: RouteTable(bytearray(T[x].tobytes()), G.all_lids) for x, g in enumerate(G.guids)})
    routes.patch_rule = rule
    return Patched(routes, int(changed.sum()), int(changed.any(0).sum()), int(changed.any(1).sum()),
                   _cells(changed, before, T, G.guids))


def _affected(T: np.ndarray, portmap: np.ndarray, home_x: np.ndarray, routed: np.ndarray, rows) -> np.ndarray:
    """The DLIDs (ascending) some scanned switch sends out of a port that leads nowhere."""
    hit = np.zeros(T.shape[1], bool)
    for x in rows:
        dead = (portmap[x][T[x]] < 0) & routed & (home_x != x)
        hit |= dead
    return np.flatnonzero(hit)


def _repair(G: Graph, T: np.ndarray, portmap: np.ndarray, heights: np.ndarray | None, home_x: np.ndarray,
            is_ca: np.ndarray, cols: np.ndarray, tables: tuple[np.ndarray, np.ndarray, np.ndarray | None],
            loads: dict[int, list[int]], lost: tuple[Lost, Mapping[int, int] | None] | None = None) -> None:
    """New exits for the broken entries of the DLIDs ``cols``, written into T; ``tables``:
    each switch's neighbours and the switches that send to it (`_neighbour_table`), and
    which of the neighbours are up (None: no heights); ``loads``: `_assign`'s; ``lost``:
    `patch`'s with the rule's heights by GUID (the DLIDs `_dead_only` settles keep their
    other entries)."""
    S, C = T.shape[0], len(cols)
    at = np.arange(C)
    nxt = portmap[np.arange(S)[:, None], T[:, cols]]  # next switch (-1: none)
    home = home_x[cols]
    nxt[home, at] = -2  # delivered here
    table, senders, ups = tables
    dead = nxt == -1
    broken = _upstream(nxt, senders, dead)
    if lost is not None:
        broken[:, _dead_only(G, T, cols, nxt, heights, dead, broken, table, *lost, is_ca, loads)] = False
    r, c = np.nonzero(broken)
    if not len(r):
        return
    nb, pad = _neighbours(table, r)
    nbs = np.where(pad, 0, nb)
    # what the kept paths around the broken cells cost, worked out only where a broken
    # cell looks (its neighbours' cells): every other cell stays INF / False
    kept = np.full((S, C), INF, np.int32)
    down_only = np.zeros((S, C), bool)
    legal = np.zeros((S, C), bool)
    cs = np.broadcast_to(c[:, None], nbs.shape)
    look = ~pad & ~broken[nbs, cs]
    mark = np.zeros((S, C), bool)
    mark[nbs[look], cs[look]] = True
    cy, cc = np.nonzero(mark)
    kept[cy, cc], down_only[cy, cc], legal[cy, cc] = _chains(nxt, heights, cy, cc)
    if heights is None or ups is None:
        cost = _relax(np.where(broken, INF, kept), r, c, nbs, pad)
        cand = ~pad & (cost[nbs, c[:, None]] == cost[r, c][:, None] - 1)
        reach = cost[r, c] < INF
    else:
        up = ups[r, :nb.shape[1]]  # padding is never up
        down = ~pad & ~up
        dd = _relax(np.where(broken, INF, np.where(down_only, kept, INF)), r, c, nbs, ~down)
        full = np.where(broken, dd, np.where(legal, kept, INF))
        full = _relax(full, r, c, nbs, ~up, only=dd[r, c] >= INF)
        ext = _relax(np.where(broken, full, kept), r, c, nbs, pad, only=full[r, c] >= INF)
        # down if it can, else up*/down*, else any shape: each cell's exits one hop closer
        by_dd = dd[r, c] < INF
        by_full = ~by_dd & (full[r, c] < INF)
        cand = np.zeros_like(pad)
        for a, sel, allowed in ((dd, by_dd, down), (full, by_full, up), (ext, ~by_dd & ~by_full, ~pad)):
            rs, cs, ns = r[sel], c[sel], nbs[sel]
            cand[sel] = allowed[sel] & (a[ns, cs[:, None]] == a[rs, cs][:, None] - 1)
        illegal = full[r, c] >= INF
        ca_switch = np.array([bool(G.ca_lids[x]) for x in range(S)])
        split = illegal & ca_switch[r] & is_ca[cols[c]]  # switch LIDs are extended as the engines do
        if split.any():
            i = int(np.argmax(split))
            raise PatchRefused(f"no up*/down* path from {G.name(int(r[i]))} to LID {int(cols[c[i]])} "
                               f"under the ranking the routes were made under")
        reach = ext[r, c] < INF
    if not reach.all():
        i = int(np.argmin(reach))
        raise PatchRefused(f"no path from {G.name(int(r[i]))} to LID {int(cols[c[i]])}: the switch graph is split")
    _assign(G, T, cols, r, c, cand, nb, is_ca, loads)


def _dead_only(G: Graph, T: np.ndarray, cols: np.ndarray, nxt: np.ndarray, heights: np.ndarray | None,
               dead: np.ndarray, broken: np.ndarray, table: np.ndarray, lost: Lost,
               ranks: Mapping[int, int] | None, is_ca: np.ndarray, loads: dict[int, list[int]]) -> np.ndarray:
    """The DLIDs (a mask of ``cols``) whose dead exits alone get new ones, written into T:
    where every dead cell has a neighbour, off the broken cells, whose kept path is no
    longer than the old path through the loss and no worse in shape (down only if that
    was; up*/down* if that was). Every path that crossed the loss then keeps its length
    and its shape (a new fabric never has shorter ones: it only lost), so the engine's
    promise holds for the entries upstream untouched: a lost core of 39,366 hosts moves
    its 54 spines' dead exits, not the 2.5 million entries behind them. Any other DLID
    goes to the full repair. ``ranks``: the heights by GUID (lost switches too)."""
    r, c = np.nonzero(dead)
    if not len(r):
        return np.zeros(len(cols), bool)
    old_cost, old_down, old_legal = _old_paths(G, T, cols, nxt, heights, ranks, broken, lost, r, c)
    nb, pad = _neighbours(table, r)
    y = np.where(pad, 0, nb)
    cy = np.broadcast_to(c[:, None], y.shape)
    usable = ~pad & ~broken[y, cy]
    cost = np.full(y.shape, INF, np.int32)
    down = np.zeros(y.shape, bool)
    legal = np.zeros(y.shape, bool)
    cost[usable], down[usable], legal[usable] = _chains(nxt, heights, y[usable], cy[usable])
    if heights is not None:  # the hop in, then the neighbour's kept chain
        hop_down = heights[y] < heights[r][:, None]
        legal &= ~hop_down | down
        down &= hop_down
    cost = np.where(cost < INF, cost + 1, INF)
    fits = usable & (cost <= old_cost[:, None]) & (down | ~old_down[:, None]) & (legal | ~old_legal[:, None])
    fits &= (old_cost < INF)[:, None]  # an old path not followed: no length to keep
    best = np.where(fits, cost, INF).min(1)
    cand = fits & (cost == best[:, None])
    bad = np.zeros(len(cols), bool)
    bad[c[best >= INF]] = True
    ok = ~bad[c]
    if ok.any():
        _assign(G, T, cols, r[ok], c[ok], cand[ok], nb[ok], is_ca, loads)
    return ~bad


def _old_paths(G: Graph, T: np.ndarray, cols: np.ndarray, nxt: np.ndarray, heights: np.ndarray | None,
               ranks: Mapping[int, int] | None, broken: np.ndarray, lost: Lost, r: np.ndarray, c: np.ndarray):
    """Per dead cell (r, c), the old path through the loss: its hop count (INF where it
    cannot be followed), whether it went only down and whether it was up*/down*. Its
    first hop is the lost link (or into the lost switch, then out by that switch's old
    table); then the kept chain of a cell that is not broken (none reaches a dead exit:
    the old paths had no loops)."""
    n = len(r)
    hops = np.zeros(n, np.int32)
    to = np.full(n, -1, np.int64)  # where the kept chain starts
    hts = np.zeros((n, 3), np.int64)  # heights along the lost hops (x, then z, then w)
    ports = T[r, cols[c]]
    keys = r * 256 + ports
    uniq, inv = np.unique(keys, return_inverse=True)
    for i, key in enumerate(uniq.tolist()):
        x, p = divmod(key, 256)
        z = lost.ends.get((G.guids[x], p))
        if z is None or (ranks is not None and z not in ranks):
            continue
        sel = np.flatnonzero(inv == i)
        if heights is not None and ranks is not None:  # heights are the ranks of G's switches
            hts[sel, 0], hts[sel, 1] = heights[x], ranks[z]
        if z in G.index:
            hops[sel], to[sel] = 1, G.index[z]
        else:
            _through_lost(G, lost, z, cols[c[sel]], sel, hops, to, hts, heights)
    ok = to >= 0
    ok[ok] &= ~broken[to[ok], c[ok]]
    cost = np.full(n, INF, np.int32)
    down = np.zeros(n, bool)
    legal = np.zeros(n, bool)
    if ok.any():
        ck, dk, lk = _chains(nxt, heights, to[ok], c[ok])
        if heights is None:  # shortest paths: no shape to keep
            dk = lk = np.zeros(len(ck), bool)
        else:
            d1 = hts[ok, 1] < hts[ok, 0]
            two = hops[ok] == 2
            d2 = np.where(two, hts[ok, 2] < hts[ok, 1], d1)
            seen = d1 | d2
            lk = lk & ~(two & d1 & ~d2) & (~seen | dk)
            dk = dk & d1 & d2
        cost[ok] = np.where(ck < INF, ck + hops[ok], INF)
        down[ok], legal[ok] = dk, lk
    return cost, down, legal


def _through_lost(G: Graph, lost: Lost, z: int, dlids: np.ndarray, sel: np.ndarray, hops: np.ndarray,
                  to: np.ndarray, hts: np.ndarray, heights: np.ndarray | None) -> None:
    """The old hop out of the lost switch ``z`` for the cells ``sel`` (DLIDs ``dlids``):
    its old table's exit and the switch cabled there (left unfollowed if unknown)."""
    image = lost.tables.get(z)
    if image is None or len(image) <= int(dlids.max()):
        return
    outs = np.frombuffer(image, np.uint8)[dlids]
    for q in np.unique(outs).tolist():
        w = lost.ends.get((z, q))
        if w is None or w not in G.index:
            continue
        at = sel[outs == q]
        hops[at], to[at] = 2, G.index[w]
        if heights is not None:
            hts[at, 2] = heights[G.index[w]]


def _neighbour_table(lists: list[list[int]], S: int) -> np.ndarray:
    """Each switch's list, padded with -1 to the longest: (S, length)."""
    deg = max((len(n) for n in lists), default=0)
    table = np.full((S, max(deg, 1)), -1, np.int64)
    for x, nbrs in enumerate(lists):
        table[x, :len(nbrs)] = nbrs
    return table


def _senders(G: Graph) -> list[list[int]]:
    """Per switch, the switches with a port that leads to it."""
    out: list[list[int]] = [[] for _ in range(G.S)]
    for x, ports in enumerate(G.port_nbr):
        for y in set(ports.values()):
            out[y].append(x)
    return out


def _upstream(nxt: np.ndarray, table: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """The cells whose next-hop chain reaches a ``seed`` cell (the seeds included): the
    chains walked backwards from the seeds, a neighbour at a time (work in proportion to
    what is broken), or over the whole table once most of it is (a lost core that
    carried every switch LID's paths)."""
    broken = seed.copy()
    fx, fc = np.nonzero(seed)
    while len(fx):
        if len(fx) * table.shape[1] > broken.size:
            return _closure(nxt, broken)
        ys = table[fx]  # who could send into each frontier cell
        cs = np.broadcast_to(fc[:, None], ys.shape)
        y0 = np.maximum(ys, 0)
        into = (ys >= 0) & (nxt[y0, cs] == fx[:, None]) & ~broken[y0, cs]
        fx, fc = ys[into], cs[into]
        broken[fx, fc] = True
    return broken


def _closure(nxt: np.ndarray, broken: np.ndarray) -> np.ndarray:
    """``broken`` and every cell whose chain reaches it, over the whole table."""
    at = np.arange(nxt.shape[1])
    while True:
        more = broken | ((nxt >= 0) & broken[np.maximum(nxt, 0), at])
        if (more == broken).all():
            return broken
        broken = more


def _chains(nxt: np.ndarray, heights: np.ndarray | None, cy: np.ndarray, cc: np.ndarray):
    """Along the kept next-hop chain of each cell (cy, cc), none of them broken: its hop
    count to the home (INF if it never gets there), whether every hop goes down, and
    whether it is up*/down* (no hop up after a hop down); hops compared by ``heights``
    (None: none goes down)."""
    n, limit = len(cy), nxt.shape[0]
    cost = np.zeros(n, np.int32)
    down_only = np.ones(n, bool)
    legal = np.ones(n, bool)
    seen_down = np.zeros(n, bool)
    cur = cy.copy()
    live = np.flatnonzero(nxt[cy, cc] != -2)
    steps = 0
    while len(live) and steps <= limit:
        here = cur[live]
        to = nxt[here, cc[live]]
        gd = heights[to] < heights[here] if heights is not None else np.zeros(len(live), bool)
        legal[live] &= ~(~gd & seen_down[live])
        down_only[live] &= gd
        seen_down[live] |= gd
        cost[live] += 1
        cur[live] = to
        live = live[nxt[to, cc[live]] != -2]
        steps += 1
    cost[live], down_only[live], legal[live] = INF, False, False  # a loop: never home
    return cost, down_only, legal


def _neighbours(table: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``rows`` its neighbours (``table``'s, padded with -1 to the most any of
    them has) and where the padding is."""
    present = np.zeros(len(table), bool)
    present[rows] = True
    width = max(int((table[present] >= 0).sum(1).max(initial=0)), 1)
    nb = table[rows, :width]
    return nb, nb < 0


def _relax(dist: np.ndarray, r: np.ndarray, c: np.ndarray, nbs: np.ndarray, barred: np.ndarray,
           only: np.ndarray | None = None) -> np.ndarray:
    """Shortest hop counts at the broken cells (r, c), through neighbours not ``barred``,
    over ``dist`` (what the other cells cost), repeated until nothing improves; cells
    outside ``only`` keep their value."""
    if only is not None:
        r, c, nbs, barred = r[only], c[only], nbs[only], barred[only]
    if not len(r):
        return dist
    while True:
        via = np.where(barred, INF, dist[nbs, c[:, None]]).min(1) + 1
        better = via < dist[r, c]
        if not better.any():
            return dist
        dist[r[better], c[better]] = via[better]


def _assign(G: Graph, T: np.ndarray, cols: np.ndarray, r: np.ndarray, c: np.ndarray, cand: np.ndarray,
            nb: np.ndarray, is_ca: np.ndarray, loads: dict[int, list[int]]) -> None:
    """Each broken cell its exit: the candidate port with the fewest channel-adapter LIDs
    routed through it at that switch (the moved ones counted as they go), lowest port on
    ties; cells of one switch with the same candidates are filled in one go (`fill`).
    ``loads``: per switch, its CA LIDs per port as T holds them, counted on a switch's first
    chunk and kept up to date (`fill` counts what it assigns): not a pass over the switch's
    whole row for every chunk of DLIDs (39,366 hosts: 31 chunks x 3,645 rows of 43,011)."""
    width = cand.shape[1]
    weights = np.left_shift(np.uint64(1), np.arange(min(width, 64), dtype=np.uint64)) if width <= 64 else None
    if weights is not None:
        keys = (cand.astype(np.uint64) * weights).sum(1)
    else:
        packed = np.ascontiguousarray(np.packbits(cand, axis=1))
        keys = np.unique(packed.view(np.dtype((np.void, packed.shape[1]))).ravel(), return_inverse=True)[1]
    order = np.lexsort((cols[c], keys, r))
    r, c, keys, cand, nb = r[order], c[order], keys[order], cand[order], nb[order]
    starts = np.flatnonzero(np.r_[True, (r[1:] != r[:-1]) | (keys[1:] != keys[:-1])])
    ends = np.r_[starts[1:], len(r)]
    row_end = np.r_[np.flatnonzero(r[1:] != r[:-1]) + 1, len(r)]
    x_prev, load = -1, [0]
    for a, b in zip(starts.tolist(), ends.tolist()):
        x = int(r[a])
        if x != x_prev:  # a new switch: what its kept entries load each port with
            mine = cols[c[a:row_end[np.searchsorted(row_end, a, side="right")]]]
            held = loads.get(x)
            if held is None:
                held = np.bincount(T[x][is_ca], minlength=256).tolist()
            load = loads[x] = (np.asarray(held) - np.bincount(T[x, mine[is_ca[mine]]], minlength=256)).tolist()
            x_prev = x
        ports = sorted(p for y in nb[a][cand[a]].tolist() for p in G.nbr_ports[x][y])
        lids = cols[c[a:b]]
        ca = lids[is_ca[lids]]
        if len(ca):
            T[x, ca] = fill(ports, load, len(ca))
        sw = lids[~is_ca[lids]]
        if len(sw):
            T[x, sw] = min(ports, key=lambda q: (load[q], q))
