"""What the live tests of `smagent run` share: the daemon and OpenSM as processes on
ibsim (stopped by process group, ours only), the `procs` fixture that stops them, and
`sminfo` from a host as the witness of who is MASTER."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

OPENSM = shutil.which("opensm", path="/usr/sbin:/sbin:" + os.environ.get("PATH", ""))
needs_opensm = pytest.mark.skipif(OPENSM is None, reason="opensm is not installed (Debian package opensm)")


class Daemon:
    """`smagent run` on ibsim; stopped with SIGTERM (then SIGKILL) by process group."""

    def __init__(self, sim, *args, host=None):
        self.sim, self.state = sim, sim.cwd / f"state-{host or 'default'}"
        self.env = dict(sim.env)
        if host:
            self.env["SIM_HOST"] = host
        self.log = sim.cwd / f"smagent-run-{host or 'default'}.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "smagent.cli", "--transport", "umad", "run", "--state-dir", str(self.state),
             "--log-file", str(self.log), *args], env=self.env, cwd=sim.cwd, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=open(sim.cwd / "smagent-run.stderr", "ab"), start_new_session=True)

    def status(self) -> dict:
        r = subprocess.run([sys.executable, "-m", "smagent.cli", "status", "--json", "--state-dir", str(self.state)],
                           env=self.env, capture_output=True, text=True, timeout=30)
        return json.loads(r.stdout) if r.returncode == 0 else {"state": None, "error": r.stderr}

    def wait(self, pred, timeout=20.0, what="condition"):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"smagent run exited {self.proc.returncode}: {self.logtext()[-3000:]}"
            s = self.status()
            if s.get("state") and pred(s):
                return s
            time.sleep(0.2)
        raise AssertionError(f"{what} not reached in {timeout} s; status {s}; log:\n{self.logtext()[-3000:]}")

    def logtext(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self, sig=signal.SIGTERM) -> int:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return proc.returncode if proc else 0
        os.killpg(proc.pid, sig)
        try:
            return proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            return proc.wait(10)


class OpenSM:
    def __init__(self, sim, host, priority, workdir: Path):
        workdir.mkdir(parents=True, exist_ok=True)
        conf = workdir / "opensm.conf"
        conf.write_text("sminfo_polling_timeout 1000\npolling_retry_number 2\n")
        self.log = workdir / "opensm.log"
        env = sim.opensm_env(workdir, SIM_HOST=host)
        self.proc = subprocess.Popen([OPENSM, "-F", str(conf), "-f", str(self.log), "-d", "2", "-p", str(priority)],
                                     env=env, cwd=workdir, stdin=subprocess.DEVNULL,
                                     stdout=open(workdir / "stdout", "wb"), stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def stop(self):
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.fixture
def procs():
    """Everything a test starts is stopped at teardown, ours only, by process group."""
    started = []
    yield started
    for p in reversed(started):
        p.stop()


def sminfo_at(sim, host) -> str:
    """SMInfo of the SM on `host`'s port, asked from that node (DR path 0)."""
    r = subprocess.run(["/usr/sbin/sminfo", "-D", "0"], env=dict(sim.env, SIM_HOST=host), cwd=sim.cwd,
                       capture_output=True, text=True, timeout=30)
    return r.stdout


def masters(sim, hosts) -> list[str]:
    return [h for h in hosts if "SMINFO_MASTER" in sminfo_at(sim, h)]


def converge(sim, d, ours, theirs, want_master, timeout=25.0):
    """Wait until exactly `want_master` reports MASTER, then check it stays so."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if masters(sim, [ours, theirs]) == [want_master]:
            break
        time.sleep(0.3)
    else:
        raise AssertionError(f"never exactly one MASTER on {want_master}: {sminfo_at(sim, ours)!r} "
                             f"{sminfo_at(sim, theirs)!r}; log:\n{d.logtext()[-3000:]}")
    for _ in range(5):  # and at every sample after
        assert masters(sim, [ours, theirs]) == [want_master]
        time.sleep(0.3)
