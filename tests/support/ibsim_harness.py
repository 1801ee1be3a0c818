"""Run ibsim for a test and the infiniband-diags tools against it.

    with IbSim(netfile, tmp_path) as sim:
        out = sim.run(["ibnetdiscover"]).stdout
        doc = sim.smagent("sweep", "--json").json()

    with IbSim(netfile, tmp_path, console=True) as sim:   # drive ibsim's console
        sim.error("S1", 30)                 # drop 30 % of what enters every port of S1
        sim.error("S1", 30, port=0, attr=0x19)  # only LinearForwardingTable SMPs at S1's SMA
        sim.unlink("H1", 1); ...; sim.relink("H1", 1)
        sim.command("Dump")                 # any console command; returns its output

In pytest, use the fixtures of tests/conftest.py (`ibsim`, `live_cli`) rather than
this class directly. This is the one way the project starts ibsim: tests, bench/ and
scripts/ all come here.

Why it looks like this (see docs/PITFALLS.md):

* ``-n -s``: without a console ibsim would spin on stdin at EOF. With
  ``console=True`` there is no ``-n``: stdin is a pipe we keep open for ibsim's
  whole life and close only after ibsim is stopped.
* A unique ``IBSIM_SOCKNAME`` per instance: ibsim binds an abstract socket
  by that name, so parallel simulators must not share one.
* Clients run with ``cwd`` = the scratch directory: umad2sim writes
  ``./sys-<pid>`` directories where it runs.
* ibsim runs in its own session and is stopped by process group on exit,
  always; its output goes to a log file in the scratch directory, which
  error messages point at.
* Every client gets its own smagent state dir (``SMAGENT_STATE_DIR`` in the
  scratch directory) and this checkout first on ``PYTHONPATH``.
* ibsim has 10 client slots and a client killed mid-run keeps its slot, so
  `run` uses generous timeouts rather than killing eagerly.
"""
from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

IBSIM = "/usr/bin/ibsim"
UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
REPO = Path(__file__).resolve().parents[2]  # the checkout whose smagent clients run
_seq = itertools.count()
_marks = itertools.count(1)


def ibsim_available() -> bool:
    return os.path.exists(IBSIM) and os.path.exists(UMAD2SIM)


def skip_reason() -> str:
    missing = [p for p in (IBSIM, UMAD2SIM) if not os.path.exists(p)]
    return f"ibsim is not installed ({', '.join(missing)} absent; Debian package ibsim-utils)"


class IbSimError(RuntimeError):
    """ibsim did not start, died, or a tool run against it failed."""


class Ran(subprocess.CompletedProcess):
    """A finished `smagent` process: CompletedProcess plus `json()`, the one document on stdout."""

    @classmethod
    def of(cls, res: subprocess.CompletedProcess) -> "Ran":
        return cls(res.args, res.returncode, res.stdout, res.stderr)

    def json(self):
        return json.loads(self.stdout)


def client_env(base: dict, state_dir) -> dict:
    """`base` for a `python -m smagent.cli` client: this checkout first on PYTHONPATH,
    its own state dir, the daemon's port locks beside it (never /run),
    SMAGENT_TRANSPORT=sim whatever the caller's shell says (an ibsim client's --transport umad wins)."""
    env = dict(base)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), base.get("PYTHONPATH")]))
    env["SMAGENT_STATE_DIR"] = str(state_dir)
    env["SMAGENT_RUNTIME_DIR"] = str(Path(state_dir).parent / "smagent-runtime")
    env["SMAGENT_TRANSPORT"] = "sim"  # the ibsim clients say --transport umad; the rest: never the host's CA
    return env


def run_smagent(args, *, env: dict, cwd, check: bool = True, timeout: float = 600, **kw) -> Ran:
    """`python -m smagent.cli ARGS` in `cwd`; with `check`, a non-zero exit fails the test
    (AssertionError with the tail of stdout and stderr)."""
    args = [str(a) for a in args]
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    res = Ran.of(subprocess.run([sys.executable, "-m", "smagent.cli", *args], env=env, cwd=cwd,
                                timeout=timeout, **kw))
    if check and res.returncode != 0:
        raise AssertionError(f"smagent {' '.join(args)} -> {res.returncode}\n"
                             f"{(res.stdout or '')[-3000:]}\n{(res.stderr or '')[-3000:]}")
    return res


