"""Event subscriptions (InformInfo Set, InformInfoRecord) and Reports (smagent.sa.informs
through the SA agent and the daemon, in-process): a subscriber gets a Report of every
notice its subscription matches (groups created and deleted, CA ports in and out of
service, traps forwarded), a ReportResp ends the retries, an unanswered Report is sent
again and then the subscription dropped."""

from mad import sa
from mad.header import Method
from mad.sa_records import InformInfo, InformInfoRecord, MCMemberRecord, SaNotice
from smagent.sa import informs as inf
from smagent.sa.groups import FULL
from smagent.transport.address import Address, Incoming
from sa_fixtures import agent, subnet  # noqa: F401 (the fixtures)

CREATE = ("mgid", "port_gid", "q_key", "p_key", "sl", "flow_label", "tclass", "join_state")
ALL_GENERIC = dict(lid_range_begin=0xFFFF, is_generic=1, subscribe=1, type=0xFFFF, qpn=1,
                   producer_type_or_vendor_id=0xFFFFFF)


def cas(agent):
    s = agent.subnet
    return [(agent._recs.gid(n, p), s.base_lid(n, p)) for n in sorted(s.nodes.values(), key=lambda n: n.guid)
            if not n.is_switch for p in n.lid_ports()]


def send(agent, method, record, *fields, src, now=0.0, tid=3):
    q = sa.request(method, record, component_mask=type(record).mask(*fields), transaction_id=tid)
    return agent.handle(Incoming(q.encode(), src), now)


def subscribe(agent, lid, **kw):
    ((raw, _to),) = send(agent, Method.SET, InformInfo(**{**ALL_GENERIC, **kw}), src=Address.gsi(lid))
    return sa.SaMad.decode(raw)


def reports(out):
    return [(sa.SaMad.decode(raw), to) for raw, to in out if raw[3] == Method.REPORT]


def test_subscriber_gets_reports_of_groups_created_and_deleted(agent):
    (g1, l1), (g2, l2) = cas(agent)[:2]
    m = subscribe(agent, l1, trap_number_or_device_id=0xFFFF)
    assert m.method == Method.GET_RESP and m.status == 0
    (rec,) = [sa.SaMad.decode(raw.ljust(256, b"\0")).record(InformInfoRecord) for raw, _ in
              send(agent, Method.GET_TABLE, InformInfoRecord(), src=Address.gsi(l1))]
    assert (rec.subscriber_gid, rec.enum, rec.qpn, rec.trap_number_or_device_id) == (g1, 1, 0, 0xFFFF)  # QPN: SM_Key
    join = MCMemberRecord(mgid=0, port_gid=g2, q_key=0x0B1B, p_key=0xFFFF, join_state=FULL)
    out = send(agent, Method.SET, join, *CREATE, src=Address.gsi(l2), now=10.0)
    (rep, to), = reports(out)
    assert to.lid == l1 and to.qpn == 1 and out[0][1].lid == l2  # the answer first, to the joiner
    n = rep.record(SaNotice)
    mgid = sa.SaMad.decode(out[0][0]).record(MCMemberRecord).mgid
    assert (n.trap_number_or_device_id, n.type, n.producer_type_or_vendor_id) == (inf.MCG_CREATED, 3, 4)
    assert int.from_bytes(bytes(n.data_details)[6:22], "big") == mgid and n.issuer_lid == agent.subnet.sm_lid
    # ReportResp ends it: nothing is sent again
    resp = bytearray(rep.encode())
    resp[3] = Method.REPORT_RESP
    assert agent.handle(Incoming(bytes(resp), Address.gsi(l1)), 10.1) == [] and agent.deadline is None
    leave = MCMemberRecord(mgid=mgid, port_gid=g2, join_state=FULL)
    out = send(agent, Method.DELETE, leave, "mgid", "port_gid", "join_state", src=Address.gsi(l2), now=11.0)
    (rep, _), = reports(out)
    assert rep.record(SaNotice).trap_number_or_device_id == inf.MCG_DELETED


def test_subscriptions_select_by_trap_and_port(agent):
    (g1, l1), (g2, l2), (g3, l3) = cas(agent)[:3]
    subscribe(agent, l1, trap_number_or_device_id=inf.GID_OUT)  # only 65
    subscribe(agent, l2, trap_number_or_device_id=0xFFFF, lid_range_begin=l3, lid_range_end=l3)  # about l3
    assert {to.lid for _m, to in reports(agent.sm_notice(inf.GID_OUT, g3, 0.0))} == {l1, l2}
    assert {to.lid for _m, to in reports(agent.sm_notice(inf.GID_IN, g3, 0.0))} == {l2}
    assert reports(agent.sm_notice(inf.GID_IN, g1, 0.0)) == []
    # unsubscribe: Subscribe 0 with the same InformInfo; an unknown one is refused
    assert subscribe(agent, l1, trap_number_or_device_id=inf.GID_OUT, subscribe=0).status == 0
    assert {to.lid for _m, to in reports(agent.sm_notice(inf.GID_OUT, g3, 0.0))} == {l2}
    bad = subscribe(agent, l1, trap_number_or_device_id=inf.GID_OUT, subscribe=0)
    assert bad.sa_status is sa.SaStatus.ERR_REQ_INVALID
    assert subscribe(agent, l1, subscribe=2).sa_status is sa.SaStatus.ERR_REQ_INVALID


