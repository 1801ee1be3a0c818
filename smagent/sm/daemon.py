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

The daemon is the loop; the work is its roles', which share one `smagent.sm.shared.Shared`
(transport, settings, counters, timers, events, state machine, topology, the other SMs):

* `smagent.sm.mastership`: who is MASTER. DISCOVERING: discover, ask every other SM its
  SMInfo, become MASTER or STANDBY (`smagent.sm.statemachine`); SMInfo answered; the
  handover to a higher SM when one shows up; STANDBY: poll the master's SMInfo every
  `poll_interval`, and after more than `poll_retries` unanswered polls discover again (and
  so take over).
* `smagent.sm.duties`: a MASTER's work: a full sweep first, then repairs after traps, light
  sweeps, the audit, counter sweeps; a sweep left with problems is followed at once by a
  full one (`smagent.sm.policy`).
* `smagent.sm.report`: the status, and the copy published for other threads.

A fabric failure anywhere is logged, counted and survived (`Shared.doing`). Every event is
one log line: trap, sweep, change, state transition.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path

from mad.attributes import SMInfo, SMState
from mad.header import MgmtClass
from smagent import discovery, routing
from smagent.errors import SmagentError
from smagent.model.subnet import Subnet
from smagent.sm import drained as drainedmod, events, policy, reload, report, timers, unserved
from smagent.sm.dispatch import Dispatcher, reply_lid
from smagent.sm.duties import Duties
from smagent.sm.mastership import Mastership
from smagent.sm.options import Counters, DaemonOptions
from smagent.sm.sa_service import SaService
from smagent.sm.serving import BusyServer
from smagent.sm.shared import Shared
from smagent.sm.statemachine import StateMachine
from smagent.transport.address import Incoming
from smagent.transport.base import Transport

log = logging.getLogger("smagent.sm")

