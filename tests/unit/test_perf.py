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
import prom


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
    return perf.PortReading(0x200000, kw.pop("node", "Switch1"), kw.pop("port", 1), 1, perfmgt.PortCounters(**kw),
                            "4xSDR", 0x100000, 'Hca "1"\\x', 1, switch=True, width="4x", speed="SDR", rate_gbps=10.0,
                            state=4)


def test_health_json_names_both_ends_alike():
    j = _reading().to_json()
    # node/node_guid here, remote_node/remote_guid there: one spelling for the two ends (issue 39 item 9)
    assert (j["node"], j["node_guid"], j["port"]) == ("Switch1", "0x0000000000200000", 1)
    assert (j["remote_node"], j["remote_guid"], j["remote_port"]) == ('Hca "1"\\x', "0x0000000000100000", 1)
    assert "remote" not in j


def test_prometheus_text(tmp_path):
    h = perf.Health([_reading(symbol_error_counter=50, port_xmit_data=10)], dict(perf.DEFAULT_THRESHOLDS))
    h.readings[0].exceeded = {"SymbolErrorCounter": 50}
    text = metrics.prometheus_text(h)
    assert "# TYPE smagent_port_symbol_errors_total counter" in text
    key = {"guid": "0x0000000000200000", "node_type": "switch", "port": "1"}
    assert prom.value(text, "smagent_port_symbol_errors_total", **key) == 50
    assert prom.value(text, "smagent_port_errors_total", **key) == 50
    assert prom.value(text, "smagent_port_link_downed_total", **key) == 0  # health: every counter, zero or not
    assert prom.value(text, "smagent_port_transmit_data_bytes_total", **key) == 40  # 10 words = 40 bytes
    assert prom.value(text, "smagent_node_info", guid=key["guid"], name="Switch1", lid="1") == 1
    assert prom.value(text, "smagent_link_info", **key, remote_guid="0x0000000000100000", remote_port="1",
                      width="4x", speed="SDR", rate="10", state="active") == 1
    assert prom.value(text, "smagent_port_state", **key) == 4
    assert prom.value(text, "smagent_health_ports_erring") == 1
    assert prom.value(text, "smagent_health_last_sweep_timestamp_seconds") > 1.7e9
    assert "unicast" not in text  # PortCountersExtended not read: its counters are absent, not zero
    h.readings[0].extended = perfmgt.PortCountersExtended(port_xmit_data=1 << 40, port_unicast_xmit_pkts=6)
    text = metrics.prometheus_text(h)
    assert prom.value(text, "smagent_port_transmit_data_bytes_total", **key) == 4 << 40  # the 64-bit one preferred
    assert prom.value(text, "smagent_port_unicast_transmit_packets_total", **key) == 6


def test_a_node_name_with_quotes_is_escaped():
    h = perf.Health([_reading(node='Sw "A"\\b\nc')], dict(perf.DEFAULT_THRESHOLDS))
    assert prom.guids(metrics.prometheus_text(h)) == {'Sw "A"\\b\nc': "0x0000000000200000"}


def _rows(n_ports: int, errors_every: int = 0) -> list:
    rows = []
    for i in range(n_ports):
        r = _reading(port=i % 36 + 1, port_xmit_data=10 ** 9 + i, port_rcv_data=10 ** 9, port_xmit_pkts=10 ** 7,
                     port_rcv_pkts=10 ** 7, symbol_error_counter=3 if errors_every and i % errors_every == 0 else 0)
        r.node_guid = 0x0002C90300000000 + i // 36
        r.switch = i % 2 == 0
        tot = {c.field: v for c in perf.COUNTERS if (v := r.value(c)) is not None}
        rows.append(metrics.PortRow(r, tot, False))
    return rows


def _scrape(rows, scope) -> str:
    sweep = metrics.Sweep(tuple(rows), 0, 1.7e9, 1.0, 0)
    from smagent.sm.metrics_server import DaemonCollector
    return metrics.text(DaemonCollector(lambda: {"state": "MASTER"}, lambda: sweep, scope))


def test_scope_picks_ports_and_counters():
    rows = _rows(72, errors_every=10)
    default = prom.samples(_scrape(rows, metrics.Scope()))
    names = {n for n, _l, _v in default}
    assert "smagent_port_errors_total" in names and "smagent_port_transmit_data_bytes_total" in names
    assert not any(n.endswith("_per_second") for n in names)  # rate() does that
    symbol = [lab for n, lab, _v in default if n == "smagent_port_symbol_errors_total"]
    assert len(symbol) == 8  # ports 0, 10, ..., 70: the ones whose counter counted
    assert not [n for n, _l, _v in default if n == "smagent_port_link_downed_total"]  # zero everywhere
    sw = prom.samples(_scrape(rows, metrics.Scope(ports="switch")))
    assert {lab["node_type"] for _n, lab, _v in sw if "node_type" in lab} == {"switch"}
    assert len([1 for n, _l, _v in sw if n == "smagent_port_errors_total"]) == 36
    errors = {n for n, _l, _v in prom.samples(_scrape(rows, metrics.Scope(counters="errors")))}
    assert "smagent_port_transmit_data_bytes_total" not in errors and "smagent_port_errors_total" in errors
    every = prom.samples(_scrape(rows, metrics.Scope(counters="all")))
    assert len([1 for n, _l, _v in every if n == "smagent_port_link_downed_total"]) == 72
    with pytest.raises(BadInput, match="metrics ports"):
        metrics.Scope(ports="hosts")


def test_a_scrape_stays_under_a_kilobyte_a_port():
    """The issue's budget (1 KB a port by default) on 3,600 ports: what a port adds, its
    counters and its info series together."""
    small, large = (len(_scrape(_rows(n, errors_every=50), metrics.Scope()).encode()) for n in (360, 3600))
    per_port = (large - small) / 3240
    assert per_port <= 1024, per_port


def test_commands_refuse_before_any_mad(cli, tmp_path):
    r = cli("counters", "1")  # the in-process simulator has no PerfMgt agents
    assert r.exit_code == 2 and "--transport umad" in r.output
    r = cli("health", "--threshold", "Bogus=1")
    assert r.exit_code == 2 and "SymbolErrorCounter" in r.output
    r = cli("health", "--prometheus", str(tmp_path / "no" / "such" / "dir" / "x.prom"))
    assert r.exit_code == 2


def test_daemon_status_metrics_and_listen_addresses():
    from smagent.sm.metrics_server import DEFAULT_PORT, DaemonCollector, parse_listen
    status = {"state": "MASTER", "uptime_s": 3.5, "sweeps": 2, "counters": {"traps": 4, "repairs": 1},
              "transport": {"sent": 100, "retries": 3, "timeouts": 1}, "perfmgr": None}
    text = metrics.text(DaemonCollector(lambda: status, lambda: None))
    assert prom.value(text, "smagent_sm_state", state="MASTER") == 1
    assert prom.value(text, "smagent_sm_state", state="STANDBY") == 0
    for name, v in (("smagent_sweeps_total", 2), ("smagent_traps_total", 4), ("smagent_smps_sent_total", 100),
                    ("smagent_smps_retried_total", 3), ("smagent_smps_lost_total", 1), ("smagent_uptime_seconds", 3.5)):
        assert prom.value(text, name) == v, name
    assert "perfmgr" not in text  # families without a value are left out
    assert parse_listen(f"127.0.0.1:{DEFAULT_PORT}") == ("127.0.0.1", DEFAULT_PORT) and DEFAULT_PORT != 9683
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
