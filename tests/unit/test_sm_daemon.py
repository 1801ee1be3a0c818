"""The daemon (`smagent.sm.daemon`) on the in-process simulator: bring-up, traps repaired
with a TrapRepress each, light sweeps with Gets only, SMInfo answered, handover both ways,
takeover after a silent master, LIDs kept across restarts, the control socket, a cut
cable on a fat tree patched (only the blocks through it written), and
PortInfo.ClientReregister once per mastership.

Other SMs are the simulator's attached SMs (static SMInfo that honours the SubnSet(SMInfo)
controls); their requests to us are delivered with `SimTransport.deliver`. A fake clock
drives the timers, so nothing here waits for real intervals."""
from __future__ import annotations

import collections
import dataclasses

import pytest

from mad import smp as smpcodec
from mad.attributes import CAP_IS_CLIENT_REREGISTRATION, AttrID, PortInfo, SMInfo, SMState
from mad.forwarding import portinfo_modifier
from mad.header import Method
from smagent.model import topogen
from smagent.planning import lidassign as lids
from smagent.sm import control
from smagent.sm.daemon import Daemon, DaemonOptions
from smagent.sm.statemachine import DEFAULT_SM_KEY, INVALID_VALUE_STATUS, Control
from smagent.transport.base import Request
from smagent.transport.sim import SimTransport


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def make(tmp_path=None, *, priority=0, **kw):
    t = SimTransport()
    t.serve()
    clock = Clock()
    opts = DaemonOptions(priority=priority, state_dir=str(tmp_path / "state") if tmp_path else None, **kw)
    return t, Daemon(t, opts, clock=clock), clock


def run_for(d, clock, seconds, step=0.5):
    end = clock.now + seconds
    while clock.now < end:
        clock.now += step
        d.step(max_wait=0)


def sets_sent(t, since: collections.Counter) -> int:
    return sum(v for k, v in (collections.Counter(t.stats.by_kind) - since).items() if k.startswith("SubnSet"))


def outbox_smps(t):
    return [smpcodec.decode(raw) for raw, _dlid in t.outbox]


def fresh_plan_is_empty(t, d=None, routes: bool = True) -> bool:
    """A full plan from scratch (discovery and every table read) finds nothing to write,
    multicast as `run` programs it while no host has joined a group: the broadcast MLID
    on no switch. With the daemon ``d``: auto keeps the engine it chose, as ``d`` does.
    ``routes`` False: LFT blocks left out (a repair that patched the routes kept them where
    routing afresh would balance again)."""
    from smagent import sweep
    from smagent.planning import multicast
    memory = dataclasses.replace(d.opts.sweep.routing_memory) if d is not None else None
    opts = sweep.SweepOptions(force=True, mcast_groups=multicast.GroupSpec([]),
                              mcast_released=frozenset({multicast.DEFAULT_MLID}), routing_memory=memory)
    r = sweep.plan(t, opts)
    return r.sets_planned == (0 if routes else len(r.lft_changes))


def all_pairs_delivered(sim) -> None:
    cas = [(n.name, p) for n in sim if not n.is_switch for p in range(1, n.num_ports + 1) if n.peers[p]]
    for src in cas:  # every host pair, through the tables as written
        for dst in cas:
            if src != dst:
                assert sim.trace(src, sim.port_lid(dst)).outcome == "delivered", (src, dst)


def test_a_hosts_link_cut_and_return_are_repaired_incrementally():
    """Issue 30.5: a host port going down or coming back costs its LID's LFT entries (and
    its groups' MFT entries: test_sa_groups), not a full sweep (once: a full sweep for each)."""
    t, d, clock = make(sweep_interval=10)
    d.start()
    sim = t.sim
    before = {n.name: bytes(n.lft) for n in sim.switches()}
    lid = sim.port_lid(("H2", 1))
    bring_up = t.stats.sent
    peer = sim.unlink("L1", 2)
    assert peer == ("H2", 1)
    run_for(d, clock, 1)
    assert d.counters.repairs == 1 and d.last_sweep["incremental"] and d.last_sweep["problems"] == 0
    assert d.last_sweep["smps"] < bring_up / 5  # 8 PortInfo Gets of L1, then the blocks that hold the LID
    assert d.last_sweep["lft_blocks"] >= 1  # its routes
    assert fresh_plan_is_empty(t)  # the tables as a full sweep from scratch would leave them
    assert all(n.lft[lid] == 0xFF for n in sim.switches())
    all_pairs_delivered(sim)
    sim.link("L1", 2, *peer)
    run_for(d, clock, 1)
    assert d.counters.repairs == 2 and d.last_sweep["incremental"] and d.last_sweep["problems"] == 0
    assert d.last_sweep["smps"] < bring_up / 5
    assert sim.port_lid(("H2", 1)) == lid  # the same LID, ARMED and ACTIVE again
    assert {n.name: bytes(n.lft) for n in sim.switches()} == before
    assert fresh_plan_is_empty(t)
    all_pairs_delivered(sim)


def _ftree_daemon(unplugged=None):
    """The daemon over a complete 3-level fat tree (auto: ftree), brought up with the
    port ``unplugged`` (name, port) not cabled; (transport, daemon, clock, its peer)."""
    t = SimTransport(topogen.fat_tree_3(8))
    peer = t.sim.unlink(*unplugged) if unplugged else None
    t.serve()
    clock = Clock()
    d = Daemon(t, DaemonOptions(sweep_interval=10), clock=clock)
    d.start()
    return t, d, clock, peer


def test_a_host_cable_clears_its_lid_and_keeps_every_other_route():
    """On a complete fat tree a host cable pulled used to route afresh (ftree balancing
    what is left: 2,818 LFT blocks at 1,024 hosts): now only its LID's entries are cleared
    (one block a switch) and every other entry stays; its return puts them back."""
    t, d, clock, _peer = _ftree_daemon()
    sim = t.sim
    before = {n.name: bytearray(n.lft) for n in sim.switches()}
    lid = sim.port_lid(("H5", 1))
    peer = sim.unlink("H5", 1)
    for step in ("cut", "back"):
        kinds = collections.Counter(t.stats.by_kind)
        run_for(d, clock, 1)
        assert d.last_sweep["incremental"] and d.last_sweep["problems"] == 0, d.last_sweep
        assert lft_sets(t, kinds) == len(sim.switches()) == d.last_sweep["routes_moved"]
        want = {name: bytearray(table) for name, table in before.items()}
        if step == "cut":
            assert "LIDs that left" in d.status()["routing"]["reason"]
            for table in want.values():
                table[lid] = 0xFF
        else:
            assert "put back" in d.status()["routing"]["reason"]
        assert {n.name: bytearray(n.lft) for n in sim.switches()} == want, step
        all_pairs_delivered(sim)
        if step == "cut":
            sim.link("H5", 1, *peer)
    assert fresh_plan_is_empty(t, d)


