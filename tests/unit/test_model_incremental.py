"""What the model and the daemon's bookkeeping keep or work out faster than from scratch
give what from scratch gives: `discovery.reach` against the plain breadth-first walk it
replaced (ties included: the first shortest path in port order), on fabrics cut at random."""
import collections
import random

import pytest

from smagent import discovery
from smagent.model import topogen
from smagent.transport.sim import SimTransport


def _reference_reach(nodes, links, local):
    """The walk as first written: a queue of every node reached, a path made per port."""
    lg, lp = local
    root = nodes[lg]
    paths = {lg: (0,)}
    ca_ports = {lg: {lp: (0,)}} if not root.is_switch else {}
    queue = collections.deque([lg])
    while queue:
        g = queue.popleft()
        n, here = nodes[g], paths[g]
        exits = range(1, n.num_ports + 1) if n.is_switch else ([lp] if g == lg else [])
        for p in exits:
            peer = links.get((g, p))
            if peer is None or peer[0] not in nodes:
                continue
            pg, pp = peer
            path = here + (p,)
            if not nodes[pg].is_switch:
                ca_ports.setdefault(pg, {}).setdefault(pp, path)
            if pg not in paths:
                paths[pg] = path
                queue.append(pg)
    return paths, ca_ports


def _fabrics():
    dual = topogen.variant(topogen.fat_tree_2(8), drop_nodes={"H1", "H6"}, dual=[("D0", ("L0", 2), ("L1", 3))])
    return [topogen.fat_tree_3(4), topogen.torus_2d(4, 3, 2), dual, topogen.damaged_fat_tree_2()]


@pytest.mark.parametrize("index", range(4))
def test_reach_is_the_plain_walk_on_cut_fabrics(index):
    rng = random.Random(index)
    topo = discovery.discover(SimTransport(_fabrics()[index]))
    pairs = sorted({tuple(sorted((a, b))) for a, b in topo.links.items()})
    roots = [topo.local] + [(g, 0) for g, n in topo.nodes.items() if n.is_switch][:2]
    for _round in range(40):
        links = dict(topo.links)
        for a, b in rng.sample(pairs, rng.randrange(0, len(pairs) // 3)):
            del links[a], links[b]
        nodes = dict(topo.nodes)
        for g in rng.sample(sorted(nodes), rng.randrange(0, 3)):
            if g != topo.local[0]:
                del nodes[g]
        for root in roots:
            if root[0] not in nodes:
                continue
            got, want = discovery.reach(nodes, links, root), _reference_reach(nodes, links, root)
            assert got == want
            assert [list(p) for p in got[1].values()] == [list(p) for p in want[1].values()]  # port order too
