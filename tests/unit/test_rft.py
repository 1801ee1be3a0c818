"""Random Forwarding Tables: entries from routes (BaseLID/LMC cover, LIDsPerPort, DefaultPort
as in the seed's chassis example), placement and write order, and on the in-process
simulator (RFT-only switches) the data-plane trace delivering every CA pair and
discarding what the seed says must be discarded. ibsim has no RFT switch (RandomFDBCap 0,
and it never answers RandomForwardingTable), so the simulator is the witness here."""
import json

import pytest

from fabrics import RFT_CAPS, chassis_fabric
from mad.attributes import SwitchInfo
from mad import forwarding as fw
from smagent.model import netfile
from smagent import sweep
from smagent.fdb import rft
from smagent.model.fabric import HCA, SWITCH, Fabric
from smagent.fdb.rft import Entry, RftError
from smagent.sim import trace
from smagent.transport.sim import SimTransport


def si(cap=32, lpp=1, default=0):
    return SwitchInfo(linear_fdb_cap=0, random_fdb_cap=cap, multicast_fdb_cap=0, linear_fdb_top=0,
                          default_port=default, default_multicast_primary_port=0,
                          default_multicast_not_primary_port=0, life_time_value=0, port_state_change=0,
                          optimized_sl_to_vl_mapping_programming=0, lids_per_port=lpp, partition_enforcement_cap=0,
                          inbound_enforcement_cap=0, outbound_enforcement_cap=0, filter_raw_inbound_cap=0,
                          filter_raw_outbound_cap=0, enhanced_port0=0, multicast_fdb_top=0)


def sets(t) -> int:
    return sum(v for k, v in t.stats.by_kind.items() if k.startswith("SubnSet("))


def two_uplink_fabric(lpp: int) -> Fabric:
    """RFT switch A (H on 1, X on 2) with two switches behind it: B on port 3 (CAs B1, B2),
    C on port 4 (CAs C1, C2); B and C have LFTs. A uses two uplinks: no DefaultPort."""
    f = Fabric()
    f.add_node(name="H", node_type=HCA, num_ports=1)
    for s in "ABC":
        f.add_node(name=s, node_type=SWITCH, num_ports=8)
    f.add_node(name="X", node_type=HCA, num_ports=1)
    f.connect("H", 1, "A", 1)
    f.connect("X", 1, "A", 2)
    f.connect("A", 3, "B", 1)
    f.connect("A", 4, "C", 1)
    for s in "BC":
        for i in (1, 2):
            f.add_node(name=f"{s}{i}", node_type=HCA, num_ports=1)
            f.connect(f"{s}{i}", 1, s, 1 + i)
    f.node("A").caps.update(RFT_CAPS, lids_per_port=lpp)
    return f


def all_pairs_delivered(sim):
    cas = [(n.name, 1) for n in sim if not n.is_switch]
    for a in cas:
        for b in cas:
            if a == b:
                continue
            lo, hi = sim.node(b[0]).lid_range(1)
            assert hi >= lo
            for lid in range(lo, hi + 1):
                t = trace(sim, a, lid)
                assert t.delivered and t.dest == b, (a, b, lid, t)


def entries_per_port(node) -> dict[int, int]:
    out = {}
    for x in node.rft:
        e = fw.rft_unpack(x)
        if e is not None:
            out[e[2]] = out.get(e[2], 0) + 1
    return out


# -- planning, pure -------------------------------------------------------------------------
def test_cover_aligned_ranges():
    assert rft.cover({}) == []
    assert rft.cover({4: 1, 5: 1, 6: 1, 7: 1}) == [Entry(4, 2, 1)]  # one port's LMC-2 range: one entry
    assert rft.cover({1: 2, 2: 2, 3: 2}) == [Entry(1, 0, 2), Entry(2, 1, 2)]
    assert rft.cover({4: 1, 5: 2, 6: 1, 7: 1}) == [Entry(4, 0, 1), Entry(5, 0, 2), Entry(6, 1, 1)]
    big = {lid: 3 for lid in range(0, 300)}
    del big[0]
    got = rft.cover(big)
    assert max(e.lmc for e in got) == 7  # never more than 128 LIDs per entry
    assert sorted(lid for e in got for lid in e.lids()) == list(range(1, 300))


def test_chassis_default_port_and_omitted_entries():
    # switch LID 3 (port 0), TCAs 5..10 on ports 1..6, the rest via port 8
    routes = {1: 8, 2: 8, 3: 0, 4: 8, **{4 + i: i for i in range(1, 7)}}
    p = rft.plan_switch(1, "C", routes, {8}, si())
    assert p.default_port == 8 and p.omitted == 3
    assert p.entries == [Entry(3, 0, 0)] + [Entry(4 + i, 0, i) for i in range(1, 7)]


