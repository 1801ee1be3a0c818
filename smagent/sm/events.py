"""What the daemon reacts to, and the pure decisions taken on some of them.

Requests are answered at once, inside the transport (even mid-sweep); what needs fabric
work is queued as one of these events and handled by the loop between sweeps."""
from __future__ import annotations

import dataclasses
from concurrent.futures import Future

from mad.attributes import SMInfo
from smagent.sm import traps


@dataclasses.dataclass(frozen=True)
class TrapReceived:
    trap: traps.Trap


@dataclasses.dataclass(frozen=True)
class SmInfoSetAccepted:
    modifier: int  # the Control (HANDOVER, ACKNOWLEDGE, ...)
    remote: SMInfo  # the sender's SMInfo


@dataclasses.dataclass(frozen=True)
class PolledBySm:
    """An SMInfo Get while we are MASTER: a STANDBY SM polls us (one to hand over to?)."""
    slid: int


@dataclasses.dataclass(frozen=True)
class ControlCommand:
    """A control-socket command that needs the loop (`smagent.sm.drained`): its answer, a
    JSON-ready dict, is set on ``answer`` (the control thread sends it)."""
    command: str
    args: dict
    answer: Future


Event = TrapReceived | SmInfoSetAccepted | PolledBySm | ControlCommand


@dataclasses.dataclass(frozen=True)
class Repair:
    """Repair after a trap: `why` for the log; `switch` the GUID of the switch to read
    again (None: not known which, so the repair reads every switch)."""
    why: str
    switch: int | None


@dataclasses.dataclass(frozen=True)
class AskSm:
    """A trap 144 from an SM port: ask the SM at `lid` for its SMInfo."""
    lid: int


def on_trap(trap: traps.Trap, master: bool, switch_at_issuer: int | None) -> Repair | AskSm | None:
    """What a MASTER does about a trap (nothing unless MASTER)."""
    if not master:
        return None
    if trap.generic and trap.number in traps.REPAIR_TRAPS:
        switch = switch_at_issuer if trap.number == traps.TrapNumber.LINK_STATE_CHANGE else None
        return Repair(f"trap {trap.number} from LID {trap.issuer_lid}", switch)
    if trap.announces_sm:
        return AskSm(trap.issuer_lid)
    return None


def why_of(whys: list[str], most: int = 3) -> str:
    """Why a repair runs, for its log line and status: the first few reasons and how many
    more (a trap flood coalesced into one repair is not one line of 10,000 reasons)."""
    more = len(whys) - most
    return "; ".join(whys[:most]) + (f"; and {more} more" if more > 0 else "")
