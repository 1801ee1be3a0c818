"""ibsim net files and ibnetdiscover output: reading, writing, round trips."""
import io
from pathlib import Path

import pytest

from smagent.model import netfile, topogen
from smagent.model.fabric import HCA, ROUTER, SWITCH, Fabric, FabricError, Node, Port
from smagent.model.netfile import NetFileError

from ibsim_harness import ibsim_available, skip_reason

VECTORS = Path(__file__).parents[1] / "vectors"
NET_2SW4HCA = VECTORS / "ibsim-2sw4hca.net"
NET_36PORT = VECTORS / "ibsim-36port.net"

# `ibnetdiscover` (infiniband-diags 44) run against ibsim 0.10 on
# ibsim-2sw4hca.net, verbatim.
IBNETDISCOVER_2SW4HCA = """\
#
# Topology file: generated on Wed Dec  2 10:06:51 2026
#
# Initiated from node 0000000000200000 port 0000000000200000

vendid=0x0
devid=0x0
sysimgguid=0x200001
switchguid=0x200001(200001)
Switch	8 "S-0000000000200001"		# "Switch2" base port 0 lid 0 lmc 0
[1]	"H-0000000000100003"[1](100004) 		# "Hca2" lid 0 4xSDR
[2]	"H-0000000000100009"[1](10000a) 		# "Hca4" lid 0 4xSDR
[3]	"S-0000000000200000"[3]		# "Switch1" lid 0 4xSDR
[5]	"S-0000000000200000"[5]		# "Switch1" lid 0 4xSDR

vendid=0x0
devid=0x0
sysimgguid=0x200000
switchguid=0x200000(200000)
Switch	8 "S-0000000000200000"		# "Switch1" base port 0 lid 0 lmc 0
[1]	"H-0000000000100000"[1](100001) 		# "Hca1" lid 0 4xSDR
[2]	"H-0000000000100006"[1](100007) 		# "Hca3" lid 0 4xSDR
[3]	"S-0000000000200001"[3]		# "Switch2" lid 0 4xSDR
[5]	"S-0000000000200001"[5]		# "Switch2" lid 0 4xSDR

vendid=0x0
devid=0x0
sysimgguid=0x100009
caguid=0x100009
Ca	2 "H-0000000000100009"		# "Hca4"
[1](10000a) 	"S-0000000000200001"[2]		# lid 0 lmc 0 "Switch2" lid 0 4xSDR

vendid=0x0
devid=0x0
sysimgguid=0x100003
caguid=0x100003
Ca	2 "H-0000000000100003"		# "Hca2"
[1](100004) 	"S-0000000000200001"[1]		# lid 0 lmc 0 "Switch2" lid 0 4xSDR

vendid=0x0
devid=0x0
sysimgguid=0x100006
caguid=0x100006
Ca	2 "H-0000000000100006"		# "Hca3"
[1](100007) 	"S-0000000000200000"[2]		# lid 0 lmc 0 "Switch1" lid 0 4xSDR

vendid=0x0
devid=0x0
sysimgguid=0x100000
caguid=0x100000
Ca	2 "H-0000000000100000"		# "Hca1"
[1](100001) 	"S-0000000000200000"[1]		# lid 0 lmc 0 "Switch1" lid 0 4xSDR
"""

# The shape of ibnetdiscover output after an SM assigned LIDs, with
# `-f` extras (s= w= v=) and an enhanced port 0.
IBNETDISCOVER_WITH_LIDS = """\
vendid=0x2c9
devid=0xc738
sysimgguid=0x8f10400411f59
switchguid=0x8f10400411f56(8f10400411f56)
Switch	36 "S-0008f10400411f56"		# "MF0;sw1:IS5030/U1" enhanced port 0 lid 2 lmc 0
[1]	"H-0002c90300001000"[1](2c90300001001) 		# "node1 mlx4_0" lid 4 4xQDR s=4 w=2 v=4
[2]	"H-0002c90300001000"[2](2c90300001002) 		# "node1 mlx4_0" lid 5 4xQDR

vendid=0x2c9
devid=0x673c
sysimgguid=0x2c90300001003
caguid=0x2c90300001000
Ca	2 "H-0002c90300001000"		# "node1 mlx4_0"
[1](2c90300001001) 	"S-0008f10400411f56"[1]		# lid 4 lmc 1 "MF0;sw1:IS5030/U1" lid 2 4xQDR
[2](2c90300001002) 	"S-0008f10400411f56"[2]		# lid 5 lmc 0 "MF0;sw1:IS5030/U1" lid 2 4xQDR
"""


