"""SA queries counted in the daemon's Prometheus metrics: `smagent_sa_requests_total`
by attribute, method and status, fetched over HTTP from `MetricsServer` after SA Gets
answered by a MASTER SM on the in-process simulator."""
import re
import socket
import time
import urllib.request

from mad import sa
from mad.header import Method
from mad.sa_records import NodeRecord, PathRecord
from smagent.sm.daemon import Daemon, DaemonOptions
from smagent.sm.metrics_server import DaemonCollector, MetricsServer
from smagent.transport.address import Address
from smagent.transport.sim import SimTransport


def ask(t, d, method, record, *fields, src):
    q = sa.request(method, record, component_mask=type(record).mask(*fields) if fields else 0, transaction_id=7)
    t.deliver(q.encode(), src)
    d.step(max_wait=0)


def series(text: str) -> dict:
    out = {}
    for labels, value in re.findall(r"^smagent_sa_requests_total\{(.*)\} (\S+)$", text, re.M):
        lab = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        out[(lab["attribute"], lab["method"], lab["status"])] = int(float(value))
    return out


def test_sa_requests_counted_in_the_metrics_endpoint():
    t = SimTransport()
    t.serve()
    d = Daemon(t, DaemonOptions())
    d.start()
    me = d.sa.agent.subnet.sm_lid
    lids = sorted(d.sa.agent.subnet.lids)
    src = Address.gsi(me)
    for _ in range(3):
        ask(t, d, Method.GET, PathRecord(slid=lids[0], dlid=lids[-1]), "slid", "dlid", src=src)
    ask(t, d, Method.GET, NodeRecord(lid=me), "lid", src=src)
    ask(t, d, Method.GET, NodeRecord(lid=0xBFFF), "lid", src=src)  # nobody: ERR_NO_RECORDS
    ask(t, d, Method.GET_TABLE, NodeRecord(), src=src)
    time.sleep(0.06)  # the status is published at most every 50 ms when nothing else changed
    d.step(max_wait=0)
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    server = MetricsServer(f"127.0.0.1:{port}", DaemonCollector(d.published_status, d.published_sweep))
    server.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    finally:
        server.close()
    assert "# TYPE smagent_sa_requests_total counter" in text
    assert series(text) == {("PathRecord", "SubnAdmGet", "success"): 3, ("NodeRecord", "SubnAdmGet", "success"): 1,
                            ("NodeRecord", "SubnAdmGet", "ERR_NO_RECORDS"): 1,
                            ("NodeRecord", "SubnAdmGetTable", "success"): 1}
