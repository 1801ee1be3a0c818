"""The running SM's status document (`Daemon.status`): what `smagent status` shows, what
the control socket answers and the metrics are made of.

`routed` says whether the fabric is routed as planned: True while we are MASTER and our
last sweep (or repair) succeeded, False while we are MASTER and it failed or was refused
(the switches hold whatever they held: a MASTER that does not route must be visible at a
glance, and `smagent status --check` exits non-zero on it), None when routing is not ours
(STANDBY, DISCOVERING)."""
from __future__ import annotations

import dataclasses
import time

from mad.attributes import SMState
from smagent.config import files
from smagent.sm.statemachine import state_name


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


def status(d) -> dict:
    """The status of daemon `d`; works from construction on (state STARTING until `start`
    knows our port, then DISCOVERING)."""
    sm = d._sm
    if sm is None:
        return {"state": "STARTING", "activity": d.activity, "sweeps": 0, "routed": None,
                "uptime_s": round(time.time() - d.started, 1)}
    master = sm.guid if sm.state == SMState.MASTER else (sm.master.guid if sm.master else None)
    c = dataclasses.asdict(d.counters)
    c["trap_numbers"] = {str(k): v for k, v in sorted(d.counters.trap_numbers.items())}
    return {
        "state": state_name(sm.state), "priority": sm.priority, "guid": f"{sm.guid:#018x}",
        "master_guid": None if master is None else f"{master:#018x}",
        "routed": routed(sm.state, d.last_sweep),
        "sweeps": d.counters.sweeps, "sweeps_failed": d.counters.sweeps_failed,
        "last_sweep": d.last_sweep, "last_error": d.last_error, "last_change": d.last_change,
        "routing": getattr(d.opts.sweep.routing_memory, "routing", None),
        "config": d.config.status(), "counters": c, "smps_sent": d.t.stats.sent,
        # our peers (same SM_Key), then the SMs under another SM_Key: not peers, but an
        # admin must see them (a second MASTER among them is a misconfiguration)
        "other_sms": [_sm(p, True) for p in d.peers.values()] + [_sm(p, False) for p in d.peers.strangers()],
        "transitions": [{"from": state_name(t.old), "to": state_name(t.new), "why": t.why}
                        for t in sm.transitions[-10:]],
        "uptime_s": round(time.time() - d.started, 1), "activity": d.activity,
        "sa": d.sa.status(), "sa_requests": d.sa.requests(),
        "transport": {k: getattr(d.t.stats, k) for k in ("sent", "received", "retries", "timeouts", "busy")},
        "perfmgr": None if d.perfmgr is None else d.perfmgr.status(),
        "log_lines_suppressed": d.log_flood.suppressed if d.log_flood is not None else 0,
        "state_files_not_read": distrusted(d.opts.state_dir),
        "audit": d.audit.status(d.known),
        "drained": d.drained.status(),  # kept out of every route until undrained (`smagent.sm.drained`)
    }
