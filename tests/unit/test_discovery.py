"""Discovery results as net files: naming rules of `to_fabric`, and GUID/description
targets resolved against a discovered topology (both on hand-built Topologies)."""
from types import SimpleNamespace

import pytest

from mad.attributes import NodeType
from mad.errors import MadFieldError
from smagent import discovery
from smagent.model import netfile
from smagent.discovery import targets
from smagent.discovery import DNode, Topology, guid_name, to_fabric, valid_name

SW1, SW2 = 0x0002C90300000001, 0x0002C90300000002
H1, H2, H3, H4 = 0x100, 0x200, 0x300, 0x400


def _pi(lid=0, width=2, speed=4):
    """A PortInfo as discovery keeps it: 4X QDR, 1X/4X and SDR..QDR supported."""
    return SimpleNamespace(lid=lid, lmc=0, link_width_active=width, link_width_supported=3,
                           link_speed_active=speed, link_speed_supported=7,
                           link_speed_ext_active=0, link_speed_ext_supported=0)


def _node(guid, desc, switch, path, nports=8):
    n = DNode(guid=guid, node_type=NodeType.SWITCH if switch else NodeType.CA, num_ports=nports,
              path=path, node_info=SimpleNamespace(system_image_guid=guid, vendor_id=0x2C9,
                                                 device_id=0xCB20 if switch else 0x1017),
              description=desc)
    if switch:
        n.port_guids[0] = guid
        n.ports[0] = _pi(guid & 0xFF)
    else:
        n.port_paths[1] = path
        n.port_guids[1] = guid + 1
        n.ports[1] = _pi(0x10 + (guid >> 8))
    return n


def _topology(descs):
    """SW1 (local) -- SW2, H1,H2 on SW1 ports 1,2 and H3,H4 on SW2 ports 1,2."""
    nodes = [
        _node(SW1, descs[0], True, (0,)),
        _node(SW2, descs[1], True, (0, 3)),
        _node(H1, descs[2], False, (0, 1), 2),
        _node(H2, descs[3], False, (0, 2), 2),
        _node(H3, descs[4], False, (0, 3, 1), 2),
        _node(H4, descs[5], False, (0, 3, 2), 2),
    ]
    links = {}
    for a, b in [((SW1, 3), (SW2, 3)), ((SW1, 1), (H1, 1)), ((SW1, 2), (H2, 1)),
                 ((SW2, 1), (H3, 1)), ((SW2, 2), (H4, 1))]:
        links[a], links[b] = b, a
    return Topology({n.guid: n for n in nodes}, links, (SW1, 0))


def test_valid_descriptions_become_names():
    fab = to_fabric(_topology(["Switch1", "Switch2", "Hca1", "Hca2", "Hca3", "Hca4"]))
    assert sorted(n.name for n in fab) == ["Hca1", "Hca2", "Hca3", "Hca4", "Switch1", "Switch2"]
    assert fab.by_guid(SW2).name == "Switch2"
    assert fab.num_links == 5


@pytest.mark.parametrize("bad", [
    'has "quotes"', "hash # sign", "at@sign", "two\nlines", "x" * 65, "é" * 33,  # 66 bytes in UTF-8
    "", " padded", "trailing ",
])
def test_invalid_description_falls_back_to_guid_name(bad):
    assert not valid_name(bad)
    topo = _topology(["Switch1", bad, "Hca1", bad, "Hca3", "Hca4"])
    fab = to_fabric(topo)
    assert fab.by_guid(SW2).name == f"S-{SW2:016x}"
    assert fab.by_guid(H2).name == f"H-{H2:016x}"
    assert fab.by_guid(SW1).name == "Switch1"
    # and the result is writable and reads back as the same graph, in both dialects
    for style in ("ibsim", "ibnetdiscover"):
        text = netfile.dumps(fab, style=style)
        back = netfile.loads(text, style)
        assert back.link_set(key=lambda n: n.guid) == fab.link_set(key=lambda n: n.guid)


def test_64_bytes_is_still_a_name():
    assert valid_name("x" * 64)
    fab = to_fabric(_topology(["x" * 64, "Switch2", "Hca1", "Hca2", "Hca3", "Hca4"]))
    assert fab.by_guid(SW1).name == "x" * 64


def test_duplicate_descriptions_all_get_guid_names():
    # real fabrics: every adapter says "MT4123 ConnectX6 Mellanox Technologies"
    d = "MT4123 ConnectX6 Mellanox Technologies"
    fab = to_fabric(_topology(["Switch1", "Switch2", d, d, d, "Hca4"]))
    for g in (H1, H2, H3):
        assert fab.by_guid(g).name == f"H-{g:016x}"
        assert fab.by_guid(g).description == d
    assert fab.by_guid(H4).name == "Hca4"


def test_description_that_looks_like_another_guid_name():
    topo = _topology(["Switch1", "", f"S-{SW2:016x}", "Hca2", "Hca3", "Hca4"])
    fab = to_fabric(topo)  # SW2 needs its GUID name; Hca1's description may not take it
    assert fab.by_guid(SW2).name == guid_name(topo.nodes[SW2])
    assert fab.by_guid(H1).name == f"H-{H1:016x}"


