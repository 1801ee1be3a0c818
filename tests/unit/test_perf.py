"""The pure parts of port counters: PortCountersExtended's layout and the PerfSet that
clears counters (mad.perfmgt), the counter table, thresholds (smagent.perf), the
Prometheus text (smagent.perf.metrics), and the commands' refusals
before any MAD. What needs port agents runs on ibsim in tests/live/test_perf_live.py."""
from __future__ import annotations

import re

import pytest

from mad import gmp, perfmgt
from mad.header import MadHeader, Method
from smagent.perf import metrics
from smagent import perf
from smagent.errors import BadInput


def test_port_counters_extended_layout():
    v = perfmgt.PortCountersExtended(port_select=3, counter_select=0xFF, port_xmit_data=0x0102030405060708,
                                     port_multicast_rcv_pkts=(1 << 64) - 1)
    raw = v.encode()
    assert len(raw) == 184  # with IBA 1.3's 64-bit error counters (tests/unit/test_perf_extended.py)
    assert raw[1] == 3 and raw[2:4] == b"\x00\xff" and raw[4:8] == bytes(4)  # CounterSelect2, 32 bits
    assert raw[8:16] == bytes.fromhex("0102030405060708")  # PortXmitData, the first 64-bit counter
    assert raw[64:72] == b"\xff" * 8  # PortMulticastRcvPkts, the eighth
    assert perfmgt.PortCountersExtended.decode(raw) == v


def test_get_and_clear_mads():
    get = perfmgt.port_counters_extended_get(2, tid=9)
    h = MadHeader.decode(get)
    assert (h.mgmt_class, h.method, h.attribute_id) == (0x04, Method.GET, 0x001D) and get[65] == 2
    assert gmp.describe(get) == "PerfGet(PortCountersExtended, modifier 0x0)"
    clr = perfmgt.port_counters_clear(perfmgt.ALL_PORTS, tid=10)
    h = MadHeader.decode(clr)
    assert (h.method, h.attribute_id) == (Method.SET, 0x0012)
    pc = perfmgt.PortCounters.decode(gmp.data_of(clr))
    # every counter selected, every value written zero
    assert (pc.port_select, pc.counter_select, pc.counter_select2) == (0xFF, 0xFFFF, 0xFF)
    assert pc.symbol_error_counter == pc.port_xmit_data == 0
    ext = perfmgt.PortCountersExtended.decode(gmp.data_of(perfmgt.port_counters_clear(1, tid=11, extended=True)))
    assert (ext.port_select, ext.counter_select) == (1, 0x00FF)


def test_capability_bits():
    assert perfmgt.has_extended(0x1300) and perfmgt.has_extended(0x0400) and not perfmgt.has_extended(0x1100)
    assert 0x1300 & perfmgt.PerfCap.ALL_PORT_SELECT and not 0x1200 & perfmgt.PerfCap.ALL_PORT_SELECT


def test_counter_table_covers_every_port_counters_field_once():
    fields = {c.field for c in perf.COUNTERS}
    assert len(fields) == len(perf.COUNTERS)
    assert {c.field for c in perf.COUNTERS if c.source != "extended"} <= set(perfmgt.PortCounters.LAYOUT.names)
    ext = {c.field for c in perf.COUNTERS if c.source != "basic"}
    assert ext == {n for n in perfmgt.PortCountersExtended.LAYOUT.names if n.startswith("port_")} - {
        "port_select", *perfmgt.EXTENDED_ERRORS}
    names = [c.metric for c in perf.COUNTERS]
    assert len(set(names)) == len(names) and all(re.fullmatch(r"smagent_port_[a-z0-9_]+_total", n) for n in names)
    assert perf.DEFAULT_THRESHOLDS["SymbolErrorCounter"] == 10 and perf.DEFAULT_THRESHOLDS["VL15Dropped"] == 100


def test_iba_names_are_perfquerys():
    names = perf.iba_names(perfmgt.PortCounters(symbol_error_counter=4))
    assert list(names)[:3] == ["PortSelect", "CounterSelect", "SymbolErrorCounter"]
    assert names["SymbolErrorCounter"] == 4 and "QP1Dropped" in names and "VL15Dropped" in names
    assert "reserved" not in names
    ext = perf.iba_names(perfmgt.PortCountersExtended())
    assert "PortUnicastXmitPkts" in ext and "PortMulticastRcvPkts" in ext and "Reserved2" not in ext


