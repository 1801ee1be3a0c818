"""`smagent discover` and GUID/description targets on ibsim.

Round trip: discover a fabric, start a second ibsim on what discover wrote, discover
again: the same graph (by GUID and by description), the same counts in --json, and the
same nodes and links as ibnetdiscover's view of the original fabric. Then `query` by
GUID and by description, checked against smpquery on the DR path.
"""
import json
import pathlib
import re

import pytest

from ibsim_harness import ibsim_available, skip_reason
from smagent.model import netfile, topogen

pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]

VECTOR_NET = str(pathlib.Path(__file__).parents[1] / "vectors" / "ibsim-2sw4hca.net")


def _by_guid(fab):
    return fab.link_set(key=lambda n: n.guid)


def _by_desc(fab):
    return fab.link_set(key=lambda n: n.description)


def _twins():
    """two_switch with two adapters that share a description (and so need GUID names)."""
    f = topogen.two_switch()
    f.node("Hca3").description = "twin"
    f.node("Hca4").description = "twin"
    return f


FABRICS = {
    "vector-2sw4hca": lambda: netfile.load(VECTOR_NET),
    "fat_tree_2(8)": lambda: topogen.fat_tree_2(8),
    "torus_2d(3,3)": lambda: topogen.torus_2d(3, 3),
    "duplicate-descriptions": _twins,
}


@pytest.mark.parametrize("name", list(FABRICS))
def test_discover_round_trip(tmp_path, ibsim, name):
    original = FABRICS[name]()
    if name.startswith("vector"):
        net = VECTOR_NET
    else:
        net = tmp_path / "orig.net"
        net.write_text(netfile.dumps(original))
    size = netfile.ibsim_size_args(original)

    sim1 = ibsim(net, extra_args=size)
    out1 = tmp_path / "out1.net"
    sim1.smagent("discover", "-o", out1)
    counts = json.loads(sim1.smagent("discover", "--json").stdout)
    witness = netfile.loads(sim1.run(["ibnetdiscover"]).stdout, "ibnetdiscover")
    sim1.stop()

    fab1 = netfile.load(out1)
    # the generated/hand-written graph, by description (the files name nodes by description)
    assert _by_desc(fab1) == _by_desc(original)
    assert sorted(n.description for n in fab1) == sorted(n.description for n in original)
    # ibnetdiscover of the original fabric: same nodes and links by GUID
    assert {n.guid for n in fab1} == {n.guid for n in witness}
    assert _by_guid(fab1) == _by_guid(witness)
    assert {n.guid: n.description for n in fab1} == {n.guid: n.description for n in witness}
    # --json gives the same counts
    assert len(counts["nodes"]) == len(fab1) == len(original)
    assert counts["links"] == fab1.num_links == original.num_links
    assert sum(n["type"] == "switch" for n in counts["nodes"]) == len(fab1.switches())
    assert counts["unreachable"] == []
    # names: descriptions where unique and valid, else S-/H-<guid>
    for n in fab1:
        dup = sum(m.description == n.description for m in fab1) > 1
        assert n.name == (f"{'S' if n.is_switch else 'H'}-{n.guid:016x}" if dup else n.description)

    # a second ibsim on what we wrote, discovered again: the same graph
    sim2 = ibsim(out1, extra_args=size)
    out2 = tmp_path / "out2.net"
    sim2.smagent("discover", "-o", out2)
    counts2 = json.loads(sim2.smagent("discover", "--json").stdout)
    fab2 = netfile.load(out2)
    assert _by_guid(fab2) == _by_guid(fab1)
    assert _by_desc(fab2) == _by_desc(fab1)
    assert fab2 == fab1, "a discovered fabric, simulated and discovered again, must be identical"
    assert (len(counts2["nodes"]), counts2["links"]) == (len(counts["nodes"]), counts["links"])


def _field(text, name):
    m = re.search(rf"^{name}:\.+(.*)$", text, re.M)
    assert m, f"{name} not in smpquery output:\n{text}"
    return m.group(1).strip()


@pytest.fixture
def vector_sim(ibsim):
    return ibsim(VECTOR_NET)  # Switch1 first: clients attach to Switch1 port 0


