"""A reader that leaves (`smagent discover | head`) ends the command as piped tools end:
exit 141 (128 + SIGPIPE), nothing on stderr; it was an "internal error" (exit 70)."""
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_closed_stdout_is_not_an_internal_error(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO), SMAGENT_STATE_DIR=str(tmp_path / "state"))
    env.pop("SMAGENT_TRANSPORT", None)
    p = subprocess.Popen([sys.executable, "-m", "smagent.cli", "discover"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    p.stdout.close()  # the reader is gone before the first write: that write fails with EPIPE
    err = p.stderr.read().decode()
    assert p.wait(60) == 141
    assert "Error" not in err and "Traceback" not in err, err
