"""Who is MASTER: the running SM's SMInfo and its peers (`smagent.sm.daemon` composes it).

Learning our port (`start`), discovery and the election it ends with (DISCOVERING ->
MASTER or STANDBY, `smagent.sm.statemachine`), SMInfo Gets and Sets answered (inside the
transport, even mid-sweep), acting on an accepted SubnSet(SMInfo), the other SMs
(`smagent.sm.peers`: asked after discovery and full sweeps, refreshed when one polls us, a
census when an SM we cannot place shows up, the SM behind a trap 144), the handover to a
higher SM, and as STANDBY the poll of the master. The full sweep becoming MASTER starts is
the master duties' (`sweep`, given by the daemon): this role never reaches into theirs.
"""
from __future__ import annotations

import logging
from typing import Callable

from mad import smp as smpcodec
from mad.attributes import AttrID, NodeInfo, NodeType, PortInfo, SMInfo, SMState
from mad.errors import MadError
from mad.forwarding import PERMISSIVE_LID
from mad.header import Method
from smagent import discovery
from smagent.errors import SmagentError
from smagent.model.subnet import Subnet
from smagent.sm import peers as peersmod, statemachine as smstate, timers, traps
from smagent.sm.dispatch import SMP_CLASSES, Dispatcher, decoded, reply_lid
from smagent.sm.events import PolledBySm, SmInfoSetAccepted
from smagent.sm.reregister import ClientReregister
from smagent.sm.shared import Shared
from smagent.sm.statemachine import Action, Control, Peer, StateMachine, state_name
from smagent.transport.address import Incoming
from smagent.transport.base import Reply, Request

log = logging.getLogger("smagent.sm")

REFRESH_INTERVAL_S = 1.0  # at most this often, a poll from another SM makes us re-ask the SMs we know
REFRESH, CENSUS = "refresh", "census"  # gates (rate limits) in the daemon's Timers


