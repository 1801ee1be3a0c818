#!/usr/bin/env python3
"""SL2VL Sets saved by SwitchInfo.OptimizedSLtoVLMappingProgramming (issue 28): one fresh
sweep with smagent's defaults (QoS "auto": the simulator's switches start with the IBA
reset identity tables, which cannot carry SL15, so every table is written) of the same
fabric in the in-process simulator, its switches without the capability (ibsim's, the
simulator's default: one Set per (input, output) pair) and with it (one Set per output
port for all input ports). ibsim's switches do not advertise it (docs/PITFALLS.md), so
this is measured in the simulator.

    python bench/sl2vl_optimized.py                  # 1,024-host 3-level tree (fat_tree_3(16))
    python bench/sl2vl_optimized.py --fabric ft2-648
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from smagent import sweep as sweepmod  # noqa: E402
from smagent.model import topogen
from smagent.sim import SimFabric  # noqa: E402
from smagent.transport.sim import SimTransport  # noqa: E402

FABRICS = {"ft3-1024": lambda: topogen.fat_tree_3(16), "ft2-648": lambda: topogen.fat_tree_2(36)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fabric", default="ft3-1024", choices=sorted(FABRICS))
    a = ap.parse_args()
    fabric = FABRICS[a.fabric]()
    print(f"{a.fabric}: {len(fabric.cas())} hosts, {len(fabric.switches())} switches; sweep with defaults")
    for optimized in (0, 1):
        t = SimTransport(SimFabric.from_fabric(fabric, optimized_sl2vl_mapping=optimized))
        t0 = time.process_time()
        r = sweepmod.sweep(t, sweepmod.SweepOptions())
        cpu = time.process_time() - t0
        k = t.stats.by_kind
        pairs = sum(1 for c in r.link_changes for _p in c.pairs() if c.kind == "sl2vl")
        print(f"  OptimizedSLtoVLMappingProgramming {optimized}: SL2VL Sets {k['SubnSet(SLtoVLMappingTable)']:7,d} "
              f"(pairs written {pairs:,d}), SMPs in all {t.stats.sent:7,d}, problems {len(r.problems)}, "
              f"CPU {cpu:.1f} s")


if __name__ == "__main__":
    main()
