"""Multicast groups by join (smagent.sa.groups through the SA agent, in-process): an
MCMemberRecord Set creates a group on its first full join (MLID from 0xC000 up, MGID
assigned when 0, MTU and rate by selector from the member's link), a join the link cannot
carry is refused, Get/GetTable by MGID, Delete removes members and the group dies with
its last full member; the daemon's MFTs follow through the one write path."""

from mad import codes, sa
from mad import forwarding as fw
from mad.header import Method
from mad.sa_records import MCMemberRecord
from smagent.sa.groups import FULL, SEND_ONLY, SEND_ONLY_FULL, ipoib_broadcast_mgid
from smagent.transport.address import Address, Incoming
from sa_fixtures import agent, subnet  # noqa: F401 (the fixtures)
from sa_fixtures import table as sa_table

MGID = 0xFF15A01BFFFF00000000000000001234  # site-local: a link-local a01b MGID is the SA's to assign
CREATE = ("mgid", "port_gid", "q_key", "p_key", "sl", "flow_label", "tclass", "join_state")


def ca_gids(agent):
    recs, s = agent._recs, agent.subnet
    return [recs.gid(n, p) for n in sorted(s.nodes.values(), key=lambda n: n.guid) if not n.is_switch
            for p in n.lid_ports()]


def ask(agent, method, record, *fields, src=Address.gsi(1), sm_key=0):
    q = sa.request(method, record, component_mask=MCMemberRecord.mask(*fields), transaction_id=9, sm_key=sm_key)
    ((raw, _to),) = agent.handle(Incoming(q.encode(), src), 0.0)
    return sa.SaMad.decode(raw)


def join(agent, gid, mgid=MGID, state=FULL, extra=(), **kw):
    rec = MCMemberRecord(**{"mgid": mgid, "port_gid": gid, "q_key": 0x0B1B, "p_key": 0xFFFF, "join_state": state, **kw})
    return ask(agent, Method.SET, rec, *CREATE, *extra)


def test_first_join_creates_the_group_and_later_joins_add_members(agent):
    a, b, c = ca_gids(agent)[:3]
    m = join(agent, a)
    assert m.method == Method.GET_RESP and m.status == 0
    g = m.record(MCMemberRecord)
    assert (g.mgid, g.mlid, g.port_gid, g.join_state, g.q_key, g.p_key) == (MGID, fw.MULTICAST_LID_MIN, a, FULL,
                                                                         0x0B1B, 0xFFFF)
    assert g.mtu == 5 and g.rate == codes.rate_code(agent.subnet.port_of_guid(a & (1 << 64) - 1)[0].ports[1])
    v = agent.groups.version
    assert join(agent, b, state=SEND_ONLY).record(MCMemberRecord).mlid == g.mlid
    assert agent.groups.version == v + 1
    # a second group, MGID assigned: the next MLID, an MGID carrying it
    other = join(agent, c, mgid=0).record(MCMemberRecord)
    assert other.mlid == g.mlid + 1 and other.mgid >> 112 == 0xFF12 and other.mgid & 0xFFFF == other.mlid
    # Get by MGID and PortGID: the member's record, its PortGID and JoinState shown only to a
    # trusted request (our SM_Key), as OpenSM answers (IBA 15.2.5.17)
    got = ask(agent, Method.GET, MCMemberRecord(mgid=MGID, port_gid=b), "mgid", "port_gid").record(MCMemberRecord)
    assert (got.port_gid, got.join_state, got.mlid) == (0, 0, g.mlid)
    agent.sm_key = 0x5EC2E7
    got = ask(agent, Method.GET, MCMemberRecord(mgid=MGID, port_gid=b), "mgid", "port_gid",
              sm_key=0x5EC2E7).record(MCMemberRecord)
    assert (got.port_gid, got.join_state, got.mlid) == (b, SEND_ONLY, g.mlid)
    assert sorted(r.port_gid for r in agent.groups.records() if r.mgid == MGID) == sorted([a, b])


