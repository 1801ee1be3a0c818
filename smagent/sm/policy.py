"""The SM loop's scheduling decisions as pure functions over plain values (issue 38 item 3):
when a failed sweep is tried again, when a sweep that ended with problems is followed by a full
one, when the next light sweep is due, and whether a full sweep may plan on the discovery the
mastership just made instead of walking the fabric again. No transport, clock or logging: the master duties
(`smagent.sm.duties`) pass in counts and settings and act on the answer, so these are tested
without a fabric."""

from __future__ import annotations

import dataclasses

# a sweep that ends with problems (a switch that stopped answering mid-sweep, a node cut
# off) is followed at once by a full one, this many times in a row; then one every sweep
# interval until one is clean (nothing else would: no port changes for a light sweep)
RESWEEPS_AFTER_PROBLEMS = 2
# a sweep that failed or was refused (under loss: a switch that did not answer made ports
# look not active, and the plan check refused) is tried again this soon, then at the
# light sweeps' pace: a dead link is not left routed for a whole sweep interval
RETRY_AFTER_FAILURE = (0.2, 0.5, 1.0, 2.0)
# the mastership's discovery (made to find the other SMs) is handed to the full sweep that
# follows it if that sweep starts within this many seconds of the walk's end: a change
# whose trap was lost in between is then caught by the light sweeps, as one made while
# the sweep's own walk ran would be; an older walk is made again
REUSE_DISCOVERY_S = 5.0


@dataclasses.dataclass(frozen=True)
class Resweep:
    """A full sweep to schedule ``delay`` seconds from now (None: none at all), and whether
    this is the first time the fast schedule ran out (worth one warning)."""

    count: int  # the retry / resweep count after this decision
    delay: float | None
    fast: bool  # on the fast schedule, not the light sweeps' pace
    gave_up_fast: bool = False


def after_failure(retries: int, sweep_interval: float) -> Resweep:
    """A failed sweep after ``retries`` failures in a row: again soon with backoff, then at
    the light sweeps' pace (never, without light sweeps)."""
    if retries >= len(RETRY_AFTER_FAILURE):
        return Resweep(retries + 1, sweep_interval or None, False, retries == len(RETRY_AFTER_FAILURE))
    return Resweep(retries + 1, RETRY_AFTER_FAILURE[retries], True)


def after_unclean(resweeps: int, clean: bool, trap_settle: float, sweep_interval: float) -> Resweep:
    """A sweep that succeeded, after ``resweeps`` unclean full sweeps in a row: a clean one
    resets the count; an unclean one is followed by a full sweep after ``trap_settle``, a few
    times, then at the light sweeps' pace until clean."""
    if clean:
        return Resweep(0, None, False)
    n = resweeps + 1
    if n > RESWEEPS_AFTER_PROBLEMS:
        return Resweep(n, sweep_interval or None, False, n == RESWEEPS_AFTER_PROBLEMS + 1)
    return Resweep(n, trap_settle, True)


def reuse_discovery(age: float | None, unreachable: int) -> bool:
    """Whether a full sweep plans on a discovery made ``age`` seconds ago (None: none, or a
    trap came since: something changed) in which ``unreachable`` parts did not answer,
    instead of walking the fabric again: only a whole walk, no trap since, and young."""
    return age is not None and 0 <= age <= REUSE_DISCOVERY_S and not unreachable


def light_due(now: float, sweep_interval: float) -> float | None:
    """When the next light sweep is due (None: light sweeps are off)."""
    return now + sweep_interval if sweep_interval else None


def retry_light_due(now: float, sweep_interval: float) -> float:
    """After a failed sweep the light sweep waits at least a second: the retries come first."""
    return now + max(sweep_interval, 1.0)