def test_several_uplinks_no_default_every_lid_an_entry():
    routes = {1: 1, 2: 0, 3: 3, 4: 4, 5: 3}
    p = rft.plan_switch(1, "A", routes, {3, 4}, si(lpp=2))
    assert p.default_port is None and p.omitted == 0
    assert sorted(lid for e in p.entries for lid in e.lids()) == [1, 2, 3, 4, 5]


def test_lids_per_port_exceeded_names_switch_and_port():
    routes = {1: 1, 2: 0, 3: 3, 4: 4, 5: 3}
    with pytest.raises(RftError, match=r"switch A \(0x0000000000000001\): port 3 needs 2 RFT entries .* "
                                       r"LIDsPerPort is 1"):
        rft.plan_switch(1, "A", routes, {3, 4}, si(lpp=1))
    # port 0 is exempt; 0 = no limit
    p = rft.plan_switch(1, "A", {1: 0, 3: 0, 5: 0}, set(), si(lpp=1))
    assert len(p.entries) == 3
    assert len(rft.plan_switch(1, "A", routes, {3, 4}, si(lpp=0)).entries) == 5


def test_random_fdb_cap_exceeded():
    with pytest.raises(RftError, match="need 3 RFT entries, RandomFDBCap is 2"):
        rft.plan_switch(1, "A", {1: 1, 3: 2, 5: 0}, set(), si(cap=2, lpp=0))


def test_place_keeps_slots_and_fills_lowest_free():
    keep, gone = Entry(8, 0, 2), Entry(9, 0, 5)
    current = [0] * 32
    current[3], current[17] = keep.packed(), gone.packed()
    current[4] = 0x12340005  # an invalid entry with junk: free
    new = rft.place([keep, Entry(1, 0, 1), Entry(2, 1, 4)], current, 20)
    assert new[3] == keep.packed() and new[0] == Entry(1, 0, 1).packed() and new[1] == Entry(2, 1, 4).packed()
    assert sum(1 for x in new if x) == 3
    # entries never go at or above the cap
    with pytest.raises(StopIteration):
        rft.place([Entry(i, 0, 1) for i in range(1, 4)], [0] * 16, 2)


def test_changes_two_phase_when_lids_per_port_would_overflow():
    current = [0] * 32
    current[16] = Entry(5, 0, 3).packed()
    plan = rft.RftPlan(1, "A", [Entry(8, 0, 3)], None)
    ch = rft.changes(plan, (0, 1), current, si(lpp=1))
    assert [(c.block, c.phase) for c in ch] == [(0, 2), (1, 1)]  # block 1 cleared (phase 1) first
    assert ch[1].new == [0] * 16 and ch[0].new[0] == Entry(8, 0, 3).packed()
    # without the limit: one pass
    ch = rft.changes(plan, (0, 1), current, si(lpp=0))
    assert [(c.block, c.phase) for c in ch] == [(0, 2), (1, 2)]
    # nothing to do
    assert rft.changes(rft.RftPlan(1, "A", [Entry(5, 0, 3)], None), (0, 1), current, si()) == []


def test_rft_change_describe():
    c = rft.RftChange(1, "C", (0, 1), 0, [0] * 16, [Entry(5, 0, 1).packed()] + [0] * 15)
    assert c.describe() == "C block 0: entry 0: invalid -> lid 5/lmc 0 port 1"