def send_from(agent, lid, source_qp, sm_key=0, **kw):
    info = InformInfo(**{**ALL_GENERIC, "trap_number_or_device_id": 0xFFFF, **kw})
    q = sa.request(Method.SET, info, transaction_id=3, sm_key=sm_key)
    ((raw, _to),) = agent.handle(Incoming(q.encode(), Address(lid=lid, qpn=source_qp)), 0.0)
    return sa.SaMad.decode(raw)


def test_subscriptions_as_opensm_keeps_them(subnet):
    """As OpenSM 3.3: the QPN a subscription keeps (and Reports go to) is the QP the Set
    came from, whatever the InformInfo says (0 included), and an unsubscribe names it; the
    answer is the request; InformInfoRecords newest first, selected by SubscriberGID and
    Enum alone, QPN 0 without the SM_Key; a GID of no port, a LID range beginning past the
    LIDs in use and (without the SM_Key) security traps are refused; a range ending below
    its beginning is taken."""
    from smagent.sa import SaAgent
    agent = SaAgent(sm_key=0x77)
    agent.publish(subnet)
    (g1, l1), (g2, l2), (g3, l3) = cas(agent)[:3]
    m = send_from(agent, l1, 0x40, qpn=0)
    assert m.status == 0 and m.record(InformInfo).qpn == 0  # the request, as sent
    (_rep, to), = reports(agent.sm_notice(inf.GID_IN, g3, 0.0))
    assert (to.lid, to.qpn) == (l1, 0x40)
    assert send_from(agent, l1, 0x40, qpn=0, subscribe=0).sa_status is sa.SaStatus.ERR_REQ_INVALID
    assert send_from(agent, l2, 1, qpn=1, lid_range_begin=5, lid_range_end=2).status == 0
    table = [sa.SaMad.decode(raw.ljust(256, b"\0")) for raw, _ in
             send(agent, Method.GET_TABLE, InformInfoRecord(trap_number_or_device_id=7), "trap_number_or_device_id",
                  src=Address.gsi(l3))]
    recs = sa.decode_table(table[0].data[:2 * 64], InformInfoRecord, table[0].attribute_offset)
    assert [(r.subscriber_gid, r.qpn) for r in recs] == [(g2, 0), (g1, 0)]  # newest first, QPNs hidden
    q = sa.request(Method.GET, InformInfoRecord(subscriber_gid=g1), component_mask=InformInfoRecord.mask(
        "subscriber_gid"), transaction_id=9, sm_key=0x77)
    ((raw, _),) = agent.handle(Incoming(q.encode(), Address.gsi(l3)), 0.0)
    assert sa.SaMad.decode(raw.ljust(256, b"\0")).record(InformInfoRecord).qpn == 0x40  # trusted: the QPN
    assert send_from(agent, l1, 1, qpn=0x40, subscribe=0).sa_status is sa.SaStatus.ERR_REQ_INVALID  # another QP
    assert send_from(agent, l1, 0x40, qpn=0x40, subscribe=0).status == 0  # from the QP kept, naming it
    assert [s.lid for s in agent.informs.subs] == [l2]
    refused = [send_from(agent, l3, 1, gid=0xFE80 << 112 | 0xDEAD, lid_range_begin=0),
               send_from(agent, l3, 1, lid_range_begin=max(subnet.lids) + 1),
               send_from(agent, l3, 1, trap_number_or_device_id=256)]
    assert [m.sa_status for m in refused] == [sa.SaStatus.ERR_REQ_INVALID] * 3
    assert send_from(agent, l3, 1, sm_key=0x77, trap_number_or_device_id=257).status == 0


def test_unanswered_reports_are_sent_again_then_the_subscriber_dropped(agent):
    (g1, l1), (g2, _l2) = cas(agent)[:2]
    subscribe(agent, l1, trap_number_or_device_id=0xFFFF)
    (first, _), = reports(agent.sm_notice(inf.GID_IN, g2, 100.0))
    assert agent.deadline == 100.0 + inf.REPORT_TIMEOUT_S
    assert agent.on_timeout(100.5) == []
    now = 100.0
    for _ in range(inf.REPORT_RETRIES):
        now += inf.REPORT_TIMEOUT_S
        (again, _to), = agent.on_timeout(now)
        assert again == first.encode()  # the same Report, the same TID
    assert agent.on_timeout(now + inf.REPORT_TIMEOUT_S) == []
    assert agent.informs.subs == [] and agent.informs.dropped == 1 and agent.deadline is None


