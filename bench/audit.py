"""The audit (issue 40 item 4) on the 648-host two-level tree (36-port switches) in the
in-process simulator: SMPs of an idle daemon (light sweeps every 10 s) without the audit
and at a few shares, the items one full pass reads, how long a pass takes at each share,
and the clock time from an LFT entry and a host's LID tampered (wherever the round robin
stands) to their repair (not repaired within 3 passes, at most 2 h: -). The daemon's clock is stepped, so the
figures are in daemon seconds, not wall time.

    python bench/audit.py [SHARE ...]      (default: 0 0.01 1 8)
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from smagent.model import topogen  # noqa: E402
from smagent.sm import audit  # noqa: E402
from smagent.sm.daemon import Daemon, DaemonOptions  # noqa: E402
from smagent.transport.sim import SimTransport  # noqa: E402

INTERVAL = 10.0
IDLE_S = 600.0


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def daemon(share: float):
    t = SimTransport(topogen.fat_tree_2(36))
    t.serve()
    clock = Clock()
    d = Daemon(t, DaemonOptions(sweep_interval=INTERVAL, audit_share=share), clock=clock)
    d.start()
    return t, d, clock


def advance(d, clock, seconds: float, until=None) -> float:
    start = clock.now
    while clock.now - start < seconds:
        clock.now += INTERVAL / 4
        d.step(max_wait=0)
        if until is not None and until():
            break
    return clock.now - start


def repair_time(share: float, limit: float) -> tuple[float | None, float | None]:
    """Seconds until an LFT entry, then a host's LID, tampered behind our back, are repaired."""
    t, d, clock = daemon(share)
    sim = t.sim
    out = []
    for tamper in ("lft", "lid"):
        before = d.counters.drifts_repaired
        if tamper == "lft":
            lid = sim.port_lid(("H2", 1))
            sim.lft("L1")[lid] ^= 0x01
        else:
            sim.set_lid("H5", 1, sim.port_lid(("H4", 1)))
        took = advance(d, clock, limit, lambda: d.counters.drifts_repaired > before)
        out.append(took if d.counters.drifts_repaired > before else None)
    return out[0], out[1]


def main(shares: list[float]) -> None:
    base = None
    print(f"648 hosts, 54 switches; light sweep every {INTERVAL:.0f} s; idle for {IDLE_S:.0f} s")
    for share in shares:
        t, d, clock = daemon(share)
        items = len(audit.items(d.known))
        sent = t.stats.sent
        advance(d, clock, IDLE_S)
        idle = t.stats.sent - sent
        base = idle if share == 0 else base
        extra = f"{100 * (idle - base) / base:+.1f} %" if base else "-"
        per_pass = items / (share * 54) * INTERVAL if share else None
        lft, lid = repair_time(share, min(3 * (per_pass or 0), 7200)) if share else (None, None)
        fmt = lambda s: "-" if s is None else f"{s:.0f} s"  # noqa: E731
        print(f"share {share:<5}: {idle} SMPs idle ({extra}), audit reads {d.audit.reads}; {items} items, "
              f"a pass {fmt(per_pass)}; tampered LFT entry repaired after {fmt(lft)}, host LID after {fmt(lid)}")


if __name__ == "__main__":
    main([float(a) for a in sys.argv[1:]] or [0, 0.01, 1, 8])
