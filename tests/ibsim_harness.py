"""Run ibsim for a test and the infiniband-diags tools against it.

    with IbSim(netfile, tmp_path) as sim:
        out = sim.run(["ibnetdiscover"]).stdout

Why it looks like this (see DESIGN.md, "Known pitfalls"):

* ``-n -s``: without a console ibsim would spin on stdin at EOF.
* A unique ``IBSIM_SOCKNAME`` per instance: ibsim binds an abstract socket
  by that name, so parallel simulators must not share one.
* Clients run with ``cwd`` = the scratch directory: umad2sim writes
  ``./sys-<pid>`` directories where it runs.
* ibsim runs in its own session and is stopped by process group on exit,
  always; its output goes to a log file in the scratch directory, which
  error messages point at.
* ibsim has 10 client slots and a client killed mid-run keeps its slot, so
  `run` uses generous timeouts rather than killing eagerly.
"""
from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

IBSIM = "/usr/bin/ibsim"
UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
_seq = itertools.count()


def ibsim_available() -> bool:
    return os.path.exists(IBSIM) and os.path.exists(UMAD2SIM)


def skip_reason() -> str:
    missing = [p for p in (IBSIM, UMAD2SIM) if not os.path.exists(p)]
    return f"ibsim is not installed ({', '.join(missing)} absent; Debian package ibsim-utils)"


class IbSimError(RuntimeError):
    """ibsim did not start, died, or a tool run against it failed."""


class IbSim:
    """A running ibsim on `netfile`; use as a context manager.

    Attributes: `env` (environment for clients: IBSIM_SOCKNAME, LD_PRELOAD),
    `cwd` (scratch directory), `log` (ibsim's stdout+stderr), `proc`.
    """

    def __init__(self, netfile, tmpdir, extra_args=(), ready_timeout: float = 30.0):
        self.netfile = Path(netfile).resolve()
        self.cwd = Path(tmpdir)
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.extra_args = list(extra_args)
        self.ready_timeout = ready_timeout
        self.sockname = f"smagent-{os.getpid()}-{next(_seq)}-{uuid.uuid4().hex[:8]}"
        self.log = self.cwd / f"ibsim-{self.sockname}.log"
        env = dict(os.environ)
        env["IBSIM_SOCKNAME"] = self.sockname
        env["LD_PRELOAD"] = UMAD2SIM
        env["SMAGENT_STATE_DIR"] = str(self.cwd / "smagent-state")  # backups and journal stay in the scratch dir
        env.pop("SIM_HOST", None)
        self.env = env
        self.proc: subprocess.Popen | None = None

    # -- lifecycle -----------------------------------------------------
    def __enter__(self) -> "IbSim":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        if not ibsim_available():
            raise IbSimError(skip_reason())
        sim_env = {k: v for k, v in self.env.items() if k != "LD_PRELOAD"}
        cmd = [IBSIM, "-n", "-s", *self.extra_args, str(self.netfile)]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                cmd,
                cwd=self.cwd,
                env=sim_env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        # first ibsim says it parsed the file and is up ...
        while b"Network simulator ready" not in self.log.read_bytes():
            self._check_alive()
            if time.monotonic() > deadline:
                raise IbSimError(f"ibsim not ready after {self.ready_timeout}s; log: {self.log}")
            time.sleep(0.05)
        # ... then a client must actually get an answer through umad2sim
        last = None
        while time.monotonic() < deadline:
            self._check_alive()
            last = self.run(["smpquery", "-D", "nodeinfo", "0"], check=False, timeout=10)
            if last.returncode == 0:
                return
            time.sleep(0.2)
        raise IbSimError(
            f"smpquery never got an answer from ibsim (last rc={last and last.returncode}, "
            f"stderr={last and last.stderr.strip()!r}); log: {self.log}"
        )

    def _check_alive(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise IbSimError(
                f"ibsim exited with status {self.proc and self.proc.returncode} "
                f"while loading {self.netfile}; log {self.log}:\n{tail}"
            )

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue

    # -- clients -------------------------------------------------------
    def run(self, cmd, check: bool = True, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
        """Run an infiniband-diags (or any libibumad) tool against this ibsim.

        Returns the CompletedProcess (text mode, output captured). With
        `check`, a non-zero exit raises IbSimError carrying stderr.
        """
        cmd = [str(c) for c in cmd]
        if "/" not in cmd[0]:  # the diags live in /usr/sbin, often not on a user's PATH
            exe = shutil.which(cmd[0], path=os.pathsep.join([self.env.get("PATH", ""), "/usr/sbin", "/sbin"]))
            cmd[0] = exe or cmd[0]
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        res = subprocess.run(cmd, env=self.env, cwd=self.cwd, timeout=timeout, **kw)
        if check and res.returncode != 0:
            raise IbSimError(
                f"{' '.join(cmd)} exited {res.returncode}: {(res.stderr or '').strip()[-2000:]}"
            )
        return res


try:  # a fixture for test modules: `from ibsim_harness import ibsim_factory`
    import pytest

    @pytest.fixture
    def ibsim_factory(tmp_path):
        """Start ibsim on a net file: ``sim = ibsim_factory(path, extra_args=())``.

        Skips the test when ibsim is not installed; stops every simulator
        it started at teardown.
        """
        if not ibsim_available():
            pytest.skip(skip_reason())
        started: list[IbSim] = []

        def start(netfile, extra_args=(), tmpdir=None) -> IbSim:
            sim = IbSim(netfile, tmpdir or tmp_path / f"sim{len(started)}", extra_args)
            started.append(sim)
            sim.start()
            return sim

        yield start
        for sim in started:
            sim.stop()
except ImportError:  # pragma: no cover - harness used without pytest
    pass