def test_unquotable_description_is_cleaned_for_the_comment():
    fab = to_fabric(_topology(["Switch1", 'say "hi"\n', "Hca1", "Hca2", "Hca3", "Hca4"]))
    assert fab.by_guid(SW2).description == "say 'hi' "
    netfile.dumps(fab, style="ibnetdiscover")  # would raise on '"' or a newline


# -- targets ------------------------------------------------------------------------

@pytest.mark.parametrize("text, kind, key", [
    ("5", "lid", 5), ("0x5", "lid", 5), ("0xBFFF", "lid", 0xBFFF), ("007", "lid", 7),
    ("0", "path", (0,)), ("0,1,3", "path", (0, 1, 3)), ("0, 1", "path", (0, 1)),
    ("0x0000000000200001", "guid", 0x200001), ("0x00005", "lid", 5), ("0xFFFF", "lid", 0xFFFF),
    ("Switch2", "description", "Switch2"), ('"5"', "description", "5"), ("'Hca 1'", "description", "Hca 1"),
    ("Switch, rack 3", "description", "Switch, rack 3"), ("1_2", "description", "1_2"),
])
def test_classify(text, kind, key):
    assert targets.classify(text) == (kind, key)


@pytest.mark.parametrize("text", ["70000", "0xFFFFF", "0x10000", "0x200001"])
def test_numbers_beyond_16_bits_are_refused_as_lids_not_taken_for_guids(text):
    with pytest.raises(MadFieldError, match="a LID is 1..0xbfff .* 16 hex digits"):
        targets.classify(text)


def test_python_int_targets_above_16_bits_are_guids():
    assert targets.target_text(0x200001) == "0x0000000000200001"
    assert targets.classify(targets.target_text(0x200001)) == ("guid", 0x200001)
    assert targets.target_text(5) == "5"


def test_parse_target_keeps_lids_and_paths_and_defers_the_rest():
    assert targets.parse_target("0x5") == targets.Target(lid=5)
    assert targets.parse_target("0,1") == targets.Target(path=(0, 1))
    with pytest.raises(targets.NeedsDiscovery):
        targets.parse_target("Switch2")
    with pytest.raises(MadFieldError):
        targets.parse_target("0xC000")  # a multicast LID is not a unicast target
    with pytest.raises(MadFieldError):
        targets.parse_target("0,1,x")
    with pytest.raises(MadFieldError):
        targets.parse_target("0x1" + "0" * 16)  # 65 bits


def test_resolve_target_on_a_topology():
    topo = _topology(["Switch1", "Switch2", "Hca1", "twin", "Hca3", "twin"])
    r = lambda t: targets.resolve_target(t, None, topology=topo)
    assert r("Switch2").path == (0, 3)
    assert r(f"{SW2:#018x}").path == (0, 3)
    assert r(f"{H3:#018x}").path == (0, 3, 1)
    assert r(f"{H3 + 1:#018x}").path == (0, 3, 1)  # a CA port GUID
    assert r("5") == targets.Target(lid=5)  # no discovery needed
    assert "Switch2" in r("Switch2").describe()
    with pytest.raises(targets.TargetNotFound, match=r"ambiguous.*0x0000000000000200.*0x0000000000000400"):
        r("twin")
    with pytest.raises(targets.TargetNotFound, match="no node or port with GUID 0x00000000deadbeef"):
        r("0x00000000deadbeef")
    with pytest.raises(targets.TargetNotFound, match="no node has the description 'nope'"):
        r("nope")


def test_ids_and_link_rates_are_written_as_ibnetdiscover_does():
    topo = _topology(["SW1", "SW2", "H1", "H2", "H3", "H4"])
    for g, p in [(SW1, 3), (SW2, 3), (SW1, 1), (SW1, 2), (SW2, 1), (SW2, 2)]:
        topo.nodes[g].ports[p] = _pi()
    topo.nodes[H4].ports[1] = _pi(0x13, width=1, speed=1)  # trained to 1X SDR
    topo.nodes[SW2].ports[2] = _pi(width=1, speed=1)
    text = netfile.dumps(to_fabric(topo), style="ibnetdiscover")
    assert "vendid=0x2c9\ndevid=0xcb20" in text and "vendid=0x2c9\ndevid=0x1017" in text
    assert '[3]\t"SW2"[3]\t\t# "SW2" lid 2 4xQDR' in text
    assert '"SW2"[2]\t\t# lid 19 lmc 0 "SW2" lid 2 1xSDR' in text
    deg = discovery.degraded_links(topo)
    assert [(a.description, pa, b.description, pb) for a, pa, b, pb, _w in deg] == [("SW2", 2, "H4", 1)] or \
        [(b.description, pb, a.description, pa) for a, pa, b, pb, _w in deg] == [("SW2", 2, "H4", 1)]
    assert deg[0][4] == ["width 1X of 4X possible", "speed SDR of QDR possible"]
