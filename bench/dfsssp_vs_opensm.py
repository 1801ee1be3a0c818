#!/usr/bin/env python3
"""Deadlock-free routing on ibsim: smagent minhop / updn / dfsssp against OpenSM minhop /
updn / dfsssp / lash on tori, meshes and trees. Per fabric and engine: the VLs the routing
uses, credit loops, and the maximum and mean routes per directed switch-to-switch link,
read back with `smagent verify --json` (the same witness for everyone's tables).

    python bench/dfsssp_vs_opensm.py
    python bench/dfsssp_vs_opensm.py --fabrics torus-5x3 --engines smagent-dfsssp,opensm-dfsssp

VLs: smagent's from its sweep's note (layers needed to break every loop, and the VLs the
paths are spread over), OpenSM's from its log ("Virtual Lanes needed" and the lanes
holding paths after its balancing; lash's "Lanes needed"); minhop and updn put every path
on one VL. Credit loops are what `verify` finds per VL with each engine's SLs: smagent
dfsssp's from its sweep (`verify --path-sls`); OpenSM dfsssp's and lash's from its SA
(OpenSM runs as a daemon for them, `saquery -p` from one CA port a switch to every LID,
into a path SL file), the others `opensm -o -R ENGINE`. OpenSM's log is checked for the
engine's "tables configured on all switches" line (it falls back to minhop silently).
Nothing is asserted. Measured here:

| fabric | engine | VLs | credit loops | max link load | mean link load | note |
|---|---|---|---|---|---|---|
| torus-5x3 | smagent-minhop | 1 | yes | 50 | 28.0 | ok (written with defects) |
| torus-5x3 | smagent-updn | 1 | none | 64 | 29.2 | ok |
| torus-5x3 | smagent-dfsssp | 2 needed, 8 used | none | 36 | 28.0 | ok |
| torus-5x3 | opensm-minhop | 1 | yes | 50 | 28.0 | ok; sl_unmapped |
| torus-5x3 | opensm-updn | 1 | yes | 50 | 28.0 | fell back (minhop tables configured on all switches); sl_unmapped |
| torus-5x3 | opensm-dfsssp | 3 needed, 8 used | none | 44 | 28.0 | ok (its SLs from its SA); sl_unmapped |
| torus-5x3 | opensm-lash | 2 needed | none | 36 | 28.0 | ok (its SLs from its SA); sl_unmapped |
| torus-6x6 | smagent-minhop | 1 | yes | 184 | 108.0 | ok (written with defects) |
| torus-6x6 | smagent-updn | 1 | none | 422 | 116.0 | ok |
| torus-6x6 | smagent-dfsssp | 3 needed, 8 used | none | 120 | 108.0 | ok |
| torus-6x6 | opensm-minhop | 1 | yes | 184 | 108.0 | ok; sl_unmapped |
| torus-6x6 | opensm-updn | 1 | yes | 184 | 108.0 | fell back (minhop tables configured on all switches); sl_unmapped |
| torus-6x6 | opensm-dfsssp | 7 needed, 8 used | none | 154 | 108.0 | ok (its SLs from its SA); sl_unmapped |
| torus-6x6 | opensm-lash | 5 needed | none | 144 | 108.0 | ok (its SLs from its SA); sl_unmapped |
| mesh-4x3 | smagent-minhop | 1 | yes | 58 | 36.24 | ok (written with defects) |
| mesh-4x3 | smagent-updn | 1 | none | 88 | 36.24 | ok |
| mesh-4x3 | smagent-dfsssp | 1 needed, 8 used | none | 48 | 36.24 | ok |
| mesh-4x3 | opensm-minhop | 1 | yes | 58 | 36.24 | ok; sl_unmapped |
| mesh-4x3 | opensm-updn | 1 | yes | 58 | 36.24 | fell back (minhop tables configured on all switches); sl_unmapped |
| mesh-4x3 | opensm-dfsssp | 2 needed, 8 used | none | 58 | 36.24 | ok (its SLs from its SA); sl_unmapped |
| mesh-4x3 | opensm-lash | 1 needed | none | 48 | 36.24 | ok (its SLs from its SA); sl_unmapped |
| ft3-4 | smagent-minhop | 1 | none | 24 | 13.0 | ok |
| ft3-4 | smagent-updn | 1 | none | 24 | 13.0 | ok |
| ft3-4 | smagent-dfsssp | 1 needed, 8 used | none | 14 | 13.0 | ok |
| ft3-4 | opensm-minhop | 1 | none | 24 | 13.0 | ok; sl_unmapped |
| ft3-4 | opensm-updn | 1 | none | 24 | 13.0 | ok; dead_end, sl_unmapped, unreachable |
| ft3-4 | opensm-dfsssp | 1 needed, 8 used | none | 20 | 13.0 | ok (its SLs from its SA); sl_unmapped |
| ft3-4 | opensm-lash | 3 needed | none | 48 | 13.0 | ok (its SLs from its SA); sl_unmapped |
| tree-damaged | smagent-minhop | 1 | none | 62 | 31.69 | ok |
| tree-damaged | smagent-updn | 1 | none | 62 | 31.69 | ok |
| tree-damaged | smagent-dfsssp | 1 needed, 8 used | none | 62 | 31.69 | ok |
| tree-damaged | opensm-minhop | 1 | none | 62 | 31.69 | ok; sl_unmapped |
| tree-damaged | opensm-updn | 1 | none | 62 | 31.69 | fell back (minhop tables configured on all switches); sl_unmapped |
| tree-damaged | opensm-dfsssp | 1 needed, 8 used | none | 62 | 31.69 | ok (its SLs from its SA); sl_unmapped |
| tree-damaged | opensm-lash | 1 needed | none | 120 | 31.69 | ok (its SLs from its SA); sl_unmapped |
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ibsim_harness import IbSim  # noqa: E402

from smagent.model import netfile, topogen  # noqa: E402



FABRICS = {
    "torus-5x3": lambda: topogen.torus_2d(5, 3, 2),
    "torus-6x6": lambda: topogen.torus_2d(6, 6, 2),
    "mesh-4x3": lambda: topogen.mesh_2d(4, 3, 2),
    "ft3-4": lambda: topogen.fat_tree_3(4),
    "tree-damaged": topogen.damaged_fat_tree_2,
}
ENGINES = ("smagent-minhop", "smagent-updn", "smagent-dfsssp", "opensm-minhop", "opensm-updn", "opensm-dfsssp",
           "opensm-lash")
LAYERED = ("dfsssp", "lash")  # OpenSM engines whose SLs only its SA hands out
SAQUERY_SL = re.compile(r"^\s*sl\.+0x([0-9a-f]+)", re.M)


def fabric_lids(sim: IbSim) -> tuple[dict, dict, set]:
    """From ibnetdiscover: switch name -> (GUID, LID), one CA port LID per switch name (a
    port hanging off it), and every CA port LID."""
    switches: dict = {}
    ca_on: dict = {}
    ca_lids: set = set()
    kind = None
    for line in sim.run(["ibnetdiscover"]).stdout.splitlines():
        m = re.match(r'^(Switch|Ca|Hca)\s+\d+\s+"[SH]-([0-9a-f]+)"\s+#\s+"([^"]+)"', line)
        if m:
            kind = m.group(1)
            if kind == "Switch":
                lid = re.search(r"\blid (\d+)", line)
                switches[m.group(3)] = (int(m.group(2), 16), int(lid.group(1)) if lid else 0)
            continue
        m = re.match(r'^\[\d+\]\(\w+\)\s+"S-\w+"\[\d+\]\s.*#\s+lid (\d+) lmc \d+\s+"([^"]+)"', line)
        if m and kind != "Switch":
            ca_on.setdefault(m.group(2), int(m.group(1)))
            ca_lids.add(int(m.group(1)))
    return switches, ca_on, ca_lids


def opensm_sls(sim: IbSim, log: Path, algo: str, osm: subprocess.Popen, scratch: Path) -> Path:
    """The SL of every path as OpenSM's SA gives it (`saquery -p` from one CA port a switch
    to every LID), once its engine routed: a path SL file (`smagent.planning.pathsl`)."""
    from smagent.planning import pathsl
    deadline = time.monotonic() + 600
    while True:
        if osm.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"OpenSM exited or its SA never answered ({log})")
        text = log.read_text(errors="replace") if log.exists() else ""
        switches, ca_on, ca_lids = fabric_lids(sim)
        lids = sorted(ca_lids)
        if "tables configured on all switches" in text and lids and all(lids) and all(
                lid for _g, lid in switches.values()):
            probe = sim.run(["saquery", "-p", "--slid", str(lids[0]), "--dlid", str(lids[-1])], check=False)
            if probe.returncode == 0 and SAQUERY_SL.search(probe.stdout):
                break
        time.sleep(1)
    dlids = sorted({lid for _g, lid in switches.values()} | ca_lids)
    rows = {}
    for sw, src in ca_on.items():
        row = bytearray(max(dlids) + 1)
        for dlid in dlids:
            if dlid != src:
                out = sim.run(["saquery", "-p", "--slid", str(src), "--dlid", str(dlid)], check=False).stdout
                m = SAQUERY_SL.search(out)
                row[dlid] = int(m.group(1), 16) if m else 0
        rows[switches[sw][0]] = bytes(row)
    path = Path(tempfile.mkdtemp(dir=scratch, prefix="sls-")) / "path_sls"
    pathsl.save(path, rows)
    return path


def smagent(sim: IbSim, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "smagent.cli", "--transport", "umad", *args], env=sim.env,
                          cwd=sim.cwd, capture_output=True, text=True, timeout=1800)


def program(sim: IbSim, engine: str, scratch: Path) -> tuple[str, str, list[str]]:
    """Route with ``engine``: (status, VLs used, extra verify arguments)."""
    tool, algo = engine.split("-")
    if tool == "smagent":
        state = Path(tempfile.mkdtemp(dir=scratch, prefix="state-"))
        r = smagent(sim, "sweep", "--routing", algo, "--allow-defects", "--state-dir", str(state))
        if r.returncode not in (0, 1):
            return f"sweep exit {r.returncode}: {r.stderr.strip().splitlines()[-1][:120]}", "-", []
        m = re.search(r"dfsssp: (\d+) layers? needed .* over (\d+) of (\d+) VLs", r.stdout)
        vls = f"{m.group(1)} needed, {m.group(2)} used" if m else "1"
        sls = state / "path_sls"
        return "ok" + (" (written with defects)" if r.returncode else ""), vls, \
            ["--path-sls", str(sls)] if sls.exists() else []
    d = Path(tempfile.mkdtemp(dir=scratch, prefix="osm-"))
    env = dict(sim.env, OSM_CACHE_DIR=str(d), OSM_TMP_DIR=str(d))
    log = d / "osm.log"
    extra: list[str] = []
    if algo in LAYERED:  # a daemon: its SA hands out the SLs, read into a path SL file
        (d / "opensm.conf").write_text("force_log_flush TRUE\n")
        osm = subprocess.Popen(["opensm", "-F", str(d / "opensm.conf"), "-f", str(log), "-d2", "-R", algo], env=env,
                               cwd=d, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            extra = ["--path-sls", str(opensm_sls(sim, log, algo, osm, scratch))]
        finally:
            osm.terminate()
            osm.wait(60)
        code = 0
    else:
        code = subprocess.run(["opensm", "-o", "-f", str(log), "-d2", "-R", algo], env=env, cwd=sim.cwd,
                              capture_output=True, text=True, timeout=1800).returncode
    text = log.read_text(errors="replace")
    if code != 0 or f"{algo} tables configured on all switches" not in text:
        used = [ln for ln in text.splitlines() if "tables configured on all switches" in ln]
        return f"fell back ({used[-1].split(': ', 1)[-1] if used else 'no engine line'})", "1", []
    if algo == "lash":
        needed = re.findall(r"Lanes needed: (\d+)", text)
        return "ok (its SLs from its SA)", f"{needed[-1] if needed else '?'} needed", extra
    if algo != "dfsssp":
        return "ok", "1", []
    needed = re.search(r"Virtual Lanes needed: (\d+)", text)
    after = text.split("after balancing", 1)[-1]
    used = sum(1 for n in re.findall(r"\d+\. lane: (\d+)", after) if int(n))
    return "ok (its SLs from its SA)", f"{needed.group(1) if needed else '?'} needed, {used} used", extra


def measure(fabric_name: str, engine: str, scratch: Path) -> dict:
    fabric = FABRICS[fabric_name]()
    net = scratch / f"{fabric_name}.net"
    net.write_text(netfile.dumps(fabric))
    with IbSim(net, scratch / f"run-{fabric_name}-{engine}", extra_args=netfile.ibsim_size_args(fabric)) as sim:
        status, vls, extra = program(sim, engine, scratch)
        r = smagent(sim, "verify", "--json", "--no-mcast", *extra)
    if r.returncode not in (0, 1):
        return {"fabric": fabric_name, "engine": engine, "status": status, "vls": vls, "loops": "-",
                "max": "-", "mean": "-"}
    doc = json.loads(r.stdout)
    b = doc["balance"]
    loops = doc["defects"].get("cdg_cycle")
    other = sorted(k for k in doc["defects"] if k != "cdg_cycle")
    return {"fabric": fabric_name, "engine": engine, "status": status + (f"; {', '.join(other)}" if other else ""),
            "vls": vls, "loops": "yes" if loops else "none", "max": b["max"], "mean": b["mean"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fabrics", default=",".join(FABRICS))
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--keep", help="scratch directory to keep (default: a temporary one)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="dfsssp-bench-") as tmp:
        scratch = Path(a.keep or tmp)
        scratch.mkdir(parents=True, exist_ok=True)
        print("| fabric | engine | VLs | credit loops | max link load | mean link load | note |")
        print("|---|---|---|---|---|---|---|")
        for fab in a.fabrics.split(","):
            for eng in a.engines.split(","):
                m = measure(fab, eng, scratch)
                print(f"| {fab} | {eng} | {m['vls']} | {m['loops']} | {m['max']} | {m['mean']} | {m['status']} |",
                      flush=True)


if __name__ == "__main__":
    main()
