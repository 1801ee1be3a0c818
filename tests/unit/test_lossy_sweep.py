"""Convergence on a lossy fabric, on the in-process simulator (issue 14): the retry
policy (`smagent.transport.retry`), discovery's repair passes and the sweep's repair
passes, each where it can be placed exactly. Live on ibsim: tests/live/test_lossy_live.py."""
import collections
import random

import pytest

from mad.attributes import AttrID, PortState
from mad.header import Method
from mad import smp as smpcodec
from smagent import discovery
from smagent.model import topogen
from smagent import sweep as sweepmod
from smagent.sim import SimFabric, trace
from smagent.transport.base import Request
from smagent.transport.retry import LATE_TO_RAISE, MAX_RETRIES, RetryPolicy, truncated_geometric_loss
from smagent.transport.sim import SimTransport


# -- the estimate and the policy -------------------------------------------------------------
def _answered_sample(p, allowed, n=600, seed=1):
    """{(failures, allowed): count} of the requests that got an answer with loss p per try."""
    rng, c = random.Random(seed), collections.Counter()
    for _ in range(n):
        k = 0
        while k < allowed and rng.random() < p:
            k += 1
        if k < allowed:
            c[(k, allowed)] += 1
    return c


@pytest.mark.parametrize("p", [0.1, 0.5, 0.88])
def test_loss_estimate_sees_through_the_truncation(p):
    # with 4 tries allowed and 88 % loss only a third of the requests are ever answered,
    # and those needed few tries: the naive ratio would say about 57 %
    c = _answered_sample(p, 4)
    naive = sum(k * v for (k, _), v in c.items()) / sum((k + 1) * v for (k, _), v in c.items())
    est = truncated_geometric_loss(c)
    assert abs(est - p) < 0.06, (est, p)
    if p > 0.8:
        assert naive < p - 0.2  # the truncation matters


def test_policy_raises_retries_with_loss_and_bounds_them():
    pol = RetryPolicy()
    assert pol.retries(3, 3) == 3 and not pol.lossy()  # nothing seen: as configured
    for (k, n), v in _answered_sample(0.5, 4).items():
        for _ in range(v):
            pol.answered(3, k, n)
    assert pol.lossy() and 7 <= pol.retries(3, 3) <= 12  # 0.5^10 ~ 1e-3
    assert pol.retries("lid", 3) == pol.retries(3, 3)  # a class never seen borrows the pooled estimate
    assert pol.retries(3, 0) == 0  # 0 retries configured (or asked for) stays 0
    for _ in range(600):
        pol.answered(5, 40, 48)
    assert pol.retries(5, 3) == MAX_RETRIES
    # the configured tries wait the configured timeout; the first extra ones back off,
    # bounded; later ones are lost tries, not late ones: the base timeout again
    assert pol.timeout_ms(3, 3, 200) == 200 and pol.timeout_ms(4, 3, 200) == 400
    assert pol.timeout_ms(5, 3, 200) == pol.timeout_ms(7, 3, 200) == 800
    assert pol.timeout_ms(8, 3, 200) == pol.timeout_ms(200, 3, 200) == 200
    waits = sum(pol.timeout_ms(a, 3, 200) for a in range(MAX_RETRIES + 1))
    assert waits < (MAX_RETRIES + 1) * 200 * 1.05  # a dead node on a lossy fabric: ~MAX_RETRIES timeouts
    for _ in range(LATE_TO_RAISE):
        pol.late_answer()  # SMAs answer late: every try waits longer, the later ones too
    assert pol.timeout_ms(0, 3, 200) == pol.timeout_ms(200, 3, 200) == 400 and pol.timeout_ms(4, 3, 200) == 800


def test_a_silent_node_does_not_raise_the_retries():
    """Requests that never get an answer (a node gone, an M_Key refused) say nothing of
    the path loss: retries stay as configured, and no repair pass asks again."""
    # H5 holds an M_Key at protection level 3: it drops every SMP without its key
    sim = SimFabric.from_fabric(topogen.fat_tree_2(4), node_caps={"H5": {"m_key": 0x1234, "m_key_protect_bits": 3}})
    t = SimTransport(sim)
    topo = discovery.discover(t)
    assert len(topo.unreachable) == 1 and "H5" not in {n.description for n in topo.nodes.values()}
    assert topo.passes == 1 and not t.policy.lossy()
    assert t.stats.timeouts == t.retries + 1  # one request, the configured tries, asked once


