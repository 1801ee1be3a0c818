"""Retries that follow the loss a run observes.

A fixed retry count is either too small for a lossy fabric (with 30 % loss at each of
six switch ports on the way, a try gets through about one time in eight) or too large
for a healthy one. `RetryPolicy` watches the requests that were answered: how many tries
each needed, and how many it was allowed. From a window of those it estimates the chance
that one try is lost, per distance class (directed-route hop count, or LID-routed), and
gives each request as many retries as make "every try lost" unlikely (`TARGET_FAILURE`),
never fewer than configured, never more than `max_retries`.

Only answered requests count: a node that never answers (dead, or refusing our M_Key)
says nothing about the path loss, and must not make every other request wait longer.
Requests that were answered are a truncated sample (a request allowed n tries is only
seen when it needed fewer), so the estimate is the maximum-likelihood loss of a
geometric distribution truncated at each sample's n: with few retries allowed, a naive
ratio would hide most of the loss.

Timeouts: the first `BACKOFF_TRIES` retries beyond the configured count wait longer
(doubling, at most `BACKOFF_CAP` times the configured timeout), for an SMA or path slower
than configured; answers that arrive after we gave up on them (`late`) double the base
timeout for every request, up to the same bound. Tries after those wait the base timeout
again: by then a try that gets no answer was lost, not late (a late one would have raised
the base), and a node that never answers on a very lossy fabric (up to `MAX_RETRIES`)
costs about MAX_RETRIES x the timeout, not 4 times that. The configured tries keep the
configured timeout, so a healthy fabric (and a node that is simply gone) costs what it did.

Explicit ``retries`` (a caller's per-batch override) and a configured 0 are never raised.
"""
from __future__ import annotations

import collections
import math
from typing import Any, Mapping

from mad.smp import hop_count_of

LOSS_WINDOW = 512  # about how many answered requests per class the estimate looks at
MIN_SAMPLES = 24  # below this a class borrows the estimate of all classes together
TARGET_FAILURE = 1e-3  # wanted chance that a live request loses every try
# The bound; repair passes of a sweep deal with what still fails. At 30 % loss per
# switch port a host 5 switches away (3-level tree, across the core) answers one try in
# 35: 48 left a quarter of those requests unanswered per pass, and a chain of passes
# (found, ARMED, ACTIVE) did not finish; 256 converges (tests/live/test_lossy_live.py).
MAX_RETRIES = 256
BACKOFF_CAP = 4  # a try waits at most this many times the configured timeout
BACKOFF_TRIES = 4  # the extra tries that back off; later ones wait the base timeout
LATE_TO_RAISE = 4  # late answers that double the base timeout
_REFRESH = 16  # new samples in a class before its estimate is recomputed
_DECAY = 1 - 1 / LOSS_WINDOW  # weight an answer loses per newer one


def truncated_geometric_loss(samples: Mapping[tuple[int, int], float]) -> float:
    """Maximum-likelihood chance that one try is lost, from {(failures, tries allowed):
    count} of requests that were answered (failures < tries allowed)."""
    lost = sum(k * c for (k, _n), c in samples.items())
    if not lost:
        return 0.0

    def slope(p: float) -> float:  # d/dp of the log-likelihood; decreasing in p
        s = 0.0
        for (k, n), c in samples.items():
            pn = p ** n
            s += c * (k / p - 1 / (1 - p) + n * pn / p / (1 - pn))
        return s

    lo, hi = 1e-9, 1 - 1e-9
    for _ in range(48):
        mid = (lo + hi) / 2
        if slope(mid) > 0:
            lo = mid
        else:
            hi = mid
    return lo


class _Class:
    """The answered requests of one distance class: {(failures, tries allowed): weight},
    older ones weighing less (each new answer multiplies the rest by `_DECAY`, so about
    the last `LOSS_WINDOW` count), and the loss estimated from them."""
    __slots__ = ("counts", "weight", "fresh", "loss")

    def __init__(self):
        self.counts: dict = {}
        self.weight = 0.0
        self.fresh = 0
        self.loss = 0.0

    def add(self, samples: collections.Counter, n: int) -> None:
        counts = self.counts
        for key, v in samples.items():
            counts[key] = counts.get(key, 0.0) + v
        self.weight += n
        self.fresh += n
        if self.fresh >= _REFRESH or (not self.loss and any(k for k, _n in samples)):
            f = _DECAY ** self.fresh
            self.fresh = 0
            for key in list(counts):
                counts[key] *= f
            self.weight *= f
            self.loss = truncated_geometric_loss(counts)