# -- on the simulator -----------------------------------------------------------------------
@pytest.mark.parametrize("lmc", [0, 2])
def test_chassis_on_sim(lmc):
    t = SimTransport(topology=chassis_fabric())
    sim = t.sim
    dry = sweep.sweep(t, sweep.SweepOptions(lmc=lmc, dry_run=True))
    assert sets(t) == 0
    assert any(x.startswith("SubnSet(RandomForwardingTable) C block 0: ") for x in dry.plan_lines())
    assert any(x.startswith("SubnSet(SwitchInfo) C: default_port 0 -> 8") for x in dry.plan_lines())
    r = sweep.sweep(t, sweep.SweepOptions(lmc=lmc))
    assert r.problems == []
    assert r.summary()["sets"]["rft_blocks"] == 2 and r.summary()["sets"]["lft_blocks"] == 0
    c, f = sim.node("C"), sim.node("F")
    # DefaultPort as planned: the one port to the fabric
    assert c.si.default_port == 8 and f.si.default_port == 1
    # one entry per TCA (its whole LMC range), one for port 0, none for the default port
    assert entries_per_port(c) == {0: 1, **{p: 1 for p in range(1, 7)}}
    assert entries_per_port(f) == {0: 1, 2: 1, 3: 1}
    for node in (c, f):
        assert all(k <= node.si.lids_per_port for p, k in entries_per_port(node).items() if p)
    all_pairs_delivered(sim)
    # the seed's discard rules: a DLID that matches no entry...
    unknown = 200
    t1 = trace(sim, ("T1", 1), unknown)  # ...from a TCA goes out DefaultPort into the fabric,
    assert t1.outcome == "dropped" and t1.path == ["T1", "C", "F"]
    assert t1.hops[1] == ("C", 1, 8)
    assert "came in on DefaultPort 1" in t1.reason and t1.where == ("F", 1)  # where F discards it
    t2 = trace(sim, ("H1", 1), unknown)  # ...arriving on C's DefaultPort is discarded
    assert t2.outcome == "dropped" and t2.where == ("C", 8) and "came in on DefaultPort 8" in t2.reason
    # the multicast group works through RFT switches too
    mt = trace(sim, ("T3", 1), 0xC000, multicast=True)
    assert mt.delivered and len(mt.dest) == 7
    before = sets(t)
    again = sweep.sweep(t, sweep.SweepOptions(lmc=lmc))
    assert sets(t) == before, "a second sweep sends no Set"
    assert again.summary()["sets"]["rft_blocks"] == 0


def test_reroute_clears_stale_entries_and_respects_lids_per_port():
    t = SimTransport(topology=chassis_fabric())
    sim = t.sim
    sweep.sweep(t, sweep.SweepOptions(lmc=0))
    c = sim.node("C")
    # move T1 from C port 1 to C port 7: its LID stays, its entry must move
    sim.unlink("T1", 1)
    sim.link("T1", 1, "C", 7)
    r = sweep.sweep(t, sweep.SweepOptions(lmc=0))
    assert r.problems == []
    per = entries_per_port(c)
    assert 1 not in per and per[7] == 1
    all_pairs_delivered(sim)


@pytest.mark.parametrize("lpp", [2, 0])
def test_two_uplinks_every_lid_an_entry(lpp):
    t = SimTransport(topology=two_uplink_fabric(lpp))
    r = sweep.sweep(t, sweep.SweepOptions())
    assert r.problems == []
    a = t.sim.node("A")
    assert a.si.default_port == 0  # as read: several uplinks
    assert r.summary()["rft"] == [{"switch": "A", "entries": len([x for x in a.rft if x]), "default_port": None,
                                   "lids_to_default_port": 0}]
    if lpp:
        assert all(k <= lpp for p, k in entries_per_port(a).items() if p)
    all_pairs_delivered(t.sim)
    before = sets(t)
    sweep.sweep(t, sweep.SweepOptions())
    assert sets(t) == before


def test_two_uplinks_lids_per_port_1_is_a_clear_error():
    t = SimTransport(topology=two_uplink_fabric(1))
    with pytest.raises(sweep.SweepError, match=r"switch A .*: port [34] needs 2 RFT entries .*LIDsPerPort is 1; "
                                               r"nothing was sent"):
        sweep.sweep(t, sweep.SweepOptions())
    assert sets(t) == 0


