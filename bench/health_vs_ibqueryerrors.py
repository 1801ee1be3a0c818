#!/usr/bin/env python3
"""`smagent health` vs `ibqueryerrors` on the same ibsim fabric: GMPs and wall time.

Both tools discover the fabric with SMPs, then read counters with PerfMgt GMPs. Packets
are counted for both by the same independent method (ibsim -v logs one
`sim_read_pkt: replying`/`forwarding` line per packet, docs/PITFALLS.md). ibsim's log
does not name the class (PerfMgt's PortCounters and SMP SwitchInfo share AttributeID
0x12), so each tool's discovery alone is counted too (`smagent discover`, and
`ibnetdiscover`, which walks the fabric with the same library ibqueryerrors does): the
GMPs are the difference. OpenSM (`opensm -o`) assigns the LIDs first. ibqueryerrors runs
with `--skip-sl` (no SA to ask for path SLs: nothing here runs one). Two states: a clean
fabric, then one with SymbolErrorCounter=50 on one switch port (ibsim's console).
-v slows ibsim, so counting and timing are separate runs; the tools take turns.

    python bench/health_vs_ibqueryerrors.py              # 648-host 2-level fat tree (k=36)
    python bench/health_vs_ibqueryerrors.py --fabric 2sw --runs 3
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
from ibsim_harness import IbSim  # noqa: E402
from sweep_vs_opensm import byte_compile, count_packets, make_fabric  # noqa: E402

from smagent.model import netfile  # noqa: E402

SMAGENT = [sys.executable, "-m", "smagent.cli", "--transport", "umad"]
TOOLS = {  # tool -> (the counter sweep, its discovery alone)
    "smagent": ([*SMAGENT, "health"], [*SMAGENT, "discover"]),
    "ibqueryerrors": (["ibqueryerrors", "--skip-sl"], ["ibnetdiscover"]),
}


def _run(sim: IbSim, cmd: list[str]) -> float:
    t0 = time.monotonic()
    r = subprocess.run(cmd, env=sim.env, cwd=sim.cwd, capture_output=True, text=True, timeout=900)
    dt = time.monotonic() - t0
    if r.returncode not in (0, 1):  # 1: ports over a threshold, for both tools
        raise SystemExit(f"{cmd[0]} failed ({r.returncode}): {r.stderr[-2000:]}")
    return dt


def _lids(sim: IbSim, scratch: Path) -> None:
    d = scratch / f"osm-{time.monotonic_ns()}"
    r = subprocess.run(["opensm", "-o", "-f", str(d / "osm.log")], env=sim.opensm_env(d), cwd=sim.cwd,
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise SystemExit(f"opensm failed: {r.stderr[-2000:]}")


def _inject(sim: IbSim, switch: str) -> None:
    sim.command(f'PerformanceSet "{switch}"[1] PortCounters.SymbolErrorCounter=50')


def count(net: Path, size: list[str], scratch: Path, switch: str, erring: bool) -> dict:
    out = {}
    for tool, (sweep, discover) in TOOLS.items():
        with IbSim(net, scratch / f"count-{tool}-{erring}", extra_args=[*size, "-v"], console=True) as sim:
            _lids(sim, scratch)
            if erring:
                _inject(sim, switch)
            n0 = count_packets(sim.log)
            _run(sim, discover)
            time.sleep(0.5)
            n1 = count_packets(sim.log)
            _run(sim, sweep)
            time.sleep(0.5)
            n2 = count_packets(sim.log)
        out[tool] = {"discovery": n1 - n0, "sweep": n2 - n1, "gmps": (n2 - n1) - (n1 - n0)}
    return out


def timing(net: Path, size: list[str], scratch: Path, switch: str, erring: bool, runs: int) -> dict:
    walls: dict[str, list[float]] = {t: [] for t in TOOLS}
    for i in range(runs):
        with IbSim(net, scratch / f"time-{i}-{erring}", extra_args=size, console=True) as sim:
            _lids(sim, scratch)
            if erring:
                _inject(sim, switch)
            for tool, (sweep, _) in TOOLS.items():  # the same fabric, back to back
                walls[tool].append(_run(sim, sweep))
    return {t: statistics.median(w) for t, w in walls.items()} | {"runs": walls}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fabric", default="ft2-648")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    fabric = make_fabric(a.fabric)
    byte_compile()
    switch = fabric.switches()[0].name
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        net = scratch / f"{a.fabric}.net"
        net.write_text(netfile.dumps(fabric))
        size = netfile.ibsim_size_args(fabric)
        print(f"fabric {a.fabric}: {len(fabric.cas())} hosts, {len(fabric.switches())} switches")
        for erring in (False, True):
            c = count(net, size, scratch, switch, erring)
            t = timing(net, size, scratch, switch, erring, a.runs)
            print(f"  {'one erring switch port' if erring else 'clean fabric'}:")
            for tool in TOOLS:
                print(f"    {tool:14s} GMPs {c[tool]['gmps']:6d} (packets {c[tool]['sweep']:6d}, its discovery "
                      f"alone {c[tool]['discovery']:6d})   wall {t[tool]:.2f} s (median of {a.runs}: "
                      f"{', '.join(f'{x:.2f}' for x in t['runs'][tool])})")


if __name__ == "__main__":
    main()