def test_daemon_reports_ports_in_and_out_of_service_and_forwards_traps():
    from smagent.sm.daemon import Daemon, DaemonOptions
    from smagent.transport.sim import SimTransport
    t = SimTransport()
    t.serve()
    d = Daemon(t, DaemonOptions(trap_settle=0), clock=lambda: 1000.0)
    d.start()
    (g1, l1), (g2, l2) = cas(d.sa.agent)[-2:]
    t.outbox.clear()
    t.deliver(sa.request(Method.SET, InformInfo(**ALL_GENERIC, trap_number_or_device_id=0xFFFF),
                         transaction_id=8).encode(), Address.gsi(l1))
    d.step(max_wait=0)
    assert d.status()["sa"]["subscriptions"] == 1
    # the port of g2 goes down: a trap 128 from its switch (forwarded), then the repair's
    # snapshot lacks g2 (trap 65 about it)
    node, port = d.sa.agent.subnet.port_of_guid(g2 & (1 << 64) - 1)
    sim_node = next(n for n in t.sim if n.guid == node.guid)
    t.outbox.clear()
    t.sim.unlink(sim_node.name, port)
    for _ in range(5):
        d.step(max_wait=0.05)
    got = [sa.SaMad.decode(raw).record(SaNotice) for raw, to in t.outbox
           if raw[1] == sa.SA_CLASS and raw[3] == Method.REPORT and to.lid == l1]
    numbers = [n.trap_number_or_device_id for n in got]
    assert 128 in numbers and inf.GID_OUT in numbers, numbers
    gone = next(n for n in got if n.trap_number_or_device_id == inf.GID_OUT)
    assert int.from_bytes(bytes(gone.data_details)[6:22], "big") == g2


def test_cli_refuses_a_bad_subscription_before_opening_a_port(cli):
    for args, says in ((["zz"], "TRAP 'zz' is not a number"), (["1", "--qpn", "0x1000000"], "does not fit in 24 bits"),
                       (["1", "--gid", "0x0000000000000001", "--lids", "1"], "give --gid or --lids, not both"),
                       (["1", "--gid", "5"], "a port GUID (0x and 16 hex digits) is needed"),
                       (["1", "--lids", "1-x"], "--lids 'x' is not a number")):
        r = cli("--transport", "umad", "sa", "subscribe", *args)
        assert r.exit_code == 2 and says in r.output, (args, r.output)


def test_reports_go_the_way_the_subscription_came(agent):
    """A Report leaves with the Set's P_Key index, SL and GRH (a subscriber in another
    partition, or behind a router, is reached as it asked), to the QPN it subscribed."""
    from smagent.transport.address import Grh
    lid = agent.subnet.sm_lid
    grh = Grh(bytes(range(16)), 0, 64, 0, 0)
    src = Address.gsi(lid, sl=3, pkey_index=2, grh=grh)
    ((raw, _to),) = send(agent, Method.SET, InformInfo(**{**ALL_GENERIC, "trap_number_or_device_id": 0xFFFF}), src=src)
    assert sa.SaMad.decode(raw).status == 0
    out = reports(agent.notify(inf.sm_notice(inf.MCG_CREATED, 0xFF12401BFFFF0000_0000000000000001, lid, 0), 0.0))
    assert out, "no Report"
    to = out[0][1]
    assert (to.lid, to.sl, to.pkey_index, to.grh, to.qkey) == (lid, 3, 2, grh, 0x80010000)


def test_a_lost_leaf_is_reported_out_of_service_with_its_hosts_and_its_return_in_service():
    """A leaf switch lost with every link (a repair, no full sweep): trap 65 about its
    port 0 and about each host port cut off behind it, as OpenSM reports every end port
    that leaves (switch port 0s too); put back (a full sweep finds it): trap 64 for each."""
    from smagent.model import topogen
    from smagent.sm.daemon import Daemon, DaemonOptions
    from smagent.transport.sim import SimTransport
    t = SimTransport(topogen.fat_tree_3(4))
    t.serve()
    d = Daemon(t, DaemonOptions(trap_settle=0), clock=lambda: 1000.0)
    d.start()
    (_g, l1), = cas(d.sa.agent)[:1]
    t.deliver(sa.request(Method.SET, InformInfo(**ALL_GENERIC, trap_number_or_device_id=0xFFFF),
                         transaction_id=8).encode(), Address.gsi(l1))
    d.step(max_wait=0)
    sim = t.sim
    leaf = sim.node("L3")
    gids = {d.sa.agent._recs.gid(d.sa.agent.subnet.nodes[n.guid], p) for n, p in
            ((leaf, 0), (sim.node("H6"), 1), (sim.node("H7"), 1))}

    def subjects(trap):
        got = [sa.SaMad.decode(raw).record(SaNotice) for raw, to in t.outbox
               if raw[1] == sa.SA_CLASS and raw[3] == Method.REPORT and to.lid == l1]
        return {int.from_bytes(bytes(n.data_details)[6:22], "big") for n in got if n.trap_number_or_device_id == trap}
    t.outbox.clear()
    cables = [(p, sim.unlink("L3", p)) for p in range(1, leaf.num_ports + 1) if leaf.peers[p]]
    for _ in range(5):
        d.step(max_wait=0.05)
    assert d.last_sweep["incremental"] and subjects(inf.GID_OUT) == gids
    t.outbox.clear()
    for p, (peer, pp) in cables:
        sim.link("L3", p, peer, pp)
    d.duties.sweep("the leaf is back")
    assert subjects(inf.GID_IN) == gids
