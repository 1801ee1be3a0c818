"""The running SM's repair of a cut leaf uplink, of its relink and of a host cable, on a
complete 3-level fat tree in the in-process simulator (issue 42: "a cut repaired within
1 s"): CPU seconds of the whole repair (`Daemon.step` until it has run: the reads of the
reporting switches, the sweep against the known state, the SA's snapshot), its SMPs and
Sets, and the CPU of each sweep phase, so that what grows with the whole fabric shows.

    python bench/cut_repair.py                        # ft3-1024
    python bench/cut_repair.py --fabric ft3-11664     # 13,284 nodes: minutes, ~4 GB

The cut is patched (`smagent.routing.patch`: only the entries through it move); the
relink puts the routes from before the cut back (`patch.restore`: the blocks the cut
changed, written back; before, it routed afresh, and ftree wrote back the same blocks).
Then a host's cable (H1) pulled and put back: its LID's entries cleared and put back
(before, ftree routed afresh both times, balancing what was left).
CPU seconds of this process, simulator included (it answers every SMP in process).
"""
from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

FABRICS = {"ft3-1024": 16, "ft3-11664": 36}


class Clock:
    now = 1000.0

    def __call__(self):
        return self.now


def run(k: int) -> None:
    from smagent.model import topogen
    from smagent.sm.daemon import Daemon, DaemonOptions
    from smagent.sweep import state as statemod
    from smagent.transport.sim import SimTransport
    phases: dict[str, float] = {}
    exit_ = statemod.Phase.__exit__

    def phase_exit(self, *exc):
        out = exit_(self, *exc)
        phases[self.name] = phases.get(self.name, 0.0) + self.r.phases[self.name]["cpu_seconds"]
        return out
    statemod.Phase.__exit__ = phase_exit  # type: ignore[method-assign]
    t = SimTransport(topogen.fat_tree_3(k))
    t.serve()
    clock = Clock()
    d = Daemon(t, DaemonOptions(sweep_interval=10 ** 6), clock=clock)
    c0 = time.process_time()
    d.start()
    print(f"ft3 k={k}: first sweep {time.process_time() - c0:.1f} s CPU, "
          f"routing {d.status()['routing']['engine']}", flush=True)
    half = k // 2
    peer = host = None
    for step in ("cut", "relink", "host cut", "host back"):
        if step == "cut":
            peer = t.sim.unlink("L0", half + 1)
        elif step == "relink":
            t.sim.link("L0", half + 1, *peer)
        elif step == "host cut":
            host = t.sim.unlink("H1", 1)
        else:
            t.sim.link("H1", 1, *host)
        phases.clear()
        kinds, sent = collections.Counter(t.stats.by_kind), t.stats.sent
        c0 = time.process_time()
        for _ in range(4):  # the trap, the settle time, the repair
            clock.now += 0.5
            d.step(max_wait=0)
        cpu = time.process_time() - c0
        sets = {k2.removeprefix("SubnSet(").rstrip(")"): v for k2, v in (collections.Counter(t.stats.by_kind) - kinds).items()
                if k2.startswith("SubnSet")}
        ls = d.last_sweep
        print(f"{step}: {cpu:.2f} s CPU, {t.stats.sent - sent} SMPs, Sets {sets}, routes moved "
              f"{ls.get('routes_moved', '- (routed afresh)')}, routing {d.status()['routing']['reason']}", flush=True)
        print("  phases (CPU s): " + ", ".join(f"{n} {v:.2f}" for n, v in sorted(phases.items(), key=lambda kv: -kv[1])
                                               if v >= 0.01) + f"; outside them (the repair's reads, the SA's "
              f"snapshot, the daemon, the simulator's answers) {cpu - sum(phases.values()):.2f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fabric", choices=sorted(FABRICS), default="ft3-1024")
    run(FABRICS[ap.parse_args().fabric])


if __name__ == "__main__":
    main()