def test_group_queries_answer_as_opensm_does(agent):
    """GetTable: one record per group (PortGID, JoinState 0) to any requester, in MGID order;
    one per member to a trusted one; a PortGID names one member; a group in a partition the
    requester is not in is not shown (the partitioned case: test_sa_agent)."""
    a, b, c = ca_gids(agent)[:3]
    join(agent, a, mgid=MGID)
    join(agent, b, mgid=MGID, state=SEND_ONLY)
    join(agent, c, mgid=MGID - 1)

    def table(*fields, record=MCMemberRecord(), sm_key=0):
        return [(r.mgid, r.port_gid, r.join_state) for r in sa_table(agent, record, *fields, sm_key=sm_key)]

    assert table() == [(MGID - 1, 0, 0), (MGID, 0, 0)]
    assert table("mgid", record=MCMemberRecord(mgid=MGID)) == [(MGID, 0, 0)]
    assert table("port_gid", record=MCMemberRecord(port_gid=b)) == [(MGID, 0, 0)]
    assert table("port_gid", record=MCMemberRecord(port_gid=b), sm_key=7) == [(MGID, 0, 0)]  # not our key
    agent.sm_key = 7
    assert table(sm_key=7) == [(MGID - 1, c, FULL), (MGID, *sorted([(a, FULL), (b, SEND_ONLY)])[0]),
                               (MGID, *sorted([(a, FULL), (b, SEND_ONLY)])[1])]
    assert table("join_state", record=MCMemberRecord(join_state=SEND_ONLY), sm_key=7) == [(MGID, b, SEND_ONLY)]


def test_joins_the_links_cannot_carry_are_refused(agent):
    a, b = ca_gids(agent)[:2]
    sel = ("mtu_selector", "mtu")
    too_big = join(agent, a, extra=sel, mtu_selector=2, mtu=6)  # exactly 8 KiB on 4 KiB links
    assert too_big.sa_status is sa.SaStatus.ERR_REQ_INVALID and not agent.groups.records()
    assert join(agent, a, extra=sel, mtu_selector=0, mtu=5).sa_status is sa.SaStatus.ERR_REQ_INVALID
    small = join(agent, a, extra=sel, mtu_selector=1, mtu=4).record(MCMemberRecord)  # less than 2048
    assert small.mtu == 3
    # the group is 1024: a join wanting exactly 4096 is refused, one wanting less than 4096 accepted
    assert join(agent, b, extra=sel, mtu_selector=2, mtu=5).sa_status is sa.SaStatus.ERR_REQ_INVALID
    assert join(agent, b, extra=sel, mtu_selector=1, mtu=5).status == 0
    fast = codes.RATE_CODES[max(codes.RATE_CODES)]
    assert join(agent, a, mgid=0, extra=("rate_selector", "rate"), rate_selector=2,
                rate=fast).sa_status is sa.SaStatus.ERR_REQ_INVALID


def test_bad_joins_say_why(agent):
    a = ca_gids(agent)[0]
    rec = MCMemberRecord(mgid=MGID, port_gid=a, join_state=FULL)
    short = ask(agent, Method.SET, rec, "mgid", "port_gid", "join_state")
    assert short.sa_status is sa.SaStatus.ERR_REQ_INSUFFICIENT_COMPONENTS
    assert join(agent, 0xFE80 << 112 | 0x1234).sa_status is sa.SaStatus.ERR_REQ_INVALID_GID
    assert join(agent, a, state=SEND_ONLY).sa_status is sa.SaStatus.ERR_REQ_INVALID  # no full member creates
    gone = ask(agent, Method.DELETE, rec, "mgid", "port_gid", "join_state")
    assert gone.sa_status is sa.SaStatus.ERR_REQ_INVALID


