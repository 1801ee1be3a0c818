"""The SA inside the daemon (in-process simulator): class-0x03 MADs reach the SA agent,
which answers from the snapshot the last sweep published; a STANDBY's SA serves nothing
and says so; a multi-MAD GetTableResp is retransmitted by the daemon's loop when its
ACK does not come."""
from mad import sa
from mad.attributes import SMState
from mad.header import Method
from mad.sa_records import NodeRecord, PathRecord, SMInfoRecord
from smagent.sm.daemon import Daemon, DaemonOptions
from smagent.transport.address import Address
from smagent.transport.sim import SimTransport


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def make(priority=0):
    t = SimTransport()
    t.serve()
    clock = Clock()
    return t, Daemon(t, DaemonOptions(priority=priority), clock=clock), clock


def ask(t, d, method, record, *fields, src):
    q = sa.request(method, record, component_mask=type(record).mask(*fields) if fields else 0, transaction_id=42)
    t.outbox.clear()
    t.deliver(q.encode(), src)
    d.step(max_wait=0)
    return [(sa.SaMad.decode(raw), to) for raw, to in t.outbox]


def test_master_answers_sa_queries_from_its_sweep():
    t, d, clock = make()
    d.start()
    assert d.sm.state == SMState.MASTER and d.sa.agent.subnet is not None
    me = d.sa.agent.subnet.sm_lid
    src = Address.gsi(me)
    ((m, to),) = ask(t, d, Method.GET, NodeRecord(lid=me), "lid", src=src)
    assert to == src.reply() and m.method == Method.GET_RESP and m.status == 0
    assert m.record(NodeRecord).port_guid == d.sm.guid
    lids = sorted(d.sa.agent.subnet.lids)
    ((m, _),) = ask(t, d, Method.GET, PathRecord(slid=lids[0], dlid=lids[-1]), "slid", "dlid", src=src)
    assert m.status == 0 and m.record(PathRecord).dlid == lids[-1]
    ((m, _),) = ask(t, d, Method.GET, SMInfoRecord(lid=me), "lid", src=src)
    rec = m.record(SMInfoRecord)
    assert (rec.guid, rec.sm_state, rec.sm_key) == (d.sm.guid, SMState.MASTER, 0)
    assert d.status()["sa"] == {"answered": 3, "tables_in_flight": 0, "tables_pending": 0, "snapshot": d.counters.sweeps, "groups": 1,
                              "groups_pending": False, "subscriptions": 0, "reports_sent": 0}


def test_unanswered_table_segments_are_sent_again_by_the_loop():
    t, d, clock = make()
    d.start()
    src = Address.gsi(d.sa.agent.subnet.sm_lid)
    from mad.rmpp import RmppReceiver
    first = ask(t, d, Method.GET_TABLE, NodeRecord(), src=src)
    assert len(first) == 1 and first[0][0].rmpp.segment_number == 1 and d.sa.deadline < float("inf")
    t.outbox.clear()
    clock.now = d.sa.deadline
    d.step(max_wait=0)
    assert t.outbox == []  # segment 1 never ACKed: not sent again (the requester resends its request)
    (ack,) = RmppReceiver(class_header_size=sa.SA_HEADER_SIZE, window=1).on_mad(first[0][0].encode(), clock.now)
    t.deliver(ack, src)  # a late ACK, a window of one more segment
    d.step(max_wait=0)
    assert [sa.SaMad.decode(raw).rmpp.segment_number for raw, _to in t.outbox] == [2]
    t.outbox.clear()
    clock.now = d.sa.deadline
    d.step(max_wait=0)
    assert [sa.SaMad.decode(raw).rmpp.segment_number for raw, _to in t.outbox] == [2]  # unACKed: sent again


def test_standby_sa_serves_nothing_and_says_so():
    t, d, clock = make(priority=1)
    t.sim.attach_sm(("H5", 1), priority=9, state=SMState.MASTER)
    d.start()
    assert d.sm.state == SMState.STANDBY
    ((m, _),) = ask(t, d, Method.GET, NodeRecord(lid=1), "lid", src=Address.gsi(1))
    assert m.method == Method.GET_RESP and m.status == 0x000C


def test_answered_mid_sweep_from_the_last_snapshot():
    """An SA Get that arrives while a sweep's batches are in flight is answered there and
    then, from the snapshot the sweep before published (the new one is not half-built)."""
    t, d, clock = make()
    d.start()
    before = d.sa.agent.subnet
    src = Address.gsi(before.sm_lid)
    q = sa.request(Method.GET, NodeRecord(lid=before.sm_lid), component_mask=NodeRecord.mask("lid"),
                   transaction_id=77).encode()
    seen = {"sent": 0, "answered_at": None}

    def on_send(_req):
        seen["sent"] += 1
        if seen["sent"] == 3:
            t.deliver(q, src)
        if seen["answered_at"] is None and any(to == src.reply() for _raw, to in t.outbox):
            seen["answered_at"] = seen["sent"]
            assert d.sa.agent.subnet is before  # still the old snapshot: the sweep is not done
    t.outbox.clear()
    t.on_send = on_send
    d.duties.sweep("test")
    t.on_send = None
    assert seen["answered_at"] is not None and seen["answered_at"] < seen["sent"]  # before the sweep's last SMP
    (answer,) = [sa.SaMad.decode(raw) for raw, to in t.outbox if to == src.reply()]
    assert answer.status == 0 and answer.record(NodeRecord).lid == before.sm_lid
    assert d.sa.agent.subnet is not before and d.sa.agent.subnet.generation > before.generation
