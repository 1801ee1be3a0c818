"""Port counters and the running SM as Prometheus metrics, through prometheus_client: what
`smagent health --prometheus FILE` leaves for node_exporter's textfile collector and what
`smagent run --metrics ADDR:PORT` serves. Collectors yield the last published figures at
scrape time; nothing is rendered between scrapes.

Sized for large fabrics (at most about 1 KB a port by default; `bench/metrics_size.py`):

* a port's series carry three labels, ``guid`` (the node GUID), ``node_type``
  (``switch``/``ca``) and ``port``; what the port is (its node's name and LID, its link's far
  end, width, speed, rate and state) is said once, in the ``smagent_node_info`` and
  ``smagent_link_info`` series, for PromQL to join on (``* on (guid, port) group_left``);
* every counter is a counter: rates are PromQL's ``rate()``, not a second series;
* by default (``counters="default"``) a port has the sum of its error counters
  (``smagent_port_errors_total``), each error counter once it has counted (a healthy fabric's
  are zero), and its data and packet counters; ``"errors"`` leaves the traffic out, ``"all"``
  gives every counter, zero or not; ``ports="switch"`` gives switch ports only.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Callable, Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

from smagent import perf
from smagent.errors import BadInput

PORT_LABELS = ["guid", "node_type", "port"]
TRAFFIC = tuple(c for c in perf.COUNTERS if c.threshold is None and c.field in (
    "port_xmit_data", "port_rcv_data", "port_xmit_pkts", "port_rcv_pkts"))
PORT_CHOICES = ("all", "switch")
COUNTER_CHOICES = ("default", "errors", "all")
SM_STATES = ("STARTING", "NOT_ACTIVE", "DISCOVERING", "STANDBY", "MASTER")
PORT_STATES = {1: "down", 2: "init", 3: "armed", 4: "active"}  # IBA PortInfo.PortState


@dataclasses.dataclass(frozen=True)
class Scope:
    """Which ports and counters are exported (`smagent run --metrics-ports/--metrics-counters`)."""
    ports: str = "all"
    counters: str = "default"

    def __post_init__(self) -> None:
        if self.ports not in PORT_CHOICES:
            raise BadInput(f"metrics ports {self.ports!r}: expected one of {', '.join(PORT_CHOICES)}")
        if self.counters not in COUNTER_CHOICES:
            raise BadInput(f"metrics counters {self.counters!r}: expected one of {', '.join(COUNTER_CHOICES)}")


@dataclasses.dataclass(frozen=True)
class PortRow:
    """One port as exported: its reading (where it is, its link) and its counter totals by
    field (across clears in the running SM; the values read in a one-shot sweep)."""
    reading: perf.PortReading
    totals: Mapping[str, int]
    erring: bool


@dataclasses.dataclass(frozen=True)
class Sweep:
    """A finished counter sweep as published: its rows and its own figures."""
    rows: tuple[PortRow, ...]
    unanswered: int = 0
    time: float = 0.0  # when it ended (epoch seconds)
    seconds: float = 0.0
    gmps: int = 0


def rows_of(health: perf.Health) -> tuple[PortRow, ...]:
    """A one-shot sweep's readings as rows: the values read are the totals."""
    return tuple(PortRow(r, {c.field: v for c in perf.COUNTERS if (v := r.value(c)) is not None}, bool(r.exceeded))
                 for r in health.readings)


def _port_key(r: perf.PortReading) -> list[str]:
    return [f"{r.node_guid:#018x}", "switch" if r.switch else "ca", str(r.port)]


def _what(c: perf.Counter) -> str:
    where = "PortCountersExtended" if c.source == "extended" else "PortCounters"
    return f"{c.iba} (IBA {where}){' in bytes' if c.scale != 1 else ''}."


def port_families(rows: Iterable[PortRow], scope: Scope) -> Iterator[Metric]:
    """The counters of each port of ``rows`` in ``scope``; the error sum always."""
    rows = [row for row in rows if scope.ports == "all" or row.reading.switch]
    keys = [_port_key(row.reading) for row in rows]
    total = CounterMetricFamily("smagent_port_errors", "The sum of the port's error counters.", labels=PORT_LABELS)
    erring = GaugeMetricFamily("smagent_port_erring", "1 while an error counter of the port is over its threshold.",
                               labels=PORT_LABELS)
    for key, row in zip(keys, rows):
        total.add_metric(key, sum(row.totals.get(c.field, 0) for c in perf.ERROR_COUNTERS))
        erring.add_metric(key, int(row.erring))
    yield total
    yield erring
    wanted = perf.COUNTERS if scope.counters == "all" else perf.ERROR_COUNTERS + (
        TRAFFIC if scope.counters == "default" else ())
    for c in wanted:
        fam = CounterMetricFamily(c.metric, _what(c), labels=PORT_LABELS)
        every = scope.counters == "all" or c.threshold is None  # error counters: once they have counted
        for key, row in zip(keys, rows):
            v = row.totals.get(c.field)
            if v is not None and (every or v):
                fam.add_metric(key, v * c.scale)
        if fam.samples:
            yield fam


