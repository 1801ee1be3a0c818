"""The daemon's first sweep plans on the discovery the mastership just made (issue 42): the
fabric is walked once from start until routed, with the same tables as when the sweep walks
it again; a trap during that discovery, or a discovery too old, makes the sweep walk again
(`smagent.sm.policy.reuse_discovery`)."""
from __future__ import annotations

import collections

import pytest

from mad import smp as smpcodec
from mad.attributes import AttrID
from mad.header import Method
from smagent import sweep as sweepmod
from smagent.config import mkeys
from smagent.model import topogen
from smagent.sm import policy
from smagent.sm.daemon import Daemon, DaemonOptions
from smagent.transport.sim import SimTransport


class CountingSim(SimTransport):
    """Counts the NodeInfo Gets by DR path; ``on_node_info(n)`` is called before the n-th."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.node_infos: collections.Counter = collections.Counter()
        self.on_node_info = lambda n: None

    def _answer(self, raw, dlid):
        m = smpcodec.decode(raw)
        if m.method == Method.GET and m.attribute_id == AttrID.NODE_INFO and m.directed:
            self.on_node_info(sum(self.node_infos.values()) + 1)
            self.node_infos[m.path] += 1
        return super()._answer(raw, dlid)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def bring_up(t: SimTransport) -> Daemon:
    """A daemon started on ``t`` (its discovery, the election, the first sweep)."""
    t.serve()
    d = Daemon(t, DaemonOptions(sweep_interval=0), clock=Clock())
    d.start()
    assert d.last_sweep is not None and d.last_sweep["ok"] and d.last_sweep["problems"] == 0
    return d


def programmed(t: SimTransport) -> dict:
    """Every node's LIDs and every switch's LFT as the simulated fabric holds them."""
    return {n.name: ([pi.lid for pi in n.pi], bytes(n.lft) if n.lft is not None else None) for n in t.sim}


def all_pairs_delivered(sim) -> bool:
    cas = [(n.name, p) for n in sim if not n.is_switch for p in range(1, n.num_ports + 1) if n.peers[p]]
    return all(sim.trace(a, sim.port_lid(b)).outcome == "delivered" for a in cas for b in cas if a != b)


def test_the_first_sweep_walks_the_fabric_once_with_the_tables_of_two_walks(monkeypatch):
    t = CountingSim(topogen.fat_tree_3(4))
    d = bring_up(t)
    root = (0,)  # also read by `Mastership.start`, to learn our port GUID
    assert t.node_infos[root] == 2
    assert {n for p, n in t.node_infos.items() if p != root} == {1}  # every other path once
    walk = sum(t.node_infos.values())
    assert d.topo is not None and len(t.node_infos) >= len(d.topo.nodes) > 20

    monkeypatch.setattr(policy, "REUSE_DISCOVERY_S", -1.0)  # every discovery too old: the sweep walks
    old = CountingSim(topogen.fat_tree_3(4))
    bring_up(old)
    assert old.node_infos == collections.Counter({p: 2 * n - (p == root) for p, n in t.node_infos.items()})
    assert sum(old.node_infos.values()) == 2 * walk - 1
    assert programmed(t) == programmed(old)  # same LIDs, same LFTs
    assert all_pairs_delivered(t.sim)


def test_a_trap_during_the_discovery_makes_the_first_sweep_walk_again():
    """A restarted SM (the fabric routed by the one before, so switches send it traps): a
    leaf uplink cut during its discovery, after the walk crossed it. The sweep walks again
    and routes around it at once, before the trap's repair."""
    first = CountingSim(topogen.fat_tree_3(4))
    bring_up(first)
    walk = sum(first.node_infos.values()) - 1  # without `Mastership.start`'s own read
    t = CountingSim(first.sim)

    def cut(n):
        if n == walk:  # the walk's last NodeInfo: every link has been walked
            t.sim.unlink("L2", 4)
    t.on_node_info = cut
    t.serve()
    d = Daemon(t, DaemonOptions(sweep_interval=0), clock=Clock())
    d.start()
    assert d.shared.traps_heard > 0 and d.counters.repairs == 0  # heard during the walk, not yet acted on
    assert sum(t.node_infos.values()) == 1 + walk + walk - 1  # the sweep's walk: one link fewer
    assert d.last_sweep["ok"]
    assert all_pairs_delivered(t.sim)  # no route over the cut uplink


def test_with_m_key_protection_the_sweep_walks_again(tmp_path):
    """The daemon's walk came before the sweep's guid2mkey taught the key chain
    (`sweep.protect.prepare_keys`): the sweep does not plan on it."""
    t = CountingSim(topogen.fat_tree_3(4))
    t.serve()
    prot = mkeys.Protection(level=2, lease=60, key=0x1234)
    opts = DaemonOptions(sweep_interval=0, state_dir=str(tmp_path / "state"),
                         sweep=sweepmod.SweepOptions(mkey_protection=prot))
    d = Daemon(t, opts, clock=Clock())
    d.start()
    assert d.last_sweep["ok"] and d.last_sweep["problems"] == 0
    assert t.node_infos[(0,)] == 3 and {n for p, n in t.node_infos.items() if p != (0,)} == {2}


@pytest.mark.parametrize("age, unreachable, reuse", [
    (0.0, 0, True), (policy.REUSE_DISCOVERY_S, 0, True), (policy.REUSE_DISCOVERY_S + 0.1, 0, False),
    (None, 0, False), (0.0, 1, False), (-1.0, 0, False)])
def test_reuse_rule(age, unreachable, reuse):
    assert policy.reuse_discovery(age, unreachable) is reuse


def test_a_discovery_is_planned_on_once():
    """A sweep that failed is tried again with a walk: `take_discovery` hands a walk out once."""
    t = CountingSim(topogen.fat_tree_3(4))
    d = bring_up(t)
    s = d.shared
    s.walked = (s.clock(), s.traps_heard)
    handed = s.take_discovery()  # a fork: the sweep completes it, never the held model's own
    assert handed is not None and handed is not s.topo
    assert handed.nodes.keys() == s.topo.nodes.keys() and handed.links == s.topo.links
    assert s.take_discovery() is None
    s.walked = (s.clock() - policy.REUSE_DISCOVERY_S - 1, s.traps_heard)
    assert s.take_discovery() is None
