"""`smagent run` and `smagent status` as commands (on the in-process simulator): bad input
refused with exit 2 before anything starts, status with no daemon exit 3, SIGHUP re-reads
the desired state, SIGTERM exits 0, and a second daemon on the same state dir is refused."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from smagent.cli import main

REPO = str(Path(__file__).resolve().parents[2])


def test_bad_priority_and_key_are_refused():
    r = CliRunner().invoke(main, ["run", "--priority", "16"])
    assert r.exit_code == 2 and "--priority" in r.output
    r = CliRunner().invoke(main, ["run", "--sm-key", "s3cr3t-value"])
    assert r.exit_code == 2 and "--sm-key" in r.output and "s3cr3t-value" not in r.output


def test_a_mistyped_sm_key_is_not_echoed():
    r = CliRunner().invoke(main, ["run", "--sm-key", "0xZZ99887766"])
    assert r.exit_code == 2 and "--sm-key" in r.output and "not a number" in r.output
    assert "99887766" not in r.output


def test_sm_key_file(tmp_path, monkeypatch):
    """--sm-key-file: read whole, the key reaches the daemon, never shown; exclusive with --sm-key."""
    from smagent.errors import BadInput
    from smagent.sm import daemon
    seen = {}

    def fake(transport, opts):  # the daemon is built: record its key, and end the command
        seen["key"] = opts.sm_key
        raise BadInput("stopped by the test")

    monkeypatch.setattr(daemon, "Daemon", fake)
    key = tmp_path / "sm.key"
    key.write_text("0x1122334455667788\n")
    args = ["--transport", "sim", "run", "--state-dir", str(tmp_path / "s"), "--log-file", str(tmp_path / "log")]
    import logging
    r = CliRunner().invoke(main, [*args, "--sm-key-file", str(key)])
    assert "stopped by the test" in r.output and seen["key"] == 0x1122334455667788
    # run inside a process leaves logging as it found it (a later command's -v depends on it)
    assert logging.getLogger("smagent").level == logging.getLogger("smagent.sm").level == logging.NOTSET
    assert "1122334455667788" not in r.output
    r = CliRunner().invoke(main, [*args, "--sm-key-file", str(key), "--sm-key", "5"])
    assert r.exit_code == 2 and "--sm-key and --sm-key-file exclude each other" in r.output
    key.write_text("0x1122334455667788\n0x8877665544332211\n")
    r = CliRunner().invoke(main, [*args, "--sm-key-file", str(key)])
    assert r.exit_code == 2 and "expected one key, found 2" in r.output
    assert "1122334455667788" not in r.output and "8877665544332211" not in r.output
    r = CliRunner().invoke(main, [*args, "--sm-key-file", str(tmp_path / "missing")])
    assert r.exit_code == 2 and "--sm-key-file" in r.output and "missing" in r.output


def test_bad_desired_file_is_refused(tmp_path):
    bad = tmp_path / "d.yaml"
    bad.write_text("routing: nonsense-engine\nlmc: 9\n")
    r = CliRunner().invoke(main, ["run", "--desired", str(bad), "--state-dir", str(tmp_path / "s")])
    assert r.exit_code == 2, r.output


def test_status_without_a_daemon(tmp_path):
    r = CliRunner().invoke(main, ["status", "--state-dir", str(tmp_path)])
    assert r.exit_code == 3 and "no smagent daemon" in r.output


def _status(state, env):
    r = subprocess.run([sys.executable, "-m", "smagent.cli", "status", "--json", "--state-dir", str(state)],
                       env=env, capture_output=True, text=True, timeout=30)
    return json.loads(r.stdout) if r.returncode == 0 else None


def test_run_status_sighup_sigterm(tmp_path):
    state, log = tmp_path / "state", tmp_path / "run.log"
    desired = tmp_path / "desired.yaml"
    desired.write_text("routing: minhop\n")
    env = dict(os.environ, PYTHONPATH=REPO, SMAGENT_TRANSPORT="sim")  # `run` takes the simulator when asked
    p = subprocess.Popen([sys.executable, "-m", "smagent.cli", "run", "--state-dir", str(state), "--log-file",
                          str(log), "--desired", str(desired), "--sweep-interval", "0.5", "--json"], env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        # MASTER and its first sweep done: the status is published at the transition, before that sweep
        while (s := _status(state, env)) is None or s["state"] != "MASTER" or s["sweeps"] < 1:
            assert p.poll() is None and time.monotonic() < deadline, p.stderr.read().decode()[-2000:]
            time.sleep(0.2)
        text = subprocess.run([sys.executable, "-m", "smagent.cli", "status", "--state-dir", str(state)], env=env,
                              capture_output=True, text=True, timeout=30).stdout
        assert text.startswith("state: MASTER  priority: 0") and "last change: became MASTER" in text
        second = subprocess.run([sys.executable, "-m", "smagent.cli", "run", "--state-dir", str(state)], env=env,
                                capture_output=True, text=True, timeout=30)
        assert second.returncode == 3 and "another smagent daemon is running" in second.stderr
        desired.write_text("routing: updn\n")
        p.send_signal(signal.SIGHUP)
        while (s := _status(state, env))["sweeps"] < 2:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert s["last_sweep"]["why"] == "SIGHUP"
        p.send_signal(signal.SIGTERM)
        assert p.wait(15) == 0
        final = json.loads(p.stdout.read())  # --json: one document, the final status
        assert final["state"] == "MASTER" and final["sweeps"] >= 2
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    out = log.read_text()
    assert "SIGHUP: desired state re-read" in out and "signal SIGTERM: stopping" in out
    assert not (state / "control.sock").exists() and (state / "guid2lid").exists()
