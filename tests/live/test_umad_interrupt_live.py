"""Ctrl-C while umad2sim waits for an ibsim that is not there (issue 39 item 9).

libibumad's opening calls never return under umad2sim when no ibsim listens, and Python
acts on a SIGINT only when a foreign call returns: before the fix the process could only be
killed. Now the opening calls run with SIGINT's default action, so Ctrl-C ends the process
as it ends a C tool (death by the signal; the shell's 130)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from ibsim_harness import REPO, UMAD2SIM, ibsim_available, skip_reason

pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]

CHILD = """
import sys
from smagent.transport import umad_lib
print("opening", flush=True)
umad_lib.UmadPort()
print("opened", flush=True)
"""


def _sleeping_in_c(pid: int, timeout: float = 20.0) -> bool:
    """True once the child sleeps in the kernel's nanosleep: umad2sim's retry loop (the
    child runs no Python sleep of its own)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with open(f"/proc/{pid}/wchan") as f:
            if "nanosleep" in f.read():
                return True
        time.sleep(0.05)
    return False


def test_ctrl_c_ends_a_port_open_waiting_for_an_absent_ibsim(tmp_path):
    env = dict(os.environ, LD_PRELOAD=UMAD2SIM, IBSIM_SOCKNAME=f"absent-{uuid.uuid4().hex[:8]}",
               PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, "-c", CHILD], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as a terminal's job
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "opening"
        assert _sleeping_in_c(p.pid), "the child never reached umad2sim's wait"
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == -signal.SIGINT, (p.returncode, err[-500:])
    assert "opened" not in out
