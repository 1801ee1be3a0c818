#!/usr/bin/env python3
"""smagent sweep vs `opensm -o` on the same ibsim fabric: SMPs and wall time.

SMPs are counted by the same independent method for both tools: ibsim -v logs one
`sim_read_pkt: replying`/`forwarding` line per packet it handles (docs/PITFALLS.md). -v slows
ibsim, so counting and timing are separate runs. Wall time is the median of --runs; the
two tools take turns run by run, so the ratio holds on a machine whose load changes.
CPU time (user + system of the tool's process) is reported too: it is steadier than wall
time on a shared machine, where stolen vCPU time stretches the wall time of a tool that
waits on ibsim (OpenSM keeps 4 SMPs in flight) more than that of one that computes. The
wall ratio of each pair of back-to-back runs is printed too: on this project's 2-vCPU
machine it has ranged from 0.6 to 2.3 on the 648-host tree for the same code.

smagent runs as an installed package would: its modules are byte-compiled first
(compileall, what pip does on install; the __pycache__ directories are git-ignored).
Without that, under PYTHONDONTWRITEBYTECODE=1 every run would compile every module from
source, a cost no installed smagent pays.

    python bench/sweep_vs_opensm.py                    # 648-host 2-level fat tree (k=36)
    python bench/sweep_vs_opensm.py --fabric ft3-1000  # 3-level fat tree, ~1000 hosts
    python bench/sweep_vs_opensm.py --fabric ft3-1024  # the full 3-level tree of 16-port switches
    python bench/sweep_vs_opensm.py --fabric ft3-11664 --runs 1   # the full k=36 3-level tree (minutes)
    python bench/sweep_vs_opensm.py --fabric ft3-39366 --runs 1   # k=54: 43,011 LIDs, ibsim -L 49152
    python bench/sweep_vs_opensm.py --fabric ft3-1623  # 2,146 LIDs (any ft3-HOSTS works)
    python bench/sweep_vs_opensm.py --smagent-args=--no-qos           # links without SL2VL/VLArb
    python bench/sweep_vs_opensm.py --opensm-args=-Q                  # OpenSM with QoS (SL2VL/VLArb)
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
from ibsim_harness import IbSim  # noqa: E402

from smagent.model import netfile, topogen  # noqa: E402

FABRICS = {
    "ft2-648": lambda: topogen.fat_tree_2(36),
    "ft3-1000": lambda: topogen.fat_tree_3(36, hosts=1000),
    "ft3-1024": lambda: topogen.fat_tree_3(16),  # the full k=16 3-level tree: 1,024 hosts, 320 switches
    "ft3-11664": lambda: topogen.fat_tree_3(36),  # 11,664 hosts, 1,620 switches
    "ft3-39366": lambda: topogen.fat_tree_3(54),  # the largest: 39,366 hosts, 3,645 switches, 43,011 LIDs
    "2sw": topogen.two_switch,
}


def count_packets(log: Path) -> int:
    n = 0
    with open(log, errors="replace") as f:
        for line in f:
            if "sim_read_pkt: replying" in line or "sim_read_pkt: forwarding" in line:
                n += 1
    return n


def run_tool(sim: IbSim, tool: str, scratch: Path, extra=()) -> tuple[float, float, float]:
    """One run: (wall seconds, CPU seconds of the tool's process (user + system), its peak
    RSS in MiB). CPU and peak RSS are the kernel's figures for that one process (wait4)."""
    if tool == "smagent":
        cmd = [sys.executable, "-m", "smagent.cli", "--transport", "umad", "sweep", *extra]
        env = sim.env
    else:
        d = scratch / f"osm-{time.monotonic_ns()}"
        env = sim.opensm_env(d)
        cmd = ["opensm", "-o", "-f", str(d / "osm.log"), "-R", "minhop", *extra]
    err = scratch / f"{tool}-{time.monotonic_ns()}.err"
    t0 = time.monotonic()
    with open(err, "wb") as f:
        p = subprocess.Popen(cmd, env=env, cwd=sim.cwd, stdout=subprocess.DEVNULL, stderr=f)
    _pid, status, ru = os.wait4(p.pid, 0)
    dt = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{tool} failed ({p.returncode}): {err.read_text(errors='replace')[-2000:]}")
    return dt, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024


