"""What a requester sees under partitions (smagent.sa.visible, in-process): the SA answers a
port only about the ports it shares a partition with, record kind by record kind, as
OpenSM's SA does; without partitions everything, as before.

The fabric: the simulator's (H1 with two ports, H1 port 1 the SM's; H2..H8; six switches),
swept with the default partition ALL=limited and SELF=full, ``a`` (H2 full, H3 limited)
and ``b`` (H4 full, H5 limited). So H3 shares with H1 port 1 (the default, the SM a full
member) and H2 (``a``) only: not with H1 port 2, H4..H8 (limited in the default like H3),
nor with any switch's port 0 (limited too), nor with itself's switch port (which holds
H3's own limited keys); the SM's port shares with everybody."""
import dataclasses

import pytest

import smagent
from mad import sa
from mad.attributes import SMInfo
from mad.header import Method
from mad.rmpp import RmppReceiver, RmppState
from mad.sa_records import (GUIDInfoRecord, InformInfo, InformInfoRecord, LinearForwardingTableRecord, LinkRecord,
                            MulticastForwardingTableRecord, NodeRecord, P_KeyTableRecord, PathRecord, PortInfoRecord,
                            ServiceRecord, SLtoVLMappingTableRecord, SMInfoRecord, SwitchInfoRecord,
                            VLArbitrationTableRecord)
from smagent.config import partitions
from smagent.sa import SaAgent
from smagent.sa import informs
from smagent.model.subnet import Subnet
from smagent.transport.address import Address, Incoming

SM_KEY = 0x1122334455667788


@pytest.fixture(scope="module")
def fabric():
    with smagent.connect("sim") as f:
        topo = f.discover()
        cas = sorted((n for n in topo.nodes.values() if not n.is_switch), key=lambda n: n.guid)
        g = [f"{n.port_guids[sorted(n.port_paths)[0]]:#x}" for n in cas]
        conf = partitions.parse(f"Default=0x7fff : ALL=limited, SELF=full ;\n"
                                f"a=0x10 : {g[1]}=full, {g[2]}=limited ;\n"
                                f"b=0x20 : {g[3]}=full, {g[4]}=limited ;\n")
        r = f.sweep(partitions=conf, keep_link_tables=True)
        plain = f.sweep(keep_link_tables=True)
    assert r.problems == [] and plain.problems == []
    return Subnet.from_sweep(r, partitions=conf), Subnet.from_sweep(plain)


@pytest.fixture
def agent(fabric):
    a = SaAgent(SM_KEY)
    a.publish(fabric[0])
    return a


def ports(s: Subnet) -> dict:
    """"H1:1", "H3", "L1", ... -> (node, LID-carrying port, base LID)."""
    out = {}
    for n in s.nodes.values():
        for p in n.lid_ports():
            name = n.description if n.is_switch or n.description != "H1" else f"H1:{p}"
            out[name] = (n, p, s.base_lid(n, p))
    return out


def lid(s, name):
    return ports(s)[name][2]


def ask(agent, method, record, *fields, src, sm_key=0):
    """The status and records of the answer to a request from LID ``src``."""
    me = Address.gsi(src)
    q = sa.request(method, record, component_mask=type(record).mask(*fields) if fields else 0, transaction_id=9,
                   sm_key=sm_key)
    out = [m for m, _a in agent.handle(Incoming(q.encode(), me), 0.0)]
    if method != Method.GET_TABLE:
        m = sa.SaMad.decode(out[0].ljust(256, b"\0"))
        return m.sa_status, [m.record(type(record))] if m.status == 0 else []
    rx, now = RmppReceiver(class_header_size=sa.SA_HEADER_SIZE), 0.0
    while not rx.finished:
        if not out:
            now = agent.deadline
            out = [m for m, _a in agent.on_timeout(now)]
            continue
        mad, out = out[0].ljust(256, b"\0"), out[1:]
        for ack in rx.on_mad(mad, now):
            out += [m for m, _a in agent.handle(Incoming(ack, me), now)]
    assert rx.state is RmppState.DONE
    first = sa.SaMad.decode(rx.first)
    return first.sa_status, sa.decode_table(rx.data, type(record), first.attribute_offset)


def test_share_pkey_follows_opensm(fabric):
    s, plain = fabric
    p = {k: (n.guid, 0 if n.is_switch else port) for k, (n, port, _l) in ports(s).items()}
    assert s.share_pkey(p["H3"], p["H2"]) and s.share_pkey(p["H3"], p["H1:1"])
    assert not s.share_pkey(p["H3"], p["H4"]) and not s.share_pkey(p["H3"], p["H1:2"])
    assert not s.share_pkey(p["H3"], p["L1"])  # a switch's port 0: a limited member
    assert s.share_pkey(p["H3"], p["H3"])  # the same port
    leaf, port = s.links[p["H3"]]
    assert not s.share_pkey(p["H3"], (leaf, port))  # its switch port holds H3's limited keys
    up = next(q for q in s.nodes[leaf].ports if q and s.nodes[s.links.get((leaf, q), (leaf, 0))[0]].is_switch)
    assert s.share_pkey(p["H3"], (leaf, up))  # between switches: no table written, shared
    assert plain.share_pkey(p["H3"], p["H4"])  # without partitions: everything


