"""The simulated SMA: every attribute's Get and Set, every status code, PortInfo state
transitions, M_Key protection, capabilities and GUIDs."""
import pathlib

import pytest

from mad import smp
from mad.attributes import (
    CAP_IS_SM, AttrID, LinearForwardingTable, MulticastForwardingTable, NodeType, P_KeyTable, PortState,
    RandomForwardingEntry, SLtoVLMappingTable, SMInfo, SMState,
)
from mad.forwarding import rft_block_entries as rft_entries, rft_block_of as rft_block
from mad.forwarding import mft_modifier, pkey_modifier, portinfo_modifier, sl2vl_modifier
from mad.header import Method
from smagent.model.fabric import HCA, SWITCH, Fabric
from smagent.sim import SimConfigError, SimFabric
from smagent.transport.base import Request, SmpTimeout
from smagent.transport.sim import SimTransport

VECTORS = pathlib.Path(__file__).parents[1] / "vectors"
TWO_SW = VECTORS / "ibsim-2sw4hca.net"  # SM on Switch1 port 0; Hca1 at 0,1; Switch2 at 0,3
GET, SET = Method.GET, Method.SET
OK, BAD_VERSION, BAD_METHOD, BAD_ATTR, BAD_VALUE = 0x0000, 0x0004, 0x0008, 0x000C, 0x001C


def transport(topology=TWO_SW, **kw):
    kw.setdefault("retries", 0)
    kw.setdefault("timeout_ms", 10)
    return SimTransport(topology, **kw)


def ask(t, method, attr, path="0", modifier=0, value=None, **kw):
    """One DR SMP; returns the Reply (the response may carry an error status)."""
    (reply,) = t.execute([Request(smp.dr(method, attr, path, modifier, value, **kw))])
    return reply


def status(reply) -> int:
    assert reply.response is not None, reply.error
    assert reply.response.d == 1
    return reply.response.status


def value(reply):
    assert status(reply) == OK, reply.error
    return reply.response.attribute()


def portinfo(t, path, port):
    return value(ask(t, GET, AttrID.PORT_INFO, path, portinfo_modifier(port)))


def set_portinfo(t, path, port, **changes):
    """Read-modify-write, as an SM does."""
    pi = portinfo(t, path, port)
    pi.port_state = 0
    pi.port_physical_state = 0
    for k, v in changes.items():
        setattr(pi, k, v)
    return ask(t, SET, AttrID.PORT_INFO, path, portinfo_modifier(port), pi)


# -- NodeInfo / NodeDescription ----------------------------------------------------------------
def test_nodeinfo_switch_and_ca():
    t = transport()
    sw = value(ask(t, GET, AttrID.NODE_INFO, "0"))
    assert (sw.node_type, sw.num_ports, sw.node_guid, sw.port_guid, sw.local_port_num) == \
           (NodeType.SWITCH, 8, 0x200000, 0x200000, 0)
    ca = value(ask(t, GET, AttrID.NODE_INFO, "0,1"))
    assert (ca.node_type, ca.num_ports, ca.node_guid, ca.port_guid, ca.local_port_num) == \
           (NodeType.CA, 2, 0x100000, 0x100001, 1)
    assert (ca.base_version, ca.class_version, ca.partition_cap, ca.revision) == (1, 1, 64, 0xA1)


def test_nodeinfo_reports_the_port_the_smp_entered():
    # Default fabric: H1 port 2 hangs off L2 port 3; reach it the long way round.
    t = transport(None)
    n = value(ask(t, GET, AttrID.NODE_INFO, "0,1,5,2,3"))
    assert (n.local_port_num, n.port_guid, n.node_guid) == (2, n.node_guid + 2, 0x100000)
    sw = value(ask(t, GET, AttrID.NODE_INFO, "0,1,5"))  # S1, entered on its port 1
    assert sw.local_port_num == 1 and sw.port_guid == sw.node_guid


def test_nodeinfo_and_nodedescription_are_read_only():
    t = transport()
    assert status(ask(t, SET, AttrID.NODE_INFO, "0")) == BAD_ATTR
    assert status(ask(t, SET, AttrID.NODE_DESCRIPTION, "0")) == BAD_ATTR
    assert status(ask(t, GET, AttrID.NODE_INFO, "0", 1)) == BAD_VALUE
    assert value(ask(t, GET, AttrID.NODE_DESCRIPTION, "0,3")).node_string == "Switch2"


def test_error_responses_carry_zero_data_as_ibsim():
    r = ask(transport(), GET, AttrID.SWITCH_INFO, "0,1")
    assert status(r) == BAD_ATTR and r.response.data == bytes(64) and r.response.status_word == 0x800C


