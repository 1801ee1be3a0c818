#!/usr/bin/env python3
"""The largest subnet, smagent and OpenSM side by side on ibsim (issue 42 item 1): full 3-level
fat trees of 16-, 36- and 54-port switches (1,024, 11,664 and 39,366 hosts; the last 3,645
switches and 43,011 LIDs, past ibsim's default LinearFDBCap of 30,720: `-L 49152`), and how
every figure grows with the fabric.

For each size, in turn:

Both SMs leave SL2VL and VLArb tables as they are (OpenSM without -Q; smagent `sweep --no-qos`,
`run --desired` with `links: {qos: false}`), route with minhop (OpenSM) and auto (smagent: ftree).

* sweep: `smagent sweep` vs `opensm -o` (bench/sweep_vs_opensm.py's `measure`, one run each):
  SMPs (ibsim -v), wall, CPU and peak RSS of the tool's process (the kernel's, wait4);
* the daemons, each alone on its own ibsim (console on): `smagent run` and `opensm` from start
  until every pair is routed (smagent: its status' first sweep with `routed`; OpenSM: its first
  "SUBNET UP", by the log's timestamp), their RSS then and at the end (/proc VmRSS, VmHWM);
  then a cut leaf uplink (console `Unlink "L0"[k/2+1]`), its `ReLink`, a lost core switch
  (`Unlink "S0"`: every port) and its return (`ReLink "S0"`): the time from the console
  command until the SM's last repair has ended (no new one for `SETTLE_S`), and how many
  repair passes that took (smagent: each pass from its status, `each`: incremental or not,
  its SMPs, of them the reads before the plan, `patch_smps`, and its Sets);
* on the timed run only: a PathRecord flood (bench/sa_vs_opensm.py's client on host H1,
  random pairs of the SM's LIDs, 8 in flight), the PathRecord table of every path from one host
  (GetTable by SLID, from H2; under ibsim, OpenSM's table reaches the client as its first MAD
  only: umad2sim knows no RMPP), and for smagent its PerfMgr's first counter sweep (every
  linked port) and one scrape of its Prometheus endpoint (time and bytes).

SMPs of the daemons are counted on a separate run under `ibsim -v` (packet lines, as every
bench here does; -v slows ibsim, so the times come from the run without it). `--no-count`
skips the counting runs (the largest size takes long). Each step's figures are printed as it
ends; --json gets the results after the sweep and after each daemon's run.
Not a test: figures are reported, never asserted; the load (`uptime`) is recorded beside each.

    python bench/largest_subnet.py --hosts 1024 11664 --json out.json
    python bench/largest_subnet.py --hosts 39366 --json big.json
    python bench/largest_subnet.py --table out.json big.json       # the growth table of saved runs
"""
from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "support"))
sys.path.insert(0, str(HERE.parent))
from daemon_vs_opensm import OpenSMRun, SmagentRun, cut_link, memory_mib  # noqa: E402
from ibsim_harness import IbSim  # noqa: E402
from sweep_vs_opensm import byte_compile, count_packets, make_fabric, measure  # noqa: E402

from smagent.model import netfile  # noqa: E402

FABRIC = {1024: "ft3-1024", 11664: "ft3-11664", 39366: "ft3-39366"}
SETTLE_S = 3.0  # a repair is over once the SM has started no other for this long
# PerfMgr's first counter sweep is due this long after the daemon starts: after the steps before
PERFMGR_AFTER_S = {1024: 60, 11664: 420, 39366: 1500}


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def table_client(seconds: float) -> dict:
    """On its own ibsim node: GetTable(PathRecord) of every path from this port (by SLID)."""
    from mad import sa
    from mad.header import Method
    from mad.sa_records import PathRecord
    from mad.smp import next_tid
    from smagent.sa.client import SaClient, sa_address
    from smagent.transport import open_transport
    from smagent.transport.base import Request
    from smagent.transport.umad import SA_CLIENT
    t = open_transport("umad", classes=[SA_CLIENT], window=1, retries=0, timeout_ms=int(seconds * 1000))
    c = SaClient(t, sa_address(t), max_table=1 << 28)
    lid = t.local_port().base_lid
    raw = sa.request(Method.GET_TABLE, PathRecord(slid=lid), component_mask=PathRecord.mask("slid"),
                     transaction_id=next_tid()).encode()
    t0 = time.monotonic()
    (reply,) = t.execute([Request.gmp(raw, c.address)])
    dt = time.monotonic() - t0
    if reply.raw is None:
        return {"error": f"no answer: {reply.error}", "seconds": round(dt, 3)}
    return {"seconds": round(dt, 3), "records": len(c._records(reply.raw, PathRecord)), "bytes": len(reply.raw)}


