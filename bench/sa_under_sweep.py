#!/usr/bin/env python3
"""SA PathRecord Gets, `smagent status` and SIGTERM while `smagent run` sweeps a large fabric.

`smagent --transport umad run` brings an ibsim fabric up (a 3-level fat tree, 1,024 hosts by
default) and idles; a client on another node (SIM_HOST, its own umad agent for class 0x03)
sends one SubnAdmGet(PathRecord) every few milliseconds over random LID pairs and times each
answer; meanwhile the SM is made to sweep again in full (SIGHUP: discovery, routing, table
reads, plan check, on the fabric it programmed) while `status` is asked over the control
socket every 100 ms, and timed. A second full sweep is stopped by SIGTERM partway through:
the time until the process has exited is reported. Not a test: the figures are reported,
never asserted (a loaded 2-core machine moves them).

    python bench/sa_under_sweep.py                      # fat_tree_3(16, hosts=1024)
    python bench/sa_under_sweep.py --hosts 256 --interval-ms 5 --json out.json
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ibsim_harness import IbSim  # noqa: E402

from smagent.model import netfile, topogen  # noqa: E402
from smagent.sm import control  # noqa: E402


def client(lids: list[int], interval_s: float, stop_file: str, seed: int) -> list:
    """One PathRecord Get at a time until ``stop_file`` exists: [send time, seconds, status]
    each (status None: no answer within 2 s)."""
    from mad import sa
    from mad.header import Method
    from mad.sa_records import PathRecord
    from mad.smp import next_tid
    from smagent.sa.client import sa_address
    from smagent.transport import open_transport
    from smagent.transport.base import Request
    from smagent.transport.umad import SA_CLIENT
    t = open_transport("umad", classes=[SA_CLIENT], window=1, retries=0, timeout_ms=2000)
    addr = sa_address(t)
    rng = random.Random(seed)
    mask = PathRecord.mask("slid", "dlid")
    out = []
    while not os.path.exists(stop_file):
        s, d = rng.sample(lids, 2)
        req = Request.gmp(sa.request(Method.GET, PathRecord(slid=s, dlid=d), component_mask=mask,
                                     transaction_id=next_tid()).encode(), addr)
        t0 = time.monotonic()
        (r,) = t.execute([req])
        took = time.monotonic() - t0
        out.append([time.time(), took, None if r.raw is None else int.from_bytes(r.raw[4:6], "big")])
        time.sleep(max(0.0, interval_s - took))
    t.close()
    return out


def status(sock: Path) -> tuple[float, dict]:
    t0 = time.monotonic()
    try:
        s = control.query(sock, timeout=5.0)
    except control.ControlError:
        s = {}
    return time.monotonic() - t0, s


def watch_sweep(sock: Path, sweeps_before: int, timeout: float, until=None) -> dict:
    """Ask `status` every 100 ms until the sweep count passes ``sweeps_before`` (or
    ``until`` seconds have passed): the slowest answer, how many, the sweep's length."""
    t0, worst, n = time.monotonic(), 0.0, 0
    while time.monotonic() - t0 < timeout:
        took, s = status(sock)
        worst, n = max(worst, took), n + 1
        if s.get("sweeps", 0) > sweeps_before or (until is not None and time.monotonic() - t0 >= until):
            break
        time.sleep(0.1)
    return {"status_asked": n, "status_max_s": round(worst, 3), "seconds": round(time.monotonic() - t0, 2)}


def percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else 0.0