# -- methods, versions, unknown attributes -------------------------------------------------------
def test_unsupported_method_status_0x0008():
    t = transport()
    assert status(ask(t, Method.SEND, AttrID.NODE_INFO, "0")) == BAD_METHOD
    assert status(ask(t, 0x06, AttrID.NODE_INFO, "0,1")) == BAD_METHOD


def test_unknown_attribute_status_0x000c():
    t = transport()
    for attr in (0x0030, AttrID.NOTICE, 0xFF00):
        assert status(ask(t, GET, attr, "0")) == BAD_ATTR


def test_bad_class_version_status_0x0004():
    t = transport()
    req = smp.dr(GET, AttrID.NODE_INFO, "0")
    req.class_version = 2
    (r,) = t.execute([Request(req)])
    assert status(r) == BAD_VERSION


def test_responses_and_trap_repress_get_no_answer():
    t = transport()
    for method in (Method.GET_RESP, Method.TRAP_REPRESS):
        r = ask(t, method, AttrID.NODE_INFO, "0")
        assert isinstance(r.error, SmpTimeout)
    assert "TrapRepress" in t.sim.last_drop.reason


# -- PortInfo ------------------------------------------------------------------------------------
def test_portinfo_switch_ports_read_through_port0():
    t = transport()
    p0 = portinfo(t, "0", 0)
    assert (p0.port_state, p0.port_physical_state) == (PortState.ACTIVE, 5)
    assert p0.capability_mask == 0xC048 | CAP_IS_SM  # ibsim's mask, plus IsSM: our SM sits here
    p3 = portinfo(t, "0", 3)  # cabled to Switch2: link up, INIT
    assert (p3.port_state, p3.port_physical_state, p3.local_port_num) == (PortState.INIT, 5, 0)
    p4 = portinfo(t, "0", 4)  # no cable: DOWN, Polling
    assert (p4.port_state, p4.port_physical_state) == (PortState.DOWN, 2)
    assert status(ask(t, GET, AttrID.PORT_INFO, "0", 9)) == BAD_VALUE  # 8-port switch
    assert status(ask(t, GET, AttrID.PORT_INFO, "0", 0x100)) == BAD_VALUE  # reserved bits


def test_portinfo_ca_port0_means_the_receiving_port():
    t = transport()
    assert portinfo(t, "0,1", 0).local_port_num == 1
    p2 = portinfo(t, "0,1", 2)  # Hca1 port 2 has no cable
    assert p2.port_state == PortState.DOWN and p2.local_port_num == 1
    assert status(ask(t, GET, AttrID.PORT_INFO, "0,1", 3)) == BAD_VALUE


def test_portinfo_extended_speeds_modifier():
    t = transport()
    r = ask(t, GET, AttrID.PORT_INFO, "0,1", portinfo_modifier(1, extended_speeds=True))
    assert status(r) == OK and type(r.response.attribute()).__name__ == "PortInfoExtSpeeds"


def test_portinfo_set_lid_lmc_smlid_on_ca_and_switch():
    t = transport()
    r = set_portinfo(t, "0,1", 1, lid=0x10, lmc=2, master_sm_lid=1, subnet_timeout=18)
    pi = value(r)
    assert (pi.lid, pi.lmc, pi.master_sm_lid, pi.subnet_timeout) == (0x10, 2, 1, 18)
    assert t.sim.node("Hca1").lid_range(1) == (0x10, 0x13)
    sw = value(set_portinfo(t, "0", 0, lid=1, lmc=3))
    assert (sw.lid, sw.lmc) == (1, 0)  # base switch port 0 has no LMC
    # LID & co. exist on switch port 0 only: a Set on port 3 leaves them alone.
    p3 = value(set_portinfo(t, "0", 3, lid=77))
    assert p3.lid == 0


@pytest.mark.parametrize("field,val", [("lid", 0xC000), ("lid", 0xFFFF), ("master_sm_lid", 0xC001),
                                       ("neighbor_mtu", 6), ("neighbor_mtu", 0), ("operational_vls", 5),
                                       ("link_width_enabled", 0x20), ("link_down_default_state", 3),
                                       ("port_physical_state", 4)])
def test_portinfo_set_invalid_values_0x001c_and_nothing_changes(field, val):
    t = transport()
    r = set_portinfo(t, "0,1", 1, **{"subnet_timeout": 5, field: val})
    assert status(r) == BAD_VALUE
    assert portinfo(t, "0,1", 1).subnet_timeout == 31  # the valid part of the Set was not applied either


