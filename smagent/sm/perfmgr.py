"""PerfMgr: the running SM's counter sweeps (`smagent run --perfmgr-interval S`).

Every interval, while the daemon knows the fabric, every linked port's counters are read
(`smagent.perf.sweep` with ``every_port``: PortCounters, and PortCountersExtended where
the agent answers it). Per port it keeps totals that survive clears (what earlier clears
took away plus what the port shows now), the rate of each counter since the previous
sweep, and whether the port errs: one log line when a port starts erring (the total of
an error counter over its threshold; totals only grow, so once per port and run). A 32-bit (or narrower) counter
past `SATURATION` of its range is cleared before it sticks at its maximum (a saturated
counter stops counting), its value added to the port's totals first; what the port
counts between that read and the clear is lost, a few packets at most.

After each sweep `published` is replaced whole by an immutable `smagent.perf.metrics.Sweep`
(each port's reading and a copy of its totals): the metrics server's thread reads only that.
"""
from __future__ import annotations

import dataclasses
import logging
import time

from mad.perfmgt import PortCounters
from smagent.perf import metrics
from smagent import perf
from smagent.transport.base import Transport, TransportError

log = logging.getLogger("smagent.sm")

SATURATION = 0.75  # share of a counter's range past which the port's counters are cleared
_WIDTHS = {name: width for name, _, width, _ in PortCounters.LAYOUT.field_info()}


@dataclasses.dataclass
class PortTrack:
    """One port across sweeps: totals (``base`` + the counters now), rates per second."""
    base: dict[str, int] = dataclasses.field(default_factory=dict)
    raw: dict[str, int] = dataclasses.field(default_factory=dict)  # the counters as last read
    totals: dict[str, int] = dataclasses.field(default_factory=dict)
    rates: dict[str, float] = dataclasses.field(default_factory=dict)
    at: float | None = None
    erring: bool = False
    clears: int = 0


class PerfMgr:
    def __init__(self, interval: float, thresholds: dict[str, int] | None = None, *, clock=time.monotonic):
        self.interval, self.clock = interval, clock
        self.thresholds = dict(perf.DEFAULT_THRESHOLDS if thresholds is None else thresholds)
        self.ports: dict[tuple[int, int], PortTrack] = {}
        self.sweeps = self.clears = self.gmps = 0
        self.last: dict | None = None  # the last counter sweep's summary (status)
        self.published: metrics.Sweep | None = None  # the last sweep, for the metrics thread

    def sweep(self, t: Transport, topo) -> None:
        """One counter sweep of ``topo``'s linked ports; then the saturated ones cleared."""
        t0 = self.clock()
        health = perf.sweep(t, topo, self.thresholds, every_port=True)
        now = self.clock()
        full = [r for r in health.readings if self._track(r, now)]
        if full:
            self._clear(t, full)
        self.sweeps += 1
        self.gmps += health.gmps
        erring = [r for r in health.readings if r.exceeded]
        ended = time.time()
        self.last = {"ports_read": len(health.readings), "ports_erring": len(erring),
                     "unanswered": len(health.unanswered), "gmps": health.gmps, "cleared": len(full),
                     "seconds": round(now - t0, 3), "time": ended}
        for u in health.unanswered[:5]:
            log.warning("counter sweep: %s", u)
        rows = tuple(metrics.PortRow(r, dict(tr.totals), tr.erring) for r in health.readings
                     if (tr := self.ports.get((r.node_guid, r.port))) is not None)
        self.published = metrics.Sweep(rows, len(health.unanswered), ended, now - t0, health.gmps)

    def _track(self, r: perf.PortReading, now: float) -> bool:
        """Fold one reading into its port's track; True when a counter nears saturation. A
        counter below its last reading was cleared by someone else (perfquery -R): what it
        had counted joins the base, so the totals never go back."""
        tr = self.ports.setdefault((r.node_guid, r.port), PortTrack())
        raw = {c.field: v for c in perf.COUNTERS if (v := r.value(c)) is not None}
        for f, v in raw.items():
            if v < tr.raw.get(f, 0):
                tr.base[f] = tr.base.get(f, 0) + tr.raw[f]
        totals = {f: tr.base.get(f, 0) + v for f, v in raw.items()}
        if tr.at is not None and now > tr.at:
            tr.rates = {f: max(0, v - tr.totals.get(f, 0)) / (now - tr.at) for f, v in totals.items()}
        tr.raw, tr.totals, tr.at = raw, totals, now
        over = {c.iba: totals[c.field] for c in perf.ERROR_COUNTERS
                if totals.get(c.field, 0) > self.thresholds.get(c.iba, c.threshold or 0)}
        if over and not tr.erring:  # once per port: the totals only grow
            far = f' to "{r.remote}" port {r.remote_port}' if r.remote_guid is not None else ""
            log.warning('port "%s" (%#018x) port %d%s starts erring: %s', r.node, r.node_guid, r.port, far,
                        ", ".join(f"{k} {v} > {self.thresholds[k]}" for k, v in over.items()))
        tr.erring = bool(over)
        return any(getattr(r.counters, c.field) >= SATURATION * ((1 << _WIDTHS[c.field]) - 1)
                   for c in perf.COUNTERS if c.source != "extended" and (c.source == "basic" or r.extended is None))

    def _clear(self, t: Transport, full: list[perf.PortReading]) -> None:
        """Clear the counters of ``full``'s ports (both forms read), keeping their totals."""
        try:
            perf.clear(t, [(r.lid, r.port) for r in full])
            ext = [r for r in full if r.extended is not None]
            if ext:
                perf.clear(t, [(r.lid, r.port) for r in ext], extended=True)
        except TransportError as e:  # kept as they are: the next sweep tries again
            log.warning("counter sweep: clearing %d port(s) near saturation failed: %s", len(full), e)
            return
        for r in full:
            tr = self.ports[(r.node_guid, r.port)]
            tr.base, tr.raw = dict(tr.totals), {}
            tr.clears += 1
            self.clears += 1
        log.info("counter sweep: %d port(s) near saturation cleared, their totals kept", len(full))

    def status(self) -> dict:
        return {"interval_s": self.interval, "sweeps": self.sweeps, "gmps": self.gmps, "clears": self.clears,
                "last": self.last, "erring": sum(tr.erring for tr in self.ports.values())}


__all__ = ["PerfMgr", "PortTrack", "SATURATION"]