# -- the transport ---------------------------------------------------------------------------
def test_default_retries_follow_the_loss():
    t = SimTransport(topogen.fat_tree_2(4), drop_rate=0.5, seed=3)
    reqs = [Request(smpcodec.dr(Method.GET, AttrID.NODE_INFO, (0, 1))) for _ in range(400)]
    replies = t.execute(reqs)
    # once the loss is known, 3 retries (4 tries) are not the limit: they would lose about
    # 0.5^4 = 6 % (12 of 200); the policy aims at 1e-3 per request
    assert sum(not r.ok for r in replies[200:]) <= 2
    assert t.policy.highest > 3
    # an explicit retry count is obeyed
    t2 = SimTransport(topogen.fat_tree_2(4), drop_rate=0.5, seed=3)
    t2.execute(reqs[:200])
    lost = t2.execute([Request(smpcodec.dr(Method.GET, AttrID.NODE_INFO, (0, 1))) for _ in range(200)], retries=0)
    assert sum(not r.ok for r in lost) > 50


# -- the sweep -------------------------------------------------------------------------------
def converged(t):
    again = sweepmod.sweep(t, sweepmod.SweepOptions(dry_run=True))
    return again.sets_planned == 0 and not again.problems and not again.topology.unreachable


def all_reachable(t, r):
    hosts = r.topology.cas()
    src = (hosts[0].description, 1)
    return all(trace(t.sim, src, h.ports[1].lid).outcome == "delivered" for h in hosts[1:])


# (drop_rate loses SMPs at the local port too, even the first NodeInfo, which no loss
# seen yet can help: seeds where that one survives)
@pytest.mark.parametrize("rate, seed", [(0.3, 1), (0.3, 2), (0.5, 1), (0.5, 3)])
def test_default_sweep_converges_on_a_lossy_fabric(rate, seed):
    t = SimTransport(topogen.fat_tree_2(8), drop_rate=rate, seed=seed)
    r = sweepmod.sweep(t, sweepmod.SweepOptions())
    assert r.problems == [] and r.topology.unreachable == [], (r.problems[:3], r.topology.unreachable[:3])
    s = r.summary()
    # nearly every lost try is tried again (the few left are SMPs given up, then repaired)
    assert s["losses"] > 0 and s["retries"] >= 0.99 * s["losses"] and s["passes"] >= 1
    assert 0 < s["loss_estimate"] < 1
    t.sim.drop_rate = 0
    assert converged(t) and all_reachable(t, r)
    for n in t.sim:
        for p in range(1, n.num_ports + 1):
            if n.peers[p] is not None:
                assert n.state[p] == PortState.ACTIVE, (n.name, p)


class _LoseSetsTo(SimTransport):
    """Loses every PortInfo Set to one port while `losing` (the rest as drop_rate says)."""

    def __init__(self, *a, victim, **kw):
        super().__init__(*a, **kw)
        self.victim, self.losing = victim, True

    def _answer(self, raw, dlid):
        s = smpcodec.decode(raw)
        if (self.losing and s.method == Method.SET and s.attribute_id == AttrID.PORT_INFO and s.directed
                and tuple(s.path) == self.victim):
            return None
        return super()._answer(raw, dlid)


def test_a_lost_armed_set_is_repaired_in_a_second_pass():
    """A host's ARMED Set is lost (every try): its switch port is not sent ACTIVE (the SMA
    would refuse it: the neighbour is not ARMED), and the repair pass arms the host and
    activates both ends, in that order."""
    fab = topogen.fat_tree_2(4)
    probe = sweepmod.plan(SimTransport(fab), sweepmod.SweepOptions())
    host = next(n for n in probe.topology.cas() if n.description == "H5")
    t = _LoseSetsTo(fab, victim=host.port_paths[1], drop_rate=0.05, seed=2)
    order = []
    def sent(req):
        s = req.smp
        order.append((tuple(s.path), s.method, s.attribute_id,
                      s.attribute().port_state if s.attribute_id == AttrID.PORT_INFO and s.method == Method.SET else None))
    t.on_send = sent

    def progress(phase):
        if phase.startswith("repair_"):
            t.losing = False  # the fabric heals between the passes

    r = sweepmod.sweep(t, sweepmod.SweepOptions(progress=progress))
    assert r.passes == 2 and r.problems == [], r.problems
    assert r.repairs and r.repairs[0]["left_before"].get("ports_not_armed") == 1
    sim_host = t.sim.node("H5")
    assert sim_host.state[1] == PortState.ACTIVE and sim_host.peers[1][0].state[sim_host.peers[1][1]] == PortState.ACTIVE
    # wire order: the host's ARMED Set went out before any ACTIVE Set to it or its neighbour
    leaf, lport = host.port_paths[1][:-1], None
    armed = [i for i, (path, m, a, st) in enumerate(order) if path == host.port_paths[1] and st == PortState.ARMED]
    active = [i for i, (path, m, a, st) in enumerate(order) if path == host.port_paths[1] and st == PortState.ACTIVE]
    assert armed and active and max(armed) < min(active)
    assert converged(t)


