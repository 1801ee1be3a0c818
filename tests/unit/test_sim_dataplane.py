"""The data-plane trace against every forwarding and discard rule of the seed text."""
import pytest

from mad.attributes import PortState, RandomForwardingEntry
from mad.forwarding import PERMISSIVE_LID
from smagent.model.fabric import HCA, SWITCH, Fabric
from smagent.sim import SimFabric, trace

#   H1:1 - SA:1   H2:1 - SA:2   SA:3 - SB:3   SA:4 - SB:4   SB:1 - H3:1   SB:2 - H4:1
LIDS = {"SA": 1, "SB": 2, "H1": 11, "H2": 12, "H3": 13, "H4": 14}


def fabric():
    f = Fabric()
    for h in ("H1", "H2", "H3", "H4"):
        f.add_node(name=h, node_type=HCA, num_ports=1)
    for s in ("SA", "SB"):
        f.add_node(name=s, node_type=SWITCH, num_ports=8)
    f.connect("H1", 1, "SA", 1)
    f.connect("H2", 1, "SA", 2)
    f.connect("SA", 3, "SB", 3)
    f.connect("SA", 4, "SB", 4)
    f.connect("SB", 1, "H3", 1)
    f.connect("SB", 2, "H4", 1)
    return f


def make(**kw):
    sim = SimFabric.from_fabric(fabric(), **kw)
    for name, lid in LIDS.items():
        sim.set_lid(name, 0 if sim.node(name).is_switch else 1, lid)
    sim.activate_all()
    return sim


@pytest.fixture
def lft_sim():
    sim = make()
    routes = {"SA": {11: 1, 12: 2, 13: 3, 14: 4, 2: 3}, "SB": {13: 1, 14: 2, 11: 3, 12: 4, 1: 3}}
    for sw, table in routes.items():
        for lid, port in table.items():
            sim.lft(sw)[lid] = port
        sim.node(sw).si.linear_fdb_top = 20
    return sim


# -- LFT ----------------------------------------------------------------------------------------------
def test_unicast_delivered_with_hops(lft_sim):
    t = trace(lft_sim, ("H1", 1), 13)
    assert t.outcome == "delivered" and t.delivered and t.dest == ("H3", 1)
    assert t.hops == [("H1", None, 1), ("SA", 1, 3), ("SB", 3, 1), ("H3", 1, None)]
    assert t.path == ["H1", "SA", "SB", "H3"]
    back = trace(lft_sim, ("H4", 1), 12)  # the other cable between the switches
    assert back.hops == [("H4", None, 1), ("SB", 2, 4), ("SA", 4, 2), ("H2", 1, None)]


def test_from_a_switch_port0(lft_sim):
    t = trace(lft_sim, ("SA", 0), 14)
    assert t.hops == [("SA", None, 4), ("SB", 4, 2), ("H4", 1, None)] and t.dest == ("H4", 1)
    with pytest.raises(ValueError):
        trace(lft_sim, ("SA", 3), 14)


def test_lft_above_linear_fdb_top(lft_sim):
    lft_sim.node("SA").si.linear_fdb_top = 12
    t = trace(lft_sim, ("H1", 1), 13)
    assert t.outcome == "dropped" and t.where == ("SA", 1) and "above LinearFDBTop 12" in t.reason


def test_lft_above_linear_fdb_cap():
    sim = make(linear_fdb_cap=64)
    sim.node("SA").si.linear_fdb_top = 100  # no Set can do this (Top must be below Cap): forced
    t = trace(sim, ("H1", 1), 70)
    assert t.outcome == "dropped" and "above LinearFDBCap 64" in t.reason


def test_lft_no_port_and_nonexistent_port(lft_sim):
    lft_sim.lft("SB")[13] = 0xFF
    t = trace(lft_sim, ("H1", 1), 13)
    assert t.outcome == "dropped" and t.where == ("SB", 3) and "0xFF" in t.reason
    lft_sim.lft("SB")[13] = 9  # an 8-port switch
    t = trace(lft_sim, ("H1", 1), 13)
    assert t.outcome == "dropped" and "port 9, which does not exist" in t.reason


def test_lft_port0_and_own_lid_go_to_the_management_port(lft_sim):
    lft_sim.lft("SB")[13] = 0
    t = trace(lft_sim, ("H1", 1), 13)
    assert t.dest == ("SB", 0) and t.hops[-1] == ("SB", 3, 0)
    lft_sim.lft("SB")[2] = 0xFF  # the switch's own LID needs no entry
    assert trace(lft_sim, ("H1", 1), 2).dest == ("SB", 0)


