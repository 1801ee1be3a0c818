"""`smagent run`: a Subnet Manager that stays up and holds the fabric.

One thread, one loop (`Daemon.step`): wait for MADs (the transport hands requests to
`_on_request`, which answers at once: SMInfo Gets and Sets, TrapRepress for traps, and
queues what needs work), answer the control socket, then run what is due:

* DISCOVERING: discover, ask every other SM its SMInfo, become MASTER or STANDBY
  (`smagent.sm.state`).
* MASTER: a full sweep first (`smagent.sweep`: plan, diff, write only what differs),
  then repairs after traps (coalesced for `trap_settle` seconds), a light sweep every
  `sweep_interval` (one SwitchInfo Get per switch, PortStateChange says if a port moved,
  plus one SMInfo Get per known SM: no Set when nothing changed), and the handover to a
  higher SM when one shows up.
* STANDBY: poll the master's SMInfo every `poll_interval`; after more than
  `poll_retries` unanswered polls, discover again (and so take over).

Every event is one log line: trap, sweep, change, state transition.
"""
from __future__ import annotations

import collections
import dataclasses
import logging
import math
import time
from pathlib import Path

from mad import smp as smpcodec
from mad.attributes import AttrID, NodeInfo, NodeType, PortInfo, SMInfo, SMState, SwitchInfo
from mad.errors import MadError
from mad.forwarding import PERMISSIVE_LID
from mad.header import Method, MgmtClass
from smagent import discovery
from smagent import sweep as sweepmod
from smagent.sm import state as smstate
from smagent.sm import repair, traps
from smagent.sm.state import Action, Control, Peer, StateMachine, state_name
from smagent.sa import SaAgent
from smagent.subnet import Subnet
from smagent.errors import BadInput, SmagentError
from smagent.transport.base import Reply, Request, Transport, TransportError

log = logging.getLogger("smagent.sm")

_SA_CLASS = bytes([MgmtClass.SUBN_ADM])
ATTR_NOT_SUPPORTED = 0x000C  # MAD status: method/attribute combination not supported
LID_FILE = "guid2lid"
REFRESH_INTERVAL_S = 1.0  # at most this often, a poll from another SM makes us re-ask the SMs we know  # OpenSM's format, in the state directory


@dataclasses.dataclass
class DaemonOptions:
    priority: int = 0
    sm_key: int = smstate.DEFAULT_SM_KEY
    sweep_interval: float = smstate.DEFAULT_SWEEP_INTERVAL_S  # 0: no light sweeps
    poll_interval: float = smstate.DEFAULT_POLL_INTERVAL_S
    poll_retries: int = smstate.DEFAULT_POLL_RETRIES
    trap_settle: float = 0.05  # traps of one event come in bursts (both ends of a link): repair once
    state_dir: str | None = None
    desired_file: str | None = None  # re-read on SIGHUP
    given: dict = dataclasses.field(default_factory=dict)  # lmc, lid_file, routing from the command line
    sweep: sweepmod.SweepOptions = dataclasses.field(default_factory=sweepmod.SweepOptions)


@dataclasses.dataclass
class Counters:
    sweeps: int = 0  # sweeps done: the bring-up, every repair (incremental or full), SIGHUP
    repairs: int = 0
    light_sweeps: int = 0
    light_sweep_gets: int = 0  # SMPs of the last light sweep (all Gets)
    traps: int = 0
    trap_numbers: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    sminfo_gets_answered: int = 0
    sminfo_sets_answered: int = 0
    handovers_sent: int = 0
    handovers_received: int = 0
    polls: int = 0
    poll_failures: int = 0
    errors: int = 0


