"""How the bring-up grows with the fabric, in the in-process simulator (issue 42): a dry run
and a real sweep of 3-level fat trees from 1,024 to 39,366 hosts (the largest a subnet's
49,151 unicast LIDs hold with 54-port switches), each in a fresh process: wall and CPU time,
SMPs, peak RSS, and the growth factor against the fabric's growth. The simulator's switches
are given LinearFDBCap 49,152 (what a current switch has; ibsim's default, 30,720, holds no
more than 30,720 LIDs).

    python bench/scale.py                     # k = 16, 36, 54: 1,024, 11,664, 39,366 hosts
    python bench/scale.py --k 16 36 --real    # also a real sweep (every Set into the simulator)
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from smagent.model import topogen
from smagent import sweep as sweepmod
from smagent.transport.sim import SimTransport
k, real = int(sys.argv[2]), sys.argv[3] == "1"
fabric = topogen.fat_tree_3(k)
t0, c0 = time.monotonic(), time.process_time()
t = SimTransport(fabric, linear_fdb_cap=49152)
built = time.monotonic() - t0
r = sweepmod.sweep(t, sweepmod.SweepOptions(dry_run=not real))
print(json.dumps({"k": k, "hosts": len(fabric.cas()), "switches": len(fabric.switches()), "real": real,
                  "sim_build_s": round(built, 1), "wall_s": round(time.monotonic() - t0, 1),
                  "cpu_s": round(time.process_time() - c0, 1), "smps": t.stats.sent, "sets": r.sets_planned,
                  "problems": len(r.problems),
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}))
"""


def run(k: int, real: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), str(k), "1" if real else "0"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, nargs="+", default=[16, 36, 54])
    ap.add_argument("--real", action="store_true", help="also sweep for real (Sets into the simulator)")
    ns = ap.parse_args(argv)
    rows = [run(k, real) for k in ns.k for real in ([False, True] if ns.real else [False])]
    first = rows[0]
    print(f"{'hosts':>7} {'switches':>8} {'run':>5} {'wall s':>7} {'CPU s':>7} {'sim s':>6} {'SMPs':>9} "
          f"{'RSS MiB':>8} {'CPU/host vs first':>18}")
    for r in rows:
        growth = (r["cpu_s"] / r["hosts"]) / (first["cpu_s"] / first["hosts"])
        print(f"{r['hosts']:>7,} {r['switches']:>8,} {'real' if r['real'] else 'dry':>5} {r['wall_s']:>7} "
              f"{r['cpu_s']:>7} {r['sim_build_s']:>6} {r['smps']:>9,} {r['rss_mib']:>8,} {growth:>18.2f}")


if __name__ == "__main__":
    main()
