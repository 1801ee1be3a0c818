"""What the phases of one sweep share (`SweepState`), how a phase is timed and counted
(`Phase`), and the sweep's own failure (`SweepError`)."""
from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Any

from smagent import discovery, linkconf as links, routing
from smagent.config import mkeys
from smagent.planning import multicast
from smagent.fdb import apply as fdbapply
from smagent.errors import FabricFailure
from smagent.transport.base import Request, Transport
from smagent.sweep.options import SweepOptions
from smagent.sweep.result import PortChange, SweepResult
from smagent.sweep.tables import TableSource, table_source

if TYPE_CHECKING:
    from smagent.sweep.desired import Resolved

log = logging.getLogger("smagent.sweep")


class SweepError(FabricFailure):
    """The sweep could not finish; the message says what and where."""


# the phases a sweep reports (to its ``progress`` callback, in `SweepResult.phases`), in order:
# a plan runs the first tuple, a sweep both (a phase with nothing to do may not run)
PLAN_PHASES = ("discover", "sm_check", "route", "link_read", "lft_read", "rft_read", "mft_read", "plan_check")
WRITE_PHASES = ("lids_arm", "switchinfo", "lft_write", "rft_write", "mft_write", "link_write", "activate")


class Phase:
    def __init__(self, result: SweepResult, transport: Transport, name: str):
        self.r, self.t, self.name = result, transport, name

    def __enter__(self):
        self.t0, self.c0, self.s0 = time.monotonic(), time.process_time(), self.t.stats.sent
        log.debug("phase %s", self.name)
        if self.r.progress is not None:
            self.r.progress(self.name)
        return self

    def __exit__(self, *exc):
        done = self.r.phases[self.name] = {"smps": self.t.stats.sent - self.s0,
                                           "seconds": round(time.monotonic() - self.t0, 4),
                                           "cpu_seconds": round(time.process_time() - self.c0, 4)}
        log.info("phase %s: %d SMPs, %.3f s%s", self.name, done["smps"], done["seconds"],
                 "" if exc[0] is None else f" (failed: {exc[0].__name__})")


def dr(method: int, attr: int, path: tuple[int, ...], mod: int = 0, value: Any = None) -> Request:
    return Request.dr(method, attr, path, mod, value)


@dataclasses.dataclass
class SweepState:
    """What the phases of one sweep share. Inputs read before any SMP (the group spec,
    the LID file, the routing input), then what each phase hands the next; ``r`` is the
    result the caller gets."""
    transport: Transport
    opts: SweepOptions
    r: SweepResult
    t0: float
    lid_file: str | None = None  # --lid-file, else <state_dir>/guid2lid, else None
    spec: multicast.GroupSpec | None = None  # None for the default group
    persisted: dict[int, tuple[int, int]] = dataclasses.field(default_factory=dict)  # LID file: port GUID -> (lo, hi)
    engine_input: object = None  # routing.preload's output
    route_spec: routing.RoutingSpec = routing.DEFAULT  # opts.routing, parsed
    resolved: Resolved | None = None  # the desired state against this fabric
    rin: routing.RoutingInput | None = None
    routes: routing.Routes | None = None  # switch GUID -> routing.RouteTable
    link_opts: links.LinkOptions | None = None  # None: configure no link
    qos_dests: dict = dataclasses.field(default_factory=dict)  # with a QoS policy: `qoslayers.dlid_ports`
    qos_members: Any = None  # with a QoS policy: its groups on this fabric (`qospolicy.Membership`)
    op_vls: dict[tuple[int, int], int] = dataclasses.field(default_factory=dict)  # (guid, port) -> OperationalVLs wanted
    settled: tuple | None = None  # the ports found as planned, for the known state (`ports.plan_ports`)
    mplan: multicast.MulticastPlan | None = None
    default_port: dict[int, int] = dataclasses.field(default_factory=dict)  # RFT switch GUID -> DefaultPort
    mft_top: dict[int, int] = dataclasses.field(default_factory=dict)  # switch GUID -> MulticastFDBTop
    applied: fdbapply.Apply | None = None  # the write phase's
    # what this pass could not finish: (guid, port) whose ARMED (or LID) Set failed, the
    # PortChanges not ACTIVE, GUIDs whose link tables failed
    arm_failed: set[tuple[int, int]] = dataclasses.field(default_factory=set)
    not_active: list[PortChange] = dataclasses.field(default_factory=list)
    links_failed: set[int] = dataclasses.field(default_factory=set)
    unread: list[tuple[str, Any]] = dataclasses.field(default_factory=list)  # (problem line, units) of failed table reads
    # M_Key protection (smagent.sweep.protect): <state_dir>/guid2mkey, and the keys it holds
    mkey_file: str | None = None
    assigned: mkeys.Assigned = dataclasses.field(default_factory=mkeys.Assigned)
    # where the planning phases read the fabric: live, or what earlier sweeps left (opts.known)
    source: TableSource = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.source = table_source(self.opts)

    @property
    def topo(self) -> discovery.Topology:
        return self.r.topology

    # what the route and multicast phases leave for the later ones
    @property
    def routing_input(self) -> routing.RoutingInput:
        assert self.rin is not None, "the route phase runs first"
        return self.rin

    @property
    def routed(self) -> routing.Routes:
        assert self.routes is not None, "the route phase runs first"
        return self.routes

    def phase(self, name: str) -> "Phase":
        return Phase(self.r, self.transport, name)