def test_thresholds_parse_and_exceed():
    t = perf.parse_thresholds(["symbolerrorcounter=3", "PortXmitDiscards=0x10"])
    assert t["SymbolErrorCounter"] == 3 and t["PortXmitDiscards"] == 16 and t["LinkDownedCounter"] == 10
    pc = perfmgt.PortCounters(symbol_error_counter=3, port_xmit_discards=17, link_downed_counter=11)
    assert perf.exceeded(pc, t) == {"PortXmitDiscards": 17, "LinkDownedCounter": 11}  # over, not at
    for bad in ("Nope=1", "SymbolErrorCounter", "SymbolErrorCounter=x", "SymbolErrorCounter=-1"):
        with pytest.raises(BadInput, match="--threshold"):
            perf.parse_thresholds([bad])


def _reading(**kw) -> perf.PortReading:
    return perf.PortReading(0x200000, kw.pop("node", "Switch1"), 1, 1, perfmgt.PortCounters(**kw), "4xSDR",
                            0x100000, 'Hca "1"\\x', 1)


def test_prometheus_text(tmp_path):
    h = perf.Health([_reading(symbol_error_counter=50, port_xmit_data=10)], dict(perf.DEFAULT_THRESHOLDS))
    h.readings[0].exceeded = {"SymbolErrorCounter": 50}
    text = metrics.prometheus_text(h)
    assert "# TYPE smagent_port_symbol_errors_total counter" in text
    line = next(x for x in text.splitlines() if x.startswith("smagent_port_symbol_errors_total{"))
    assert line.endswith(" 50") and 'node_guid="0x0000000000200000"' in line and 'port="1"' in line
    assert 'remote_node="Hca \\"1\\"\\\\x"' in line  # quotes and backslashes escaped
    assert "smagent_port_transmit_data_bytes_total{" in text and " 40\n" in text  # 10 words = 40 bytes
    assert "smagent_health_ports_erring 1" in text
    assert "unicast" not in text  # PortCountersExtended not read: its counters are absent, not zero
    h.readings[0].extended = perfmgt.PortCountersExtended(port_xmit_data=1 << 40, port_unicast_xmit_pkts=6)
    text = metrics.prometheus_text(h)
    assert f" {4 << 40}\n" in text and " 40\n" not in text  # the 64-bit counter preferred
    assert re.search(r"^smagent_port_unicast_transmit_packets_total\{.*\} 6$", text, re.M)


def test_commands_refuse_before_any_mad(cli, tmp_path):
    r = cli("counters", "1")  # the in-process simulator has no PerfMgt agents
    assert r.exit_code == 2 and "--transport umad" in r.output
    r = cli("health", "--threshold", "Bogus=1")
    assert r.exit_code == 2 and "SymbolErrorCounter" in r.output
    r = cli("health", "--prometheus", str(tmp_path / "no" / "such" / "dir" / "x.prom"))
    assert r.exit_code == 2


def test_daemon_metrics_text_and_listen_addresses():
    from smagent.sm.metrics_server import parse_listen
    status = {"state": "MASTER", "uptime_s": 3.5, "sweeps": 2, "counters": {"traps": 4, "repairs": 1},
              "transport": {"sent": 100, "retries": 3, "timeouts": 1}, "perfmgr": None}
    text = metrics.daemon_text(status, "x_total 1\n")
    assert 'smagent_sm_state{state="MASTER"} 1' in text and 'smagent_sm_state{state="STANDBY"} 0' in text
    for line in ("smagent_sweeps_total 2", "smagent_traps_total 4", "smagent_smps_sent_total 100",
                 "smagent_smps_retried_total 3", "smagent_smps_lost_total 1", "smagent_uptime_seconds 3.5"):
        assert line in text.splitlines()
    assert "perfmgr" not in text and text.endswith("x_total 1\n")  # families without a value are left out
    assert parse_listen("127.0.0.1:9683") == ("127.0.0.1", 9683)
    assert parse_listen("[::1]:80") == ("::1", 80) and parse_listen(":9100") == ("0.0.0.0", 9100)
    for bad in ("9683", "host:", "host:0", "host:70000", "host:x"):
        with pytest.raises(BadInput, match="--metrics"):
            parse_listen(bad)


def test_metrics_server_refuses_a_port_in_use_before_anything_else(cli, tmp_path):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = cli("run", "--metrics", f"127.0.0.1:{port}", "--state-dir", str(tmp_path / "st"))
    assert r.exit_code == 2 and "cannot listen" in r.output