def test_a_new_host_gets_its_routes_and_nothing_else_moves():
    """A host cabled after the bring-up (a new LID): its LID's entries routed as a patch
    (one block a switch, as ftree would route it: down from above, up to a switch above
    it), every other entry as it was; before, ftree routed the fabric afresh."""
    t, d, clock, peer = _ftree_daemon(unplugged=("H5", 1))
    sim = t.sim
    before = {n.name: bytearray(n.lft) for n in sim.switches()}
    kinds = collections.Counter(t.stats.by_kind)
    sim.link("H5", 1, *peer)
    run_for(d, clock, 1)
    assert d.last_sweep["incremental"] and d.last_sweep["problems"] == 0, d.last_sweep
    assert "LIDs that left or came" in d.status()["routing"]["reason"], d.status()["routing"]
    lid = sim.port_lid(("H5", 1))
    assert lft_sets(t, kinds) == len(sim.switches()) == d.last_sweep["routes_moved"]
    after = {n.name: bytearray(n.lft) for n in sim.switches()}
    for name, table in after.items():
        assert table[lid] != 0xFF, name
        table[lid] = before[name][lid] if lid < len(before[name]) else 0xFF
        assert table[:len(before[name])] == before[name], name
    all_pairs_delivered(sim)


def test_a_dual_port_hosts_ports_cut_and_returned_are_repaired_incrementally():
    """One port of a dual-port host away: the CA stays, with its other port; both away:
    the CA goes; each return brings its port back (the tables a full sweep would leave but
    the routes: kept, patched, or those before the cut put back)."""
    from smagent.model import topogen
    fabric = topogen.variant(topogen.fat_tree_2(4), drop_nodes=("H3", "H4"), dual=(("D0", ("L1", 2), ("L2", 1)),))
    t = SimTransport(fabric)
    t.serve()
    clock = Clock()
    d = Daemon(t, DaemonOptions(sweep_interval=10), clock=clock)
    d.start()
    sim = t.sim
    cut = {}
    for i, step in enumerate([("cut", 1), ("link", 1), ("cut", 1), ("cut", 2), ("link", 1), ("link", 2)]):
        what, port = step
        if what == "cut":
            cut[port] = sim.unlink("D0", port)
        else:
            sim.link("D0", port, *cut.pop(port))
        run_for(d, clock, 1)
        assert d.last_sweep["incremental"] and d.last_sweep["problems"] == 0, step
        # a cut clears the port's LID and keeps the routes (afresh, ftree would balance again),
        # a port back is routed as a patch too, or gets the routes before its cut back (the
        # second step: the tables of the bring-up)
        assert fresh_plan_is_empty(t, routes=i == 1), step
        all_pairs_delivered(sim)
    assert d.counters.repairs == 6


def test_master_repairs_from_traps_and_relink_restores_the_tables():
    t, d, clock = make(sweep_interval=10)
    d.start()
    assert d.sm.state == SMState.MASTER and d.counters.sweeps == 1
    sim = t.sim
    before = {n.name: bytes(n.lft) for n in sim.switches()}
    peer = sim.unlink("L3", 5)
    assert sim.counters["traps"] == 2  # both ends are switches with a LID and a MasterSMLID
    run_for(d, clock, 1)
    assert d.counters.traps == 2 and d.counters.repairs == 1 and d.counters.sweeps == 2
    assert d.last_sweep["incremental"] and d.last_sweep["smps"] < 60  # no rediscovery, no table reads
    assert fresh_plan_is_empty(t)
    reps = [s for s in outbox_smps(t) if s.method == Method.TRAP_REPRESS]
    assert len(reps) == 2 and all(s.attribute_id == AttrID.NOTICE for s in reps)
    assert {n.name: bytes(n.lft) for n in sim.switches()} != before
    all_pairs_delivered(sim)
    sim.link("L3", 5, *peer)
    run_for(d, clock, 1)
    assert d.counters.repairs == 2 and d.last_sweep["incremental"]
    assert {n.name: bytes(n.lft) for n in sim.switches()} == before
    assert fresh_plan_is_empty(t)  # ports armed and activated, PortStateChange cleared
    assert d.last_sweep["why"].startswith("repair after trap 128")


def lft_sets(t, since: collections.Counter) -> int:
    return (collections.Counter(t.stats.by_kind) - since)["SubnSet(LinearForwardingTable)"]


