"""Issue 23's "Done when": one `smagent run` on one ibsim fabric taken through the issue's
faults in sequence, then checked with infiniband-diags: every host pair routed (ibroute
walk, ibtracert) and exactly one master, ours, reported by `sminfo` from every host.

The faults, in order: a corrupted guid2lid (23.1); a second daemon on the port (23.3);
a rogue SubnSet(SMInfo) DISABLE and HANDOVER with wrong SM_Keys from another host
(23.4); a link cut while 8 control clients sit idle (23.5); the state directory, a
tmpfs, full while a link comes back (23.2); 30 % loss at every switch (ibsim's console
`Error`) with a cut (23.6). Each was once a master that stopped routing or a second master;
their own tests (tests/test_lids*.py, test_state_files.py, test_sm_lock.py,
test_sm_key_live.py, test_sm_faults.py) show each alone."""
import re
import socket
import subprocess

import pytest

from ibsim_harness import ibsim_available, skip_reason
from sm_harness import Daemon, procs, rogue, walk_all_pairs  # noqa: F401 (procs: a fixture)
from smagent.model import netfile, topogen
from smagent.sm import control

pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]

HOSTS = [f"H{i}" for i in range(8)]  # fat_tree_2(4); smagent on H0 (no SIM_HOST)
SWITCHES = ["L0", "L1", "L2", "L3", "S0", "S1"]


@pytest.fixture
def tmpfs():
    """mount(dir) a 1 MiB tmpfs there; unmounted at teardown."""
    mounted = []

    def mount(where):
        where.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip()}); test_state_files covers a full disk")
        mounted.append(where)
    yield mount
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(where) -> None:
    with open(where / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass


def after(d, s0, what, timeout=30.0):
    """The status once a sweep or repair after `s0` (a status) has finished cleanly."""
    return d.wait(lambda s: s["last_sweep"] and s["last_sweep"]["time"] > s0["last_sweep"]["time"]
                  and s["last_sweep"]["ok"] and s["last_sweep"]["problems"] == 0 and not s["activity"],
                  timeout=timeout, what=what)


def test_the_daemon_through_issue_23s_faults_in_sequence(tmp_path, ibsim, procs, tmpfs):
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net, console=True)
    state = sim.cwd / "state-default"  # the Daemon's state directory, on a tmpfs
    tmpfs(state)
    (state / "guid2lid").write_text("garbage !!!\n")  # 23.1: a corrupted guid2lid

    d = Daemon(sim, "--sweep-interval", "2")
    procs.append(d)
    s = d.wait(lambda s: s["state"] == "MASTER" and s["sweeps"] >= 1 and not s["activity"], what="MASTER")
    assert "bad line" in d.logtext()
    walk_all_pairs(sim)
    ours = int(s["guid"], 16)

    # 23.3: a second daemon on the same port (its own state directory) is refused
    second = sim.smagent("run", "--state-dir", tmp_path / "second", "--log-file", tmp_path / "second.log",
                         check=False, timeout=60)
    assert second.returncode == 4 and "one SM per port" in second.stderr, second.stderr

    # 23.4: a rogue DISABLE and HANDOVER from a host, with wrong SM_Keys, change nothing
    answers = rogue(sim, ours, [{"set": True, "control": 3, "key": 0x77, "guid": 0x77},
                                {"set": True, "control": 1, "key": 0, "guid": 0x77}])
    assert [a[1]["state"] for a in answers] == [3, 3], answers  # answered MASTER, unmoved
    assert d.status()["state"] == "MASTER"

    # 23.5: idle control clients do not hold a repair back
    idle = []
    for _ in range(8):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(str(control.socket_path(state)))
        idle.append(c)
    s0 = d.status()
    sim.unlink("L1", 3)
    s = after(d, s0, "repair of a cut with 8 idle control clients", timeout=10)
    assert s["last_sweep"]["incremental"], s["last_sweep"]
    walk_all_pairs(sim)
    for c in idle:
        c.close()

    # 23.2: a full state directory: warnings, and the SM goes on routing
    fill(state)
    s0 = d.status()
    sim.relink("L1", 3)
    after(d, s0, "repair with the state directory full")
    walk_all_pairs(sim)
    assert "no backup written: No space left on device" in d.logtext()
    (state / "filler").unlink()

    # 23.6: 30 % loss at every switch, and a cut: repaired (retried soon if refused)
    for sw in SWITCHES:
        sim.error(sw, 30)
    s0 = d.status()
    sim.unlink("L2", 3)
    after(d, s0, "a clean repair of a cut under 30 % loss", timeout=40)
    for sw in SWITCHES:
        sim.error(sw, 0)
    s0 = d.status()
    d.wait(lambda s: s["counters"]["light_sweeps"] >= s0["counters"]["light_sweeps"] + 1 and not s["activity"],
           what="a light sweep without loss")

    # the witnesses: every pair routed, one master seen from every host
    walk_all_pairs(sim)
    for h in HOSTS:
        out = subprocess.run(["/usr/sbin/sminfo"], env=dict(sim.env, SIM_HOST=h), cwd=sim.cwd,
                             capture_output=True, text=True, timeout=30).stdout
        m = re.search(r"sm guid (0x[0-9a-f]+).* state 3 SMINFO_MASTER", out)
        assert m and int(m.group(1), 16) == ours, (h, out)
    s = d.status()
    assert s["state"] == "MASTER" and s["other_sms"] == []
    assert d.stop() == 0
