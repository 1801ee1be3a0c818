"""Issue 41 in process: a reload is planned and checked before it is in force, a refused
sweep falls back to the last good settings, repeated log lines are summarised, the
control socket makes room for a new client, state files that are not regular files are
not read, and a MASTER that does not route says so (status lines, --check, metrics)."""
from __future__ import annotations

import dataclasses
import logging
import os
import socket

import pytest

from smagent.commands import status_cmd
from smagent.config import files
from smagent.perf import metrics
from smagent.sm import control
from smagent.sm.daemon import Daemon, DaemonOptions
from smagent.sm.logflood import FloodFilter
from smagent.sweep import desired as desiredmod
from smagent.transport.sim import SimTransport
from smagent.sm.metrics_server import status_text

import prom

HOLE = "lft:\n  - {switch: L1, lid: 2, port: 3}\n"  # a static route into a linkless port: refused


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def make(tmp_path, **kw):
    t = SimTransport()
    t.serve()
    clock = Clock()
    return t, Daemon(t, DaemonOptions(state_dir=str(tmp_path / "state"), **kw), clock=clock), clock


def test_a_reload_the_plan_check_refuses_is_not_put_in_force(tmp_path, caplog):
    f = tmp_path / "desired.yaml"
    f.write_text("routing: minhop\n")
    t, d, clock = make(tmp_path, desired_file=str(f))
    d.start()
    before = d.opts.sweep
    f.write_text("routing: minhop\n" + HOLE)
    d.reload_requested = True
    with caplog.at_level(logging.INFO, logger="smagent.sm"):
        d.step(max_wait=0)
    assert d.opts.sweep is before  # the previous settings stay in force
    s = d.status()
    assert s["routed"] is True  # nothing was sent: the fabric is routed as it was
    assert s["config"]["reload"]["ok"] is False and "nothing was sent" in s["config"]["reload"]["error"]
    assert "not reloaded, the previous desired state stays" in caplog.text
    assert "smagent_reloads_refused_total 1.0" in status_text(s).splitlines()
    assert any("REFUSED" in line for line in status_cmd.lines(s))
    clock.now += 1  # the retry after the refused sweep routes with the settings in force
    d.step(max_wait=0)
    assert d.status()["routed"] is True and d.last_sweep["ok"]


def test_a_refused_sweep_falls_back_to_the_last_good_settings(tmp_path):
    t, d, clock = make(tmp_path)
    d.start()
    good = d.config.good
    assert good is d.opts.sweep and d.last_sweep["ok"]
    hole = tmp_path / "hole.yaml"
    hole.write_text(HOLE)
    d.opts.sweep = dataclasses.replace(d.opts.sweep, **desiredmod.sweep_settings(desiredmod.load(str(hole))))
    used = d.duties.sweep("a physical change")  # the settings in force were refused: routed with the good ones
    assert used is d.config.good and not used.desired and used.mcast_joined == d.opts.sweep.mcast_joined
    s = d.status()
    assert s["config"]["fell_back"] is True and s["routed"] is True and s["counters"]["plan_refusals"] == 0
    assert "smagent_config_fell_back 1.0" in status_text(s).splitlines()


def test_repeated_log_lines_are_summarised(caplog):
    clock = Clock()
    flt = FloodFilter(burst=3, window=10, clock=clock)
    log = logging.getLogger("smagent.test.flood")
    log.addFilter(flt)
    try:
        with caplog.at_level(logging.INFO, logger="smagent.test.flood"):
            for i in range(1000):
                log.info("trap %d from LID %d", 128, i)
            log.info("something else")
            assert flt.flush() == 0  # the window has not ended
            clock.now += 10
            assert flt.flush() == 1
    finally:
        log.removeFilter(flt)
    lines = caplog.text.splitlines()
    assert sum("trap 128" in ln and "more like" not in ln for ln in lines) == 3
    assert "997 more like this in the last 10 s: trap 128 from LID 999" in caplog.text
    assert "something else" in caplog.text and flt.suppressed == 997


def test_the_control_socket_makes_room_for_a_new_client(tmp_path):
    server = control.ControlServer(control.socket_path(tmp_path))
    idle = []
    try:
        for _ in range(control.MAX_CLIENTS + 40):
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.connect(str(server.path))
            idle.append(c)
        server.serve_pending(lambda _c, _a=None: {"state": "MASTER"})
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.settimeout(5)
        c.connect(str(server.path))  # would be EAGAIN with a full backlog
        c.sendall(b"status\n")
        for _ in range(3):
            server.serve_pending(lambda _c, _a=None: {"state": "MASTER"})
        assert c.makefile().readline().startswith('{"state": "MASTER"')
        assert len(server.clients) <= control.MAX_CLIENTS
        c.close()
    finally:
        for c in idle:
            c.close()
        server.close()


@pytest.mark.parametrize("kind", ["device", "fifo", "huge"])
def test_a_state_file_that_is_not_a_regular_file_is_not_read(tmp_path, kind):
    p = tmp_path / "guid2lid"
    if kind == "device":
        os.symlink("/dev/zero", p)
    elif kind == "fifo":
        os.mkfifo(p)
    else:
        p.write_bytes(b"\n" * 2000)
    with pytest.raises(files.NotAStateFile):
        files.read_state_bytes(p, "LID file", limit=1000)
    if kind == "huge":
        return  # the LID file's own limit is far larger
    from smagent.planning import lidassign
    table = lidassign.load_guid2lid(p)
    assert not table and "not read" in table.problems[0]


def test_a_master_that_does_not_route_says_so_first():
    s = {"state": "MASTER", "routed": False, "last_sweep": {"ok": False, "error": "refused\nmore", "why": "x", "smps": 1, "seconds": 0},
         "other_sms": [{"guid": "0x2", "node": "H7", "lid": 8, "priority": 0, "state": "MASTER", "peer": False}]}
    first = status_cmd.lines(s)[0]
    assert "NOT ROUTING: last sweep failed (refused)" in first and "SECOND MASTER: 0x2 (H7)" in first
    text = status_text(s)
    assert prom.value(text, "smagent_fabric_routed") == 0
    assert prom.value(text, "smagent_other_sms", state="MASTER", peer="false") == 1
    assert status_cmd.warnings({"state": "MASTER", "routed": True, "other_sms": []}) == []


def test_a_repair_after_a_trap_flood_gives_a_few_reasons_and_a_count():
    from smagent.sm import events
    assert events.why_of([f"trap 128 from LID {i}" for i in range(1000)]) == (
        "trap 128 from LID 0; trap 128 from LID 1; trap 128 from LID 2; and 997 more")
    assert events.why_of(["a", "b"]) == "a; b"


def test_status_text_shows_the_sa_and_perfmgr():
    """The text status says what the SA answered and what PerfMgr found (issue 39 item 9)."""
    s = {"state": "MASTER", "sa": {"answered": 12, "tables_pending": 1, "tables_in_flight": 2, "groups": 3,
                                   "subscriptions": 4, "reports_sent": 5},
         "perfmgr": {"interval_s": 180.0, "sweeps": 7, "erring": 2,
                     "last": {"ports_read": 96, "seconds": 0.4, "unanswered": 1}}}
    text = "\n".join(status_cmd.lines(s))
    assert "SA: 12 requests answered, 1 tables being made, 2 in flight; 3 multicast groups" in text
    assert "PerfMgr: every 180.0 s, 7 sweeps, last 96 ports in 0.4 s; 2 ports erring, 1 agents not answering" in text
