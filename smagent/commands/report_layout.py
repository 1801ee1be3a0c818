"""Where `smagent report` draws each switch: tree levels, a grid, or layers.

Pure (no I/O, no drawing): the input is the switch graph only (switches, how many CA
ports each carries, the switch-to-switch cables), never node names, so fabrics of any
naming are laid out alike.

* **Levels**: a switch's rank is its distance (in cables) from the nearest switch that
  carries CA ports, plus one: leaves 1, then aggregation, spines, cores. When every cable
  joins adjacent ranks the fabric is drawn as a **tree** (leaves at the bottom). Leaves
  are ordered by pod (the connected parts of the tree below its top rank), and each rank
  above by the mean position of its neighbours below, so cables run as straight as they
  can.
* **Grid** (tori and meshes): through each switch the straight lines of the grid are
  found from the cables alone: two neighbours of a switch are *opposite* when they have no
  common neighbour but it (two neighbours at a right angle close a square). Following
  opposites gives the grid's lines, lines that cross are of the two dimensions, and a
  switch's coordinates are where its two lines cross the two lines through a corner (or
  any switch, on a torus). The result is checked whole (every cable one step along one
  dimension, wrapping only on a torus); anything else falls back to layers. Coordinates
  are recovered up to the grid's symmetries (which corner is the origin, which dimension
  is x). A 4 x 4 torus, where a ring of 4 is a square too and no neighbours are
  opposite by that rule, is found from the classes of cables parallel in some square.
* **Layered**: anything else, by the same ranks, ordered as a tree's.

`aggregate` groups switches for big fabrics: below the top rank by pod and rank, at the
top rank by which positions of the pods' switches they reach.
"""
from __future__ import annotations

import dataclasses
from collections import deque

#: from this many switches a tree is drawn by groups (pods and their ranks), not switch by switch
AGGREGATE_ABOVE = 200


@dataclasses.dataclass
class Layout:
    kind: str  # "tree", "grid" or "layered"
    pos: dict  # switch -> (x, y): x in 0..1 for trees and layers, grid coordinates for a grid
    rank: dict  # switch -> rank (1: carries CA ports); in a grid the y coordinate
    coords: dict | None = None  # grid: switch -> (x, y)
    size: tuple = (0, 0)  # grid: (X, Y)
    wrap: tuple = (False, False)  # grid: wrap-around cables in x, in y
    pod: dict = dataclasses.field(default_factory=dict)  # tree: switch -> pod number (below the top rank)
    ideals: tuple | None = None  # grid: the ideal load per dimension, once a picture computed it


def neighbours(switches, cables) -> dict:
    """switch -> set of switches it is cabled to (parallel cables once, self-cables dropped)."""
    nb: dict = {s: set() for s in switches}
    for a, b in cables:
        if a != b and a in nb and b in nb:
            nb[a].add(b)
            nb[b].add(a)
    return nb


def missing_cables(lay: Layout, nb: dict) -> list[tuple]:
    """The cables the fabric's own regularity says should be there and are not, as (lower,
    upper) pairs: in a tree, an upper switch that more than half of a switch's siblings (the
    switches of its rank sharing an upper neighbour with it) reach and it does not; in a grid,
    two switches next to each other with no cable between them. Sorted, so the same fabric
    draws the same."""
    out: set = set()
    if lay.kind == "tree":
        up = {s: {t for t in nb[s] if lay.rank[t] == lay.rank[s] + 1} for s in nb}
        for s in nb:
            sibs = [t for t in nb if t != s and lay.rank[t] == lay.rank[s] and up[t] & up[s]]
            if len(sibs) < 2:
                continue
            counts: dict = {}
            for t in sibs:
                for u in up[t]:
                    counts[u] = counts.get(u, 0) + 1
            out.update((s, u) for u, c in counts.items() if 2 * c > len(sibs) and u not in up[s])
    elif lay.kind == "grid" and lay.coords:
        at = {xy: s for s, xy in lay.coords.items()}
        for s, (x, y) in lay.coords.items():
            for nxt in ((x + 1, y), (x, y + 1)):
                t = at.get(nxt)
                if t is not None and t not in nb[s]:
                    out.add((s, t))
    return sorted(out, key=lambda c: (str(c[0]), str(c[1])))


def ranks(nb: dict, hosts: dict) -> dict:
    """Distance from the nearest switch carrying CA ports, plus one; switches no such
    switch reaches (or a fabric without CAs) are ranked from the first switch."""
    rank: dict = {}
    queue: deque = deque()
    for s in nb:
        if hosts.get(s):
            rank[s] = 1
            queue.append(s)
    while True:
        while queue:
            s = queue.popleft()
            for t in nb[s]:
                if t not in rank:
                    rank[t] = rank[s] + 1
                    queue.append(t)
        rest = [s for s in nb if s not in rank]
        if not rest:
            return rank
        top = max(rank.values(), default=0)
        rank[rest[0]] = top + 1
        queue.append(rest[0])


