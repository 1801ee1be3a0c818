#!/usr/bin/env python3
"""`smagent run` vs an OpenSM daemon on the same ibsim fabric: a leaf-to-spine link cut
(console `Unlink`) and restored (`ReLink`), and SM handovers.

Repair: each SM brings the fabric up and idles (periodic sweeps pushed out to 300 s, so
only the trap drives what follows); the link is cut; time to repair runs from the console
command to the end of the SM's work (smagent: its status' last sweep; OpenSM: the next
"SUBNET UP" in its log, by the log's own timestamp). SMPs are counted the same way for
both: `ibsim -v` packet lines (docs/PITFALLS.md), in a separate run from the timing (-v slows
ibsim).

Handover (default polling: 10 s interval, 4 retries, both SMs): a higher-priority SM joins
a running master (time until it is MASTER and the other STANDBY, by `sminfo`), then the
master is killed (time until the standby is MASTER).

    python bench/daemon_vs_opensm.py                   # 648-host 2-level fat tree (k=36)
    python bench/daemon_vs_opensm.py --fabric ft3-1000 --no-handover
    python bench/daemon_vs_opensm.py --fabric ft3-39366 --no-handover   # any of sweep_vs_opensm's fabrics

bench/largest_subnet.py runs these daemons on the largest trees, with a lost core switch, SA,
PerfMgr and metrics steps.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ibsim_harness import IbSim  # noqa: E402
from sweep_vs_opensm import count_packets, make_fabric  # noqa: E402  (one naming of the fabrics: ft2-648, ft3-HOSTS, ...)

from smagent.model import netfile  # noqa: E402
from smagent.sm import control  # noqa: E402

OPENSM = "/usr/sbin/opensm"


def cut_link(fabric) -> tuple[str, int]:
    """The first leaf's first port to a switch (its first uplink)."""
    text = netfile.dumps(fabric)
    leaf = fabric.switches()[0].name
    block = text[text.index(f'Switch\t{fabric.switches()[0].num_ports} "{leaf}"'):]
    for m in re.finditer(r'^\[(\d+)\]\s+"([^"]+)"', block, re.M):
        if any(s.name == m.group(2) for s in fabric.switches()):
            return leaf, int(m.group(1))
    raise SystemExit("no leaf-to-switch link found")


class SmagentRun:
    def __init__(self, sim, *args, host=None):
        self.state = sim.cwd / f"state-{host or 'h0'}"
        self.env = dict(sim.env, **({"SIM_HOST": host} if host else {}))
        self.proc = subprocess.Popen([sys.executable, "-m", "smagent.cli", "--transport", "umad", "run",
                                      "--state-dir", str(self.state), "--log-file",
                                      str(sim.cwd / f"smagent-{host or 'h0'}.log"), *args],
                                     env=self.env, cwd=sim.cwd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def status(self):
        """What `smagent status --json` shows, asked at the control socket from this process
        (a `smagent status` process per poll would take CPU from the daemon on a small machine)."""
        try:
            return control.query(control.socket_path(self.state), timeout=30)
        except control.ControlError:
            return {}

    def wait(self, pred, timeout=300, every=0.1):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"smagent run exited {self.proc.returncode}; log {self.state.parent}")
            s = self.status()
            if s and pred(s):
                return s
            time.sleep(every)
        raise SystemExit(f"smagent: condition not reached in {timeout} s: {self.status()}")

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(30)


def memory_mib(pid: int) -> dict:
    """Resident now and at its peak (VmRSS, VmHWM of /proc/PID/status), MiB."""
    text = Path(f"/proc/{pid}/status").read_text()
    return {k: round(int(re.search(rf"^{k}:\s+(\d+) kB", text, re.M)[1]) / 1024) for k in ("VmRSS", "VmHWM")}


class OpenSMRun:
    def __init__(self, sim, workdir: Path, *args, host=None):
        workdir.mkdir(parents=True, exist_ok=True)
        self.log = workdir / "opensm.log"
        env = sim.opensm_env(workdir, **({"SIM_HOST": host} if host else {}))
        self.proc = subprocess.Popen([OPENSM, "-f", str(self.log), "-d", "2", *args], env=env, cwd=workdir,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)

    def subnet_ups(self) -> list[float]:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        year = datetime.date.today().year
        out = []
        for m in re.finditer(r"^(\w{3} \d\d \d\d:\d\d:\d\d) (\d{6}) .*SUBNET UP", text, re.M):
            t = datetime.datetime.strptime(f"{year} {m.group(1)}", "%Y %b %d %H:%M:%S")
            out.append(t.timestamp() + int(m.group(2)) / 1e6)
        return out

    def wait_ups(self, n, timeout=300, every=0.1):
        deadline = time.monotonic() + timeout
        while len(ups := self.subnet_ups()) < n:
            if self.proc.poll() is not None:
                raise SystemExit(f"opensm exited {self.proc.returncode}; log {self.log}")
            if time.monotonic() > deadline:
                raise SystemExit(f"opensm: {n} x SUBNET UP not seen in {timeout} s; log {self.log}")
            time.sleep(every)
        return ups

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(30)


