"""The progress line (issue item 7): on a terminal only, with the step of its total where the
steps are known (sweep, plan, apply), the SMPs sent (verify, report too), and `-v`'s log
lines never run into it: each is printed after the line was cleared, from column 0."""
from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import smagent
from smagent.commands.common import ProgressLine
from smagent.sweep import PLAN_PHASES, WRITE_PHASES

ROOT = Path(__file__).resolve().parents[2]


def run_on_tty(tmp_path, *args) -> tuple[int, str]:
    """`python -m smagent ARGS` with stderr on a pseudo-terminal; (exit code, what it drew)."""
    env = {k: v for k, v in os.environ.items() if k != "SMAGENT_TRANSPORT"}
    env.update(SMAGENT_TRANSPORT="sim", PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
               SMAGENT_STATE_DIR=str(tmp_path / "state"))
    master, slave = os.openpty()
    p = subprocess.Popen([sys.executable, "-m", "smagent", *args], stdout=subprocess.DEVNULL, stderr=slave,
                         stdin=subprocess.DEVNULL, env=env, cwd=tmp_path)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return p.wait(timeout=120), out.decode(errors="replace")


def test_sweep_progress_has_totals_and_logs_start_on_their_own_line(tmp_path):
    rc, drawn = run_on_tty(tmp_path, "sweep", "-v")
    assert rc == 0, drawn
    total = len(PLAN_PHASES) + len(WRITE_PHASES)
    assert f"sweep: [1/{total}] discover" in drawn and f"[{total}/{total}] activate" in drawn, drawn[-2000:]
    logs = drawn.count("INFO smagent")
    assert logs > 0
    # every log line starts at column 0: right after a newline or the line's erasing "\r"
    assert drawn.count("\rINFO smagent") + drawn.count("\nINFO smagent") == logs, drawn[:3000]
    assert "SMPsINFO" not in drawn.replace(" ", "")


def test_plan_and_verify_show_progress_on_a_terminal_only(tmp_path, cli):
    desired = tmp_path / "d.yaml"
    desired.write_text("routing: minhop\n")
    rc, drawn = run_on_tty(tmp_path, "plan", str(desired))
    assert rc == 0 and f"plan: [1/{len(PLAN_PHASES)}] discover" in drawn, drawn[-2000:]
    rc, drawn = run_on_tty(tmp_path, "verify")
    assert "verify: reading the fabric" in drawn and " SMPs" in drawn, drawn[-2000:]
    r = cli("plan", desired)  # not a terminal: no control characters
    assert r.exit_code == 0 and "\r" not in r.stderr


def test_every_phase_a_sweep_reports_is_in_the_known_steps():
    seen: list[str] = []
    with smagent.connect("sim") as s:
        s.sweep(progress=seen.append)
    steps = PLAN_PHASES + WRITE_PHASES
    assert set(seen) <= set(steps) and [p for p in steps if p in seen] == seen, seen


class _Stats:
    sent = 0


class _Transport:
    stats = _Stats()
    on_send = None


def test_line_text(capsys):
    t = _Transport()
    line = ProgressLine(t, "sweep", ("discover", "route"))
    t.stats.sent = 1234
    line("route")
    assert line.text() == "sweep: [2/2] route 1,234 SMPs"
    line("repair_2: route")
    assert line.text() == "sweep: [2/2] repair_2: route 1,234 SMPs"
    line("something else")
    assert line.text() == "sweep: something else 1,234 SMPs"
    line.finish()
    assert t.on_send is None and ProgressLine.active is None
    assert capsys.readouterr().err.endswith("\r")
