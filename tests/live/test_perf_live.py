"""`smagent counters` and `smagent health` on ibsim, against perfquery and the counters
ibsim's console sets (`PerformanceSet`): PerfMgt GMPs LID-routed to QP1, ClassPortInfo's
CapabilityMask deciding extended reads and AllPortSelect sums, a reset as perfquery -r,
the health report's erring port with its link and remote end, its exit codes, and the
Prometheus textfile. OpenSM (`opensm -o`) assigns the LIDs first."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from prom import guids, samples as prom_samples, value
from ibsim_harness import IbSim, ibsim_available, skip_reason

OPENSM = shutil.which("opensm", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))
pytestmark = [pytest.mark.ibsim,
              pytest.mark.skipif(OPENSM is None, reason="opensm is not installed (Debian package opensm)")]

NETFILE = Path(__file__).resolve().parents[1] / "vectors" / "ibsim-2sw4hca.net"
# counters that only the console moves (traffic counters move with every MAD, ours too)
STILL = ("PortSelect", "CounterSelect", "SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter",
         "PortRcvErrors", "PortRcvRemotePhysicalErrors", "PortRcvSwitchRelayErrors", "PortXmitDiscards",
         "PortXmitConstraintErrors", "PortRcvConstraintErrors", "CounterSelect2", "LocalLinkIntegrityErrors",
         "ExcessiveBufferOverrunErrors", "QP1Dropped", "VL15Dropped", "PortXmitWait")
MOVING = ("PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts")
EXT_STILL = ("PortSelect", "CounterSelect", "PortUnicastXmitPkts", "PortUnicastRcvPkts", "PortMulticastXmitPkts",
             "PortMulticastRcvPkts")


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    if not ibsim_available():
        pytest.skip(skip_reason())
    tmp = tmp_path_factory.mktemp("ibsim-perf")
    with IbSim(NETFILE, tmp, console=True) as sim:
        r = subprocess.run([OPENSM, "-o", "-f", str(tmp / "osm.log")], env=sim.opensm_env(tmp / "osm"),
                           cwd=sim.cwd, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        yield sim


def _lid(sim: IbSim, node: str) -> int:
    """The node's LID as the witnesses see it: ibswitches for a switch, ibstat on the CA."""
    if node.startswith("Switch"):
        out = sim.run(["ibswitches"], check=True).stdout
        return int(re.search(rf'"{node}".*\blid (\d+)', out).group(1))
    r = subprocess.run(["/usr/sbin/ibstat"], env=dict(sim.env, SIM_HOST=node), cwd=sim.cwd, capture_output=True,
                       text=True, timeout=30)
    return int(re.search(r"Base lid: (\d+)", r.stdout).group(1))


def _perfquery(sim: IbSim, *args) -> dict[str, int]:
    r = sim.run(["perfquery", *map(str, args)], check=True)
    return {k: int(v, 0) for k, v in re.findall(r"^(\w+):\.+(\S+)$", r.stdout, re.M)}


def _counters(sim: IbSim, *args) -> dict:
    r = sim.smagent("counters", *map(str, args), "--json", check=False)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("node,port", [("Switch1", 1), ("Switch1", 3), ("Switch2", 5), ("Hca3", 1)])
def test_counters_equal_perfquery(fabric, node, port):
    sim = fabric
    lid = _lid(sim, node)
    sim.command(f'PerformanceSet "{node}"[{port}] PortCounters.SymbolErrorCounter={port + 6}')
    sim.command(f'PerformanceSet "{node}"[{port}] PortCounters.PortXmitDiscards={port + 20}')
    before = _perfquery(sim, lid, port)
    mine = _counters(sim, lid, "--port", port)
    after = _perfquery(sim, lid, port)
    assert mine["lid"] == lid and mine["port"] == port
    c = mine["counters"]
    assert c["SymbolErrorCounter"] == port + 6 and c["PortXmitDiscards"] == port + 20
    for k in STILL:
        assert c[k] == before[k] == after[k], k
    for k in MOVING:  # ours was read between perfquery's two reads
        assert before[k] <= c[k] <= after[k], k
    assert set(c) == set(before)  # every field perfquery prints, by the same names
    # the text form is perfquery's, line for line on the still counters
    text = sim.smagent("counters", lid, "--port", port).stdout
    assert text.splitlines()[0] == sim.run(["perfquery", str(lid), str(port)]).stdout.splitlines()[0]
    for k in STILL:
        assert f"{k}:".ljust(33, ".") + (f"{c[k]:#06x}" if k == "CounterSelect" else f"{c[k]:#04x}"
                                          if k == "CounterSelect2" else str(c[k])) in text.splitlines()


def test_extended_counters_equal_perfquery_x(fabric):
    sim = fabric
    for node, port in (("Switch2", 3), ("Hca1", 1)):
        lid = _lid(sim, node)
        before = _perfquery(sim, "-x", lid, port)
        mine = _counters(sim, lid, "--port", port, "--extended")
        after = _perfquery(sim, "-x", lid, port)
        c = mine["counters"]
        assert set(c) == set(before)
        for k in EXT_STILL:
            assert c[k] == before[k] == after[k], k
        for k in MOVING:
            assert before[k] <= c[k] <= after[k], k
            assert c[k] > 0, k  # traffic has crossed every linked port since OpenSM ran


