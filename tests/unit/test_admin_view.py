"""What an admin sees (issue 11, items 4 and 10): discover keeps what ibnetdiscover shows
(vendor and device IDs, link width and speed, degraded links, a port cabled back to
itself), odd topology files are refused cleanly, and keys are never printed unless asked.
"""
import json
import re
from collections import Counter

import pytest


# S0 port 1 is enabled for 1X only: ibsim trains the link to 1X (iblinkinfo: "Could be 12X");
# S1 port 2 is cabled back to itself
ODD_NET = """\
Switch\t4 "S0"
[1]\t"S1"[1]\tw=1
[4]\t"H1"[1]

Switch\t4 "S1"
[1]\t"S0"[1]\tw=3
[2]\t"S1"[2]

Hca\t1 "H1"
[1]\t"S0"[4]
"""


@pytest.mark.ibsim
def test_discover_on_an_odd_fabric_matches_ibnetdiscover(tmp_path, ibsim):
    net = tmp_path / "odd.net"
    net.write_text(ODD_NET)
    sim = ibsim(net)
    r = sim.smagent("discover", check=False, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert re.search(r"warning: S1 port 2 is cabled back to itself", r.stderr)
    assert re.search(r"warning: degraded link S0\[1\] <-> S1\[1\]: width 1X of 12X possible", r.stderr)
    theirs = sim.run(["ibnetdiscover"]).stdout
    # the same rates as ibnetdiscover prints, port by port, but for the loopback's line
    theirs_rates = Counter(re.findall(r"lid \d+ (\d+x\w+)$", theirs, re.M))
    ours_rates = Counter(re.findall(r"lid \d+ (\d+x\w+)$", r.stdout, re.M))
    theirs_rates["4xSDR"] -= 1  # ibnetdiscover lists S1[2] -> S1[2]; we warn about it instead
    assert +theirs_rates == ours_rates and ours_rates["1xSDR"] == 2
    doc = json.loads(sim.smagent("discover", "--json", check=False, timeout=120).stdout)
    assert doc["loopbacks"] == [{"guid": "0x0000000000200001", "description": "S1", "port": 2}]
    (deg,) = [d for d in doc["degraded_links"] if {d["a"]["description"], d["b"]["description"]} == {"S0", "S1"}]
    assert "width 1X of 12X possible" in deg["why"]
    s0 = next(n for n in doc["nodes"] if n["description"] == "S0")
    assert s0["ports"]["1"]["link_width_active"] == 1 and s0["ports"]["1"]["rate"] == "1xSDR"
    assert s0["vendor_id"] == "0x000000" and s0["device_id"] == "0x0000"


def test_vendor_and_device_ids_come_from_nodeinfo(cli, tmp_path):
    net = tmp_path / "ids.net"
    net.write_text('vendid=0x2c9\ndevid=0xcb20\nSwitch\t4 "S0"\n[1]\t"H1"[1]\n\n'
                   'vendid=0x2c9\ndevid=0x1017\nHca\t1 "H1"\n[1]\t"S0"[1]\n')
    r = cli("--topology", str(net), "discover")
    assert r.exit_code == 0, r.output
    assert "vendid=0x2c9\ndevid=0xcb20" in r.stdout and "vendid=0x2c9\ndevid=0x1017" in r.stdout
    assert "4xSDR" in r.stdout
    r = cli("--topology", str(net), "discover", "--json")
    ids = {n["description"]: (n["vendor_id"], n["device_id"]) for n in json.loads(r.stdout)["nodes"]}
    assert ids == {"S0": ("0x0002c9", "0xcb20"), "H1": ("0x0002c9", "0x1017")}


@pytest.mark.parametrize("text", ["", "# only a comment\n\n"])
def test_empty_topology_is_refused_without_a_traceback(cli, tmp_path, text):
    net = tmp_path / "empty.net"
    net.write_text(text)
    r = cli("--topology", str(net), "discover")
    assert r.exit_code == 2
    assert "no nodes" in r.output and "empty.net" in r.output
    assert not isinstance(r.exception, StopIteration)


def test_query_hides_keys_and_names_codes(cli, tmp_path):
    r = cli("--mkey", "0x1122334455667788", "query", "portinfo", "0", "--port", "1")
    assert r.exit_code == 0, r.output
    assert "m_key:" in r.stdout and "<not displayed>" in r.stdout and "1122334455667788" not in r.stdout
    # NeighborMTU 256 and VL0 only: the simulator's unconfigured port at IBA reset values
    for shown in ("4X (2)", "Initialize (2)", "LinkUp (5)", "4096 (5)", "256 (1)", "VL0-7 (4)", "VL0 (1)",
                  "2.5 Gbps (1)"):
        assert shown in r.stdout
    r = cli("query", "portinfo", "0", "--port", "1", "--json")
    value = json.loads(r.stdout)["value"]
    assert value["m_key"] == "<not displayed>" and value["link_width_active"] == 2  # JSON keeps numbers
    r = cli("query", "sminfo", "0", "--json")
    assert json.loads(r.stdout)["value"]["sm_key"] == "<not displayed>"


def test_summary_counts_read_as_english(cli, tmp_path):
    net = tmp_path / "one.net"
    net.write_text('Switch\t4 "S0"\n[1]\t"H1"[1]\n\nHca\t1 "H1"\n[1]\t"S0"[1]\n')
    r = cli("--topology", str(net), "sweep")
    assert r.exit_code == 0, r.output
    assert "2 nodes (1 switch, 1 CA), 1 link, 2 LIDs" in r.stdout
    assert "(1 member, 1 switch, root S0)" in r.stdout


@pytest.mark.parametrize("net, says", [
    ('Hca\t1 "H1"\n', "the local port (H1 port 1) is down (physical state Polling)"),
    ('Hca\t1 "H1"\n[1]\t"H2"[1]\n\nHca\t1 "H2"\n[1]\t"H1"[1]\n', "no switch found from the local port (H1 port 1)"),
])
def test_no_switch_says_why(cli, tmp_path, net, says):
    f = tmp_path / "f.net"
    f.write_text(net)
    r = cli("--topology", str(f), "sweep")
    assert r.exit_code == 3 and says in r.output


@pytest.mark.parametrize("args", [["sweep"], ["lft", "set", "0,1", "5", "1"], ["mft", "set", "0,1", "0xc001", "1"],
                                  ["rft", "set", "0,1", "5", "1"]])
def test_a_recording_asked_to_write_says_so_before_the_first_get(cli, monkeypatch, args):
    from pathlib import Path

    from smagent.transport import replay
    sent = []
    monkeypatch.setattr(replay.ReplayTransport, "_answer", lambda self, raw, dlid: sent.append(raw))
    fixture = Path(__file__).parents[2] / "fixtures" / "two-switch-fresh.erf"
    r = cli("--transport", "replay", "--fixture", fixture, *args)
    assert r.exit_code == 2 and "cannot take writes" in r.stderr and "--dry-run" in r.stderr, r.output
    assert sent == []  # not a single Get


def test_query_guids(cli):
    """GUIDInfo, 8 GUIDs a block: our CA port's first block (its own GUID, then no alias), a
    switch's one GUID (GUIDCap 1); a block past GUIDCap is the port's refusal (exit 3),
    past the 32 blocks ours (exit 2)."""
    r = cli("query", "guids", "0")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == "# GUIDInfo: DR path 0 modifier 0x0" and len(lines) == 9
    assert lines[1].startswith("[0]:") and lines[1].endswith("0x0000000000100001")  # the port's own GUID
    assert all(line.endswith("0x0000000000000000") for line in lines[2:])
    doc = json.loads(cli("query", "guids", "0,1", "--json").stdout)
    assert doc["attribute"] == "GUIDInfo" and doc["value"]["guids"] == [0x200000] + [0] * 7
    assert cli("query", "guids", "0,1", "--block", "1").exit_code == 3
    assert cli("query", "guids", "0", "--block", "32").exit_code == 2