def test_node_records(agent):
    s = agent.subnet
    h3 = lid(s, "H3")
    assert ask(agent, Method.GET, NodeRecord(lid=lid(s, "H5")), "lid", src=h3)[0] is sa.SaStatus.ERR_NO_RECORDS
    assert ask(agent, Method.GET, NodeRecord(lid=lid(s, "L1")), "lid", src=h3)[0] is sa.SaStatus.ERR_NO_RECORDS
    assert ask(agent, Method.GET, NodeRecord(lid=lid(s, "H2")), "lid", src=h3)[1][0].lid == lid(s, "H2")
    assert ask(agent, Method.GET, NodeRecord(lid=lid(s, "L1")), "lid", src=lid(s, "H1:1"))[1]
    _st, every = ask(agent, Method.GET_TABLE, NodeRecord(), src=h3)
    assert {r.lid for r in every} == {lid(s, n) for n in ("H1:1", "H2", "H3")}
    assert len(ask(agent, Method.GET_TABLE, NodeRecord(), src=lid(s, "H1:1"))[1]) == len(ports(s))


def test_port_info_records_switch_ports_by_their_tables(agent):
    s = agent.subnet
    h3 = lid(s, "H3")
    leaf = s.links[(ports(s)["H3"][0].guid, 1)][0]
    _st, shown = ask(agent, Method.GET_TABLE, PortInfoRecord(endport_lid=s.base_lid(s.nodes[leaf], 0)),
                     "endport_lid", src=h3)
    sharing = {ports(s)[n][0].guid for n in ("H2",)} | {s.local[0]}
    want = set()
    for q in s.nodes[leaf].ports:
        peer = s.links.get((leaf, q))
        if q and (peer is None or s.nodes[peer[0]].is_switch or (peer[0] in sharing and peer != (s.local[0], 2))):
            want.add(q)
    assert {r.port_num for r in shown} == want and 0 not in want
    assert ask(agent, Method.GET_TABLE, PortInfoRecord(endport_lid=lid(s, "H4")), "endport_lid", src=h3)[1] == []
    assert ask(agent, Method.GET_TABLE, PortInfoRecord(endport_lid=lid(s, "H2")), "endport_lid", src=h3)[1]


def test_link_records_both_ends_shared(agent):
    s = agent.subnet
    ends = {n: (node.guid, p) for n, (node, p, _l) in ports(s).items() if not node.is_switch}
    by_lid = {lid(s, n): n for n in ends}
    _st, shown = ask(agent, Method.GET_TABLE, LinkRecord(), src=lid(s, "H3"))
    _st, every = ask(agent, Method.GET_TABLE, LinkRecord(), src=lid(s, "H1:1"))
    # even the SM does not see the link of a port holding only limited keys: its switch port
    # holds the same keys, and the two ends must share (OpenSM's rule)
    limited_only = {"H1:2", "H3", "H5", "H6", "H7", "H8"}
    assert {by_lid.get(r.from_lid) or by_lid.get(r.to_lid) for r in every} - {None} == set(ends) - limited_only
    assert len(every) == len(list(s.link_records())) - 2 * len(limited_only)
    cas_seen = {by_lid.get(r.from_lid) or by_lid.get(r.to_lid) for r in shown} - {None}
    assert cas_seen == {"H1:1", "H2"}  # H3's own link: its switch port holds H3's limited keys
    between = [r for r in every if r.from_lid not in by_lid and r.to_lid not in by_lid]
    assert between and all(r in shown for r in between)


def test_switch_records_by_port_0(agent):
    s = agent.subnet
    h3, sm = lid(s, "H3"), lid(s, "H1:1")
    sw = lid(s, "L1")
    for kind in (SwitchInfoRecord, LinearForwardingTableRecord, MulticastForwardingTableRecord):
        assert ask(agent, Method.GET_TABLE, kind(lid=sw), "lid", src=h3) == (sa.SaStatus.SUCCESS, []), kind
        assert ask(agent, Method.GET_TABLE, kind(lid=sw), "lid", src=sm)[1], kind
    assert ask(agent, Method.GET_TABLE, SwitchInfoRecord(), src=h3)[1] == []


@pytest.mark.parametrize("kind,field", [(GUIDInfoRecord, "lid"), (P_KeyTableRecord, "lid"),
                                        (SLtoVLMappingTableRecord, "lid"), (VLArbitrationTableRecord, "lid")])