def latencies(samples: list, start: float, end: float) -> dict:
    inside = [s for s in samples if start <= s[0] <= end]
    took = [s[1] for s in inside]
    return {"gets": len(inside), "unanswered": sum(1 for s in inside if s[2] is None),
            "max_ms": round(1000 * max(took, default=0), 1), "p99_ms": round(1000 * percentile(took, 99), 1),
            "p50_ms": round(1000 * percentile(took, 50), 1), "over_50ms": sum(1 for x in took if x > 0.05)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=1024, help="hosts of fat_tree_3(16)")
    p.add_argument("--interval-ms", type=float, default=5.0, help="between two PathRecord Gets")
    p.add_argument("--stop-after", type=float, help="SIGTERM this long into the second sweep (default: "
                   "halfway, by the first one's length)")
    p.add_argument("--client-host", default="H1", help="the ibsim node the client runs on")
    p.add_argument("--json", type=Path, help="also write the figures here")
    p.add_argument("--keep", help="work (and keep the SM's log) in this directory")
    p.add_argument("--client", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.client:
        c = json.loads(a.client)
        print(json.dumps(client(c["lids"], c["interval"], c["stop"], c["seed"])))
        return
    fabric = topogen.fat_tree_3(16, hosts=a.hosts)
    out: dict = {"hosts": a.hosts, "switches": len(fabric.switches()), "load_before": round(os.getloadavg()[0], 2)}
    with tempfile.TemporaryDirectory(prefix="sa-sweep-") as tmp:
        scratch = Path(a.keep) if a.keep else Path(tmp)
        net = scratch / "fabric.net"
        net.write_text(netfile.dumps(fabric))
        with IbSim(net, scratch, extra_args=netfile.ibsim_size_args(fabric)) as sim:
            state = scratch / "state"
            sm = subprocess.Popen([sys.executable, "-m", "smagent.cli", "--transport", "umad", "run", "--sweep-interval",
                                   "300", "--state-dir", str(state), "--log-file", str(scratch / "smagent.log")],
                                  env=sim.env, cwd=scratch, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True)
            try:
                sock = control.socket_path(state)
                t0 = time.monotonic()
                first = {}
                while time.monotonic() - t0 < 900 and not (first.get("state") == "MASTER" and first.get("sweeps")):
                    if sm.poll() is not None:
                        raise SystemExit(f"smagent run exited {sm.returncode}")
                    time.sleep(1.0)
                    first = status(sock)[1]
                out["first_sweep_s"] = (first.get("last_sweep") or {}).get("seconds")
                lids = sorted({int(line.split()[1], 0) for line in (state / "guid2lid").read_text().splitlines()
                               if line.strip() and not line.startswith("#")})
                stop = scratch / "client.stop"
                cl = subprocess.Popen([sys.executable, __file__, "--client", json.dumps(
                    {"lids": lids, "interval": a.interval_ms / 1000, "stop": str(stop), "seed": 24})],
                    env=dict(sim.env, SIM_HOST=a.client_host), cwd=scratch, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True)
                time.sleep(2.0)  # answers of an idle SM first
                idle_end = time.time()
                sweeps = status(sock)[1].get("sweeps", 0)
                sweep_start = time.time()
                sm.send_signal(signal.SIGHUP)  # a full sweep again
                out["resweep"] = watch_sweep(sock, sweeps, 900)
                sweep_end = time.time()
                sm.send_signal(signal.SIGHUP)  # another, stopped partway
                watch_sweep(sock, sweeps + 1, 900, until=a.stop_after or out["resweep"]["seconds"] / 2)
                term = time.monotonic()
                sm.send_signal(signal.SIGTERM)
                try:
                    sm.wait(30)
                    out["sigterm_to_exit_s"] = round(time.monotonic() - term, 3)
                except subprocess.TimeoutExpired:
                    out["sigterm_to_exit_s"] = None
                stop.write_text("")
                got, err = cl.communicate(timeout=60)
                if cl.returncode:
                    raise SystemExit(f"the client failed:\n{err[-2000:]}")
                samples = json.loads(got)
                out["idle"] = latencies(samples, 0, idle_end)
                out["during_resweep"] = latencies(samples, sweep_start, sweep_end)
            finally:
                if sm.poll() is None:
                    os.killpg(sm.pid, signal.SIGKILL)
                    sm.wait(30)
    out["load_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out, indent=2))
    if a.json:
        a.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