def test_port_state_legal_transitions():
    t = transport()
    assert value(set_portinfo(t, "0,1", 1, port_state=PortState.ARMED)).port_state == PortState.ARMED
    assert value(set_portinfo(t, "0,1", 1, port_state=PortState.ARMED)).port_state == PortState.ARMED
    assert value(set_portinfo(t, "0,1", 1, port_state=PortState.ACTIVE)).port_state == PortState.ACTIVE
    assert value(set_portinfo(t, "0,1", 1, port_state=0)).port_state == PortState.ACTIVE  # NoChange
    assert value(set_portinfo(t, "0,1", 1, port_state=PortState.ACTIVE)).port_state == PortState.ACTIVE


@pytest.mark.parametrize("start,want", [
    (PortState.INIT, PortState.ACTIVE),  # must pass through ARMED
    (PortState.ACTIVE, PortState.ARMED),
    (PortState.INIT, PortState.INIT),  # not a value an SM sets
    (PortState.INIT, 5),
])
def test_port_state_illegal_transitions(start, want):
    t = transport()
    t.sim.set_port_state("Hca1", 1, start)
    assert status(set_portinfo(t, "0,1", 1, port_state=want)) == BAD_VALUE
    assert t.sim.node("Hca1").state[1] == start


def test_port_state_down_from_any_retrains_to_init():
    t = transport()
    for s in (PortState.ARMED, PortState.ACTIVE):
        t.sim.set_port_state("Switch1", 3, s)
        t.sim.set_port_state("Switch2", 3, s)
        pi = value(set_portinfo(t, "0", 3, port_state=PortState.DOWN))
        assert pi.port_state == PortState.DOWN  # what the Set did ...
        # ... then the link retrained: both ends are back in INIT.
        assert t.sim.node("Switch1").state[3] == t.sim.node("Switch2").state[3] == PortState.INIT


def test_port_state_on_unlinked_port_and_switch_port0():
    t = transport()
    assert status(set_portinfo(t, "0", 4, port_state=PortState.ARMED)) == BAD_VALUE  # DOWN port
    assert status(set_portinfo(t, "0", 4, port_state=PortState.DOWN)) == OK
    assert status(set_portinfo(t, "0", 0, port_state=PortState.DOWN)) == BAD_VALUE  # no link
    assert status(set_portinfo(t, "0", 0, port_state=PortState.ACTIVE)) == OK  # already Active


def test_port_physical_state_disable_and_enable():
    t = transport()
    pi = value(set_portinfo(t, "0", 3, port_physical_state=3))  # Disabled
    assert (pi.port_state, pi.port_physical_state) == (PortState.DOWN, 3)
    assert t.sim.node("Switch2").state[3] == PortState.DOWN
    assert isinstance(ask(t, GET, AttrID.NODE_INFO, "0,3").error, SmpTimeout)
    assert value(ask(t, GET, AttrID.NODE_INFO, "0,5")).node_guid == 0x200001  # the other cable
    pi = value(set_portinfo(t, "0", 3, port_physical_state=2))  # Polling: enable, link retrains
    assert (pi.port_state, pi.port_physical_state) == (PortState.INIT, 5)
    assert value(ask(t, GET, AttrID.NODE_INFO, "0,3")).node_guid == 0x200001


def test_capability_mask_issm_on_the_sm_port():
    t = transport()  # the transport attaches its SM to Switch1 port 0
    assert portinfo(t, "0", 0).capability_mask & CAP_IS_SM
    assert not portinfo(t, "0,3", 0).capability_mask & CAP_IS_SM


# -- SwitchInfo -----------------------------------------------------------------------------------
def test_switchinfo_defaults_are_ibsims():
    si = value(ask(transport(), GET, AttrID.SWITCH_INFO, "0,3"))
    assert (si.linear_fdb_cap, si.random_fdb_cap, si.multicast_fdb_cap, si.linear_fdb_top) == (30720, 0, 1024, 0)
    assert (si.port_state_change, si.partition_enforcement_cap, si.filter_raw_inbound_cap) == (1, 64, 1)


def test_switchinfo_set():
    t = transport()
    si = value(ask(t, GET, AttrID.SWITCH_INFO, "0"))
    si.linear_fdb_top, si.default_port, si.life_time_value = 127, 3, 18
    si.default_multicast_primary_port, si.default_multicast_not_primary_port = 5, 3
    si.port_state_change = 0  # writing 0 leaves it set
    si.linear_fdb_cap = 5  # read-only: ignored
    got = value(ask(t, SET, AttrID.SWITCH_INFO, "0", 0, si))
    assert (got.linear_fdb_top, got.default_port, got.life_time_value) == (127, 3, 18)
    assert (got.default_multicast_primary_port, got.default_multicast_not_primary_port) == (5, 3)
    assert (got.port_state_change, got.linear_fdb_cap) == (1, 30720)
    si.port_state_change = 1  # write 1 to clear
    assert value(ask(t, SET, AttrID.SWITCH_INFO, "0", 0, si)).port_state_change == 0


