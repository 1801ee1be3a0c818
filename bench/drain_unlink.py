#!/usr/bin/env python3
"""Drain, then unlink, a core switch of a 3-level fat tree on ibsim (issue 40, first goal),
with every host pair's delivery sampled over and over the whole time; and the same core
simply pulled under OpenSM.

smagent: `smagent run` routes the fabric; a sampler starts; `smagent drain CORE` goes through
the daemon's control socket and reports the core safe to remove; every port of the core is
then unlinked on ibsim's console (`Unlink "CORE"`); sampling goes on until the daemon has
repaired after the traps, and a little longer. OpenSM: the same fabric, the same sampler, the
core unlinked with no drain, sampling until OpenSM's next "SUBNET UP" and a little longer.

The sampler is a separate client of ibsim on another host (the last one; the SM runs on
the first). It discovers the fabric once by directed route, then reads every switch's LFT
blocks with directed-route Gets (DR paths that avoid the core, so the reads never depend on
the LFTs they measure nor on the core's cables), and follows every ordered host pair through
those tables: a pair is unreachable when its route meets an unset entry (255), a port with
no cable, a host other than its destination, or goes round. Each sample is timestamped when
its first Get is sent and when its last answer came. Once the core is unlinked (from the
sample that ends after the console command on) its cables count as gone. A sample in which
some switch's LFT went unanswered (500 ms, 2 retries: it happens on a loaded machine) counts
nothing and is left out (how many is printed); the core's own table may be missing once
unlinked.

A sample is a snapshot read over its own duration: a black hole shorter than the sample
period can fall between two reads of the switch that holds it and be missed; the period
achieved is printed. Windows with unreachable pairs are given as bounds: at least from the
end of the first sample that saw them to the start of the last one, at most from the end of
the last clean sample before to the start of the first clean one after.

Independent checks: ibroute (LID-routed, infiniband-diags) reads every switch's LFT after the
drain and at the end, and the same pair walk counts the unreachable pairs in them. The drain's
SMPs: the daemon's own count (`smps_sent`, status before and after) in the sampled run, and
`ibsim -v` packet lines in a separate run with no sampler (`--count-smps`).

    python bench/drain_unlink.py                          # 250 hosts: 3-level tree, k=10
    python bench/drain_unlink.py --k 36 --hosts 648       # 648 hosts, 396 switches
    python bench/drain_unlink.py --count-smps --no-opensm
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "support"))

from daemon_vs_opensm import OpenSMRun, SmagentRun, count_packets  # noqa: E402
from ibsim_harness import IbSim  # noqa: E402

from smagent.model import netfile, topogen  # noqa: E402

SETTLE_S = 2.0  # sampling before the drain, between the drain and the unlink, after the repair
PHASES = ("before drain", "during drain", "drained, before unlink", "after unlink")


# -- the fabric as the sampler found it, and the pair walk ---------------------------------
class Model:
    """Switches (index, name, LID), cables between switch ports and to hosts, host LIDs and
    their switch: built once by the sampler (`from_topology`), saved as JSON for the bench."""

    def __init__(self, doc: dict):
        self.doc = doc
        self.names = doc["names"]
        self.lids = doc["lids"]
        self.host_lids = np.array(doc["host_lids"], dtype=np.int64)
        self.host_sw = np.array(doc["host_sw"], dtype=np.int64)
        n = len(self.names)
        self.idx = {name: i for i, name in enumerate(self.names)}
        self.peer_sw = np.full((n + 2, 256), -1, dtype=np.int64)  # switch port -> switch index
        self.peer_host = np.full((n + 2, 256), -1, dtype=np.int64)  # switch port -> host LID
        for s, p, t in doc["sw_links"]:
            self.peer_sw[s, p] = t
        for s, p, lid in doc["host_links"]:
            self.peer_host[s, p] = lid
        srcs = sorted(set(doc["host_sw"]))
        self.srcs = np.array(srcs, dtype=np.int64)
        count = collections.Counter(doc["host_sw"])
        w = np.array([[count[s] for _ in doc["host_lids"]] for s in srcs], dtype=np.int64)
        w -= (self.srcs[:, None] == self.host_sw[None, :])  # not a host to itself
        self.weights = w
        self.pairs = int(w.sum())

    @classmethod
    def from_topology(cls, topo) -> "Model":
        sws = sorted(topo.switches(), key=lambda n: n.lid())
        at = {n.guid: i for i, n in enumerate(sws)}
        sw_links, host_links, host_lids, host_sw = [], [], [], []
        for (g, p), (h, q) in topo.links.items():
            if g not in at:
                continue
            if h in at:
                sw_links.append((at[g], p, at[h]))
            else:
                lid = topo.nodes[h].lid(q)
                host_links.append((at[g], p, lid))
                host_lids.append(lid)
                host_sw.append(at[g])
        order = sorted(range(len(host_lids)), key=host_lids.__getitem__)
        return cls({"names": [n.description for n in sws], "lids": [n.lid() for n in sws],
                    "guids": [n.guid for n in sws], "sw_links": sorted(sw_links), "host_links": sorted(host_links),
                    "host_lids": [host_lids[i] for i in order], "host_sw": [host_sw[i] for i in order]})

    def unreachable(self, tables: list[bytes | None], gone: str | None = None) -> int:
        """Ordered host pairs the `tables` (one LFT per switch, None: unread) do not deliver,
        with the switch `gone` and its cables taken out when given."""
        n = len(self.names)
        deliv, fail = n, n + 1
        top = max(int(self.host_lids.max()) + 1, max((len(t) for t in tables if t), default=0))
        lft = np.full((n + 2, top), 255, dtype=np.int64)
        for i, t in enumerate(tables):
            if t:
                lft[i, :len(t)] = np.frombuffer(t, dtype=np.uint8)
        peer_sw, peer_host = self.peer_sw.copy(), self.peer_host.copy()
        if gone is not None:
            g = self.idx[gone]
            peer_sw[g], peer_host[g] = -1, -1
            peer_sw[peer_sw == g] = -1
        ports = lft[:, self.host_lids]  # (switch, destination)
        rows = np.arange(n + 2)[:, None]
        nxt_sw = peer_sw[rows, ports]
        at_host = peer_host[rows, ports]
        nxt = np.where(nxt_sw >= 0, nxt_sw, np.where(at_host == self.host_lids[None, :], deliv, fail))
        nxt[deliv], nxt[fail] = deliv, fail
        cols = np.arange(len(self.host_lids))[None, :]
        cur = np.broadcast_to(self.srcs[:, None], self.weights.shape)
        for _hop in range(64):
            cur = nxt[cur, cols]
        return int(self.weights[cur != deliv].sum())


# -- the sampler (a client of ibsim on another host) ---------------------------------------
def dr_paths(topo, avoid: str) -> dict[int, tuple[int, ...]]:
    """A shortest DR path to every switch that crosses no switch called `avoid` (it may end there)."""
    start = topo.local
    paths = {start[0]: (0,)}
    q = collections.deque([start[0]])
    while q:
        g = q.popleft()
        node = topo.nodes[g]
        if g != start[0] and node.description == avoid:
            continue
        ports = [start[1]] if not node.is_switch else range(1, node.num_ports + 1)
        for p in ports:
            peer = topo.links.get((g, p))
            if peer and peer[0] not in paths and topo.nodes[peer[0]].is_switch:
                paths[peer[0]] = (*paths[g], p)
                q.append(peer[0])
    return {g: p for g, p in paths.items() if topo.nodes[g].is_switch}


def sampler(out: Path, avoid: str, stop: Path) -> None:
    from mad.attributes import AttrID
    from mad.header import Method
    from smagent import discovery
    from smagent.transport.base import Request
    from smagent.transport.umad import UmadTransport

    with UmadTransport(timeout_ms=500, retries=2) as t:
        topo = discovery.discover(t)
        model = Model.from_topology(topo)
        paths = dr_paths(topo, avoid)
        by_lid = {n.lid(): n.guid for n in topo.switches()}
        blocks = sorted({int(lid) // 64 for lid in model.host_lids})  # only host pairs are walked
        size = 64 * (blocks[-1] + 1)
        where = [(i, paths[by_lid[lid]], b) for i, lid in enumerate(model.lids) for b in blocks]
        (out.parent / (out.name + ".model")).write_text(json.dumps(model.doc))
        with open(out, "w") as f:
            while not stop.exists():
                t0 = time.time()
                replies = t.execute([Request.dr(Method.GET, AttrID.LINEAR_FORWARDING_TABLE, path, b)
                                     for _i, path, b in where])
                t1 = time.time()
                parts = [bytearray(b"\xff" * size) for _ in model.lids]
                errors = collections.Counter()
                for r, (i, _path, b) in zip(replies, where):
                    if r.ok:
                        parts[i][64 * b:64 * (b + 1)] = r.data
                    else:
                        errors[i] += 1
                tables = [None if errors[i] else bytes(p) for i, p in enumerate(parts)]
                f.write(json.dumps({"t0": t0, "t1": t1, "unread": sorted(model.names[i] for i in errors),
                                    "intact": model.unreachable(tables), "cut": model.unreachable(tables, avoid),
                                    "smps": len(replies)}) + "\n")
                f.flush()


class Sampler:
    """The sampler as a process on `host`; `samples()` reads what it wrote."""

    def __init__(self, sim, host: str, core: str):
        self.out = sim.cwd / "samples.jsonl"
        self.stopfile = sim.cwd / "samples.stop"
        self.proc = subprocess.Popen([sys.executable, __file__, "--sampler", str(self.out), "--core", core,
                                      "--stop-file", str(self.stopfile)],
                                     env=dict(sim.env, SIM_HOST=host), cwd=sim.cwd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=open(sim.cwd / "sampler.stderr", "wb"))
        deadline = time.monotonic() + 120
        while len(self.samples()) < 3:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"sampler: no samples; {(sim.cwd / 'sampler.stderr').read_text()[-2000:]}")
            time.sleep(0.1)
        self.model = Model(json.loads((self.out.parent / (self.out.name + ".model")).read_text()))

    def samples(self) -> list[dict]:
        if not self.out.exists():
            return []
        return [json.loads(line) for line in self.out.read_text().splitlines() if line.endswith("}")]

    def stop(self) -> list[dict]:
        self.stopfile.touch()
        self.proc.wait(60)
        return self.samples()


# -- the independent witness: ibroute ------------------------------------------------------
def ibroute_unreachable(sim, model: Model, gone: str | None = None, skip: str | None = None) -> int:
    """The pair walk on every switch's LFT as ibroute dumps it (4 in parallel); `skip`: a
    switch not read (drained: its own LID is not routed), its table taken as empty."""
    def read(i):
        if model.names[i] in (gone, skip):
            return None
        text = sim.run(["ibroute", "-n", str(model.lids[i])], timeout=60).stdout
        t = bytearray([255]) * (int(model.host_lids.max()) + 1)
        for a, b in re.findall(r"^(0x[0-9a-f]+) (\d+)", text, re.M):
            if int(a, 16) < len(t):
                t[int(a, 16)] = int(b)
        return bytes(t)
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        tables = list(ex.map(read, range(len(model.names))))
    return model.unreachable(tables, gone)


# -- the runs ----------------------------------------------------------------------------------
def phase_of(s: dict, marks: dict) -> list[str]:
    """Every phase a sample overlaps (a sample read across the drain's start or end counts in
    both); a sample that ends after the unlink is walked without the core's cables, and is
    of the last phase only."""
    if s["t1"] > marks["unlink"]:
        return [PHASES[3]]
    bounds = [(PHASES[0], 0, marks.get("drain", marks["unlink"])),
              (PHASES[1], marks.get("drain", marks["unlink"]), marks.get("safe", marks["unlink"])),
              (PHASES[2], marks.get("safe", marks["unlink"]), marks["unlink"])]
    return [name for name, a, b in bounds if b > a and s["t0"] < b and s["t1"] > a]


def windows(samples: list[dict]) -> list[dict]:
    """Runs of samples with unreachable pairs: their peak and the bounds of their duration."""
    out, run = [], []
    for i, s in enumerate(samples + [None]):
        if s is not None and s["unreachable"]:
            run.append(i)
            continue
        if run:
            a, b = run[0], run[-1]
            after = samples[b + 1]["t0"] if b + 1 < len(samples) else None
            out.append({"peak": max(samples[j]["unreachable"] for j in run), "samples": len(run),
                        "from": samples[a]["t0"], "at_least_s": max(0.0, samples[b]["t0"] - samples[a]["t1"]),
                        "at_most_s": None if after is None or a == 0 else after - samples[a - 1]["t1"]})
            run = []
    return out


def complete(s: dict, marks: dict, core: str) -> bool:
    """Every switch's LFT read (the core's may be missing once its cables are gone)."""
    return not set(s["unread"]) - ({core} if s["t1"] > marks["unlink"] else set())


def summarise(everything: list[dict], marks: dict, core: str) -> dict:
    samples = [s for s in everything if complete(s, marks, core)]
    for s in samples:
        s["unreachable"] = s["cut"] if s["t1"] > marks["unlink"] else s["intact"]
    phases = {p: [s for s in samples if p in phase_of(s, marks)] for p in PHASES}
    name = (lambda p: p) if "drain" in marks else (lambda p: "before unlink" if p == PHASES[0] else p)  # noqa: E731
    periods = [b["t0"] - a["t0"] for a, b in zip(samples, samples[1:])]
    durations = [s["t1"] - s["t0"] for s in samples]
    after = [s for s in samples if s["t0"] > marks["unlink"] and s["unreachable"] == 0]
    return {
        "samples": len(samples), "period_s": {"median": float(np.median(periods)), "max": max(periods)},
        "read_s": {"median": float(np.median(durations)), "max": max(durations)},
        "smps_per_sample": samples[0]["smps"],
        # the pairs that cross the core before anything is done: what pulling it would black-hole
        "through_core_before": max(s["cut"] for s in samples if s["t1"] < marks.get("drain", marks["unlink"])),
        "max_unreachable": {name(p): max(s["unreachable"] for s in ss) for p, ss in phases.items() if ss},
        "samples_per_phase": {name(p): len(ss) for p, ss in phases.items() if ss},
        "period_per_phase_s": {name(p): round(float(np.median([b["t0"] - a["t0"] for a, b in zip(ss, ss[1:])])), 3)
                               for p, ss in phases.items() if len(ss) > 1},
        # samples left out: some switch's LFT went unanswered (after retries), so no count
        "incomplete": {"samples": len(everything) - len(samples),
                       "switches": sorted({n for s in everything if not complete(s, marks, core) for n in s["unread"]})},
        "windows": [{**w, "from": round(w["from"] - marks["unlink"], 3)} for w in windows(samples)],
        "first_clean_after_unlink_s": round(after[0]["t0"] - marks["unlink"], 3) if after else None,
    }


def smagent_run(net, size, scratch: Path, core: str, sampler_host: str) -> dict:
    with IbSim(net, scratch, extra_args=size, console=True) as sim:
        sm = SmagentRun(sim, "--sweep-interval", "300")
        try:
            sm.wait(lambda s: s.get("state") == "MASTER" and s["sweeps"] >= 1 and s["last_sweep"]["ok"]
                    and s["activity"] is None)
            smp = Sampler(sim, sampler_host, core)
            try:
                time.sleep(SETTLE_S)
                s0 = sm.status()
                marks = {"drain": time.time()}
                r = sim.smagent("drain", "--json", "--state-dir", sm.state, core, check=False, timeout=300)
                marks["safe"] = time.time()
                s1 = sm.status()
                answer = json.loads(r.stdout) if r.stdout.strip() else {"error": r.stderr}
                drained_ibroute = ibroute_unreachable(sim, smp.model, skip=core)
                time.sleep(SETTLE_S)
                marks["unlink"] = time.time()
                sim.unlink(core)
                s2 = sm.wait(lambda s: s["counters"]["repairs"] + s["sweeps"] > s1["counters"]["repairs"] + s1["sweeps"]
                             and s["activity"] is None, timeout=120)
                marks["swept"] = s2["last_sweep"]["time"]
                time.sleep(SETTLE_S)
            finally:
                samples = smp.stop()
            end_ibroute = ibroute_unreachable(sim, smp.model, gone=core)
        finally:
            sm.stop()
    return {"drain": {"exit": r.returncode, "seconds": round(marks["safe"] - marks["drain"], 3),
                      "smps_sent": s1["smps_sent"] - s0["smps_sent"],
                      "entries_left": len(answer.get("entries_left") or []),
                      **{k: answer[k] for k in ("sets", "rerouted", "safe_to_remove", "error") if k in answer}},
            "repair": {"seconds": round(marks["swept"] - marks["unlink"], 3), "incremental":
                       s2["last_sweep"].get("incremental"), "sets": s2["last_sweep"].get("sets")},
            "ibroute_unreachable": {"drained, before unlink": drained_ibroute, "end": end_ibroute},
            **summarise(samples, marks, core)}


def opensm_run(net, size, scratch: Path, core: str, sampler_host: str) -> dict:
    with IbSim(net, scratch, extra_args=size, console=True) as sim:
        osm = OpenSMRun(sim, scratch / "osm", "-s", "300")
        try:
            osm.wait_ups(1)
            smp = Sampler(sim, sampler_host, core)
            try:
                before_ibroute = ibroute_unreachable(sim, smp.model)
                time.sleep(SETTLE_S)
                ups = len(osm.subnet_ups())
                marks = {"unlink": time.time()}
                sim.unlink(core)
                marks["swept"] = osm.wait_ups(ups + 1, timeout=120)[ups]
                time.sleep(SETTLE_S)
            finally:
                samples = smp.stop()
            end_ibroute = ibroute_unreachable(sim, smp.model, gone=core)
        finally:
            osm.stop()
    return {"repair": {"seconds": round(marks["swept"] - marks["unlink"], 3)},
            "ibroute_unreachable": {"before unlink": before_ibroute, "end": end_ibroute},
            **summarise(samples, marks, core)}


def count_drain_smps(net, size, scratch: Path, core: str) -> dict:
    """`ibsim -v` packet lines while the drain runs, no sampler (-v slows ibsim): all of them,
    and those that reached their target by attribute (Gets and Sets alike)."""
    from mad.smp import attribute_name
    with IbSim(net, scratch, extra_args=[*size, "-v"], console=True) as sim:
        sm = SmagentRun(sim, "--sweep-interval", "300")
        try:
            sm.wait(lambda s: s.get("state") == "MASTER" and s["sweeps"] >= 1 and s["activity"] is None)
            c0, at = count_packets(sim.log), sim.log.stat().st_size
            sim.smagent("drain", "--state-dir", sm.state, core, timeout=300)
            with open(sim.log, errors="replace") as f:
                f.seek(at)
                attrs = collections.Counter(re.findall(r"process_packet: packet \(attr (0x[0-9a-f]+)", f.read()))
            return {"packets": count_packets(sim.log) - c0,
                    "by_attribute": {attribute_name(int(a, 16)): n for a, n in attrs.most_common()}}
        finally:
            sm.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, default=10, help="switch radix of fat_tree_3 (default 10: 250 hosts)")
    ap.add_argument("--hosts", type=int, default=None)
    ap.add_argument("--core", default="S0")
    ap.add_argument("--no-opensm", action="store_true")
    ap.add_argument("--count-smps", action="store_true", help="also a run with ibsim -v counting the drain's SMPs")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--sampler", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--stop-file", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.sampler:
        return sampler(a.sampler, a.core, a.stop_file)
    fabric = topogen.fat_tree_3(a.k, hosts=a.hosts)
    host = fabric.cas()[-1].name
    res = {"fabric": f"fat_tree_3({a.k}{'' if a.hosts is None else f', hosts={a.hosts}'})",
           "hosts": len(fabric.cas()), "pairs": len(fabric.cas()) * (len(fabric.cas()) - 1),
           "switches": len(fabric.switches()), "core": a.core, "sampler_on": host}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        net = tmp / "fabric.net"
        net.write_text(netfile.dumps(fabric))
        size = netfile.ibsim_size_args(fabric)
        res["smagent"] = smagent_run(net, size, tmp / "smagent", a.core, host)
        if not a.no_opensm:
            res["opensm"] = opensm_run(net, size, tmp / "opensm", a.core, host)
        if a.count_smps:
            res["smagent"]["drain"]["ibsim_v"] = count_drain_smps(net, size, tmp / "count", a.core)
    res["load"] = os.getloadavg()
    print(json.dumps(res, indent=2) if a.json else report(res))


def report(res: dict) -> str:
    lines = [f"{res['fabric']}: {res['hosts']} hosts, {res['switches']} switches; core {res['core']} "
             f"drained then unlinked; sampler on {res['sampler_on']}"]
    for tool in ("smagent", "opensm"):
        r = res.get(tool)
        if not r:
            continue
        lines.append(f"{tool}: {r['samples']} samples of {r['smps_per_sample']} LFT Gets, period median "
                     f"{r['period_s']['median']:.3f} s (max {r['period_s']['max']:.3f}), read in median "
                     f"{r['read_s']['median']:.3f} s")
        if "drain" in r:
            lines.append(f"  drain: {r['drain']}")
        lines.append(f"  pairs through {res['core']} before: {r['through_core_before']} of {res['pairs']}")
        lines.append(f"  repair after the unlink: {r['repair']}")
        lines.append("  max unreachable pairs: " + "; ".join(f"{p} {v}" for p, v in r["max_unreachable"].items()))
        lines.append(f"  samples per phase {r['samples_per_phase']}, median period {r['period_per_phase_s']} s")
        for w in r["windows"] or [None]:
            lines.append("  no sample with unreachable pairs" if w is None else
                         f"  window: up to {w['peak']} pairs in {w['samples']} samples from {w['from']:+.3f} s after "
                         f"the unlink, lasting at least {w['at_least_s']:.3f} s, at most "
                         + ("?" if w["at_most_s"] is None else f"{w['at_most_s']:.3f} s"))
        lines.append(f"  first clean sample after the unlink at {r['first_clean_after_unlink_s']} s")
        lines.append(f"  ibroute pair walk: {r['ibroute_unreachable']}; samples left out (a switch unread): "
                     f"{r['incomplete']['samples']} {r['incomplete']['switches'] or ''}")
    lines.append(f"load {res['load']}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
