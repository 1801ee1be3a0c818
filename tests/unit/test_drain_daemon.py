"""`smagent drain` / `undrain` against the running SM (issue 40 item 1, `smagent.sm.drained`),
on the in-process simulator with a stepped clock. The witness is the simulator's own data
plane (packets traced through the tables the switches hold), not the SM's code: after the
drain no host pair crosses the drained switch and none is lost; a full sweep, a repair, the
audit and a restart from the state directory keep it so; an undrain routes over it again.
Unsafe drains are refused before any Set and leave the drained set as it was."""
from __future__ import annotations

import json
import os
import threading

import pytest

from smagent.config import drainfile
from smagent.config.files import StateDir
from smagent.errors import BadInput
from smagent.sm import audit, control, metrics_server
from smagent.sm.daemon import Daemon, DaemonOptions
from smagent.transport.sim import SimTransport


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def make(state_dir, t=None, **kw):
    t = t or SimTransport()
    t.serve()
    clock = Clock()
    d = Daemon(t, DaemonOptions(sweep_interval=2, state_dir=str(state_dir), **kw), clock=clock)
    d.start()
    return t, d, clock


def run_for(d, clock, seconds, step=0.5):
    end = clock.now + seconds
    while clock.now < end:
        clock.now += step
        d.step(max_wait=0)


def ask(d, command, **args) -> dict:
    """What the daemon's loop answers to ``command`` from the control socket."""
    answer = d._answer_control(command, args)
    d.step(max_wait=0)
    assert answer.done()
    return answer.result()


def hosts(sim):
    return [(n.name, p) for n in sim.nodes.values() if not n.is_switch for p in range(1, n.num_ports + 1)
            if n.peers[p] is not None]


def crossing(sim, switch: str) -> tuple[list, list]:
    """(host pairs not delivered, host pairs whose path crosses ``switch``) on the data plane."""
    lost, through = [], []
    hs = hosts(sim)
    for a in hs:
        for b in hs:
            if a[0] == b[0]:
                continue
            tr = sim.trace(a, sim.port_lid(b))
            if tr.outcome != "delivered":
                lost.append((a, b))
            elif any(getattr(h[0], "name", h[0]) == switch for h in tr.hops):
                through.append((a, b))
    return lost, through


def sets_sent(t) -> int:
    return sum(v for k, v in t.stats.by_kind.items() if k.startswith("SubnSet"))


def test_drain_keeps_across_a_full_sweep_a_repair_and_the_audit_then_undrain(tmp_path):
    t, d, clock = make(tmp_path, audit_share=4.0)
    sim = t.sim
    assert crossing(sim, "S1")[1]  # routed over S1 before
    out = ask(d, "drain", targets=["S1"])
    assert out["safe_to_remove"] and out["kept"] and out["sets"] > 0 and out["entries_left"] == []
    assert crossing(sim, "S1") == ([], [])
    assert drainfile.load(tmp_path) == [drainfile.Entry(sim.node("S1").guid, "S1", None)]
    d.duties.sweep("a full sweep, as after a handover")  # rediscovers: S1 is there, cabled
    assert d.last_sweep["ok"] and not d.last_sweep["incremental"]
    assert crossing(sim, "S1") == ([], [])
    sim.unlink("H1", 2)  # a link change: the light sweep sees it, a repair follows
    run_for(d, clock, 6)
    assert d.counters.repairs >= 1 and crossing(sim, "S1") == ([], [])
    n = len(audit.items(d.known))
    run_for(d, clock, (n / (4.0 * len(sim.switches())) + 2) * 2)  # a whole audit pass
    assert d.audit.passes >= 1 and d.counters.drifts_found == 0 and crossing(sim, "S1") == ([], [])
    st = d.status()
    assert st["drained"] == [{"guid": f"{sim.node('S1').guid:#018x}", "name": "S1", "port": None}]
    assert f'smagent_drained{{guid="{sim.node("S1").guid:#018x}",node="S1",port=""}} 1.0' in \
        metrics_server.status_text(st)
    out = ask(d, "undrain", targets=["S1"])
    assert out["undrained"] == ["S1"] and out["sets"] > 0 and out["still_drained"] == []
    lost, through = crossing(sim, "S1")
    assert lost == [] and through  # routed over S1 again
    assert not StateDir(tmp_path).drained.exists() and d.status()["drained"] == []


def test_a_restart_from_the_state_directory_keeps_it_drained(tmp_path):
    t, d, _clock = make(tmp_path)
    assert ask(d, "drain", targets=["S2"])["safe_to_remove"]
    fresh = SimTransport()  # the same fabric, as it powers up: nothing routed yet
    _t2, d2, _c2 = make(tmp_path, t=fresh)
    assert d2.last_sweep["ok"] and d2.status()["drained"][0]["name"] == "S2"
    assert crossing(fresh.sim, "S2") == ([], [])