@pytest.mark.parametrize("target", ["0x0000000000200001", "Switch2", '"Switch2"'])
def test_query_switch_by_guid_or_description(vector_sim, target):
    ours = json.loads(vector_sim.smagent("query", "nodeinfo", target, "--json").stdout)
    assert "DR path 0,3" in ours["target"], ours["target"]  # Switch1 port 3 -> Switch2
    theirs = vector_sim.run(["smpquery", "-D", "nodeinfo", "0,3"]).stdout
    assert ours["value"]["node_guid"] == int(_field(theirs, "Guid"), 16) == 0x200001
    assert ours["value"]["num_ports"] == int(_field(theirs, "NumPorts"))
    desc = json.loads(vector_sim.smagent("query", "nodedesc", target, "--json").stdout)
    assert desc["value"]["node_string"] == vector_sim.run(["smpquery", "-D", "nodedesc", "0,3"]).stdout.split(
        "Node Description:", 1)[1].strip(" .\n") == "Switch2"


def test_query_ca_by_port_guid_and_description(vector_sim):
    # Hca2 (node GUID 0x100003, port 1 GUID 0x100004) hangs off Switch2 port 1: DR 0,3,1
    theirs = vector_sim.run(["smpquery", "-D", "portinfo", "0,3,1", "1"]).stdout
    for target in ("0x0000000000100004", "0x0000000000100003", "Hca2"):
        ours = json.loads(vector_sim.smagent("query", "portinfo", target, "--port", "1", "--json").stdout)
        assert "DR path 0,3,1" in ours["target"]
        assert ours["value"]["local_port_num"] == int(_field(theirs, "LocalPort")) == 1
        assert ours["value"]["capability_mask"] == int(_field(theirs, "CapMask"), 16)


def test_query_unknown_guid_or_description(vector_sim):
    r = vector_sim.smagent("query", "nodeinfo", "0x00000000deadbeef", check=False)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "no node or port with GUID 0x00000000deadbeef" in r.stderr
    r = vector_sim.smagent("query", "nodedesc", "NoSuchSwitch", check=False)
    assert r.returncode == 2 and "no node has the description 'NoSuchSwitch'" in r.stderr, r.stderr
    # bad options are refused before any discovery
    r = vector_sim.smagent("query", "portinfo", "NoSuchSwitch", "--port", "300", check=False)
    assert r.returncode == 2


def test_query_ambiguous_description(tmp_path, ibsim):
    net = tmp_path / "twins.net"
    net.write_text(netfile.dumps(_twins()))
    sim = ibsim(net)
    r = sim.smagent("query", "nodeinfo", "twin", check=False)
    assert r.returncode == 2
    assert "ambiguous" in r.stderr and len(re.findall(r"0x[0-9a-f]{16}", r.stderr)) == 2, r.stderr
    # each twin is still reachable by GUID
    for g in re.findall(r"0x[0-9a-f]{16}", r.stderr):
        ours = json.loads(sim.smagent("query", "nodedesc", g, "--json").stdout)
        assert ours["value"]["node_string"] == "twin"


@pytest.mark.parametrize("name", ["vector-2sw4hca", "fat_tree_2(8)"])
def test_discovered_file_loads_into_the_simulator(tmp_path, ibsim, live_cli, name):
    """What `discover` writes from ibsim, the in-process simulator loads and discovers
    back to the same graph (GUIDs included)."""
    original = FABRICS[name]()
    net = VECTOR_NET if name.startswith("vector") else tmp_path / "orig.net"
    if not name.startswith("vector"):
        net.write_text(netfile.dumps(original))
    sim = ibsim(net)
    out = tmp_path / "discovered.net"
    sim.smagent("discover", "-o", str(out))
    r = live_cli("--transport", "sim", "--topology", out, "discover", timeout=300)
    assert r.returncode == 0, r.stderr
    again = netfile.loads(r.stdout, "sim discover")
    first = netfile.load(out)
    assert _by_guid(again) == _by_guid(first)
    assert _by_desc(again) == _by_desc(original)