def test_leave_and_the_group_dies_with_its_last_full_member(agent):
    a, b = ca_gids(agent)[:2]
    mlid = join(agent, a).record(MCMemberRecord).mlid
    join(agent, b, state=SEND_ONLY)
    d = ask(agent, Method.DELETE, MCMemberRecord(mgid=MGID, port_gid=a, join_state=FULL), "mgid", "port_gid",
            "join_state")
    assert d.method == Method.DELETE_RESP and d.status == 0 and d.record(MCMemberRecord).port_gid == a
    assert MGID not in agent.groups.groups and agent.groups.released == {mlid}
    assert ask(agent, Method.GET, MCMemberRecord(mgid=MGID), "mgid").sa_status is sa.SaStatus.ERR_NO_RECORDS
    # the MLID is handed out again
    assert join(agent, a, mgid=0).record(MCMemberRecord).mlid == mlid and not agent.groups.released


def test_well_known_group_outlives_its_members(agent):
    a = ca_gids(agent)[0]
    mgid = ipoib_broadcast_mgid()
    assert f"{mgid:032x}" == "ff12401bffff000000000000ffffffff"
    agent.groups.precreate(mgid, mtu=4, rate=3, mlid=fw.MULTICAST_LID_MIN)
    g = join(agent, a, mgid=mgid).record(MCMemberRecord)
    assert (g.mlid, g.mtu, g.rate, g.q_key) == (fw.MULTICAST_LID_MIN, 4, 3, 0x0B1B)
    ask(agent, Method.DELETE, MCMemberRecord(mgid=mgid, port_gid=a, join_state=FULL), "mgid", "port_gid",
        "join_state")
    assert mgid in agent.groups.groups and not agent.groups.records()
    # a new group does not take the broadcast group's MLID
    assert join(agent, a, mgid=0).record(MCMemberRecord).mlid == fw.MULTICAST_LID_MIN + 1


# -- the daemon: MFTs follow joins and leaves ---------------------------------------------
def _daemon(now=None):
    from smagent.sm.daemon import Daemon, DaemonOptions
    from smagent.transport.sim import SimTransport

    t = SimTransport()
    t.serve()
    d = Daemon(t, DaemonOptions(), clock=(lambda: now[0]) if now else (lambda: 1000.0))
    d.start()
    return t, d


def _send(t, d, method, rec, *fields, src):
    q = sa.request(method, rec, component_mask=MCMemberRecord.mask(*fields), transaction_id=5)
    t.outbox.clear()
    t.deliver(q.encode(), src)
    d.step(max_wait=0)
    ((raw, _to),) = [(r, to) for r, to in t.outbox if r[1] == sa.SA_CLASS]
    return sa.SaMad.decode(raw)


def _holders(t, mlid):
    """{switch name: ports} of the simulated switches whose MFT forwards ``mlid``."""
    out = {}
    for n in t.sim.switches():
        mask = n.mft[mlid - fw.MULTICAST_LID_MIN] if n.mft else 0
        if mask:
            out[n.name] = {p for p in range(mask.bit_length()) if mask >> p & 1}
    return out


def _member_port(agent, gid):
    """(switch name, port) a CA port GID is cabled to."""
    node, port = agent.subnet.port_of_guid(gid & (1 << 64) - 1)
    peer = agent.subnet.links[(node.guid, port)]
    return agent.subnet.nodes[peer[0]].description, peer[1]