def test_port_state_change_set_by_link_events():
    t = transport()
    si = value(ask(t, GET, AttrID.SWITCH_INFO, "0"))
    si.port_state_change = 1
    assert value(ask(t, SET, AttrID.SWITCH_INFO, "0", 0, si)).port_state_change == 0
    t.sim.unlink("Switch1", 1)
    assert value(ask(t, GET, AttrID.SWITCH_INFO, "0")).port_state_change == 1


def test_switchinfo_errors():
    t = transport()
    si = value(ask(t, GET, AttrID.SWITCH_INFO, "0"))
    si.linear_fdb_top = 30720  # not below LinearFDBCap
    assert status(ask(t, SET, AttrID.SWITCH_INFO, "0", 0, si)) == BAD_VALUE
    assert status(ask(t, GET, AttrID.SWITCH_INFO, "0", 1)) == BAD_VALUE
    for attr in (AttrID.SWITCH_INFO, AttrID.LINEAR_FORWARDING_TABLE, AttrID.RANDOM_FORWARDING_TABLE,
                 AttrID.MULTICAST_FORWARDING_TABLE):
        assert status(ask(t, GET, attr, "0,1")) == BAD_ATTR  # to a CA


# -- LinearForwardingTable ------------------------------------------------------------------------
def test_lft_get_set():
    t = transport()
    assert value(ask(t, GET, AttrID.LINEAR_FORWARDING_TABLE, "0", 0)).ports == [0xFF] * 64
    ports = [0, 1, 2, 3, 4, 5, 0xFF] + [3] * 57
    got = value(ask(t, SET, AttrID.LINEAR_FORWARDING_TABLE, "0", 1, LinearForwardingTable(ports=ports)))
    assert got.ports == ports
    assert bytes(t.sim.lft("Switch1")[64:128]) == bytes(ports)
    assert value(ask(t, GET, AttrID.LINEAR_FORWARDING_TABLE, "0", 1)).ports == ports


def test_lft_block_beyond_cap_0x001c():
    sim = SimFabric.load(TWO_SW, node_caps={"Switch2": {"linear_fdb_cap": 1024}})
    t = transport(sim)
    assert status(ask(t, GET, AttrID.LINEAR_FORWARDING_TABLE, "0,3", 15)) == OK
    assert status(ask(t, GET, AttrID.LINEAR_FORWARDING_TABLE, "0,3", 16)) == BAD_VALUE
    assert status(ask(t, SET, AttrID.LINEAR_FORWARDING_TABLE, "0,3", 16)) == BAD_VALUE
    assert status(ask(t, GET, AttrID.LINEAR_FORWARDING_TABLE, "0", 479)) == OK  # 30720 / 64 = 480 blocks
    # ibsim checks only block <= 767 and answers 480..767 with stray memory; IBA: invalid.
    assert status(ask(t, GET, AttrID.LINEAR_FORWARDING_TABLE, "0", 480)) == BAD_VALUE
    assert status(ask(t, GET, AttrID.LINEAR_FORWARDING_TABLE, "0", 768)) == BAD_VALUE


# -- RandomForwardingTable ------------------------------------------------------------------------
def _rft_sim(**caps):
    caps = {"linear_fdb_cap": 0, "random_fdb_cap": 64, **caps}
    return SimFabric.load(TWO_SW, node_caps={"Switch2": caps})


def test_rft_get_set():
    t = transport(_rft_sim())
    E = RandomForwardingEntry
    block = rft_block([E(base_lid=0x10, valid=1, lmc=2, port=1), E(base_lid=0x20, valid=1, lmc=0, port=3)])
    got = value(ask(t, SET, AttrID.RANDOM_FORWARDING_TABLE, "0,3", 2, block))
    entries = rft_entries(got)
    assert (entries[0].base_lid, entries[0].lmc, entries[0].port, entries[0].valid) == (0x10, 2, 1, 1)
    assert entries[2].valid == 0
    assert rft_entries(value(ask(t, GET, AttrID.RANDOM_FORWARDING_TABLE, "0,3", 2)))[1].port == 3
    si = value(ask(t, GET, AttrID.SWITCH_INFO, "0,3"))
    assert (si.linear_fdb_cap, si.random_fdb_cap, si.lids_per_port) == (0, 64, 64)