class RetryPolicy:
    """Per-request retry counts and timeouts for one transport (see the module doc)."""

    def __init__(self, *, max_retries: int = MAX_RETRIES, target: float = TARGET_FAILURE):
        self.max_retries = max_retries
        self.target = target
        self.timeout_scale = 1
        self.late = 0
        self.classes: dict[object, _Class] = {}
        self.all = _Class()
        self.highest = 0  # the most retries given to any request

    # -- observing -----------------------------------------------------------------------
    def answered(self, klass, failures: int, allowed: int) -> None:
        """A request of ``klass`` was answered after ``failures`` lost tries, of ``allowed``."""
        self.answered_many([(klass, failures)], allowed - 1)

    def answered_many(self, samples: list, configured: int) -> None:
        """`answered` for [(klass, failures)], each allowed the tries `retries` gives its
        class now (the transport hands answers over in small batches: cheaper)."""
        per_class: dict = {}
        for (klass, failures), v in collections.Counter(samples).items():
            per_class.setdefault(klass, collections.Counter())[failures] += v
        pooled: collections.Counter[Any] = collections.Counter()
        for klass, by_failures in per_class.items():
            c = self.classes.get(klass)
            if c is None:
                c = self.classes[klass] = _Class()
            n = self.retries(klass, configured) + 1
            got = collections.Counter({(k, max(n, k + 1)): v for k, v in by_failures.items()})
            c.add(got, sum(by_failures.values()))
            pooled.update(got)
        self.all.add(pooled, len(samples))

    def late_answer(self) -> None:
        """An answer came after its request was retried or given up: the timeout is short."""
        self.late += 1
        if self.late % LATE_TO_RAISE == 0 and self.timeout_scale < BACKOFF_CAP:
            self.timeout_scale *= 2

    # -- deciding ------------------------------------------------------------------------
    def loss(self, klass=None) -> float:
        """The estimated chance that one try of ``klass`` (or of any request) is lost."""
        c = self.classes.get(klass)
        if c is not None and c.weight >= MIN_SAMPLES:
            return c.loss
        return max(self.all.loss, c.loss if c is not None else 0.0)

    def retries(self, klass, configured: int) -> int:
        """Retries for a request of ``klass``: ``configured`` (0 stays 0), raised so that
        losing every try has about `target` chance at the observed loss."""
        if configured <= 0:
            return configured
        p = self.loss(klass)
        if p <= 0.0:
            return configured
        tries = self.max_retries + 1 if p >= 1.0 else math.ceil(math.log(self.target) / math.log(p))
        n = max(configured, min(self.max_retries, tries - 1))
        self.highest = max(self.highest, n)
        return n

    def timeout_ms(self, attempt: int, configured: int, base_ms: int) -> int:
        """The wait for try ``attempt`` (0: the first) of a request ``configured`` retries
        were configured for: ``base_ms`` (raised by late answers), doubled per try beyond
        the configured ones for `BACKOFF_TRIES` tries, at most `BACKOFF_CAP` times
        ``base_ms``; then ``base_ms`` (raised) again."""
        extra = attempt - max(configured, 0)
        scale = self.timeout_scale << extra if 0 < extra <= BACKOFF_TRIES else self.timeout_scale
        return base_ms * min(scale, BACKOFF_CAP)

    def lossy(self) -> bool:
        """Has any answered request needed a retry? (Then trying again what failed may work.)"""
        return self.all.loss > 0.0

    def snapshot(self) -> dict:
        return {"loss_estimate": round(self.all.loss, 4), "highest_retries": self.highest,
                "timeout_scale": self.timeout_scale, "late_answers": self.late}


def distance_class(raw: bytes):
    """The class a request's loss is estimated in (from its bytes): its directed-route
    hop count + 1, or 'lid'."""
    hops = hop_count_of(raw)
    return "lid" if hops is None else hops + 1
