#!/usr/bin/env python3
"""Route quality on ibsim: smagent minhop / ftree vs OpenSM minhop / ftree, each read
back with `smagent verify --json` (the same witness for everyone's tables): maximum and
mean routes per directed switch-to-switch link, the ideal, and whether verify is clean
(no unreachable pair, no credit loop).

    python bench/ftree_vs_opensm.py                       # all three fabrics
    python bench/ftree_vs_opensm.py --fabrics ft2-damaged --engines smagent-ftree,opensm-ftree

Fabrics: ft2-648 (fat_tree_2(36)), ft3-1024 (fat_tree_3(16, hosts=1024)), ft2-damaged
(fat_tree_2(36) without 24 leaf-spine links and with 12 dual-port hosts cabled to two
leaves). OpenSM runs `opensm -o -R ENGINE` with OSM_CACHE_DIR/OSM_TMP_DIR in a scratch
dir; OpenSM silently falls back to minhop when an engine fails, so its log is checked
for the line saying which engine configured the switches.

Measured here (routes per directed switch-to-switch link; "verify" is what `smagent
verify` found in the tables):

| fabric | engine | max | mean | ideal | verify | note |
|---|---|---|---|---|---|---|
| ft2-648 | smagent minhop | 630 | 630.0 | 630.0 | clean | |
| ft2-648 | smagent ftree | 630 | 630.0 | 630.0 | clean | |
| ft2-648 | OpenSM minhop | 630 | 630.0 | 630.0 | clean | |
| ft2-648 | OpenSM ftree | 630 | 630.0 | 630.0 | 306 unreachable | spine-to-spine switch LIDs unrouted |
| ft3-1024 | smagent minhop | 7680 | 988.0 | 1016.0 | clean | aggregation-core links 7680 |
| ft3-1024 | smagent ftree | 1016 | 988.0 | 1016.0 | clean | |
| ft3-1024 | OpenSM minhop | 7680 | 988.0 | 1016.0 | clean | |
| ft3-1024 | OpenSM ftree | 1016 | 988.0 | 1016.0 | 32,704 unreachable | switch LIDs unrouted |
| ft2-damaged | smagent minhop | 1998 | 654.23 | 654.23 | clean | |
| ft2-damaged | smagent ftree | 756 | 654.23 | 654.23 | clean | up 720, down 756 |
| ft2-damaged | OpenSM minhop | 1998 | 654.23 | 654.23 | clean | |
| ft2-damaged | OpenSM ftree | 1998 | 654.23 | 654.23 | clean | fell back to minhop: "not a fat-tree" |
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ibsim_harness import IbSim  # noqa: E402

from smagent.model import netfile, topogen  # noqa: E402


def damaged_ft2(k: int = 36, missing: int = 24, duals: int = 12, seed: int = 15):
    """fat_tree_2(k) without ``missing`` leaf-spine links (at most one per leaf) and with
    ``duals`` dual-port hosts, each replacing the last host of two neighbouring leaves."""
    f = topogen.fat_tree_2(k)
    half = k // 2
    rnd = random.Random(seed)
    leaves = rnd.sample(range(k), missing)
    drop_links = [((f"L{leaf}", half + 1 + (s := rnd.randrange(half))), (f"S{s}", leaf + 1)) for leaf in leaves]
    drop_nodes, dual = set(), []
    for d in range(duals):
        a, b = 2 * d, 2 * d + 1
        drop_nodes |= {f"H{a * half + half - 1}", f"H{b * half + half - 1}"}
        dual.append((f"D{d}", (f"L{a}", half), (f"L{b}", half)))
    return topogen.variant(f, drop_nodes, drop_links, dual)


FABRICS = {
    "ft2-648": lambda: topogen.fat_tree_2(36),
    "ft3-1024": lambda: topogen.fat_tree_3(16, hosts=1024),
    "ft2-damaged": damaged_ft2,
}
ENGINES = ("smagent-minhop", "smagent-ftree", "opensm-minhop", "opensm-ftree")


def program(sim: IbSim, engine: str, scratch: Path) -> str:
    tool, algo = engine.split("-")
    if tool == "smagent":
        cmd, env = [sys.executable, "-m", "smagent.cli", "--transport", "umad", "sweep", "--routing", algo], sim.env
    else:
        d = Path(tempfile.mkdtemp(dir=scratch, prefix="osm-"))
        env = dict(sim.env, OSM_CACHE_DIR=str(d), OSM_TMP_DIR=str(d))
        log = d / "osm.log"
        cmd = ["opensm", "-o", "-f", str(log), "-R", algo]
    r = subprocess.run(cmd, env=env, cwd=sim.cwd, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise SystemExit(f"{engine} failed ({r.returncode}): {r.stdout[-1000:]}{r.stderr[-2000:]}")
    if tool == "opensm":
        text = log.read_text(errors="replace")
        if f"{algo} tables configured on all switches" not in text:
            used = [ln for ln in text.splitlines() if "tables configured on all switches" in ln]
            return f"fell back ({used[-1].split(': ', 1)[-1] if used else 'no engine line'})"
    return "ok"


def measure(fabric_name: str, engine: str, scratch: Path) -> dict:
    fabric = FABRICS[fabric_name]()
    net = scratch / f"{fabric_name}.net"
    net.write_text(netfile.dumps(fabric))
    with IbSim(net, scratch / f"run-{fabric_name}-{engine}", extra_args=netfile.ibsim_size_args(fabric)) as sim:
        status = program(sim, engine, scratch)
        r = subprocess.run([sys.executable, "-m", "smagent.cli", "--transport", "umad", "verify", "--json",
                            "--no-mcast"], env=sim.env, cwd=sim.cwd, capture_output=True, text=True, timeout=1800)
        if r.returncode not in (0, 1):
            raise SystemExit(f"verify after {engine} failed ({r.returncode}): {r.stderr[-2000:]}")
        doc = json.loads(r.stdout)
    b = doc["balance"]
    (scratch / f"verify-{fabric_name}-{engine}.json").write_text(r.stdout)
    return {"fabric": fabric_name, "engine": engine, "status": status, "max": b["max"], "mean": b["mean"],
            "ideal": b["ideal"], "verify": "clean" if doc["ok"] else ",".join(sorted(doc["defects"])),
            "levels": {lv["name"]: lv["max"] for lv in b["levels"]}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fabrics", default=",".join(FABRICS))
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--keep", help="directory for the verify JSON files (default: a temporary one)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ftree-bench-") as tmp:
        scratch = Path(a.keep or tmp)
        scratch.mkdir(parents=True, exist_ok=True)
        print("| fabric | engine | max | mean | ideal | per level max | verify | note |")
        print("|---|---|---|---|---|---|---|---|")
        for fab in a.fabrics.split(","):
            for eng in a.engines.split(","):
                m = measure(fab, eng, scratch)
                lv = ", ".join(f"{k} {v}" for k, v in m["levels"].items())
                print(f"| {fab} | {eng} | {m['max']} | {m['mean']} | {m['ideal']} | {lv} | {m['verify']} | "
                      f"{m['status']} |", flush=True)


if __name__ == "__main__":
    main()