def lids_of(path: Path, fallback: int) -> list[int]:
    """The LIDs in a guid2lid file (OpenSM's format, both SMs write it); else 1..fallback."""
    try:
        lids = sorted({int(line.split()[1], 0) for line in path.read_text().splitlines()
                       if line.startswith("0x") and len(line.split()) >= 2})
    except OSError:
        lids = []
    return lids or list(range(1, fallback + 1))


class Repairs:
    """The SM's finished repairs, one tool's way: `mark()` before the console command,
    `after(t0)` waits until one has ended after ``t0`` and no other has started or ended for
    SETTLE_S; returns (the end of the last one, epoch seconds; how many ended).

    smagent: its status (`repairs` counts repairs begun, `sweeps` and `sweeps_failed` those
    ended, a repair's full sweep included; `activity` is None when idle); OpenSM: the
    "SUBNET UP" lines of its log."""

    def __init__(self, tool: str, sm):
        self.tool, self.sm = tool, sm
        self.seen: dict[float, dict] = {}  # smagent: each pass's last_sweep seen, by its end time

    def _now(self):
        if self.tool == "opensm":
            return tuple(self.sm.subnet_ups())
        s = self.sm.status()
        if not s:
            return None
        last = s.get("last_sweep") or {}
        if last.get("time"):  # incremental or not, its SMPs, of them the reads before the plan, its Sets
            self.seen[last["time"]] = {k: last[k] for k in ("incremental", "smps", "patch_smps", "sets") if k in last}
        c = s.get("counters", {})
        return (c.get("repairs", 0), s.get("sweeps", 0) + s.get("sweeps_failed", 0),
                (s.get("last_sweep") or {}).get("time", 0.0), s.get("activity"))

    def mark(self) -> None:
        self.base = self._now()

    def _done(self, now, t0: float):
        """(end, passes) when `now` shows a finished repair after t0 and nothing under way."""
        if self.tool == "opensm":
            new = now[len(self.base):]
            return (new[-1], len(new)) if new and new[-1] > t0 else None
        ended = now[1] - self.base[1]
        return (now[2], ended) if ended > 0 and now[2] > t0 and now[3] is None else None

    def after(self, t0: float, timeout: float) -> tuple[float, int]:
        deadline, seen, quiet = time.monotonic() + timeout, self.base, time.monotonic()
        while time.monotonic() < deadline:
            if self.sm.proc.poll() is not None:
                raise SystemExit(f"{self.tool} exited {self.sm.proc.returncode} before its repair ended")
            now = self._now()
            if now is not None and now != seen:
                seen, quiet = now, time.monotonic()
            elif now is not None and time.monotonic() - quiet >= SETTLE_S and (done := self._done(seen, t0)):
                return done
            time.sleep(0.1)
        raise SystemExit(f"{self.tool}: no finished repair in {timeout} s (last seen {seen})")