def test_cli_net_file_caps(cli, tmp_path):
    net = tmp_path / "chassis.net"
    net.write_text(netfile.dumps(chassis_fabric()))
    assert "# smagent: cap random_fdb_cap=32" in net.read_text()
    run = lambda *a: cli("--transport", "sim", "--topology", net, *a)
    r = run("sweep", "--dry-run", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["sets"]["rft_blocks"] == 2 and doc["sets"]["lft_blocks"] == 0
    assert {x["switch"]: x["default_port"] for x in doc["rft"]} == {"C": 8, "F": 1}
    assert any(x["table"] == "RFT" and (x["switch"], x["block"], x["entry"]) == ("C", 0, 0) and x["old"] == 0
               and x["new"] for x in doc["plan"]), doc["plan"]
    r = run("sweep")
    assert r.exit_code == 0 and "RFT blocks 2" in r.output, r.output
    bad = tmp_path / "bad.net"
    bad.write_text(netfile.dumps(two_uplink_fabric(1)))
    r = cli("--transport", "sim", "--topology", bad, "sweep")
    assert r.exit_code == 3 and "LIDsPerPort is 1" in r.output


@pytest.mark.parametrize("lmc", [0, 2])
def test_verify_follows_rfts(lmc):
    """verify reads the RFTs and DefaultPorts and forwards by them: the swept chassis is
    clean (verify used to report every pair unreachable: it only knew LFTs), and a
    damaged entry or DefaultPort shows up where the simulator drops the packets."""
    from smagent import verify
    t = SimTransport(topology=chassis_fabric())
    sim = t.sim
    assert sweep.sweep(t, sweep.SweepOptions(lmc=lmc)).problems == []
    rep = verify.verify(t)
    assert rep.ok, rep.texts
    # 8 CA ports and 2 switches; every source to every LID but its own
    lids = 8 * (1 << lmc) + 2
    assert rep.summary["sources"] == 10 and rep.summary["pairs"] == 10 * lids - lids
    # F's DefaultPort to C gone: what F does not hold an entry for (C's TCAs, C) is discarded at F
    f = sim.node("F")
    f.si.default_port = 9  # F has 8 ports
    rep = verify.verify(t)
    assert set(rep.defects) == {"dead_end", "unreachable"}
    assert {e["switch"] for e in rep.defects["dead_end"]["examples"]} == {"F"}
    assert rep.defects["unreachable"]["by_cause"] == {"rft_no_default": 3 * (6 * (1 << lmc) + 1)}  # H1, H2, F
    t1 = sim.node("T1").lid_range(1)[0]
    tr = trace(sim, ("H1", 1), t1)
    assert tr.outcome == "dropped" and tr.where[0] == "F" and "DefaultPort 9 does not exist" in tr.reason
    # F's DefaultPort restored, C's entry for T1 invalidated: T1's LIDs now match nothing
    # anywhere; from C's side they leave by DefaultPort to F, which drops them as they came
    # in on its DefaultPort; from F's side likewise at C
    f.si.default_port = 1
    c = sim.node("C")
    c.rft[:] = [x if (fw.rft_unpack(x) or (0, 0, 0))[2] != 1 else 0 for x in c.rft]
    c.rft_map = None
    rep = verify.verify(t, examples=50)
    causes = rep.defects["unreachable"]["by_cause"]
    assert set(causes) == {"rft_default_in"}
    ex = rep.defects["dead_end"]["examples"]
    assert rep.defects["dead_end"]["count"] == 2 << lmc
    assert {e["switch"] for e in ex} == {"C", "F"} and {e["lid"] for e in ex} == set(range(t1, t1 + (1 << lmc)))
    # every source but T1 itself: 9 sources per LID of T1
    assert causes["rft_default_in"] == 9 * (1 << lmc)
    tr = trace(sim, ("T2", 1), t1)
    assert tr.outcome == "dropped" and tr.where == ("F", 1) and "came in on DefaultPort" in tr.reason


def test_verify_reports_overlapping_rft_entries():
    """Two valid entries matching one LID with different ports: the spec does not say
    which wins; verify (like the simulator) follows the first and reports the pair."""
    from smagent import verify
    t = SimTransport(topology=chassis_fabric())
    sim = t.sim
    assert sweep.sweep(t, sweep.SweepOptions()).problems == []
    c = sim.node("C")
    t1 = sim.node("T1").lid_range(1)[0]
    free = c.rft.index(0)
    c.rft[free] = fw.rft_pack(t1, 0, 2)  # after T1's own entry: loses, but overlaps
    c.rft_map = None
    rep = verify.verify(t)
    assert set(rep.defects) == {"rft_overlap"}, rep.texts
    (ex,) = rep.defects["rft_overlap"]["examples"]
    assert ex["switch"] == "C" and ex["lid"] == t1 and ex["entries"][1] == [t1, 0, 2]
    assert trace(sim, ("T3", 1), t1).dest == ("T1", 1)  # the simulator, too, follows the first


@pytest.mark.parametrize("lmc", [0, 2])
def test_black_hole_entries_of_an_rft(lmc):
    """`verify.black_hole_entries` (the plan check's absolute rule) reads RFT entries too:
    C's entry for T1 moved to port 7 (no cable there) is a hole for each LID it covers."""
    from smagent import verify
    t = SimTransport(topology=chassis_fabric())
    sim = t.sim
    assert sweep.sweep(t, sweep.SweepOptions(lmc=lmc)).problems == []
    assert verify.black_hole_entries(verify.collect(t, mcast=False, links=False)) == []
    c = sim.node("C")
    moved = []
    for i, x in enumerate(c.rft):
        e = fw.rft_unpack(x)
        if e is not None and e[2] == 1:
            c.rft[i] = fw.rft_pack(e[0], e[1], 7)
            moved.append(e)
    c.rft_map = None
    assert len(moved) == 1
    covered = fw.rft_lid_range(moved[0][0], moved[0][1])  # an aligned range: T1's LIDs and maybe more
    assert set(sim.node("T1").lid_range(1)) <= set(covered)
    holes = verify.black_hole_entries(verify.collect(t, mcast=False, links=False))
    assert holes == [{"switch": "C", "lid": lid, "port": 7, "cause": "unlinked_port"} for lid in covered]
