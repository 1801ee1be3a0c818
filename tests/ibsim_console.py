"""ibsim with its console on a pipe, for fault injection in live tests.

    with IbSimConsole(netfile, tmp_path) as sim:
        sim.error("S1", 30)                 # drop 30 % of what enters every port of S1
        sim.error("S1", 30, port=0, attr=0x19)  # only LinearForwardingTable SMPs at S1's SMA
        sim.unlink("H1", 1); ...; sim.relink("H1", 1)
        sim.command("Dump")                 # any console command; returns its output

Why a subclass of `ibsim_harness.IbSim` (DESIGN.md, "Known pitfalls"): without
``-n`` ibsim reads commands from stdin, and at EOF it spins at 100 % CPU, so stdin
must be a pipe that stays open for ibsim's whole life. We keep our end open and
close it only after ibsim is stopped.

What the console commands do (ibsim 0.10/0.12, ``ibsim/sim_cmd.c``, ``sim_mad.c``):

* ``Error "node"[port] RATE [ATTR]``: RATE percent (0..100, integer) on that port,
  or on every port of the node (a switch's port 0 included) without ``[port]``.
  Without ATTR, a packet is dropped with that chance each time it *enters* such a
  port on its way (directed-route hops both ways, LID-routed hops), and again at the
  SMA of the target port before it handles the SMP. With ATTR (attribute ID,
  decimal or 0x hex), only the SMA check applies, and only to that attribute: the
  SMP is dropped before it is processed, never after. A drop hands the client
  umad status 110 (ETIMEDOUT) at once.
* ``Unlink "node"[port]`` / ``Unlink "node"``: cut one link / every link of the
  node (both ends go Down/Polling, switches get PortStateChange and a trap 128).
* ``ReLink "node"[port]`` / ``ReLink "node"``: restore what Unlink cut (the link
  comes back in state INIT, like a freshly trained link).
* ``Link "a"[p] "b"[q]``, ``Clear "node"[port]`` (unlink and reset the port),
  ``Dump ["node"]``, ``Route FROM TO``, ``Attached``, ``Quit``.

A command's output is found by sending a marker comment after it: ibsim echoes
comment lines and prints its prompt after every command.
"""
from __future__ import annotations

import itertools
import subprocess
import time

from ibsim_harness import IBSIM, IbSim, IbSimError, ibsim_available, skip_reason

__all__ = ["IbSimConsole", "IbSimError", "ibsim_available", "skip_reason"]

_marks = itertools.count(1)


class IbSimConsole(IbSim):
    """An `IbSim` whose console is driven through a pipe on stdin."""

    def start(self) -> None:
        if not ibsim_available():
            raise IbSimError(skip_reason())
        sim_env = {k: v for k, v in self.env.items() if k != "LD_PRELOAD"}
        cmd = [IBSIM, "-s", *self.extra_args, str(self.netfile)]  # no -n: the console is ours
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                cmd, cwd=self.cwd, env=sim_env, stdin=subprocess.PIPE, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        proc = self.proc
        stdin = proc.stdin if proc is not None else None
        super().stop()  # kill first: at EOF on stdin ibsim would spin
        if stdin is not None:
            try:
                stdin.close()
            except OSError:
                pass

    # -- the console ---------------------------------------------------
    def command(self, text: str, timeout: float = 10.0) -> str:
        """Send one console line; return what ibsim printed for it (prompts removed)."""
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
