"""One SM per port (`smagent.sm.lock`): the runtime lock, and the IsSM check.

Live: with the first `smagent run` MASTER on an ibsim node, a second one on the same node
with its own state directory (the first one's deleted, as in the issue) exits 4 with the
message while the first runs; one that uses another runtime directory (so no shared lock)
is refused by the IsSM bit umad2sim shows for the port the first one holds."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from ibsim_harness import ibsim_available, skip_reason
from smagent.model import netfile, topogen
from smagent.sm import lock


def test_a_held_lock_is_refused_with_the_holders_pid(tmp_path):
    first = lock.acquire("mlx5_0", 1, 0x0002C90000000001, str(tmp_path / "run"))
    try:
        with pytest.raises(lock.PortTaken) as e:
            lock.acquire("mlx5_0", 1, 0x0002C90000000001, str(tmp_path / "run"))
        assert e.value.exit_code == 4
        assert f"pid {os.getpid()}" in str(e.value) and "CA mlx5_0 port 1" in str(e.value)
        lock.acquire("mlx5_0", 2, 0x0002C90000000002, str(tmp_path / "run")).release()  # another port is free
    finally:
        first.release()
    lock.acquire("mlx5_0", 1, 0x0002C90000000001, str(tmp_path / "run")).release()  # released: free again


def test_the_runtime_directory_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(lock.RUNTIME_ENV, str(tmp_path / "rt"))
    assert lock.lock_path("ibsim0", 1, 5) == str(tmp_path / "rt" / "smagent-ibsim0-1-0000000000000005.lock")
    monkeypatch.delenv(lock.RUNTIME_ENV)
    assert lock.runtime_dir() == "/run/smagent"


def test_an_unwritable_runtime_directory_is_bad_input(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(lock.BadInput, match="SMAGENT_RUNTIME_DIR"):
        lock.acquire("ca", 1, 1, str(blocker / "sub"))


def _run(sim, state, log, env=None):
    return subprocess.Popen([sys.executable, "-m", "smagent.cli", "--transport", "umad", "run", "--state-dir",
                             str(state), "--log-file", str(log)], env=env or sim.env, cwd=sim.cwd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)


def _master(sim, state) -> bool:
    r = subprocess.run([sys.executable, "-m", "smagent.cli", "status", "--json", "--state-dir", str(state)],
                       env=sim.env, capture_output=True, text=True, timeout=30)
    return r.returncode == 0 and json.loads(r.stdout)["state"] == "MASTER"


@pytest.mark.ibsim
@pytest.mark.skipif(not ibsim_available(), reason=skip_reason())
def test_a_second_daemon_on_the_port_exits_4(ibsim, tmp_path):
    net = tmp_path / "2sw.net"
    net.write_text(netfile.dumps(topogen.two_switch()))
    sim = ibsim(net)
    state = tmp_path / "state1"
    first = _run(sim, state, tmp_path / "run1.log")
    try:
        deadline = time.monotonic() + 30
        while not _master(sim, state):
            assert first.poll() is None and time.monotonic() < deadline, first.stderr.read().decode()[-2000:]
            time.sleep(0.2)
        for _ in range(20):  # the way to a second MASTER: the state directory is gone
            try:  # (the running daemon may be writing into it meanwhile: delete again)
                shutil.rmtree(state)
                break
            except OSError:
                time.sleep(0.1)
        assert not state.exists()
        second = subprocess.run([sys.executable, "-m", "smagent.cli", "--transport", "umad", "run", "--state-dir",
                                 str(tmp_path / "state2")], env=sim.env, cwd=sim.cwd, capture_output=True,
                                text=True, timeout=60)
        assert second.returncode == 4, second.stderr
        assert f"another smagent daemon (pid {first.pid}) is the SM on CA" in second.stderr
        assert "Traceback" not in second.stderr
        # no shared lock (another runtime directory): the port's IsSM bit refuses it
        other = dict(sim.env, SMAGENT_RUNTIME_DIR=str(tmp_path / "other-runtime"))
        third = subprocess.run([sys.executable, "-m", "smagent.cli", "--transport", "umad", "run", "--state-dir",
                                str(tmp_path / "state3")], env=other, cwd=sim.cwd, capture_output=True, text=True,
                               timeout=60)
        assert third.returncode == 4, third.stderr
        assert "CapabilityMask has IsSM set" in third.stderr
        assert first.poll() is None  # the first one never noticed
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGTERM)
        assert first.wait(15) == 0
    # gone: the port is free again, for a daemon with any state directory
    again = _run(sim, tmp_path / "state4", tmp_path / "run4.log")
    try:
        deadline = time.monotonic() + 30
        while not _master(sim, tmp_path / "state4"):
            assert again.poll() is None and time.monotonic() < deadline, again.stderr.read().decode()[-2000:]
            time.sleep(0.2)
    finally:
        os.killpg(again.pid, signal.SIGTERM)
        assert again.wait(15) == 0
