"""Min-hop routing, balanced by routes per port (OpenSM's default engine, same rules).

Every switch sends each LID out of a port on a shortest path to the LID's switch; among
several such ports, the one with the fewest routes so far (ties: lowest port number),
handling the LIDs in OpenSM's order (see `smagent.routing._core` for the order, the
LMC > 0 spreading and why switch LIDs are not counted).

Not deadlock-free in general: on a ring or torus shortest paths go both ways round, so
the channel dependency graph has cycles (`smagent verify` reports them). Use updn there.
"""
from __future__ import annotations

from smagent.routing.base import PatchRule, RoutingInput
from smagent.routing._core import Graph, assign_switch, finish, group_destinations, new_table, next_hop_mask


def route(rin: RoutingInput):
    G = Graph(rin)
    at = G.levels()
    tables = []
    for x in range(G.S):
        lx = at[x]
        port_masks = [(tuple(G.nbr_ports[x][y]), next_hop_mask(lx, at[y])) for y in G.nbrs[x]]
        groups = group_destinations(G.all & ~(1 << x), port_masks)
        table = new_table(G)
        assign_switch(G, x, groups, table)  # unreachable: another component; the sweep reports it
        tables.append(table)
    routes = finish(G, tables)
    routes.patch_rule = PatchRule("minhop")  # shortest paths, no deadlock promise to keep
    return routes