def test_port_table_records(agent, kind, field):
    s = agent.subnet
    h3 = lid(s, "H3")
    assert ask(agent, Method.GET_TABLE, kind(lid=lid(s, "H5")), field, src=h3, sm_key=SM_KEY)[1] == []
    assert ask(agent, Method.GET_TABLE, kind(lid=lid(s, "H2")), field, src=h3, sm_key=SM_KEY)[1]
    assert ask(agent, Method.GET_TABLE, kind(lid=lid(s, "H5")), field, src=lid(s, "H1:1"), sm_key=SM_KEY)[1]


def test_path_records_need_the_requester_to_share_with_both_ends(agent):
    s = agent.subnet
    h3, h2, sm, h4 = (lid(s, n) for n in ("H3", "H2", "H1:1", "H4"))
    path = PathRecord(slid=h2, dlid=sm)
    assert ask(agent, Method.GET, path, "slid", "dlid", src=h3)[1]
    assert ask(agent, Method.GET, PathRecord(slid=h4, dlid=sm), "slid", "dlid", src=h3)[0] \
        is sa.SaStatus.ERR_NO_RECORDS
    assert ask(agent, Method.GET, PathRecord(slid=h4, dlid=sm), "slid", "dlid", src=sm)[1]
    _st, mine = ask(agent, Method.GET_TABLE, PathRecord(slid=h3), "slid", src=h3)
    assert {r.dlid for r in mine} == {h2, sm}  # H3 itself: limited only, no path to itself


def test_sm_info_records_ours_only_to_who_shares_with_our_port(agent):
    s = agent.subnet
    sm, h2, h3, h4 = (ports(s)[n] for n in ("H1:1", "H2", "H3", "H4"))
    pkeys = dict(s.pkeys)
    pkeys[(sm[0].guid, sm[1])] = (0x7FFF,)  # our port a limited member only
    pkeys[(h2[0].guid, h2[1])] = (0xFFFF, 0x8010)  # H2 a full one
    other = SMInfo(guid=h4[0].guid, priority=1, sm_state=2)
    agent.publish(dataclasses.replace(s, pkeys=pkeys, sms=((sm[2], SMInfo(guid=sm[0].guid, sm_state=3)),
                                                            (h4[2], other))))
    assert [r.lid for r in ask(agent, Method.GET_TABLE, SMInfoRecord(), src=h2[2])[1]] == [sm[2], h4[2]]
    assert [r.lid for r in ask(agent, Method.GET_TABLE, SMInfoRecord(), src=h3[2])[1]] == [h4[2]]


def test_multipath_records_need_the_requester_to_share_with_both_ends(agent):
    from mad.sa_records import MultiPathRecord
    from sa_fixtures import multi as get_multi
    s = agent.subnet
    gids = [agent._recs.gid(*ports(s)[n][:2]) for n in ("H2", "H4", "H1:1")]
    fields = ("sgid_count", "dgid_count")

    def multi(src):
        return get_multi(agent, MultiPathRecord(sgid_count=2, dgid_count=1), gids, *fields, src=Address.gsi(lid(s, src)))

    status, seen = multi("H3")  # H2 -> H1:1 yes, H4 -> H1:1 no
    assert status == 0 and [(r.slid, r.dlid) for r in seen] == [(lid(s, "H2"), lid(s, "H1:1"))]
    assert len(multi("H1:1")[1]) == 2


def test_traces_of_paths_the_requester_may_see_only(agent):
    from mad.sa_records import TraceRecord
    s = agent.subnet
    h3, h4, sm = (lid(s, n) for n in ("H3", "H4", "H1:1"))

    def trace(src, slid):
        m = sa.request(Method.GET_TRACE_TABLE, PathRecord(slid=slid, dlid=sm), transaction_id=5)
        m.attribute_id, m.component_mask = TraceRecord.ATTR_ID, PathRecord.mask("slid", "dlid")
        return sa.SaMad.decode(agent.handle(Incoming(m.encode(), Address.gsi(src)), 0.0)[0][0].ljust(256, b"\0"))

    assert trace(h3, h4).sa_status is sa.SaStatus.ERR_NO_RECORDS
    assert trace(sm, h4).status == 0 and trace(h3, lid(s, "H2")).status == 0