def test_rft_errors():
    t = transport(_rft_sim(lids_per_port=2))
    assert status(ask(t, GET, AttrID.RANDOM_FORWARDING_TABLE, "0,3", 4)) == BAD_VALUE  # 64 entries = 4 blocks
    E = RandomForwardingEntry
    three = rft_block([E(base_lid=i + 1, valid=1, lmc=0, port=1) for i in range(3)])
    assert status(ask(t, SET, AttrID.RANDOM_FORWARDING_TABLE, "0,3", 0, three)) == BAD_VALUE  # LIDsPerPort 2
    # LIDsPerPort does not apply to port 0, nor to invalid entries.
    ok = rft_block([E(base_lid=i + 1, valid=1, lmc=0, port=0) for i in range(3)] +
                   [E(base_lid=9, valid=0, lmc=0, port=1)] * 5)
    assert status(ask(t, SET, AttrID.RANDOM_FORWARDING_TABLE, "0,3", 0, ok)) == OK
    # A switch with an LFT has no RFT, and vice versa.
    assert status(ask(t, GET, AttrID.RANDOM_FORWARDING_TABLE, "0", 0)) == BAD_ATTR
    assert status(ask(t, GET, AttrID.LINEAR_FORWARDING_TABLE, "0,3", 0)) == BAD_ATTR


# -- MulticastForwardingTable ----------------------------------------------------------------------
def test_mft_get_set_positions():
    sim = SimFabric.load(VECTORS / "ibsim-36port.net")
    t = transport(sim)  # SM on H1 port 1; S36 at 0,1
    masks = [0x1E] + [0] * 30 + [0x8001]
    got = value(ask(t, SET, AttrID.MULTICAST_FORWARDING_TABLE, "0,1", mft_modifier(0, 1),
                    MulticastForwardingTable(port_masks=masks)))
    assert got.port_masks == masks
    assert sim.node("S36").mft[0] == 0x1E << 16 and sim.node("S36").mft[31] == 0x8001 << 16
    assert value(ask(t, GET, AttrID.MULTICAST_FORWARDING_TABLE, "0,1", mft_modifier(0, 0))).port_masks == [0] * 32
    p2 = [0x000A] * 32
    ask(t, SET, AttrID.MULTICAST_FORWARDING_TABLE, "0,1", mft_modifier(0, 2), MulticastForwardingTable(port_masks=p2))
    assert sim.node("S36").mft[0] == (0x1E << 16) | (0x000A << 32)  # positions are independent


def test_mft_out_of_range_0x001c():
    """ibsim answers these with status 0 and zeros (see the vectors); IBA: invalid modifier."""
    sim = SimFabric.load(VECTORS / "ibsim-36port.net")
    t = transport(sim)
    assert status(ask(t, GET, AttrID.MULTICAST_FORWARDING_TABLE, "0,1", mft_modifier(0, 2))) == OK
    assert status(ask(t, GET, AttrID.MULTICAST_FORWARDING_TABLE, "0,1", mft_modifier(0, 3))) == BAD_VALUE
    assert status(ask(t, GET, AttrID.MULTICAST_FORWARDING_TABLE, "0,1,33", mft_modifier(0, 1))) == BAD_VALUE
    assert status(ask(t, GET, AttrID.MULTICAST_FORWARDING_TABLE, "0,1", 31)) == OK  # 1024 MLIDs = 32 blocks
    assert status(ask(t, GET, AttrID.MULTICAST_FORWARDING_TABLE, "0,1", 32)) == BAD_VALUE
    assert status(ask(t, GET, AttrID.MULTICAST_FORWARDING_TABLE, "0,1", 0x200)) == BAD_VALUE  # reserved bits


def test_no_mft_when_cap_is_zero():
    t = transport(SimFabric.load(TWO_SW, multicast_fdb_cap=0))
    assert status(ask(t, GET, AttrID.MULTICAST_FORWARDING_TABLE, "0", 0)) == BAD_ATTR


