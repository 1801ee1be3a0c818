"""The daemon's core (`smagent.sm.timers`, `smagent.sm.dispatch`, the loop in
`smagent.sm.daemon`): named timers, requests dispatched by (class, method, attribute),
status before start, and a stop that abandons a sweep in flight, on the in-process
simulator."""
from __future__ import annotations

import logging
import math
import threading
import time

from mad import smp as smpcodec
from mad.attributes import AttrID, SMState
from mad.header import Method
from smagent.fdb.journal import Journal
from smagent.sm import control, timers
from smagent.sm.daemon import Daemon, DaemonOptions
from smagent.sm.dispatch import Dispatcher, key_of
from smagent.transport.address import Incoming
from smagent.transport.sim import SimTransport


def test_timers_fire_once_in_order_and_gates_rate_limit():
    t = timers.Timers()
    assert t.next_at() == math.inf and t.due(100.0) is None
    t.arm(timers.LIGHT, 10.0)
    t.arm(timers.REPAIR, 12.0)
    t.arm_by(timers.REPAIR, 11.0)
    t.arm_by(timers.REPAIR, 50.0)  # later: the earlier moment stays
    assert t.next_at() == 10.0 and t.at(timers.REPAIR) == 11.0
    assert t.due(9.9) is None
    assert t.due(20.0) == timers.REPAIR  # both due: the repair comes first
    assert t.due(20.0) == timers.LIGHT and t.due(20.0) is None
    t.arm(timers.POLL, 1.0)
    t.cancel(timers.POLL, timers.DISCOVER)
    assert t.due(5.0) is None
    assert t.allow("census", 0.0, 10.0) and not t.allow("census", 9.0, 10.0) and t.allow("census", 10.0, 10.0)


def test_dispatcher_routes_by_class_method_attribute_and_falls_back():
    seen = []
    d = Dispatcher(lambda m: seen.append(("default", m.slid)))
    d.route((0x01, 0x81), Method.GET, AttrID.SM_INFO, lambda m: seen.append(("sminfo", m.raw[1])))
    lid = smpcodec.encode(smpcodec.lid_routed(Method.GET, AttrID.SM_INFO, 5))
    dr = smpcodec.encode(smpcodec.dr(Method.GET, AttrID.SM_INFO, (0, 1)))
    other = smpcodec.encode(smpcodec.dr(Method.SET, AttrID.SM_INFO, (0, 1)))
    d.dispatch(Incoming.of(lid, 3))
    d.dispatch(Incoming.of(dr, 0))
    d.dispatch(Incoming.of(other, 7))
    d.dispatch(Incoming.of(b"\x01\x81", 9))  # too short to have an attribute: the default
    assert seen == [("sminfo", 0x01), ("sminfo", 0x81), ("default", 7), ("default", 9)]
    assert key_of(other) == (0x81, Method.SET, AttrID.SM_INFO) and key_of(b"\x01") is None


def test_status_before_start_and_during_discovery():
    t = SimTransport()
    t.serve()
    d = Daemon(t, DaemonOptions())
    assert d.status()["state"] == "STARTING"
    states = []
    t.on_send = lambda _req: states.append(d.status()["state"]) if len(states) < 3 else None
    d.start()
    assert states[0] == "STARTING" and "DISCOVERING" in states  # the first Gets learn who we are
    assert d.status()["state"] == "MASTER" and d.status()["activity"] is None


def _journal_path(tmp_path):
    return str(tmp_path / "state" / "apply.journal")


def test_stop_during_the_bring_up_sweep_abandons_it(tmp_path, caplog):
    """A stop while the sweep writes: the sweep unwinds at the next round of SMPs, `run`
    returns, the apply journal holds what was left unconfirmed, and the next daemon's
    sweep finishes the job."""
    t = SimTransport()
    t.serve()
    d = Daemon(t, DaemonOptions(state_dir=str(tmp_path / "state"), sweep_interval=0))
    sets = []
    lft = int(AttrID.LINEAR_FORWARDING_TABLE).to_bytes(2, "big")

    def on_send(req):
        if req.raw[3] == Method.SET and req.raw[16:18] == lft:
            sets.append(1)
            if len(sets) == 3:
                d.stop()  # as the SIGTERM handler does
                time.sleep(0.06)  # the transport's between-rounds hook runs every 50 ms
    t.on_send = on_send
    with caplog.at_level(logging.INFO, logger="smagent.sm"):
        d.run()
    assert "stop: sweep (became MASTER) abandoned" in caplog.text
    assert d.counters.sweeps == 0 and len(sets) < 200
    assert t.between_rounds is not None
    pending = Journal.pending(_journal_path(tmp_path))
    assert pending is not None and pending.remaining  # an apply cut short, as the journal says
    t.on_send = None
    d2 = Daemon(t, DaemonOptions(state_dir=str(tmp_path / "state"), sweep_interval=0))
    d2.start()
    assert d2.sm.state == SMState.MASTER and d2.counters.sweeps == 1 and d2.last_sweep["problems"] == 0
    assert Journal.pending(_journal_path(tmp_path)) is None


def test_the_control_thread_answers_while_the_loop_is_busy(tmp_path):
    """`run` serves the socket from a thread: a status comes back while the loop is held
    up (here: the first discovery blocks), from the status published last."""
    t = SimTransport()
    t.serve()
    d = Daemon(t, DaemonOptions(state_dir=str(tmp_path / "state"), sweep_interval=0))
    server = control.ControlServer(control.socket_path(tmp_path / "state"))
    release, got = threading.Event(), {}
    t.on_send = lambda _req: release.wait(10)  # every SMP waits: the loop is stuck
    th = threading.Thread(target=d.run, args=(server,))
    th.start()
    try:
        got = control.query(server.path, timeout=2.0)
    finally:
        release.set()
        t.on_send = None
        d.stop_requested = True
        th.join(10)
        server.close()
    assert got["state"] == "STARTING" and got["activity"] == "starting"
