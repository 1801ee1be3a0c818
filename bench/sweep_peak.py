"""Where a sweep's peak memory comes from (issue 42, the daemon's steady RSS): one
`Session.sweep` on the in-process simulator under tracemalloc, per named phase
(`sweep.state.Phase`) the memory traced when it ends, the peak inside it, and the source
lines holding the most of what it left behind (new since the phase began, file:line,
MiB). The simulator's own allocations (`smagent/sim/`, `transport/sim.py`) are counted
apart: they are not the SM's.

    python bench/sweep_peak.py --fabric ft3-2000
    python bench/sweep_peak.py --fabric ft3-11664 --top 0     # figures only

tracemalloc slows the sweep several times and adds its own bookkeeping to the RSS: the
figures are Python's allocations, not RSS (`bench/daemon_memory.py` measures RSS).
"""
from __future__ import annotations

import argparse
import os
import sys
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FABRICS = {"ft3-2000": 20, "ft3-11664": 36}
SIM_FILES = (os.sep + os.path.join("smagent", "sim") + os.sep, os.path.join("transport", "sim.py"))
MIB = 2**20


def _is_sim(filename: str) -> bool:
    return any(part in filename for part in SIM_FILES)


def _short(filename: str) -> str:
    return filename[len(str(ROOT)) + 1:] if filename.startswith(str(ROOT)) else os.path.basename(filename)


def run(k: int, top: int) -> list[dict]:
    """One sweep: per phase {name, current, peak, sim, lines: [(file:line, MiB)]}."""
    from smagent.api import Session
    from smagent.model import topogen
    from smagent.sweep import state as statemod
    from smagent.transport.sim import SimTransport
    t = SimTransport(topogen.fat_tree_3(k))
    tracemalloc.start(1)
    rows: list[dict] = []
    enter, exit_ = statemod.Phase.__enter__, statemod.Phase.__exit__
    base = [tracemalloc.take_snapshot() if top else None]

    def phase_enter(self):
        tracemalloc.reset_peak()
        return enter(self)

    def phase_exit(self, *exc):
        current, peak = tracemalloc.get_traced_memory()
        if not top:  # the figures alone: a snapshot of millions of blocks takes minutes
            rows.append({"name": self.name, "current": current / MIB, "peak": peak / MIB, "sim": 0.0, "lines": []})
            return exit_(self, *exc)
        snap = tracemalloc.take_snapshot()
        stats = snap.compare_to(base[0], "lineno")
        base[0] = snap
        sim = sum(s.size for s in snap.statistics("filename") if _is_sim(s.traceback[0].filename))
        lines = [(f"{_short(s.traceback[0].filename)}:{s.traceback[0].lineno}", s.size_diff / MIB)
                 for s in stats if not _is_sim(s.traceback[0].filename)]
        lines.sort(key=lambda x: -abs(x[1]))
        rows.append({"name": self.name, "current": current / MIB, "peak": peak / MIB, "sim": sim / MIB,
                     "lines": lines[:top]})
        return exit_(self, *exc)
    statemod.Phase.__enter__, statemod.Phase.__exit__ = phase_enter, phase_exit  # type: ignore[method-assign]
    Session(t).sweep(keep_link_tables=True)
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fabric", choices=sorted(FABRICS), default="ft3-2000")
    ap.add_argument("--top", type=int, default=5, help="source lines shown per phase (0: none, no snapshots, "
                    "minutes faster; the simulator's part is then not told apart)")
    ns = ap.parse_args(argv)
    print(f"load before: {os.getloadavg()[0]:.2f}")
    rows = run(FABRICS[ns.fabric], ns.top)
    print(f"load after: {os.getloadavg()[0]:.2f}")
    print(f"{ns.fabric}: MiB traced at the end of each phase (the simulator's part), the peak inside it; "
          f"then what the phase added or freed, by source line")
    for row in rows:
        print(f"{row['name']:24} end {row['current']:8.1f} (sim {row['sim']:7.1f})  peak {row['peak']:8.1f}")
        for where, mib in row["lines"]:
            print(f"{'':26}{mib:+8.1f}  {where}")


if __name__ == "__main__":
    main()