def test_counters_by_description_and_all_ports_sum(fabric):
    sim = fabric
    lid = _lid(sim, "Switch2")
    sim.command('PerformanceSet "Switch2"[1] PortCounters.LinkDownedCounter=3')
    sim.command('PerformanceSet "Switch2"[2] PortCounters.LinkDownedCounter=4')
    by_name = _counters(sim, "Switch2", "--port", 1)  # found by discovery, its LID read from PortInfo
    assert by_name["lid"] == lid and by_name["counters"]["LinkDownedCounter"] == 3
    summed = _counters(sim, lid, "--port", 255)
    assert summed["counters"]["LinkDownedCounter"] == _perfquery(sim, "-a", lid)["LinkDownedCounter"] >= 7
    # a CA's agent has no AllPortSelect (CapabilityMask 0x1200 on ibsim): refused, exit 2
    r = sim.smagent("counters", _lid(sim, "Hca2"), "--port", 255, check=False)
    assert r.returncode == 2 and "AllPortSelect" in r.stderr
    # a port the node lacks is bad input (exit 2), as for `lft set`, not a fabric failure
    r = sim.smagent("counters", lid, "--port", 99, check=False)
    assert r.returncode == 2 and "--port 99" in r.stderr


def test_reset_clears_like_perfquery_r(fabric):
    sim = fabric
    lid = _lid(sim, "Switch1")
    sim.command('PerformanceSet "Switch1"[2] PortCounters.SymbolErrorCounter=9')
    r = _counters(sim, lid, "--port", 2, "--reset")
    assert r["counters"]["SymbolErrorCounter"] == 9  # the values before the reset, as perfquery -r prints
    after = _perfquery(sim, lid, 2)
    assert after["SymbolErrorCounter"] == 0 and after["PortXmitDiscards"] == 0


def _health(sim: IbSim, *args):
    r = sim.smagent("health", "--json", *args, check=False)
    return r.returncode, json.loads(r.stdout)


def test_health_clean_then_one_erring_switch_port(fabric, tmp_path):
    sim = fabric
    sim.run(["perfquery", "-R", "-a", str(_lid(sim, "Switch1"))], check=True)  # the earlier tests' counters
    sim.run(["perfquery", "-R", "-a", str(_lid(sim, "Switch2"))], check=True)
    for ca in ("Hca1", "Hca2", "Hca3", "Hca4"):
        sim.run(["perfquery", "-R", str(_lid(sim, ca)), "1"], check=True)
    rc, clean = _health(sim)
    assert rc == 0 and clean["ok"] and clean["erring"] == [] and clean["unanswered"] == []
    # 6 ClassPortInfo (2 switches, 4 CA ports), 2 switch sums, 4 CA ports: no switch port read alone
    assert clean["summary"]["ports_read"] == 4 and clean["summary"]["gmps"] == 12
    sim.command('PerformanceSet "Switch1"[1] PortCounters.SymbolErrorCounter=50')
    rc, bad = _health(sim)
    assert rc == 1 and not bad["ok"]
    (port,) = bad["erring"]
    assert (port["node"], port["port"], port["exceeded"]) == ("Switch1", 1, {"SymbolErrorCounter": 50})
    assert (port["remote"], port["remote_port"]) == ("Hca1", 1) and port["link"]
    assert bad["summary"]["gmps"] == 12 + 4  # Switch1's sum was over: its four linked ports read one by one
    text = sim.smagent("health", check=False)
    assert text.returncode == 1 and '"Switch1"' in text.stdout and "[SymbolErrorCounter == 50]" in text.stdout
    assert '"Hca1"' in text.stdout
    # a threshold above the value: clean again
    rc, raised = _health(sim, "--threshold", "SymbolErrorCounter=50")
    assert rc == 0 and raised["erring"] == []


def test_health_prometheus_textfile(fabric, tmp_path):
    sim = fabric
    sim.command('PerformanceSet "Switch2"[3] PortCounters.PortRcvErrors=77')
    prom = tmp_path / "smagent.prom"
    r = sim.smagent("health", "--prometheus", prom, "--json", check=False)
    assert r.returncode == 1
    # 6 ClassPortInfo, then every linked port one by one: 12 PortCounters, 12 PortCountersExtended
    # (every ibsim agent's CapabilityMask has ExtendedWidth)
    assert json.loads(r.stdout)["summary"]["gmps"] == 30
    text = prom.read_text()
    series = [(lab, v) for name, lab, v in prom_samples(text) if name == "smagent_port_receive_errors_total"]
    assert len(series) == 12  # every linked port: 4 + 4 switch ports, 4 CA ports
    switch2 = guids(text)["Switch2"]
    hit = [v for lab, v in series if lab["guid"] == switch2 and lab["port"] == "3"]
    assert hit == [77] and value(text, "smagent_link_info", guid=switch2, port="3", remote_guid=guids(text)["Switch1"], remote_port="3") == 1
    assert "# TYPE smagent_port_symbol_errors_total counter" in text
    assert len([1 for name, _l, _v in prom_samples(text) if name == "smagent_port_unicast_transmit_packets_total"]) == 12
    data = [v for name, _l, v in prom_samples(text) if name == "smagent_port_transmit_data_bytes_total"]
    assert len(data) == 12 and all(v % 4 == 0 and v > 0 for v in data)  # 4-byte words, as bytes
    assert [p.name for p in tmp_path.iterdir()] == ["smagent.prom"]  # written beside it, renamed over it


def test_health_names_a_port_that_does_not_answer(fabric):
    sim = fabric
    sim.command('Error "Hca2"[1] 100 0x12')  # ibsim drops every MAD of attribute 0x12 (PortCounters) there
    try:
        r = sim.smagent("health", "--json", "--threshold", "PortRcvErrors=1000", "--threshold", "SymbolErrorCounter=100",
                        check=False)  # over what the earlier tests set
    finally:
        sim.command('Error "Hca2"[1] 0 0x12')
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and not doc["ok"] and doc["erring"] == []
    (why,) = doc["unanswered"]
    assert "'Hca2' port 1" in why and "PerfGet(PortCounters" in why
    assert doc["summary"]["ports_read"] == 3  # the other CA ports; the switches' sums were under every threshold
