"""SwitchInfo: the one SwitchInfo Set path, for the sweep and the table commands alike.

A Set writes the whole attribute, so a change echoes what the switch holds and replaces
only the fields asked for (LinearFDBTop, MulticastFDBTop, DefaultPort, the default
multicast ports, LifeTimeValue). The GetResp of the Set is the read-back: every field the
change alters must read back as written.

PortStateChange is the one field whose write is not a value: writing 1 clears the flag (a
port of the switch changed state), writing 0 leaves it. The choice, made once here: a
change clears it only when its maker says it has looked at the whole fabric since (the
sweep, which has just discovered it: ``clear_port_state_change=True``); a table command
writes 0, leaving the event for whoever sweeps next. The read-back does not check the
flag: a port may change state again between the Set and its GetResp.
"""
from __future__ import annotations

import dataclasses

from mad.attributes import AttrID, SwitchInfo
from mad.header import Method
from smagent.fdb.switch import SwitchFacts, Where, request
from smagent.transport.base import Transport

# the fields an SM writes; everything else of SwitchInfo is echoed as read
FIELDS = ("linear_fdb_top", "default_port", "multicast_fdb_top", "default_multicast_primary_port",
          "default_multicast_not_primary_port", "life_time_value", "port_state_change")
_HEX = {"multicast_fdb_top"}


def fmt(field: str, value: int) -> str:
    return f"0x{value:04x}" if field in _HEX else str(value)


@dataclasses.dataclass
class SwitchInfoChange:
    """One SwitchInfo Set: the attribute as read (``old``) and as it is written (``new``),
    which differ only in the fields an SM writes (`changed`, `diffs`)."""
    switch: int  # node GUID
    name: str
    path: Where  # DR path tuple, or a Target
    old: SwitchInfo  # as read
    new: SwitchInfo  # to write

    def changed(self) -> list[str]:
        """The fields this Set alters (PortStateChange: when it clears a set flag)."""
        out = [k for k in FIELDS if k != "port_state_change" and getattr(self.old, k) != getattr(self.new, k)]
        if self.clears_port_state_change:
            out.append("port_state_change")
        return out

    @property
    def clears_port_state_change(self) -> bool:
        return bool(self.old.port_state_change and self.new.port_state_change)

    def diffs(self) -> list[str]:
        out = [f"{k} {fmt(k, getattr(self.old, k))} -> {fmt(k, getattr(self.new, k))}"
               for k in self.changed() if k != "port_state_change"]
        if self.clears_port_state_change:
            out.append("port_state_change 1 -> 0 (write 1 to clear)")
        return out

    def describe(self) -> list[str]:
        """One line per field, as the table commands print a plan."""
        return [f"{self.name} SwitchInfo: {d}" for d in self.diffs()]

    def to_json(self) -> list[dict]:
        return [{"switch": self.name, "guid": f"0x{self.switch:016x}", "table": "SwitchInfo", "field": k,
                 "old": getattr(self.old, k), "new": 0 if k == "port_state_change" else getattr(self.new, k)}
                for k in self.changed()]


def change(switch: int, name: str, path: Where, si: SwitchInfo, want: dict[str, int], *,
           clear_port_state_change: bool = False) -> SwitchInfoChange | None:
    """The Set turning ``si`` into ``si`` with ``want``; None when it would change nothing."""
    psc = 1 if clear_port_state_change and si.port_state_change else 0
    c = SwitchInfoChange(switch, name, path, si, SwitchInfo.LAYOUT.replace(si, port_state_change=psc, **want))
    return c if c.changed() else None


def raise_top(f: SwitchFacts, *, lft_top: int | None = None, mft_top: int | None = None) -> SwitchInfoChange | None:
    """For a table command: raise a switch's LinearFDBTop / MulticastFDBTop (never lower
    them; MulticastFDBTop only where the switch uses it, i.e. holds a non-zero top) so a
    new entry is forwarded. ``f`` is a `switch.SwitchFacts`. None: nothing to raise."""
    si = f.switch_info
    want = {}
    if lft_top is not None and lft_top > si.linear_fdb_top:
        want["linear_fdb_top"] = lft_top
    if mft_top is not None and si.multicast_fdb_top and mft_top > si.multicast_fdb_top:
        want["multicast_fdb_top"] = mft_top
    return change(f.guid, f.name, f.where(), si, want) if want else None


def write(transport: Transport, changes: list[SwitchInfoChange], *,
          written: list[tuple[SwitchInfoChange, SwitchInfo]] | None = None) -> list[str]:
    """Send every Set; returns the problems (a failed Set, a field that reads back wrong).
    ``written`` collects (change, SwitchInfo read back) for every Set answered."""
    reqs = [request(c.path, Method.SET, AttrID.SWITCH_INFO, 0, c.new) for c in changes]
    problems = []
    for c, rep in zip(changes, transport.execute(reqs)):
        if not rep.ok:
            problems.append(f"{c.name}: SwitchInfo Set failed: {rep.error}")
            continue
        back = rep.value(SwitchInfo)
        if written is not None:
            written.append((c, back))
        bad = [f"{k} reads back {fmt(k, getattr(back, k))}, expected {fmt(k, getattr(c.new, k))}"
               for k in c.changed() if k != "port_state_change" and getattr(back, k) != getattr(c.new, k)]
        if bad:
            problems.append(f"{c.name}: SwitchInfo " + ", ".join(bad))
    return problems
