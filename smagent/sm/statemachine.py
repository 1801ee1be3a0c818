"""The Subnet Manager state machine (IBA 14.4): who is MASTER, pure logic and no I/O.

An SM starts DISCOVERING. After discovery it looks at the SMs it found (ports with IsSM,
asked for their SMInfo): a MASTER among them, or a DISCOVERING/STANDBY SM that outranks
it, makes it STANDBY (polling that SM); otherwise it becomes MASTER. Rank: higher
priority, then lower GUID (IBA 14.4.1.1). The SM-to-SM control packets are SubnSet(SMInfo)
with an AttributeModifier naming the request (`Control`); their legality follows the
specification as OpenSM checks it: ACKNOWLEDGE only from a STANDBY SM, the others only
from a MASTER.

SM_Key (IBA 14.4.1: an SM returns its SM_Key as 0 unless it authenticates the requester)
is where smagent is stricter than OpenSM 3.3.23, which returns its key to any requester
when its port has no M_Key and obeys a SubnSet(SMInfo) whatever key it carries:

* `reveal_sm_key`: our key goes out only to a requester that proves it: its SMInfo
  carries our key already, or its SMP carries our port's M_Key while that M_Key is
  protected (protection bits >= 1; with 0 anyone may read the M_Key). The default key 1
  (OpenSM's) is no secret and is returned to everyone, as OpenSM does: OpenSM asks with
  an empty SMInfo and takes a 0 for another key.
* `set_verdict`: a SubnSet(SMInfo) whose SM_Key is not ours is refused (answered with
  status "invalid value" and our SMInfo with the key hidden) and changes nothing; so is
  one the fabric carried from another port than that of the SM its SMInfo names (the
  daemon follows the ReturnPath, or the SLID): the default key is no secret, and a host
  knowing it must not speak for the master.
* `is_peer`: an SM showing another nonzero SM_Key is not a peer: it is neither our master
  nor one we stand by for or hand over to (OpenSM ignores it likewise). One that hides its
  key (0) is taken as a peer: we cannot tell.
* A MASTER that sees a MASTER peer of higher rank yields: it hands over and stands by.

The daemon's mastership (`smagent.sm.mastership`) feeds events in and performs the `Action`
it gets back.
"""
from __future__ import annotations

import dataclasses
import enum

from mad.attributes import SMInfo, SMState

# OpenSM's defaults (osm_subnet.c / README): SMInfo polling every 10 s, the master is
# declared gone after 4 polls more than the first go unanswered; a sweep every 10 s.
DEFAULT_POLL_INTERVAL_S = 10.0
DEFAULT_POLL_RETRIES = 4
DEFAULT_SWEEP_INTERVAL_S = 10.0
DEFAULT_SM_KEY = 1  # OpenSM's default sm_key: SMs ignore each other when their keys differ

INVALID_VALUE_STATUS = 0x001C  # MAD status: invalid value in an attribute or modifier (code 7)
PUBLIC_SM_KEYS = frozenset({0, DEFAULT_SM_KEY})  # known to all: hiding them protects nothing


class Control(enum.IntEnum):
    """SubnSet(SMInfo) AttributeModifier (IBA 14.4.1, Table 180)."""
    HANDOVER = 1
    ACKNOWLEDGE = 2
    DISABLE = 3
    STANDBY = 4
    DISCOVER = 5


class Action(enum.Enum):
    NONE = "none"
    SWEEP = "sweep"  # become/stay MASTER and bring the fabric up (a full sweep)
    TAKE_OVER = "take_over"  # a handover was accepted: acknowledge it, then sweep
    DISCOVER = "discover"  # start over: discover and decide again
    POLL = "poll"  # STANDBY: keep polling the master
    HAND_OVER = "hand_over"  # MASTER: hand the subnet to a higher SM


def outranks(priority_a: int, guid_a: int, priority_b: int, guid_b: int) -> bool:
    """True if SM a outranks SM b: higher priority, or the same and a lower GUID."""
    return priority_a > priority_b or (priority_a == priority_b and guid_a < guid_b)


def reveal_sm_key(sm_key: int, request_sm_key: int, port_m_key: int, protect_bits: int,
                  request_m_key: int) -> bool:
    """Whether an answer to a SubnGet/SubnSet(SMInfo) may carry our SM_Key `sm_key`: a
    public key always; a secret one only to a requester that proves it (its SMInfo
    carries the key, or its SMP our port's protected M_Key)."""
    if sm_key in PUBLIC_SM_KEYS or request_sm_key == sm_key:
        return True
    return bool(port_m_key) and protect_bits >= 1 and request_m_key == port_m_key