def test_inform_info_subscriptions_and_records(agent):
    s = agent.subnet
    h3, h2, h4, h5 = (lid(s, n) for n in ("H3", "H2", "H4", "H5"))
    gid5 = agent._recs.gid(*ports(s)["H5"][:2])
    base = dict(is_generic=1, subscribe=1, type=0xFFFF, qpn=1, producer_type_or_vendor_id=0xFFFFFF)
    bad = ask(agent, Method.SET, InformInfo(gid=gid5, **base), src=h3)
    assert bad[0] is sa.SaStatus.ERR_REQ_INVALID
    assert ask(agent, Method.SET, InformInfo(lid_range_begin=h5, **base), src=h3)[0] is sa.SaStatus.ERR_REQ_INVALID
    assert ask(agent, Method.SET, InformInfo(lid_range_begin=h2, **base), src=h3)[0] is sa.SaStatus.SUCCESS
    assert ask(agent, Method.SET, InformInfo(lid_range_begin=0xFFFF, **base), src=h3)[0] is sa.SaStatus.SUCCESS
    assert len(ask(agent, Method.GET_TABLE, InformInfoRecord(), src=h2)[1]) == 2  # H3's, seen from H2
    assert ask(agent, Method.GET_TABLE, InformInfoRecord(), src=h4)[1] == []


def test_reports_only_to_subscribers_that_may_hear_of_the_source(agent):
    s = agent.subnet
    h2, h3, h5 = (lid(s, n) for n in ("H2", "H3", "H5"))
    gid = {n: agent._recs.gid(*ports(s)[n][:2]) for n in ("H2", "H5")}
    base = dict(is_generic=1, subscribe=1, type=0xFFFF, trap_number_or_device_id=0xFFFF, qpn=1,
                producer_type_or_vendor_id=0xFFFFFF)
    for who, first in ((h3, 0xFFFF), (h5, 0xFFFF), (h3, h2)):
        assert ask(agent, Method.SET, InformInfo(lid_range_begin=first, **base), src=who)[0] is sa.SaStatus.SUCCESS

    def heard(out):
        return sorted(to.lid for raw, to in out if raw[3] == Method.REPORT)

    assert heard(agent.sm_notice(informs.GID_IN, gid["H2"], 0.0)) == [h3, h3]  # H5 shares nothing with H2
    assert heard(agent.sm_notice(informs.GID_IN, gid["H5"], 0.0)) == [h5]  # H5 hears of itself, H3 not
    mgid = 0xFF15A01B00200000000000000000C123
    agent.groups.precreate(mgid, mtu=4, rate=3, p_key=0x20)
    assert heard(agent.sm_notice(informs.MCG_CREATED, mgid, 0.0)) == [h5]  # b's group: H5 a member, H3 not
    assert len(agent.informs.subs) == 3
    # H2 leaves partition a: H3's subscription to H2's LID cannot be served and goes (o13-17.1.2),
    # the one to every port stays
    pkeys = dict(s.pkeys)
    pkeys[(ports(s)["H2"][0].guid, 1)] = (0x7FFF,)
    agent.publish(dataclasses.replace(s, pkeys=pkeys))
    assert heard(agent.sm_notice(informs.GID_IN, gid["H2"], 0.0)) == []
    assert sorted(sub.lid for sub in agent.informs.subs) == [h3, h5]


def test_service_records_only_to_members_of_their_partition(agent):
    s = agent.subnet
    h3, h4, h5 = (lid(s, n) for n in ("H3", "H4", "H5"))
    key = ("service_id", "service_gid", "service_p_key")
    rec = ServiceRecord(service_id=7, service_gid=agent._recs.gid(*ports(s)["H4"][:2]), service_p_key=0x8020)
    assert ask(agent, Method.SET, rec, *key, src=h3)[0] is sa.SaStatus.ERR_REQ_INVALID  # not in b
    assert ask(agent, Method.SET, rec, *key, src=h4)[0] is sa.SaStatus.SUCCESS
    assert ask(agent, Method.GET_TABLE, ServiceRecord(), src=h3)[1] == []
    assert [r.service_id for r in ask(agent, Method.GET_TABLE, ServiceRecord(), src=h5)[1]] == [7]
    assert ask(agent, Method.DELETE, rec, *key, src=h3)[0] is sa.SaStatus.ERR_REQ_INVALID


def test_without_partitions_every_requester_sees_everything(fabric):
    plain = fabric[1]
    a = SaAgent(SM_KEY)
    a.publish(plain)
    h3, sm = lid(plain, "H3"), lid(plain, "H1:1")
    for kind in (NodeRecord, PortInfoRecord, LinkRecord, SwitchInfoRecord, GUIDInfoRecord):
        assert ask(a, Method.GET_TABLE, kind(), src=h3) == ask(a, Method.GET_TABLE, kind(), src=sm), kind
    assert ask(a, Method.GET, PathRecord(slid=lid(plain, "H4"), dlid=lid(plain, "H5")), "slid", "dlid", src=h3)[1]


def test_unknown_requester_sees_nothing_under_partitions(agent):
    assert ask(agent, Method.GET_TABLE, NodeRecord(), src=0xBFFF)[1] == []
