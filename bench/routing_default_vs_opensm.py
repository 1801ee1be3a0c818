#!/usr/bin/env python3
"""smagent's default routing (``auto``, no --routing) beside OpenSM 3.3.23's engines on
ibsim, on every fabric shape of bench/ and topogen: fat trees, damaged trees, a torus, a
mesh and a Dragonfly+. Per fabric and engine: the engine that routed, whether every pair
is routed, credit loops, and the hottest link (routes on the busiest directed
switch-to-switch link), all read back by `smagent verify --json` (the same witness for
everyone's tables; dfsssp's SLs from smagent's sweep or OpenSM's SA, see
bench/dfsssp_vs_opensm.py, whose runners this reuses).

    python bench/routing_default_vs_opensm.py
    python bench/routing_default_vs_opensm.py --fabrics torus-6x3 --engines smagent-auto,opensm-dfsssp

smagent runs ``smagent sweep`` with no --routing and no --allow-defects: a refused sweep
(credit loops) is a miss. OpenSM runs ``-R ENGINE`` (``opensm -o``; a daemon for dfsssp,
whose SLs only its SA hands out); "fell back" means its log shows another engine's
"tables configured" line (OpenSM silently routes with minhop when an engine fails), and
the row measures those tables. The last lines per fabric: the goal (every pair, no credit
loop, hottest link no worse than the best of OpenSM's engines) met or missed. Nothing is
asserted; results in bench/RESULTS.md.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import dfsssp_vs_opensm as side  # noqa: E402  (its OpenSM runner and LID reader)
from ibsim_harness import IbSim  # noqa: E402
from routing_inputs import damaged_ft2, damaged_ft3  # noqa: E402

from smagent.model import netfile, topogen  # noqa: E402

FABRICS = {
    "ft2-8": lambda: topogen.fat_tree_2(8),
    "ft3-4": lambda: topogen.fat_tree_3(4),
    "damaged-ft2": damaged_ft2,
    "damaged-ft3": damaged_ft3,
    "tree-switch-under-leaf": topogen.damaged_fat_tree_2,
    "torus-6x3": lambda: topogen.torus_2d(6, 3, 2),
    "mesh-5x5": lambda: topogen.mesh_2d(5, 5, 1),
    "dragonfly+-4x2x2": lambda: topogen.dragonfly_plus(4, 2, 2, 2),
}
ENGINES = ("smagent-auto", "opensm-minhop", "opensm-updn", "opensm-ftree", "opensm-dfsssp")


def smagent_default(sim: IbSim, scratch: Path) -> tuple[str, str, list[str]]:
    """``smagent sweep`` as it comes: (status, the engine auto chose, verify's extra args)."""
    state = Path(tempfile.mkdtemp(dir=scratch, prefix="state-"))
    r = side.smagent(sim, "sweep", "--json", "--state-dir", str(state))
    if r.returncode != 0:
        tail = (r.stderr.strip().splitlines() or ["?"])[-1][:120]
        return f"MISS: sweep exit {r.returncode}: {tail}", "-", []
    chosen = json.loads(r.stdout).get("routing") or {}
    sls = state / "path_sls"
    return "ok", chosen.get("engine", "?"), ["--path-sls", str(sls)] if sls.exists() else []


def measure(fabric_name: str, engine: str, scratch: Path) -> dict:
    fabric = FABRICS[fabric_name]()
    net = scratch / f"{fabric_name}.net"
    net.write_text(netfile.dumps(fabric))
    with IbSim(net, scratch / f"run-{fabric_name}-{engine}", extra_args=netfile.ibsim_size_args(fabric)) as sim:
        if engine == "smagent-auto":
            status, routed_by, extra = smagent_default(sim, scratch)
        else:
            status, _vls, extra = side.program(sim, engine, scratch)
            m = re.search(r"fell back \((\w+) tables", status)
            routed_by = m.group(1) if m else engine.split("-")[1]
        r = side.smagent(sim, "verify", "--json", "--no-mcast", *extra)
    row = {"fabric": fabric_name, "engine": engine, "routed_by": routed_by, "status": status,
           "pairs": "-", "loops": "-", "max": None}
    if r.returncode in (0, 1):
        doc = json.loads(r.stdout)
        unreachable = doc["summary"].get("pairs_unreachable") or doc["defects"].get("unreachable", {}).get("count", 0)
        row.update(pairs="all" if not unreachable else f"{unreachable} unreachable",
                   loops="yes" if doc["defects"].get("cdg_cycle") else "none", max=doc["balance"]["max"])
    return row


def verdict(rows: list[dict]) -> str:
    ours = next(r for r in rows if r["engine"] == "smagent-auto")
    theirs = [r for r in rows if r["engine"] != "smagent-auto" and r["max"] is not None]
    best = min((r["max"] for r in theirs), default=None)
    best_free = min((r["max"] for r in theirs if r["loops"] == "none" and r["pairs"] == "all"), default=None)
    ok = ours["status"] == "ok" and ours["pairs"] == "all" and ours["loops"] == "none"
    if best is None:
        return f"{ours['fabric']}: smagent auto ({ours['routed_by']}) hottest {ours['max']}; no OpenSM engine measured"
    hot = ours["max"] is not None and ours["max"] <= best
    return (f"{ours['fabric']}: {'met' if ok and hot else 'MISSED'}: smagent auto ({ours['routed_by']}) hottest "
            f"{ours['max']}, pairs {ours['pairs']}, credit loops {ours['loops']}; best OpenSM {best} "
            f"(deadlock-free with every pair: {best_free})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fabrics", default=",".join(FABRICS))
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--keep", help="scratch directory to keep (default: a temporary one)")
    a = ap.parse_args()
    verdicts = []
    with tempfile.TemporaryDirectory(prefix="routing-default-") as tmp:
        scratch = Path(a.keep or tmp)
        scratch.mkdir(parents=True, exist_ok=True)
        print("| fabric | engine | routed by | every pair | credit loops | hottest link | note |")
        print("|---|---|---|---|---|---|---|")
        for fab in a.fabrics.split(","):
            rows = []
            for eng in a.engines.split(","):
                m = measure(fab, eng, scratch)
                rows.append(m)
                print(f"| {fab} | {eng} | {m['routed_by']} | {m['pairs']} | {m['loops']} | "
                      f"{'-' if m['max'] is None else m['max']} | {m['status']} |", flush=True)
            if any(r["engine"] == "smagent-auto" for r in rows):
                verdicts.append(verdict(rows))
    print()
    for v in verdicts:
        print(v)


if __name__ == "__main__":
    main()