def info_families(rows: Iterable[PortRow], scope: Scope) -> Iterator[Metric]:
    """What each node and link is, once: names, LIDs, the far end, width, speed, rate, state."""
    rows = [row for row in rows if scope.ports == "all" or row.reading.switch]
    nodes = InfoMetricFamily("smagent_node", "A node of the fabric: its name and LID.",
                             labels=["guid", "node_type", "name", "lid"])
    links = InfoMetricFamily("smagent_link", "A port's link: the far end, width, speed, rate (Gb/s) and state.",
                             labels=PORT_LABELS + ["remote_guid", "remote_port", "width", "speed", "rate", "state"])
    state = GaugeMetricFamily("smagent_port_state", "The port's state (IBA PortState: 1 down, 2 init, 3 armed, "
                              "4 active) as the last counter sweep found it.", labels=PORT_LABELS)
    seen: set[int] = set()
    for row in rows:
        r = row.reading
        key = _port_key(r)
        if r.node_guid not in seen:
            seen.add(r.node_guid)
            nodes.add_metric([key[0], key[1]], {"name": r.node, "lid": str(r.lid)})
        links.add_metric(key, {"remote_guid": "" if r.remote_guid is None else f"{r.remote_guid:#018x}",
                               "remote_port": "" if r.remote_port is None else str(r.remote_port),
                               "width": r.width, "speed": r.speed, "rate": _rate(r.rate_gbps),
                               "state": PORT_STATES.get(r.state, str(r.state))})
        state.add_metric(key, r.state)
    yield from (nodes, links, state)


def _rate(gbps: float) -> str:
    return f"{gbps:g}" if gbps else ""


def sweep_families(sweep: Sweep | None, prefix: str) -> Iterator[Metric]:
    """The counter sweep's own figures: when the last one ended, how long it took, what did
    not answer (collection errors and timeouts)."""
    if sweep is None:
        return
    yield GaugeMetricFamily(f"{prefix}_last_sweep_timestamp_seconds",
                            "When the last counter sweep ended (Unix time).", value=sweep.time)
    yield GaugeMetricFamily(f"{prefix}_sweep_duration_seconds", "How long the last counter sweep took.",
                            value=sweep.seconds)
    yield GaugeMetricFamily(f"{prefix}_ports_read", "Ports whose counters the last sweep read.",
                            value=len(sweep.rows))
    yield GaugeMetricFamily(f"{prefix}_unanswered", "Port agents or ports that did not answer the last sweep "
                            "(collection errors and timeouts).", value=sweep.unanswered)


class HealthCollector(Collector):
    """`smagent health --prometheus`: one sweep's ports, every counter read."""

    def __init__(self, health: perf.Health, *, now: Callable[[], float] = time.time):
        self.sweep = Sweep(rows_of(health), len(health.unanswered), now(), 0.0, health.gmps)
        self.health = health

    def collect(self) -> Iterator[Metric]:
        scope = Scope(counters="all")
        yield from port_families(self.sweep.rows, scope)
        yield from info_families(self.sweep.rows, scope)
        yield from sweep_families(self.sweep, "smagent_health")
        yield GaugeMetricFamily("smagent_health_ports_erring", "Ports with an error counter over its threshold.",
                                value=len(self.health.erring))


def text(collector: Collector) -> str:
    """A collector's metrics in the text exposition format (version 0.0.4)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry).decode()


def prometheus_text(health: perf.Health) -> str:
    """`health --prometheus`'s file."""
    return text(HealthCollector(health))


__all__ = ["Scope", "PortRow", "Sweep", "HealthCollector", "port_families", "info_families", "sweep_families",
           "rows_of", "text", "prometheus_text", "SM_STATES", "PORT_CHOICES", "COUNTER_CHOICES"]
