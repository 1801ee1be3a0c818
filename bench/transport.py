#!/usr/bin/env python3
"""Round trips per second through smagent's transports, encoding and decoding included.

    python bench/transport.py                 # umad on ibsim (2-switch fabric), windows 1..32
    python bench/transport.py --pin 0         # everything on one CPU (less scheduler noise)

The umad figures run in a child process under ibsim's LD_PRELOAD (umad2sim). Each figure
is the median of --runs runs of --count NodeInfo DR Gets to hop 1.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))

CHILD = r"""
import json, statistics, sys, time
from mad import smp
from mad.attributes import AttrID
from mad.header import Method
from smagent.transport import open_transport
from smagent.transport.base import Request
windows, count, runs = json.loads(sys.argv[1])
t = open_transport("umad")
out = {}
for w in windows:
    t.window = w
    rates = []
    for _ in range(runs):
        reqs = [Request(smp.dr(Method.GET, AttrID.NODE_INFO, (0, 1))) for _ in range(count)]
        t0 = time.perf_counter()
        replies = t.execute(reqs)
        for r in replies:
            r.value()  # decode the attribute too
        rates.append(count / (time.perf_counter() - t0))
        assert all(r.ok for r in replies)
    out[w] = statistics.median(rates)
t.close()
print(json.dumps(out))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--windows", default="1,2,4,8,16,32")
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--pin", default=None, help="CPU list for taskset (e.g. 0 or 0,1)")
    a = ap.parse_args()
    from ibsim_harness import IbSim
    from smagent.model import topogen, netfile
    windows = [int(w) for w in a.windows.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        net = Path(tmp) / "2sw.net"
        net.write_text(netfile.dumps(topogen.two_switch()))
        pre = ["taskset", "-c", a.pin] if a.pin else []
        with IbSim(net, Path(tmp) / "run") as sim:
            if a.pin:
                subprocess.run(["taskset", "-pc", a.pin, str(sim.proc.pid)], capture_output=True)
            r = subprocess.run([*pre, sys.executable, "-c", CHILD, json.dumps([windows, a.count, a.runs])],
                               env=sim.env, cwd=sim.cwd, capture_output=True, text=True, timeout=900)
            if r.returncode:
                raise SystemExit(r.stderr[-2000:])
            res = json.loads(r.stdout)
    print(f"umad transport on ibsim, NodeInfo DR Get 1 hop, {a.count} per run, median of {a.runs}"
          + (f", pinned to CPUs {a.pin}" if a.pin else ""))
    for w in windows:
        print(f"  window {w:3d}: {res[str(w)]:9.0f} round trips/s")


if __name__ == "__main__":
    main()
