#!/usr/bin/env python3
"""smagent sweep (default settings) vs `opensm -o` on a lossy ibsim fabric (issue 14).

ibsim drops RATE % of the packets entering every port of every switch (console
``Error "switch" RATE``). Each tool runs once per rate on a fresh ibsim; then the drops
are cleared and infiniband-diags (tests/support/fabric_witness.py: iblinkinfo, ibroute and a
walk of every LID pair through the tables) say what the tool left: cabled ports without
a LID, ports not Active, pairs of LIDs a packet cannot cross. SMPs are counted by ibsim
-v (one `sim_read_pkt: replying`/`forwarding` line per packet handled, docs/PITFALLS.md), in
the same run (-v slows ibsim a little; wall times here are of that run).

    python bench/lossy_vs_opensm.py                       # fat_tree_2(8): 12 switches, 32 hosts
    python bench/lossy_vs_opensm.py --rates 10 30 --k 8
    python bench/lossy_vs_opensm.py --levels 3 --k 8      # fat_tree_3(8): 80 switches, 128 hosts
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
from fabric_witness import witness  # noqa: E402
from ibsim_harness import IbSim  # noqa: E402

from smagent.model import netfile, topogen  # noqa: E402
from sweep_vs_opensm import count_packets  # noqa: E402


def run_tool(sim: IbSim, tool: str, scratch: Path) -> dict:
    if tool == "smagent":
        cmd = [sys.executable, "-m", "smagent.cli", "--transport", "umad", "sweep", "--json"]
        env = sim.env
    else:
        d = scratch / f"osm-{time.monotonic_ns()}"
        env = sim.opensm_env(d)
        cmd = ["opensm", "-o", "-f", str(d / "osm.log")]
    t0 = time.monotonic()
    r = subprocess.run(cmd, env=env, cwd=sim.cwd, capture_output=True, text=True, timeout=900)
    out = {"exit": r.returncode, "seconds": time.monotonic() - t0}
    if tool == "smagent":
        try:
            s = json.loads(r.stdout)
            out.update(passes=s["passes"], discovery_passes=s["discovery_passes"], retries=s["retries"],
                       losses=s["losses"], loss_estimate=s["loss_estimate"], problems=len(s["problems"]))
        except (ValueError, KeyError):
            out["stderr"] = r.stderr[-500:]
    return out


def make_fabric(levels: int, k: int):
    return topogen.fat_tree_2(k) if levels == 2 else topogen.fat_tree_3(k)


def measure(levels: int, k: int, rate: int, tool: str, tmp: Path) -> dict:
    fabric = make_fabric(levels, k)
    net = tmp / f"ft{levels}-{k}.net"
    net.write_text(netfile.dumps(fabric))
    with IbSim(net, tmp / f"{tool}-{rate}", extra_args=[*netfile.ibsim_size_args(fabric), "-v"],
               console=True) as sim:
        for n in fabric.switches():
            sim.error(n.name, rate)
        before = count_packets(sim.log)
        res = run_tool(sim, tool, tmp)
        time.sleep(0.3)
        res["smps"] = count_packets(sim.log) - before
        for n in fabric.switches():
            sim.error(n.name, 0)
        res.update(witness(sim).summary())
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, default=8, help="switch ports of the fat tree (k/2 hosts per leaf)")
    ap.add_argument("--levels", type=int, choices=(2, 3), default=2, help="levels of the fat tree")
    ap.add_argument("--rates", type=int, nargs="+", default=[10, 30], help="percent lost at every switch port")
    a = ap.parse_args()
    fabric = make_fabric(a.levels, a.k)
    print(f"fabric fat_tree_{a.levels}({a.k}): {len(fabric.switches())} switches, {len(fabric.cas())} hosts; "
          f"loss at every port of every switch")
    print("| loss | tool | exit | SMPs | passes (sweep/discovery) | retries | wall s | ports no LID | "
          "ports not Active | unreachable LID pairs |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for rate in a.rates:
            for tool in ("smagent", "opensm"):
                r = measure(a.levels, a.k, rate, tool, Path(tmp))
                passes = f"{r['passes']}/{r['discovery_passes']}" if "passes" in r else "-"
                print(f"| {rate} % | {tool} | {r['exit']} | {r['smps']} | {passes} | {r.get('retries', '-')} | "
                      f"{r['seconds']:.2f} | {r['no_lid']} | {r['not_active']} | {r['unreachable_pairs']} |",
                      flush=True)


if __name__ == "__main__":
    main()