def rich_fabric() -> Fabric:
    """A fabric using every attribute the model carries."""
    f = Fabric()
    f.add_node(Node(name="H0", node_type=HCA, num_ports=2, description="h0 mlx5_0", guid=0x100,
                    system_guid=0x1FF, port_guids={1: 0x101, 2: 0x102}, lids={1: 3, 2: 9},
                    lmcs={1: 2}, rates={1: "4xQDR"}, port_opts={1: {"w": 2, "s": 4}},
                    caps={"vendor_id": 0x2C9, "device_id": 0x1017, "m_key": 0xDEAD}))
    f.add_node(Node(name="S0", node_type=SWITCH, num_ports=36, description="leaf 0", guid=0x200,
                    port_guids={0: 0x2FF}, lids={0: 1, 7: 12}, lmcs={0: 1}, rates={1: "4xQDR", 36: "1xSDR"},
                    port_opts={2: {"e": 1}},
                    caps={"enhanced_port0": 1, "linear_fdb_cap": 49152, "multicast_fdb_cap": 0,
                          "random_fdb_cap": 0, "lids_per_port": 1}))
    f.add_node(Node(name="S1", node_type=SWITCH, num_ports=8, guid=0x300, port_guids={0: 0x300},
                    lids={0: 0}, caps={"enhanced_port0": 0}))
    f.add_node(Node(name="R0", node_type=ROUTER, num_ports=1, port_guids={1: 0x401}))
    f.add_node(Node(name="H 1", node_type=HCA, num_ports=1, rates={1: "1xSDR"}))
    f.connect("H0", 1, "S0", 1)
    f.connect("S0", 2, "S1", 8)
    f.connect("R0", 1, "S1", 1)
    f.connect("H 1", 1, "S0", 36)
    return f


# -- reading -----------------------------------------------------------------
def test_load_ibsim_example():
    f = netfile.load(NET_2SW4HCA)
    assert [n.name for n in f] == ["Switch1", "Switch2", "Hca1", "Hca2", "Hca3", "Hca4"]
    assert len(f.switches()) == 2 and len(f.cas()) == 4 and f.num_links == 6
    assert f.neighbor("Switch1", 5) == Port("Switch2", 5)
    assert f.node("Hca4").num_ports == 2 and f.node("Hca4").guid is None
    assert f.node("Switch1").description == "Switch1"


def test_load_36port_vector():
    f = netfile.load(str(NET_36PORT))
    assert f.node("S36").num_ports == 36 and f.node("H1") is next(iter(f))
    assert f.neighbor("S36", 33) == ("S8", 7)
    assert f.num_links == 9


def test_load_real_ibnetdiscover_output():
    f = netfile.loads(IBNETDISCOVER_2SW4HCA)
    sw1 = f.node("S-0000000000200000")
    assert sw1.node_type == SWITCH and sw1.description == "Switch1"
    assert sw1.guid == 0x200000 and sw1.system_guid == 0x200000 and sw1.port_guids == {}
    assert sw1.rates == {1: "4xSDR", 2: "4xSDR", 3: "4xSDR", 5: "4xSDR"}
    assert sw1.lids == {} and sw1.caps == {}  # lid 0 = none, base port 0, vendid 0
    hca2 = f.node("H-0000000000100003")
    assert hca2.node_type == HCA and hca2.description == "Hca2" and hca2.port_guids == {1: 0x100004}
    # same graph as the net file ibsim loaded, once names become descriptions
    original = netfile.load(NET_2SW4HCA)
    assert f.link_set(key=lambda n: n.description) == original.link_set()


