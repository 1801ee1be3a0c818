"""What the running SM's snapshot costs (issue 28, memory per switch): peak RSS and time of
a sweep that keeps its per-port tables for the SA (`keep_link_tables`, as `smagent run`
sets it) and builds the `Subnet` snapshot, against the same without, and the daemon's
first sweep end to end, on the in-process simulator. Each run is a fresh process under
`/usr/bin/time -v` (peak RSS); the child reports the snapshot's table count and deep size.

    python bench/daemon_memory.py                     # every fabric, every job, 1 run each
    python bench/daemon_memory.py --fabric ft3-2000 --runs 3
    python bench/daemon_memory.py --fabric ft3-11664 --job sweep --no-qos   # no link-table Sets

fabrics (smagent.model.topogen.fat_tree_3):
    ft3-2000    k=20: 2,000 hosts, 500 switches (3 levels)
    ft3-11664   k=36: 11,664 hosts, 1,620 switches
jobs:
    sweep       Session.sweep() + Subnet.from_sweep, no tables kept
    keep        Session.sweep(keep_link_tables=True) + Subnet.from_sweep (what the daemon publishes)
    daemon      Daemon.start() stepped until its first sweep is published (the SA's snapshot)
keep and daemon then build the SA's table records of every kind (`TABLE_RECORDS`), as the
first query of each does, and report each kind's count, time and own size (what the
snapshot holds, the tables and LFTs the records read, is left out: counted under it).
``--no-qos`` (sweep and keep): SL2VL/VLArb tables left alone (`LinkOptions(qos=False)`, the
sweep's --no-qos, as `bench/largest_subnet.py` runs ibsim): no link-table Sets.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FABRICS = {"ft3-2000": 20, "ft3-11664": 36}
JOBS = ("sweep", "keep", "daemon")
# the SA's records of the per-switch and per-port tables (`smagent.sa.records.Records`)
TABLE_RECORDS = ("pkey_tables", "sl2vl_tables", "vlarb_tables", "lfts", "mfts", "guid_infos")


def deep_size(obj, seen: set[int] | None = None) -> int:
    """Bytes of ``obj`` and everything it reaches, each object once (classes, modules and
    functions are shared code, not the snapshot's: not counted); ``seen``: ids already
    counted elsewhere (not counted again; filled in)."""
    seen = set() if seen is None else seen
    todo, total = [obj], 0
    skip = (type, type(sys), type(deep_size))
    while todo:
        o = todo.pop()
        if id(o) in seen or isinstance(o, skip):
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        todo.extend(gc.get_referents(o))
    return total


def child(k: int, job: str, no_qos: bool = False) -> dict:
    """One job in this process: what it reports on stdout as JSON."""
    from smagent.model import topogen
    from smagent.model.subnet import Subnet
    from smagent.transport.sim import SimTransport
    t = SimTransport(topogen.fat_tree_3(k))
    t0 = time.monotonic()
    if job == "daemon":
        from smagent.sm.daemon import Daemon, DaemonOptions
        t.serve()
        now = [1000.0]
        d = Daemon(t, DaemonOptions(), clock=lambda: now[0])
        d.start()
        while d.sa.agent.subnet is None and now[0] < 1100:
            now[0] += 0.5
            d.step(max_wait=0)
        sub = d.sa.agent.subnet
        problems = d.last_sweep.get("problems") if d.last_sweep else None
        seen = {id(t)}  # the transport holds the simulated fabric: in this process, not in a daemon's
        daemon_mib = round(deep_size(d, seen) / 2**20, 1)
        seen.discard(id(t))
        extra = {"daemon_mib": daemon_mib, "sim_mib": round(deep_size(t, seen) / 2**20, 1)}
    else:
        from smagent.api import Session
        from smagent import linkconf
        links = linkconf.LinkOptions(qos=False).check() if no_qos else None
        r = Session(t).sweep(keep_link_tables=job == "keep", links=links)
        sub, problems, extra = Subnet.from_sweep(r), len(r.problems), {}
    seconds = time.monotonic() - t0
    if sub is None:
        return {"seconds": seconds, "published": False}
    tables, in_snapshot = sub.tables, set()  # the records' own size: what the snapshot holds is not theirs
    out = {"seconds": round(seconds, 2), "published": True, "problems": problems, "smps": t.stats.sent,
           "table_units": len(tables), "tables_mib": round(deep_size(tables) / 2**20, 1),
           "snapshot_mib": round(deep_size(sub, in_snapshot) / 2**20, 1), "rss_snapshot_mib": _rss_mib(), **extra}
    if job != "sweep":  # the SA's table records, built on the first query of each kind
        from smagent.sa.records import Records
        recs, kinds = Records(sub), {}
        for name in TABLE_RECORDS:
            t0 = time.monotonic()
            kept = getattr(recs, name)
            kinds[name] = (len(kept), time.monotonic() - t0, deep_size(kept, in_snapshot))
        out.update(records=sum(n for n, _s, _b in kinds.values()),
                   records_s=round(sum(s for _n, s, _b in kinds.values()), 2), rss_records_mib=_rss_mib(),
                   records_mib=round(sum(b for _n, _s, b in kinds.values()) / 2**20, 1),
                   kinds={name: [n, round(s, 2), round(b / 2**20, 1)] for name, (n, s, b) in kinds.items()})
    return out


def _rss_mib() -> int:
    """Resident now (what the daemon keeps holding), not the peak."""
    gc.collect()
    with open("/proc/self/statm") as f:
        return round(int(f.read().split()[1]) * resource.getpagesize() / 2**20)


def run_once(k: int, job: str, no_qos: bool = False) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = ["/usr/bin/time", "-v", sys.executable, __file__, "--child", str(k), job, *(["--no-qos"] if no_qos else [])]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    if p.returncode != 0 or m is None:
        raise SystemExit(f"{job} k={k} failed (rc {p.returncode}):\n{p.stderr[-2000:]}")
    res = json.loads(p.stdout.strip().splitlines()[-1])
    res["max_rss_mib"] = round(int(m[1]) / 1024)
    return res


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fabric", action="append", choices=sorted(FABRICS), help="default: every fabric")
    ap.add_argument("--job", action="append", choices=JOBS, help="default: every job")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--no-qos", action="store_true", help="sweep and keep: no link-table Sets (the sweep's --no-qos)")
    ap.add_argument("--child", nargs=2, metavar=("K", "JOB"), help=argparse.SUPPRESS)
    ns = ap.parse_args(argv)
    if ns.child:
        print(json.dumps(child(int(ns.child[0]), ns.child[1], ns.no_qos)))
        return
    print(f"load before: {os.getloadavg()[0]:.2f}")
    for fabric in ns.fabric or list(FABRICS):
        for job in ns.job or JOBS:
            if ns.no_qos and job == "daemon":
                raise SystemExit("--no-qos: jobs sweep and keep only")
            runs = [run_once(FABRICS[fabric], job, ns.no_qos) for _ in range(ns.runs)]
            med = {key: statistics.median(r[key] for r in runs) for key in ("seconds", "max_rss_mib")}
            last = runs[-1]
            print(f"{fabric:10} {job:7} wall {med['seconds']:7.1f} s  peak RSS {med['max_rss_mib']:6.0f} MiB  "
                  f"table units {last.get('table_units', 0):>9,}  tables {last.get('tables_mib', 0):7.1f} MiB  "
                  f"snapshot {last.get('snapshot_mib', 0):7.1f} MiB  SMPs {last.get('smps', 0):,}  "
                  f"problems {last.get('problems')}", flush=True)
            if "records" in last:
                print(f"{'':18} RSS after the snapshot {last['rss_snapshot_mib']} MiB; the SA's "
                      f"{last['records']:,} table records ({last['records_mib']} MiB) built in {last['records_s']} s: "
                      f"RSS {last['rss_records_mib']} MiB", flush=True)
                print(f"{'':18} " + "; ".join(f"{name} {n:,} ({mib} MiB, {s} s)"
                                              for name, (n, s, mib) in last["kinds"].items()), flush=True)
            if "sim_mib" in last:
                print(f"{'':18} held: the daemon (snapshot, sweep result, SA) {last['daemon_mib']} MiB, the "
                      f"transport with the simulated fabric {last['sim_mib']} MiB", flush=True)
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
