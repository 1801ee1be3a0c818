"""Reading a Prometheus exposition back through prometheus_client's own parser (so a test
also proves the text parses): samples by name, and a port's series found by node name
through `smagent_node_info`."""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [(s.name, dict(s.labels), s.value) for fam in text_string_to_metric_families(text) for s in fam.samples]


def guids(text: str) -> dict[str, str]:
    """Node name -> GUID label, from the node info series."""
    return {lab["name"]: lab["guid"] for name, lab, _v in samples(text) if name == "smagent_node_info"}


def port_value(text: str, metric: str, node: str, port: int) -> float | None:
    """The value of ``metric`` for ``node`` (by name) and ``port``; None when absent."""
    guid = guids(text).get(node)
    for name, lab, v in samples(text):
        if name == metric and lab.get("guid") == guid and lab.get("port") == str(port):
            return v
    return None


def value(text: str, metric: str, **labels: str) -> float | None:
    for name, lab, v in samples(text):
        if name == metric and all(lab.get(k) == w for k, w in labels.items()):
            return v
    return None