def compute(switches: list, cables: list, hosts: dict) -> Layout:
    """The layout of ``switches`` (ids, in a stable order), cabled as ``cables`` (pairs of
    ids), ``hosts``: id -> CA ports on that switch."""
    nb = neighbours(switches, cables)
    rank = ranks(nb, hosts)
    tree = max(rank.values(), default=1) > 1 and all(abs(rank[a] - rank[b]) == 1 for a in nb for b in nb[a])
    if not tree:
        grid = grid_coords(nb)
        if grid is not None:
            coords, size, wrap = grid
            return Layout("grid", {s: (float(x), float(y)) for s, (x, y) in coords.items()},
                          {s: y for s, (_x, y) in coords.items()}, coords, size, wrap)
    pods = _pods(nb, rank) if tree else {}
    pos = _ordered(switches, nb, rank, pods)
    return Layout("tree" if tree else "layered", pos, rank, pod=pods)


def _pods(nb: dict, rank: dict) -> dict:
    """Pod number of every switch below the top rank: the connected parts without the top."""
    top = max(rank.values())
    pod: dict = {}
    for s in nb:
        if s in pod or rank[s] == top:
            continue
        pod[s] = n = len(set(pod.values()))
        queue = deque([s])
        while queue:
            x = queue.popleft()
            for y in nb[x]:
                if y not in pod and rank[y] != top:
                    pod[y] = n
                    queue.append(y)
    return pod


def _ordered(switches: list, nb: dict, rank: dict, pods: dict) -> dict:
    """x in 0..1 per rank: rank 1 by pod then input order, each rank above by the mean x
    of its neighbours below (input order breaks ties); y is the rank."""
    order = {s: n for n, s in enumerate(switches)}
    pos: dict = {}
    for r in range(1, max(rank.values(), default=0) + 1):
        members = [s for s in switches if rank[s] == r]
        if r == 1:
            members.sort(key=lambda s: (pods.get(s, 0), order[s]))
        else:
            def below(s, r=r):
                # sorted: a float sum in set order (per-process string hashing) breaks ties
                # between equal means differently from run to run
                xs = sorted(pos[t][0] for t in nb[s] if rank[t] < r and t in pos)
                return (sum(xs) / len(xs) if xs else 0.5, order[s])
            members.sort(key=below)
        for i, s in enumerate(members):
            pos[s] = ((i + 0.5) / len(members), float(r))
    return pos


# ----------------------------------------------------------------------------- grid
def grid_coords(nb: dict):
    """((switch -> (x, y)), (X, Y), (wrap x, wrap y)) when the switch graph is a 2-D
    torus or mesh (see the module docstring), else None."""
    if len(nb) < 4 or any(len(v) > 4 or not v for v in nb.values()):
        return None
    start = next((s for s in nb if len(nb[s]) == 2), next(iter(nb)))  # a mesh's corner
    for dim in _dimension_choices(nb, start):
        found = _coords(nb, dim, start)
        if found is not None:
            return found
    return None


def _dimension_choices(nb: dict, start):
    """Ways to give every cable a dimension (frozenset cable -> 0 or 1), the likeliest
    first: from the opposites at each switch, else (a 4 x 4 torus, where every pair of
    neighbours closes a square) from the classes of cables parallel in some 4-cycle."""
    opposite = _opposites(nb)
    if opposite is not None:
        dim = _dimensions(nb, opposite, start)
        if dim is not None:
            yield dim
    classes = _parallel_classes(nb)
    ns = sorted(nb[start], key=str)
    if len(ns) != 4:
        return
    for partner in ns[1:]:
        first = {classes[frozenset((start, n))] for n in (ns[0], partner)}
        second = {classes[frozenset((start, n))] for n in ns if n not in (ns[0], partner)}
        if first & second:
            continue
        dim = {}
        for e, c in classes.items():
            if c not in first | second:
                break
            dim[e] = 0 if c in first else 1
        else:
            yield dim


def _opposites(nb: dict):
    """switch -> {neighbour: the neighbour opposite it}: two neighbours are opposite when
    they have no common neighbour but the switch; at a switch of four neighbours one such
    pair makes the other two a pair too. None when a neighbour has two opposites."""
    opposite: dict = {}
    for s, ns in nb.items():
        o: dict = {}
        for a in ns:
            for b in ns:
                if a != b and not (nb[a] & nb[b]) - {s}:
                    if a in o:
                        return None
                    o[a] = b
        if len(ns) == 4 and len(o) == 2:
            c, d = [n for n in ns if n not in o]
            o[c], o[d] = d, c
        opposite[s] = o
    return opposite