class Mastership:
    def __init__(self, shared: Shared, sweep: Callable[[str], object]):
        self.shared = shared
        self.sweep = sweep  # a full sweep (`Duties.sweep`): on becoming MASTER, on a HANDOVER to us
        self.rereg = ClientReregister(shared.opts.client_reregister)  # once per mastership, after its first sweep
        self.local_pi: PortInfo | None = None  # our port's PortInfo until discovery has the topology
        self._early: list[Incoming] = []  # SMInfo requests that came before we knew who we are

    def serve(self, dispatcher: Dispatcher) -> None:
        dispatcher.route(SMP_CLASSES, Method.GET, AttrID.SM_INFO, self.on_sminfo)
        dispatcher.route(SMP_CLASSES, Method.SET, AttrID.SM_INFO, self.on_sminfo)

    def start(self) -> None:
        """Learn our port GUID (the state machine is made) and answer the SMInfo requests
        that came before."""
        s = self.shared
        ni = s.t.query(Request(smpcodec.dr(Method.GET, AttrID.NODE_INFO, (0,)))).attribute(NodeInfo)
        port = 0 if ni.node_type == NodeType.SWITCH else ni.local_port_num
        self.local_pi = s.t.query(Request(smpcodec.dr(Method.GET, AttrID.PORT_INFO, (0,), port))).attribute(PortInfo)
        s.machine = StateMachine(ni.port_guid, s.opts.priority, sm_key=s.opts.sm_key, poll_retries=s.opts.poll_retries)
        s.peers.own_guid = ni.port_guid
        early, self._early = self._early, []
        for m in early:
            self.on_sminfo(m)
        log.info("start: on %s, SM port GUID %#018x, priority %d, state DISCOVERING", s.t.describe(), s.sm.guid,
                 s.sm.priority)

    # -- answering (called inside the transport, even mid-batch) ---------------------
    def on_sminfo(self, m: Incoming) -> None:
        req = decoded(m)
        if req is None:
            return
        s = self.shared
        if s.machine is None:
            self._early.append(m)  # before we know our GUID: answered by `start`
            return
        sm = s.machine
        dlid = reply_lid(req, m.slid)
        try:
            remote: SMInfo | None = req.attribute(SMInfo)
        except MadError:
            remote = None
        act = s.t.stats.sent
        if req.method == Method.GET:
            s.counters.sminfo_gets_answered += 1
            value = sm.sminfo(act, reveal_key=self._reveal_key(req.m_key, remote))
            s.respond(smpcodec.encode(smpcodec.response_to(req, value=value)), dlid)
            if sm.state == SMState.MASTER:
                s.events.append(PolledBySm(m.slid))
            return
        s.counters.sminfo_sets_answered += 1
        sender = peersmod.sender_guid(s.topo, req, m.slid)
        status, why = sm.set_verdict(req.attribute_modifier, remote, sender, sender_known=s.topo is not None)
        value = sm.sminfo(act, reveal_key=self._reveal_key(req.m_key, remote))
        s.respond(smpcodec.encode(smpcodec.response_to(req, status=status, value=value)), dlid)
        if status == 0 and remote is not None:
            s.events.append(SmInfoSetAccepted(req.attribute_modifier, remote))
        else:  # refused: answered with the status, nothing changes (the key is never logged)
            log.warning("refused SubnSet(SMInfo) %s from SM %#018x (state %s; port %s) in state %s: %s",
                        Control(req.attribute_modifier).name if req.attribute_modifier in Control._value2member_map_
                        else req.attribute_modifier, remote.guid if remote else 0,
                        state_name(remote.sm_state) if remote else "?", "?" if sender is None else f"{sender:#018x}",
                        state_name(sm.state), why)

    def _reveal_key(self, request_m_key: int, remote: SMInfo | None) -> bool:
        local = self.local()
        pi = local[2] if local is not None else self.local_pi
        if pi is None:  # an SMInfo Get before `start` read our PortInfo: reveal nothing
            return False
        return smstate.reveal_sm_key(self.shared.sm.sm_key, remote.sm_key if remote is not None else 0,
                                     pi.m_key, pi.m_key_protect_bits, request_m_key)

    def local(self) -> tuple[discovery.DNode, int, PortInfo] | None:
        """Our node, port and its PortInfo in the topology (None before discovery has it)."""
        topo = self.shared.topo
        if topo is None:
            return None
        g, p = topo.local
        n = topo.nodes[g]
        pi = n.ports.get(0 if n.is_switch else p)
        return (n, p, pi) if pi is not None else None

    def own_sminfo(self) -> tuple[int, SMInfo] | None:
        """(our LID, our SMInfo with its key) once started, else None."""
        s = self.shared
        if s.machine is None:
            return None
        me = self.local()
        return (me[2].lid if me is not None else 0, s.machine.sminfo(s.t.stats.sent, reveal_key=True))

    # -- DISCOVERING ---------------------------------------------------------------
    def discover(self) -> None:
        s = self.shared
        s.timers.cancel(timers.DISCOVER)
        s.activity = "discovery"
        try:
            heard = s.traps_heard
            topo = discovery.discover(s.t)
            s.subnet = Subnet.build(topo)  # no table known yet: the first sweep reads them
            s.walked = (s.clock(), heard)  # the sweep becoming MASTER starts may plan on it (`take_discovery`)
            peers = self.ask_sms(topo)
        except SmagentError as e:
            s.failed("discovery", e)
            s.timers.arm(timers.DISCOVER, s.clock() + max(s.opts.sweep_interval, 1.0))
            return
        finally:
            s.activity = None
        old = s.sm.state
        action = s.sm.discovered(peers)
        self._note_transition(old)
        log.info("discovery: %d nodes, %d other SM(s)%s; state %s", len(topo.nodes), len(peers),
                 "".join(f"; {p.describe()}" for p in peers), state_name(s.sm.state))
        if action == Action.SWEEP:
            self.sweep("became MASTER")
        elif action == Action.POLL:
            self._announce_to_master()
            s.timers.arm(timers.POLL, s.clock() + s.opts.poll_interval)

    def ask_sms(self, topo: discovery.Topology) -> list[Peer]:
        """SMInfo of every SM port in ``topo``: the peers (same SM_Key) kept and returned."""
        found = peersmod.ask_all(self.shared.t, topo)
        strangers = [p for p in found if not self.shared.sm.is_peer(p.sm_key)]
        for p in strangers:
            self._stranger(p)
        return self.shared.peers.replace([p for p in found if self.shared.sm.is_peer(p.sm_key)], strangers)

    def _announce_to_master(self) -> None:
        """Trap 144 to the master (as OpenSM does on entering STANDBY): a lower master
        then sweeps, finds us and hands over."""
        m = self.shared.sm.master
        local = self.local()
        if m is None or not m.lid or local is None:
            return
        node, port, pi = local
        self.shared.respond(traps.trap_144(pi.lid, pi.capability_mask, node.node_type), m.lid)
        log.info("sent trap 144 to the master at LID %d", m.lid)

    # -- the other SMs -------------------------------------------------------------
    def check_peers(self, peers: list[Peer]) -> None:
        """Hand over if one of ``peers`` outranks us."""
        action, peer = self.shared.sm.check_peers(peers)
        if action == Action.HAND_OVER and peer is not None:
            self._hand_over(peer)

    def _hand_over(self, peer: Peer) -> None:
        s = self.shared
        rep = self.send_sminfo_set(peer, Control.HANDOVER, SMState.MASTER)
        if rep is not None and rep.ok:
            s.counters.handovers_sent += 1
        else:
            log.warning("HANDOVER to %s failed: %s", peer.describe(), rep.error if rep else "no path")
            if peer.state != SMState.MASTER:
                return  # a higher MASTER is yielded to all the same: polling tells if it lives
        old = s.sm.state
        s.sm.handed_over(peer)
        self._note_transition(old)
        log.info("handed over to %s: state %s", peer.describe(), state_name(s.sm.state))
        s.timers.cancel(timers.LIGHT)
        s.timers.arm(timers.POLL, s.clock() + s.opts.poll_interval)

    def check_sm_at_lid(self, lid: int) -> None:
        """A trap 144 from `lid`: ask the SM there (a census if we cannot place the LID)."""
        topo = self.shared.topo
        at = peersmod.port_at_lid(topo, lid)
        if at is None:
            self._census(f"trap 144 from unknown LID {lid}")
        elif (at[0].guid, at[1]) != (topo.local if topo else None):  # not our own trap 144
            self._check_sm_at(at[0], at[1], lid, "announced itself")

    def _check_sm_at(self, n: discovery.DNode, port: int, lid: int, why: str) -> None:
        peer = peersmod.sm_at(self.shared.t, n, port, lid)
        if peer is not None and not self.shared.sm.is_peer(peer.sm_key):
            self._stranger(peer)
        elif peer is not None and self.shared.peers.add(peer):
            log.info("SM %s: %s", why, peer.describe())
            self.check_peers(self.shared.peers.values())

    def _census(self, why: str) -> None:
        """PortInfo of every CA port (IsSM may have appeared without a trap), then SMInfo
        of the new SM ports. Costly on a large fabric, so only when something says an SM
        we do not know is there, and at most once a sweep interval."""
        s = self.shared
        if s.topo is None or not s.timers.allow(CENSUS, s.clock(), max(s.opts.sweep_interval, 1.0)):
            return
        s.counters.censuses += 1
        gets, seen = peersmod.census(s.t, s.topo)
        log.info("SM census (%s): %d PortInfo Gets", why, gets)
        self.check_peers(self.ask_sms(seen))

    def _refresh_peers(self) -> None:
        """SMInfo of every SM we know (a few Gets), then hand over if one outranks us."""
        s = self.shared
        peers = s.peers.values()
        s.peers.update(peers, s.t.execute([peersmod.sminfo_get(p.path) for p in peers]), "SM refresh")
        self.check_peers(s.peers.values())

    def on_polled(self, slid: int) -> None:
        """An SMInfo Get while MASTER: a STANDBY SM polling us (one to hand over to?), or
        only `sminfo` run on a host. From a LID we can place that is no SM we know: is
        there an SM (one PortInfo Get, at most once a sweep interval per LID)? From an SM
        we know, or a sender we cannot place (a directed-route Get) while we know SMs:
        refresh what we know of them (a few Gets, at most once a second). Only a sender we
        cannot place while we know no SM costs a census (at most once a sweep interval)."""
        s = self.shared
        now = s.clock()
        local = self.local()
        if local is not None and slid == local[2].lid:
            return  # ourselves
        known = any(p.lid == slid for p in s.peers.values())
        at = peersmod.port_at_lid(s.topo, slid) if slid not in (0, PERMISSIVE_LID) and not known else None
        if at is not None:
            if s.timers.allow(f"probe {slid}", now, max(s.opts.sweep_interval, 1.0)):
                self._check_sm_at(at[0], at[1], slid, "polled us")
        elif s.peers:
            if s.timers.allow(REFRESH, now, REFRESH_INTERVAL_S):
                self._refresh_peers()
        else:
            self._census(f"an SM we cannot place polls us (LID {slid})")

    def on_set(self, modifier: int, remote) -> None:
        """An accepted SubnSet(SMInfo) (`events.SmInfoSetAccepted`), acted on in the loop."""
        s = self.shared
        sender = s.peers.get(remote.guid) or peersmod.from_topology(s.topo, remote)
        old = s.sm.state
        action = s.sm.on_set(modifier, remote, sender)
        log.info("SubnSet(SMInfo) %s from SM %#018x: state %s -> %s", Control(modifier).name, remote.guid,
                 state_name(old), state_name(s.sm.state))
        if modifier == Control.HANDOVER:
            s.counters.handovers_received += 1
        self._note_transition(old)
        if action == Action.TAKE_OVER:
            if sender is not None:
                self.send_sminfo_set(sender, Control.ACKNOWLEDGE, SMState.STANDBY)
            self.sweep(f"HANDOVER from SM {remote.guid:#018x}")
        elif action == Action.SWEEP:  # the other master let go: its hosts registered with its SA
            self.rereg.became_master()
            self.sweep(f"HANDOVER from master SM {remote.guid:#018x}")
        elif action == Action.DISCOVER:
            s.timers.arm(timers.DISCOVER, s.clock())
        elif action == Action.POLL:
            s.timers.arm(timers.POLL, s.clock() + s.opts.poll_interval)

    # -- STANDBY -------------------------------------------------------------------
    def poll_master(self) -> None:
        s = self.shared
        m = s.sm.master
        s.timers.arm(timers.POLL, s.clock() + s.opts.poll_interval)
        if m is None:
            return
        s.counters.polls += 1
        r = s.t.execute([Request(smpcodec.dr(Method.GET, AttrID.SM_INFO, m.path))], retries=0)[0]
        remote = r.value(SMInfo) if r.ok else None
        if remote is None:
            s.counters.poll_failures += 1
        old = s.sm.state
        action = s.sm.poll_result(remote)
        if remote is None:
            log.info("poll: master %#018x did not answer (%d of %d allowed)", m.guid, s.sm.poll_failures,
                     s.sm.poll_retries)
        self._note_transition(old)
        if action == Action.DISCOVER:
            self.discover()

    # -- helpers --------------------------------------------------------------------
    def send_sminfo_set(self, peer: Peer, control: Control, as_state: int) -> Reply | None:
        if not peer.path and not peer.lid:
            return None
        value = self.shared.sm.sminfo(self.shared.t.stats.sent, state=as_state)
        req = Request(smpcodec.dr(Method.SET, AttrID.SM_INFO, peer.path, int(control), value))
        rep = self.shared.t.execute([req])[0]
        log.info("sent SubnSet(SMInfo) %s to %s: %s", control.name, peer.describe(), "ok" if rep.ok else rep.error)
        return rep

    def _stranger(self, peer: Peer) -> None:
        self.shared.peers.stranger(peer)  # listed in the status, counted in the metrics
        two = peer.state == SMState.MASTER and self.shared.sm.state == SMState.MASTER
        log.log(logging.WARNING if self.shared.sm.new_stranger(peer.guid) or two else logging.DEBUG,
                "%s has another SM_Key: not a peer of ours, ignored (it ignores us likewise)%s", peer.describe(),
                "; it is MASTER too: two masters on one subnet" if two else "")

    def _note_transition(self, old: int) -> None:
        s = self.shared
        if s.sm.state != old:
            tr = s.sm.transitions[-1]
            log.info("state: %s -> %s (%s)", state_name(tr.old), state_name(tr.new), tr.why)
            s.changed(f"state {state_name(tr.old)} -> {state_name(tr.new)}: {tr.why}")
            if tr.new == SMState.MASTER:
                s.timers.cancel(timers.POLL)
                self.rereg.became_master()
            else:
                s.timers.cancel(timers.LIGHT, timers.REPAIR)

    def reregister(self, topo: discovery.Topology) -> int:
        """After a sweep's snapshot is published: ClientReregister, once per mastership
        (`smagent.sm.reregister`); how many ports it was sent to."""
        return self.rereg.after_sweep(self.shared.t, topo)