def blocks(sim) -> dict[tuple[str, int], bytes]:
    return {(n.name, b): bytes(n.lft[b * 64:(b + 1) * 64]) for n in sim.switches() for b in range(len(n.lft) // 64)}


def test_a_cut_leaf_uplink_rewrites_only_the_blocks_through_it_and_the_relink_restores_them():
    """On a complete fat tree (auto takes ftree) the repair of a cut cable patches the
    known routes (`smagent.routing.patch`): it writes only the LFT blocks whose entries
    crossed the cut (ftree routing afresh rebalanced and rewrote 153 blocks of this
    fabric's 320); the relink puts the routes from before the cut back (`patch.restore`):
    exactly those blocks, what ftree routing afresh would write."""
    t = SimTransport(topogen.fat_tree_3(8))
    t.serve()
    clock = Clock()
    d = Daemon(t, DaemonOptions(sweep_interval=10), clock=clock)
    d.start()
    assert d.last_sweep["ok"] and d.published_status()["routing"]["engine"] == "ftree"
    sim = t.sim
    before = blocks(sim)
    kinds = collections.Counter(t.stats.by_kind)
    peer = sim.unlink("L0", 5)
    run_for(d, clock, 1)
    assert d.counters.repairs == 1 and d.last_sweep["incremental"] and d.last_sweep["problems"] == 0
    cut = blocks(sim)
    changed = {k for k in before if cut[k] != before[k]}
    written = lft_sets(t, kinds)
    assert written == len(changed) and written <= 60, written  # routed afresh: 153
    moved = d.last_sweep["routes_moved"]
    assert moved > 0 and "route entries moved" in d.status()["last_change"]["what"]
    assert "kept" in d.status()["routing"]["reason"]
    all_pairs_delivered(sim)
    kinds = collections.Counter(t.stats.by_kind)
    sim.link("L0", 5, *peer)
    run_for(d, clock, 1)
    assert d.counters.repairs == 2 and d.last_sweep["routes_moved"] == moved  # the patch undone
    assert "put back" in d.status()["routing"]["reason"]
    assert blocks(sim) == before and lft_sets(t, kinds) == written
    assert fresh_plan_is_empty(t, d)  # what ftree afresh would write: nothing
    all_pairs_delivered(sim)
    # two cuts, the first back first: not what the last patch lost, so routed afresh
    cables = []
    for name, port in (("L0", 5), ("L1", 6)):
        cables.append((name, port, sim.unlink(name, port)))
        run_for(d, clock, 1)
        assert d.last_sweep["routes_moved"] > 0 and "kept" in d.status()["routing"]["reason"]
    assert d.counters.repairs == 4
    for name, port, far in cables:
        sim.link(name, port, *far)
        run_for(d, clock, 1)
        assert d.last_sweep["incremental"] and "routes_moved" not in d.last_sweep, d.last_sweep
    assert d.counters.repairs == 6 and blocks(sim) == before  # ftree afresh is deterministic
    all_pairs_delivered(sim)

def test_only_the_newest_patches_are_kept_to_put_back(monkeypatch):
    """A running SM keeps the newest `patch.UNDO_KEPT` patches (each small: the moved
    entries, the lost link ends): cables back in the reverse order get the routes before
    each cut while their patch is kept, then the fabric is routed afresh."""
    from smagent.routing import patch as patchmod
    monkeypatch.setattr(patchmod, "UNDO_KEPT", 2)
    t = SimTransport(topogen.fat_tree_3(8))
    t.serve()
    clock = Clock()
    d = Daemon(t, DaemonOptions(sweep_interval=10), clock=clock)
    d.start()
    sim, memory = t.sim, d.shared.opts.sweep.routing_memory
    before = blocks(sim)
    cables = []
    for name in ("L0", "L2", "L4"):
        cables.append((name, sim.unlink(name, 5)))
        run_for(d, clock, 1)
        assert "kept" in d.status()["routing"]["reason"] and len(memory.undo) <= 2
    for (name, far), put_back in zip(reversed(cables), (True, True, False)):
        sim.link(name, 5, *far)
        run_for(d, clock, 1)
        assert d.last_sweep["incremental"] and d.last_sweep["problems"] == 0
        assert ("put back" in d.status()["routing"]["reason"]) == put_back, d.status()["routing"]
        all_pairs_delivered(sim)
    assert memory.undo == [] and blocks(sim) == before  # ftree afresh: the tables of the bring-up


def test_a_repair_plans_the_ports_of_what_it_read_again_only(monkeypatch):
    """The PortInfo of a port both of whose ends are as the last sweep left them is not
    planned again (`sweep.ports.settled_before`): a repair plans what it read again."""
    from smagent import linkconf
    t, d, clock = make(sweep_interval=10)
    d.start()
    planned = []
    real = linkconf.port_fields
    monkeypatch.setattr(linkconf, "port_fields", lambda topo, n, p, o: planned.append((n.description, p)) or real(topo, n, p, o))
    everything = sum(len(n.ports) for n in d.known.topology.nodes.values())
    peer = t.sim.unlink("L3", 5)
    run_for(d, clock, 1)
    assert d.last_sweep["incremental"] and planned and len(planned) < everything // 3, (len(planned), everything)
    topo = d.known.topology
    read = {n.guid for n in topo.nodes.values() if n.description in ("L3", "S1")}  # the reporting switches
    ends = {(g, p) for (g, p), (g2, _p2) in topo.links.items() if g in read or g2 in read}
    assert {(n.description, p) for g, p in ends for n in [topo.nodes[g]]} >= set(planned) - {("S1", 0), ("L3", 0)}
    planned.clear()
    t.sim.link("L3", 5, *peer)
    run_for(d, clock, 1)
    assert d.last_sweep["incremental"] and 0 < len(planned) < everything // 3
    assert fresh_plan_is_empty(t)  # the cable's ports armed and activated: nothing left to plan

def _settled_is_current(d) -> None:
    """Every port the model holds as settled holds both ends' PortInfos as the model's
    topology does now (`sweep.ports.settle` looks at only the ports a Set changed)."""
    topo = d.known.topology
    _token, settled = d.known.settled
    for (g, p), (pi, peer_pi, _vls) in settled.items():
        peer = topo.links.get((g, p))
        assert pi is topo.nodes[g].ports[p]
        assert peer_pi is (topo.nodes[peer[0]].ports.get(peer[1]) if peer else None), (g, p)


def test_the_settled_ports_hold_the_portinfos_the_model_holds():
    t, d, clock = make(sweep_interval=10)
    d.start()
    _settled_is_current(d)
    everything = {(n.guid, p) for n in d.known.topology.nodes.values() for p in n.ports}
    assert len(d.known.settled[1]) > len(everything) // 2
    peer = t.sim.unlink("L3", 5)
    run_for(d, clock, 1)
    _settled_is_current(d)
    t.sim.link("L3", 5, *peer)
    run_for(d, clock, 1)
    assert d.last_sweep["incremental"]
    _settled_is_current(d)


def test_settle_takes_the_new_portinfo_of_a_changed_port_into_its_peers_entry():
    """A port a Set changed (a host's LID) while its switch-side peer stayed as planned:
    the peer's settled entry holds the host port's new PortInfo, not the one planned on."""
    from types import SimpleNamespace as NS
    from smagent.sweep.ports import settle
    old_host, new_host, sw_pi, other = object(), object(), object(), object()
    nodes = {1: NS(ports={1: old_host}), 2: NS(ports={3: sw_pi, 4: other}), 5: NS(ports={1: object()})}
    links = {(1, 1): (2, 3), (2, 3): (1, 1), (2, 4): (5, 1), (5, 1): (2, 4)}
    topo = NS(nodes=nodes, links=links)
    before = {(2, 3): (sw_pi, old_host, 4), (2, 4): (other, nodes[5].ports[1], 4)}
    s = NS(settled=("token", before), arm_failed=set(), not_active=[], topo=topo,
           r=NS(port_changes=[NS(guid=1, port=1)]), op_vls={(1, 1): 4, (2, 3): 4, (2, 4): 4})
    nodes[1].ports[1] = new_host  # the Set's answer
    token, out = settle(s)
    assert token == "token" and out[(2, 3)] == (sw_pi, new_host, 4) and out[(1, 1)] == (new_host, sw_pi, 4)
    assert out[(2, 4)] is before[(2, 4)]
    s.arm_failed = {(1, 1)}
    assert (1, 1) not in settle(s)[1]


def test_light_sweep_without_change_sends_only_gets():
    t, d, clock = make(sweep_interval=2)
    d.start()
    kinds = collections.Counter(t.stats.by_kind)
    sent = t.stats.sent
    run_for(d, clock, 6.1, step=0.25)
    assert d.counters.light_sweeps == 3 and d.counters.sweeps == 1
    assert sets_sent(t, kinds) == 0
    switches = len(t.sim.switches())
    assert d.counters.light_sweep_gets == switches
    assert t.stats.sent - sent == 3 * switches


def test_light_sweep_catches_a_change_whose_trap_was_lost():
    t, d, clock = make(sweep_interval=2)
    d.start()
    t.sim.trap_sinks.clear()  # the traps are lost
    t.sim.unlink("L2", 6)
    run_for(d, clock, 1)
    assert d.counters.repairs == 0
    run_for(d, clock, 2)
    assert d.counters.repairs == 1 and "light sweep found a change" in d.last_sweep["why"]
    run_for(d, clock, 2.5)  # PortStateChange was cleared by the repair: quiet again
    assert d.counters.repairs == 1


def test_answers_sminfo_get_with_identity_state_and_key():
    t, d, clock = make(priority=7)
    d.start()
    req = smpcodec.dr(Method.GET, AttrID.SM_INFO, (0, 1, 3))
    t.deliver(smpcodec.encode(req))
    d.step(max_wait=0)
    (resp,) = outbox_smps(t)
    assert resp.method == Method.GET_RESP and resp.directed and resp.transaction_id == req.transaction_id
    info = resp.attribute()
    assert (info.guid, info.priority, info.sm_state) == (d.sm.guid, 7, SMState.MASTER)
    assert info.sm_key == DEFAULT_SM_KEY  # the default key (OpenSM's) is no secret
    assert d.counters.sminfo_gets_answered == 1


def test_requests_before_start_are_answered_once_we_know_who_we_are():
    t, d, clock = make()
    t.deliver(smpcodec.encode(smpcodec.dr(Method.GET, AttrID.SM_INFO, (0,))))
    t.poll(0)  # arrives before start(): kept
    assert t.outbox == []
    d.start()
    (resp,) = outbox_smps(t)
    assert resp.attribute().guid == d.sm.guid


def test_other_attributes_are_refused_not_dropped():
    t, d, clock = make()
    d.start()
    t.deliver(smpcodec.encode(smpcodec.dr(Method.GET, AttrID.NODE_INFO, (0,))))
    d.step(max_wait=0)
    (resp,) = outbox_smps(t)
    assert resp.method == Method.GET_RESP and resp.status_word & 0x7FFF == 0x000C


def test_found_higher_standby_at_start_means_standby():
    t, d, clock = make(priority=3)
    t.sim.attach_sm(("H5", 1), priority=9, state=SMState.STANDBY)
    d.start()
    assert d.sm.state == SMState.STANDBY and d.counters.sweeps == 0  # as OpenSM: poll the higher one


def test_hands_over_to_a_higher_standby_that_polls_us_and_polls_it():
    t, d, clock = make(priority=3, poll_interval=1)
    d.start()
    assert d.sm.state == SMState.MASTER
    t.sim.attach_sm(("H5", 1), priority=9, state=SMState.STANDBY)  # a new SM comes up, STANDBY ...
    t.deliver(smpcodec.encode(smpcodec.dr(Method.GET, AttrID.SM_INFO, (0, 1, 3, 3, 1))))  # ... and polls us
    d.step(max_wait=0)
    other = t.sim.node("H5").sm[1]
    assert other.sm_state == SMState.MASTER  # our HANDOVER reached it
    assert d.sm.state == SMState.STANDBY and d.counters.handovers_sent == 1
    assert d.sm.master.guid == other.guid
    run_for(d, clock, 3)
    assert d.counters.polls >= 2 and d.counters.poll_failures == 0 and d.sm.state == SMState.STANDBY


def test_lower_standby_is_left_alone():
    t, d, clock = make(priority=3)
    t.sim.attach_sm(("H5", 1), priority=2, state=SMState.STANDBY)
    d.start()
    assert d.sm.state == SMState.MASTER and d.counters.handovers_sent == 0
    assert [p.priority for p in d.peers.values()] == [2]


def test_standby_takes_over_when_the_master_stops_answering():
    t, d, clock = make(priority=3, poll_interval=1, poll_retries=2)
    t.sim.attach_sm(("H5", 1), priority=1, state=SMState.MASTER)
    d.start()
    assert d.sm.state == SMState.STANDBY and d.counters.sweeps == 0  # a master keeps its subnet
    run_for(d, clock, 2)
    assert d.sm.state == SMState.STANDBY and d.counters.poll_failures == 0
    h5 = t.sim.node("H5")
    del h5.sm[1]  # the master dies: its SMInfo goes unanswered
    h5.pi[1].capability_mask &= ~0x2
    run_for(d, clock, 2.5)
    assert d.sm.state == SMState.STANDBY and d.counters.poll_failures == 2  # 2 retries allowed
    run_for(d, clock, 1)
    assert d.sm.state == SMState.MASTER and d.counters.sweeps == 1
    assert [(tr.old, tr.new) for tr in d.sm.transitions] == [
        (SMState.DISCOVERING, SMState.STANDBY), (SMState.STANDBY, SMState.DISCOVERING),
        (SMState.DISCOVERING, SMState.MASTER)]


def _sminfo_set(control, guid, state, priority=1, key=DEFAULT_SM_KEY):
    value = SMInfo(guid=guid, sm_key=key, act_count=0, priority=priority, sm_state=int(state))
    return smpcodec.dr(Method.SET, AttrID.SM_INFO, (0, 1, 3, 2, 1), int(control), value)


def _sent_from(d, smp, port_guid):
    """`smp` as it arrives from the port `port_guid`: its ReturnPath (filled in by the
    fabric, one ingress port per hop) leads back there from our port."""
    node, port = d.topo.by_guid(port_guid)
    path = node.path_to_port(port)
    rp = bytes([0, *reversed(path[1:])]).ljust(64, b"\0")
    return dataclasses.replace(smp, hop_count=len(path) - 1, return_path=rp)


def test_handover_received_in_standby_is_acknowledged_and_we_sweep():
    t, d, clock = make(priority=3)
    t.sim.attach_sm(("H5", 1), priority=1, state=SMState.MASTER)
    d.start()
    master = t.sim.node("H5").sm[1]
    req = _sent_from(d, _sminfo_set(Control.HANDOVER, master.guid, SMState.MASTER), master.guid)
    t.deliver(smpcodec.encode(req))
    acks = []
    t.on_send = lambda r: acks.append(r.smp) if r.smp.method == Method.SET and r.smp.attribute_id == AttrID.SM_INFO else None
    d.step(max_wait=0)
    (resp,) = outbox_smps(t)
    assert resp.status_word & 0x7FFF == 0 and resp.attribute().sm_state == SMState.STANDBY  # answered first
    assert d.sm.state == SMState.MASTER and d.counters.handovers_received == 1 and d.counters.sweeps == 1
    assert [(a.attribute_modifier, a.attribute().sm_state) for a in acks] == [(Control.ACKNOWLEDGE, SMState.STANDBY)]


@pytest.mark.parametrize("control,sender_state", [(Control.ACKNOWLEDGE, SMState.MASTER),
                                                  (Control.HANDOVER, SMState.STANDBY), (9, SMState.MASTER)])
def test_illegal_sminfo_sets_are_refused(control, sender_state):
    t, d, clock = make()
    d.start()
    t.deliver(smpcodec.encode(_sminfo_set(control, 0x1234, sender_state)))
    d.step(max_wait=0)
    (resp,) = outbox_smps(t)
    assert resp.status_word & 0x7FFF == INVALID_VALUE_STATUS
    assert d.sm.state == SMState.MASTER and d.counters.sweeps == 1


@pytest.mark.parametrize("control,key", [(Control.HANDOVER, 0), (Control.DISABLE, 0x1234),
                                         (Control.DISCOVER, DEFAULT_SM_KEY + 1)])
def test_a_set_with_a_wrong_sm_key_is_refused_and_changes_nothing(control, key, caplog):
    """Issue: a rogue HANDOVER (key 0, made-up GUID) made a STANDBY MASTER; a DISABLE with a
    wrong key made it NOT_ACTIVE. Now: answered with status 7, our key hidden, no change."""
    t, d, clock = make(priority=3, poll_interval=1, poll_retries=1, sm_key=0x5EC12E7)
    t.sim.attach_sm(("H5", 1), priority=9, state=SMState.MASTER)
    d.start()
    assert d.sm.state == SMState.STANDBY
    t.deliver(smpcodec.encode(_sminfo_set(control, 0xBAD0BAD0, SMState.MASTER, priority=15, key=key)))
    acks = []
    t.on_send = lambda r: acks.append(r) if r.smp.method == Method.SET else None
    d.step(max_wait=0)
    (resp,) = outbox_smps(t)
    assert resp.status_word & 0x7FFF == INVALID_VALUE_STATUS
    assert resp.attribute().sm_key == 0 and resp.attribute().sm_state == SMState.STANDBY
    assert d.sm.state == SMState.STANDBY and d.counters.sweeps == 0 and acks == []
    assert "wrong SM_Key" in caplog.text and f"{0x5EC12E7:x}" not in caplog.text.lower()
    h5 = t.sim.node("H5")  # and the standby still takes over when the master dies
    del h5.sm[1]
    h5.pi[1].capability_mask &= ~0x2
    run_for(d, clock, 3)
    assert d.sm.state == SMState.MASTER


def test_a_rightly_keyed_set_is_obeyed_only_from_the_port_of_the_sm_it_names(caplog):
    """The default key is no secret: a host that knows it still cannot speak for the
    master. Where a Set came from is what the fabric says (ReturnPath, or SLID), not its
    SMInfo's GUID."""
    t, d, clock = make(priority=3)
    t.sim.attach_sm(("H5", 1), priority=9, state=SMState.MASTER)
    t.sim.node("H2").pi[1].lid, t.sim.node("H5").pi[1].lid = 0x22, 0x25  # as the master set them
    d.start()
    t.outbox.clear()  # our trap 144 to the master
    master = t.sim.node("H5").sm[1]
    host = t.sim.node("H2").port_guids[1]
    disable = _sminfo_set(Control.DISABLE, master.guid, SMState.MASTER, priority=9)
    lid_routed = smpcodec.lid_routed(Method.SET, AttrID.SM_INFO, int(Control.DISABLE), disable.attribute())
    t.deliver(smpcodec.encode(_sent_from(d, disable, host)))
    t.deliver(smpcodec.encode(lid_routed), 0x22)
    t.deliver(smpcodec.encode(disable))  # a ReturnPath that leads nowhere
    d.step(max_wait=0)
    assert [r.status_word & 0x7FFF for r in outbox_smps(t)] == [INVALID_VALUE_STATUS] * 3
    assert d.sm.state == SMState.STANDBY
    assert caplog.text.count("not from the SM it names") == 3 and f"port {host:#018x}" in caplog.text
    t.outbox.clear()
    t.deliver(smpcodec.encode(lid_routed), 0x25)  # the master's own LID
    d.step(max_wait=0)
    assert [r.status_word & 0x7FFF for r in outbox_smps(t)] == [0] and d.sm.state == SMState.NOT_ACTIVE


def test_a_secret_key_is_hidden_in_get_and_set_answers_unless_proven():
    t, d, clock = make(priority=7, sm_key=0x5EC12E7)
    d.start()
    empty = smpcodec.dr(Method.GET, AttrID.SM_INFO, (0, 1, 3))
    proven = smpcodec.dr(Method.GET, AttrID.SM_INFO, (0, 1, 3), 0,
                         SMInfo(guid=1, sm_key=0x5EC12E7, act_count=0, priority=0, sm_state=0))
    for req in (empty, proven, _sminfo_set(Control.STANDBY, 0x10, SMState.MASTER, key=0x5EC12E7)):
        t.deliver(smpcodec.encode(req))
    d.step(max_wait=0)
    assert [r.attribute().sm_key for r in outbox_smps(t)] == [0, 0x5EC12E7, 0x5EC12E7]
    t.outbox.clear()
    t.deliver(smpcodec.encode(_sminfo_set(Control.STANDBY, 0x10, SMState.MASTER, key=0)))
    d.step(max_wait=0)
    (resp,) = outbox_smps(t)  # the Set path hides it too
    assert resp.attribute().sm_key == 0 and resp.status_word & 0x7FFF == INVALID_VALUE_STATUS


def test_a_master_seeing_a_higher_master_yields():
    """Two masters (e.g. after a partition heals): the lower one hands over and stands by."""
    t, d, clock = make(priority=3, poll_interval=1, sweep_interval=1)
    d.start()
    assert d.sm.state == SMState.MASTER
    t.sim.attach_sm(("H5", 1), priority=9, state=SMState.MASTER)
    t.deliver(smpcodec.encode(smpcodec.dr(Method.GET, AttrID.SM_INFO, (0, 1, 3, 3, 1))))  # it polls us
    d.step(max_wait=0)
    assert d.sm.state == SMState.STANDBY and d.counters.handovers_sent == 1
    assert d.sm.master.guid == t.sim.node("H5").sm[1].guid
    run_for(d, clock, 3)
    assert d.sm.state == SMState.STANDBY and d.counters.poll_failures == 0


@pytest.mark.parametrize("their_state,we_yield", [(SMState.MASTER, True), (SMState.STANDBY, False)])
def test_an_unanswered_handover_still_yields_to_a_higher_master_only(monkeypatch, their_state, we_yield):
    t, d, clock = make(priority=3, poll_interval=1)
    d.start()
    t.sim.attach_sm(("H5", 1), priority=9, state=their_state)
    monkeypatch.setattr(d.mastership, "send_sminfo_set", lambda *a: None)  # the HANDOVER goes unanswered
    t.deliver(smpcodec.encode(smpcodec.dr(Method.GET, AttrID.SM_INFO, (0, 1, 3, 3, 1))))
    d.step(max_wait=0)
    assert d.sm.state == (SMState.STANDBY if we_yield else SMState.MASTER) and d.counters.handovers_sent == 0


def test_lids_are_kept_across_restarts(tmp_path):
    t, d, clock = make(tmp_path)
    d.start()
    first = {n.name: n.pi[n.lid_port(0 if n.is_switch else 1)].lid for n in t.sim}
    saved = lids.load_guid2lid(tmp_path / "state" / "guid2lid")
    assert len(saved) == len(first) + 1  # H1 has two ports
    t2 = SimTransport()
    t2.serve()
    for n in t2.sim:  # another fabric state: LIDs in reverse order, as if a different SM had run
        n.pi[n.lid_port(0 if n.is_switch else 1)].lid = 0
    d2 = Daemon(t2, DaemonOptions(state_dir=str(tmp_path / "state")), clock=Clock())
    d2.start()
    assert {n.name: n.pi[n.lid_port(0 if n.is_switch else 1)].lid for n in t2.sim} == first


def test_status_over_the_control_socket(tmp_path):
    t, d, clock = make(tmp_path, priority=4)
    server = control.ControlServer(control.socket_path(tmp_path / "state"))
    try:
        d.start()
        import threading
        got = {}
        th = threading.Thread(target=lambda: got.update(control.query(server.path)))
        th.start()
        for _ in range(50):
            d.step(server, max_wait=0.02)
            if got:
                break
        th.join(5)
        assert got["state"] == "MASTER" and got["priority"] == 4 and got["master_guid"] == got["guid"]
        assert got["sweeps"] == 1 and got["last_change"]["what"].startswith("became MASTER")
        assert "sm_key" not in str(got)  # keys are never shown
        with pytest.raises(control.ControlError, match="another smagent daemon is running"):
            control.ControlServer(server.path)
    finally:
        server.close()
    with pytest.raises(control.ControlError, match="does not exist"):
        control.query(server.path)


def test_a_stale_socket_is_replaced(tmp_path):
    import socket
    path = tmp_path / "control.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()  # bound, nobody listening: what a killed daemon leaves
    server = control.ControlServer(path)
    server.close()
    assert not path.exists()


# -- PortInfo.ClientReregister when we become MASTER (smagent.sm.reregister) ---------------
# One Set with the bit per capable end port on the first sweep of a mastership, none on
# later sweeps of the same one, again after a STANDBY takes over or receives a HANDOVER;
# the simulator's ports accept the bit and read it back 0, as real ports do; nothing of it
# shows as drift in a later plan.


def make_rereg(*, caps=1, **kw):
    t = SimTransport(client_reregister=caps)
    t.serve()
    clock = Clock()
    rereg: collections.Counter = collections.Counter()

    def on_send(r: Request) -> None:  # count the Sets carrying the bit, by port
        smp = r.smp
        if smp.method == Method.SET and smp.attribute_id == AttrID.PORT_INFO and \
                smp.attribute(PortInfo).client_reregister:
            node = t._ingress[0]
            for hop in smp.initial_path[1:smp.hop_count + 1]:  # the directed route, walked in the simulator
                node = node.peers[hop][0]
            rereg[(node.name, smp.attribute_modifier & 0xFF)] += 1
    t.on_send = on_send
    return t, Daemon(t, DaemonOptions(**kw), clock=clock), clock, rereg


def end_ports(sim, *, switches=True) -> set:
    """(node name, port) of every end port with a link (and switch port 0): what we expect."""
    out = set()
    for n in sim:
        if n.is_switch:
            if switches:
                out.add((n.name, 0))
        else:
            out |= {(n.name, p) for p in range(1, n.num_ports + 1) if n.peers[p]}
    return out


def test_the_simulated_port_accepts_the_bit_and_reads_it_back_zero():
    t = SimTransport(client_reregister=1)
    ca = t.sim.node("H1")
    assert ca.pi[1].capability_mask & CAP_IS_CLIENT_REREGISTRATION
    assert not SimTransport().sim.node("H1").pi[1].capability_mask & CAP_IS_CLIENT_REREGISTRATION  # ibsim's
    get = t.query(Request(smpcodec.dr(Method.GET, AttrID.PORT_INFO, (0,), portinfo_modifier(1)))).attribute(PortInfo)
    data = PortInfo.LAYOUT.replace(get, port_state=0, port_physical_state=0, client_reregister=1).encode()
    back = t.query(Request(smpcodec.dr(Method.SET, AttrID.PORT_INFO, (0,), portinfo_modifier(1), data)))
    assert back.status_word & 0x7FFF == 0 and back.attribute(PortInfo).client_reregister == 0


def test_once_per_capable_end_port_on_becoming_master_and_never_again():
    t, d, clock, rereg = make_rereg(sweep_interval=1)
    d.start()
    assert d.sm.state == SMState.MASTER
    want = end_ports(t.sim)
    assert rereg == collections.Counter({k: 1 for k in want})
    assert d.counters.client_reregisters == len(want)
    peer = t.sim.unlink("L1", 2)  # a repair, then light sweeps: the same mastership
    run_for(d, clock, 3)
    t.sim.link("L1", 2, *peer)
    run_for(d, clock, 3)
    assert d.counters.repairs >= 1 and d.counters.light_sweeps >= 2
    assert sum(rereg.values()) == len(want)  # nothing more
    assert fresh_plan_is_empty(t)  # a one-shot bit: no drift


@pytest.mark.parametrize("mode,caps,switches,count", [("capable", 0, False, False), ("off", 1, False, False),
                                                      ("all", 0, False, True)])
def test_client_reregister_modes(mode, caps, switches, count):
    """ibsim's ports advertise no bit 25: `capable` sends them nothing, `all` every CA port
    (not switch port 0, which does not advertise it), `off` nothing at all."""
    t, d, _clock, rereg = make_rereg(caps=caps, client_reregister=mode)
    d.start()
    assert set(rereg) == (end_ports(t.sim, switches=switches) if count else set())
    assert all(v == 1 for v in rereg.values())


def test_again_after_a_standby_takes_over_a_silent_master():
    t, d, clock, rereg = make_rereg(priority=3, poll_interval=1, poll_retries=2)
    t.sim.attach_sm(("H5", 1), priority=1, state=SMState.MASTER)
    d.start()
    assert d.sm.state == SMState.STANDBY and not rereg  # a STANDBY sends nothing
    h5 = t.sim.node("H5")
    del h5.sm[1]  # the master dies
    h5.pi[1].capability_mask &= ~0x2
    run_for(d, clock, 5)
    assert d.sm.state == SMState.MASTER
    assert rereg == collections.Counter({k: 1 for k in end_ports(t.sim)})


def test_again_after_a_handover_received_in_standby():
    t, d, clock, rereg = make_rereg(priority=3)
    t.sim.attach_sm(("H5", 1), priority=1, state=SMState.MASTER)
    d.start()
    master = t.sim.node("H5").sm[1]
    t.deliver(smpcodec.encode(_sent_from(d, _sminfo_set(Control.HANDOVER, master.guid, SMState.MASTER), master.guid)))
    d.step(max_wait=0)
    assert d.sm.state == SMState.MASTER
    assert rereg == collections.Counter({k: 1 for k in end_ports(t.sim)})


# -- a switch lost with every link (issue 42: a core lost repaired without a full sweep) ----------
def _three_level(**kw):
    from smagent.model import topogen
    t = SimTransport(topogen.fat_tree_3(4))  # 16 hosts, 8 leaves, 8 aggregation switches, 4 cores
    t.serve()
    clock = Clock()
    d = Daemon(t, DaemonOptions(sweep_interval=10, **kw), clock=clock)
    d.start()
    return t, d, clock


def _lose(sim, name) -> list:
    """Every cable of ``name`` pulled; the (port, peer) pairs to put back."""
    node = sim.node(name)
    return [(p, sim.unlink(name, p)) for p in range(1, node.num_ports + 1) if node.peers[p]]


def _as_discovered(t, known) -> None:
    """The known topology holds what a fresh discovery finds: the same nodes, links, paths."""
    from smagent import discovery
    fresh = discovery.discover(t)
    assert set(known.topology.nodes) == set(fresh.nodes)
    assert known.topology.links == fresh.links
    assert {g: n.path for g, n in known.topology.nodes.items()} == {g: n.path for g, n in fresh.nodes.items()}
    assert {g: n.port_paths for g, n in known.topology.nodes.items()} == {
        g: n.port_paths for g, n in fresh.nodes.items()}


def test_a_lost_core_switch_is_repaired_without_a_full_sweep(caplog):
    """A core switch lost with every link: its neighbours' PortInfo show every link to it
    DOWN, so it leaves the known topology (no NodeInfo walk of the fabric); the tables,
    the known state and the SA's snapshot are what a full sweep leaves; its LID stays
    reserved. Before: a full sweep ("part of the fabric is cut off")."""
    t, d, clock = _three_level()
    sim = t.sim
    bring_up = t.stats.sent
    s0 = next(n for n in sim if n.name == "S0")
    lid = sim.port_lid(("S0", 0))
    kinds = collections.Counter(t.stats.by_kind)
    caplog.set_level("INFO", logger="smagent.sm")
    assert len(_lose(sim, "S0")) == 4
    run_for(d, clock, 1)
    assert d.counters.repairs == 1 and d.last_sweep["incremental"] and d.last_sweep["problems"] == 0, d.last_sweep
    spent = collections.Counter(t.stats.by_kind) - kinds
    assert spent["SubnGet(NodeInfo)"] == 0 and d.last_sweep["smps"] < bring_up / 5, spent
    assert 0 < d.last_sweep["patch_smps"] < d.last_sweep["smps"]
    assert "switch S0 gone (its 4 links down)" in caplog.text and "link A0/3 - S0/1 down" not in caplog.text
    known = d.duties.known
    assert s0.guid not in known.topology.nodes
    assert s0.guid not in known.lft and not any(k[0] == s0.guid for k in known.mft)
    _as_discovered(t, known)
    sub = d.sa.agent.subnet
    assert s0.guid not in sub.nodes and sub.port_of_lid(lid) is None
    assert d.status()["last_sweep"]["incremental"]
    assert fresh_plan_is_empty(t, d)  # the tables as a full sweep from scratch would leave them
    all_pairs_delivered(sim)
    d.duties.sweep("a full sweep")  # S0's LID stays reserved: no host or switch takes it
    assert lid not in {sim.port_lid((n.name, 0 if n.is_switch else 1)) for n in sim if n.name != "S0"}


def test_a_lost_leaf_leaves_with_its_hosts_and_a_partial_loss_is_a_link_repair():
    """A leaf lost with every link: it and its hosts (cut off behind it) leave; a core that
    lost three of its four links stays, reached by the fourth (a link repair)."""
    t, d, clock = _three_level()
    sim = t.sim
    gone = {sim.node(n).guid for n in ("L3", "H6", "H7")}
    _lose(sim, "L3")
    run_for(d, clock, 1)
    assert d.counters.repairs == 1 and d.last_sweep["incremental"] and d.last_sweep["problems"] == 0
    assert not gone & set(d.duties.known.topology.nodes) and not gone & set(d.sa.agent.subnet.nodes)
    _as_discovered(t, d.duties.known)
    assert fresh_plan_is_empty(t, d, routes=False)  # ftree afresh would balance the rest again
    all_pairs_delivered(sim)
    for p in (1, 2, 3):
        sim.unlink("S1", p)
    run_for(d, clock, 1)
    assert d.counters.repairs == 2 and d.last_sweep["incremental"] and d.last_sweep["problems"] == 0
    assert sim.node("S1").guid in d.duties.known.topology.nodes
    _as_discovered(t, d.duties.known)
    assert fresh_plan_is_empty(t, d, routes=False)  # the routes patched off S1's lost links
    all_pairs_delivered(sim)


def test_a_lost_core_whose_neighbours_traps_were_lost_is_found_by_the_light_look():
    """Only one neighbour's trap arrives (the others' routes to the SM crossed the core):
    the core still looks reached by the links no read has seen down, and does not answer
    the light look; the switches whose PortStateChange that look finds are read in the
    same repair, see the rest of its links down, and the core leaves: no full sweep."""
    t, d, clock = _three_level()
    sim = t.sim
    key, sink, a0 = *next(iter(sim.trap_sinks.items())), sim.port_lid(("A0", 0))
    sim.trap_sinks[key] = lambda raw, issuer: sink(raw, issuer) if issuer == a0 else None
    _lose(sim, "S0")
    run_for(d, clock, 1)
    assert d.counters.traps == 1 and d.counters.repairs == 1
    assert d.last_sweep["incremental"] and d.last_sweep["problems"] == 0, d.last_sweep
    assert sim.node("S0").guid not in d.duties.known.topology.nodes
    _as_discovered(t, d.duties.known)
    assert fresh_plan_is_empty(t, d)
    all_pairs_delivered(sim)


def test_a_cut_whose_far_end_sent_no_trap_costs_one_light_look():
    """Only L0's trap arrives for its cut uplink to A0: the light look finds A0's
    PortStateChange, reading A0 finds nothing new (its end of the cut is known), so no
    second look follows (issue 42: two looks were 7,290 of a 39,366-host cut's SMPs). A
    second cut there, at A0's uplink to S0 (no trap from either end), still takes a
    second look, and the repair finds both."""
    t, d, clock = _three_level()
    sim = t.sim
    key, sink = next(iter(sim.trap_sinks.items()))
    looks = {}
    for cuts in ([("L0", 3)], [("L1", 3), ("A0", 3)]):
        heard = sim.port_lid((cuts[0][0], 0))  # the one trap that arrives
        sim.trap_sinks[key] = lambda raw, issuer, heard=heard: sink(raw, issuer) if issuer == heard else None
        kinds = collections.Counter(t.stats.by_kind)
        for name, port in cuts:
            sim.unlink(name, port)
        run_for(d, clock, 1)
        assert d.last_sweep["incremental"] and d.last_sweep["problems"] == 0, d.last_sweep
        looks[len(cuts)] = (collections.Counter(t.stats.by_kind) - kinds)["SubnGet(SwitchInfo)"] / len(sim.switches())
        _as_discovered(t, d.duties.known)
        all_pairs_delivered(sim)
    # (the second look's extra Gets: the first reached S0 over A0's cut uplink, not known then)
    assert d.counters.repairs == 2 and looks[1] == 1 and looks[2] >= 2, looks


@pytest.mark.parametrize("case", ["silent, its links up", "our own leaf"])
def test_a_switch_that_does_not_answer_but_whose_links_were_not_all_seen_down_is_a_full_sweep(monkeypatch, case):
    """Not answering is not gone: a switch whose SMA is silent, one of its links cut, stays
    reached by the others and fails the light look: a full sweep. Our own leaf lost: nothing
    answers (our port is down), nothing is dropped: a full sweep."""
    from smagent.sim import sma
    from smagent.sim.nodes import Dropped
    t, d, clock = _three_level()
    sim = t.sim
    if case == "our own leaf":
        leaf = sim.resolve(t.local)[0].peers[t.local[1] if isinstance(t.local[1], int) else 1][0].name
        _lose(sim, leaf)
    else:
        real = sma.process

        def silent_s0(sim_, node, in_port, smp, slid=None):
            if node.name == "S0":
                raise Dropped("S0's SMA is silent")
            return real(sim_, node, in_port, smp, slid)
        monkeypatch.setattr(sma, "process", silent_s0)
        key, sink, s0 = *next(iter(sim.trap_sinks.items())), sim.port_lid(("S0", 0))
        sim.trap_sinks[key] = lambda raw, issuer: sink(raw, issuer) if issuer != s0 else None  # its own is lost
        sim.unlink("S0", 1)  # to A0, whose path does not cross S0: A0 answers
    run_for(d, clock, 1)
    assert d.counters.repairs >= 1 and not d.last_sweep["incremental"], d.last_sweep
    if case != "our own leaf":  # the full sweep finds S0 silent, its links up: not routed through
        assert sim.node("S0").guid in d.duties.known.topology.nodes if d.duties.known else True


def test_a_lost_core_switch_that_comes_back_is_walked_to_from_its_neighbours():
    """The core back: its neighbours report their ports up, the switch behind them is not
    known, and discovery's walk from those ports (stopping at known nodes) adds it: no
    walk of the whole fabric, its old LID, the tables a full sweep leaves. A lost leaf
    back brings its hosts with it. Before: a full sweep ("a switch we do not know came up")."""
    t, d, clock = _three_level()
    sim = t.sim
    lid = sim.port_lid(("S0", 0))
    before = {n.name: bytes(n.lft) for n in sim.switches()}
    for name in ("S0", "L3"):
        cables = _lose(sim, name)
        run_for(d, clock, 1)
        assert d.last_sweep["incremental"], d.last_sweep
        kinds = collections.Counter(t.stats.by_kind)
        for p, (peer, pp) in cables:
            sim.link(name, p, peer, pp)
        run_for(d, clock, 1)
        assert d.last_sweep["incremental"] and d.last_sweep["problems"] == 0, d.last_sweep
        spent = collections.Counter(t.stats.by_kind) - kinds
        assert spent["SubnGet(NodeInfo)"] <= 2 * len(cables), spent  # behind each port that came up, and from it
        assert sim.node(name).guid in d.duties.known.topology.nodes
        assert "put back" in d.status()["routing"]["reason"], d.status()["routing"]  # its own table too
        _as_discovered(t, d.duties.known)
        assert fresh_plan_is_empty(t, d)
        all_pairs_delivered(sim)
    assert sim.port_lid(("S0", 0)) == lid and {n.name: bytes(n.lft) for n in sim.switches()} == before
    assert d.counters.repairs == 4 and d.counters.sweeps == 5  # the bring-up, then repairs only


def test_a_trap_only_from_a_switch_we_do_not_know_is_a_full_sweep():
    """The core back, but only its own trap arrives (its LID names no switch we know): no
    known switch to read from, so a full sweep finds it."""
    t, d, clock = _three_level()
    sim = t.sim
    cables = _lose(sim, "S0")
    run_for(d, clock, 1)
    key, sink, s0 = *next(iter(sim.trap_sinks.items())), sim.port_lid(("S0", 0))
    sim.trap_sinks[key] = lambda raw, issuer: sink(raw, issuer) if issuer == s0 else None
    for p, (peer, pp) in cables:
        sim.link("S0", p, peer, pp)
    run_for(d, clock, 1)
    assert d.counters.traps == 8 + 4 and d.counters.repairs == 2, d.counters
    assert not d.last_sweep["incremental"] and d.last_sweep["ok"] and sim.node("S0").guid in d.duties.known.topology.nodes


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_lost_core_switch_under_smp_loss_leaves_what_a_full_sweep_finds(seed):
    """Under loss a neighbour that did not answer keeps its link to the core (the core is
    not gone until a read saw every link down): whether the repair read again or swept
    fully, the known state is what a discovery finds once the loss stops, and no switch
    that is there went missing."""
    from smagent.model import topogen
    t = SimTransport(topogen.fat_tree_3(4), drop_rate=0.15, seed=seed)
    t.serve()
    clock = Clock()
    d = Daemon(t, DaemonOptions(sweep_interval=10), clock=clock)
    d.start()
    sim = t.sim
    _lose(sim, "S0")
    run_for(d, clock, 3)
    sim.drop_rate = 0.0
    assert d.last_sweep["ok"] and d.duties.known is not None, d.last_sweep
    _as_discovered(t, d.duties.known)
    assert sim.node("S0").guid not in d.duties.known.topology.nodes


def test_links_seen_down_that_would_cut_off_a_switch_that_answered_are_a_full_sweep(monkeypatch):
    """A switch that answered our Gets is reachable whatever its PortInfo say (a read racing
    a flap): when the links seen down would cut it off, the repair does not drop it with
    the hosts behind it; a full sweep looks again."""
    from mad.attributes import PortInfo, PortState
    from smagent.sim import sma
    t, d, clock = _three_level()
    sim = t.sim
    real = sma.process

    def uplinks_said_down(sim_, node, in_port, smp, slid=None):
        status, data = real(sim_, node, in_port, smp, slid)
        if node.name == "L1" and smp.attribute_id == AttrID.PORT_INFO and smp.attribute_modifier in (3, 4):
            data = PortInfo.LAYOUT.patch(data, port_state=PortState.DOWN)
        return status, data
    monkeypatch.setattr(sma, "process", uplinks_said_down)
    sim._trap_128(sim.node("L1"))  # L1 reports: its two uplinks read DOWN, it answers over one of them
    run_for(d, clock, 1)
    assert d.counters.repairs == 1 and not d.last_sweep["incremental"], d.last_sweep