def _parallel_classes(nb: dict) -> dict:
    """frozenset cable -> class: the opposite sides of every 4-cycle joined (union-find)."""
    parent: dict = {}

    def find(e):
        while parent.setdefault(e, e) != e:
            parent[e] = parent[parent[e]]
            e = parent[e]
        return e
    for s, ns in nb.items():
        for a in ns:
            find(frozenset((s, a)))
            for b in ns:
                for c in (nb[a] & nb[b]) - {s} if a != b else ():
                    parent[find(frozenset((s, a)))] = find(frozenset((b, c)))
    return {e: find(e) for e in parent}


def _coords(nb: dict, dim: dict, start):
    if set(dim.values()) != {0, 1} or len(dim) != sum(len(v) for v in nb.values()) // 2:
        return None
    opposite: dict = {}  # from the dimensions: the other neighbour of the same dimension
    for s, ns in nb.items():
        opposite[s] = {}
        for d in (0, 1):
            same = [n for n in ns if dim[frozenset((s, n))] == d]
            if len(same) > 2:
                return None
            if len(same) == 2:
                opposite[s][same[0]], opposite[s][same[1]] = same[1], same[0]
    lines = [_components(nb, dim, d) for d in (0, 1)]
    walks = []
    for d in (0, 1):
        step = next(t for t in sorted(nb[start], key=str) if dim[frozenset((start, t))] == d)
        walk = _line(opposite, start, step)
        if walk is None:
            return None
        walks.append(walk)
    coords = {}
    for s in nb:
        xy = []
        for d in (0, 1):  # where the line of the other dimension through s crosses the walk
            other = lines[1 - d]
            hit = [i for i, w in enumerate(walks[d]) if other[w] == other[s]]
            if len(hit) != 1:
                return None
            xy.append(hit[0])
        coords[s] = tuple(xy)
    if len(walks[0]) < len(walks[1]):  # the longer dimension across the page
        coords = {s: (y, x) for s, (x, y) in coords.items()}
        walks.reverse()
    return _checked(nb, coords, (len(walks[0]), len(walks[1])))


def _dimensions(nb: dict, opposite: dict, start):
    """frozenset cable -> 0 or 1: opposite cables at a switch share a dimension, the others
    differ; None when that cannot hold."""
    first = frozenset((start, min(nb[start], key=str)))
    dim = {first: 0}
    queue = [first]
    while queue:
        e = queue.pop()
        for s in e:
            (a,) = e - {s}
            for b in nb[s]:
                if b == a:
                    continue
                f, want = frozenset((s, b)), dim[e] if opposite[s].get(a) == b else 1 - dim[e]
                if f not in dim:
                    dim[f] = want
                    queue.append(f)
                elif dim[f] != want:
                    return None
    return dim


def _components(nb: dict, dim: dict, d: int) -> dict:
    """switch -> the id of its line in dimension ``d`` (connected along cables of ``d``)."""
    comp: dict = {}
    for s in nb:
        if s in comp:
            continue
        comp[s] = s
        stack = [s]
        while stack:
            x = stack.pop()
            for y in nb[x]:
                if y not in comp and dim[frozenset((x, y))] == d:
                    comp[y] = s
                    stack.append(y)
    return comp


def _line(opposite: dict, start, nxt):
    """The switches along the straight line start, nxt, ... (to a dead end or back to start)."""
    line, prev, cur = [start], start, nxt
    while cur is not None and cur != start:
        if cur in line:
            return None
        line.append(cur)
        prev, cur = cur, opposite[cur].get(prev)
    return line


def _checked(nb: dict, coords: dict, size: tuple):
    X, Y = size
    if len(set(coords.values())) != len(coords):
        return None
    wrap = [False, False]
    for a in nb:
        for b in nb[a]:
            (ax, ay), (bx, by) = coords[a], coords[b]
            dx, dy = abs(ax - bx), abs(ay - by)
            if dy == 0 and dx == 1 or dx == 0 and dy == 1:
                continue
            if dy == 0 and dx == X - 1 and X > 2:
                wrap[0] = True
            elif dx == 0 and dy == Y - 1 and Y > 2:
                wrap[1] = True
            else:
                return None
    return coords, size, tuple(wrap)


# ----------------------------------------------------------------------------- groups
def aggregate(layout: Layout, nb: dict) -> dict:
    """switch -> group key for drawing a big tree by groups: (rank, pod) below the top
    rank; at the top, (rank, "top", the positions within their pod groups of the switches
    it reaches) so that cores serving the same position of every pod are one group."""
    top = max(layout.rank.values(), default=1)
    group: dict = {s: (r, layout.pod.get(s, 0)) for s, r in layout.rank.items() if r < top}
    members: dict = {}
    for s in sorted(group, key=lambda s: layout.pos[s][0]):
        members.setdefault(group[s], []).append(s)
    place = {s: i for ms in members.values() for i, s in enumerate(ms)}
    for s, r in layout.rank.items():
        if r == top:
            group[s] = (r, "top", tuple(sorted({place[t] for t in nb[s] if t in place})))
    return group
