"""The daemon's timers: one structure of named deadlines instead of a field per timer.

A timer is armed for a moment and fires once (`due`); a gate (`allow`) is a rate limit:
it lets an action through at most once per interval. Pure: the caller passes the time."""
from __future__ import annotations

import math
from collections.abc import Iterable

# the daemon's timers, in the order they are served when several are due
REPAIR = "repair"  # MASTER: traps came in; repair once the burst settles
LIGHT = "light"  # MASTER: the next light sweep
POLL = "poll"  # STANDBY: the next poll of the master
DISCOVER = "discover"  # DISCOVERING: the next discovery (after one failed)
PERFMGR = "perfmgr"  # the next counter sweep (--perfmgr-interval): after everything else
ORDER = (DISCOVER, REPAIR, LIGHT, POLL, PERFMGR)


class Timers:
    def __init__(self) -> None:
        self._at: dict[str, float] = {}
        self._gates: dict[str, float] = {}

    def arm(self, name: str, at: float) -> None:
        """Fire `name` at `at` (replacing an earlier arming)."""
        self._at[name] = at

    def arm_by(self, name: str, at: float) -> None:
        """Fire `name` at `at` or earlier if it is armed earlier already."""
        self._at[name] = min(self._at.get(name, math.inf), at)

    def cancel(self, *names: str) -> None:
        for n in names:
            self._at.pop(n, None)

    def at(self, name: str) -> float:
        return self._at.get(name, math.inf)

    def next_at(self) -> float:
        """When the earliest timer fires (inf: none armed)."""
        return min(self._at.values(), default=math.inf)

    def due(self, now: float, order: Iterable[str] = ORDER) -> str | None:
        """The first timer (in `order`) whose moment has come, disarmed; None if none."""
        for name in order:
            if self._at.get(name, math.inf) <= now:
                del self._at[name]
                return name
        return None

    def allow(self, gate: str, now: float, interval: float) -> bool:
        """True at most once per `interval` seconds for `gate`."""
        if now < self._gates.get(gate, -math.inf):
            return False
        self._gates[gate] = now + interval
        return True
