"""`smagent report --counters` on ibsim: the load of each switch-to-switch link is the
data its sending port counted (PortXmitData, through Performance Management GMPs), so a
link whose counter ibsim's console sets (`PerformanceSet`) is the one drawn hottest;
with --interval, the bytes sent during it. OpenSM (`opensm -o`) assigns the LIDs."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ibsim_harness import IbSim, ibsim_available, skip_reason

OPENSM = shutil.which("opensm", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))
pytestmark = [pytest.mark.ibsim,
              pytest.mark.skipif(OPENSM is None, reason="opensm is not installed (Debian package opensm)")]

NETFILE = Path(__file__).resolve().parents[1] / "vectors" / "ibsim-2sw4hca.net"


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    if not ibsim_available():
        pytest.skip(skip_reason())
    tmp = tmp_path_factory.mktemp("ibsim-report")
    with IbSim(NETFILE, tmp, console=True) as sim:
        r = subprocess.run([OPENSM, "-o", "-f", str(tmp / "osm.log")], env=sim.opensm_env(tmp / "osm"),
                           cwd=sim.cwd, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        yield sim


def _load(doc: dict, node: str, port: int) -> int:
    b = doc["balance"]
    guid = next(s[0] for s in b["switches"] if s[1] == node)
    (rec,) = [r for r in b["link_loads"] if r[0] == guid and r[1] == port]
    return rec[4]


def test_counters_draw_the_link_whose_port_sent_most(fabric, tmp_path):
    # ibsim's agents have PortCountersExtended (64-bit PortXmitData, read where ClassPortInfo says so)
    for attribute in ("PortCounters", "PortCountersExtended"):
        fabric.command(f'PerformanceSet "Switch1"[5] {attribute}.PortXmitData=5000000')
    out = tmp_path / "c.svg"
    r = fabric.smagent("report", str(out), "--counters", "--json", check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    b = doc["balance"]
    assert b["unit"] == "bytes" and b["links"] == 4 and len(b["switches"]) == 2
    assert _load(doc, "Switch1", 5) >= 4 * 5000000  # words of 4 bytes
    assert b["hottest"][0]["link"] == "Switch1[5] -> Switch2[5]" and b["max"] == _load(doc, "Switch1", 5)
    assert doc["drawn"]["labelled"] >= 1 and "<svg" in out.read_text()[:2000]
    # over an interval: what was sent during it, the console's total no longer counts
    r = fabric.smagent("report", str(out), "--counters", "--interval", "0.5", "--json", check=False)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["balance"]["max"] < 4 * 5000000


def test_counters_need_a_live_fabric_and_not_a_saved_file(tmp_path, cli):
    r = cli("report", str(tmp_path / "x.png"), "--counters")
    assert r.exit_code == 2 and "umad" in r.output, r.output
    r = cli("report", str(tmp_path / "x.png"), "--counters", "--from-json", str(tmp_path / "v.json"))
    assert r.exit_code == 2 and "give one" in r.output
    r = cli("report", str(tmp_path / "x.png"), "--interval", "2")
    assert r.exit_code == 2 and "goes with --counters" in r.output