def test_daemon_mfts_follow_joins_and_leaves():
    t, d = _daemon()
    agent = d.sa.agent
    bcast = agent.groups.groups[ipoib_broadcast_mgid()]
    assert (bcast.mlid, bcast.mtu, bcast.rate, bcast.well_known) == (fw.MULTICAST_LID_MIN, 4, 3, True)
    a, b = ca_gids(agent)[:2]
    src_a = Address.gsi(agent.subnet.base_lid(*agent.subnet.port_of_guid(a & (1 << 64) - 1)))
    # the joins decide every tree (as OpenSM): before any, the broadcast group reaches no one
    assert _holders(t, fw.MULTICAST_LID_MIN) == {}
    sweeps, blocks = d.counters.sweeps, d.t.stats.by_kind.get("SubnSet(MulticastForwardingTable)", 0)
    rec = MCMemberRecord(mgid=MGID, port_gid=a, q_key=0x0B1B, p_key=0xFFFF, join_state=FULL)
    m = _send(t, d, Method.SET, rec, *CREATE, src=src_a)
    assert m.status == 0
    mlid = m.record(MCMemberRecord).mlid
    assert mlid == fw.MULTICAST_LID_MIN + 1 and not d.sa.groups_pending
    assert d.counters.sweeps == sweeps + 1 and d.last_sweep["incremental"] and d.last_sweep["mft_blocks"]
    # one member: only its switch forwards, to the member's port
    sw, port = _member_port(agent, a)
    assert _holders(t, mlid) == {sw: {port}}
    m = _send(t, d, Method.SET, rec.replace(port_gid=b), "mgid", "port_gid", "join_state", src=src_a)
    assert m.status == 0
    holders = _holders(t, mlid)
    for gid in (a, b):  # each member's switch forwards to it
        name, p = _member_port(agent, gid)
        assert p in holders[name]
    # the last full member leaves: every entry of the MLID is gone, written incrementally
    _send(t, d, Method.DELETE, rec.replace(port_gid=b), "mgid", "port_gid", "join_state", src=src_a)
    assert _holders(t, mlid) == {sw: {port}}  # a full member is left: its tree alone
    _send(t, d, Method.DELETE, rec, "mgid", "port_gid", "join_state", src=src_a)
    assert _holders(t, mlid) == {} and MGID not in agent.groups.groups
    assert d.last_sweep["incremental"] and d.t.stats.by_kind.get("SubnSet(MulticastForwardingTable)", 0) > blocks
    assert _holders(t, fw.MULTICAST_LID_MIN) == {}  # no one joined the broadcast group


def test_daemon_broadcast_tree_reaches_its_members_and_shrinks_when_they_leave():
    t, d = _daemon()
    agent = d.sa.agent
    mgid = ipoib_broadcast_mgid()
    a, b = ca_gids(agent)[0], ca_gids(agent)[-1]  # on different leaves
    src = Address.gsi(1)
    rec = MCMemberRecord(mgid=mgid, port_gid=a, join_state=FULL)
    for gid in (a, b):
        assert _send(t, d, Method.SET, rec.replace(port_gid=gid), "mgid", "port_gid", "join_state", src=src).status == 0
    both = _holders(t, fw.MULTICAST_LID_MIN)
    (sa_, pa), (sb, pb) = _member_port(agent, a), _member_port(agent, b)
    assert sa_ != sb and pa in both[sa_] and pb in both[sb]
    assert len(both) < len(list(t.sim.switches()))  # only the switches between the two
    _send(t, d, Method.DELETE, rec, "mgid", "port_gid", "join_state", src=src)
    assert _holders(t, fw.MULTICAST_LID_MIN) == {sb: {pb}}
    assert mgid in agent.groups.groups  # well known: it outlives its members


def _run_for(d, now, seconds):
    for _ in range(int(seconds * 2)):
        now[0] += 0.5
        d.step(max_wait=0)


def test_daemon_port_that_leaves_the_subnet_leaves_its_groups():
    now = [1000.0]
    t, d = _daemon(now)
    agent = d.sa.agent
    a, b = ca_gids(agent)[1], ca_gids(agent)[-1]  # not the SM's own port
    src = Address.gsi(1)
    rec = MCMemberRecord(mgid=MGID, port_gid=a, q_key=0x0B1B, p_key=0xFFFF, join_state=FULL)
    assert _send(t, d, Method.SET, rec, *CREATE, src=src).status == 0
    mlid = agent.groups.groups[MGID].mlid
    assert _send(t, d, Method.SET, rec.replace(port_gid=b, join_state=SEND_ONLY_FULL), "mgid", "port_gid",
                 "join_state", src=src).status == 0
    (sb, pb) = _member_port(agent, b)
    assert pb in _holders(t, mlid)[sb]  # a send-only member is on the tree (OpenSM's rebuild keeps every member)
    sa_, pa = _member_port(agent, a)
    t.sim.unlink(sa_, pa)  # the full member's cable is pulled: the repair drops it from the group
    _run_for(d, now, 2)
    assert a not in agent.groups.groups[MGID].members
    assert _holders(t, mlid) == {sb: {pb}}  # the send-only full member keeps the group alive
    t.sim.unlink(sb, pb)
    _run_for(d, now, 2)
    assert MGID not in agent.groups.groups and _holders(t, mlid) == {}


