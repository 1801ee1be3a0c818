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


class _Clock:
    now = 1000.0

    def __call__(self):
        return self.now


def _reference_lids(topo):
    """`Subnet.lids` and `by_port_guid` as first written: every node's LID-carrying ports."""
    lids, guids = {}, {}
    for n in topo.nodes.values():
        for p in n.lid_ports():
            guids[n.port_guid(p)] = (n.guid, p)
            pi = n.ports.get(p)
            if pi is None or not pi.lid:
                continue
            for lid in range(pi.lid, pi.lid + (1 if n.is_switch else 1 << pi.lmc)):
                lids[lid] = (n.guid, p)
    return lids, guids


def _check_held_model(d):
    """What the daemon's model and its SA work out once per model (or keep from the last
    one) is what a walk over the model's nodes and links from scratch gives."""
    from smagent.sm import audit
    sub = d.shared.subnet
    topo = sub.topology
    lids, guids = _reference_lids(topo)
    assert dict(sub.lids) == lids and dict(sub.by_port_guid) == guids
    for lid in list(lids) + [0, max(lids) + 1]:
        first = next((n.guid for n in topo.switches() if n.lid(0) == lid), None)
        assert sub.switch_at_lid(lid) == first
    assert audit.count(sub) == len(audit.items(sub)) == d.duties.audit.status(sub)["items"]
    recs = d.sa.agent._recs
    assert d.sa._end_ports() == {recs.gid(n, p): sub.base_lid(n, p) for n in topo.nodes.values()
                                 for p in n.lid_ports() if sub.base_lid(n, p)}
    paths, ca_ports = _reference_reach(topo.nodes, topo.links, topo.local)
    assert {g: n.path for g, n in topo.nodes.items()} == paths
    assert {g: n.port_paths for g, n in topo.nodes.items() if not n.is_switch} == ca_ports


@pytest.mark.parametrize("seed", range(3))
def test_random_repairs_leave_what_from_scratch_gives(seed):
    """Cables cut and put back and whole switches lost and back, at random, on a small
    fat tree: after each repair the held model's LIDs, port GUIDs, switches by LID, end
    ports, audit count and DR paths are what a computation from scratch gives."""
    from smagent.sm.daemon import Daemon, DaemonOptions
    rng = random.Random(seed)
    t = SimTransport(topogen.fat_tree_3(4))
    t.serve()
    clock = _Clock()
    d = Daemon(t, DaemonOptions(sweep_interval=10 ** 6), clock=clock)
    d.start()
    sim = t.sim
    _check_held_model(d)
    ours = sim.node(t.local[0]).peers[t.local[1]][0]  # our own leaf keeps its cables: cut off, we sweep
    full = d.counters.sweeps
    cut: list[tuple[tuple[str, int], tuple[str, int]]] = []
    for _step in range(10):
        if cut and rng.random() < 0.4:
            for (a, pa), (b, pb) in cut:
                sim.link(a, pa, b, pb)
            cut = []
        else:
            sw = rng.choice([n for n in sim.switches() if n is not ours])
            ports = [p for p in range(1, sw.num_ports + 1) if sw.peers[p] is not None]
            for p in rng.sample(ports, 1 if rng.random() < 0.7 else len(ports)):
                peer = sim.unlink(sw.name, p)
                if peer is not None:
                    cut.append(((sw.name, p), peer))
        for _ in range(6):
            clock.now += 0.5
            d.step(max_wait=0)
        assert d.last_sweep.get("incremental")  # a repair, not a full sweep that would hide what it left
        _check_held_model(d)
    assert d.counters.sweeps > full


@pytest.mark.parametrize("lost", ["S0", "A1", "L2"])
def test_a_part_cut_off_is_dropped_and_the_paths_set_as_from_scratch(lost):
    """A switch lost with every link: `repair._paths_around` drops what is cut off and
    sets the paths from the one walk that found it cut off; the same as dropping it and
    walking again from scratch."""
    from types import SimpleNamespace
    from smagent.model.subnet import Subnet
    from smagent.sm import repair
    t = SimTransport(topogen.fat_tree_3(4))
    topo = discovery.discover(t)
    guid = next(g for g, n in topo.nodes.items() if n.description == lost)
    got, want = Subnet.build(topo.fork()), Subnet.build(topo.fork())
    for sub in (got, want):
        for p in range(1, sub.topology.nodes[guid].num_ports + 1):
            peer = sub.topology.links.pop((guid, p), None)
            if peer is not None:
                del sub.topology.links[peer]
    assert repair._paths_around(SimpleNamespace(keys=None), got, {}, set(), set(), [])
    w = want.topology
    assert not discovery.shortest_paths(w.nodes, w.links, w.local)
    assert repair._drop_cut_off(want, _reference_reach(w.nodes, w.links, w.local)[0], {}, set(), []) is not None
    assert discovery.shortest_paths(w.nodes, w.links, w.local)
    g = got.topology
    assert g.nodes.keys() == w.nodes.keys() and g.links == w.links and guid not in g.nodes
    assert {k: (n.path, n.port_paths) for k, n in g.nodes.items()} == {k: (n.path, n.port_paths)
                                                                      for k, n in w.nodes.items()}
