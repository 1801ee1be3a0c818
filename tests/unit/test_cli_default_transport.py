"""No --transport (issue 36 item 2): the first CA libibumad lists, as OpenSM and
infiniband-diags take it; the simulator, with a note, only where there is none; `run`
never on the simulator unasked; the start line names the fabric."""
from __future__ import annotations

import logging

import pytest

from smagent.commands.common import Context
from smagent.transport import SIM_DEFAULT_NOTE, default_kind, umad_lib


@pytest.fixture
def no_env(monkeypatch):
    monkeypatch.delenv("SMAGENT_TRANSPORT", raising=False)


def test_a_listed_ca_makes_umad_the_default(mocker, no_env):
    mocker.patch.object(umad_lib, "list_ports", return_value={"mlx5_0": [1]})
    ctx = Context(transport=None)
    assert ctx.opts["transport"] == "umad" and ctx.defaulted
    assert Context(transport="sim").opts["transport"] == "sim"  # asked: kept


@pytest.mark.parametrize("raised", [None, umad_lib.LibraryMissing("no lib"), umad_lib.NoDevice("no ib_umad")])
def test_no_ca_no_library_or_no_module_means_the_simulator(mocker, raised):
    mocker.patch.object(umad_lib, "list_ports", return_value={}, side_effect=raised)
    assert default_kind() == "sim"


def test_the_simulator_by_default_says_so(cli, mocker, monkeypatch):
    monkeypatch.delenv("SMAGENT_TRANSPORT")
    mocker.patch.object(umad_lib, "list_ports", return_value={})
    r = cli("query", "nodedesc", "0")
    assert r.exit_code == 0 and SIM_DEFAULT_NOTE in r.stderr
    r = cli("--transport", "sim", "query", "nodedesc", "0")  # asked for: no note
    assert r.exit_code == 0 and SIM_DEFAULT_NOTE not in r.stderr


def test_run_takes_the_simulator_only_when_asked(cli, mocker, monkeypatch, tmp_path):
    monkeypatch.delenv("SMAGENT_TRANSPORT")
    mocker.patch.object(umad_lib, "list_ports", return_value={})
    r = cli("run", "--state-dir", tmp_path / "state")
    assert r.exit_code == 2 and "--transport sim" in r.stderr and "no InfiniBand CA" in r.stderr


def test_help_names_the_environment_variable(cli):
    r = cli("--help")
    assert "SMAGENT_TRANSPORT" in r.stdout and "where libibumad lists a CA" in " ".join(r.stdout.split())


def test_the_start_line_names_the_fabric(caplog):
    from smagent.sm.daemon import Daemon, DaemonOptions
    from smagent.transport.sim import SimTransport
    t = SimTransport()
    t.serve()
    now = [1000.0]
    with caplog.at_level(logging.INFO, logger="smagent.sm"):
        Daemon(t, DaemonOptions(sweep_interval=0), clock=lambda: now[0]).start()
    assert any("start: on sim: the built-in simulator's fabric (14 nodes), from H1 port 1" in m
               for m in caplog.messages)