def daemon_run(tool: str, hosts: int, net: Path, size: list, fabric, scratch: Path, count: bool, a) -> dict:
    """One daemon on its own ibsim: bring-up, cut, relink, core lost; on the timed run also SA,
    PerfMgr and metrics. Returns its figures (SMPs when `count`)."""
    big = 3600.0
    leaf, port = cut_link(fabric)
    out: dict = {"load_before": load(), "date": time.strftime("%F %T %Z")}
    with IbSim(net, scratch, extra_args=[*size, *(["-v"] if count else [])], console=True, ready_timeout=big) as sim:
        c0 = count_packets(sim.log) if count else 0
        t_start = time.time()
        if tool == "smagent":
            args = ["--sweep-interval", "3600"]  # neither SM sweeps of its own accord during the steps
            if not count:
                out["metrics_port"] = mport = free_port()
                args += ["--perfmgr-interval", str(a.perfmgr_after or PERFMGR_AFTER_S.get(hosts, 600)),
                         "--metrics", f"127.0.0.1:{mport}"]
            desired = scratch / "desired.json"  # SL2VL/VLArb left as they are, as OpenSM without -Q
            desired.write_text(json.dumps({"links": {"qos": False}}))
            sm = SmagentRun(sim, *args, "--desired", str(desired))
            s = sm.wait(lambda s: s.get("routed") and s.get("sweeps", 0) >= 1, timeout=big, every=0.5)
            up = s["last_sweep"]["time"]
            state, lid_file = sm.state, sm.state / "guid2lid"
        else:
            sm = OpenSMRun(sim, scratch / "osm", "-s", "3600", "-R", "minhop")
            up = sm.wait_ups(1, timeout=big, every=0.5)[0]
            state, lid_file = scratch / "osm", scratch / "osm" / "guid2lid"
        pid = sm.proc.pid
        try:
            out["routed_s"] = round(up - t_start, 2)
            time.sleep(SETTLE_S)
            if count:
                out["routed_smps"] = count_packets(sim.log) - c0
            out["memory_routed_mib"] = memory_mib(pid)
            rep = Repairs(tool, sm)
            for what, act in (("cut", lambda: sim.unlink(leaf, port)), ("relink", lambda: sim.relink(leaf, port)),
                              ("core_lost", lambda: sim.unlink("S0")), ("core_back", lambda: sim.relink("S0"))):
                time.sleep(1.0)
                rep.mark()
                c0 = count_packets(sim.log) if count else 0
                load0, t0 = load(), time.time()
                act()
                end, passes = rep.after(t0, timeout=big)
                out[what] = {"seconds": round(end - t0, 3), "passes": passes, "load": load0}
                if tool == "smagent":  # each pass as the daemon counts it: a repair's reads vs its Sets
                    out[what]["each"] = [v for at, v in sorted(rep.seen.items()) if at > t0]
                if count:
                    out[what]["smps"] = count_packets(sim.log) - c0
                print(f"  {tool} {what}: {out[what]}", flush=True)
            if not count:
                sa_steps(tool, sim, lids_of(lid_file, len(fabric)), out, a)
                if tool == "smagent":
                    perf_steps(sm, out, big)
            out["memory_end_mib"] = memory_mib(pid)
            out["state_dir"] = str(state)
        finally:
            sm.stop()
    out["load_after"] = load()
    return out


def sa_steps(tool: str, sim, lids: list[int], out: dict, a) -> None:
    """The PathRecord flood (bench/sa_vs_opensm.py's client) and one host's table."""
    time.sleep(1.0)
    out["sa_flood"] = {"load": load()}
    p = subprocess.run([sys.executable, str(HERE / "sa_vs_opensm.py"), "--client", json.dumps(
        {"lids": random.Random(7).sample(lids, min(len(lids), 5000)), "seconds": a.flood_seconds, "window": 8,
         "seed": 24})], env=dict(sim.env, SIM_HOST="H1"), cwd=sim.cwd, capture_output=True, text=True,
        timeout=a.flood_seconds * 4 + 120)
    out["sa_flood"].update(json.loads(p.stdout) if p.returncode == 0 else {"error": p.stderr[-500:]})
    print(f"  {tool} PathRecord flood: {out['sa_flood']}", flush=True)
    time.sleep(1.0)
    load0 = load()
    p = subprocess.run([sys.executable, __file__, "--table-client", str(a.table_timeout)],
                       env=dict(sim.env, SIM_HOST="H2"), cwd=sim.cwd, capture_output=True, text=True,
                       timeout=a.table_timeout + 120)
    out["one_host_table"] = json.loads(p.stdout) if p.returncode == 0 else {"error": p.stderr.strip()[-500:]}
    out["one_host_table"]["load"] = load0
    print(f"  {tool} PathRecords from one host: {out['one_host_table']}", flush=True)