def test_load_ibnetdiscover_lids_options_and_ids():
    f = netfile.loads(IBNETDISCOVER_WITH_LIDS)
    sw = f.node("S-0008f10400411f56")
    assert sw.description == "MF0;sw1:IS5030/U1" and sw.lids == {0: 2} and sw.lmcs == {}
    assert sw.caps == {"enhanced_port0": 1, "vendor_id": 0x2C9, "device_id": 0xC738}
    assert sw.system_guid == 0x8F10400411F59
    assert sw.port_opts == {1: {"s": 4, "w": 2, "v": 4}}
    ca = f.node("H-0002c90300001000")
    assert ca.lids == {1: 4, 2: 5} and ca.lmcs == {1: 1} and ca.rates[2] == "4xQDR"
    assert ca.port_guids == {1: 0x2C90300001001, 2: 0x2C90300001002}
    assert ca.lid(2) == 5 and sw.lid() == 2


def test_load_accepts_path_stream_and_text(tmp_path):
    text = NET_2SW4HCA.read_text()
    p = tmp_path / "t.net"
    p.write_text(text)
    expected = netfile.loads(text)
    assert netfile.load(p) == expected
    assert netfile.load(str(p)) == expected
    assert netfile.load(io.StringIO(text)) == expected
    assert netfile.load(text) == expected


def test_tabs_spaces_remote_port_default_and_options():
    f = netfile.loads(
        'Switch 4 "s"\n'
        '[1]\t"h"  w=4 s=4\n'  # no remote port: ibsim means port 1
        '[2] "h"[2]\n'
        "\n"
        'Hca\t2\t"h"\n'
        '[1] "s"[1]\n'
        '[2] "s"[2]\n'
    )
    assert f.neighbor("s", 1) == ("h", 1)
    assert f.node("s").port_opts == {1: {"w": 4, "s": 4}}


def test_remote_declared_later_and_one_sided_links():
    f = netfile.loads('Hca 1 "h"\n[1] "s"[3]\n\nSwitch 8 "s"\n[5] "t"[1]\n\nHca 1 "t"\n')
    assert f.neighbor("s", 3) == ("h", 1)  # s never lists port 3: one-sided is accepted
    assert f.neighbor("t", 1) == ("s", 5)


def test_comments_inside_records_do_not_end_them():
    f = netfile.loads('# top\nSwitch 8 "s"\n# a comment\n[1] "h"[1]\n\nHca 1 "h"\n[1] "s"[1]\n')
    assert f.num_links == 1


def test_ibsim_global_directives_are_ignored_and_grouping_lines_accepted():
    f = netfile.loads('width=2\nspeed=1\n\nNon-Chassis Nodes\n\nHca 1 "h"\n')
    assert len(f) == 1


@pytest.mark.parametrize(
    "text, line, message",
    [
        ('Switch 8 "a"\n[1] "b"[1]\n\nHca 1 "b"\n[1] "a"[2]\n',
         2, r'"a"\[1\] is cabled to "b"\[1\], but line 5 says "b"\[1\] is cabled to "a"\[2\]'),
        ('Switch 8 "a"\n[1] "nobody"[1]\n', 2, 'cabled to node "nobody", which has no record'),
        ('Switch 8 "a"\n[9] "b"[1]\n\nHca 1 "b"\n', 2, "port 9 out of range: node 'a' has ports 1..8"),
        ('Switch 8 "a"\n[0] "b"[1]\n', 2, "port 0 is a switch's internal port"),
        ('Switch 8 "a"\n[1] "b"[2]\n\nHca 1 "b"\n', 2, r'but node "b" has ports 1..1'),
        ('Switch 8 "a"\n[1] "b"[1]\n[1] "b"[1]\n\nHca 1 "b"\n', 3, "already described on line 2"),
        ('Switch 8 "a"\n\n[1] "b"[1]\n', 3, "port line outside a node record"),
        ('Switch 8 "a"\n\nHca 1 "a"\n', 3, "duplicate node name 'a'"),
        ('caguid=0x10\nHca 1 "a"\ncaguid=0x10\nHca 1 "b"\n', 4, "GUID 0x10 already belongs to node 'a'"),
        ('Switch "a"\n', 1, "malformed node header"),
        ('Switch 0 "a"\n', 1, "num_ports 0 out of range"),
        ('Bogus line\n', 1, "unrecognized line 'Bogus line'"),
        ('include "other.net"\n', 1, "'include' is not supported"),
        ('Switch 8 "a"\n[1] "b"[1] w=fast\n\nHca 1 "b"\n', 2, "w='fast': value is not a number"),
        ('Switch 8 "a"\n[1] "b"[1] junk\n\nHca 1 "b"\n', 2, "unexpected text 'junk'"),
        ('Switch 8 "a"\n[1] "b"[1]\n[2] "c"[1]\n\nHca 1 "b"\n\nHca 1 "c"\n[1] "a"[1]\n',
         3, r'"a"\[2\] is cabled to "c"\[1\], but line 8 says "c"\[1\] is cabled to "a"\[1\]'),
        ('Switch 8 "a"\n[1] "a"[1]\n', 2, "to itself"),
        ('Switch 8 "a"\n[1](200) "b"[1]\n\nHca 1 "b"\n', 2, "external ports have no port GUID"),
        ('Switch 8 "a"\n[1] "b"[1](99)\n\nHca 1 "b"\n[1](98) "a"[1]\n', 2, "contradicts 98"),
        ('Switch 8 "a"  # "unterminated\n', 1, "unterminated quoted node description"),
        ('Switch 8 "a"\n  [1] "b"[1]\n', 2, "unexpected indented line"),
        ('Switch 8 "a" extra\n', 1, "unexpected text 'extra' after the node id"),
        ('Hca 1 "b"\n[1] "a"[1]  # lid 70000 lmc 0\n', 2, "LID 70000 out of range"),
        ('# smagent: cap x=1\n', 1, "outside a node record"),
        ('Hca 1 "b"\n# smagent: frob\n', 2, "malformed '# smagent:' line"),
        ('caguid+0x10\n', 1, "relative caguid\\+ GUID bases are not supported"),
    ],
)
def test_errors_name_file_line_and_problem(text, line, message):
    with pytest.raises(NetFileError, match=message) as info:
        netfile.loads(text, source="topo.net")
    err = info.value
    assert isinstance(err, ValueError)
    assert err.lineno == line and err.source == "topo.net"
    assert str(err).startswith(f"topo.net:{line}: ")


