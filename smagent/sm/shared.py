"""What the running SM's roles share (`smagent.sm.daemon` composes them: the loop, the
mastership, the master duties, the published status).

One object, handed to each role, so that no role reaches into another's attributes for
them: the transport, settings and clock; the counters, timers and event queue; the state
machine (made by `Mastership.start`; every role asks whether we are MASTER); the subnet
model (`model.subnet.Subnet`), one object: as last discovered, then as each sweep or repair
left it (the very object the SA answers from), whether that discovery is fresh enough for
the next full sweep to plan on (`take_discovery`), and the other SMs found on it; what the
daemon is busy with, what last changed and what last failed. The roles run on the loop's thread, or inside the
transport under its one lock (`transport.base.one_thread`): nothing here needs a lock.
"""
from __future__ import annotations

import collections
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Callable

from mad.attributes import SMState
from smagent.errors import SmagentError
from smagent.sm import events, peers as peersmod, policy, timers
from smagent.sm.options import Counters, DaemonOptions
from smagent.sm.statemachine import StateMachine
from smagent.transport.base import Transport

if TYPE_CHECKING:
    from smagent import discovery
    from smagent.model.subnet import Subnet

log = logging.getLogger("smagent.sm")


class Shared:
    def __init__(self, transport: Transport, opts: DaemonOptions, clock: Callable[[], float]):
        self.t, self.opts, self.clock = transport, opts, clock
        self.counters = Counters()
        self.timers = timers.Timers()
        self.events: collections.deque[events.Event] = collections.deque()
        self.machine: StateMachine | None = None  # the SM state machine, from `Mastership.start` on
        # the subnet model: as last discovered, or as the last sweep or repair left it; never
        # changed, replaced whole (a repair patches a fork)
        self.subnet: Subnet | None = None
        self.traps_heard = 0  # traps that reached us, counted as they come (inside the transport)
        # (when the mastership's discovery of `subnet` ended, `traps_heard` when it began); None
        # once a sweep took it (`take_discovery`)
        self.walked: tuple[float, int] | None = None
        self.peers = peersmod.OtherSms()
        self.last_change: dict | None = None
        self.last_error: dict | None = None  # the last failure: what, the error, when
        self._activity: str | None = "starting"  # what the daemon is busy with (`activity`)
        self.on_activity: Callable[[], None] = lambda: None  # the daemon publishes its status

    @property
    def activity(self) -> str | None:
        """What the daemon is busy with (None: waiting), for the status."""
        return self._activity

    @activity.setter
    def activity(self, what: str | None) -> None:
        if what != self._activity:
            self._activity = what
            self.on_activity()  # the control socket says so at once, not at the next round

    @property
    def topo(self) -> discovery.Topology | None:
        """The subnet model's topology (nodes, cables), None before the first discovery."""
        return self.subnet.topology if self.subnet is not None else None

    @property
    def sm(self) -> StateMachine:
        """The SM state machine (from `start` on)."""
        if self.machine is None:
            raise RuntimeError("the daemon has not started")
        return self.machine

    def take_discovery(self) -> discovery.Topology | None:
        """A fork of the topology the mastership's discovery left, for a full sweep to plan
        on instead of walking again (the sweep completes it in place: never the held model's
        own), if `policy.reuse_discovery` allows; taken once (a sweep tried again walks)."""
        walked, self.walked = self.walked, None
        topo = self.topo
        quiet = walked is not None and walked[1] == self.traps_heard  # no trap since the walk began
        age = self.clock() - walked[0] if walked is not None and quiet else None
        if topo is None or not policy.reuse_discovery(age, len(topo.unreachable)):
            return None
        return topo.fork()

    def is_master(self) -> bool:
        return self.machine is not None and self.machine.state == SMState.MASTER

    @contextlib.contextmanager
    def doing(self, what: str):
        """Name what the daemon does (the status shows it); fabric failures inside are
        logged and counted, never fatal: the daemon stays up."""
        self.activity = what
        try:
            yield
        except SmagentError as e:
            self.failed(what, e)
        finally:
            self.activity = None

    def failed(self, what: str, err) -> None:
        self.counters.errors += 1
        self.last_error = {"what": what, "error": str(err), "time": time.time()}
        log.error("%s failed: %s", what, err)

    def changed(self, what: str) -> None:
        self.last_change = {"time": time.time(), "what": what}

    def respond(self, raw: bytes, dlid: int) -> None:
        """Send an answer; a failure to send is logged, never fatal (we run inside the
        transport, perhaps in the middle of a sweep)."""
        try:
            self.t.respond(raw, dlid)
        except SmagentError as e:
            self.failed(f"answering LID {dlid}", e)
