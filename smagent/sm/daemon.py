"""`smagent run`: a Subnet Manager that stays up and holds the fabric.

One thread, one loop (`Daemon.step`): wait for MADs (the transport hands each request to
the dispatcher, `smagent.sm.dispatch`, whose handlers answer at once: SMInfo Gets and Sets,
TrapRepress for traps, the IBA status for what we do not serve, and queue what needs work
as an event, `smagent.sm.events`), answer the control socket, handle the events, then run
the timer that is due (`smagent.sm.timers`). While a sweep or discovery is in flight, the
transport calls `Daemon._between_rounds` every ~50 ms: requests are answered as they come
(inside the transport; while a sweep computes, from a second thread: `smagent.sm.serving`),
the status the control socket answers from is published again (the socket is served by its
own thread, `smagent.sm.control`, so that a long computation inside a sweep keeps no client
waiting), and a stop abandons the sweep (`Stopped`). A SIGTERM in
the middle of work raises `Stopped` at once, as Ctrl-C raises KeyboardInterrupt in
`smagent sweep`: an interrupted apply is finished by the next sweep from its journal.

* DISCOVERING: discover, ask every other SM its SMInfo, become MASTER or STANDBY
  (`smagent.sm.statemachine`).
* MASTER: a full sweep first (`smagent.sweep`: plan, diff, write only what differs),
  then repairs after traps (coalesced for `trap_settle` seconds), a light sweep every
  `sweep_interval` (one SwitchInfo Get per switch, PortStateChange says if a port moved,
  plus one SMInfo Get per known SM: no Set when nothing changed), and the handover to a
  higher SM when one shows up.
* STANDBY: poll the master's SMInfo every `poll_interval`; after more than
  `poll_retries` unanswered polls, discover again (and so take over).

The other SMs are `smagent.sm.peers`; a fabric failure anywhere is logged, counted and
survived (`_busy`); a sweep left with problems is followed at once by a full one.

Every event is one log line: trap, sweep, change, state transition.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import time
from pathlib import Path

from mad import smp as smpcodec
from mad.attributes import AttrID, NodeInfo, NodeType, PortInfo, SMInfo, SMState, SwitchInfo, TrapNumber
from mad.errors import MadError
from mad.forwarding import PERMISSIVE_LID
from mad.header import Method, MgmtClass
from smagent import discovery, routing
from smagent import sweep as sweepmod
from smagent.sm import statemachine as smstate
from smagent.sm import audit as auditmod, drained as drainedmod, events, peers as peersmod, reload, repair, report
from smagent.sm import policy, timers, traps, unserved
from smagent.sm.dispatch import SMP_CLASSES, Dispatcher
from smagent.sm.options import Counters, DaemonOptions
from smagent.sm.sa_service import SaService
from smagent.sm.serving import BusyServer
from smagent.sm.perfmgr import PerfMgr
from smagent.sm.reregister import ClientReregister
from smagent.transport.address import Incoming
from smagent.sm.statemachine import Action, Control, Peer, StateMachine, state_name
from smagent.errors import SmagentError
from smagent.transport.base import Reply, Request, Transport

log = logging.getLogger("smagent.sm")

LID_FILE = "guid2lid"  # OpenSM's format, in the state directory
REFRESH_INTERVAL_S = 1.0  # at most this often, a poll from another SM makes us re-ask the SMs we know
REFRESH, CENSUS = "refresh", "census"  # gates (rate limits) in the daemon's Timers
RESWEEPS_AFTER_PROBLEMS, RETRY_AFTER_FAILURE = policy.RESWEEPS_AFTER_PROBLEMS, policy.RETRY_AFTER_FAILURE


PUBLISH_EVERY_S = 0.05  # the published status is at most this old when nothing important changed


class Stopped(BaseException):
    """SIGTERM or SIGINT while the daemon works: raised from the transport's between-rounds
    hook so that a sweep or discovery unwinds at once. A BaseException, like
    KeyboardInterrupt: no `except Exception` (or SmagentError) on the way may swallow it;
    the apply journal keeps what an interrupted apply left unconfirmed."""

    def __init__(self, what: str | None):
        super().__init__(what)
        self.what = what  # the work abandoned, for the log


class Daemon:
    def __init__(self, transport: Transport, opts: DaemonOptions, *, clock=time.monotonic):
        self.t, self.opts, self.clock = transport, opts, clock
        self.dispatcher = Dispatcher(self._unsupported)
        self.dispatcher.route(SMP_CLASSES, Method.GET, AttrID.SM_INFO, self._on_sminfo)
        self.dispatcher.route(SMP_CLASSES, Method.SET, AttrID.SM_INFO, self._on_sminfo)
        self.dispatcher.route(SMP_CLASSES, Method.TRAP, AttrID.NOTICE, self._on_trap_request)
        self.dispatcher.route(SMP_CLASSES, Method.TRAP_REPRESS, AttrID.NOTICE, lambda m: None)  # to a trap of ours
        self.sa = SaService(self)
        self.dispatcher.route_class(MgmtClass.SUBN_ADM, self.sa.on_mad)
        transport.on_request = self.dispatcher.dispatch  # an Incoming: bytes and source address
        self.busy = BusyServer(transport)  # serves requests while a sweep computes
        self._sm: StateMachine | None = None  # `start` makes it
        self.local_pi: PortInfo | None = None  # our port's PortInfo until discovery has the topology
        self._early: list[Incoming] = []  # SMInfo requests that came before we knew who we are
        self.topo: discovery.Topology | None = None
        self.peers = peersmod.OtherSms()
        self.events: collections.deque[events.Event] = collections.deque()
        self.counters = Counters()
        self.stop_requested = self.reload_requested = False
        self.timers = timers.Timers()
        self.control = None  # the ControlServer `run` serves, also between sweep rounds
        self._activity: str | None = "starting"  # what the daemon is busy with (`activity`)
        self._in_run = False  # inside `run`: a stop may raise Stopped there
        self._published: dict = {}  # the status the control thread answers with
        self._published_key: tuple = ()  # what it was built from (`_publish_if_due`)
        self._publish_at = 0.0
        self.perfmgr = PerfMgr(opts.perfmgr_interval) if opts.perfmgr_interval else None
        self.audit = auditmod.Audit(opts.audit_share)
        self.drained = drainedmod.Drained(opts.state_dir)  # BadInput (exit 2) on a damaged file
        self.rereg = ClientReregister(opts.client_reregister)  # once per mastership, after its first sweep
        self.repair_why: list[str] = []
        self.repair_switches: set[int] | None = set()  # GUIDs that reported; None: unknown, sweep all
        self.known: sweepmod.KnownState | None = None  # after a clean sweep: repairs plan against it
        self.last_change: dict | None = None
        opts.sweep.routing_memory = routing.AutoMemory()  # auto keeps its engine while it fits; `status` shows it
        self.last_sweep: dict | None = None  # the last sweep or repair, failed ones too
        self.last_error: dict | None = None  # the last failure: what, the error, when
        self._resweeps = 0  # full sweeps in a row after sweeps that ended with problems
        self._retries = 0  # sweeps tried again in a row after failed ones (RETRY_AFTER_FAILURE)
        self.reopen_logs = None  # `smagent run` sets it: SIGHUP reopens the log file (logrotate)
        self.log_flood = None  # `smagent run` sets it: its FloodFilter, whose summaries the loop writes
        self.config = reload.Config()  # the last good sweep settings, what SIGHUP did
        self.started = time.time()
        if opts.state_dir:
            Path(opts.state_dir).mkdir(parents=True, exist_ok=True)
            opts.sweep.state_dir = opts.state_dir
            opts.sweep.lid_file = opts.sweep.lid_file or str(Path(opts.state_dir) / LID_FILE)
        opts.sweep.force = True  # the state machine decided we are MASTER; sweep must not refuse
        opts.sweep.keep_link_tables = True  # the SA's P_Key, SL2VL and VLArb records

    @property
    def activity(self) -> str | None:
        """What the daemon is busy with (None: waiting), for the status."""
        return self._activity

    @activity.setter
    def activity(self, what: str | None) -> None:
        if what != self._activity:
            self._activity = what
            self._publish()  # the control socket says so at once, not at the next round

    @property
    def sm(self) -> StateMachine:
        """The SM state machine (from `start` on)."""
        if self._sm is None:
            raise RuntimeError("the daemon has not started")
        return self._sm

    # -- the loop ------------------------------------------------------------------
    def start(self) -> None:
        """Learn our port GUID and run the first discovery."""
        self.t.between_rounds = self._between_rounds
        ni = self.t.query(Request(smpcodec.dr(Method.GET, AttrID.NODE_INFO, (0,)))).attribute(NodeInfo)
        port = 0 if ni.node_type == NodeType.SWITCH else ni.local_port_num
        self.local_pi = self.t.query(Request(smpcodec.dr(Method.GET, AttrID.PORT_INFO, (0,), port))).attribute(PortInfo)
        self._sm = StateMachine(ni.port_guid, self.opts.priority, sm_key=self.opts.sm_key,
                               poll_retries=self.opts.poll_retries)
        self.peers.own_guid = ni.port_guid
        early, self._early = self._early, []
        for m in early:
            self.dispatcher.dispatch(m)
        log.info("start: on %s, SM port GUID %#018x, priority %d, state DISCOVERING", self.t.describe(), self.sm.guid,
                 self.sm.priority)
        if self.perfmgr is not None:
            self.timers.arm(timers.PERFMGR, self.clock() + self.perfmgr.interval)
        self._discover()

    def run(self, control=None) -> None:
        """Until SIGTERM (`stop`): a stop during a sweep abandons it at once."""
        self.control = control
        self._publish()
        if control is not None:
            control.start(self._answer_control)
        try:
            self._in_run = True
            self.start()
            while not self.stop_requested:
                self.step(control)
        except Stopped as e:
            self._in_run = False
            log.info("stop: %s abandoned", e.what or "work in progress")
        finally:
            self._in_run = False
            self.activity = None
            self._publish()

    def stop(self) -> None:
        """Ask the daemon to stop; called from the SIGTERM handler. Inside `run`, work in
        progress (a sweep, a discovery) is abandoned at once by raising `Stopped` into it;
        otherwise the loop ends at its next step."""
        self.stop_requested = True
        if self._in_run and self.activity is not None:
            self._in_run = False  # once: a second signal must not interrupt the unwinding
            raise Stopped(self.activity)

    def step(self, control=None, max_wait: float = 0.2) -> None:
        """Wait up to `max_wait` (less if a timer is due) for MADs, then do what is due."""
        control = control if control is not None else self.control
        self.activity = None
        self._publish_if_due()
        try:
            self.t.poll(min(max_wait, max(0.0, min(self.timers.next_at(), self.sa.deadline) - self.clock())))
            self.sa.tick()
        except SmagentError as e:  # the device failed under us: say so, and keep going
            self._failed("waiting for MADs", e)
            time.sleep(min(max_wait, 0.2))  # not a busy loop while it stays broken
        if control is not None and not control.threaded:
            control.serve_pending(self._answer_control)
        while self.events and not self.stop_requested:
            self._handle(self.events.popleft())
        if self.log_flood is not None:
            self.log_flood.flush()
        if self.reload_requested and not self.stop_requested:
            self.reload_requested = False
            self._reload()
        if not self.stop_requested:
            self.sa.follow()  # joins, leaves and alias GUIDs answered since: the MFTs and GUIDInfo follow
            self._run_due_timer()

    def _between_rounds(self) -> None:
        """Called by the transport while a batch is in flight (`Transport.between_rounds`)."""
        if self.stop_requested and self._in_run:
            self._in_run = False
            raise Stopped(self.activity)
        self._publish()
        self.sa.tick()
        if self.control is not None and not self.control.threaded:
            self.control.serve_pending(self._answer_control)

    def _publish(self) -> None:
        """The status as it is now, at a consistent point of the loop, for the control socket."""
        self._published = self.status()
        self._published_key, self._publish_at = self._status_key(), time.monotonic() + PUBLISH_EVERY_S

    def _status_key(self) -> tuple:
        c = self.counters
        return (self._sm.state if self._sm else None, self.activity, c.sweeps, c.sweeps_failed, c.errors)

    def _publish_if_due(self) -> None:
        """At once when the state, the work or the sweeps changed; else at most every
        PUBLISH_EVERY_S: a flood of SA queries wakes the loop for each, and building the
        whole status every time would cost more than answering them."""
        if time.monotonic() >= self._publish_at or self._status_key() != self._published_key:
            self._publish()

    def _answer_control(self, command: str, args: dict | None = None):
        if command != "status":  # drain, undrain: the loop does them (`smagent.sm.drained`)
            return drainedmod.submit(self, command, args or {})
        # the control thread: the status published last, never the daemon's live fields
        return self._published if self.control is not None and self.control.threaded else self.status()

    @contextlib.contextmanager
    def _busy(self, what: str):
        """Name what the daemon does (the status shows it); fabric failures inside are
        logged and counted, never fatal: the daemon stays up."""
        self.activity = what
        try:
            yield
        except SmagentError as e:
            self._failed(what, e)
        finally:
            self.activity = None

    def _run_due_timer(self) -> None:
        name = self.timers.due(self.clock())
        if name == timers.REPAIR:
            why, self.repair_why = events.why_of(self.repair_why), []
            switches, self.repair_switches = self.repair_switches, set()
            self._repair(f"repair after {why}", switches)
        elif name == timers.LIGHT:
            with self._busy("light sweep"):
                self._light_sweep()
        elif name == timers.POLL:
            with self._busy("poll of the master"):
                self._poll_master()
        elif name == timers.DISCOVER:
            self._discover()
        elif name == timers.PERFMGR and self.perfmgr is not None:
            self.timers.arm(timers.PERFMGR, self.clock() + self.perfmgr.interval)
            if self.topo is not None and self.sm.state == SMState.MASTER:
                with self._busy("counter sweep"):
                    self.perfmgr.sweep(self.t, self.topo)

    # -- answering (called inside the transport, even mid-batch) ---------------------
    def _decoded(self, m: Incoming):
        try:
            return smpcodec.decode(m.raw)
        except MadError as e:
            log.warning("ignored an undecodable request from LID %d: %s", m.slid, e)
            return None

    @staticmethod
    def _reply_lid(req, slid: int) -> int:
        return PERMISSIVE_LID if req.directed else (slid or PERMISSIVE_LID)

    def _respond(self, raw: bytes, dlid: int) -> None:
        """Send an answer; a failure to send is logged, never fatal (we run inside the
        transport, perhaps in the middle of a sweep)."""
        try:
            self.t.respond(raw, dlid)
        except SmagentError as e:
            self._failed(f"answering LID {dlid}", e)

    def _unsupported(self, m: Incoming) -> None:
        """Any request we do not serve: a Get or Set answered with the IBA status
        (`smagent.sm.unserved`)."""
        out = unserved.answer(m, self._reply_lid)
        if out is not None:
            try:
                self.t.respond(*out)
            except SmagentError as e:  # logged, never fatal: we may be inside the transport
                self._failed("answering an unserved request", e)

    def _on_trap_request(self, m: Incoming) -> None:
        req = self._decoded(m)
        if req is None:
            return
        self._respond(traps.repress(req, self.t.keys, 0 if req.directed else m.slid), self._reply_lid(req, m.slid))
        try:
            self.events.append(events.TrapReceived(traps.parse(req)))
        except MadError as e:
            log.warning("trap with a malformed Notice from LID %d: %s", m.slid, e)

    def _on_sminfo(self, m: Incoming) -> None:
        req = self._decoded(m)
        if req is None:
            return
        if self._sm is None:
            self._early.append(m)  # before we know our GUID: answered by `start`
            return
        dlid = self._reply_lid(req, m.slid)
        try:
            remote: SMInfo | None = req.attribute(SMInfo)
        except MadError:
            remote = None
        act = self.t.stats.sent
        if req.method == Method.GET:
            self.counters.sminfo_gets_answered += 1
            value = self.sm.sminfo(act, reveal_key=self._reveal_key(req.m_key, remote))
            self._respond(smpcodec.encode(smpcodec.response_to(req, value=value)), dlid)
            if self.sm.state == SMState.MASTER:
                self.events.append(events.PolledBySm(m.slid))
            return
        self.counters.sminfo_sets_answered += 1
        sender = peersmod.sender_guid(self.topo, req, m.slid)
        status, why = self.sm.set_verdict(req.attribute_modifier, remote, sender, sender_known=self.topo is not None)
        value = self.sm.sminfo(act, reveal_key=self._reveal_key(req.m_key, remote))
        self._respond(smpcodec.encode(smpcodec.response_to(req, status=status, value=value)), dlid)
        if status == 0 and remote is not None:
            self.events.append(events.SmInfoSetAccepted(req.attribute_modifier, remote))
        else:  # refused: answered with the status, nothing changes (the key is never logged)
            log.warning("refused SubnSet(SMInfo) %s from SM %#018x (state %s; port %s) in state %s: %s",
                        Control(req.attribute_modifier).name if req.attribute_modifier in Control._value2member_map_
                        else req.attribute_modifier, remote.guid if remote else 0,
                        state_name(remote.sm_state) if remote else "?", "?" if sender is None else f"{sender:#018x}",
                        state_name(self.sm.state), why)

    # -- events -------------------------------------------------------------------
    def _handle(self, ev: events.Event) -> None:
        if isinstance(ev, events.TrapReceived):
            self._on_trap(ev.trap)
        elif isinstance(ev, events.SmInfoSetAccepted):
            with self._busy("acting on a SubnSet(SMInfo)"):
                self._on_set(ev.modifier, ev.remote)
        elif isinstance(ev, events.PolledBySm) and self.sm.state == SMState.MASTER:
            with self._busy("asking the SM that polled us"):
                self._on_polled(ev.slid)
        elif isinstance(ev, events.ControlCommand):
            drainedmod.handle(self, ev)

    def _on_trap(self, trap: traps.Trap) -> None:
        c = self.counters
        c.traps += 1
        c.trap_numbers[trap.number] += 1
        if trap.generic and trap.number == TrapNumber.BAD_M_KEY:
            c.bad_m_keys += 1  # someone without the key tried a protected port: warned, never the key
            log.warning("trap: %s (TrapRepress sent)", trap.describe())
        else:
            log.info("trap: %s (TrapRepress sent)", trap.describe())
        master = self.sm.state == SMState.MASTER
        self.sa.forward_trap(trap)  # to the hosts that subscribed (InformInfo)
        decision = events.on_trap(trap, master, self._switch_at_lid(trap.issuer_lid) if master else None)
        if isinstance(decision, events.Repair):
            self.repair_why.append(decision.why)
            self.timers.arm_by(timers.REPAIR, self.clock() + self.opts.trap_settle)
            if decision.switch is None or self.repair_switches is None:
                self.repair_switches = None
            else:
                self.repair_switches.add(decision.switch)
        elif isinstance(decision, events.AskSm):
            with self._busy("asking an SM that announced itself"):
                self._check_sm_at_lid(decision.lid)

    def _on_polled(self, slid: int) -> None:
        """An SMInfo Get while MASTER: a STANDBY SM polling us (one to hand over to?), or
        only `sminfo` run on a host. From a LID we can place that is no SM we know: is
        there an SM (one PortInfo Get, at most once a sweep interval per LID)? From an SM
        we know, or a sender we cannot place (a directed-route Get) while we know SMs:
        refresh what we know of them (a few Gets, at most once a second). Only a sender we
        cannot place while we know no SM costs a census (at most once a sweep interval)."""
        now = self.clock()
        local = self._local()
        if local is not None and slid == local[2].lid:
            return  # ourselves
        known = any(p.lid == slid for p in self.peers.values())
        at = peersmod.port_at_lid(self.topo, slid) if slid not in (0, PERMISSIVE_LID) and not known else None
        if at is not None:
            if self.timers.allow(f"probe {slid}", now, max(self.opts.sweep_interval, 1.0)):
                self._check_sm_at(at[0], at[1], slid, "polled us")
        elif self.peers:
            if self.timers.allow(REFRESH, now, REFRESH_INTERVAL_S):
                self._refresh_peers()
        else:
            self._census(f"an SM we cannot place polls us (LID {slid})")

    def _on_set(self, modifier: int, remote) -> None:
        sender = self.peers.get(remote.guid) or peersmod.from_topology(self.topo, remote)
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
        elif action == Action.SWEEP:  # the other master let go: its hosts registered with its SA
            self.rereg.became_master()
            self._sweep(f"HANDOVER from master SM {remote.guid:#018x}")
        elif action == Action.DISCOVER:
            self.timers.arm(timers.DISCOVER, self.clock())
        elif action == Action.POLL:
            self.timers.arm(timers.POLL, self.clock() + self.opts.poll_interval)

    # -- DISCOVERING ---------------------------------------------------------------
    def _discover(self) -> None:
        self.timers.cancel(timers.DISCOVER)
        self.activity = "discovery"
        try:
            self.topo = discovery.discover(self.t)
            peers = self._ask_sms(self.topo)
        except SmagentError as e:
            self._failed("discovery", e)
            self.timers.arm(timers.DISCOVER, self.clock() + max(self.opts.sweep_interval, 1.0))
            return
        finally:
            self.activity = None
        old = self.sm.state
        action = self.sm.discovered(peers)
        self._note_transition(old)
        log.info("discovery: %d nodes, %d other SM(s)%s; state %s", len(self.topo.nodes), len(peers),
                 "".join(f"; {p.describe()}" for p in peers), state_name(self.sm.state))
        if action == Action.SWEEP:
            self._sweep("became MASTER")
        elif action == Action.POLL:
            self._announce_to_master()
            self.timers.arm(timers.POLL, self.clock() + self.opts.poll_interval)

    def _ask_sms(self, topo: discovery.Topology) -> list[Peer]:
        found = peersmod.ask_all(self.t, topo)
        strangers = [p for p in found if not self.sm.is_peer(p.sm_key)]
        for p in strangers:
            self._stranger(p)
        return self.peers.replace([p for p in found if self.sm.is_peer(p.sm_key)], strangers)

    def _announce_to_master(self) -> None:
        """Trap 144 to the master (as OpenSM does on entering STANDBY): a lower master
        then sweeps, finds us and hands over."""
        m = self.sm.master
        local = self._local()
        if m is None or not m.lid or local is None:
            return
        node, port, pi = local
        self._respond(traps.trap_144(pi.lid, pi.capability_mask, node.node_type), m.lid)
        log.info("sent trap 144 to the master at LID %d", m.lid)

    # -- MASTER --------------------------------------------------------------------
    def _repair(self, why: str, switches: set[int] | None) -> None:
        """Patch the known state from the switches that reported, then plan against it
        (no rediscovery, no table reads); a full sweep when that cannot be done."""
        self.counters.repairs += 1
        known, self.known = self.known, None  # consumed: the sweep sets it again
        sent0 = self.t.stats.sent
        if known is not None and switches:
            self.activity = f"reading the switches that reported ({why})"
            try:
                patched, what = repair.update_all(self.t, known, switches)
            except SmagentError as e:
                patched, what = None, [str(e)]
            if patched is not None:
                log.info("repair: %s (%d SMPs to read the reporting switches)",
                         "; ".join(what) or "no link changed", self.t.stats.sent - sent0)
                self._sweep(why, known=patched, smps_before=sent0)
                return
            log.info("repair: a full sweep instead (%s)", "; ".join(what))
        self._sweep(why, smps_before=sent0)

    def _switch_at_lid(self, lid: int) -> int | None:
        topo = self.known.topology if self.known is not None else self.topo
        for n in (topo.switches() if topo else ()):
            if n.lid(0) == lid:
                return n.guid
        return None

    def _sweep(self, why: str, known: sweepmod.KnownState | None = None, smps_before: int | None = None,
               opts: sweepmod.SweepOptions | None = None) -> sweepmod.SweepOptions | None:
        """A sweep (a repair with ``known``) with ``opts`` (default: the settings in force);
        returns the settings it succeeded with (the last good ones when those in force were
        refused: `reload.Config`), None if it failed."""
        used = opts or self.opts.sweep
        st = self.t.stats
        sent0, kinds0 = st.sent if smps_before is None else smps_before, collections.Counter(st.by_kind)
        t0 = self.clock()
        self.activity = f"{'repair' if known is not None else 'sweep'} ({why})"
        log.info("%s: started", self.activity)
        try:
            with self.busy.serving():
                r = sweepmod.sweep(self.t, dataclasses.replace(used, known=known, drained=self.drained.entries))
                snapshot = self.sa.snapshot(r)  # built while the last one still answers
        except SmagentError as e:  # a fabric failure, or a desired state the fabric does not match
            if isinstance(e, sweepmod.PlanDefects) and opts is None and self.config.can_fall_back(used):
                log.warning("%s: the settings in force were refused (%s); routing with the last good ones",
                            why, str(e).splitlines()[0])
                self.activity = None
                return self._sweep(why, known, sent0, opts=self.config.fallback(used))
            self.counters.sweeps_failed += 1
            self.counters.plan_refusals += isinstance(e, sweepmod.PlanDefects)
            self.last_sweep = {"why": why, "incremental": known is not None, "ok": False, "error": str(e),
                               "smps": st.sent - sent0, "seconds": round(self.clock() - t0, 3), "time": time.time()}
            self._failed(f"sweep ({why})", e)
            self._retry_after_failure()
            return None
        finally:
            self.activity = None
        self._retries = 0
        self.config.succeeded(used, self.opts.sweep)
        self.topo = r.topology
        self.sa.publish(r, snapshot)  # the SA answers from this whole snapshot from now on
        self.counters.client_reregisters += self.rereg.after_sweep(self.t, r.topology)
        clean = not r.problems and not r.topology.unreachable
        self.known = r.known if clean else None
        self.counters.sweeps += 1
        kinds = collections.Counter(st.by_kind) - kinds0
        sets = sum(v for k, v in kinds.items() if k.startswith("SubnSet"))
        s = r.summary()["sets"]
        self.last_sweep = {"why": why, "incremental": known is not None, "ok": True, "smps": st.sent - sent0, "sets": sets, "lft_blocks": s["lft_blocks"],
                           "mft_blocks": s["mft_blocks"], "portinfo": s["portinfo"],
                           "seconds": round(self.clock() - t0, 3), "problems": len(r.problems), "time": time.time()}
        log.info("%s (%s): %d nodes, %d SMPs (%d Sets: LFT blocks %d, MFT blocks %d, PortInfo %d), %.3f s; routing: %s%s",
                 "repair" if known is not None else "sweep", why, len(r.topology.nodes), st.sent - sent0, sets, s["lft_blocks"], s["mft_blocks"],
                 s["portinfo"], self.clock() - t0, r.routing and f"{r.routing['engine']} ({r.routing['reason']})",
                 f"; {len(r.problems)} problem(s): {r.problems[0]}" if r.problems else "")
        if sets:
            self._changed(f"{why}: {sets} Sets")
        self._arm_light()
        self._resweep_if_unclean(r, clean)
        if known is None:  # a repair changed links, not SMs: the light sweeps watch those
            with self._busy("asking the other SMs"):
                self._check_peers(self._ask_sms(r.topology))
        return used

    def _retry_after_failure(self) -> None:
        """A full sweep again soon (rediscovered: planned around what did not answer),
        a few times with backoff; then at the light sweeps' pace until one succeeds."""
        self.timers.arm(timers.LIGHT, policy.retry_light_due(self.clock(), self.opts.sweep_interval))
        d = policy.after_failure(self._retries, self.opts.sweep_interval)
        self._retries = d.count
        if d.gave_up_fast:
            log.warning("sweep: failed %d times in a row; trying at the light sweeps' pace", d.count)
        if d.fast:
            log.info("sweep: trying again in %.1f s (retry %d of %d)", d.delay, d.count, len(RETRY_AFTER_FAILURE))
        self._schedule_full(f"retry {d.count} after a failed sweep", d.delay)

    def _schedule_full(self, why: str, delay: float | None) -> None:
        """A full sweep ``delay`` s from now (none if None): what failed or is unclean is not
        known well enough to patch, so everything is swept."""
        if delay is not None:
            self.repair_why.append(why)
            self.repair_switches = None
            self.timers.arm_by(timers.REPAIR, self.clock() + delay)

    def _resweep_if_unclean(self, r, clean: bool) -> None:
        """A sweep that left problems or unreachable nodes (routes may black-hole) is
        followed at once by a full sweep, not by the next light sweep."""
        d = policy.after_unclean(self._resweeps, clean, self.opts.trap_settle, self.opts.sweep_interval)
        self._resweeps = d.count
        if clean:
            return
        if d.gave_up_fast:
            log.warning("sweep: still %d problem(s) after %d full sweeps in a row; sweeping again at the "
                        "light sweeps' pace until clean", len(r.problems) + len(r.topology.unreachable),
                        RESWEEPS_AFTER_PROBLEMS)
        self._schedule_full(f"the last sweep ended with {len(r.problems)} problem(s) and "
                            f"{len(r.topology.unreachable)} unreachable node(s)", d.delay)

    def _arm_light(self) -> None:
        due = policy.light_due(self.clock(), self.opts.sweep_interval)
        if due is not None:
            self.timers.arm(timers.LIGHT, due)
        else:
            self.timers.cancel(timers.LIGHT)

    def _light_sweep(self) -> None:
        """SwitchInfo of every switch (PortStateChange) and SMInfo of every known SM."""
        self._arm_light()
        switches: list[discovery.DNode] = self.topo.switches() if self.topo else []
        peers = self.peers.values()
        reqs = [Request(smpcodec.dr(Method.GET, AttrID.SWITCH_INFO, n.path)) for n in switches]
        reqs += [peersmod.sminfo_get(p.path) for p in peers]
        sent0 = self.t.stats.sent
        replies = self.t.execute(reqs)
        self.counters.light_sweeps += 1
        self.counters.light_sweep_gets = self.t.stats.sent - sent0
        moved = [n for n, r in zip(switches, replies) if not r.ok or r.value(SwitchInfo).port_state_change]
        unread = any(not r.ok for r in replies[:len(switches)])
        self.peers.update(peers, replies[len(switches):], "light sweep")
        log.info("light sweep: %d Gets, %s", self.counters.light_sweep_gets,
                 f"change at {', '.join(n.description for n in moved[:4])}{' ...' if len(moved) > 4 else ''}"
                 if moved else "no change")
        if moved:
            self._repair(f"light sweep found a change at {moved[0].description}",
                         None if unread else {n.guid for n in moved})
            return
        self._check_peers(self.peers.values())
        auditmod.step(self, self.audit.earn(self.counters.light_sweep_gets))

    def _refresh_peers(self) -> None:
        """SMInfo of every SM we know (a few Gets), then hand over if one outranks us."""
        peers = self.peers.values()
        self.peers.update(peers, self.t.execute([peersmod.sminfo_get(p.path) for p in peers]), "SM refresh")
        self._check_peers(self.peers.values())

    def _check_peers(self, peers: list[Peer]) -> None:
        action, peer = self.sm.check_peers(peers)
        if action == Action.HAND_OVER and peer is not None:
            self._hand_over(peer)

    def _hand_over(self, peer: Peer) -> None:
        rep = self._send_sminfo_set(peer, Control.HANDOVER, SMState.MASTER)
        if rep is not None and rep.ok:
            self.counters.handovers_sent += 1
        else:
            log.warning("HANDOVER to %s failed: %s", peer.describe(), rep.error if rep else "no path")
            if peer.state != SMState.MASTER:
                return  # a higher MASTER is yielded to all the same: polling tells if it lives
        old = self.sm.state
        self.sm.handed_over(peer)
        self._note_transition(old)
        log.info("handed over to %s: state %s", peer.describe(), state_name(self.sm.state))
        self.timers.cancel(timers.LIGHT)
        self.timers.arm(timers.POLL, self.clock() + self.opts.poll_interval)

    def _check_sm_at_lid(self, lid: int) -> None:
        """A trap 144 from `lid`: ask the SM there (a census if we cannot place the LID)."""
        at = peersmod.port_at_lid(self.topo, lid)
        if at is None:
            self._census(f"trap 144 from unknown LID {lid}")
        elif (at[0].guid, at[1]) != (self.topo.local if self.topo else None):  # not our own trap 144
            self._check_sm_at(at[0], at[1], lid, "announced itself")

    def _check_sm_at(self, n: discovery.DNode, port: int, lid: int, why: str) -> None:
        peer = peersmod.sm_at(self.t, n, port, lid)
        if peer is not None and not self.sm.is_peer(peer.sm_key):
            self._stranger(peer)
        elif peer is not None and self.peers.add(peer):
            log.info("SM %s: %s", why, peer.describe())
            self._check_peers(self.peers.values())

    def _census(self, why: str) -> None:
        """PortInfo of every CA port (IsSM may have appeared without a trap), then SMInfo
        of the new SM ports. Costly on a large fabric, so only when something says an SM
        we do not know is there, and at most once a sweep interval."""
        if self.topo is None or not self.timers.allow(CENSUS, self.clock(), max(self.opts.sweep_interval, 1.0)):
            return
        self.counters.censuses += 1
        log.info("SM census (%s): %d PortInfo Gets", why, peersmod.census(self.t, self.topo))
        self._check_peers(self._ask_sms(self.topo))

    # -- STANDBY -------------------------------------------------------------------
    def _poll_master(self) -> None:
        m = self.sm.master
        self.timers.arm(timers.POLL, self.clock() + self.opts.poll_interval)
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

    def _stranger(self, peer: Peer) -> None:
        self.peers.stranger(peer)  # listed in the status, counted in the metrics
        two = peer.state == SMState.MASTER and self.sm.state == SMState.MASTER
        log.log(logging.WARNING if self.sm.new_stranger(peer.guid) or two else logging.DEBUG,
                "%s has another SM_Key: not a peer of ours, ignored (it ignores us likewise)%s", peer.describe(),
                "; it is MASTER too: two masters on one subnet" if two else "")

    def _reveal_key(self, request_m_key: int, remote: SMInfo | None) -> bool:
        local = self._local()
        pi = local[2] if local is not None else self.local_pi
        if pi is None:  # an SMInfo Get before `start` read our PortInfo: reveal nothing
            return False
        return smstate.reveal_sm_key(self.sm.sm_key, remote.sm_key if remote is not None else 0,
                                     pi.m_key, pi.m_key_protect_bits, request_m_key)

    # the SA service's narrow view of the daemon (`sa_service.SaHost`)
    def is_master(self) -> bool:
        return self._sm is not None and self._sm.state == SMState.MASTER

    def own_sminfo(self) -> tuple[int, SMInfo] | None:
        """(our LID, our SMInfo with its key) once started, else None."""
        if self._sm is None:
            return None
        me = self._local()
        return (me[2].lid if me is not None else 0, self._sm.sminfo(self.t.stats.sent, reveal_key=True))

    def sweep_against(self, why: str, known: sweepmod.KnownState | None) -> None:
        self._sweep(why, known=known)

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
                self.timers.cancel(timers.POLL)
                self.rereg.became_master()
            else:
                self.timers.cancel(timers.LIGHT, timers.REPAIR)

    def _changed(self, what: str) -> None:
        self.last_change = {"time": time.time(), "what": what}

    def _failed(self, what: str, err) -> None:
        self.counters.errors += 1
        self.last_error = {"what": what, "error": str(err), "time": time.time()}
        log.error("%s failed: %s", what, err)

    def _reload(self) -> None:
        if self.reopen_logs is not None:
            self.reopen_logs()
            log.info("SIGHUP: log file reopened")
        reload.sighup(self)

    def status(self) -> dict:
        """What `smagent status` shows (`smagent.sm.report`)."""
        return report.status(self)

    def published_status(self) -> dict:
        """The status as the loop last published it: what other threads (metrics) may read."""
        return self._published

    def published_sweep(self):
        """PerfMgr's last counter sweep as published (`smagent.perf.metrics.Sweep`), or None."""
        return self.perfmgr.published if self.perfmgr is not None else None
