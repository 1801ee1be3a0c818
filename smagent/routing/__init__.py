"""Routing engines behind one small interface.

An engine takes a `RoutingInput` (the switch graph, where every LID lives) and returns,
per switch GUID, a mapping LID -> exit port. The sweep never special-cases an engine.
"""
from __future__ import annotations

import dataclasses

from smagent.discovery import Topology
from smagent.lids import LidPlan


@dataclasses.dataclass
class RoutingInput:
    switches: list[int]  # switch GUIDs, deterministic order
    # switch -> list of (port, neighbour switch) for every switch-to-switch link
    adjacency: dict[int, list[tuple[int, int]]]
    # destination LID -> (switch it hangs off, port on that switch); port 0 = the switch itself
    lid_homes: dict[int, tuple[int, int]]
    num_ports: dict[int, int]

    @classmethod
    def build(cls, topo: Topology, plan: LidPlan) -> "RoutingInput":
        switches = sorted(n.guid for n in topo.switches())
        sw = set(switches)
        adjacency: dict[int, list[tuple[int, int]]] = {g: [] for g in switches}
        lid_homes: dict[int, tuple[int, int]] = {}
        for (g, p), (g2, p2) in topo.links.items():
            if g in sw and g2 in sw:
                adjacency[g].append((p, g2))
        for g in switches:
            adjacency[g].sort()
            pg = topo.nodes[g].port_guids.get(0, g)
            if pg in plan.lids:
                lid_homes[plan.lids[pg]] = (g, 0)
        for n in topo.cas():
            for p in n.lid_ports():
                pg = n.port_guids.get(p)
                peer = topo.links.get((n.guid, p))
                if pg not in plan.lids or peer is None or peer[0] not in sw:
                    continue  # a CA-to-CA cable or an unassigned port: nothing to route to
                base = plan.lids[pg]
                for lid in range(base, base + (1 << plan.lmc)):
                    lid_homes[lid] = peer
        return cls(switches, adjacency, lid_homes, {g: topo.nodes[g].num_ports for g in switches})


ENGINES = ("minhop",)


def route(engine: str, rin: RoutingInput) -> dict[int, dict[int, int]]:
    if engine == "minhop":
        from smagent.routing.minhop import route as minhop
        return minhop(rin)
    raise ValueError(f"unknown routing engine {engine!r}: choose one of {', '.join(ENGINES)}")
