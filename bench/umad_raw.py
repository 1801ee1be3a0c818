#!/usr/bin/env python3
"""Raw libibumad round trips per second, below any codec or agent logic.

A bare loop sends directed-route NodeInfo SubnGets (to hop 0 unless --path
says otherwise) through smagent.transport.umad_lib.UmadPort and keeps WINDOW
requests in flight, matching answers on the low 32 bits of the TID (the upper
half is rewritten with the agent id by the kernel / umad2sim).

By default it starts its own ibsim (``ibsim -n -s NETFILE`` with a unique
IBSIM_SOCKNAME in a scratch directory) and re-runs itself under umad2sim's
LD_PRELOAD; ``--live`` measures the real local port instead (no ibsim).

    python bench/umad_raw.py                       # windows 1,4,8,16; 5 runs each
    python bench/umad_raw.py --count 50000 --runs 7 --windows 1,2,4,8,16,32
    python bench/umad_raw.py --pin 0                # everything on one CPU: steadier figures
    python bench/umad_raw.py --live --ca mlx5_0 --port 1

Prints the median of the runs per window (plus min/max), then exits.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # runnable from a checkout without installing

UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
DEFAULT_NET = REPO / "tests" / "vectors" / "ibsim-2sw4hca.net"
CHILD_FLAG = "--_child"


def dr_nodeinfo_get(path: list[int]) -> bytearray:
    """A directed-route SubnGet(NodeInfo) along ``path`` (exit ports after hop 0)."""
    if len(path) > 63:
        raise SystemExit(f"DR path has {len(path)} hops; at most 63")
    m = bytearray(256)
    m[0:4] = bytes([1, 0x81, 1, 0x01])  # base version, SubnAdmin-DR class, class version, SubnGet
    m[7] = len(path)  # hop pointer 0, hop count
    m[16:18] = (0x0011).to_bytes(2, "big")  # NodeInfo
    m[32:36] = b"\xff\xff\xff\xff"  # DrSLID, DrDLID permissive
    for hop, port in enumerate(path, 1):
        m[128 + hop] = port  # InitialPath[hop]; entry 0 unused
    return m


def measure(port, agent: int, window: int, count: int, path: list[int]) -> dict:
    from smagent.transport.umad_lib import STATUS_TIMEOUT

    mad = dr_nodeinfo_get(path)
    tid_view = memoryview(mad)[12:16]  # low TID half, big-endian
    send, recv = port.send, port.recv
    outstanding: set[int] = set()
    next_tid = 1
    sent = done = errors = stray = 0

    def send_one():
        nonlocal next_tid, sent
        tid_view[:] = next_tid.to_bytes(4, "big")
        send(agent, mad, 0xFFFF)
        outstanding.add(next_tid)
        next_tid = (next_tid + 1) & 0xFFFFFFFF or 1
        sent += 1

    t0 = time.perf_counter()
    while sent < min(window, count):
        send_one()
    while done < count:
        got = recv(2000)
        if got is None:
            raise SystemExit(f"no answer within 2 s with {len(outstanding)} outstanding (window {window})")
        answer, status = got
        low = int.from_bytes(answer[12:16], "big")
        if low not in outstanding:
            stray += 1
            continue
        outstanding.discard(low)
        done += 1
        if status == STATUS_TIMEOUT or (answer[4] & 0x7F) or answer[5]:
            errors += 1
        if sent < count:
            send_one()
    elapsed = time.perf_counter() - t0
    return {"window": window, "count": count, "seconds": elapsed, "rate": count / elapsed,
            "errors": errors, "stray": stray}


def child(args) -> None:
    from smagent.transport.umad_lib import UmadPort

    path = [int(p) for p in args.path.split(",")[1:]]
    results = []
    with UmadPort(args.ca, args.port) as port:
        agent = port.register(0x81)
        measure(port, agent, 1, min(2000, args.count), path)  # warm-up
        for window in args.windows:
            for _ in range(args.runs):
                results.append(measure(port, agent, window, args.count, path))
    json.dump(results, sys.stdout)


def wait_ready(env: dict, cwd: str, proc: subprocess.Popen, deadline_s: float = 5.0) -> None:
    end = time.monotonic() + deadline_s
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"ibsim exited early with code {proc.returncode}")
        r = subprocess.run(["smpquery", "-D", "nodeinfo", "0"], env=env, cwd=cwd,
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
        if r.returncode == 0:
            return
        if time.monotonic() > end:
            raise SystemExit(f"ibsim not ready after {deadline_s} s: {r.stderr.decode().strip()}")
        time.sleep(0.1)


def parent(args, argv: list[str]) -> list[dict]:
    cmd = [sys.executable, str(Path(__file__).resolve()), CHILD_FLAG] + argv
    if args.live:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(r.stderr.strip() or f"child failed ({r.returncode})")
        return json.loads(r.stdout)

    for tool in ("ibsim", "smpquery"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} not found: apt install ibsim-utils infiniband-diags (or use --live)")
    if not os.path.exists(UMAD2SIM):
        raise SystemExit(f"{UMAD2SIM} missing: apt install libumad2sim0 (or use --live)")
    scratch = tempfile.mkdtemp(prefix="umad_raw-")
    env = dict(os.environ, IBSIM_SOCKNAME=f"umadraw{os.getpid()}")
    env.pop("LD_PRELOAD", None)  # ibsim itself must not run under umad2sim
    client_env = dict(env, LD_PRELOAD=UMAD2SIM)
    sim = subprocess.Popen(["ibsim", "-n", "-s", str(args.net)], cwd=scratch, env=env,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_ready(client_env, scratch, sim)
        r = subprocess.run(cmd, cwd=scratch, env=client_env,
                           capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(r.stderr.strip() or f"child failed ({r.returncode})")
        return json.loads(r.stdout)
    finally:
        os.killpg(sim.pid, signal.SIGTERM)
        try:
            sim.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(sim.pid, signal.SIGKILL)
            sim.wait()
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=20000, help="round trips per run (default 20000)")
    ap.add_argument("--runs", type=int, default=5, help="runs per window; the median is reported (default 5)")
    ap.add_argument("--windows", type=lambda s: [int(w) for w in s.split(",")], default=[1, 4, 8, 16],
                    help="comma-separated in-flight windows (default 1,4,8,16)")
    ap.add_argument("--path", default="0", help="DR path as smpquery writes it (default 0 = hop 0)")
    ap.add_argument("--net", type=Path, default=DEFAULT_NET, help="ibsim topology (default tests/vectors/ibsim-2sw4hca.net)")
    ap.add_argument("--live", action="store_true", help="measure the real local port; no ibsim, no LD_PRELOAD")
    ap.add_argument("--ca", default=None, help="CA name (default: libibumad's choice)")
    ap.add_argument("--port", type=int, default=None, help="port number (default: libibumad's choice)")
    ap.add_argument("--pin", default=None,
                    help="CPU list (e.g. 0 or 0,1) for ibsim and the client; unpinned results on a "
                         "2-core VM are bimodal (same-core vs cross-core wake-ups)")
    ap.add_argument(CHILD_FLAG, dest="child", action="store_true", help=argparse.SUPPRESS)
    argv = sys.argv[1:]
    args = ap.parse_args(argv)
    if args.child:
        child(args)
        return

    if args.pin:
        os.sched_setaffinity(0, {int(c) for c in args.pin.split(",")})  # inherited by ibsim and the child
    results = parent(args, argv)
    where = "live port" if args.live else f"ibsim {args.net.name}, umad2sim"
    if args.pin:
        where += f", pinned to CPU {args.pin}"
    print(f"raw libibumad NodeInfo DR Get round trips, path {args.path}, {where}; "
          f"{args.count} per run, median of {args.runs}")
    print(f"{'window':>6} {'median/s':>10} {'min/s':>10} {'max/s':>10} {'errors':>7}")
    for window in args.windows:
        rates = [r["rate"] for r in results if r["window"] == window]
        errs = sum(r["errors"] for r in results if r["window"] == window)
        print(f"{window:>6} {statistics.median(rates):>10.0f} {min(rates):>10.0f} {max(rates):>10.0f} {errs:>7}")


if __name__ == "__main__":
    main()