class Daemon:
    def __init__(self, transport: Transport, opts: DaemonOptions, *, clock=time.monotonic):
        self.t, self.opts, self.clock = transport, opts, clock
        # by management class: the SA's (0x03) to the SA agent, the rest are SMPs
        transport.on_request = lambda m: self._on_sa(m) if m.raw[1:2] == _SA_CLASS else self._on_request(m.raw, m.slid)
        self.sa = SaAgent(opts.sm_key, master=False, sms=self._sms_seen)
        self._sm: StateMachine | None = None  # `start` makes it
        self.local_pi: PortInfo | None = None  # our port's PortInfo until discovery has the topology
        self._early: list[tuple[bytes, int]] = []  # SMInfo requests that came before we knew who we are
        self.topo: discovery.Topology | None = None
        self.peers: dict[int, Peer] = {}
        self.events: collections.deque = collections.deque()
        self.counters = Counters()
        self.stop_requested = self.reload_requested = False
        self.next_light = self.next_poll = self.next_discover = self.repair_due = math.inf
        self.next_census = self.next_refresh = 0.0
        self.repair_why: list[str] = []
        self.repair_switches: set[int] | None = set()  # GUIDs that reported; None: unknown, sweep all
        self.known: sweepmod.KnownState | None = None  # after a clean sweep: repairs plan against it
        self.last_change: dict | None = None
        self.last_sweep: dict | None = None
        self.started = time.time()
        if opts.state_dir:
            Path(opts.state_dir).mkdir(parents=True, exist_ok=True)
            opts.sweep.state_dir = opts.state_dir
            opts.sweep.lid_file = opts.sweep.lid_file or str(Path(opts.state_dir) / LID_FILE)
        opts.sweep.force = True  # the state machine decided we are MASTER; sweep must not refuse

    @property
    def sm(self) -> StateMachine:
        """The SM state machine (from `start` on)."""
        if self._sm is None:
            raise RuntimeError("the daemon has not started")
        return self._sm

    # -- the loop ------------------------------------------------------------------
    def start(self) -> None:
        """Learn our port GUID and run the first discovery."""
        ni = self.t.query(Request(smpcodec.dr(Method.GET, AttrID.NODE_INFO, (0,)))).attribute(NodeInfo)
        port = 0 if ni.node_type == NodeType.SWITCH else ni.local_port_num
        self.local_pi = self.t.query(Request(smpcodec.dr(Method.GET, AttrID.PORT_INFO, (0,), port))).attribute(PortInfo)
        self._sm = StateMachine(ni.port_guid, self.opts.priority, sm_key=self.opts.sm_key,
                               poll_retries=self.opts.poll_retries)
        early, self._early = self._early, []
        for raw, slid in early:
            self._on_request(raw, slid)
        log.info("start: SM port GUID %#018x, priority %d, state DISCOVERING", self.sm.guid, self.sm.priority)
        self._discover()

    def run(self, control=None) -> None:
        self.start()
        while not self.stop_requested:
            self.step(control)

    def step(self, control=None, max_wait: float = 0.2) -> None:
        """Wait up to `max_wait` (less if a timer is due) for MADs, then do what is due."""
        due = min(self.next_light, self.next_poll, self.next_discover, self.repair_due, self.sa.deadline or math.inf)
        self.t.poll(min(max_wait, max(0.0, due - self.clock())))
        for raw, addr in self.sa.on_timeout(self.clock()):  # RMPP windows sent again
            self.t.respond(raw, addr)
        if control is not None:
            control.serve_pending(lambda _cmd: self.status())
        while self.events:
            self._handle(self.events.popleft())
        if self.reload_requested:
            self.reload_requested = False
            self._reload()
        self._timers()

    def _timers(self) -> None:
        now = self.clock()
        st = self.sm.state
        if st == SMState.MASTER:
            if now >= self.repair_due:
                why, self.repair_why, self.repair_due = "; ".join(self.repair_why), [], math.inf
                switches, self.repair_switches = self.repair_switches, set()
                self._repair(f"repair after {why}", switches)
            elif now >= self.next_light:
                self._light_sweep()
        elif st == SMState.STANDBY and now >= self.next_poll:
            self._poll_master()
        elif st == SMState.DISCOVERING and now >= self.next_discover:
            self._discover()

    # -- answering (called inside the transport, even mid-batch) ---------------------
    def _on_sa(self, m) -> None:
        """An SA MAD: answered by the SA agent from the last published snapshot; only a
        MASTER serves (a STANDBY's SA answers "not supported", never silence)."""
        self.sa.master = self._sm is not None and self.sm.state == SMState.MASTER
        for raw, addr in self.sa.handle(m, self.clock()):
            self.t.respond(raw, addr)

    def _sms_seen(self) -> list[tuple[int, SMInfo]]:
        """(LID, SMInfo) of every SM we know: ours first, then the peers as they last answered."""
        if self._sm is None:
            return []
        me = self._local()
        out = [(me[2].lid if me is not None else 0, self.sm.sminfo(self.t.stats.sent, reveal_key=True))]
        out += [(p.lid, SMInfo(guid=p.guid, sm_key=0, act_count=p.act_count, priority=p.priority, sm_state=p.state))
                for p in self.peers.values() if p.guid != self.sm.guid]  # our own port shows IsSM too
        return out

    def _on_request(self, raw: bytes, slid: int) -> None:
        try:
            req = smpcodec.decode(raw)
        except MadError as e:
            log.warning("ignored an undecodable request: %s", e)
            return
        dlid = PERMISSIVE_LID if req.directed else (slid or PERMISSIVE_LID)
        if req.method == Method.TRAP and req.attribute_id == AttrID.NOTICE:
            self.t.respond(traps.repress(req), dlid)
            try:
                self.events.append(("trap", traps.parse(req)))
            except MadError as e:
                log.warning("trap with a malformed Notice from LID %d: %s", slid, e)
            return
        if req.method not in (Method.GET, Method.SET):
            return  # a TrapRepress to a trap of ours, or a method no SM answers
        if req.attribute_id != AttrID.SM_INFO:
            # an SMA's business; answered all the same: under ibsim an unanswered request
            # is never timed out, and its sender would wait for ever
            self.t.respond(smpcodec.encode(smpcodec.response_to(req, status=ATTR_NOT_SUPPORTED)), dlid)
            return
        if self._sm is None:
            self._early.append((raw, slid))  # before we know our GUID: answered by `start`
            return
        try:
            remote: SMInfo | None = req.attribute(SMInfo)
        except MadError:
            remote = None
        act = self.t.stats.sent
        if req.method == Method.GET:
            self.counters.sminfo_gets_answered += 1
            value = self.sm.sminfo(act, reveal_key=self._reveal_key(req.m_key))
            self.t.respond(smpcodec.encode(smpcodec.response_to(req, value=value)), dlid)
            if self.sm.state == SMState.MASTER:
                self.events.append(("polled", None))  # a STANDBY SM polls us: is it one to hand over to?
            return
        self.counters.sminfo_sets_answered += 1
        status = self.sm.check_set(req.attribute_modifier, remote) if remote is not None else \
            smstate.INVALID_VALUE_STATUS
        self.t.respond(smpcodec.encode(smpcodec.response_to(req, status=status, value=self.sm.sminfo(act))), dlid)
        if status == 0:
            self.events.append(("set", req.attribute_modifier, remote))
        else:
            log.warning("refused SubnSet(SMInfo) %s from SM %#018x (state %s) in state %s",
                        Control(req.attribute_modifier).name if req.attribute_modifier in Control._value2member_map_
                        else req.attribute_modifier, remote.guid if remote else 0,
                        state_name(remote.sm_state) if remote else "?", state_name(self.sm.state))

    # -- events -------------------------------------------------------------------
    def _handle(self, ev) -> None:
        kind = ev[0]
        if kind == "trap":
            self._on_trap(ev[1])
        elif kind == "set":
            self._on_set(ev[1], ev[2])
        elif kind == "polled" and self.sm.state == SMState.MASTER and self.clock() >= self.next_refresh:
            self.next_refresh = self.clock() + REFRESH_INTERVAL_S
            if self.peers:
                self._refresh_peers()
            else:
                self._census("an SM we do not know polls us")

    def _on_trap(self, trap) -> None:
        c = self.counters
        c.traps += 1
        c.trap_numbers[trap.number] += 1
        log.info("trap: %s (TrapRepress sent)", trap.describe())
        if self.sm.state != SMState.MASTER:
            return
        if trap.generic and trap.number in traps.REPAIR_TRAPS:
            self.repair_why.append(f"trap {trap.number} from LID {trap.issuer_lid}")
            self.repair_due = min(self.repair_due, self.clock() + self.opts.trap_settle)
            sw = self._switch_at_lid(trap.issuer_lid) if trap.number == traps.TrapNumber.LINK_STATE_CHANGE else None
            if sw is None or self.repair_switches is None:
                self.repair_switches = None
            else:
                self.repair_switches.add(sw)
        elif trap.announces_sm:
            self._check_sm_at_lid(trap.issuer_lid)

    def _on_set(self, modifier: int, remote) -> None:
        sender = self.peers.get(remote.guid) or self._peer_from_topology(remote)
        old = self.sm.state
        action = self.sm.on_set(modifier, remote, sender)
        log.info("SubnSet(SMInfo) %s from SM %#018x: state %s -> %s", Control(modifier).name, remote.guid,
                 state_name(old), state_name(self.sm.state))
        if modifier == Control.HANDOVER:
            self.counters.handovers_received += 1
        self._note_transition(old)
        if action == Action.TAKE_OVER:
            if sender is not None:
                self._send_sminfo_set(sender, Control.ACKNOWLEDGE, SMState.STANDBY)
            self._sweep(f"HANDOVER from SM {remote.guid:#018x}")
        elif action == Action.SWEEP:
            self._sweep(f"HANDOVER from master SM {remote.guid:#018x}")
        elif action == Action.DISCOVER:
            self.next_discover = self.clock()
        elif action == Action.POLL:
            self.next_poll = self.clock() + self.opts.poll_interval

    # -- DISCOVERING ---------------------------------------------------------------
    def _discover(self) -> None:
        self.next_discover = math.inf
        try:
            self.topo = discovery.discover(self.t)
            peers = self._ask_sms(self.topo)
        except TransportError as e:
            self._failed("discovery", e)
            self.next_discover = self.clock() + max(self.opts.sweep_interval, 1.0)
            return
        old = self.sm.state
        action = self.sm.discovered(peers)
        self._note_transition(old)
        log.info("discovery: %d nodes, %d other SM(s)%s; state %s", len(self.topo.nodes), len(peers),
                 "".join(f"; {p.describe()}" for p in peers), state_name(self.sm.state))
        if action == Action.SWEEP:
            self._sweep("became MASTER")
        elif action == Action.POLL:
            self._announce_to_master()
            self.next_poll = self.clock() + self.opts.poll_interval

    def _ask_sms(self, topo: discovery.Topology) -> list[Peer]:
        peers = []
        for n, p, pi, r in sweepmod.find_sms(self.t, topo):
            if not r.ok:
                log.info("%s port %d has IsSM but SMInfo did not answer: %s", n.description, p, r.error)
                continue
            s = r.value(SMInfo)
            peers.append(Peer(s.guid, s.priority, s.sm_state, s.act_count, n.path_to_port(p), pi.lid, n.description))
        self.peers = {p.guid: p for p in peers}
        return peers

    def _announce_to_master(self) -> None:
        """Trap 144 to the master (as OpenSM does on entering STANDBY): a lower master
        then sweeps, finds us and hands over."""
        m = self.sm.master
        local = self._local()
        if m is None or not m.lid or local is None:
            return
        node, port, pi = local
        self.t.respond(traps.trap_144(pi.lid, pi.capability_mask, node.node_type), m.lid)
        log.info("sent trap 144 to the master at LID %d", m.lid)

    # -- MASTER --------------------------------------------------------------------
    def _repair(self, why: str, switches: set[int] | None) -> None:
        """Patch the known state from the switches that reported, then plan against it
        (no rediscovery, no table reads); a full sweep when that cannot be done."""
        self.counters.repairs += 1
        known, self.known = self.known, None  # consumed: the sweep sets it again
        sent0 = self.t.stats.sent
        if known is not None and switches:
            try:
                ok, what = repair.update(self.t, known, switches)
            except TransportError as e:
                ok, what = False, [str(e)]
            if ok:
                log.info("repair: %s (%d SMPs to read the reporting switches)",
                         "; ".join(what) or "no link changed", self.t.stats.sent - sent0)
                self._sweep(why, known=known, smps_before=sent0)
                return
            log.info("repair: a full sweep instead (%s)", "; ".join(what))
        self._sweep(why, smps_before=sent0)

    def _switch_at_lid(self, lid: int) -> int | None:
        topo = self.known.topology if self.known is not None else self.topo
        for n in (topo.switches() if topo else ()):
            if n.lid(0) == lid:
                return n.guid
        return None

    def _sweep(self, why: str, known: sweepmod.KnownState | None = None, smps_before: int | None = None) -> None:
        st = self.t.stats
        sent0, kinds0 = st.sent if smps_before is None else smps_before, collections.Counter(st.by_kind)
        t0 = self.clock()
        try:
            r = sweepmod.sweep(self.t, dataclasses.replace(self.opts.sweep, known=known))
        except SmagentError as e:  # a fabric failure, or a desired state the fabric does not match
            self._failed(f"sweep ({why})", e)
            self.next_light = self.clock() + max(self.opts.sweep_interval, 1.0)
            return
        self.topo = r.topology
        self.sa.publish(Subnet.from_sweep(r, generation=self.counters.sweeps + 1))  # whole, or not at all
        clean = not r.problems and not r.topology.unreachable
        self.known = r.known if clean else None
        self.counters.sweeps += 1
        kinds = collections.Counter(st.by_kind) - kinds0
        sets = sum(v for k, v in kinds.items() if k.startswith("SubnSet"))
        s = r.summary()["sets"]
        self.last_sweep = {"why": why, "incremental": known is not None, "smps": st.sent - sent0, "sets": sets, "lft_blocks": s["lft_blocks"],
                           "mft_blocks": s["mft_blocks"], "portinfo": s["portinfo"],
                           "seconds": round(self.clock() - t0, 3), "problems": len(r.problems), "time": time.time()}
        log.info("%s (%s): %d nodes, %d SMPs (%d Sets: LFT blocks %d, MFT blocks %d, PortInfo %d), %.3f s%s",
                 "repair" if known is not None else "sweep", why, len(r.topology.nodes), st.sent - sent0, sets, s["lft_blocks"], s["mft_blocks"],
                 s["portinfo"], self.clock() - t0, f"; {len(r.problems)} problem(s): {r.problems[0]}"
                 if r.problems else "")
        if sets:
            self._changed(f"{why}: {sets} Sets")
        self.next_light = self.clock() + self.opts.sweep_interval if self.opts.sweep_interval else math.inf
        if known is None:  # a repair changed links, not SMs: the light sweeps watch those
            self._check_peers(self._ask_sms(r.topology))

    def _light_sweep(self) -> None:
        """SwitchInfo of every switch (PortStateChange) and SMInfo of every known SM."""
        self.next_light = self.clock() + self.opts.sweep_interval if self.opts.sweep_interval else math.inf
        switches: list[discovery.DNode] = self.topo.switches() if self.topo else []
        peers = list(self.peers.values())
        reqs = [Request(smpcodec.dr(Method.GET, AttrID.SWITCH_INFO, n.path)) for n in switches]
        reqs += [Request(smpcodec.dr(Method.GET, AttrID.SM_INFO, p.path)) for p in peers]
        sent0 = self.t.stats.sent
        replies = self.t.execute(reqs)
        self.counters.light_sweeps += 1
        self.counters.light_sweep_gets = self.t.stats.sent - sent0
        moved = [n for n, r in zip(switches, replies) if not r.ok or r.value(SwitchInfo).port_state_change]
        unread = any(not r.ok for r in replies[:len(switches)])
        for p, r in zip(peers, replies[len(switches):]):
            if r.ok:
                s = r.value(SMInfo)
                p.state, p.priority, p.act_count = s.sm_state, s.priority, s.act_count
            else:
                log.info("light sweep: %s no longer answers", p.describe())
                del self.peers[p.guid]
        log.info("light sweep: %d Gets, %s", self.counters.light_sweep_gets,
                 f"change at {', '.join(n.description for n in moved[:4])}{' ...' if len(moved) > 4 else ''}"
                 if moved else "no change")
        if moved:
            self._repair(f"light sweep found a change at {moved[0].description}",
                         None if unread else {n.guid for n in moved})
            return
        self._check_peers(list(self.peers.values()))

    def _refresh_peers(self) -> None:
        """SMInfo of every SM we know (a few Gets), then hand over if one outranks us."""
        peers = list(self.peers.values())
        for p, r in zip(peers, self.t.execute([Request(smpcodec.dr(Method.GET, AttrID.SM_INFO, p.path))
                                               for p in peers])):
            if r.ok:
                s = r.value(SMInfo)
                p.state, p.priority, p.act_count = s.sm_state, s.priority, s.act_count
        self._check_peers(peers)

    def _check_peers(self, peers: list[Peer]) -> None:
        action, peer = self.sm.check_peers(peers)
        if action == Action.HAND_OVER and peer is not None:
            self._hand_over(peer)

    def _hand_over(self, peer: Peer) -> None:
        rep = self._send_sminfo_set(peer, Control.HANDOVER, SMState.MASTER)
        if rep is None or not rep.ok:
            log.warning("HANDOVER to %s failed: %s", peer.describe(), rep.error if rep else "no path")
            return
        self.counters.handovers_sent += 1
        old = self.sm.state
        self.sm.handed_over(peer)
        self._note_transition(old)
        log.info("handed over to %s: state %s", peer.describe(), state_name(self.sm.state))
        self.next_light = math.inf
        self.next_poll = self.clock() + self.opts.poll_interval

    def _check_sm_at_lid(self, lid: int) -> None:
        for n in (self.topo.nodes.values() if self.topo else ()):
            for p in n.lid_ports():
                if n.lid(p) == lid:
                    r = self.t.execute([Request(smpcodec.dr(Method.GET, AttrID.SM_INFO, n.path_to_port(p)))])[0]
                    if r.ok:
                        s = r.value(SMInfo)
                        peer = Peer(s.guid, s.priority, s.sm_state, s.act_count, n.path_to_port(p), lid, n.description)
                        self.peers[peer.guid] = peer
                        log.info("SM announced itself: %s", peer.describe())
                        self._check_peers(list(self.peers.values()))
                    return
        self._census(f"trap 144 from unknown LID {lid}")

    def _census(self, why: str) -> None:
        """PortInfo of every CA port (IsSM may have appeared without a trap), then SMInfo
        of the new SM ports. Costly on a large fabric, so only when something says an SM
        we do not know is there."""
        if self.topo is None or self.clock() < self.next_census:
            return
        self.next_census = self.clock() + max(self.opts.sweep_interval, 1.0)
        reqs, where = [], []
        for n in self.topo.cas():
            for p, path in n.port_paths.items():
                if (n.guid, p) != self.topo.local:
                    reqs.append(Request(smpcodec.dr(Method.GET, AttrID.PORT_INFO, path, p)))
                    where.append((n, p))
        for (n, p), r in zip(where, self.t.execute(reqs)):
            if r.ok:
                n.ports[p] = r.value(PortInfo)
        log.info("SM census (%s): %d PortInfo Gets", why, len(reqs))
        self._check_peers(self._ask_sms(self.topo))

    # -- STANDBY -------------------------------------------------------------------
    def _poll_master(self) -> None:
        m = self.sm.master
        self.next_poll = self.clock() + self.opts.poll_interval
        if m is None:
            return
        self.counters.polls += 1
        r = self.t.execute([Request(smpcodec.dr(Method.GET, AttrID.SM_INFO, m.path))], retries=0)[0]
        remote = r.value(SMInfo) if r.ok else None
        if remote is None:
            self.counters.poll_failures += 1
        old = self.sm.state
        action = self.sm.poll_result(remote)
        if remote is None:
            log.info("poll: master %#018x did not answer (%d of %d allowed)", m.guid, self.sm.poll_failures,
                     self.sm.poll_retries)
        self._note_transition(old)
        if action == Action.DISCOVER:
            self._discover()

    # -- helpers --------------------------------------------------------------------
    def _send_sminfo_set(self, peer: Peer, control: Control, as_state: int) -> Reply | None:
        if not peer.path and not peer.lid:
            return None
        value = self.sm.sminfo(self.t.stats.sent, state=as_state)
        req = Request(smpcodec.dr(Method.SET, AttrID.SM_INFO, peer.path, int(control), value))
        rep = self.t.execute([req])[0]
        log.info("sent SubnSet(SMInfo) %s to %s: %s", control.name, peer.describe(), "ok" if rep.ok else rep.error)
        return rep

    def _peer_from_topology(self, remote: SMInfo) -> Peer | None:
        found = self.topo.by_guid(remote.guid) if self.topo else None
        if not found:
            return None
        n, p = found
        if p is None:
            return None
        return Peer(remote.guid, remote.priority, remote.sm_state, remote.act_count, n.path_to_port(p),
                    n.lid(p), n.description)

    def _reveal_key(self, request_m_key: int) -> bool:
        local = self._local()
        pi = local[2] if local is not None else self.local_pi
        if pi is None:  # an SMInfo Get before `start` read our PortInfo: reveal nothing
            return False
        return smstate.reveal_sm_key(pi.m_key, pi.m_key_protect_bits, request_m_key)

    def _local(self) -> tuple[discovery.DNode, int, PortInfo] | None:
        if self.topo is None:
            return None
        g, p = self.topo.local
        n = self.topo.nodes[g]
        pi = n.ports.get(0 if n.is_switch else p)
        return (n, p, pi) if pi is not None else None

    def _note_transition(self, old: int) -> None:
        if self.sm.state != old:
            tr = self.sm.transitions[-1]
            log.info("state: %s -> %s (%s)", state_name(tr.old), state_name(tr.new), tr.why)
            self._changed(f"state {state_name(tr.old)} -> {state_name(tr.new)}: {tr.why}")
            if tr.new == SMState.MASTER:
                self.next_poll = math.inf
            elif tr.new != SMState.MASTER:
                self.next_light = self.repair_due = math.inf

    def _changed(self, what: str) -> None:
        self.last_change = {"time": time.time(), "what": what}

    def _failed(self, what: str, err) -> None:
        self.counters.errors += 1
        log.error("%s failed: %s", what, err)

    def _reload(self) -> None:
        f = self.opts.desired_file
        if f:
            from smagent import desired
            try:
                settings = desired.sweep_settings(desired.load(f), **self.opts.given)
            except BadInput as e:  # a bad file, or one contradicting the command line
                log.error("SIGHUP: %s not reloaded, the previous desired state stays: %s", f, e)
                return
            for k, v in settings.items():
                setattr(self.opts.sweep, k, v)
            log.info("SIGHUP: desired state re-read from %s", f)
        else:
            log.info("SIGHUP: no desired-state file; sweeping again")
        if self.sm.state == SMState.MASTER:
            self._sweep("SIGHUP")

    def status(self) -> dict:
        sm = self.sm
        if sm is None:
            return {"state": "STARTING"}
        master = sm.guid if sm.state == SMState.MASTER else (sm.master.guid if sm.master else None)
        c = dataclasses.asdict(self.counters)
        c["trap_numbers"] = {str(k): v for k, v in sorted(self.counters.trap_numbers.items())}
        return {
            "state": state_name(sm.state), "priority": sm.priority, "guid": f"{sm.guid:#018x}",
            "master_guid": None if master is None else f"{master:#018x}",
            "sweeps": self.counters.sweeps, "last_sweep": self.last_sweep, "last_change": self.last_change,
            "counters": c, "smps_sent": self.t.stats.sent,
            "other_sms": [{"guid": f"{p.guid:#018x}", "priority": p.priority, "state": state_name(p.state),
                           "lid": p.lid, "node": p.name} for p in self.peers.values()],
            "transitions": [{"from": state_name(t.old), "to": state_name(t.new), "why": t.why}
                            for t in sm.transitions[-10:]],
            "uptime_s": round(time.time() - self.started, 1),
        }