LID_FILE = "guid2lid"  # OpenSM's format, in the state directory
# the policy's constants, importable from here as before the split (`smagent.sm.policy` holds them)
RESWEEPS_AFTER_PROBLEMS, RETRY_AFTER_FAILURE = policy.RESWEEPS_AFTER_PROBLEMS, policy.RETRY_AFTER_FAILURE


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
        self.shared = s = Shared(transport, opts, clock)
        self.counters, self.timers, self.peers = s.counters, s.timers, s.peers  # the shared ones, by their old names
        self.dispatcher = Dispatcher(self._unsupported)
        self.mastership = Mastership(s, lambda why: self.duties.sweep(why))
        self.sa = SaService(self)
        self.busy = BusyServer(transport)  # serves requests while a sweep computes
        self.duties = Duties(s, self.mastership, self.sa, self.busy)
        self.audit, self.drained, self.config = self.duties.audit, self.duties.drained, self.duties.config
        self.mastership.serve(self.dispatcher)
        self.duties.serve(self.dispatcher)
        self.dispatcher.route_class(MgmtClass.SUBN_ADM, self.sa.on_mad)
        transport.on_request = self.dispatcher.dispatch  # an Incoming: bytes and source address
        self.published = report.Published(s, self.status)
        s.on_activity = self.published.publish
        self.stop_requested = self.reload_requested = False
        self.control = None  # the ControlServer `run` serves, also between sweep rounds
        self._in_run = False  # inside `run`: a stop may raise Stopped there
        self.reopen_logs = None  # `smagent run` sets it: SIGHUP reopens the log file (logrotate)
        self.log_flood = None  # `smagent run` sets it: its FloodFilter, whose summaries the loop writes
        opts.sweep.routing_memory = routing.AutoMemory()  # auto keeps its engine while it fits; `status` shows it
        self.started = time.time()
        if opts.state_dir:
            Path(opts.state_dir).mkdir(parents=True, exist_ok=True)
            opts.sweep.state_dir = opts.state_dir
            opts.sweep.lid_file = opts.sweep.lid_file or str(Path(opts.state_dir) / LID_FILE)
        opts.sweep.force = True  # the state machine decided we are MASTER; sweep must not refuse
        opts.sweep.keep_link_tables = True  # the SA's P_Key, SL2VL and VLArb records

    # what callers and the SA (`sa_service.SaHost`) read of the roles' state
    @property
    def activity(self) -> str | None:
        """What the daemon is busy with (None: waiting), for the status."""
        return self.shared.activity

    @property
    def sm(self) -> StateMachine:
        """The SM state machine (from `start` on)."""
        return self.shared.sm

    @property
    def topo(self) -> discovery.Topology | None:
        return self.shared.topo

    @property
    def known(self) -> Subnet | None:
        return self.duties.known

    @known.setter
    def known(self, known: Subnet | None) -> None:
        self.duties.known = known

    @property
    def last_sweep(self) -> dict | None:
        return self.duties.last_sweep

    @property
    def last_error(self) -> dict | None:
        return self.shared.last_error

    # -- the loop ------------------------------------------------------------------
    def start(self) -> None:
        """Learn our port GUID and run the first discovery."""
        self.t.between_rounds = self._between_rounds
        self.mastership.start()
        if self.duties.perfmgr is not None:
            self.timers.arm(timers.PERFMGR, self.clock() + self.duties.perfmgr.interval)
        self.mastership.discover()

    def run(self, control=None) -> None:
        """Until SIGTERM (`stop`): a stop during a sweep abandons it at once."""
        self.control = control
        self.published.publish()
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
            self.shared.activity = None
            self.published.publish()

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
        self.shared.activity = None
        self.published.publish_if_due()
        try:
            self.t.poll(min(max_wait, max(0.0, min(self.timers.next_at(), self.sa.deadline) - self.clock())))
            self.sa.tick()
        except SmagentError as e:  # the device failed under us: say so, and keep going
            self.shared.failed("waiting for MADs", e)
            time.sleep(min(max_wait, 0.2))  # not a busy loop while it stays broken
        if control is not None and not control.threaded:
            control.serve_pending(self._answer_control)
        while self.shared.events and not self.stop_requested:
            self._handle(self.shared.events.popleft())
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
        self.published.publish()
        self.sa.tick()
        if self.control is not None and not self.control.threaded:
            self.control.serve_pending(self._answer_control)

    def _answer_control(self, command: str, args: dict | None = None):
        if command != "status":  # drain, undrain: the loop does them (`smagent.sm.drained`)
            return drainedmod.submit(self.shared.events, command, args or {})
        # the control thread: the status published last, never the daemon's live fields
        return self.published.status if self.control is not None and self.control.threaded else self.status()

    def _run_due_timer(self) -> None:
        doing = self.shared.doing
        name = self.timers.due(self.clock())
        if name == timers.REPAIR:
            self.duties.repair_due()
        elif name == timers.LIGHT:
            with doing("light sweep"):
                self.duties.light_sweep()
        elif name == timers.POLL:
            with doing("poll of the master"):
                self.mastership.poll_master()
        elif name == timers.DISCOVER:
            self.mastership.discover()
        elif name == timers.PERFMGR:
            self.duties.counter_sweep()

    def _handle(self, ev: events.Event) -> None:
        doing = self.shared.doing
        if isinstance(ev, events.TrapReceived):
            self.duties.on_trap(ev.trap)
        elif isinstance(ev, events.SmInfoSetAccepted):
            with doing("acting on a SubnSet(SMInfo)"):
                self.mastership.on_set(ev.modifier, ev.remote)
        elif isinstance(ev, events.PolledBySm) and self.sm.state == SMState.MASTER:
            with doing("asking the SM that polled us"):
                self.mastership.on_polled(ev.slid)
        elif isinstance(ev, events.ControlCommand):
            drainedmod.handle(self.duties, ev)

    def _unsupported(self, m: Incoming) -> None:
        """Any request we do not serve: a Get or Set answered with the IBA status
        (`smagent.sm.unserved`)."""
        out = unserved.answer(m, reply_lid)
        if out is not None:
            try:
                self.t.respond(*out)
            except SmagentError as e:  # logged, never fatal: we may be inside the transport
                self.shared.failed("answering an unserved request", e)

    def _reload(self) -> None:
        if self.reopen_logs is not None:
            self.reopen_logs()
            log.info("SIGHUP: log file reopened")
        reload.sighup(self.duties)

    # the SA service's narrow view of the daemon (`sa_service.SaHost`)
    def is_master(self) -> bool:
        return self.shared.is_master()

    def own_sminfo(self) -> tuple[int, SMInfo] | None:
        """(our LID, our SMInfo with its key) once started, else None."""
        return self.mastership.own_sminfo()

    def sweep_against(self, why: str, known: Subnet | None) -> None:
        self.duties.sweep(why, known=known)

    def status(self) -> dict:
        """What `smagent status` shows (`smagent.sm.report`)."""
        return report.status(self)

    def published_status(self) -> dict:
        """The status as the loop last published it: what other threads (metrics) may read."""
        return self.published.status

    def published_sweep(self):
        """PerfMgr's last counter sweep as published (`smagent.perf.metrics.Sweep`), or None."""
        return self.duties.perfmgr.published if self.duties.perfmgr is not None else None


__all__ = ["Daemon", "DaemonOptions", "Counters", "Stopped", "LID_FILE", "RESWEEPS_AFTER_PROBLEMS",
           "RETRY_AFTER_FAILURE"]
