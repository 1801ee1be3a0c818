#!/usr/bin/env python3
"""Regenerate fixtures/: topology files and recorded sessions for dry runs and replay tests.

    python scripts/make_fixtures.py [NAME ...]      (default: every fabric)

For each fabric this writes

    fixtures/<name>.net                   the topology (ibsim net-file format)
    fixtures/<name>-fresh.erf             SMPs of read-only commands on the unconfigured fabric
    fixtures/<name>-fresh.expected.json   what those commands printed, live
    fixtures/<name>-swept.erf             the same kind of session after `smagent sweep`
    fixtures/<name>-swept.expected.json

Every session is real: ibsim (tests/ibsim_harness.IbSim) runs the net file and each
command runs as `smagent --transport umad --record FILE ...` through umad2sim. One
capture per command is recorded, then the captures of one state are merged into one
file: exchanges (request + response, or a request alone when it was undelivered) in
recorded order, each response right after its request. Where one request key was asked
several times, the trailing run of identical answers (ignoring the TID and bytes
224..255, which umad2sim never copies) is kept once: a replay keeps giving a key's last
answer, so that changes nothing a replay can observe, and it keeps the files small.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT))

from ibsim_harness import IbSim  # noqa: E402
from fixture_text import digest, normalize, normalize_stderr  # noqa: E402

from mad.framing import frame  # noqa: E402
from smagent.model import netfile, topogen  # noqa: E402
from smagent.transport.pcap import erf_record, read_capture  # noqa: E402
from mad import smp as smpcodec  # noqa: E402
from mad.header import TID_SLICE  # noqa: E402
from smagent.transport.replay import exchange_key  # noqa: E402

FIXTURES = ROOT / "fixtures"
FABRICS = {
    "two-switch": topogen.two_switch,
    "ft2-648": lambda: topogen.fat_tree_2(36),
    "torus-4x4": lambda: topogen.torus_2d(4, 4, hosts_per_switch=2),
}
# the routing each fabric is swept with: minhop's credit loops on a torus are refused
# the engine each fabric is recorded with (named: the default, auto, may change its choice)
ROUTING = {"torus-4x4": ["--routing", "dfsssp"], "two-switch": ["--routing", "minhop"], "ft2-648": ["--routing", "minhop"]}
STORE_TEXT_MAX = 256 * 1024  # larger outputs are stored as a sha256 only


def fresh_commands(disc: dict) -> list[list[str]]:
    sw_paths = [n["path"] for n in disc["nodes"] if n["type"] == "switch"]
    first = sw_paths[0]
    cmds = [["sweep", "--dry-run", "--json"], ["sweep", "--dry-run"], ["discover"], ["discover", "--json"],
            ["query", "nodeinfo", "0"], ["query", "nodeinfo", "0,1"], ["query", "nodedesc", "0,1"],
            ["query", "portinfo", "0,1", "--port", "1"], ["query", "switchinfo", first],
            ["query", "portinfo", "0", "--port", "1", "--json"],
            ["query", "rft", first]]  # ibsim never answers RandomForwardingTable: a recorded timeout
    cmds += [["lft", "show", "-n", p] for p in sw_paths]  # -n: the switch's own Gets (ibroute -n)
    return cmds


def swept_commands(disc: dict) -> list[list[str]]:
    sws = [n for n in disc["nodes"] if n["type"] == "switch"]
    lids = [n["ports"]["0"]["lid"] for n in sws]
    cmds = [["sweep", "--dry-run", "--json"], ["sweep", "--dry-run"], ["discover"], ["discover", "--json"],
            ["query", "nodeinfo", "0"], ["query", "nodeinfo", "0,1"], ["query", "portinfo", "0", "--port", "1"],
            ["query", "nodeinfo", str(lids[0])], ["query", "switchinfo", str(lids[0])],
            ["query", "portinfo", str(lids[-1]), "--port", "1"], ["query", "rft", str(lids[0])],
            ["lft", "show", "-n", sws[0]["path"]],
            ["lft", "dump"]]
    cmds += [["lft", "show", "-n", str(lid)] for lid in lids]
    return cmds


# -- recording ----------------------------------------------------------------------------------
def smagent(sim: IbSim, *args: str, record: Path | None = None, check: bool = True):
    r = sim.smagent(*args, record=record, check=False, timeout=1800)
    if check and r.returncode != 0:
        raise SystemExit(f"smagent {' '.join(args)} exited {r.returncode}:\n{r.stderr[-3000:]}")
    return r


def record_state(sim: IbSim, cmds: list[list[str]], scratch: Path, tag: str):
    """Run each command with its own recording; return ([capture paths], expected doc)."""
    captures, results = [], []
    for i, args in enumerate(cmds):
        cap = scratch / f"{tag}-{i:03d}.erf"
        t0 = time.monotonic()
        r = smagent(sim, *args, record=cap, check=False)
        print(f"  {tag}: smagent {' '.join(args)} -> {r.returncode} ({time.monotonic() - t0:.1f} s)", flush=True)
        if r.returncode not in (0, 1) and args[:2] != ["query", "rft"]:
            raise SystemExit(f"smagent {' '.join(args)} exited {r.returncode}:\n{r.stderr[-3000:]}")
        out = normalize(args, r.stdout)
        entry = {"args": args, "rc": r.returncode, "stderr": normalize_stderr(r.stderr),
                 "stdout_sha256": digest(out), "stdout_lines": out.count("\n")}
        if len(out) <= STORE_TEXT_MAX:
            entry["stdout"] = out
        results.append(entry)
        captures.append(cap)
    return captures, results


def _same_answer(a: bytes | None, b: bytes | None) -> bool:
    if a is None or b is None:
        return a is b
    # equal but for the TID, and for the bytes umad2sim leaves stale past 224 (docs/PITFALLS.md)
    return a[:TID_SLICE.start] == b[:TID_SLICE.start] and a[TID_SLICE.stop:224] == b[TID_SLICE.stop:224]


def merge(captures: list[Path], out: Path) -> tuple[int, int]:
    """Merge per-command captures into one (see the module docstring). Returns
    (exchanges written, exchanges read)."""
    exchanges = []  # [key, request Record, response Record | None]
    for cap in captures:
        pending = {}
        for rec in read_capture(cap):
            smp = smpcodec.decode(rec.mad)
            tid32 = smp.tid32
            if smp.is_response:
                ex = pending.pop(tid32, None)
                if ex is not None:
                    ex[2] = rec
            else:
                ex = [exchange_key(smp, rec.dlid), rec, None]
                pending[tid32] = ex
                exchanges.append(ex)
    by_key: dict[tuple, list[int]] = {}
    for i, ex in enumerate(exchanges):
        by_key.setdefault(ex[0], []).append(i)
    def answer(i):
        resp = exchanges[i][2]
        return None if resp is None else resp.mad

    drop = set()
    for idx in by_key.values():
        last = answer(idx[-1])
        j = len(idx) - 1
        while j > 0 and _same_answer(answer(idx[j - 1]), last):
            drop.add(idx[j])  # keep the first of the trailing run: it is answered from then on
            j -= 1
    psn = 0
    with open(out, "wb") as f:
        for i, (_key, req, resp) in enumerate(exchanges):
            if i in drop:
                continue
            for rec in (req, resp):
                if rec is not None:
                    f.write(erf_record(frame(rec.mad, rec.slid, rec.dlid, psn=psn), rec.ts))
                    psn = (psn + 1) & 0xFFFFFF
    return len(exchanges) - len(drop), len(exchanges)


def make(name: str, scratch: Path) -> None:
    fabric = FABRICS[name]()
    net = FIXTURES / f"{name}.net"
    net.write_text(netfile.dumps(fabric))
    print(f"{name}: {len(fabric.switches())} switches, {len(fabric.cas())} CAs -> {net.relative_to(ROOT)}", flush=True)
    with IbSim(net, scratch / name / "run", extra_args=netfile.ibsim_size_args(fabric)) as sim:
        for state in ("fresh", "swept"):
            if state == "swept":
                t0 = time.monotonic()
                smagent(sim, "sweep", *ROUTING.get(name, []))
                print(f"  smagent sweep ({time.monotonic() - t0:.1f} s)", flush=True)
            disc = json.loads(smagent(sim, "discover", "--json").stdout)
            cmds = fresh_commands(disc) if state == "fresh" else swept_commands(disc)
            cmds = [c[:1] + ROUTING.get(name, []) + c[1:] if c[0] == "sweep" else c for c in cmds]
            captures, results = record_state(sim, cmds, scratch / name, state)
            erf = FIXTURES / f"{name}-{state}.erf"
            kept, total = merge(captures, erf)
            doc = {"fabric": name, "state": state, "netfile": net.name, "capture": erf.name,
                   "note": "written by scripts/make_fixtures.py: live outputs of smagent --transport umad on ibsim; "
                           "sweep timings removed",
                   "commands": results}
            (FIXTURES / f"{name}-{state}.expected.json").write_text(json.dumps(doc, indent=1) + "\n")
            print(f"  {erf.relative_to(ROOT)}: {kept} of {total} exchanges, {erf.stat().st_size} bytes", flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", metavar="NAME", help=f"fabrics to regenerate: {', '.join(FABRICS)} (default: all)")
    ns = ap.parse_args(argv)
    unknown = [n for n in ns.names if n not in FABRICS]
    if unknown:
        ap.error(f"unknown fabric {', '.join(unknown)}: choose from {', '.join(FABRICS)}")
    FIXTURES.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="smagent-fixtures-") as tmp:
        for name in ns.names or list(FABRICS):
            make(name, Path(tmp))


if __name__ == "__main__":
    main()
