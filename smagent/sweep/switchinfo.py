"""SwitchInfo: the one Set per switch a sweep plans (see the package docstring for the
fields and why)."""
from __future__ import annotations

from smagent.fdb import tops
from smagent.sweep.state import SweepState


LIFE_TIME_VALUE = 18  # what OpenSM programs (packet lifetime 2^18 * 4.096 us)


def plan_switchinfo(s: SweepState) -> None:
    """LinearFDBTop, LifeTimeValue, DefaultPort (RFT), MulticastFDBTop (where supported),
    default multicast ports (group file only), desired-state settings, and clear
    PortStateChange: the sweep has just looked at the whole fabric, so a pending one is seen."""
    mplan = s.mplan
    for n in s.topo.switches():
        si = n.switch_info
        if si is None:
            continue
        want = {"life_time_value": LIFE_TIME_VALUE}
        if si.linear_fdb_cap:
            want["linear_fdb_top"] = s.r.lid_plan.top
        if n.guid in s.default_port:
            want["default_port"] = s.default_port[n.guid]
        if n.guid in s.mft_top:
            want["multicast_fdb_top"] = s.mft_top[n.guid]
        if mplan and n.guid in mplan.defaults:
            want["default_multicast_primary_port"], want["default_multicast_not_primary_port"] = mplan.defaults[n.guid]
        if s.resolved is not None:
            want.update(s.resolved.switch_settings.get(n.guid, {}))
        c = tops.change(n.guid, n.description, n.path, si, want, clear_port_state_change=True)
        if c is not None:
            s.r.switch_changes.append(c)
