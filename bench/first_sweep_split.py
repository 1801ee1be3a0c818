"""Where the daemon's first sweep in the simulator spends its time (issue 42): the
simulator's side (`SimTransport._answer`: `smagent/sim/` working out each answer) against
smagent's side (everything else: discovery, planning, routing, encoding and decoding, the
window, the daemon's snapshot), per sweep phase. The same job as
`bench/daemon_memory.py --job daemon`: `Daemon.start()` stepped until its first sweep is
published, in this process.

    python bench/first_sweep_split.py                      # ft3-11664, 1 run
    python bench/first_sweep_split.py --fabric ft3-2000 --runs 3

Times are CPU seconds of this process (`time.process_time`), so a loaded machine slows
them less than wall time. The timer around each answer has a cost of its own, measured
and printed (about a microsecond an SMP, shared by both sides).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FABRICS = {"ft3-2000": 20, "ft3-11664": 36}
# what is not a named sweep phase, and where the daemon's own steps are
OUTSIDE = ("sweep outside named phases", "snapshot (Subnet.from_sweep)", "publish to the SA",
           "daemon around the sweep")


def run(k: int) -> dict:
    """One first sweep: {row: [CPU s, simulator CPU s, SMPs]} and the totals."""
    from smagent.model import topogen
    from smagent.sm.daemon import Daemon, DaemonOptions
    from smagent.sweep import state as statemod
    from smagent.transport.sim import SimTransport
    t = SimTransport(topogen.fat_tree_3(k))
    t.serve()
    clock = time.process_time
    sim = [0.0]
    answer = t._answer

    def timed_answer(raw, dlid):
        c0 = clock()
        try:
            return answer(raw, dlid)
        finally:
            sim[0] += clock() - c0
    t._answer = timed_answer  # type: ignore[method-assign]
    rows: dict[str, list[float]] = {}
    inner = [0.0, 0.0, 0]  # what the named phases took, to tell the rest

    def span(name, fn):
        def wrapped(*a, **kw):
            c0, s0, n0 = clock(), sim[0], t.stats.sent
            try:
                return fn(*a, **kw)
            finally:
                row = rows.setdefault(name, [0.0, 0.0, 0])
                row[0] += clock() - c0
                row[1] += sim[0] - s0
                row[2] += t.stats.sent - n0
        return wrapped
    enter, exit_ = statemod.Phase.__enter__, statemod.Phase.__exit__

    def phase_enter(self):
        self.split0 = (clock(), sim[0], t.stats.sent)
        return enter(self)

    def phase_exit(self, *exc):
        c0, s0, n0 = self.split0
        row = rows.setdefault(self.name, [0.0, 0.0, 0])
        for i, v in enumerate((clock() - c0, sim[0] - s0, t.stats.sent - n0)):
            row[i] += v
            inner[i] += v
        return exit_(self, *exc)
    statemod.Phase.__enter__, statemod.Phase.__exit__ = phase_enter, phase_exit  # type: ignore[method-assign]
    from smagent.sweep import pipeline
    now = [1000.0]
    d = Daemon(t, DaemonOptions(), clock=lambda: now[0])
    sweep = pipeline.sweep
    import smagent.sweep as sweepmod
    sweepmod.sweep = span("sweep", sweep)  # type: ignore[assignment]  # what duties calls
    d.sa.snapshot = span(OUTSIDE[1], d.sa.snapshot)  # type: ignore[method-assign]
    d.sa.publish = span(OUTSIDE[2], d.sa.publish)  # type: ignore[method-assign]
    c0 = clock()
    d.start()
    while d.sa.agent.subnet is None and now[0] < 1100:
        now[0] += 0.5
        d.step(max_wait=0)
    total = clock() - c0
    assert d.sa.agent.subnet is not None, "the first sweep was not published"
    whole = rows.pop("sweep")
    rows[OUTSIDE[0]] = [whole[i] - inner[i] for i in range(3)]
    named = sum(r[0] for r in rows.values())
    rows[OUTSIDE[3]] = [total - named, sim[0] - sum(r[1] for r in rows.values()),
                        t.stats.sent - sum(r[2] for r in rows.values())]
    return {"rows": rows, "total": total, "sim": sim[0], "smps": t.stats.sent}


def timer_cost() -> float:
    """Seconds the timer around one answer takes (the best of a few runs)."""
    clock, n, best = time.process_time, 100_000, float("inf")
    for _ in range(5):
        c0 = clock()
        for _ in range(n):
            a = clock()
            _ = clock() - a
        best = min(best, (clock() - c0) / n)
    return best


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fabric", choices=sorted(FABRICS), default="ft3-11664")
    ap.add_argument("--runs", type=int, default=1, help="runs in this process; medians shown")
    ns = ap.parse_args(argv)
    print(f"load before: {os.getloadavg()[0]:.2f}")
    runs = [run(FABRICS[ns.fabric]) for _ in range(ns.runs)]
    print(f"load after: {os.getloadavg()[0]:.2f}")

    def med(f):
        return statistics.median(f(r) for r in runs)
    total, sim = med(lambda r: r["total"]), med(lambda r: r["sim"])
    print(f"{ns.fabric}: first sweep {total:.1f} s CPU, {runs[-1]['smps']:,} SMPs; simulator {sim:.1f} s "
          f"({sim / total:.0%}), smagent {total - sim:.1f} s ({(total - sim) / total:.0%})")
    cost = timer_cost()
    print(f"the timer around each answer: {cost * 1e6:.2f} us, {cost * runs[-1]['smps']:.1f} s in all")
    print(f"{'phase':32} {'SMPs':>10} {'CPU s':>8} {'sim s':>8} {'smagent s':>10} {'us/SMP smagent':>15}")
    for name in runs[-1]["rows"]:
        cpu, s = med(lambda r: r["rows"][name][0]), med(lambda r: r["rows"][name][1])
        n = runs[-1]["rows"][name][2]
        per = f"{(cpu - s) / n * 1e6:15.1f}" if n else f"{'':15}"
        print(f"{name:32} {n:>10,} {cpu:8.2f} {s:8.2f} {cpu - s:10.2f} {per}")


if __name__ == "__main__":
    main()