def test_error_from_file_names_the_path(tmp_path):
    p = tmp_path / "bad.net"
    p.write_text('Hca 1 "h"\n[1] "missing"[1]\n')
    with pytest.raises(NetFileError, match=rf"^{p}:2: .*missing"):
        netfile.load(p)


# -- writing -----------------------------------------------------------------
@pytest.mark.parametrize("style", ["ibsim", "ibnetdiscover"])
def test_round_trip_rich_fabric(style):
    f = rich_fabric()
    text = netfile.dumps(f, style)
    back = netfile.loads(text)
    assert back == f, text
    assert [n.name for n in back] == [n.name for n in f]
    assert netfile.dumps(back, style) == text  # stable


@pytest.mark.parametrize("style", ["ibsim", "ibnetdiscover"])
def test_round_trip_loaded_files(style):
    for f in (netfile.load(NET_36PORT), netfile.loads(IBNETDISCOVER_2SW4HCA),
              netfile.loads(IBNETDISCOVER_WITH_LIDS)):
        assert netfile.loads(netfile.dumps(f, style)) == f


def test_ibnetdiscover_style_looks_like_ibnetdiscover():
    f = netfile.loads(IBNETDISCOVER_2SW4HCA)
    text = netfile.dumps(f, "ibnetdiscover")
    ours = [l for l in text.splitlines() if l and not l.startswith("#")]
    theirs = [l for l in IBNETDISCOVER_2SW4HCA.splitlines() if l and not l.startswith("#")]
    # same lines; only the node order differs (ours keeps the fabric's)
    assert sorted(ours) == sorted(theirs)


def test_ibsim_style_is_minimal():
    text = netfile.dumps(topogen.two_switch())
    body = [l for l in text.splitlines() if l and not l.startswith("#")]
    assert body[:2] == ['Hca\t2 "Hca1"', '[1]\t"Switch1"[1]']
    assert not any("guid" in l or "lid" in l for l in body)
    assert '# ibsim attaches its SM (and clients without SIM_HOST) to "Hca1"' in text


def test_dump_to_stream_and_rejects_bad_input():
    f = topogen.two_switch()
    buf = io.StringIO()
    netfile.dump(f, buf, style="ibsim")
    assert buf.getvalue() == netfile.dumps(f)
    with pytest.raises(ValueError, match="style must be one of"):
        netfile.dumps(f, "xml")
    for bad in ('a"b', "a#b", "a@b", "x" * 65, " padded"):
        g = Fabric()
        g.add_node(name=bad, node_type=HCA, num_ports=1)
        with pytest.raises(FabricError, match="cannot be written to a net file"):
            netfile.dumps(g)
    g = Fabric()
    g.add_node(name="h", node_type=HCA, num_ports=1, description='say "hi"')
    with pytest.raises(FabricError, match="contains"):
        netfile.dumps(g)


