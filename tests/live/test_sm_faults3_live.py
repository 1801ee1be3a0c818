"""Issue 41: the daemon under faults, part three, each on ibsim (fat_tree_2(4): hosts H0-H7
on leaves L0-L3, spines S0 and S1; smagent on H0). A reload that would loop is refused and
the repairs go on; cuts no trap reports are found by the repair after the one that is; a
guid2lid linked to /dev/zero is refused, not read; idle control clients do not stop
`status`; a trap flood is a few log lines and a count; a MASTER whose sweeps are refused
says so in `status`, `status --check` and the metrics."""
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from ibsim_harness import ibsim_available, skip_reason
from sm_harness import Daemon, procs, walk_all_pairs  # noqa: F401 (procs: a fixture)
from smagent.model import netfile, topogen
from smagent.sm import control
from smagent.sm.metrics_server import status_text

pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]


def fabric(tmp_path, ibsim):
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    return ibsim(net, console=True)


def settled(d, timeout=20.0, what="MASTER and a clean sweep"):
    return d.wait(lambda s: s["state"] == "MASTER" and s["sweeps"] >= 1 and not s["activity"]
                  and (s["last_sweep"] or {}).get("ok"), timeout=timeout, what=what)


def after(d, s0, what, timeout=20.0):
    """The status once a sweep or repair after `s0` (a status) has finished cleanly."""
    return d.wait(lambda s: s["last_sweep"] and s["last_sweep"]["time"] > s0["last_sweep"]["time"]
                  and s["last_sweep"]["ok"] and s["last_sweep"]["problems"] == 0 and not s["activity"],
                  timeout=timeout, what=what)


def lid_of(sim, dr: str) -> int:
    out = sim.run(["smpquery", "-D", "portinfo", dr]).stdout
    return int(re.search(r"^Lid:\.*(\d+)", out, re.M).group(1))


def status_cli(d, *args):
    return subprocess.run([sys.executable, "-m", "smagent.cli", "status", "--state-dir", str(d.state), *args],
                          env=d.env, capture_output=True, text=True, timeout=30)


def test_a_reload_that_loops_is_refused_and_repairs_go_on(tmp_path, ibsim, procs):
    """41.1: SIGHUP with static LFT entries that loop (L0 and S0 send H2's LID to each
    other): refused before it is in force (logged, in `status`, in the metrics); a link
    cut afterwards is repaired with the settings in force."""
    sim = fabric(tmp_path, ibsim)
    desired = tmp_path / "desired.yaml"
    desired.write_text("routing: minhop\n")
    d = Daemon(sim, "--desired", str(desired), "--sweep-interval", "30")
    procs.append(d)
    settled(d)
    h2 = lid_of(sim, "0,1,3,2,1")  # H0 -> L0 -> S0 -> L1 -> H2
    desired.write_text(f"routing: minhop\nlft:\n  - {{switch: L0, lid: {h2}, port: 3}}\n"
                       f"  - {{switch: S0, lid: {h2}, port: 1}}\n")
    d.proc.send_signal(signal.SIGHUP)
    d.wait(lambda s: "SIGHUP: " in d.logtext() and not s["activity"], timeout=15, what="the reload handled")
    time.sleep(1.5)  # the retries after a refused sweep (0.2 s, 0.5 s, ...) have run
    s0 = d.status()
    sim.unlink("L1", 4)  # L1 - S1
    s = after(d, s0, "the repair of a cut after a refused reload")
    walk_all_pairs(sim)
    assert s["routed"] is True and s["config"]["reload"]["ok"] is False, s
    assert "nothing was sent" in s["config"]["reload"]["error"], s
    assert "not reloaded, the previous desired state stays" in d.logtext()
    out = status_cli(d).stdout
    assert "last reload:" in out and "REFUSED" in out, out
    walk_all_pairs(sim)


def test_cuts_no_trap_reports_are_found_by_the_first_repair(tmp_path, ibsim, procs):
    """41.2: L2's route to the SM's LID leaves by one spine; that spine's link to L0 and
    its link to L2 are cut at once. The spine's traps (its route to the SM crossed L0's
    cable) and L2's (its route crossed the other) are lost: only L0 reports. The repair
    after L0's trap finds both cuts (every switch's PortStateChange), long before the
    light sweep (60 s)."""
    sim = fabric(tmp_path, ibsim)
    d = Daemon(sim, "--sweep-interval", "60")
    procs.append(d)
    settled(d)
    h0 = lid_of(sim, "0")
    l2 = lid_of(sim, "0,1,3,3")  # H0 -> L0 -> S0 -> L2
    lft = sim.run(["ibroute", "-n", str(l2)]).stdout
    up = int(re.search(rf"^0x{h0:04x} (\d+)", lft, re.M).group(1))  # L2's port toward the SM: 3 (S0) or 4 (S1)
    spine = {3: "S0", 4: "S1"}[up]
    s0 = d.status()
    sim.unlink(spine, 1)  # spine - L0: L0 reports it
    sim.unlink(spine, 3)  # spine - L2: nobody's trap reaches the SM
    s = after(d, s0, "the repair after the one trap that came")
    assert s["counters"]["light_sweeps"] == 0, s
    walk_all_pairs(sim)


