"""What a script prints while exploring a fabric (issue item 5): short reprs that say what
an object is (counts, not contents), the decoded MFTs, and the topology as a networkx graph
(networkx is in the test extras: `pip install -e '.[test]'`)."""
import pytest

import smagent
from smagent.fdb.ops import RftTable
from smagent.fdb.switch import SwitchFacts


@pytest.fixture(scope="module")
def swept():
    with smagent.connect("sim") as s:
        assert s.sweep().problems == []
        yield s


def test_topology_and_node_reprs_are_short(swept):
    topo = swept.discover()
    text = repr(topo)
    assert text == ("<Topology 6 switches, 8 CAs, 18 links, 0 unreachable, "
                    f"local {topo.local[0]:#018x} port {topo.local[1]}>")
    (l1,) = topo.by_description("L1")
    assert repr(l1) == f"<DNode switch 'L1' GUID {l1.guid:#018x}, 8 ports, DR path {','.join(map(str, l1.path))}, " \
                       f"LID {l1.lid()}>"
    assert all(len(repr(n)) < 150 for n in topo.nodes.values())


def test_table_reprs_are_counts(swept):
    lft = swept.lft_show("L1")
    assert repr(lft) == f"<LftTable 'L1' GUID {lft.switch.guid:#018x}: LIDs 0..{lft.top}, {len(lft.routes())} routed>"
    mft = swept.mft_show("L1")
    assert repr(mft) == (f"<MftTable 'L1' GUID {mft.switch.guid:#018x}: MLIDs 0xc000..{mft.last:#x}, "
                         f"{len(mft.groups())} with ports>")
    facts = SwitchFacts(guid=1, name="S", num_ports=4, switch_info=lft.switch.switch_info)
    assert repr(RftTable(facts, lft.target, [])) == "<RftTable 'S' GUID 0x0000000000000001: 0 valid entries>"


def test_read_mfts_gives_ports_per_mlid(swept):
    mfts = swept.read_mfts()
    for sw in swept.topology.switches():
        assert mfts[sw.guid] == swept.mft_show(f"{sw.guid:#018x}").groups()
    assert any(0xC000 in groups for groups in mfts.values())  # the IPoIB group the sweep set up


def test_to_networkx(swept):
    topo = swept.discover()
    g = topo.to_networkx()
    nx = pytest.importorskip("networkx")  # the graph extra; collection needs no extra
    assert isinstance(g, nx.MultiGraph)
    assert set(g.nodes) == set(topo.nodes) and g.number_of_edges() == topo.num_links()
    for (a, pa), (b, pb) in topo.links.items():
        assert any(d["ports"] == {a: pa, b: pb} for d in g.get_edge_data(a, b).values())
    l1 = topo.by_description("L1")[0]
    assert g.nodes[l1.guid]["kind"] == "switch" and g.nodes[l1.guid]["description"] == "L1"
    assert nx.is_connected(g)


def test_to_networkx_without_networkx_says_how_to_get_it(swept, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "networkx", None)  # an import of it fails
    with pytest.raises(ImportError, match=r"pip install 'smagent\[graph\]'"):
        swept.topology.to_networkx()


def test_sweep_and_apply_results_print_short_and_say_ok(tmp_path):
    with smagent.connect("sim", state_dir=tmp_path) as s:
        plan = s.plan()
        assert plan.ok and plan.changes_pending
        assert repr(plan) == (f"<SweepResult plan: 14 nodes, {plan.sets_planned} Sets planned, 0 problems, "
                              f"0 unreachable, ok>")
        a = s.apply({"multicast": [{"mlid": 0xC001, "members": ["H1", "H2"]}]})
        assert a.ok and a.left.sets_planned == 0 and a.left_after_apply == a.left.plan_lines() == []
        assert repr(a) == f"<ApplyResult: {a.result.sets_planned} Sets sent, 0 problems, 0 left to change, ok>"
        assert len(repr(a.result)) < 120 and "Sets sent" in repr(a.result)
