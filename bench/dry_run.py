"""The dry runs of issue 28 on the in-process simulator: CPU seconds, peak memory and
output size per job, each run in its own process (`/usr/bin/time -v`), medians, and the
machine's load before and after (a loaded 2-core machine stretches wall time, not CPU).

    python bench/dry_run.py                      # every job, 3 runs each
    python bench/dry_run.py --job ft3-2000-json --runs 5

jobs (fabrics from smagent.model.topogen, written to a scratch directory):
    ft3-11664-text   sweep --dry-run --no-qos               fat_tree_3(36): 11,664 hosts, 1,620 switches
    ft3-11664-defaults  sweep --dry-run                     the text with defaults (QoS auto), as users run it
    ft3-11664-json   sweep --dry-run --json                 (defaults: QoS auto, every SL2VL pair written)
    ft3-11664-lmc2   sweep --dry-run --json --lmc 2             (switches' LinearFDBCap raised to 49,152:
                                                            ibsim's 30,720 cannot hold 48,276 LIDs)
    ft3-2000-json    sweep --dry-run --json                 fat_tree_3(20): 2,000 hosts, 500 switches
    ft3-2000-sweep   sweep (real, in the simulator): the reference the dry run should not exceed
The ibsim rows (SMPs, CPU and wall against OpenSM) are bench/sweep_vs_opensm.py's.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from smagent.model import netfile, topogen  # noqa: E402

JOBS = {  # name: (k of fat_tree_3, arguments, switch LinearFDBCap or None: the simulator's default)
    "ft3-11664-text": (36, ["sweep", "--dry-run", "--no-qos"], None),
    "ft3-11664-defaults": (36, ["sweep", "--dry-run"], None),
    "ft3-11664-json": (36, ["sweep", "--dry-run", "--json"], None),
    "ft3-11664-lmc2": (36, ["sweep", "--dry-run", "--json", "--lmc", "2"], 49152),
    "ft3-2000-json": (20, ["sweep", "--dry-run", "--json"], None),
    "ft3-2000-sweep": (20, ["sweep", "--json"], None),
}


def run_once(net: Path, args: list[str], scratch: Path) -> dict:
    """One job in a fresh process: user+sys CPU seconds, wall seconds, max RSS (MiB),
    output bytes."""
    out = scratch / "out"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "smagent", "--transport", "sim", "--topology", str(net), *args]
    if "--dry-run" not in args:  # a real sweep keeps its LIDs and journal: in the scratch directory
        cmd += ["--state-dir", str(scratch / "state")]
    with open(out, "wb") as f:
        p = subprocess.run(cmd, stdout=f, stderr=subprocess.PIPE, text=True, env=env, cwd=scratch)
    err = p.stderr

    def field(name: str) -> float:
        m = re.search(rf"{re.escape(name)}: ([0-9.:]+)", err)
        return float(m[1]) if m and ":" not in m[1] else 0.0
    m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([0-9:.]+)", err)
    wall = sum(float(x) * 60 ** i for i, x in enumerate(reversed(m[1].split(":")))) if m else 0.0
    res = {"rc": p.returncode, "cpu_s": field("User time (seconds)") + field("System time (seconds)"), "wall_s": wall,
           "max_rss_mib": field("Maximum resident set size (kbytes)") / 1024, "out_mb": out.stat().st_size / 1e6}
    if "--json" in args and p.returncode in (0, 1):
        doc = json.loads(out.read_text())
        res["plan_records"] = len(doc.get("plan", []))
    return res


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--job", action="append", choices=sorted(JOBS), help="default: every job")
    ap.add_argument("--runs", type=int, default=3)
    ns = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="smagent-bench-") as tmp:
        scratch = Path(tmp)
        for job in ns.job or list(JOBS):
            k, args, cap = JOBS[job]
            net = scratch / f"ft3_k{k}_{cap}.net"
            if not net.exists():
                fabric = topogen.fat_tree_3(k)
                for n in fabric:
                    if cap and n.is_switch:
                        n.caps["linear_fdb_cap"] = cap
                netfile.save(fabric, net)
            load0 = os.getloadavg()[0]
            runs = [run_once(net, args, scratch) for _ in range(ns.runs)]
            med = {key: statistics.median(r[key] for r in runs) for key in runs[0] if key != "rc"}
            print(f"{job}: smagent {' '.join(args)}: exit {sorted({r['rc'] for r in runs})}, "
                  f"CPU {med['cpu_s']:.1f} s, wall {med['wall_s']:.1f} s, peak {med['max_rss_mib']:.0f} MiB, output {med['out_mb']:.1f} MB"
                  + (f", {med['plan_records']:.0f} plan records" if "plan_records" in med else "")
                  + f" (median of {ns.runs}; load {load0:.1f} -> {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