# -- ibsim's view ------------------------------------------------------------
def test_assign_ibsim_guids_matches_ibsim_numbering():
    f = netfile.load(NET_2SW4HCA)
    netfile.assign_ibsim_guids(f)
    # ibsim numbers in file order: switches +1, CAs +(ports+1); compare with
    # what ibnetdiscover reported from ibsim for this very file
    seen = netfile.loads(IBNETDISCOVER_2SW4HCA)
    by_desc = {n.description: n for n in seen}
    for n in f:
        assert n.guid == by_desc[n.name].guid
        for p, _ in f.connected_ports(n):
            assert n.port_guid(p) == by_desc[n.name].port_guid(p)
    assert f.node("Hca2").port_guids == {1: 0x100004, 2: 0x100005}
    assert f.by_guid(0x200001).name == "Switch2"


def test_ibsim_size_args():
    assert netfile.ibsim_size_args(topogen.fat_tree_2(36)) == []
    big = topogen.fat_tree_3(36, hosts=1000)  # 452 switches, 452*37 + 1000 ports
    assert netfile.ibsim_size_args(big) == ["-S", "452", "-P", "17724"]


# -- live: ibsim loads what we write ------------------------------------------
@pytest.mark.ibsim
@pytest.mark.skipif(not ibsim_available(), reason=skip_reason())
def test_ibsim_loads_ibnetdiscover_style_with_our_guids(tmp_path, ibsim):
    """GUIDs and descriptions we write are the ones ibsim then serves."""
    f = topogen.fat_tree_2(4)
    for i, n in enumerate(f):
        f.set_guid(n, 0x0002C90300A00000 + 0x10 * i)
        n.description = f"{n.name} node"
        if not n.is_switch:
            n.port_guids[1] = n.guid + 1  # ibsim's rule for CA port GUIDs
    path = tmp_path / "ft4.net"
    path.write_text(netfile.dumps(f, "ibnetdiscover"))
    sim = ibsim(path)
    seen = netfile.loads(sim.run(["ibnetdiscover"]).stdout, source="ibnetdiscover")
    assert {n.guid: n.description for n in seen} == {n.guid: n.description for n in f}
    assert seen.link_set(key=lambda n: n.guid) == f.link_set(key=lambda n: n.guid)
    for n in f.cas():
        assert seen.by_guid(n.guid).port_guids == {1: n.guid + 1}


@pytest.mark.ibsim
@pytest.mark.skipif(not ibsim_available(), reason=skip_reason())
@pytest.mark.parametrize("style", ["ibsim", "ibnetdiscover"])
def test_ibsim_serves_what_we_write(tmp_path, ibsim, style):
    """LIDs, LMCs, rates, IDs and descriptions in our files reach ibsim's SMA."""
    f = rich_fabric()
    path = tmp_path / f"rich-{style}.net"
    path.write_text(netfile.dumps(f, style))
    sim = ibsim(path)
    seen = netfile.loads(sim.run(["ibnetdiscover"]).stdout, source="ibnetdiscover")
    desc = lambda n: n.description  # noqa: E731
    assert seen.link_set(key=desc) == f.link_set(key=desc)
    by_desc = {n.description: n for n in seen}
    for n in f:
        s = by_desc[n.description]
        if n.guid is not None:
            assert s.guid == n.guid
        if n.system_guid is not None:
            assert s.system_guid == n.system_guid
        servable = {0} if n.is_switch else {p for p, _ in f.connected_ports(n)}
        assert s.lids == {p: v for p, v in n.lids.items() if p in servable and v}
        assert s.lmcs == {p: v for p, v in n.lmcs.items() if p in servable and v}
        for p, _ in f.connected_ports(n):
            assert s.rates[p] == n.rates.get(p, "4xSDR")  # ibsim's default link is 4x SDR
        for cap in ("vendor_id", "device_id", "enhanced_port0"):
            assert s.caps.get(cap, 0) == n.caps.get(cap, 0), (n.name, cap)
