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


# -- which port: --port-guid, several CAs, RoCE (issue 43 item 5) ------------------------


def _two_cas(mocker):
    from fake_umad import FakeUmad
    lib = FakeUmad(mocker, cas={"mlx5_0": {1: 0x0002C90300A1B2C3}, "mlx5_1": {1: 0x0002C90300D4E5F6}})
    mocker.patch.object(umad_lib.ctypes, "CDLL", return_value=lib)
    mocker.patch.object(umad_lib.ctypes, "PyDLL", return_value=lib)
    return lib


def test_port_guid_names_the_ca_and_port(mocker):
    _two_cas(mocker)
    ctx = Context(transport="umad", ca=None, port=None, port_guid=0x0002C90300D4E5F6)
    assert (ctx.opts["ca"], ctx.opts["port"]) == ("mlx5_1", 1)
    with pytest.raises(umad_lib.UnknownPort, match="no local port has port GUID 0x0002c90300000001.*mlx5_1 port 1"):
        Context(transport="umad", ca=None, port=None, port_guid=0x0002C90300000001)
    from smagent.errors import BadInput
    with pytest.raises(BadInput, match="without --ca/--port"):
        Context(transport="umad", ca="mlx5_0", port=None, port_guid=0x0002C90300D4E5F6)


def test_port_guid_is_checked_as_a_guid(cli):
    r = cli("--port-guid", "0xZZ", "discover")
    assert r.exit_code == 2 and "is not a GUID" in r.stderr


def test_run_refuses_to_guess_between_cas(cli, mocker, tmp_path):
    _two_cas(mocker)
    r = cli("--transport", "umad", "run", "--state-dir", tmp_path / "state")
    assert r.exit_code == 2 and "several CAs" in r.stderr and "--port-guid" in r.stderr
    assert "mlx5_0 port 1" in r.stderr and "mlx5_1 port 1" in r.stderr


def test_a_roce_port_is_named_as_such(mocker):
    lib = _two_cas(mocker)
    lib.link_layers = {"mlx5_1": b"Ethernet"}
    with pytest.raises(umad_lib.UnknownPort, match="mlx5_1 port 1 has link layer Ethernet .RoCE."):
        umad_lib.UmadPort("mlx5_1", 1)