# -- GUIDInfo ---------------------------------------------------------------------------------------
def test_guid_info():
    """A CA port: GUIDCap 32 (4 blocks), index 0 its port GUID, read only; aliases at the
    other indexes; a switch's only GUID is port 0's."""
    from mad.attributes import GUIDInfo
    t = transport()
    assert portinfo(t, "0,1", 1).guid_cap == 32
    port_guid = value(ask(t, GET, AttrID.NODE_INFO, "0,1")).port_guid
    assert value(ask(t, GET, AttrID.GUID_INFO, "0,1", 0)).guids == [port_guid] + [0] * 7
    alias = [0xBAD] + [0x0002C903000000A0 + i for i in range(1, 8)]
    back = value(ask(t, SET, AttrID.GUID_INFO, "0,1", 0, GUIDInfo(guids=alias))).guids
    assert back == [port_guid] + alias[1:]  # GUID 0 kept
    assert value(ask(t, SET, AttrID.GUID_INFO, "0,1", 3, GUIDInfo(guids=list(range(1, 9))))).guids == \
        list(range(1, 9))
    assert value(ask(t, GET, AttrID.GUID_INFO, "0,1", 0)).guids == [port_guid] + alias[1:]
    assert value(ask(t, GET, AttrID.GUID_INFO, "0,1", 3)).guids == list(range(1, 9))
    assert status(ask(t, GET, AttrID.GUID_INFO, "0,1", 4)) == BAD_VALUE  # past GUIDCap 32
    assert status(ask(t, SET, AttrID.GUID_INFO, "0,1", 4, GUIDInfo(guids=[1] * 8))) == BAD_VALUE
    sw_guid = value(ask(t, GET, AttrID.NODE_INFO, "0")).port_guid
    assert value(ask(t, GET, AttrID.GUID_INFO, "0", 0)).guids == [sw_guid] + [0] * 7  # GUIDCap 1
    assert status(ask(t, GET, AttrID.GUID_INFO, "0", 1)) == BAD_VALUE


def test_guid_info_set_refused_as_ibsim():
    """``guid_info_set=0``: ibsim 0.10's SMA, which answers only the Get (status 0x0008)."""
    from mad.attributes import GUIDInfo
    t = transport(guid_info_set=0)
    assert status(ask(t, SET, AttrID.GUID_INFO, "0,1", 0, GUIDInfo(guids=[0, 5] + [0] * 6))) == BAD_METHOD
    assert value(ask(t, GET, AttrID.GUID_INFO, "0,1", 0)).guids[1] == 0


# -- P_KeyTable, SLtoVLMappingTable --------------------------------------------------------------
@pytest.mark.parametrize("reset, default", [("ibsim", 0xFFFF), ("iba", 0x7FFF)])
def test_pkey_table_at_reset(reset, default):
    # ibsim pre-sets the full default partition; a port at reset (the simulator's default
    # model) holds it as a limited member only, on CA ports and switch port 0
    t = transport(link_reset=reset)
    assert value(ask(t, GET, AttrID.P_KEY_TABLE, "0,1", 0)).p_keys == [default] + [0] * 31
    assert value(ask(t, GET, AttrID.P_KEY_TABLE, "0", pkey_modifier(0, 0))).p_keys[:9] == [default] + [0] * 8
    assert value(ask(t, GET, AttrID.P_KEY_TABLE, "0", pkey_modifier(0, 3))).p_keys[0] == 0xFFFF


def test_pkey_table():
    t = transport(link_reset="ibsim")
    assert value(ask(t, GET, AttrID.P_KEY_TABLE, "0,1", 0)).p_keys == [0xFFFF] + [0] * 31
    keys = [0x8001, 0x7FFF] + [0] * 30
    assert value(ask(t, SET, AttrID.P_KEY_TABLE, "0,1", 1, P_KeyTable(p_keys=keys))).p_keys == keys
    assert value(ask(t, GET, AttrID.P_KEY_TABLE, "0,1", 1)).p_keys == keys
    assert status(ask(t, GET, AttrID.P_KEY_TABLE, "0,1", 2)) == BAD_VALUE  # PartitionCap 64 = 2 blocks
    # Switch: the port is in bits 23:16; port 0 has PartitionCap 8, cable ports 64 entries.
    assert value(ask(t, GET, AttrID.P_KEY_TABLE, "0", pkey_modifier(0, 0))).p_keys[:9] == [0xFFFF] + [0] * 8
    assert status(ask(t, GET, AttrID.P_KEY_TABLE, "0", pkey_modifier(1, 3))) == OK
    assert status(ask(t, GET, AttrID.P_KEY_TABLE, "0", pkey_modifier(1, 0))) == BAD_VALUE
    assert status(ask(t, GET, AttrID.P_KEY_TABLE, "0", pkey_modifier(0, 9))) == BAD_VALUE
    assert status(ask(t, GET, AttrID.P_KEY_TABLE, "0", 1 << 24)) == BAD_VALUE


