"""ClassPortInfo of the SA (issue 36 item 5): CapabilityMask and CapabilityMask2 advertise
exactly what the SA implements, each bit beside a request showing the feature it names
works (and the bits not claimed named, with why)."""
from mad import codes, sa
from mad.attributes import PortInfo
from mad.gmp import CLASS_PORT_INFO, ClassPortInfo
from mad.header import Method
from mad.sa_records import MCMemberRecord, PortInfoRecord, ServiceRecord, GUIDInfoRecord
from smagent.sa import agent as agentmod
from smagent.transport.address import Address, Incoming
from sa_fixtures import agent, subnet  # noqa: F401 (the fixtures)
from sa_fixtures import multi, table


def ask(agent, method, record, *fields):
    q = sa.request(method, record, component_mask=type(record).mask(*fields) if fields else 0, transaction_id=8)
    ((raw, _to),) = agent.handle(Incoming(q.encode(), Address.gsi(1)), 0.0)
    return sa.SaMad.decode(raw.ljust(256, b"\0"))


def cpi(agent) -> ClassPortInfo:
    q = sa.request(Method.GET, PortInfoRecord(), component_mask=0, transaction_id=9)
    raw = bytearray(q.encode())
    raw[16:18] = CLASS_PORT_INFO.to_bytes(2, "big")
    ((out, _to),) = agent.handle(Incoming(bytes(raw), Address.gsi(1)), 0.0)
    return ClassPortInfo.decode(out[sa.SaMad.LAYOUT.byte_slice("data").start:])


def _ca(agent, i=1):
    s = agent.subnet
    node = sorted((n for n in s.nodes.values() if not n.is_switch), key=lambda n: n.guid)[i]
    return node, node.lid_ports()[0]


def test_the_masks_are_what_the_sa_implements(agent):
    got = cpi(agent)
    # OpenSM 3.3.23 on the same fabric: 0x2602 and 0x0000B5E8; not claimed here: IsNotice (bit 1:
    # no Get/Set of Notice) and IsFullPortInfoRecord (CapMask2 bit 6: the Options byte is not honoured)
    assert (got.capability_mask, got.capability_mask2) == (0x2600, 0xB5A8)
    agent.multicast = False  # `run --no-multicast`: joins are answered, no MFT follows them
    assert cpi(agent).capability_mask == 0x2400


def test_ud_multicast_and_send_only_full_member(agent):
    assert cpi(agent).capability_mask & agentmod.CAP_UD_MULTICAST
    assert cpi(agent).capability_mask2 & agentmod.CAP2_SEND_ONLY_FULL_MEMBER
    node, port = _ca(agent)
    gid = agent._recs.gid(node, port)
    rec = MCMemberRecord(mgid=0xFF15A01BFFFF0000000000000000ABCD, port_gid=gid, q_key=0x0B1B, p_key=0xFFFF,
                         join_state=8)
    m = ask(agent, Method.SET, rec, "mgid", "port_gid", "q_key", "p_key", "sl", "flow_label", "tclass", "join_state")
    assert m.status == 0 and m.record(MCMemberRecord).join_state == 8  # a send-only full member creates it


def test_multipath(agent):
    from mad.sa_records import MultiPathRecord
    assert cpi(agent).capability_mask & agentmod.CAP_MULTIPATH
    gids = [agent._recs.gid(*_ca(agent, i)) for i in (1, 2)]
    status, paths = multi(agent, MultiPathRecord(sgid_count=1, dgid_count=1), gids, "sgid_count", "dgid_count")
    assert status == 0 and paths


def test_port_info_capability_masks_match_bit_by_bit_when_asked(agent):
    assert cpi(agent).capability_mask & agentmod.CAP_PORT_INFO_CAPMASK_MATCH
    assert cpi(agent).capability_mask2 & agentmod.CAP2_PORT_INFO_CAPMASK2_MATCH
    every = table(agent, PortInfoRecord())
    node, port = _ca(agent)
    bit = node.ports[port].capability_mask & -node.ports[port].capability_mask  # its lowest bit
    having = [r for r in every if r.capability_mask & bit]
    assert 0 < len(having) and any(r.capability_mask != bit for r in having)
    q = PortInfoRecord(capability_mask=bit)
    bitwise = table(agent, q, "capability_mask", modifier=1 << 31)
    assert sorted(r.endport_lid for r in bitwise) == sorted(r.endport_lid for r in having)
    equal = table(agent, q, "capability_mask")  # without modifier bit 31: equal, as OpenSM
    assert all(r.capability_mask == bit for r in equal) and len(equal) < len(bitwise)
    none2 = table(agent, PortInfoRecord(capability_mask2=0x8000), "capability_mask2", modifier=1 << 31)
    assert none2 == [r for r in every if r.capability_mask2 & 0x8000]
    zero2 = table(agent, PortInfoRecord(capability_mask2=0), "capability_mask2", modifier=1 << 31)
    assert len(zero2) == len(every)  # no bit asked: every port has them all


def test_alias_guids(agent):
    assert cpi(agent).capability_mask2 & agentmod.CAP2_ALIAS_GUIDS
    node, port = _ca(agent)
    rec = GUIDInfoRecord(lid=agent.subnet.base_lid(node, port), guids=[0, 0x0002C903000000AA] + [0] * 6)
    assert ask(agent, Method.SET, rec, "lid", "block_num", "guids[1]").status == 0


def test_multicast_service_records(agent):
    assert cpi(agent).capability_mask2 & agentmod.CAP2_MULTICAST_SERVICE_RECS
    rec = ServiceRecord(service_id=0x1234, service_gid=0xFF12A01BFFFF00000000000000000001, service_p_key=0xFFFF)
    assert ask(agent, Method.SET, rec, "service_id", "service_gid", "service_p_key").status == 0
    found = ask(agent, Method.GET, ServiceRecord(service_id=0x1234), "service_id").record(ServiceRecord)
    assert found.service_gid >> 120 == 0xFF


def test_rates_of_extended_speeds_2x_widths_and_hdr():
    bits = agentmod.CAP2_EXTENDED_SPEEDS | agentmod.CAP2_LINK_WIDTH_2X | agentmod.CAP2_LINK_SPEED_HDR
    assert agentmod.CAP_MASK2 & bits == bits
    fdr_4x = PortInfo(link_width_active=2, link_speed_active=4, link_speed_ext_active=1)
    hdr_2x = PortInfo(link_width_active=16, link_speed_active=4, link_speed_ext_active=4)
    hdr_4x = PortInfo(link_width_active=2, link_speed_active=4, link_speed_ext_active=4)
    assert [codes.rate_code(p) for p in (fdr_4x, hdr_2x, hdr_4x)] == [12, 16, 17]  # 56, 100, 200 Gb/s


def test_qos_only_with_a_policy(agent, subnet):
    import dataclasses
    from smagent.config import qospolicy
    assert not cpi(agent).capability_mask2 & agentmod.CAP2_QOS
    policy = qospolicy.parse("qos-ulps\n  default : 0\nend-qos-ulps\n")
    agent.publish(dataclasses.replace(subnet, qos_policy=policy))
    assert cpi(agent).capability_mask2 & agentmod.CAP2_QOS
    agent.publish(subnet)