def perf_steps(sm: SmagentRun, out: dict, timeout: float) -> None:
    """PerfMgr's first counter sweep (when it is due), then one metrics scrape."""
    s = sm.wait(lambda s: (s.get("perfmgr") or {}).get("sweeps", 0) >= 1, timeout=timeout, every=1.0)
    out["perfmgr"] = dict(s["perfmgr"]["last"], load=load())
    print(f"  smagent PerfMgr sweep: {out['perfmgr']}", flush=True)
    time.sleep(1.0)
    load0, t0 = load(), time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{out['metrics_port']}/metrics", timeout=600) as r:
        body = r.read()
    out["metrics"] = {"seconds": round(time.monotonic() - t0, 3), "bytes": len(body),
                      "series": sum(1 for line in body.splitlines() if line and not line.startswith(b"#")),
                      "load": load0}
    print(f"  smagent metrics scrape: {out['metrics']}", flush=True)


def one_size(hosts: int, a, results: dict, save) -> None:
    name = FABRIC[hosts]
    fabric = make_fabric(name)
    r = results.setdefault(str(hosts), {"fabric": name, "hosts": len(fabric.cas()),
                                        "switches": len(fabric.switches()), "nodes": len(fabric)})
    print(f"{name}: {r['hosts']:,} hosts, {r['switches']:,} switches; load {load()}", flush=True)
    if not a.no_sweep and "sweep" not in r:
        load0 = load()
        m = measure(name, 1, {"smagent": ["--no-qos"]})
        r["sweep"] = {t: {"smps": m[t]["smps"], "wall_s": round(m[t]["median_s"], 2),
                          "cpu_s": round(m[t]["median_cpu_s"], 2), "peak_rss_mib": round(m[t]["peak_rss_mib"])}
                      for t in ("smagent", "opensm")}
        r["sweep"].update(load_before=load0, load_after=load(), date=time.strftime("%F %T %Z"))
        print(f"  sweep: {r['sweep']}", flush=True)
        save()
    with tempfile.TemporaryDirectory(prefix=f"largest-{hosts}-") as tmp:
        tmp = Path(tmp)
        net = tmp / "fabric.net"
        net.write_text(netfile.dumps(fabric))
        size = netfile.ibsim_size_args(fabric)
        for count in ((False,) if a.no_count else (False, True)):  # the times first, the SMP counts after
            for tool in () if a.no_daemons else a.sm:
                key = "count" if count else "time"
                if key in r.get(tool, {}):
                    continue
                res = daemon_run(tool, hosts, net, size, fabric, tmp / f"{tool}-{key}", count, a)
                r.setdefault(tool, {})[key] = res
                print(f"  {tool} daemon ({key}): {res}", flush=True)
                save()


