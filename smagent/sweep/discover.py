"""The first phases: discover the fabric, ask the other SMs (`smagent.discovery.smcheck`), resolve
the desired state against what was found."""
from __future__ import annotations

from mad import codes
from mad.attributes import PortState
from smagent import discovery
from smagent.sweep import protect
from smagent.sweep.state import SweepError, SweepState


def discover(s: SweepState) -> None:
    s.r.topology = drained_out(protect.discover(s), s.opts.drained)  # protection: it may wait out the lease
    if s.opts.drained:
        s.r.notes.append("kept drained (routed around): " + ", ".join(map(str, s.opts.drained))
                         + "; `smagent undrain` puts them back")
    protect.learn_shown(s)
    if not s.topo.switches():
        raise SweepError(no_switch_reason(s.topo))


def drained_out(topo: discovery.Topology, drained) -> discovery.Topology:
    """``topo`` without what is drained: the planning phases never see it."""
    if not drained:
        return topo
    from smagent.verify import whatif
    return whatif.without(topo, [whatif.Failure(d.guid, d.name, d.port) for d in drained])


def no_switch_reason(topo: discovery.Topology) -> str:
    """Why discovery found no switch: most often the local port has no link."""
    g, p = topo.local
    n = topo.nodes[g]
    pi = n.ports.get(p)
    where = f"the local port ({n.description or hex(g)} port {p})"
    if pi is not None and pi.port_state == PortState.DOWN:
        phys = codes.PHYS_STATES.get(pi.port_physical_state, str(pi.port_physical_state))
        return f"{where} is down (physical state {phys}): check its cable and the switch port it plugs into"
    return f"no switch found from {where}: nothing to route"


def check_sms(s: SweepState) -> None:
    with s.phase("sm_check"):
        s.r.notes += s.source.other_sms(s.transport, s.topo, force=s.opts.force)


def resolve_desired(s: SweepState) -> None:
    """Names -> GUIDs against what was found; every problem at once, before any Set."""
    if s.opts.desired is None:
        return
    from smagent.sweep import desired
    s.resolved = desired.resolve(s.opts.desired, s.topo)
    if s.opts.desired.multicast and s.opts.multicast:
        s.spec = desired.group_spec(s.opts.desired, s.resolved, s.topo)