def repair_run(tool, net, size, cut, scratch: Path, count: bool) -> dict:
    """Bring up, cut, restore; returns seconds (and SMPs when `count`) for each step."""
    with IbSim(net, scratch, extra_args=[*size, *(["-v"] if count else [])], console=True) as sim:
        out = {}
        if tool == "smagent":
            sm = SmagentRun(sim, "--sweep-interval", "300")
            sm.wait(lambda s: s.get("state") == "MASTER" and s["sweeps"] >= 1)
        else:
            sm = OpenSMRun(sim, scratch / "osm", "-s", "300", "-R", "minhop")
            sm.wait_ups(1)
        try:
            for i, (what, act) in enumerate((("unlink", sim.unlink), ("relink", sim.relink)), 1):
                time.sleep(1.0)
                c0 = count_packets(sim.log) if count else 0
                t0 = time.time()
                act(*cut)
                if tool == "smagent":
                    s = sm.wait(lambda s: s["counters"]["repairs"] >= i)
                    done, extra = s["last_sweep"]["time"], {"incremental": s["last_sweep"]["incremental"],
                                                           "sets": s["last_sweep"]["sets"]}
                else:
                    done, extra = sm.wait_ups(1 + i)[i], {}
                time.sleep(1.0)
                out[what] = {"seconds": round(done - t0, 3), **extra}
                if count:
                    out[what]["smps"] = count_packets(sim.log) - c0
        finally:
            sm.stop()
    return out


def sminfo_state(sim, host) -> str:
    r = subprocess.run(["/usr/sbin/sminfo", "-D", "0"], env=dict(sim.env, SIM_HOST=host), cwd=sim.cwd,
                       capture_output=True, text=True)
    m = re.search(r"SMINFO_(\w+)", r.stdout)
    return m.group(1) if m else "?"


def wait_states(sim, want: dict, timeout=300) -> float:
    t0 = time.monotonic()
    while {h: sminfo_state(sim, h) for h in want} != want:
        if time.monotonic() - t0 > timeout:
            raise SystemExit(f"never {want}")
        time.sleep(0.2)
    return time.monotonic() - t0


def handover_run(net, size, scratch: Path, fabric) -> dict:
    """Both orders; default polling for both SMs. Times by sminfo at each SM's port."""
    ours, theirs = fabric.cas()[0].name, fabric.cas()[-1].name
    out = {}
    with IbSim(net, scratch / "a", extra_args=size, console=True) as sim:
        sm = SmagentRun(sim, "--priority", "1")
        sm.wait(lambda s: s.get("state") == "MASTER" and s["sweeps"] >= 1)
        osm = OpenSMRun(sim, scratch / "a" / "osm", "-p", "5", host=theirs)
        out["opensm_joins_higher"] = round(wait_states(sim, {theirs: "MASTER", ours: "STANDBY"}), 2)
        osm.stop()
        out["smagent_takes_over_after_opensm_killed"] = round(wait_states(sim, {ours: "MASTER"}), 2)
        sm.stop()
    with IbSim(net, scratch / "b", extra_args=size, console=True) as sim:
        osm = OpenSMRun(sim, scratch / "b" / "osm", "-p", "1", host=theirs)
        osm.wait_ups(1)
        sm = SmagentRun(sim, "--priority", "5")
        out["smagent_joins_higher"] = round(wait_states(sim, {ours: "MASTER", theirs: "STANDBY"}), 2)
        sm.stop(signal.SIGKILL)
        out["opensm_takes_over_after_smagent_killed"] = round(wait_states(sim, {theirs: "MASTER"}), 2)
        osm.stop()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fabric", default="ft2-648")
    ap.add_argument("--no-handover", action="store_true")
    ap.add_argument("--no-repair", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    fabric = make_fabric(a.fabric)
    cut = cut_link(fabric)
    res = {"fabric": a.fabric, "hosts": len(fabric.cas()), "switches": len(fabric.switches()), "cut": cut}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        net = tmp / "fabric.net"
        net.write_text(netfile.dumps(fabric))
        size = netfile.ibsim_size_args(fabric)
        for tool in () if a.no_repair else ("smagent", "opensm"):
            counted = repair_run(tool, net, size, cut, tmp / f"count-{tool}", count=True)
            timed = repair_run(tool, net, size, cut, tmp / f"time-{tool}", count=False)
            res[tool] = {k: {**timed[k], "smps": counted[k]["smps"]} for k in timed}
        if not a.no_handover:
            res["handover_s"] = handover_run(net, size, tmp / "handover", fabric)
    if a.json:
        print(json.dumps(res, indent=2))
        return
    print(f"fabric {res['fabric']}: {res['hosts']} hosts, {res['switches']} switches; cut {cut[0]}[{cut[1]}]")
    for what in () if a.no_repair else ("unlink", "relink"):
        s, o = res["smagent"][what], res["opensm"][what]
        print(f"  {what}: smagent {s['smps']:6d} SMPs {s['seconds']:.3f} s | opensm {o['smps']:6d} SMPs "
              f"{o['seconds']:.3f} s | SMP ratio {s['smps'] / o['smps']:.3f}")
    for k, v in res.get("handover_s", {}).items():
        print(f"  {k}: {v} s")


if __name__ == "__main__":
    main()
