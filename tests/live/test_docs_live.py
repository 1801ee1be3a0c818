"""The live lines of README.md and docs/guide/*.md (those naming ``--transport umad``; see
tests/support/doc_commands.py), run as written on ibsim: one ibsim on the bundled fabric,
each `smagent run` line started, awaited as MASTER and stopped (exit 0), the guide's daemon
serving every other live line (asked from host H2, as a host of the fabric asks), and the
blocks that run other programs (ibsim itself, diags) run whole by bash, their socket name
made unique."""
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest

from doc_commands import REPO, all_commands, beside_run, blocks
from ibsim_harness import client_env, ibsim_available, run_smagent, skip_reason
from sm_harness import stop_group

pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]

COMMANDS = all_commands()
BLOCKS = blocks(COMMANDS)
BASH_BLOCKS = {k: v for k, v in BLOCKS.items() if any(not c.is_smagent and c.not_run is None for c in v)}
RUN_LINES = [c for c in COMMANDS if c.not_run == "runs until stopped"]
BESIDE = beside_run(COMMANDS)
SERVED = [c for k, v in BLOCKS.items() if k not in BASH_BLOCKS
          for c in v if (c.live or c in BESIDE) and c.not_run is None]
NETFILE = REPO / "smagent" / "data" / "default.net"


def _args(cmd, state):
    """The line's arguments, its --state-dir in the test's scratch dir."""
    argv = cmd.argv
    if "--state-dir" in argv:
        argv[argv.index("--state-dir") + 1] = str(state)
    return argv


def _status(sim, state):
    r = run_smagent(["status", "--json", "--state-dir", state], env=sim.env, cwd=sim.cwd, check=False, timeout=30)
    return r.json() if r.returncode == 0 else {}


def _start(sim, cmd, state):
    proc = subprocess.Popen([sys.executable, "-m", "smagent.cli", *_args(cmd, state)], env=sim.env, cwd=sim.cwd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=open(sim.cwd / "run.stderr", "ab"), start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"{cmd}: exited {proc.returncode}: {(sim.cwd / 'run.stderr').read_text()[-2000:]}"
        s = _status(sim, state)  # MASTER, swept, and its SA answering from that sweep's snapshot
        if s.get("state") == "MASTER" and s.get("sweeps") and (s.get("sa") or {}).get("snapshot") is not None:
            return proc
        time.sleep(0.3)
    stop_group(proc)
    raise AssertionError(f"{cmd}: not MASTER in 60 s")


def test_every_live_line_is_run():
    assert RUN_LINES and SERVED and BASH_BLOCKS
    assert all(c.live for c in RUN_LINES)


def test_run_lines_and_what_they_serve(ibsim):
    sim = ibsim(NETFILE)
    guide = [c for c in RUN_LINES if c.doc.startswith("docs/")]
    for cmd in [c for c in RUN_LINES if c not in guide[:1]]:  # each other one: it starts, is MASTER, stops
        state = sim.cwd / f"state-{cmd.line}"
        assert stop_group(_start(sim, cmd, state)) == 0, cmd
    state = sim.cwd / "state"
    proc = _start(sim, guide[0], state)
    try:
        host = dict(sim.env, SIM_HOST="H2")
        failed = []
        for cmd in SERVED:
            argv = _args(cmd, state)
            r = run_smagent(argv, env=host, cwd=sim.cwd, check=False, timeout=120, errors="replace")
            if "\ufffd" in r.stdout + r.stderr:
                failed.append(f"{cmd}\nnot UTF-8:\n{r.stdout[-800:]}{r.stderr[-800:]}")
            elif r.returncode != cmd.exit_code:
                failed.append(f"{cmd}\nexit {r.returncode}, the doc says {cmd.exit_code}\n{r.stdout[-800:]}{r.stderr[-800:]}")
        assert not failed, "\n\n".join(failed)
    finally:
        assert stop_group(proc) == 0


@pytest.mark.parametrize("key", sorted(BASH_BLOCKS), ids=lambda k: f"{k[0]}:{k[1]}")
def test_block_runs_whole_in_bash(key, tmp_path):
    lines = [c.text for c in BASH_BLOCKS[key] if c.not_run is None]
    sock = f"smagent-docs-{os.getpid()}-{key[1]}"
    script = "set -e\n" + "\n".join(line.replace("IBSIM_SOCKNAME=demo", f"IBSIM_SOCKNAME={sock}") for line in lines)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "smagent"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m smagent.cli "$@"\n')
    shim.chmod(0o755)
    env = client_env(os.environ, tmp_path / "state")
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", ""), "/usr/sbin", "/sbin"])
    env.pop("IBSIM_SOCKNAME", None)
    env.pop("LD_PRELOAD", None)
    proc = subprocess.Popen(["bash", "-c", script], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            stop_group(proc)
        try:  # whatever the block left running in its group (ibsim), ours alone
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    assert proc.returncode == 0, f"{key}: exit {proc.returncode}\n{script}\n{out[-3000:]}"