def test_partitions_flagged_ipoib_get_their_broadcast_groups():
    from smagent.config import partitions
    from smagent.sm.daemon import Daemon, DaemonOptions
    from smagent.sweep import SweepOptions
    from smagent.transport.sim import SimTransport

    parts = partitions.parse("Default=0x7fff, ipoib, mtu=5, rate=7 : ALL=full;\n"
                             "storage=0x0002, ipoib, sl=1 : ALL=full;\nplain=0x0003 : ALL=full;\n")
    t = SimTransport()
    t.serve()
    d = Daemon(t, DaemonOptions(sweep=SweepOptions(partitions=parts)), clock=lambda: 1000.0)
    d.start()
    groups = d.sa.agent.groups.groups
    default, storage = groups[ipoib_broadcast_mgid(0x7FFF)], groups[ipoib_broadcast_mgid(0x0002)]
    assert len(groups) == 2 and f"{storage.mgid:032x}" == "ff12401b800200000000000000000000"[:16] + "00000000ffffffff"
    assert (default.mlid, default.mtu, default.rate, default.p_key) == (0xC000, 5, 7, 0xFFFF)
    assert (storage.mlid, storage.sl, storage.mtu, storage.p_key, storage.q_key) == (0xC001, 1, 4, 0x8002, 0x0B1B)


def test_a_group_made_by_a_join_and_a_leave_answer_as_opensm(agent):
    """A join that makes a group gives it what it carries (scope, packet lifetime, hop limit),
    masked or not; "less than" a rate the link carries is the next rate below; a leave
    answers the request with the group's scope and the JoinState left, and a leave of bits
    the member does not hold is refused (o15-0.1.14)."""
    a, b = ca_gids(agent)[:2]
    made = join(agent, a, mgid=0, scope=5, packet_life_time=7, extra=("rate_selector", "rate"), rate_selector=1,
                rate=codes.RATE_CODES[10]).record(MCMemberRecord)
    assert (made.scope, made.packet_life_time, made.rate) == (5, 7, codes.RATE_CODES[5])
    join(agent, b, mgid=made.mgid, state=SEND_ONLY | FULL)
    bad = ask(agent, Method.DELETE, MCMemberRecord(mgid=made.mgid, port_gid=a, join_state=FULL | SEND_ONLY), "mgid",
              "port_gid", "join_state")
    assert bad.sa_status is sa.SaStatus.ERR_REQ_INVALID  # a holds FULL only
    left = ask(agent, Method.DELETE, MCMemberRecord(mgid=made.mgid, port_gid=b, join_state=SEND_ONLY), "mgid",
               "port_gid", "join_state").record(MCMemberRecord)
    assert (left.port_gid, left.join_state, left.scope, left.q_key, left.mtu_selector) == (b, FULL, 5, 0, 2)


def path_ask(agent, method, pr, *fields, src=Address.gsi(1)):
    from mad.sa_records import PathRecord
    q = sa.request(method, pr, component_mask=PathRecord.mask(*fields), transaction_id=10)
    ((raw, _to),) = agent.handle(Incoming(q.encode(), src), 0.0)
    return sa.SaMad.decode(raw.ljust(256, b"\0"))