def test_a_cable(tmp_path):
    t, d, _clock = make(tmp_path)
    assert any(t.sim.lft("L3")[t.sim.port_lid(h)] == 5 for h in hosts(t.sim))  # routed over it before
    out = ask(d, "drain", targets=["L3[5]"])
    assert out["safe_to_remove"] and out["drained"] == ["L3[5]"]
    for a in hosts(t.sim):
        for b in hosts(t.sim):
            if a[0] != b[0]:
                tr = t.sim.trace(a, t.sim.port_lid(b))
                assert tr.outcome == "delivered"
                assert not any(getattr(h[0], "name", h[0]) == "L3" and h[2] == 5 for h in tr.hops)
    d2 = Daemon(SimTransport(), DaemonOptions(state_dir=str(tmp_path)))
    assert d2.drained.entries == (drainfile.Entry(t.sim.node("L3").guid, "L3", 5),)


@pytest.mark.parametrize("targets, why", [
    (["S1", "S2"], "would cut off"),  # every leaf apart: hosts elsewhere lose each other
    (["L1"], "own port"),  # the SM runs on H1, cabled to L1 on its port
])
def test_an_unsafe_drain_is_refused_before_any_set(tmp_path, targets, why):
    t, d, _clock = make(tmp_path)
    before = sets_sent(t)
    out = ask(d, "drain", targets=targets)
    assert out["exit"] == 4 and why in out["error"] and "nothing was sent" in out["error"]
    assert sets_sent(t) == before and d.drained.entries == () and not StateDir(tmp_path).drained.exists()


def test_a_dry_run_and_bad_targets_change_nothing(tmp_path):
    t, d, _clock = make(tmp_path)
    before = sets_sent(t)
    out = ask(d, "drain", targets=["S1"], dry_run=True)
    assert out["dry_run"] and out["rerouted"] > 0 and not out["safe_to_remove"]
    assert ask(d, "drain", targets=["nosuch"])["exit"] == 2
    assert ask(d, "drain", targets=[])["exit"] == 2
    assert ask(d, "undrain", targets=["S1"])["exit"] == 2  # not drained
    assert sets_sent(t) == before and d.drained.entries == ()
    assert ask(d, "drain", targets=["S1"])["safe_to_remove"]
    assert "drained already" in ask(d, "drain", targets=["S1"])["error"]


def test_through_the_socket(tmp_path):
    """The client's line, the answer the loop sets, the JSON the client reads."""
    t, d, _clock = make(tmp_path)
    server = control.ControlServer(control.socket_path(tmp_path))
    d.control = server
    got: dict = {}
    client = threading.Thread(target=lambda: got.update(
        control.query(server.path, "drain", timeout=30, args={"targets": ["S1"]})))
    client.start()
    try:
        while client.is_alive():
            d.step(max_wait=0.05)
    finally:
        client.join()
        server.close()
    assert got["safe_to_remove"] and got["lines"][0].startswith("drained S1:")


@pytest.mark.parametrize("text, problem", [
    ("{", "not JSON"),
    ('{"version": 2, "drained": []}', "version 2"),
    ('{"version": 1, "drained": [{"guid": "12", "name": "S1", "port": null}]}', "not a hex GUID"),
    ('{"version": 1, "drained": [{"guid": "0x1", "name": "S1", "port": 0}]}', "port 0"),
    ('{"version": 1, "drained": [{"guid": "0x1", "name": "S1", "port": null},'
     ' {"guid": "0x1", "name": "S1", "port": null}]}', "listed twice"),
])
def test_a_damaged_drained_file_stops_the_start(tmp_path, text, problem):
    StateDir(tmp_path).drained.write_text(text)
    with pytest.raises(BadInput) as e:
        Daemon(SimTransport(), DaemonOptions(state_dir=str(tmp_path)))
    assert problem in str(e.value) and str(StateDir(tmp_path).drained) in str(e.value)
    assert e.value.exit_code == 2


def test_a_drained_file_that_is_not_a_regular_file_is_refused(tmp_path):
    os.mkfifo(StateDir(tmp_path).drained)
    with pytest.raises(BadInput, match="not a regular file"):
        drainfile.load(tmp_path)


def test_the_file_round_trips():
    entries = [drainfile.Entry(0x2C90000000001, "core 1", None), drainfile.Entry(0x2C90000000002, "leaf", 7)]
    assert drainfile.parse(drainfile.dump(entries)) == entries
    assert json.loads(drainfile.dump(entries))["drained"][1] == {"guid": "0x0002c90000000002", "name": "leaf",
                                                                 "port": 7}