def test_data_needs_active_ports(lft_sim):
    lft_sim.set_port_state("SB", 1, PortState.ARMED)
    t = trace(lft_sim, ("H1", 1), 13)
    assert t.outcome == "dropped" and t.where == ("SB", 1) and "ARMED" in t.reason
    lft_sim.set_port_state("SB", 1, PortState.ACTIVE)
    lft_sim.set_port_state("H3", 1, PortState.INIT)
    t = trace(lft_sim, ("H1", 1), 13)
    assert t.where == ("H3", 1) and "INIT" in t.reason
    assert trace(lft_sim, ("H1", 1), 13, smp=True).dest == ("H3", 1)  # VL15 passes INIT


def test_unicast_loop(lft_sim):
    lft_sim.lft("SB")[13] = 3  # back to SA, which sends it to SB again
    t = trace(lft_sim, ("H1", 1), 13)
    assert t.outcome == "loop" and len(t.hops) > 60


def test_wrong_ca_and_unlinked_port(lft_sim):
    lft_sim.lft("SB")[13] = 2
    t = trace(lft_sim, ("H1", 1), 13)
    assert t.outcome == "dropped" and t.where == ("H4", 1) and "not a LID" in t.reason
    lft_sim.lft("SB")[13] = 5
    t = trace(lft_sim, ("H1", 1), 13)
    assert t.where == ("SB", 5) and "no link" in t.reason


def test_permissive_lid(lft_sim):
    t = trace(lft_sim, ("H1", 1), PERMISSIVE_LID)
    assert t.outcome == "dropped" and "permissive" in t.reason
    assert trace(lft_sim, ("H1", 1), PERMISSIVE_LID, smp=True).dest == ("SA", 0)


def test_lmc_range_and_loopback(lft_sim):
    lft_sim.set_lid("H3", 1, 16, lmc=2)
    for lid in range(16, 20):
        lft_sim.lft("SA")[lid], lft_sim.lft("SB")[lid] = 3, 1
    assert all(trace(lft_sim, ("H1", 1), lid).dest == ("H3", 1) for lid in range(16, 20))
    assert trace(lft_sim, ("H1", 1), 11).hops == [("H1", None, None)]  # its own LID: loopback


# -- RFT --------------------------------------------------------------------------------------------
E = RandomForwardingEntry


def _set_rft(sim, name, entries):
    node = sim.node(name)
    for i, (base, valid, lmc, port) in enumerate(entries):
        node.rft[i] = int.from_bytes(E.LAYOUT.encode(E(base_lid=base, valid=valid, lmc=lmc, port=port)), "big")
    node.rft_map = None


@pytest.fixture
def rft_sim():
    sim = make(node_caps={"SB": {"linear_fdb_cap": 0, "random_fdb_cap": 32}})
    for lid, port in {11: 1, 12: 2, 13: 3, 14: 4, 2: 3}.items():
        sim.lft("SA")[lid] = port
    sim.node("SA").si.linear_fdb_top = 20
    sim.set_lid("H4", 1, 16, lmc=2)
    _set_rft(sim, "SB", [(13, 1, 0, 1), (17, 1, 2, 2), (14, 0, 0, 2), (5, 1, 0, 0), (6, 1, 0, 12)])
    sim.node("SB").si.default_port = 3
    return sim


def test_rft_match_and_lmc(rft_sim):
    assert trace(rft_sim, ("H1", 1), 13).dest == ("H3", 1)
    for lid in range(16, 20):  # BaseLID 17 with LMC 2 covers 16..19
        rft_sim.lft("SA")[lid] = 3
        assert trace(rft_sim, ("H1", 1), lid).dest == ("H4", 1)


def test_rft_no_match_uses_default_port(rft_sim):
    t = trace(rft_sim, ("H3", 1), 11)  # nothing for LID 11 in SB's RFT: out DefaultPort 3
    assert t.dest == ("H1", 1) and t.hops[1] == ("SB", 1, 3)


def test_rft_no_match_arriving_on_default_port_is_discarded(rft_sim):
    rft_sim.lft("SA")[14] = 3
    t = trace(rft_sim, ("H1", 1), 14)  # the entry for 14 is not Valid; it came in on port 3
    assert t.outcome == "dropped" and t.where == ("SB", 3) and "DefaultPort 3" in t.reason


def test_rft_nonexistent_default_and_entry_ports(rft_sim):
    rft_sim.node("SB").si.default_port = 20
    t = trace(rft_sim, ("H3", 1), 11)
    assert t.outcome == "dropped" and "DefaultPort 20 does not exist" in t.reason
    rft_sim.lft("SA")[6] = 3
    t = trace(rft_sim, ("H1", 1), 6)
    assert t.outcome == "dropped" and "port 12, which does not exist" in t.reason