def test_a_guid2lid_that_is_a_device_is_not_read(tmp_path, ibsim, procs):
    """41.3: guid2lid a symlink to /dev/zero: refused with a warning, LIDs assigned, the
    fabric routed; the daemon does not grow."""
    sim = fabric(tmp_path, ibsim)
    state = sim.cwd / "state-default"
    state.mkdir()
    os.symlink("/dev/zero", state / "guid2lid")
    d = Daemon(sim, "--sweep-interval", "30")
    procs.append(d)
    settled(d)
    assert "a character device, not a regular file; not read" in d.logtext()
    assert "state file not read: LID file" in status_cli(d).stdout
    rss_kb = int(re.search(r"VmRSS:\s+(\d+)", (open(f"/proc/{d.proc.pid}/status").read())).group(1))
    assert rss_kb < 400_000, rss_kb
    walk_all_pairs(sim)


def test_status_is_answered_whatever_idle_clients_hold(tmp_path, ibsim, procs):
    """41.5: a client that keeps 200 idle connections open (connecting again whenever the
    socket refuses); `smagent status` still answers, three times in a row."""
    sim = fabric(tmp_path, ibsim)
    d = Daemon(sim, "--sweep-interval", "30")
    procs.append(d)
    settled(d)
    idle, stop = [], threading.Event()

    def hold():
        while len(idle) < 200 and not stop.is_set():
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.setblocking(False)
            try:
                c.connect(str(control.socket_path(d.state)))
                idle.append(c)
            except BlockingIOError:  # the listen backlog is full: try again, as a stubborn client would
                c.close()
                time.sleep(0.01)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    try:
        time.sleep(1.0)
        for _ in range(3):
            r = status_cli(d)
            assert r.returncode == 0 and r.stdout.startswith("state: MASTER"), r.stdout + r.stderr
    finally:
        stop.set()
        holder.join(5)
        for c in idle:
            c.close()


TRAPS_SCRIPT = r"""
import sys
from mad import smp as smpcodec
from mad.attributes import AttrID, Notice, NoticeType, Trap128Details, TrapNumber
from mad.header import Method
from smagent.transport.umad import UmadTransport

sm_lid, count = int(sys.argv[1]), int(sys.argv[2])
with UmadTransport(timeout_ms=100, retries=0) as t:
    for i in range(count):
        notice = Notice(is_generic=1, type=int(NoticeType.URGENT), producer_type_or_vendor_id=2,
                        trap_number_or_device_id=int(TrapNumber.LINK_STATE_CHANGE), issuer_lid=1000 + i % 50,
                        notice_toggle=0, notice_count=0,
                        data_details=Trap128Details.LAYOUT.encode(Trap128Details(lid=1000 + i % 50)))
        t.respond(smpcodec.encode(smpcodec.lid_routed(Method.TRAP, AttrID.NOTICE, 0, notice)), sm_lid)
"""


def test_a_trap_flood_is_a_few_log_lines_and_a_count(tmp_path, ibsim, procs):
    """41.6: 1,000 Trap 128s from a host: a few `trap:` lines, the rest counted and
    summarised ("N more like this"), and the SM still routes."""
    sim = fabric(tmp_path, ibsim)
    d = Daemon(sim, "--sweep-interval", "30")
    procs.append(d)
    s = settled(d)
    sm_lid = lid_of(sim, "0")
    r = subprocess.run([sys.executable, "-c", TRAPS_SCRIPT, str(sm_lid), "1000"], env=dict(d.env, SIM_HOST="H5"),
                       cwd=sim.cwd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    s = d.wait(lambda s: s["counters"]["traps"] >= 1000 and not s["activity"], timeout=60, what="1,000 traps")
    text = d.logtext()
    lines = [ln for ln in text.splitlines() if " trap: trap 128" in ln]
    assert len(lines) <= 60, len(lines)
    assert len(text) < 50_000, len(text)  # nor one repair line naming every trap
    assert s["log_lines_suppressed"] >= 700, s["log_lines_suppressed"]
    d.wait(lambda s: "more like this in the last" in d.logtext(), timeout=20, what="the summary line")
    walk_all_pairs(sim)


def test_a_master_whose_sweeps_are_refused_says_so(tmp_path, ibsim, procs):
    """41.7: a desired state whose static entry loops from the start: every sweep is
    refused (no good settings to fall back on); the first line of `status` says NOT
    ROUTING, `status --check` exits 1, and smagent_fabric_routed is 0."""
    sim = fabric(tmp_path, ibsim)
    out = sim.run(["smpquery", "-D", "nodeinfo", "0,1,3,2,1"]).stdout  # H2, by directed route
    h2 = int(re.search(r"^PortGuid:\.*(0x[0-9a-f]+)", out, re.M).group(1), 16)
    state = sim.cwd / "state-default"
    state.mkdir()
    (state / "guid2lid").write_text(f"0x{h2:016x} 0x0014 0x0014\n")  # H2 keeps LID 20
    desired = tmp_path / "desired.yaml"
    desired.write_text("routing: minhop\nlft:\n  - {switch: L0, lid: 20, port: 3}\n  - {switch: S0, lid: 20, port: 1}\n")
    d = Daemon(sim, "--desired", str(desired), "--sweep-interval", "30")
    procs.append(d)
    s = d.wait(lambda s: s["state"] == "MASTER" and s["sweeps_failed"] >= 1, timeout=20, what="a refused sweep")
    assert s["routed"] is False, s
    r = status_cli(d)
    assert "NOT ROUTING" in r.stdout.splitlines()[0], r.stdout
    assert status_cli(d, "--check").returncode == 1
    from smagent.perf import metrics
    assert "smagent_fabric_routed 0.0" in status_text(d.status()).splitlines()
