"""The running SM's status document (`Daemon.status`): what `smagent status` shows, what
the control socket answers and the metrics are made of; and the copy of it the loop
publishes for other threads (`Published`).

`routed` says whether the fabric is routed as planned: True while we are MASTER and our
last sweep (or repair) succeeded, False while we are MASTER and it failed or was refused
(the switches hold whatever they held: a MASTER that does not route must be visible at a
glance, and `smagent status --check` exits non-zero on it), None when routing is not ours
(STANDBY, DISCOVERING)."""
from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Callable

from mad.attributes import SMState
from smagent.config import files
from smagent.sm.statemachine import state_name

if TYPE_CHECKING:
    from smagent.sm.daemon import Daemon
    from smagent.sm.shared import Shared

PUBLISH_EVERY_S = 0.05  # the published status is at most this old when nothing important changed


def routed(state: int, last_sweep: dict | None) -> bool | None:
    if state != SMState.MASTER:
        return None
    return bool(last_sweep and last_sweep.get("ok"))


def distrusted(state_dir: str | None) -> list[str]:
    """The state files that are there but not read (not regular files, or too large):
    the daemon goes on without them, and the status says so (a stat each)."""
    if not state_dir:
        return []
    sd = files.StateDir(state_dir)
    out = []
    for path, what in ((sd.guid2lid, "LID file"), (sd.guid2mkey, "M_Key file"), (sd.path_sls, "path SL file"),
                       (sd.journal, "apply journal")):
        try:
            files.check_state_file(path, what)
        except files.NotAStateFile as e:
            out.append(str(e))
        except OSError:
            pass  # absent (or unreadable: the sweep says so)
    return out


def _sm(p, peer: bool) -> dict:
    return {"guid": f"{p.guid:#018x}", "priority": p.priority, "state": state_name(p.state), "lid": p.lid,
            "node": p.name, "peer": peer}


def status(d: Daemon) -> dict:
    """The status of daemon `d`; works from construction on (state STARTING until `start`
    knows our port, then DISCOVERING)."""
    s, du = d.shared, d.duties
    sm = s.machine
    if sm is None:
        return {"state": "STARTING", "activity": s.activity, "sweeps": 0, "routed": None,
                "uptime_s": round(time.time() - d.started, 1)}
    master = sm.guid if sm.state == SMState.MASTER else (sm.master.guid if sm.master else None)
    c = dataclasses.asdict(s.counters)
    c["trap_numbers"] = {str(k): v for k, v in sorted(s.counters.trap_numbers.items())}
    return {
        "state": state_name(sm.state), "priority": sm.priority, "guid": f"{sm.guid:#018x}",
        "master_guid": None if master is None else f"{master:#018x}",
        "routed": routed(sm.state, du.last_sweep),
        "sweeps": s.counters.sweeps, "sweeps_failed": s.counters.sweeps_failed,
        "last_sweep": du.last_sweep, "last_error": s.last_error, "last_change": s.last_change,
        "routing": getattr(s.opts.sweep.routing_memory, "routing", None),
        "config": du.config.status(), "counters": c, "smps_sent": s.t.stats.sent,
        # our peers (same SM_Key), then the SMs under another SM_Key: not peers, but an
        # admin must see them (a second MASTER among them is a misconfiguration)
        "other_sms": [_sm(p, True) for p in s.peers.values()] + [_sm(p, False) for p in s.peers.strangers()],
        "transitions": [{"from": state_name(t.old), "to": state_name(t.new), "why": t.why}
                        for t in sm.transitions[-10:]],
        "uptime_s": round(time.time() - d.started, 1), "activity": s.activity,
        "sa": d.sa.status(), "sa_requests": d.sa.requests(),
        "transport": {k: getattr(s.t.stats, k) for k in ("sent", "received", "retries", "timeouts", "busy")},
        "perfmgr": None if du.perfmgr is None else du.perfmgr.status(),
        "log_lines_suppressed": d.log_flood.suppressed if d.log_flood is not None else 0,
        "state_files_not_read": distrusted(s.opts.state_dir),
        "audit": du.audit.status(du.known),
        "drained": du.drained.status(),  # kept out of every route until undrained (`smagent.sm.drained`)
    }


class Published:
    """The status as the loop last published it, for the threads that must not read the
    daemon's live fields (the control socket's, the metrics'): built at a consistent point
    of the loop (`publish`), at once when the state, the work or the sweeps changed, else
    at most every PUBLISH_EVERY_S (`publish_if_due`): a flood of SA queries wakes the loop
    for each, and building the whole status every time would cost more than answering them."""

    def __init__(self, shared: Shared, build: Callable[[], dict]):
        self.shared, self.build = shared, build
        self.status: dict = {}  # what the control thread answers with
        self._key: tuple = ()  # what it was built from
        self._at = 0.0

    def _now_key(self) -> tuple:
        s = self.shared
        c = s.counters
        return (s.machine.state if s.machine else None, s.activity, c.sweeps, c.sweeps_failed, c.errors)

    def publish(self) -> None:
        self.status = self.build()
        self._key, self._at = self._now_key(), time.monotonic() + PUBLISH_EVERY_S

    def publish_if_due(self) -> None:
        if time.monotonic() >= self._at or self._now_key() != self._key:
            self.publish()
