"""Min-hop routing, balanced by routes per port (the idea of OpenSM's default engine).

For every destination switch a BFS over the switch graph gives hop counts; each switch
then sends a LID out of the least-loaded port among those on a shortest path. LIDs of
one port (LMC > 0) land on different shortest-path ports where there are several,
because each assignment raises that port's load.
"""
from __future__ import annotations

import heapq
from collections import deque

from smagent.routing import RoutingInput


def _hops_to(rin: RoutingInput, dest: int) -> dict[int, int]:
    dist = {dest: 0}
    q = deque([dest])
    while q:
        x = q.popleft()
        d = dist[x] + 1
        for _p, y in rin.adjacency[x]:
            if y not in dist:
                dist[y] = d
                q.append(y)
    return dist


def route(rin: RoutingInput) -> dict[int, dict[int, int]]:
    lft: dict[int, dict[int, int]] = {g: {} for g in rin.switches}
    load: dict[tuple[int, int], int] = {}
    by_home: dict[int, list[tuple[int, int]]] = {}
    for lid in sorted(rin.lid_homes):
        sw, port = rin.lid_homes[lid]
        by_home.setdefault(sw, []).append((lid, port))
    for dest in rin.switches:
        lids = by_home.get(dest)
        if not lids:
            continue
        dist = _hops_to(rin, dest)
        # candidate exits per switch: ports towards a neighbour one hop closer
        cands: dict[int, list[int]] = {}
        for x, dx in dist.items():
            if x == dest:
                continue
            cands[x] = [p for p, y in rin.adjacency[x] if dist.get(y, -1) == dx - 1]
        for lid, port in lids:
            lft[dest][lid] = port
        # Greedy "least-loaded shortest-path port" per switch. Only this switch's own
        # choices change its ports' loads, so a heap per switch gives the same answer as
        # re-scanning the candidates for every LID, much faster.
        for x, ports in cands.items():
            table = lft[x]
            if len(ports) == 1:
                (p,) = ports
                for lid, _ in lids:
                    table[lid] = p
                load[(x, p)] = load.get((x, p), 0) + len(lids)
                continue
            heap = [(load.get((x, p), 0), p) for p in ports]
            heapq.heapify(heap)
            for lid, _ in lids:
                n, p = heapq.heappop(heap)
                table[lid] = p
                heapq.heappush(heap, (n + 1, p))
            for n, p in heap:
                load[(x, p)] = n
    return lft
