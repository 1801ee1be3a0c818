"""LID-routed SMPs: they travel through the switches' LFTs (and come back to the
requester's LID the same way), so they work only once LIDs and tables are programmed,
and fail, as a timeout at the transport, when a table is wrong."""
import pytest

from sim_program import min_hop_lfts, program
from mad import smp
from mad.attributes import AttrID
from mad.forwarding import PERMISSIVE_LID
from mad.header import Method
from smagent.sim import trace
from smagent.transport.base import Request, SmpTimeout
from smagent.transport.sim import SimTransport


# -- tests ----------------------------------------------------------------------------------
def transport(**kw):
    kw.setdefault("retries", 0)
    kw.setdefault("timeout_ms", 10)
    return SimTransport(None, **kw)


def lid_get(t, dlid, attr=AttrID.NODE_INFO, modifier=0):
    (r,) = t.execute([Request(smp.lid_routed(Method.GET, attr, modifier), dlid=dlid)])
    return r


@pytest.fixture
def programmed():
    t = transport()
    plan = program(t)
    return t, plan


def test_lid_routed_fails_before_tables_are_programmed():
    t = transport()
    r = lid_get(t, 5)
    assert isinstance(r.error, SmpTimeout)
    assert "LinearFDBTop 0" in t.sim.last_drop.reason


def test_every_lid_answers_after_programming(programmed):
    t, plan = programmed
    for (name, port), lid in plan.items():
        r = lid_get(t, lid)
        assert r.ok, (name, port, t.sim.last_drop)
        ni = r.response.attribute()
        node = t.sim.node(name)
        assert ni.node_guid == node.guid and ni.port_guid == node.port_guids[port]
        assert r.response.method == Method.GET_RESP and r.response.mgmt_class == 0x01


def test_lid_routed_to_a_switch_reports_its_ingress_port(programmed):
    t, plan = programmed
    r = lid_get(t, plan[("S1", 0)])
    assert r.response.attribute().local_port_num == 1  # L1 sends LID-routed traffic on to S1 via port 5


def test_wrong_entries_drop_the_smp(programmed):
    t, plan = programmed
    sim = t.sim
    h5 = plan[("H5", 1)]
    lft = sim.lft("L1")
    good = lft[h5]
    lft[h5] = 0xFF
    assert isinstance(lid_get(t, h5).error, SmpTimeout)
    assert "0xFF" in sim.last_drop.reason and sim.last_drop.where[0] == "L1"
    lft[h5] = 2  # towards H2: delivered to the wrong CA, which does not take it
    assert isinstance(lid_get(t, h5).error, SmpTimeout)
    assert sim.last_drop.where == ("H2", 1) and "not a LID of this port" in sim.last_drop.reason
    lft[h5] = 9  # an 8-port switch
    assert isinstance(lid_get(t, h5).error, SmpTimeout) and "does not exist" in sim.last_drop.reason
    lft[h5] = good
    s1 = sim.lft("S1")
    s1[h5] = 1  # back to L1, which sends it to S1 again: a loop
    assert isinstance(lid_get(t, h5).error, SmpTimeout) and "loop" in sim.last_drop.reason
    s1[h5] = 3
    assert lid_get(t, h5).ok


def test_linear_fdb_top_bounds_forwarding(programmed):
    t, plan = programmed
    t.sim.node("L1").si.linear_fdb_top = plan[("H5", 1)] - 1
    assert isinstance(lid_get(t, plan[("H5", 1)]).error, SmpTimeout)
    assert "above LinearFDBTop" in t.sim.last_drop.reason


def test_the_response_needs_a_route_back(programmed):
    t, plan = programmed
    me = plan[("H1", 1)]
    t.sim.lft("L3")[me] = 0xFF  # H5's switch cannot reach the requester any more
    r = lid_get(t, plan[("H5", 1)])
    assert isinstance(r.error, SmpTimeout)
    assert t.sim.last_drop.where[0] == "L3"
    assert lid_get(t, plan[("H3", 1)]).ok  # other destinations are fine


def test_requester_without_lid_gets_no_response(programmed):
    t, plan = programmed
    t.sim.set_lid("H1", 1, 0)
    assert isinstance(lid_get(t, plan[("H5", 1)]).error, SmpTimeout)
    assert "has no LID" in t.sim.last_drop.reason


def test_switch_lid_and_own_lid_and_permissive(programmed):
    t, plan = programmed
    s2 = plan[("S2", 0)]
    t.sim.lft("S2")[s2] = 0xFF  # a switch's own LID needs no LFT entry
    assert lid_get(t, s2).response.attribute().node_guid == t.sim.node("S2").guid
    me = lid_get(t, plan[("H1", 1)])  # loopback to our own SMA
    assert me.response.attribute().local_port_num == 1
    neighbour = lid_get(t, PERMISSIVE_LID)  # the first SMA on the way takes it
    assert neighbour.response.attribute().node_guid == t.sim.node("L1").guid


def test_lmc_range_reaches_the_ca(programmed):
    t, plan = programmed
    base = 0x40
    t.sim.set_lid("H7", 1, base, lmc=2)
    for sw, table in min_hop_lfts(t.sim, {("H7", 1): base}).items():
        for lid in range(base, base + 4):
            t.sim.lft(sw)[lid] = table[base]
        t.sim.node(sw).si.linear_fdb_top = base + 3
    for lid in range(base, base + 4):
        assert lid_get(t, lid).response.attribute().node_guid == t.sim.node("H7").guid
    assert isinstance(lid_get(t, base + 4).error, SmpTimeout)


def test_smps_need_no_active_ports_but_data_does():
    t = transport()
    plan = program(t, activate=False)  # links stay INIT
    h5 = plan[("H5", 1)]
    assert lid_get(t, h5).ok
    data = trace(t.sim, ("H1", 1), h5)
    assert data.outcome == "dropped" and "ACTIVE" in data.reason
    assert trace(t.sim, ("H1", 1), h5, smp=True).dest == ("H5", 1)


def test_lid_routed_set_works_like_directed(programmed):
    t, plan = programmed
    lid = plan[("L4", 0)]
    pi = lid_get(t, lid, AttrID.PORT_INFO, 0).response.attribute()
    pi.port_state = pi.port_physical_state = 0
    pi.subnet_timeout = 17
    (r,) = t.execute([Request(smp.lid_routed(Method.SET, AttrID.PORT_INFO, 0, pi), dlid=lid)])
    assert r.ok and r.response.attribute().subnet_timeout == 17
