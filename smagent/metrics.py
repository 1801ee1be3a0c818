"""Port counters in the Prometheus text exposition format (version 0.0.4), written by
hand (no client library needed): what `smagent health --prometheus FILE` leaves for
node_exporter's textfile collector.

One metric family per counter of `smagent.perf.COUNTERS` (names follow Prometheus
conventions: `smagent_port_symbol_errors_total`, data in bytes; data and packet counters
from PortCountersExtended, 64 bits wide, where the port agent answers it), one series per
port read, labelled with the node GUID, its description, the port, and the remote node and
port. The file is replaced atomically (written beside it, then renamed), so the
collector never reads half of one.
"""
from __future__ import annotations

import os
import tempfile

from smagent import perf


def _label(value: object) -> str:
    """A label value escaped as the format requires (backslash, quote, line feed)."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(r: perf.PortReading) -> str:
    pairs = (("node_guid", f"{r.node_guid:#018x}"), ("node", r.node), ("port", r.port),
             ("remote_guid", "" if r.remote_guid is None else f"{r.remote_guid:#018x}"), ("remote_node", r.remote),
             ("remote_port", "" if r.remote_port is None else r.remote_port))
    return ",".join(f'{k}="{_label(v)}"' for k, v in pairs)


def prometheus_text(health: perf.Health) -> str:
    """Every counter of every port read, one family per counter, plus the sweep's own
    figures (ports read, ports over a threshold, port agents that did not answer)."""
    lines: list[str] = []
    labels = [(_labels(r), r) for r in health.readings]
    for c in perf.COUNTERS:
        series = [(lab, v) for lab, r in labels if (v := r.value(c)) is not None]
        if not series:
            continue
        where = "PortCountersExtended" if c.source == "extended" else "PortCounters"
        lines.append(f"# HELP {c.metric} {c.iba} (IBA {where}){' in bytes' if c.scale != 1 else ''}.")
        lines.append(f"# TYPE {c.metric} counter")
        lines.extend(f"{c.metric}{{{lab}}} {v * c.scale}" for lab, v in series)
    for name, what, value in (("smagent_health_ports_read", "Ports whose counters were read.", len(health.readings)),
                              ("smagent_health_ports_erring", "Ports with an error counter over its threshold.",
                               len(health.erring)),
                              ("smagent_health_unanswered", "Port agents or ports that did not answer.",
                               len(health.unanswered))):
        lines += [f"# HELP {name} {what}", f"# TYPE {name} gauge", f"{name} {value}"]
    return "\n".join(lines) + "\n"


def write_textfile(path: str | os.PathLike, text: str) -> None:
    """Replace ``path`` with ``text`` atomically: a temporary file in the same directory,
    flushed to disk, then renamed over it."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".smagent-", suffix=".prom.tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


__all__ = ["prometheus_text", "write_textfile"]