def test_rft_port0_and_permissive(rft_sim):
    rft_sim.lft("SA")[5] = 3
    assert trace(rft_sim, ("H1", 1), 5).dest == ("SB", 0)  # entry with exit port 0
    assert trace(rft_sim, ("H1", 1), 2).dest == ("SB", 0)  # SB's own LID
    assert trace(rft_sim, ("H3", 1), PERMISSIVE_LID, smp=True).dest == ("SB", 0)
    assert trace(rft_sim, ("H3", 1), PERMISSIVE_LID).outcome == "dropped"


# -- MFT --------------------------------------------------------------------------------------------
def _mask(*ports):
    return sum(1 << p for p in ports)


@pytest.fixture
def mft_sim():
    sim = make()
    sim.node("SA").mft[0] = _mask(1, 2, 3)
    sim.node("SB").mft[0] = _mask(1, 3)
    for sw, primary, other in (("SA", 3, 4), ("SB", 3, 1)):
        si = sim.node(sw).si
        si.default_multicast_primary_port, si.default_multicast_not_primary_port = primary, other
    return sim


def test_mft_mask_never_echoes_ingress(mft_sim):
    t = trace(mft_sim, ("H1", 1), 0xC000)
    assert t.outcome == "delivered" and t.dest == {("H2", 1), ("H3", 1)}
    assert ("SA", 1, 1) not in t.hops and ("SB", 3, 3) not in t.hops
    t = trace(mft_sim, ("H3", 1), 0xC000)  # SB: mask {1,3} minus 1 -> 3; SA from 3: {1,2}
    assert t.dest == {("H1", 1), ("H2", 1)}


def test_mft_zero_entry_uses_default_primary_then_not_primary(mft_sim):
    t = trace(mft_sim, ("H1", 1), 0xC001)
    # SA: came in on 1, not the primary 3 -> out 3. SB: came in on its primary 3 -> NotPrimary 1.
    assert t.hops == [("H1", None, 1), ("SA", 1, 3), ("SB", 3, 1), ("H3", 1, None)]
    assert t.dest == {("H3", 1)}


def test_mft_above_cap_and_above_top_use_defaults():
    sim = make(multicast_fdb_cap=32)
    for sw in ("SA", "SB"):
        si = sim.node(sw).si
        si.default_multicast_primary_port = si.default_multicast_not_primary_port = 0
    assert trace(sim, ("H1", 1), 0xC000 + 40).dest == {("SA", 0)}  # beyond the 32-entry table
    sim.node("SA").mft[2] = _mask(2)
    assert trace(sim, ("H1", 1), 0xC002).dest == {("H2", 1)}
    sim.node("SA").si.multicast_fdb_top = 0xC001  # now 0xC002 is above the table's top
    assert trace(sim, ("H1", 1), 0xC002).dest == {("SA", 0)}


def test_mft_nonexistent_default_port_discards(mft_sim):
    mft_sim.node("SA").si.default_multicast_primary_port = 20
    t = trace(mft_sim, ("H1", 1), 0xC001)
    assert t.outcome == "dropped" and "DefaultMulticastPrimaryPort 20 does not exist" in t.reason
    mft_sim.node("SA").si.default_multicast_primary_port = 3
    mft_sim.node("SB").si.default_multicast_not_primary_port = 30
    t = trace(mft_sim, ("H1", 1), 0xC001)
    assert t.outcome == "dropped" and "DefaultMulticastNotPrimaryPort 30" in t.reason


def test_mft_port0_nonexistent_bits_and_inactive_branch(mft_sim):
    mft_sim.node("SA").mft[5] = _mask(0, 2, 3, 10)  # port 10 does not exist on an 8-port switch
    mft_sim.node("SB").mft[5] = _mask(1, 2)
    mft_sim.set_port_state("SB", 2, PortState.INIT)
    t = trace(mft_sim, ("H1", 1), 0xC005)
    assert t.outcome == "delivered" and t.dest == {("SA", 0), ("H2", 1), ("H3", 1)}
    assert len(t.drops) == 1 and t.drops[0][1] == ("SB", 2)


def test_mft_loop(mft_sim):
    mft_sim.node("SA").mft[3] = _mask(3, 4)
    mft_sim.node("SB").mft[3] = _mask(3, 4)
    t = trace(mft_sim, ("H1", 1), 0xC003)
    assert t.outcome == "loop"


def test_multicast_forced_off_uses_unicast_rules(mft_sim):
    mft_sim.node("SA").si.linear_fdb_top = 100
    t = trace(mft_sim, ("H1", 1), 0xC000, multicast=False)
    assert t.outcome == "dropped" and "LinearFDBTop" in t.reason


def test_all_pairs_on_the_default_fabric():
    from sim_program import program
    from smagent.transport.sim import SimTransport

    t = SimTransport(None)
    plan = program(t)
    cas = [k for k in plan if not t.sim.node(k[0]).is_switch]
    for src in cas:
        for dst in cas:
            tr = trace(t.sim, src, plan[dst])
            assert tr.dest == dst, (src, dst, tr)
