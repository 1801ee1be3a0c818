#!/usr/bin/env python3
"""SA PathRecord answers per second: `smagent run` vs OpenSM on the same ibsim fabric.

Each SM in turn brings the fabric up alone; then a client on another node (SIM_HOST, its
own umad agent for class 0x03: smagent's UmadTransport with SA_CLIENT) floods the SM's SA
with SubnAdmGet(PathRecord) by SLID/DLID over random CA pairs, a window of requests in
flight, for a fixed time, and counts the answers with status 0. Not a test: the figures
are reported, never asserted (ibsim carries every MAD through one socket, so they measure
SA, simulator and client together; both SMs pay the same simulator).

    python bench/sa_vs_opensm.py                        # 2-level fat tree, k=8 (32 hosts)
    python bench/sa_vs_opensm.py --fabric ft2-12 --seconds 10 --window 16 --json out.json

Each SM runs `--rounds` times (3), the two taking turns (a shared machine's load moves);
each run prints the load before it and the SM's own CPU time per answer (/proc), the
figure that load moves least, and the CPU time ibsim and the client spent per answer (on
two cores the three share the machine). Neither SM sweeps during the flood (OpenSM -s 0,
smagent --sweep-interval 0). `--client-host H1,H9,H17` floods from a client on each node
at once (their rates add up): with several, the SM's cost decides more than one client's
round trips do.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ibsim_harness import IbSim  # noqa: E402

from smagent.model import netfile, topogen  # noqa: E402

OPENSM = "/usr/sbin/opensm"


def client(lids: list[int], seconds: float, window: int, seed: int) -> dict:
    """Flood PathRecord Gets (runs in the client's process, on its own ibsim node)."""
    from mad import sa
    from mad.header import Method
    from mad.sa_records import PathRecord
    from mad.smp import next_tid
    from smagent.sa.client import sa_address
    from smagent.transport import open_transport
    from smagent.transport.base import Request
    from smagent.transport.umad import SA_CLIENT
    t = open_transport("umad", classes=[SA_CLIENT], window=window, retries=0)
    addr = sa_address(t)
    rng = random.Random(seed)
    mask = PathRecord.mask("slid", "dlid")
    sent = ok = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        batch = []
        for _ in range(window * 8):
            s, d = rng.sample(lids, 2)
            q = sa.request(Method.GET, PathRecord(slid=s, dlid=d), component_mask=mask, transaction_id=next_tid())
            batch.append(Request.gmp(q.encode(), addr))
        replies = t.execute(batch)
        sent += len(batch)
        ok += sum(1 for r in replies if r.error is None and r.raw is not None
                  and not int.from_bytes(r.raw[4:6], "big"))
    elapsed = time.monotonic() - t0
    t.close()
    cpu = os.times()
    return {"sent": sent, "answered": ok, "seconds": round(elapsed, 3), "per_second": round(ok / elapsed, 1),
            "client_cpu_us_per_answer": round((cpu.user + cpu.system) * 1e6 / max(1, ok), 1)}


def ca_lids(sim) -> list[int]:
    text = sim.run(["ibnetdiscover"]).stdout
    return sorted({int(m.group(1)) for m in re.finditer(r"^\[\d+\]\(\w+\)\s.*#\s+lid (\d+) lmc", text, re.M)})


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU time of a process so far (/proc/PID/stat, fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / os.sysconf("SC_CLK_TCK"), int(fields[12]) / os.sysconf("SC_CLK_TCK")


def wait_sa(sim, proc, seconds=120):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the SM exited {proc.returncode}")
        if sim.run(["saquery", "-c"], check=False).returncode == 0:
            return
        time.sleep(0.5)
    raise SystemExit(f"no SA answer in {seconds} s")


def run_one(tool: str, net: Path, scratch: Path, a) -> dict:
    with IbSim(net, scratch) as sim:
        if tool == "smagent":
            args = [sys.executable, "-m", "smagent.cli", "--transport", "umad", "run", "--state-dir",
                    str(scratch / "state"), "--log-file", str(scratch / "smagent.log"), "--sweep-interval", "0"]
            env = sim.env
        else:
            args = [OPENSM, "-f", str(scratch / "opensm.log"), "-s", "0"]  # neither SM sweeps during the flood
            env = sim.opensm_env(scratch / "osm")
        proc = subprocess.Popen(args, env=env, cwd=scratch, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            wait_sa(sim, proc)
            lids = ca_lids(sim)
            spy = None
            if a.profile and tool == "smagent":  # py-spy samples the daemon while the client floods it
                spy = subprocess.Popen(["py-spy", "record", "--pid", str(proc.pid), "--rate", "1000", "--format", "raw",
                                        "--duration", str(int(a.seconds)), "-o", str(a.profile)],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            cpu0, sim0 = cpu_seconds(proc.pid), cpu_seconds(sim.proc.pid)
            hosts = a.client_host.split(",")
            clients = [subprocess.Popen([sys.executable, __file__, "--client", json.dumps(
                {"lids": lids, "seconds": a.seconds, "window": a.window, "seed": a.seed + n})],
                env=dict(sim.env, SIM_HOST=host), cwd=scratch, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for n, host in enumerate(hosts)]
            outs = [c.communicate(timeout=a.seconds * 4 + 60) + (c.returncode,) for c in clients]
            cpu1, sim1 = cpu_seconds(proc.pid), cpu_seconds(sim.proc.pid)
            user, system = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
            cpu = user + system
            if spy is not None:
                spy.wait(60)
            for stdout, stderr, rc in outs:
                if rc:
                    raise SystemExit(f"a client failed ({tool}):\n{stderr[-2000:]}")
            each = [json.loads(stdout) for stdout, _e, _rc in outs]
            out = {k: sum(c[k] for c in each) for k in ("sent", "answered")}
            out["seconds"] = max(c["seconds"] for c in each)
            out["per_second"] = round(sum(c["per_second"] for c in each), 1)
            out["client_cpu_us_per_answer"] = round(sum(c["client_cpu_us_per_answer"] * c["answered"] for c in each)
                                                    / max(1, out["answered"]), 1)
            out["sm_cpu_s"] = round(cpu, 3)  # the SM's own CPU time during the flood
            out["sm_cpu_system_s"] = round(system, 3)  # of which in the kernel
            out["sm_cpu_us_per_answer"] = round(cpu * 1e6 / max(1, out["answered"]), 1)
            # the simulator carries both MADs of each answer; with the client, what the SM shares two cores with
            out["ibsim_cpu_us_per_answer"] = round((sum(sim1) - sum(sim0)) * 1e6 / max(1, out["answered"]), 1)
            return out
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(30)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fabric", default="ft2-8", help="ft2-K: a 2-level fat tree of K-port switches")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--window", type=int, default=8, help="requests in flight")
    p.add_argument("--seed", type=int, default=24)
    p.add_argument("--client-host", default="H1", help="the ibsim node the client runs on; several, comma-separated: "
                   "a client on each, flooding at once (their answers per second add up)")
    p.add_argument("--rounds", type=int, default=3, help="each SM this many times, taking turns")
    p.add_argument("--json", type=Path, help="also write the figures here")
    p.add_argument("--profile", type=Path, help="py-spy's collapsed stacks of smagent's daemon (last round) here (py-spy installed: "
                   "pip install py-spy)")
    p.add_argument("--client", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.client:
        c = json.loads(a.client)
        print(json.dumps(client(c["lids"], c["seconds"], c["window"], c["seed"])))
        return
    m = re.fullmatch(r"ft2-(\d+)", a.fabric)
    if not m:
        raise SystemExit(f"unknown fabric {a.fabric!r}: ft2-K")
    out: dict = {"fabric": a.fabric, "window": a.window, "opensm": [], "smagent": []}
    with tempfile.TemporaryDirectory(prefix="sa-bench-") as tmp:
        net = Path(tmp) / "fabric.net"
        net.write_text(netfile.dumps(topogen.fat_tree_2(int(m.group(1)))))
        for n in range(a.rounds):  # taking turns: a shared machine's load moves
            for tool in ("opensm", "smagent"):
                load = os.getloadavg()[0]
                r = run_one(tool, net, Path(tmp) / f"{tool}{n}", a)
                out[tool].append(dict(r, load=round(load, 2)))
                print(f"{tool:8} {r['per_second']:>9} PathRecords/s ({r['answered']} of {r['sent']} in "
                      f"{r['seconds']} s; SM CPU {r['sm_cpu_us_per_answer']} us/answer, "
                      f"{r['sm_cpu_system_s'] / max(r['sm_cpu_s'], 1e-9):.0%} system; ibsim {r['ibsim_cpu_us_per_answer']}, client "
                      f"{r['client_cpu_us_per_answer']} us/answer; load {load:.2f} before)",
                      flush=True)
        for tool in ("opensm", "smagent"):
            best = max(r["per_second"] for r in out[tool])
            print(f"{tool:8} best {best:>9} PathRecords/s of {a.rounds}", flush=True)
        ratios = sorted(m["per_second"] / o["per_second"] for o, m in zip(out["opensm"], out["smagent"]))
        print(f"smagent/opensm round by round: {', '.join(f'{r:.2f}' for r in ratios)} "
              f"(median {statistics.median(ratios):.2f})", flush=True)
    if a.json:
        a.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
