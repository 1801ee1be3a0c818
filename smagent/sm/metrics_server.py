"""`smagent run --metrics ADDR:PORT`: the Prometheus endpoint, prometheus_client's HTTP
server in its own thread. At each scrape `DaemonCollector` yields what the daemon's thread
published before (its status, the last counter sweep: `smagent.perf.metrics`), so a scrape
never waits for a sweep and never reads a half-updated structure."""
from __future__ import annotations

import threading
from typing import Callable, Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from smagent.errors import BadInput
from smagent.perf import metrics

# the daemon's status (`Daemon.status`) -> counters: (metric, path in the status, help)
SM_COUNTERS = (
    ("smagent_sweeps", ("sweeps",), "Sweeps done: the bring-up, every repair, SIGHUP."),
    ("smagent_sweeps_failed", ("sweeps_failed",), "Sweeps and repairs that ended in an error."),
    ("smagent_repairs", ("counters", "repairs"), "Repairs after traps."),
    ("smagent_light_sweeps", ("counters", "light_sweeps"), "Light sweeps."),
    ("smagent_traps", ("counters", "traps"), "Traps received."),
    ("smagent_handovers_sent", ("counters", "handovers_sent"), "Handovers to another SM."),
    ("smagent_errors", ("counters", "errors"), "Fabric failures the daemon survived."),
    ("smagent_drift_found", ("counters", "drifts_found"),
     "Entries the audit read back different from what the SM programmed (LFT/MFT blocks, port LIDs and states)."),
    ("smagent_drift_repaired", ("counters", "drifts_repaired"), "Drift the audit found and a repair wrote back."),
    ("smagent_plan_refusals", ("counters", "plan_refusals"), "Sweeps the check of planned tables refused."),
    ("smagent_smps_sent", ("transport", "sent"), "MADs sent (SMPs and GMPs)."),
    ("smagent_smps_retried", ("transport", "retries"), "MADs sent again after a timeout or busy answer."),
    ("smagent_smps_lost", ("transport", "timeouts"), "MADs given up after every try."),
    ("smagent_perfmgr_sweeps", ("perfmgr", "sweeps"), "Counter sweeps."),
    ("smagent_perfmgr_gmps", ("perfmgr", "gmps"), "GMPs of the counter sweeps."),
    ("smagent_perfmgr_clears", ("perfmgr", "clears"), "Ports cleared near saturation."),
    ("smagent_reloads_refused", ("config", "reloads_refused"),
     "SIGHUP reloads refused (a bad file, or tables the plan check refused): the previous desired state stays."),
    ("smagent_log_lines_suppressed", ("log_lines_suppressed",),
     "Repeated log lines left out (each kind summarised once a window)."),
)
DEFAULT_PORT = 10683  # 9100-9999 is full on Prometheus' list of exporter ports (9683: infiniband_exporter)


def parse_listen(text: str) -> tuple[str, int]:
    """"ADDR:PORT" ("127.0.0.1:10683", "[::1]:10683", ":10683" for every address) -> (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise BadInput(f"--metrics {text!r}: expected ADDR:PORT with a port 1-65535 (e.g. 127.0.0.1:{DEFAULT_PORT})")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host or "0.0.0.0", int(port)


def _at(status: dict, path: tuple[str, ...]):
    for key in path:
        status = status.get(key) if isinstance(status, dict) else None  # type: ignore[assignment]
    return status


def status_families(status: dict) -> Iterator[Metric]:
    """The running SM from its published status: its state (one series per state, 1 for the
    current), uptime, its counters, the SA's requests by attribute, method and status."""
    state = GaugeMetricFamily("smagent_sm_state", "1 for the state the SM is in.", labels=["state"])
    for st in metrics.SM_STATES:
        state.add_metric([st], int(status.get("state") == st))
    yield state
    yield GaugeMetricFamily("smagent_uptime_seconds", "Seconds since the daemon started.",
                            value=status.get("uptime_s", 0))
    yield from _routing_families(status)
    for name, path, what in SM_COUNTERS:
        value = _at(status, path)
        if isinstance(value, (int, float)):
            yield CounterMetricFamily(name, what, value=value)
    sa = CounterMetricFamily("smagent_sa_requests", "SA requests answered, by attribute, method and the answer's "
                             "status.", labels=["attribute", "method", "status"])
    for r in status.get("sa_requests") or ():
        sa.add_metric([str(r["attribute"]), str(r["method"]), str(r["status"])], r["count"])
    if sa.samples:
        yield sa