def state_name(state: int) -> str:
    return SMState(state).name if state in SMState._value2member_map_ else f"state {state}"


@dataclasses.dataclass
class Peer:
    """Another SM, as its SMInfo answered."""
    guid: int
    priority: int
    state: int
    act_count: int = 0
    path: tuple = ()  # directed route to its port
    lid: int = 0
    name: str = ""
    sm_key: int = dataclasses.field(default=0, repr=False)  # as its SMInfo showed it (0: hidden); never printed

    def describe(self) -> str:
        return (f"SM {self.guid:#018x} ({self.name or '?'}, LID {self.lid}) priority {self.priority} "
                f"{state_name(self.state)}")


@dataclasses.dataclass
class Transition:
    old: int
    new: int
    why: str


class StateMachine:
    """Our SM's state and the rules that move it. `transitions` logs every change."""

    def __init__(self, guid: int, priority: int, *, sm_key: int = DEFAULT_SM_KEY, poll_retries: int = DEFAULT_POLL_RETRIES):
        if not 0 <= priority <= 15:
            raise ValueError(f"priority {priority}: an SM priority is 0..15")
        self.guid, self.priority, self.sm_key = guid, priority, sm_key
        self.state = int(SMState.DISCOVERING)
        self.master: Peer | None = None  # STANDBY: the SM we poll
        self.poll_retries = poll_retries
        self.poll_failures = 0
        self.transitions: list[Transition] = []
        self.strangers: set[int] = set()  # GUIDs of SMs with another SM_Key, seen so far

    # -- what we say about ourselves ---------------------------------------------------
    def sminfo(self, act_count: int, *, reveal_key: bool = True, state: int | None = None):
        """Our SMInfo. The SM_Key is zeroed for a requester that failed M_Key
        authentication (IBA 14.4.1; see `reveal_sm_key`)."""
        return SMInfo(guid=self.guid, sm_key=self.sm_key if reveal_key else 0, act_count=act_count & 0xFFFFFFFF,
                          priority=self.priority, sm_state=self.state if state is None else state)

    def _go(self, new: int, why: str) -> None:
        if new != self.state:
            self.transitions.append(Transition(self.state, int(new), why))
            self.state = int(new)

    def is_peer(self, sm_key: int) -> bool:
        """Whether an SM whose SMInfo showed `sm_key` is one of ours: the same key, or a
        hidden one (0). Another key means another administration: ignored, as OpenSM
        ignores it."""
        return sm_key in (0, self.sm_key)

    def new_stranger(self, guid: int) -> bool:
        """Note an SM that is not a peer (`is_peer`); True the first time: it is worth a
        warning once, not at every sweep."""
        new = guid not in self.strangers
        self.strangers.add(guid)
        return new

    # -- events ----------------------------------------------------------------------
    def discovered(self, found: list[Peer]) -> Action:
        """Discovery is complete and `found` are the other SMs (non-peers are ignored)."""
        peers = [p for p in found if self.is_peer(p.sm_key)]
        masters = [p for p in peers if p.state == SMState.MASTER]
        higher = [p for p in peers if p.state in (SMState.DISCOVERING, SMState.STANDBY)
                  and outranks(p.priority, p.guid, self.priority, self.guid)]
        if masters or higher:
            # a running master keeps the subnet (it hands over if we outrank it)
            chosen = masters[0] if masters else max(higher, key=lambda p: (p.priority, -p.guid))
            self.master, self.poll_failures = chosen, 0
            self._go(SMState.STANDBY, f"found {chosen.describe()}")
            return Action.POLL
        self.master = None
        self._go(SMState.MASTER, "no master and no higher SM found")
        return Action.SWEEP

    def check_peers(self, found: list[Peer]) -> tuple[Action, Peer | None]:
        """MASTER: the SMs a sweep or a poll found. A STANDBY or MASTER peer that
        outranks us gets the subnet: two masters are one too many, and the lower one
        yields (IBA 14.4: rank decides; OpenSM's lower master likewise hands over)."""
        if self.state != SMState.MASTER:
            return Action.NONE, None
        # not one still DISCOVERING: it may yet see us MASTER and go STANDBY, and a
        # handover racing that would leave no MASTER at all
        higher = [p for p in found if p.state in (SMState.STANDBY, SMState.MASTER) and self.is_peer(p.sm_key)
                  and outranks(p.priority, p.guid, self.priority, self.guid)]
        if higher:
            return Action.HAND_OVER, max(higher, key=lambda p: (p.priority, -p.guid))
        return Action.NONE, None

    def handed_over(self, to: Peer) -> None:
        """MASTER: our HANDOVER to `to` was answered: we are STANDBY, polling it."""
        self.master, self.poll_failures = to, 0
        self._go(SMState.STANDBY, f"handed over to {to.describe()}")

    def poll_result(self, remote) -> Action:
        """STANDBY: the answer to a poll of the master (an SMInfo, or None: no answer)."""
        if self.state != SMState.STANDBY or self.master is None:
            return Action.NONE
        alive = remote is not None and (remote.sm_state == SMState.MASTER or (
            remote.sm_state == SMState.STANDBY and outranks(remote.priority, remote.guid, self.priority, self.guid)))
        if alive:
            self.poll_failures = 0
            self.master.state, self.master.priority = remote.sm_state, remote.priority
            return Action.POLL
        self.poll_failures += 1
        if self.poll_failures > self.poll_retries:
            self._go(SMState.DISCOVERING, f"master {self.master.guid:#018x} did not answer "
                                          f"{self.poll_failures} polls")
            self.master = None
            return Action.DISCOVER
        return Action.POLL

    def check_set(self, modifier: int, remote) -> int:
        """The MAD status our answer to a SubnSet(SMInfo) carries: 0 if legal."""
        return self.set_verdict(modifier, remote)[0]

    def set_verdict(self, modifier: int, remote, sender: int | None = None, *,
                    sender_known: bool = False) -> tuple[int, str]:
        """(MAD status, why refused) for a SubnSet(SMInfo): (0, "") if it is to be obeyed.
        The SM_Key comes first: a Set without our key is refused whatever it asks. Then
        `sender`, the port GUID the fabric says the Set came from, must be the SM the
        SMInfo names (a host knowing the default key cannot speak for another SM);
        with `sender_known` False (no topology yet) that check is skipped."""
        if remote is None:
            return INVALID_VALUE_STATUS, "no SMInfo in the request"
        if remote.sm_key != self.sm_key:
            return INVALID_VALUE_STATUS, "wrong SM_Key"
        if sender_known and sender != remote.guid:
            where = "an unknown port" if sender is None else f"port {sender:#018x}"
            return INVALID_VALUE_STATUS, f"sent from {where}, not from the SM it names"
        if modifier not in Control._value2member_map_:
            return INVALID_VALUE_STATUS, f"unknown control {modifier}"
        sender_ok = (remote.sm_state == SMState.STANDBY if modifier == Control.ACKNOWLEDGE
                     else remote.sm_state == SMState.MASTER)
        if not sender_ok:
            return INVALID_VALUE_STATUS, f"not legal from an SM in state {state_name(remote.sm_state)}"
        allowed = {
            SMState.STANDBY: {Control.HANDOVER, Control.ACKNOWLEDGE, Control.DISABLE, Control.DISCOVER},
            SMState.NOT_ACTIVE: {Control.STANDBY},
            SMState.MASTER: {Control.HANDOVER, Control.ACKNOWLEDGE},
            SMState.DISCOVERING: {Control.HANDOVER},
        }[SMState(self.state)]
        if modifier not in allowed:
            return INVALID_VALUE_STATUS, f"not legal in our state {state_name(self.state)}"
        return 0, ""

    def on_set(self, modifier: int, remote, sender: Peer | None = None) -> Action:
        """Apply a legal SubnSet(SMInfo) (see `check_set`) from the SM `remote`."""
        c = Control(modifier)
        st = self.state
        if c == Control.HANDOVER and st == SMState.STANDBY:
            self.master = None
            self._go(SMState.MASTER, f"HANDOVER from SM {remote.guid:#018x}")
            return Action.TAKE_OVER
        if c == Control.HANDOVER:  # MASTER or DISCOVERING: the other master lets go
            return Action.SWEEP if st == SMState.MASTER else Action.DISCOVER
        if c == Control.DISABLE:
            self.master = None
            self._go(SMState.NOT_ACTIVE, f"DISABLE from SM {remote.guid:#018x}")
            return Action.NONE
        if c == Control.DISCOVER:
            self.master = None
            self._go(SMState.DISCOVERING, f"DISCOVER from SM {remote.guid:#018x}")
            return Action.DISCOVER
        if c == Control.STANDBY:
            self.master, self.poll_failures = sender, 0
            self._go(SMState.STANDBY, f"STANDBY from SM {remote.guid:#018x}")
            return Action.POLL if sender is not None else Action.NONE
        return Action.NONE  # ACKNOWLEDGE: the handover we sent is confirmed

    def rediscover(self, why: str) -> None:
        self.master = None
        self._go(SMState.DISCOVERING, why)