# -- the growth table -------------------------------------------------------------------
def figures(r: dict) -> dict:
    """name -> value of one size's results (absent: not measured)."""
    out = {}
    for tool in ("smagent", "opensm"):
        sw = r.get("sweep", {}).get(tool, {})
        for k in ("smps", "wall_s", "cpu_s", "peak_rss_mib"):
            if k in sw:
                out[f"sweep {k} {tool}"] = sw[k]
        t, c = r.get(tool, {}).get("time", {}), r.get(tool, {}).get("count", {})
        if "routed_s" in t:
            out[f"run: routed s {tool}"] = t["routed_s"]
        if "routed_smps" in c:
            out[f"run: routed SMPs {tool}"] = c["routed_smps"]
        if "memory_routed_mib" in t:
            out[f"run: RSS once routed MiB {tool}"] = t["memory_routed_mib"]["VmRSS"]
        if "memory_end_mib" in t:
            out[f"run: RSS at end MiB {tool}"] = t["memory_end_mib"]["VmRSS"]
            out[f"run: peak RSS MiB {tool}"] = t["memory_end_mib"]["VmHWM"]
        for what in ("cut", "relink", "core_lost", "core_back"):
            if what in t:
                out[f"{what} s {tool}"] = t[what]["seconds"]
            if what in c:
                out[f"{what} SMPs {tool}"] = c[what]["smps"]
        if "per_second" in t.get("sa_flood", {}):
            out[f"PathRecords/s {tool}"] = t["sa_flood"]["per_second"]
        if "seconds" in t.get("one_host_table", {}):
            out[f"one-host table s {tool}"] = t["one_host_table"]["seconds"]
            out[f"one-host table records {tool}"] = t["one_host_table"].get("records")
        if "seconds" in t.get("perfmgr", {}):
            out[f"PerfMgr sweep s {tool}"] = t["perfmgr"]["seconds"]
            out[f"PerfMgr GMPs {tool}"] = t["perfmgr"]["gmps"]
        if "seconds" in t.get("metrics", {}):
            out[f"metrics scrape s {tool}"] = t["metrics"]["seconds"]
            out[f"metrics scrape MB {tool}"] = round(t["metrics"]["bytes"] / 1e6, 1)
    return out


def growth_table(results: dict) -> str:
    """Every figure at each size, and its growth from one size to the next beside the
    node count's (a figure that grows like the nodes is linear; like their square, quadratic)."""
    sizes = sorted(results.values(), key=lambda r: r["nodes"])
    figs = [figures(r) for r in sizes]
    names = list(dict.fromkeys(n for f in figs for n in f))

    def row(first: str, vals: list) -> str:
        cells = ["-" if v is None else f"{v:,}" for v in vals]
        cells += ["-" if not (x and y) else f"x{y / x:.2f}" for x, y in zip(vals, vals[1:])]
        return f"| {first} | {' | '.join(cells)} |"

    head = ["figure", *(f"{r['hosts']:,} hosts" for r in sizes),
            *(f"growth {a['hosts']:,} -> {b['hosts']:,}" for a, b in zip(sizes, sizes[1:]))]
    lines = [f"| {' | '.join(head)} |", "|" + " --- |" * len(head), row("nodes", [r["nodes"] for r in sizes])]
    lines += [row(n, [f.get(n) for f in figs]) for n in names]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, nargs="+", choices=sorted(FABRIC), default=sorted(FABRIC))
    ap.add_argument("--sm", nargs="+", choices=("smagent", "opensm"), default=["smagent", "opensm"])
    ap.add_argument("--no-sweep", action="store_true", help="skip smagent sweep vs opensm -o")
    ap.add_argument("--no-daemons", action="store_true", help="only smagent sweep vs opensm -o")
    ap.add_argument("--no-count", action="store_true", help="no ibsim -v runs of the daemons (no daemon SMPs)")
    ap.add_argument("--flood-seconds", type=float, default=5.0)
    ap.add_argument("--table-timeout", type=float, default=120.0)
    ap.add_argument("--perfmgr-after", type=float, help="seconds from start to PerfMgr's first sweep "
                    f"(default by size: {PERFMGR_AFTER_S})")
    ap.add_argument("--json", type=Path, help="results here, after the sweep and each daemon run; an existing file is resumed")
    ap.add_argument("--table", type=Path, nargs="+", help="only print the growth table of these saved results")
    ap.add_argument("--table-client", type=float, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.table_client:
        print(json.dumps(table_client(a.table_client)))
        return
    if a.table:
        merged: dict = {}
        for p in a.table:
            merged.update(json.loads(p.read_text()))
        print(growth_table(merged))
        return
    results = json.loads(a.json.read_text()) if a.json and a.json.exists() else {}

    def save() -> None:
        if a.json:
            a.json.write_text(json.dumps(results, indent=1))

    byte_compile()
    for hosts in a.hosts:
        one_size(hosts, a, results, save)
    print(growth_table(results))


if __name__ == "__main__":
    main()