def test_a_port_left_armed_is_activated():
    """A port some earlier run left ARMED (its ACTIVE Set lost) is activated by the next
    sweep: before, only INIT ports were."""
    fab = topogen.fat_tree_2(4)
    t = SimTransport(fab)
    sweepmod.sweep(t, sweepmod.SweepOptions())
    peer = t.sim.node("H3").peers[1]
    t.sim.set_port_state("H3", 1, PortState.ARMED)
    t.sim.set_port_state(peer[0].name, peer[1], PortState.ARMED)
    r = sweepmod.sweep(t, sweepmod.SweepOptions())
    assert r.problems == []
    assert t.sim.node("H3").state[1] == PortState.ACTIVE == peer[0].state[peer[1]]
    assert any("ARMED -> ACTIVE" in line for line in sweepmod.plan(
        SimTransport(t.sim), sweepmod.SweepOptions()).plan_lines()) is False  # converged: nothing planned


def test_no_repair_pass_on_a_fabric_that_loses_nothing():
    """A Set refused for good (a vanished node) on a loss-free fabric: one pass, reported."""
    fab = topogen.fat_tree_2(4)
    t = SimTransport(fab, retries=1, timeout_ms=5)

    def progress(phase):
        if phase == "lft_write":
            for p in range(1, 5):
                t.sim.unlink("S1", p)

    r = sweepmod.sweep(t, sweepmod.SweepOptions(progress=progress))
    assert r.passes == 1 and r.problems and not r.repairs


class _LoseGets(SimTransport):
    """Loses every Get of one attribute (never its Sets)."""

    def __init__(self, *a, attr, **kw):
        super().__init__(*a, **kw)
        self.attr = attr

    def _answer(self, raw, dlid):
        s = smpcodec.decode(raw)
        if s.method == Method.GET and s.attribute_id == self.attr:
            return None
        return super()._answer(raw, dlid)


def test_a_table_read_that_failed_is_a_note_once_its_write_is_confirmed():
    """Blocks that could not be read are written all the same; when the GetResp of the
    Set confirms them, the switch holds the plan: the failed read is a note (the block is
    not in the backup), not a failure. A dry run, which writes nothing, reports it."""
    fab = topogen.fat_tree_2(4)
    t = _LoseGets(fab, attr=AttrID.LINEAR_FORWARDING_TABLE, retries=1, timeout_ms=5)
    sweepmod.sweep(SimTransport(t.sim), sweepmod.SweepOptions())  # LinearFDBTop set: blocks are read
    dry = sweepmod.sweep(t, sweepmod.SweepOptions(dry_run=True))
    assert len([p for p in dry.problems if "LFT block 0" in p]) == len(fab.switches()), dry.problems
    r = sweepmod.sweep(t, sweepmod.SweepOptions())
    assert r.problems == [], r.problems
    assert sum("not in the backup" in n for n in r.notes) == len(fab.switches()), r.notes
    assert len(r.lft_changes) == len(fab.switches())  # written (unread blocks cannot be trusted)


def _max_in_flight(t, reqs) -> int:
    """The most SMPs the transport had in flight at once during one batch."""
    from smagent.transport import base
    seen = [0]
    real = base.Transport._post

    def post(self, req, inflight, *a):
        real(self, req, inflight, *a)
        seen[0] = max(seen[0], len(inflight))
    base.Transport._post = post
    try:
        t.execute(reqs)
    finally:
        base.Transport._post = real
    return seen[0]


def test_window_widens_on_a_clean_fabric_and_narrows_not_below_the_start():
    from smagent.transport.base import DEFAULT_WINDOW, START_WINDOW

    def batch(n=400):
        return [Request(smpcodec.dr(Method.GET, AttrID.NODE_INFO, (0, 1))) for _ in range(n)]
    clean = SimTransport(topogen.fat_tree_2(4))
    assert clean.window == DEFAULT_WINDOW == 32 and START_WINDOW == 8
    assert _max_in_flight(clean, batch()) == DEFAULT_WINDOW  # started at 8, doubled to the cap
    lossy = SimTransport(topogen.fat_tree_2(4), drop_rate=0.5, seed=1)
    assert _max_in_flight(lossy, batch()) <= 16 and lossy._cwnd == START_WINDOW  # halved, floored
    small = SimTransport(topogen.fat_tree_2(4), window=3)
    assert _max_in_flight(small, batch()) == 3  # --window below the start is obeyed