def test_the_control_line_is_checked():
    assert control.parse_line('drain {"targets": ["S1"]}') == ("drain", {"targets": ["S1"]})
    assert control.parse_line("status") == ("status", {})
    for bad in ("reboot", "drain [1]", "drain {"):
        with pytest.raises(ValueError):
            control.parse_line(bad)


def _cli_with_daemon(d, cli, *args):
    """``smagent ARGS`` in a thread while the daemon's loop answers its control socket."""
    server = control.ControlServer(control.socket_path(d.opts.state_dir))
    d.control = server
    got: list = []
    client = threading.Thread(target=lambda: got.append(cli(*args)))
    client.start()
    try:
        while client.is_alive():
            d.step(max_wait=0.05)
    finally:
        client.join()
        server.close()
        d.control = None
    return got[0]


def test_the_cli_asks_the_running_sm(tmp_path, cli):
    t, d, _clock = make(tmp_path)
    sd = str(tmp_path)
    r = _cli_with_daemon(d, cli, "drain", "--state-dir", sd, "S1")
    assert r.exit_code == 0 and "safe to remove" in r.output and "until `smagent undrain`" in r.output
    assert d.drained.entries[0].name == "S1"
    r = _cli_with_daemon(d, cli, "drain", "--state-dir", sd, "S2")  # S1 and S2 out: leaves apart
    assert r.exit_code == 4 and "would cut off" in r.output
    r = _cli_with_daemon(d, cli, "drain", "--state-dir", sd, "--routing", "updn", "S2")
    assert r.exit_code == 2 and "--routing" in r.output
    r = _cli_with_daemon(d, cli, "status", "--state-dir", sd)
    assert "drained: S1" in r.output
    r = _cli_with_daemon(d, cli, "undrain", "--state-dir", sd, "--json", "S1")
    assert r.exit_code == 0 and json.loads(r.output)["undrained"] == ["S1"] and d.drained.entries == ()


def test_undrain_without_a_daemon_drops_it_from_the_set_and_sweeps(tmp_path, cli):
    s1 = SimTransport().sim.node("S1").guid
    drainfile.save(tmp_path, [drainfile.Entry(s1, "S1", None)])
    r = cli("undrain", "--state-dir", tmp_path, "S1")
    assert r.exit_code == 0 and "a sweep routed over the whole fabric again" in r.output
    assert drainfile.load(tmp_path) == []


def test_pulled_after_the_drain_no_pair_is_lost_and_the_sm_stays_clean(tmp_path):
    t, d, clock = make(tmp_path)
    sim = t.sim
    assert ask(d, "drain", targets=["S1"])["safe_to_remove"]
    s1 = sim.node("S1")
    for p in [p for p in range(1, s1.num_ports + 1) if s1.peers[p] is not None]:
        sim.unlink("S1", p)  # pulled cable by cable
        assert crossing(sim, "S1")[0] == []
        run_for(d, clock, 3)  # the light sweep sees it, a repair follows
        assert d.last_sweep["ok"] and crossing(sim, "S1")[0] == []
    assert d.counters.repairs >= 1 and d.counters.sweeps_failed == 0
    out = ask(d, "undrain", targets=["S1"])  # gone: nothing to route over, but no longer drained
    assert out["undrained"] == ["S1"] and crossing(sim, "S1") == ([], [])


def test_run_refuses_to_start_on_a_damaged_drained_file(tmp_path, cli):
    StateDir(tmp_path).drained.write_text('{"version": 1, "drained": [1]}')
    r = cli("run", "--state-dir", tmp_path)
    assert r.exit_code == 2 and "drained-set file" in r.output and "entry 1" in r.output


def test_an_entry_led_back_into_it_after_the_reroute_is_reported(tmp_path, monkeypatch):
    """The daemon's proof reads what the switches cabled into the drained one hold after the
    reroute (not the plan): an LFT entry pointed back into it makes the drain unsafe."""
    t, d, _clock = make(tmp_path)
    s1 = t.sim.node("S1")
    leaf, port = next(peer for peer in s1.peers if peer is not None and peer[0].is_switch)
    host = next(n for n in t.sim.nodes.values() if not n.is_switch and n.peers[1] and n.peers[1][0] is not leaf)
    lid = t.sim.port_lid((host.name, 1))
    real = d.duties.sweep

    def sweep_then_tamper(*args, **kw):
        done = real(*args, **kw)
        leaf.lft[lid] = port  # after the Sets, before the read-back
        return done

    monkeypatch.setattr(d.duties, "sweep", sweep_then_tamper)
    out = ask(d, "drain", targets=["S1"])
    assert not out["safe_to_remove"] and out["entries_left"] == [f"{leaf.name} LFT LID {lid} -> port {port}"]
    assert "NOT safe to remove: 1 entries still lead into it:" in out["lines"]
