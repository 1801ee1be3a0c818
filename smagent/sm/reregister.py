"""PortInfo.ClientReregister when smagent becomes MASTER (IBA 14.4.11).

Host stacks register with the SA of the master they know: multicast joins (IPoIB's
broadcast group), InformInfo subscriptions, ServiceRecords. A new master's SA knows none
of them, so on the first sweep of each mastership (after start, after a HANDOVER, after a
STANDBY took over a silent master) every end port that advertises
IsClientReregistrationSupported (CapabilityMask bit 25) gets one PortInfo Set with the
ClientReregister bit; its stack then registers again. OpenSM does the same on its
``first_time_master_sweep`` (``no_clients_rereg`` turns it off).

It is a one-shot event, not a state: the bit reads back 0, no plan, verify or diff holds
it, and later sweeps of the same mastership send nothing (a port that comes up later
registers on its own when it turns ACTIVE). The Sets go after the sweep has published its
snapshot to the SA, so the rejoins find the new subnet; ports whose Set went unanswered
are tried again after the next sweep while we stay MASTER.

Modes (`smagent run --client-reregister`): ``capable`` (the default: ports that advertise
the bit), ``all`` (every CA and router port whatever it advertises, switch port 0 where
it advertises: for ports that honour the bit without saying so, such as ibsim's, whose CA
ports advertise no bit 25; a port without the capability ignores it), ``off``."""
from __future__ import annotations

import logging

from mad.attributes import CAP_IS_CLIENT_REREGISTRATION, PortState
from smagent import discovery
from smagent.errors import SmagentError
from smagent.sweep.ports import client_reregister

MODES = ("capable", "all", "off")
log = logging.getLogger("smagent.sm")


def targets(topo: discovery.Topology, mode: str) -> list[tuple[int, int]]:
    """(GUID, port) of every ACTIVE end port the mode reregisters: CA and router ports with
    a link, and switch port 0."""
    out = []
    for n in topo.nodes.values():
        for p in sorted(n.ports):
            pi = n.ports[p]
            if (p == 0) != n.is_switch or pi.port_state != PortState.ACTIVE:
                continue  # a switch's external ports are no end ports; a port not ACTIVE has no stack running
            if not n.is_switch and (n.guid, p) not in topo.links:
                continue
            capable = bool(pi.capability_mask & CAP_IS_CLIENT_REREGISTRATION)
            if capable or (mode == "all" and not n.is_switch):
                out.append((n.guid, p))
    return out


class ClientReregister:
    """When to reregister: `became_master` arms it, `after_sweep` sends the Sets once."""

    def __init__(self, mode: str = "capable"):
        if mode not in MODES:
            raise ValueError(f"client reregister mode {mode!r}: one of {', '.join(MODES)}")
        self.mode = mode
        self.pending = False  # the first sweep of this mastership has not reregistered yet
        self.retry: set[tuple[int, int]] = set()  # ports whose Set went unanswered

    def became_master(self) -> None:
        self.pending = self.mode != "off"
        self.retry = set()

    def after_sweep(self, transport, topo: discovery.Topology) -> int:
        """The Sets, if this mastership still owes them; returns how many ports took the bit."""
        if not self.pending and not self.retry:
            return 0
        todo = targets(topo, self.mode)
        if not self.pending:
            todo = [k for k in todo if k in self.retry]
        try:
            done, problems = client_reregister(transport, topo, todo)
        except SmagentError as e:  # the device failed: the next sweep tries again
            log.error("client reregister failed: %s", e)
            return 0
        self.pending, self.retry = False, set(todo) - set(done)
        log.info("client reregister: PortInfo.ClientReregister set on %d end port(s)%s", len(done),
                 f"; {len(problems)} did not answer (tried again after the next sweep): {problems[0]}"
                 if problems else "")
        return len(done)