@pytest.mark.parametrize("reset, default", [("ibsim", [i % 8 for i in range(16)]), ("iba", list(range(16)))])
def test_sl2vl_table(reset, default):
    t = transport(link_reset=reset)
    assert value(ask(t, GET, AttrID.SL_TO_VL_MAPPING_TABLE, "0", sl2vl_modifier(1, 3))).sl_to_vl == default
    table = [15 - i for i in range(16)]
    v = SLtoVLMappingTable(sl_to_vl=table)
    assert value(ask(t, SET, AttrID.SL_TO_VL_MAPPING_TABLE, "0", sl2vl_modifier(1, 3), v)).sl_to_vl == table
    assert value(ask(t, GET, AttrID.SL_TO_VL_MAPPING_TABLE, "0", sl2vl_modifier(1, 3))).sl_to_vl == table
    assert value(ask(t, GET, AttrID.SL_TO_VL_MAPPING_TABLE, "0", sl2vl_modifier(3, 1))).sl_to_vl == default
    assert status(ask(t, GET, AttrID.SL_TO_VL_MAPPING_TABLE, "0", sl2vl_modifier(9, 1))) == BAD_VALUE
    assert status(ask(t, GET, AttrID.SL_TO_VL_MAPPING_TABLE, "0,1", 0)) == OK
    assert status(ask(t, GET, AttrID.SL_TO_VL_MAPPING_TABLE, "0,1", 1)) == BAD_VALUE


# -- SMInfo ----------------------------------------------------------------------------------------------
def test_sminfo_at_the_sm_port_only():
    t = transport()
    info = value(ask(t, GET, AttrID.SM_INFO, "0"))
    assert (info.guid, info.sm_state, info.priority) == (0x200000, SMState.NOT_ACTIVE, 0)
    assert status(ask(t, GET, AttrID.SM_INFO, "0,3")) == BAD_ATTR  # no SM there
    assert status(ask(t, GET, AttrID.SM_INFO, "0,1")) == BAD_ATTR


def test_sminfo_set():
    t = transport()
    mine = SMInfo(guid=0xABC, sm_key=7, act_count=0, priority=12, sm_state=SMState.DISCOVERING)
    got = value(ask(t, SET, AttrID.SM_INFO, "0", 0, mine))
    assert (got.guid, got.priority, got.sm_state, got.sm_key) == (0xABC, 12, SMState.DISCOVERING, 7)
    assert value(ask(t, GET, AttrID.SM_INFO, "0")).sm_key == 0  # hidden from who does not know it
    for control, state in ((1, SMState.MASTER), (2, SMState.MASTER), (4, SMState.STANDBY),
                           (5, SMState.DISCOVERING), (3, SMState.NOT_ACTIVE)):
        assert value(ask(t, SET, AttrID.SM_INFO, "0", control, mine)).sm_state == state
    assert status(ask(t, SET, AttrID.SM_INFO, "0", 6, mine)) == BAD_VALUE
    assert status(ask(t, GET, AttrID.SM_INFO, "0", 1)) == BAD_VALUE


def test_attach_another_sm():
    sim = SimFabric.load(TWO_SW)
    sim.attach_sm(("Hca4", 1), priority=3, state=SMState.STANDBY)
    t = transport(sim)
    info = value(ask(t, GET, AttrID.SM_INFO, "0,3,2"))
    assert (info.guid, info.priority, info.sm_state) == (0x10000A, 3, SMState.STANDBY)


# -- M_Key -----------------------------------------------------------------------------------------------
KEY = 0x1122334455667788


def _protected(level, lease=0):
    sim = SimFabric.load(TWO_SW, node_caps={"Switch2": {"m_key": KEY, "m_key_protect_bits": level,
                                                         "m_key_lease_period": lease}})
    return transport(sim), sim


def test_mkey_level0_get_shows_key_set_refused():
    t, sim = _protected(0)
    assert portinfo(t, "0,3", 0).m_key == KEY
    r = set_portinfo(t, "0,3", 0, lid=9)
    assert isinstance(r.error, SmpTimeout) and "M_Key" in sim.last_drop.reason
    pi = value(ask(t, GET, AttrID.PORT_INFO, "0,3", 0, m_key=KEY))
    assert pi.m_key_violations == 1 and pi.lid == 0
    pi.port_state = pi.port_physical_state = 0
    pi.lid = 9
    assert value(ask(t, SET, AttrID.PORT_INFO, "0,3", 0, pi, m_key=KEY)).lid == 9


def test_mkey_level1_hides_key():
    t, _ = _protected(1)
    assert portinfo(t, "0,3", 0).m_key == 0
    assert value(ask(t, GET, AttrID.PORT_INFO, "0,3", 0, m_key=KEY)).m_key == KEY
    assert isinstance(ask(t, SET, AttrID.LINEAR_FORWARDING_TABLE, "0,3", 0).error, SmpTimeout)