def test_path_record_to_a_group_is_the_request_with_the_groups_parameters(agent):
    """A PathRecord query to a multicast DGID, as OpenSM answers it (pr_process_multicast):
    a member's SGID gets the request back with the group's MLID, P_Key, SL, TClass, MTU,
    rate and packet lifetime (selectors 'exactly'), NumbPath 1 (Reversible 0), hop limit
    the group's (link-local MGID) or 255; a non-member's SGID, an unknown group, or a
    P_Key / SL / TClass / DLID other than the group's get none; MTU is not compared."""
    from mad.sa_records import PathRecord
    a, b = ca_gids(agent)[:2]
    ll = 0xFF12E00DFFFF0000000000000000ABCD  # link-local
    rec = join(agent, a, mgid=ll, extra=("mtu", "mtu_selector"), mtu=4, mtu_selector=2).record(MCMemberRecord)
    g = agent.groups.groups[ll]
    m = path_ask(agent, Method.GET, PathRecord(sgid=a, dgid=ll, reversible=1, service_id=7), "sgid", "dgid")
    assert m.status == 0
    want = PathRecord(sgid=a, dgid=ll, dlid=rec.mlid, service_id=7, num_path=1, p_key=0xFFFF, mtu_selector=2,
                      mtu=4, rate_selector=2, rate=g.rate, packet_life_time_selector=2,
                      packet_life_time=g.packet_life_time, hop_limit=g.hop_limit, sl=g.sl, tclass=g.tclass,
                      flow_label=g.flow_label)
    assert m.record(PathRecord) == want
    for pr, fields in ((PathRecord(sgid=b, dgid=ll), ("sgid", "dgid")),
                       (PathRecord(sgid=a, dgid=ll + 2), ("sgid", "dgid")),
                       (PathRecord(sgid=a, dgid=ll, p_key=0x7FFF), ("sgid", "dgid", "p_key")),
                       (PathRecord(sgid=a, dgid=ll, sl=1), ("sgid", "dgid", "sl")),
                       (PathRecord(sgid=a, dgid=ll, tclass=1), ("sgid", "dgid", "tclass")),
                       (PathRecord(sgid=a, dgid=ll, dlid=rec.mlid + 1), ("sgid", "dgid", "dlid"))):
        assert path_ask(agent, Method.GET, pr, *fields).sa_status is sa.SaStatus.ERR_NO_RECORDS, (pr, fields)
    big = path_ask(agent, Method.GET, PathRecord(sgid=a, dgid=ll, mtu=5), "sgid", "dgid", "mtu")
    assert big.status == 0 and big.record(PathRecord).mtu == 4
    # beyond link-local scope: hop limit 255; a group made after a first answer is found (none kept)
    site = MGID
    assert path_ask(agent, Method.GET, PathRecord(sgid=b, dgid=site), "sgid", "dgid").status != 0
    join(agent, b, mgid=site)
    found = path_ask(agent, Method.GET, PathRecord(sgid=b, dgid=site), "sgid", "dgid")
    assert found.record(PathRecord).hop_limit == 255


def test_requested_mgids_are_validated_as_opensm(agent):
    """OpenSM's ipoib_mcgroup_creation_validation: a new IPoIB group (401b/601b) needs its
    partition's and scope's broadcast group, with the same Q_Key (and P_Key, SL, ... where
    asked); an MGID with reserved flag bits, or the SA's signature a01b at link-local
    scope, is refused."""
    a = ca_gids(agent)[0]
    ipv6_all_nodes = 0xFF12601BFFFF << 80 | 1
    bad = sa.SaStatus.ERR_REQ_INVALID
    assert join(agent, a, mgid=ipv6_all_nodes).sa_status is bad  # no broadcast group yet
    agent.groups.precreate(ipoib_broadcast_mgid(), mtu=4, rate=3)
    assert join(agent, a, mgid=ipv6_all_nodes).status == 0
    for mgid, kw in ((0xFF12401BFFFF << 80 | 0x1234, {"q_key": 1}),  # not the broadcast group's Q_Key
                     (0xFF15401BFFFF << 80 | 0x1234, {}),  # no site-local broadcast group
                     (0xFF12401B7FFF << 80 | 0x1234, {}),  # nor one of P_Key 0x7fff
                     (0xFF12A01BFFFF << 80 | 0x1234, {}),  # a01b, link-local
                     (0xFF32 << 112 | 0x1234, {})):  # reserved flags
        assert join(agent, a, mgid=mgid, **kw).sa_status is bad, hex(mgid)
    assert join(agent, a, mgid=0xFF12401BFFFF << 80 | 0x1234).status == 0
