"""The Grafana dashboard and the Prometheus alert rules in contrib/ load, and every metric
they name is one the endpoint serves (the daemon's collector over a status and a counter
sweep in which every counter has counted): a renamed metric cannot leave them behind."""
from __future__ import annotations

import json
import pathlib
import re

import yaml

from mad import perfmgt
from smagent import perf
from smagent.perf import metrics
from smagent.sm.metrics_server import SM_COUNTERS, DaemonCollector

import prom

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAME = re.compile(r"\b(smagent_[a-z0-9_]+)")
PROMETHEUS_OWN = {"up"}  # series Prometheus makes itself


def _served() -> set[str]:
    counters = {c.field: 7 for c in perf.COUNTERS}
    reading = perf.PortReading(0x2, "S1", 1, 1, perfmgt.PortCounters(**{c.field: 7 for c in perf.COUNTERS
                                                                        if c.source != "extended"}),
                               "4xQDR", 0x3, "H1", 1, switch=True, width="4x", speed="QDR", rate_gbps=40, state=4)
    sweep = metrics.Sweep((metrics.PortRow(reading, counters, True),), 1, 1.7e9, 2.0, 10)
    status: dict = {"state": "MASTER", "uptime_s": 1, "sa_requests": [
        {"attribute": "PathRecord", "method": "SubnAdmGet", "status": "success", "count": 1}]}
    for _name, path, _what in SM_COUNTERS:
        d = status
        for key in path[:-1]:
            d = d.setdefault(key, {})
        d[path[-1]] = 1
    text = metrics.text(DaemonCollector(lambda: status, lambda: sweep))
    return {name for name, _lab, _v in prom.samples(text)}


def _rules() -> list[dict]:
    doc = yaml.safe_load((ROOT / "contrib" / "prometheus" / "smagent-alerts.yml").read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def _dashboard_exprs() -> list[str]:
    doc = json.loads((ROOT / "contrib" / "grafana" / "smagent-dashboard.json").read_text())
    return [t["expr"] for p in doc["panels"] for t in p.get("targets", ())]


def test_alert_rules_load_and_name_served_metrics():
    rules = _rules()
    assert rules and all({"alert", "expr", "labels", "annotations"} <= set(r) for r in rules)
    served = _served()
    unknown = {n for r in rules for n in NAME.findall(r["expr"])} - served
    assert not unknown, unknown
    assert all(re.search(r"\bup\b", r["expr"]) or NAME.search(r["expr"]) for r in rules)


def test_dashboard_loads_and_names_served_metrics():
    exprs = _dashboard_exprs()
    assert exprs
    unknown = {n for e in exprs for n in NAME.findall(e)} - _served() - PROMETHEUS_OWN
    assert not unknown, unknown


def test_the_check_catches_a_metric_not_served():
    assert "smagent_port_symbol_errors_total" in _served()
    assert "smagent_port_symbol_errors_per_second" not in _served()  # the rates are gone: rate() does that