@pytest.mark.parametrize("level", [2, 3])
def test_mkey_level2_and_3_refuse_gets(level):
    t, _ = _protected(level)
    assert isinstance(ask(t, GET, AttrID.NODE_INFO, "0,3").error, SmpTimeout)
    assert value(ask(t, GET, AttrID.NODE_INFO, "0,3", m_key=KEY)).node_guid == 0x200001
    assert value(ask(t, GET, AttrID.NODE_INFO, "0")).node_guid == 0x200000  # Switch1 is open
    # the transport's own M_Key fills requests that carry none
    t2 = transport(t.sim, m_key=KEY, attach_sm=False)
    assert value(ask(t2, GET, AttrID.NODE_INFO, "0,3")).node_guid == 0x200001


def test_mkey_lease_expiry_drops_protection():
    t, sim = _protected(2, lease=10)
    now = [1000.0]
    sim.clock = lambda: now[0]
    assert isinstance(ask(t, GET, AttrID.NODE_INFO, "0,3").error, SmpTimeout)  # starts the lease
    now[0] += 9
    assert isinstance(ask(t, GET, AttrID.NODE_INFO, "0,3").error, SmpTimeout)
    now[0] += 2  # lease over: protect bits back to 0, Gets pass, Sets still need the key
    pi = portinfo(t, "0,3", 0)
    assert (pi.m_key_protect_bits, pi.m_key, pi.m_key_violations) == (0, KEY, 2)
    assert isinstance(set_portinfo(t, "0,3", 0, lid=4).error, SmpTimeout)


def test_mkey_of_a_ca_is_per_port():
    sim = SimFabric.load(TWO_SW, node_caps={"Hca1": {"m_key": KEY, "m_key_protect_bits": 2}})
    t = transport(sim)
    assert isinstance(ask(t, GET, AttrID.NODE_INFO, "0,1").error, SmpTimeout)
    assert value(ask(t, GET, AttrID.NODE_INFO, "0,1", m_key=KEY)).node_guid == 0x100000


# -- capabilities, GUIDs, big switches ---------------------------------------------------------------
def test_guids_follow_ibsim_or_the_fabric():
    sim = SimFabric.load(TWO_SW)
    assert [sim.node(n).guid for n in ("Switch1", "Switch2", "Hca1", "Hca2", "Hca3", "Hca4")] == \
           [0x200000, 0x200001, 0x100000, 0x100003, 0x100006, 0x100009]
    assert sim.node("Hca2").port_guids[1:] == [0x100004, 0x100005]
    f = Fabric()
    f.add_node(name="A", node_type=HCA, num_ports=1, guid=0x5000, port_guids={1: 0x6000})
    f.add_node(name="B", node_type=HCA, num_ports=1)
    f.add_node(name="S", node_type=SWITCH, num_ports=4, guid=0x7000)
    f.connect("A", 1, "S", 1)
    sim = SimFabric.from_fabric(f)
    assert (sim.node("A").guid, sim.node("A").port_guids[1]) == (0x5000, 0x6000)
    assert sim.node("B").guid == 0x5002  # like ibsim: counting on after a given GUID
    assert sim.node("S").port_guids[0] == 0x7000


def test_caps_from_node_and_overrides():
    f = Fabric()
    f.add_node(name="H", node_type=HCA, num_ports=1)
    f.add_node(name="S", node_type=SWITCH, num_ports=254, caps={"linear_fdb_cap": 2048, "vendor_id": 0x2C9})
    f.connect("H", 1, "S", 254)
    sim = SimFabric.from_fabric(f, multicast_fdb_cap=64, linear_fdb_cap=4096, device_id=7)
    t = transport(sim)  # SM on H port 1
    si = value(ask(t, GET, AttrID.SWITCH_INFO, "0,1"))
    assert (si.linear_fdb_cap, si.multicast_fdb_cap) == (2048, 64)  # Node.caps beat keywords
    ni = value(ask(t, GET, AttrID.NODE_INFO, "0,1"))
    assert (ni.num_ports, ni.local_port_num, ni.vendor_id, ni.device_id) == (254, 254, 0x2C9, 7)
    assert portinfo(t, "0,1", 254).port_state == PortState.INIT
    assert status(ask(t, GET, AttrID.MULTICAST_FORWARDING_TABLE, "0,1", mft_modifier(1, 15))) == OK


def test_bad_caps_are_refused():
    with pytest.raises(SimConfigError, match="never both"):
        SimFabric.load(TWO_SW, node_caps={"Switch1": {"random_fdb_cap": 16}})
    with pytest.raises(SimConfigError, match="unknown capability"):
        SimFabric.load(TWO_SW, lft_size=3)
    with pytest.raises(SimConfigError, match="unknown node"):
        SimFabric.load(TWO_SW, node_caps={"Nope": {}})
