"""Shared fixtures. The ones for running smagent and ibsim:

* ``cli(*args, input=None, catch_exceptions=False, command=None, **invoke_kw)`` runs the
  click app in-process (click.testing.CliRunner) with ``SMAGENT_STATE_DIR`` under the
  test's tmp_path (nothing touches $HOME) and no inherited ``SMAGENT_TRANSPORT``.
  Returns a `CliResult`: click's Result (``exit_code``, ``stdout``, ``stderr``,
  ``output``, ``exception``) plus ``json()``, the one JSON document on stdout.
  ``command`` invokes another click command than ``smagent.cli.main``.
* ``replay(fixture, *args, record=None, **cli_kw)``: ``cli`` with ``--transport replay
  --fixture FIXTURE [--record RECORD]``.
* ``live_cli(*args, sim=None, check=False, timeout=600, **run_kw)`` runs
  ``python -m smagent.cli`` as a subprocess. With ``sim`` (an ibsim from the ``ibsim``
  fixture) it is ``--transport umad ARGS`` with ibsim's env, cwd = its scratch dir and
  its state dir, i.e. ``sim.smagent(...)``; without, ARGS in a scratch dir of the test
  with its own state dir. Returns a CompletedProcess (``returncode``, ``stdout``,
  ``stderr``) plus ``json()``; with ``check`` a non-zero exit fails the test.
* ``ibsim(netfile, extra_args=(), console=False, tmpdir=None)`` starts one ibsim
  (tests/ibsim_harness.IbSim: unique IBSIM_SOCKNAME, scratch dir, ``-n`` unless
  ``console``) and stops it at teardown, killing only its own process group. Skips
  the test when ibsim is not installed.
"""
import json
import os
import pathlib

import pytest
from click.testing import CliRunner

from ibsim_harness import IbSim, client_env, ibsim_available, run_smagent, skip_reason

VECTORS = pathlib.Path(__file__).parent / "vectors"


@pytest.fixture(scope="session")
def vectors():
    """Every golden vector, by name."""
    out = {}
    for f in sorted(VECTORS.glob("*.jsonl")):
        for line in f.read_text().splitlines():
            v = json.loads(line)
            out[v["name"]] = v
    return out


class CliResult:
    """click's Result of one in-process invocation, plus `json()`."""

    def __init__(self, result):
        self.result = result

    def __getattr__(self, name):
        return getattr(self.result, name)

    def __repr__(self):
        return f"<CliResult exit_code={self.result.exit_code}>"

    def json(self):
        return json.loads(self.result.stdout)


@pytest.fixture
def cli(tmp_path, monkeypatch):
    """Run `smagent ARGS` in-process; see the module docstring."""
    monkeypatch.setenv("SMAGENT_STATE_DIR", str(tmp_path / "smagent-state"))
    monkeypatch.delenv("SMAGENT_TRANSPORT", raising=False)

    def invoke(*args, input=None, catch_exceptions=False, command=None, **kw) -> CliResult:
        if command is None:
            from smagent.cli import main as command
        # catch_exceptions=False: an unexpected exception fails the test with its
        # traceback instead of passing as exit code 1
        res = CliRunner().invoke(command, [str(a) for a in args], input=input,
                                 catch_exceptions=catch_exceptions, **kw)
        return CliResult(res)

    return invoke


@pytest.fixture
def replay(cli):
    """Run `smagent ARGS` in-process on a recorded session; see the module docstring."""
    def invoke(fixture, *args, record=None, **kw) -> CliResult:
        rec = ["--record", record] if record is not None else []
        return cli("--transport", "replay", "--fixture", fixture, *rec, *args, **kw)

    return invoke


@pytest.fixture
def live_cli(tmp_path):
    """Run `python -m smagent.cli ARGS` as a subprocess; see the module docstring."""
    scratch = tmp_path / "cli-run"

    def run(*args, sim=None, check=False, timeout=600, **kw):
        if sim is not None:
            return sim.smagent(*args, check=check, timeout=timeout, **kw)
        scratch.mkdir(exist_ok=True)
        kw.setdefault("cwd", scratch)
        return run_smagent(args, env=client_env(os.environ, scratch / "smagent-state"), check=check,
                           timeout=timeout, **kw)

    return run


@pytest.fixture
def ibsim(tmp_path):
    """Start ibsim on a net file: ``sim = ibsim(path, extra_args=(), console=False)``;
    see the module docstring."""
    if not ibsim_available():
        pytest.skip(skip_reason())
    started: list[IbSim] = []

    def start(netfile, extra_args=(), console=False, tmpdir=None) -> IbSim:
        sim = IbSim(netfile, tmpdir or tmp_path / f"sim{len(started)}", extra_args, console=console)
        started.append(sim)
        sim.start()
        return sim

    yield start
    for sim in started:
        sim.stop()