def _routing_families(status: dict) -> Iterator[Metric]:
    """Whether the fabric is routed as planned, on the last good settings, and the other SMs."""
    routed = status.get("routed")
    if routed is not None:  # absent when not MASTER
        yield GaugeMetricFamily("smagent_fabric_routed", "1 while this SM is MASTER and its last sweep succeeded "
                                "(the fabric is routed as planned), 0 while MASTER and it failed or was refused.",
                                value=int(routed))
    config = status.get("config") or {}
    if config:
        yield GaugeMetricFamily("smagent_config_fell_back", "1 while the fabric is routed with the last good "
                                "settings, those in force having been refused.", value=int(bool(config.get("fell_back"))))
    if "other_sms" in status:
        others = status.get("other_sms") or []
        fam = GaugeMetricFamily("smagent_other_sms", "Other SMs seen, by state and whether they share our SM_Key "
                                '(peer="false": another SM_Key).', labels=["state", "peer"])
        for st in ("MASTER", "STANDBY", "DISCOVERING", "NOT_ACTIVE"):
            for peer in (True, False):
                fam.add_metric([st, str(peer).lower()], sum(1 for o in others if o.get("state") == st
                                                            and bool(o.get("peer", True)) == peer))
        yield fam
    if "drained" in status:
        drained = GaugeMetricFamily("smagent_drained", "1 for each node (port=\"\") or cable (a port of the node) "
                                    "the SM keeps drained: no route crosses it (smagent drain).",
                                    labels=["node", "guid", "port"])
        for e in status.get("drained") or ():
            drained.add_metric([str(e["name"]), str(e["guid"]), "" if e.get("port") is None else str(e["port"])], 1)
        yield drained


class DaemonCollector(Collector):
    """What the endpoint serves: ``status()`` (the daemon's published status) and ``sweep()``
    (PerfMgr's last published counter sweep, or None) within ``scope``."""

    def __init__(self, status: Callable[[], dict], sweep: Callable[[], metrics.Sweep | None],
                 scope: metrics.Scope = metrics.Scope()):
        self.status, self.sweep, self.scope = status, sweep, scope

    def collect(self) -> Iterator[Metric]:
        yield from status_families(self.status())
        last = self.sweep()
        if last is not None:
            yield from metrics.sweep_families(last, "smagent_perfmgr")
            yield from metrics.port_families(last.rows, self.scope)
            yield from metrics.info_families(last.rows, self.scope)


def status_text(status: dict) -> str:
    """The running SM's own metrics (no port counters) of ``status``, in the text format."""
    return metrics.text(DaemonCollector(lambda: status, lambda: None))


class MetricsServer:
    def __init__(self, listen: str, collector: Collector):
        self.host, self.port = parse_listen(listen)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.address: tuple = (self.host, self.port)

    def start(self) -> None:
        try:
            server, self._thread = start_http_server(self.port, addr=self.host, registry=self.registry)
        except OSError as e:
            raise BadInput(f"--metrics {self.host}:{self.port}: cannot listen there: {e.strerror or e}") from None
        self._server = server
        self.address = server.server_address

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)


__all__ = ["MetricsServer", "DaemonCollector", "status_families", "status_text", "parse_listen", "DEFAULT_PORT", "SM_COUNTERS"]
