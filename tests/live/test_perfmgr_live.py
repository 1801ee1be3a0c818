"""`smagent run --perfmgr-interval S --metrics ADDR:PORT` on ibsim: the counter sweeps of
the running SM, read through its Prometheus endpoint with an HTTP client (urllib): the
SM's own series, a counter ibsim's console sets (`PerformanceSet`) on that port's series
with one log line naming the port and its link, and a counter near saturation cleared on
the switch (perfquery shows it) while its total carries on in the metrics."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ibsim_harness import IbSim, ibsim_available, skip_reason
from prom import guids, port_value, value

pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]

NETFILE = Path(__file__).resolve().parents[1] / "vectors" / "ibsim-2sw4hca.net"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _series(text: str, metric: str, node: str, port: int) -> int | None:
    v = port_value(text, metric, node, port)
    return None if v is None else int(v)


@pytest.fixture
def daemon(tmp_path):
    if not ibsim_available():
        pytest.skip(skip_reason())
    with IbSim(NETFILE, tmp_path, console=True) as sim:
        port = _free_port()
        log = tmp_path / "run.log"
        proc = subprocess.Popen(
            [sys.executable, "-m", "smagent.cli", "--transport", "umad", "run", "--state-dir", str(tmp_path / "st"),
             "--log-file", str(log), "--perfmgr-interval", "0.5", "--metrics", f"127.0.0.1:{port}"],
            env=sim.env, cwd=sim.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(tmp_path / "run.stderr", "wb"), start_new_session=True)
        try:
            yield sim, f"http://127.0.0.1:{port}/metrics", log, proc
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)


def _wait(proc, url: str, pred, what: str, timeout: float = 30.0) -> str:
    deadline, text = time.monotonic() + timeout, ""
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"smagent run exited {proc.returncode}"
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
                text = r.read().decode()
        except OSError:
            text = ""
        if text and pred(text):
            return text
        time.sleep(0.2)
    raise AssertionError(f"{what} not seen in {timeout} s:\n{text[-3000:]}")


def _perfquery(sim: IbSim, node: str, port: int) -> dict[str, int]:
    lid = int(re.search(rf'"{node}".*\blid (\d+)', sim.run(["ibswitches"], check=True).stdout).group(1))
    out = sim.run(["perfquery", str(lid), str(port)], check=True).stdout
    return {k: int(v, 0) for k, v in re.findall(r"^(\w+):\.+(\S+)$", out, re.M)}


def test_metrics_endpoint_shows_the_sm_and_a_port_counter_set_on_ibsim(daemon):
    sim, url, log, proc = daemon
    text = _wait(proc, url, lambda t: re.search(r"^smagent_perfmgr_sweeps_total [1-9]", t, re.M)
                 and 'smagent_sm_state{state="MASTER"} 1' in t, "MASTER and a counter sweep")
    assert int(re.search(r"^smagent_smps_sent_total (\d+)", text, re.M).group(1)) > 0
    assert _series(text, "smagent_port_errors_total", "Switch1", 1) == 0  # the error sum, always there
    assert _series(text, "smagent_port_symbol_errors_total", "Switch1", 1) is None  # an error counter once it counts
    assert value(text, "smagent_link_info", guid=guids(text)["Switch1"], port="1", state="active") == 1
    assert value(text, "smagent_perfmgr_last_sweep_timestamp_seconds") > time.time() - 60
    assert "_per_second" not in text  # rates are PromQL's rate()
    assert _series(text, "smagent_port_transmit_data_bytes_total", "Switch1", 1) > 0
    sim.command('PerformanceSet "Switch1"[1] PortCounters.SymbolErrorCounter=50')
    text = _wait(proc, url, lambda t: _series(t, "smagent_port_symbol_errors_total", "Switch1", 1) == 50,
                 "SymbolErrorCounter 50 on Switch1 port 1")
    assert _series(text, "smagent_port_errors_total", "Switch1", 1) == 50
    assert _series(text, "smagent_port_erring", "Switch1", 1) == 1
    assert _series(text, "smagent_port_erring", "Switch1", 2) == 0
    lines = [x for x in log.read_text().splitlines() if "starts erring" in x]
    assert len(lines) == 1 and '"Switch1"' in lines[0] and "port 1" in lines[0] and '"Hca1" port 1' in lines[0]
    assert "SymbolErrorCounter 50 > 10" in lines[0]


def test_a_counter_near_saturation_is_cleared_and_its_total_kept(daemon):
    sim, url, log, proc = daemon
    _wait(proc, url, lambda t: re.search(r"^smagent_perfmgr_sweeps_total [1-9]", t, re.M), "a counter sweep")
    # SymbolErrorCounter is 16 bits: 60000 is past 3/4 of its range
    sim.command('PerformanceSet "Switch2"[3] PortCounters.SymbolErrorCounter=60000')
    _wait(proc, url, lambda t: re.search(r"^smagent_perfmgr_clears_total [1-9]", t, re.M)
          and _series(t, "smagent_port_symbol_errors_total", "Switch2", 3) == 60000, "a clear, the total kept")
    assert _perfquery(sim, "Switch2", 3)["SymbolErrorCounter"] == 0  # cleared on the switch
    sim.command('PerformanceSet "Switch2"[3] PortCounters.SymbolErrorCounter=5')
    text = _wait(proc, url, lambda t: _series(t, "smagent_port_symbol_errors_total", "Switch2", 3) == 60005,
                 "the total counting on after the clear")
    assert "near saturation cleared" in log.read_text()
    # cleared by someone else (perfquery -R): what the port had counted is kept, the total never goes back
    lid = int(re.search(r'"Switch2".*\blid (\d+)', sim.run(["ibswitches"], check=True).stdout).group(1))
    sim.run(["perfquery", "-R", str(lid), "3"], check=True)
    sim.command('PerformanceSet "Switch2"[3] PortCounters.SymbolErrorCounter=2')
    _wait(proc, url, lambda t: _series(t, "smagent_port_symbol_errors_total", "Switch2", 3) == 60007,
          "the total after an outside clear")
    assert sum("starts erring" in x for x in log.read_text().splitlines()) == 1  # once per port