def make_fabric(name: str):
    if name in FABRICS:
        return FABRICS[name]()
    if name.startswith("ft3-") and name[4:].isdigit():
        return topogen.fat_tree_3(36, hosts=int(name[4:]))
    raise SystemExit(f"unknown fabric {name!r}: one of {', '.join(sorted(FABRICS))} or ft3-HOSTS")


def byte_compile() -> None:
    """Compile the checkout's packages as an install would (see the module doc)."""
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "smagent"), str(root / "mad")],
                   check=True, stdout=subprocess.DEVNULL)


def measure(fabric_name: str, runs: int, extra: dict | None = None) -> dict:
    extra = extra or {}
    fabric = make_fabric(fabric_name)
    byte_compile()
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        net = tmp / f"{fabric_name}.net"
        net.write_text(netfile.dumps(fabric))
        size = netfile.ibsim_size_args(fabric)
        tools = ("smagent", "opensm")
        for tool in tools:
            with IbSim(net, tmp / f"count-{tool}", extra_args=[*size, "-v"], ready_timeout=600) as sim:
                before = count_packets(sim.log)
                run_tool(sim, tool, tmp, extra.get(tool, ()))
                time.sleep(0.5)
                smps = count_packets(sim.log) - before
            out[tool] = {"smps": smps, "runs": [], "cpu": [], "rss_mib": []}
        # the tools take turns, so a change in the machine's load hits both alike
        for i in range(runs):
            for tool in tools:
                with IbSim(net, tmp / f"time-{tool}-{i}", extra_args=size, ready_timeout=600) as sim:
                    wall, cpu, rss = run_tool(sim, tool, tmp, extra.get(tool, ()))
                    out[tool]["runs"].append(wall)
                    out[tool]["cpu"].append(cpu)
                    out[tool]["rss_mib"].append(rss)
        for tool in tools:
            out[tool]["median_s"] = statistics.median(out[tool]["runs"])
            out[tool]["median_cpu_s"] = statistics.median(out[tool]["cpu"])
            out[tool]["peak_rss_mib"] = max(out[tool]["rss_mib"])
    out["fabric"] = fabric_name
    out["hosts"] = len(fabric.cas())
    out["switches"] = len(fabric.switches())
    out["smp_ratio"] = out["smagent"]["smps"] / out["opensm"]["smps"]
    out["time_ratio"] = out["smagent"]["median_s"] / out["opensm"]["median_s"]
    out["cpu_ratio"] = out["smagent"]["median_cpu_s"] / out["opensm"]["median_cpu_s"]
    # run i of both tools ran back to back: their ratio sees the same load
    out["pair_ratios"] = [a / b for a, b in zip(out["smagent"]["runs"], out["opensm"]["runs"])]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fabric", default="ft2-648", help=f"{', '.join(sorted(FABRICS))} or ft3-HOSTS")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--smagent-args", default="", help="extra arguments for `smagent sweep` (space-separated)")
    ap.add_argument("--opensm-args", default="", help="extra arguments for `opensm -o` (space-separated)")
    a = ap.parse_args()
    load0 = os.getloadavg()
    r = measure(a.fabric, a.runs, {"smagent": a.smagent_args.split(), "opensm": a.opensm_args.split()})
    print(f"fabric {r['fabric']}: {r['hosts']} hosts, {r['switches']} switches; machine load (1/5/15 min) "
          f"{', '.join(f'{x:.2f}' for x in load0)} before, {', '.join(f'{x:.2f}' for x in os.getloadavg())} after "
          f"(SMPs and CPU seconds are fair under load; wall time is not)")
    for tool in ("smagent", "opensm"):
        print(f"  {tool:8s} SMPs {r[tool]['smps']:7d}   wall {r[tool]['median_s']:.3f} s   "
              f"CPU {r[tool]['median_cpu_s']:.3f} s   peak RSS {r[tool]['peak_rss_mib']:.0f} MiB (medians of {len(r[tool]['runs'])}; walls "
              f"{', '.join(f'{x:.2f}' for x in r[tool]['runs'])})")
    print(f"  ratio smagent/opensm: SMPs {r['smp_ratio']:.3f}, wall time {r['time_ratio']:.3f}, "
          f"CPU time {r['cpu_ratio']:.3f}")
    pairs = r["pair_ratios"]
    print(f"  wall ratio run by run: {', '.join(f'{x:.2f}' for x in pairs)} (median {statistics.median(pairs):.3f}; "
          f"the spread is the machine's load)")


if __name__ == "__main__":
    main()
