#!/usr/bin/env python3
"""The transport's own cost per MAD (no fabric): a backend that answers every request at
once, so what is measured is the window, TID matching, retries bookkeeping, stats and
the reply's decoding. Three kinds: directed-route SMPs built as bytes (what the sweep
sends), LID-routed SMPs built from their fields, PerfMgt GMPs to QP1. CPU time of this
process, the best of --runs runs (the figure least disturbed by other load).

    python bench/window.py [--count 30000] [--runs 7] [--window 32]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mad import perfmgt  # noqa: E402
from mad import smp  # noqa: E402
from mad.attributes import AttrID  # noqa: E402
from mad.header import Method  # noqa: E402
from smagent.transport.address import Address  # noqa: E402
from smagent.transport.base import Request  # noqa: E402
from smagent.transport.immediate import ImmediateTransport  # noqa: E402


class Echo(ImmediateTransport):
    """Answers every request with itself as a GetResp."""

    def _answer(self, raw, dlid):
        b = bytearray(raw)
        b[3] = 0x81
        return bytes(b)

    _answer_to = _answer  # type: ignore[assignment]


KINDS = {
    "DR SMP (bytes)": (lambda i: Request.dr(Method.GET, AttrID.PORT_INFO, (0, 1, 3), i % 8), lambda r: r.data),
    "LID SMP (fields)": (lambda i: Request(smp.lid_routed(Method.GET, AttrID.NODE_INFO), 5), lambda r: r.value()),
    "PerfMgt GMP": (lambda i: Request.gmp(perfmgt.port_counters_get(1 + i % 8, tid=smp.next_tid()), Address.gsi(5)),
                    lambda r: r.gmp(perfmgt.PortCounters)),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=30000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--window", type=int, default=32)
    a = ap.parse_args()
    t = Echo(window=a.window)
    for name, (make, read) in KINDS.items():
        best = 0.0
        for _ in range(a.runs):
            reqs = [make(i) for i in range(a.count)]
            t0 = time.process_time()
            for r in t.execute(reqs):
                read(r)
            best = max(best, a.count / (time.process_time() - t0))
        print(f"{name:18s} {best:10,.0f} MADs/s")


if __name__ == "__main__":
    main()
