"""The Prometheus endpoint of `smagent run --metrics` on a large fabric: bytes and series a
scrape carries, per linked port, and the CPU one scrape costs, for each scope
(`--metrics-ports`, `--metrics-counters`). Every linked port of a generated 3-level fat tree
(default k=36: 11,664 hosts, 1,620 switches) is given a reading as PerfMgr publishes it, with
non-zero traffic and errors on one port in 50; the scrape is the daemon's collector rendered
by prometheus_client, as the endpoint serves it.

    python bench/metrics_size.py            # 11,664 hosts
    python bench/metrics_size.py --k 18     # 1,458 hosts
"""
from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mad import perfmgt  # noqa: E402
from smagent import perf  # noqa: E402
from smagent.model import netfile, topogen  # noqa: E402
from smagent.perf import metrics  # noqa: E402
from smagent.sm.metrics_server import DaemonCollector  # noqa: E402


def rows(k: int) -> list[metrics.PortRow]:
    fabric = topogen.fat_tree_3(k)
    netfile.assign_ibsim_guids(fabric)
    out, i = [], 0
    for node in fabric:
        for port, far in fabric.connected_ports(node):
            i += 1
            err = 3 if i % 50 == 0 else 0
            pc = perfmgt.PortCounters(symbol_error_counter=err, port_xmit_data=123456789 + i, port_rcv_data=987654321,
                                      port_xmit_pkts=1234567, port_rcv_pkts=7654321, port_xmit_wait=err * 100)
            remote = fabric.node(far.node)
            r = perf.PortReading(node.guid, node.description, port, node.lid(port) or 0, pc, "4xEDR",
                                 remote.guid, remote.description, far.num, switch=node.is_switch, width="4x",
                                 speed="EDR", rate_gbps=103.125, state=4)
            out.append(metrics.PortRow(r, {c.field: v for c in perf.COUNTERS if (v := r.value(c)) is not None},
                                       False))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, default=36, help="switch radix of the 3-level fat tree (36: 11,664 hosts)")
    ns = ap.parse_args(argv)
    rs = rows(ns.k)
    sweep = metrics.Sweep(tuple(rs), 0, time.time(), 1.0, 0)
    status = {"state": "MASTER", "uptime_s": 1}
    print(f"fat tree k={ns.k}: {len(rs):,} linked ports ({sum(r.reading.switch for r in rs):,} on switches)")
    print(f"{'scope':<26} {'bytes':>14} {'series':>10} {'bytes/port':>11} {'CPU s':>7}")
    for scope in (metrics.Scope(), metrics.Scope(ports="switch"), metrics.Scope(counters="errors"),
                  metrics.Scope(counters="all")):
        collector = DaemonCollector(lambda: status, lambda: sweep, scope)
        t0 = time.process_time()
        text = metrics.text(collector)
        cpu = time.process_time() - t0
        series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
        ports = sum(1 for r in rs if scope.ports == "all" or r.reading.switch)
        print(f"{scope.ports + '/' + scope.counters:<26} {len(text):>14,} {series:>10,} {len(text) / ports:>11.0f} "
              f"{cpu:>7.2f}")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