class IbSim:
    """A running ibsim on `netfile`; use as a context manager.

    Attributes: `env` (environment for clients: IBSIM_SOCKNAME, LD_PRELOAD,
    SMAGENT_STATE_DIR, PYTHONPATH), `cwd` (scratch directory), `log` (ibsim's
    stdout+stderr), `proc`. With `console`, ibsim reads console commands from a pipe
    (`command`, `error`, `unlink`, `relink`, `dump`).
    """

    def __init__(self, netfile, tmpdir, extra_args=(), ready_timeout: float = 30.0, console: bool = False):
        self.netfile = Path(netfile).resolve()
        self.cwd = Path(tmpdir)
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.extra_args = list(extra_args)
        self.ready_timeout = ready_timeout
        self.console = console
        self.sockname = f"smagent-{os.getpid()}-{next(_seq)}-{uuid.uuid4().hex[:8]}"
        self.log = self.cwd / f"ibsim-{self.sockname}.log"
        # backups and journal stay in the scratch dir
        env = client_env(os.environ, self.cwd / "smagent-state")
        env["IBSIM_SOCKNAME"] = self.sockname
        env["LD_PRELOAD"] = UMAD2SIM
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
        # no -n with a console: the console (stdin, a pipe we keep open) is ours
        cmd = [IBSIM, *([] if self.console else ["-n"]), "-s", *self.extra_args, str(self.netfile)]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                cmd,
                cwd=self.cwd,
                env=sim_env,
                stdin=subprocess.PIPE if self.console else subprocess.DEVNULL,
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
        if proc is None:
            return
        try:
            self._kill(proc)
        finally:
            if proc.stdin is not None:  # close the console only now: at EOF ibsim would spin
                try:
                    proc.stdin.close()
                except OSError:
                    pass

    @staticmethod
    def _kill(proc: subprocess.Popen) -> None:
        if proc.poll() is not None:
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


    def smagent(self, *args, check: bool = True, timeout: float = 600, record=None, **kw) -> Ran:
        """`python -m smagent.cli --transport umad [--record FILE] ARGS` against this ibsim,
        in its scratch dir with its env (see `run_smagent` for `check`)."""
        pre = ["--transport", "umad", *(["--record", str(record)] if record is not None else [])]
        return run_smagent([*pre, *args], env=self.env, cwd=self.cwd, check=check, timeout=timeout, **kw)

    def opensm_env(self, workdir, **extra) -> dict:
        """The env for an OpenSM client of this ibsim: its cache and temporary files
        (guid2lid, opensm-subnet.lst, ...) in `workdir` (created), not /var."""
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        return dict(self.env, OSM_CACHE_DIR=str(workdir), OSM_TMP_DIR=str(workdir), **extra)

    # -- the console (console=True) ------------------------------------
    # What the commands do (ibsim 0.10/0.12, ``ibsim/sim_cmd.c``, ``sim_mad.c``):
    # * ``Error "node"[port] RATE [ATTR]``: RATE percent (0..100, integer) on that port,
    #   or on every port of the node (a switch's port 0 included) without ``[port]``.
    #   Without ATTR, a packet is dropped with that chance each time it *enters* such a
    #   port on its way (directed-route hops both ways, LID-routed hops), and again at the
    #   SMA of the target port before it handles the SMP. With ATTR (attribute ID,
    #   decimal or 0x hex), only the SMA check applies, and only to that attribute: the
    #   SMP is dropped before it is processed, never after. A drop hands the client
    #   umad status 110 (ETIMEDOUT) at once.
    # * ``Unlink "node"[port]`` / ``Unlink "node"``: cut one link / every link of the
    #   node (both ends go Down/Polling, switches get PortStateChange and a trap 128).
    # * ``ReLink "node"[port]`` / ``ReLink "node"``: restore what Unlink cut (the link
    #   comes back in state INIT, like a freshly trained link).
    # * ``Link "a"[p] "b"[q]``, ``Clear "node"[port]`` (unlink and reset the port),
    #   ``Dump ["node"]``, ``Route FROM TO``, ``Attached``, ``Quit``.
    # A command's output is found by sending a marker comment after it: ibsim echoes
    # comment lines and prints its prompt after every command.
    def command(self, text: str, timeout: float = 10.0) -> str:
        """Send one console line; return what ibsim printed for it (prompts removed)."""
        if not self.console:
            raise IbSimError("this ibsim runs without a console (IbSim(..., console=True) has one)")
        if "\n" in text:
            raise ValueError("one command per call")
        self._check_alive()
        start = self.log.stat().st_size
        mark = f"# smagent-mark-{next(_marks)}"
        self.proc.stdin.write(f"{text}\n{mark}\n".encode())
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while True:
            with open(self.log, "rb") as f:
                f.seek(start)
                got = f.read().decode(errors="replace")
            at = got.find(mark)
            if at >= 0:
                out = got[:at]
                return out.replace("sim> ", "").replace("sim (inactive)> ", "").strip("\n")
            self._check_alive()
            if time.monotonic() > deadline:
                raise IbSimError(f"ibsim console: no answer to {text!r} after {timeout}s; log: {self.log}")
            time.sleep(0.02)

    def _checked(self, text: str) -> str:
        out = self.command(text)
        low = out.lower()
        if any(w in low for w in ("not found", "bad ", "can't", "unknown", "missing", "must be", "no previous",
                                  "is not linked")):
            raise IbSimError(f"ibsim console refused {text!r}: {out.strip()}")
        return out

    @staticmethod
    def _where(node: str, port: int | None) -> str:
        return f'"{node}"' + ("" if port is None else f"[{port}]")

    def error(self, node: str, rate: int, *, port: int | None = None, attr: int | None = None) -> str:
        """Drop RATE % of SMPs at NODE (all its ports, or PORT), optionally only ATTR."""
        if not 0 <= rate <= 100:
            raise ValueError("rate is a percentage 0..100")
        tail = "" if attr is None else f" {attr}"
        return self._checked(f"Error {self._where(node, port)} {rate}{tail}")

    def unlink(self, node: str, port: int | None = None) -> str:
        return self._checked(f"Unlink {self._where(node, port)}")

    def relink(self, node: str, port: int | None = None) -> str:
        return self._checked(f"ReLink {self._where(node, port)}")

    def dump(self, node: str | None = None) -> str:
        return self.command("Dump" + ("" if node is None else f' "{node}"'))
