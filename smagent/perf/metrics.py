"""Port counters and the running SM in the Prometheus text exposition format (version
0.0.4), written by hand (no client library needed): what `smagent health --prometheus
FILE` leaves for node_exporter's textfile collector (written atomically through
`paths.write_text`), and what `smagent run --metrics` serves.

One metric family per counter of `smagent.perf.COUNTERS` (names follow Prometheus
conventions: `smagent_port_symbol_errors_total`, data in bytes; data and packet counters
from PortCountersExtended, 64 bits wide, where the port agent answers it), one series per
port read, labelled with the node GUID, its description, the port, and the remote node and
port.
"""
from __future__ import annotations

from smagent import perf


def _label(value: object) -> str:
    """A label value escaped as the format requires (backslash, quote, line feed)."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(r: perf.PortReading) -> str:
    pairs = (("node_guid", f"{r.node_guid:#018x}"), ("node", r.node), ("port", r.port),
             ("remote_guid", "" if r.remote_guid is None else f"{r.remote_guid:#018x}"), ("remote_node", r.remote),
             ("remote_port", "" if r.remote_port is None else r.remote_port))
    return ",".join(f'{k}="{_label(v)}"' for k, v in pairs)


def _family(lines: list[str], name: str, kind: str, what: str, series) -> None:
    """One metric family: HELP, TYPE and its series ((labels, value) pairs; labels may be
    ""), nothing at all when it has no series."""
    series = list(series)
    if series:
        lines += [f"# HELP {name} {what}", f"# TYPE {name} {kind}"]
        lines.extend(f"{name}{{{lab}}} {v}" if lab else f"{name} {v}" for lab, v in series)


def _what(c: perf.Counter) -> str:
    where = "PortCountersExtended" if c.source == "extended" else "PortCounters"
    return f"{c.iba} (IBA {where}){' in bytes' if c.scale != 1 else ''}."


def prometheus_text(health: perf.Health) -> str:
    """Every counter of every port read, one family per counter, plus the sweep's own
    figures (ports read, ports over a threshold, port agents that did not answer)."""
    lines: list[str] = []
    labels = [(_labels(r), r) for r in health.readings]
    for c in perf.COUNTERS:
        _family(lines, c.metric, "counter", _what(c),
                ((lab, v * c.scale) for lab, r in labels if (v := r.value(c)) is not None))
    for name, what, value in (("smagent_health_ports_read", "Ports whose counters were read.", len(health.readings)),
                              ("smagent_health_ports_erring", "Ports with an error counter over its threshold.",
                               len(health.erring)),
                              ("smagent_health_unanswered", "Port agents or ports that did not answer.",
                               len(health.unanswered))):
        _family(lines, name, "gauge", what, [("", value)])
    return "\n".join(lines) + "\n"


def port_totals_text(readings: list[perf.PortReading], tracks: dict) -> str:
    """The running SM's per-port families: each counter's total across clears (a
    `smagent.sm.perfmgr.PortTrack` per (node GUID, port)) and its rate per second since
    the previous counter sweep (`..._per_second`, a gauge; absent after the first)."""
    lines: list[str] = []
    rows = [(_labels(r), tracks[(r.node_guid, r.port)]) for r in readings if (r.node_guid, r.port) in tracks]
    for c in perf.COUNTERS:
        _family(lines, c.metric, "counter", _what(c),
                ((lab, tr.totals[c.field] * c.scale) for lab, tr in rows if c.field in tr.totals))
        rate = c.metric.removesuffix("_total") + "_per_second"
        _family(lines, rate, "gauge", f"{c.iba} per second since the previous counter sweep.",
                ((lab, round(tr.rates[c.field] * c.scale, 3)) for lab, tr in rows if c.field in tr.rates))
    _family(lines, "smagent_port_erring", "gauge", "1 while an error counter of the port is over its threshold.",
            ((lab, int(tr.erring)) for lab, tr in rows))
    return "\n".join(lines) + "\n" if lines else ""


# the daemon's status (`Daemon.status`) -> counters: (metric, path in the status, help)
_SM_COUNTERS = (
    ("smagent_sweeps_total", ("sweeps",), "Sweeps done: the bring-up, every repair, SIGHUP."),
    ("smagent_sweeps_failed_total", ("sweeps_failed",), "Sweeps and repairs that ended in an error."),
    ("smagent_repairs_total", ("counters", "repairs"), "Repairs after traps."),
    ("smagent_light_sweeps_total", ("counters", "light_sweeps"), "Light sweeps."),
    ("smagent_traps_total", ("counters", "traps"), "Traps received."),
    ("smagent_handovers_sent_total", ("counters", "handovers_sent"), "Handovers to another SM."),
    ("smagent_errors_total", ("counters", "errors"), "Fabric failures the daemon survived."),
    ("smagent_plan_refusals_total", ("counters", "plan_refusals"), "Sweeps the check of planned tables refused."),
    ("smagent_smps_sent_total", ("transport", "sent"), "MADs sent (SMPs and GMPs)."),
    ("smagent_smps_retried_total", ("transport", "retries"), "MADs sent again after a timeout or busy answer."),
    ("smagent_smps_lost_total", ("transport", "timeouts"), "MADs given up after every try."),
    ("smagent_perfmgr_sweeps_total", ("perfmgr", "sweeps"), "Counter sweeps."),
    ("smagent_perfmgr_gmps_total", ("perfmgr", "gmps"), "GMPs of the counter sweeps."),
    ("smagent_perfmgr_clears_total", ("perfmgr", "clears"), "Ports cleared near saturation."),
    ("smagent_reloads_refused_total", ("config", "reloads_refused"),
     "SIGHUP reloads refused (a bad file, or tables the plan check refused): the previous desired state stays."),
    ("smagent_log_lines_suppressed_total", ("log_lines_suppressed",),
     "Repeated log lines left out (each kind summarised once a window)."),
)
SM_STATES = ("STARTING", "NOT_ACTIVE", "DISCOVERING", "STANDBY", "MASTER")


def _at(status: dict, path: tuple[str, ...]):
    for key in path:
        status = status.get(key) if isinstance(status, dict) else None  # type: ignore[assignment]
    return status


def daemon_text(status: dict, ports: str = "") -> str:
    """The running SM as metrics: its state (one series per state, 1 for the current),
    uptime, its counters from ``status`` (`Daemon.status`), then ``ports``
    (`port_totals_text` of the last counter sweep)."""
    lines: list[str] = []
    _family(lines, "smagent_sm_state", "gauge", "1 for the state the SM is in.",
            ((f'state="{st}"', int(status.get("state") == st)) for st in SM_STATES))
    _family(lines, "smagent_uptime_seconds", "gauge", "Seconds since the daemon started.",
            [("", status.get("uptime_s", 0))])
    routed = status.get("routed")
    _family(lines, "smagent_fabric_routed", "gauge",
            "1 while this SM is MASTER and its last sweep succeeded (the fabric is routed as planned), "
            "0 while MASTER and it failed or was refused; absent when not MASTER.",
            [("", int(routed))] if routed is not None else [])
    config = status.get("config") or {}
    _family(lines, "smagent_config_fell_back", "gauge",
            "1 while the fabric is routed with the last good settings, those in force having been refused.",
            [("", int(bool(config.get("fell_back"))))] if config else [])
    others = status.get("other_sms") or []
    _family(lines, "smagent_other_sms", "gauge",
            "Other SMs seen, by state and whether they share our SM_Key (peer=\"false\": another SM_Key).",
            ((f'state="{st}",peer="{str(peer).lower()}"',
              sum(1 for o in others if o.get("state") == st and bool(o.get("peer", True)) == peer))
             for st in ("MASTER", "STANDBY", "DISCOVERING", "NOT_ACTIVE") for peer in (True, False))
            if "other_sms" in status else [])
    for name, path, what in _SM_COUNTERS:
        value = _at(status, path)
        if isinstance(value, (int, float)):
            _family(lines, name, "counter", what, [("", value)])
    _family(lines, "smagent_sa_requests_total", "counter",
            "SA requests answered, by attribute, method and the answer's status.",
            ((f'attribute="{r["attribute"]}",method="{r["method"]}",status="{r["status"]}"', r["count"])
             for r in status.get("sa_requests") or ()))
    return "\n".join(lines) + "\n" + ports


__all__ = ["prometheus_text", "port_totals_text", "daemon_text", "SM_STATES"]
