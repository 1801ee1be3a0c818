"""Requests served while the daemon computes (`smagent.sm.serving`): an SA PathRecord Get
that arrives while a sweep is routing (pure computation, no transport call) is answered
then, by the serving thread, from the snapshot the sweep before published; outside a sweep
that thread touches nothing; it never uses the transport while the daemon's thread does."""
import gc
import threading
import time

from mad import sa
from mad.header import Method
from mad.sa_records import PathRecord
from smagent.sm.daemon import Daemon, DaemonOptions
from smagent.sm import sa_service
from smagent.sm.serving import SERVING_GC_THRESHOLD, BusyServer
from smagent.sweep import pipeline
from smagent.transport.address import Address
from smagent.transport.sim import SimTransport


def make():
    t = SimTransport()
    t.serve()
    d = Daemon(t, DaemonOptions())
    d.start()
    return t, d


def path_get(d, tid):
    lids = sorted(d.sa.agent.subnet.lids)
    return sa.request(Method.GET, PathRecord(slid=lids[0], dlid=lids[-1]), component_mask=PathRecord.mask("slid", "dlid"),
                      transaction_id=tid).encode()


def test_a_path_record_get_is_answered_while_routing_computes(monkeypatch):
    t, d = make()
    before = d.sa.agent.subnet
    src = Address.gsi(before.sm_lid)
    seen: dict = {}
    real_route = pipeline.route

    def routing_in_progress(s):
        t.outbox.clear()
        t.deliver(path_get(d, 91), src)  # arrives while this thread computes
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and not t.outbox:
            sum(range(1000))  # computing: no transport call from this thread
        seen["answers"] = list(t.outbox)
        seen["snapshot"] = d.sa.agent.subnet
        real_route(s)

    monkeypatch.setattr(pipeline, "route", routing_in_progress)
    d.duties.sweep("test")
    ((raw, to),) = seen["answers"]
    m = sa.SaMad.decode(raw)
    assert to == src.reply() and m.transaction_id == 91 and m.status == 0
    assert m.record(PathRecord).dlid == sorted(before.lids)[-1]
    assert seen["snapshot"] is before  # answered from the last published snapshot, not the sweep's
    assert d.sa.agent.subnet is not before  # which the finished sweep replaced


def test_a_request_that_comes_while_the_new_snapshot_is_built_is_answered_from_the_last(monkeypatch):
    """Building the finished sweep's snapshot takes tens of ms on a big fabric: it is built
    while the serving thread still answers, not after it has stopped."""
    t, d = make()
    before = d.sa.agent.subnet
    src = Address.gsi(before.sm_lid)
    seen: dict = {}
    real = sa_service.SaService.snapshot

    def slow_snapshot(self, result):
        t.outbox.clear()
        t.deliver(path_get(d, 93), src)
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and not t.outbox:
            sum(range(1000))
        seen["answers"] = list(t.outbox)
        return real(self, result)

    monkeypatch.setattr(sa_service.SaService, "snapshot", slow_snapshot)
    d.duties.sweep("test")
    ((raw, _to),) = seen["answers"]
    assert sa.SaMad.decode(raw).transaction_id == 93 and sa.SaMad.decode(raw).status == 0
    assert d.sa.agent.subnet is not before


def test_the_collector_makes_no_full_pass_while_serving_and_is_restored_after():
    t, d = make()
    threshold = gc.get_threshold()
    with d.busy.serving():
        inside = gc.get_threshold()
    assert inside == SERVING_GC_THRESHOLD and inside[2] > 10 ** 6
    assert gc.get_threshold() == threshold


def test_nothing_is_served_from_the_second_thread_outside_a_sweep():
    t, d = make()
    src = Address.gsi(d.sa.agent.subnet.sm_lid)
    t.outbox.clear()
    t.deliver(path_get(d, 92), src)
    time.sleep(0.1)
    assert t.outbox == []  # waits for the loop
    d.step(max_wait=0)
    assert [sa.SaMad.decode(raw).transaction_id for raw, _to in t.outbox] == [92]


def test_one_thread_at_a_time_uses_the_transport():
    """The serving thread polls while the daemon's thread is out of the transport, never
    while it is in (here: in `poll`, waiting in the backend)."""
    t = SimTransport()
    inside: list[int] = []
    overlaps: list[list[int]] = []
    threads: set[int] = set()
    real_recv = t._recv

    def recv(timeout_s):
        inside.append(threading.get_ident())
        threads.add(threading.get_ident())
        if len(inside) > 1:
            overlaps.append(list(inside))
        try:
            if threading.current_thread() is threading.main_thread():
                time.sleep(0.02)  # long enough for the serving thread to try
            return real_recv(timeout_s)
        finally:
            inside.remove(threading.get_ident())

    t._recv = recv
    t.on_request = lambda m: None
    busy = BusyServer(t, period_s=0.001)
    with busy.serving():
        for _ in range(10):
            t.poll(0.001)  # the daemon's thread in the transport
            time.sleep(0.01)  # and out of it: the serving thread's turn
    assert overlaps == [] and len(threads) == 2


def test_a_late_answer_read_while_the_sweep_computes_counts_as_late():
    """What the serving thread reads that is no request (an SMP answered after its batch
    gave up on it) counts as a late answer, as the next batch would have counted it."""
    from mad import smp as smpcodec
    from mad.attributes import AttrID
    t = SimTransport()
    t.on_request = lambda m: None
    busy = BusyServer(t, period_s=0.001)
    late = smpcodec.encode(smpcodec.response_to(smpcodec.decode(smpcodec.dr_raw(Method.GET, AttrID.NODE_INFO, (0,)))))
    with busy.serving():
        t._queue.append((late, 0))
        deadline = time.monotonic() + 5.0
        while t._queue and time.monotonic() < deadline:
            sum(range(1000))  # computing
    assert t._queue == [] and t.stats.late == 1


def test_a_flood_of_sa_and_sminfo_requests_through_a_sweep_is_answered_whole():
    """Stress: a third thread floods PathRecord and SMInfo Gets for the whole of a sweep (so
    they arrive while the daemon's thread uses the transport and while it computes): each
    is answered exactly once, correctly, and the SMInfo counter adds up."""
    from mad import smp as smpcodec
    from mad.attributes import AttrID
    t, d = make()
    before = d.sa.agent.subnet
    src = Address.gsi(before.sm_lid)
    n_sa, n_smi = 300, 60
    sminfo_before = d.counters.sminfo_gets_answered
    t.outbox.clear()
    stop = threading.Event()

    def flood():
        for i in range(max(n_sa, n_smi)):
            if i < n_sa:
                t.deliver(path_get(d, 1000 + i), src)
            if i < n_smi:
                t.deliver(smpcodec.encode(smpcodec.dr(Method.GET, AttrID.SM_INFO, (0,))))
            time.sleep(0.0002)
        stop.set()

    feeder = threading.Thread(target=flood)
    feeder.start()
    while not stop.is_set():
        d.duties.sweep("test")
    feeder.join()
    d.step(max_wait=0)  # what came after the last sweep: the loop's own turn
    sa_tids, smi = [], 0
    for raw, to in t.outbox:
        if raw[1] == 0x03:  # SUBN_ADM
            m = sa.SaMad.decode(raw)
            assert m.status == 0 and to == src.reply()
            assert m.record(PathRecord).dlid == sorted(before.lids)[-1]
            sa_tids.append(m.transaction_id)
        elif smpcodec.decode(raw).attribute_id == AttrID.SM_INFO:
            smi += 1
    assert sorted(sa_tids) == list(range(1000, 1000 + n_sa))  # each exactly once
    assert smi == n_smi == d.counters.sminfo_gets_answered - sminfo_before


def test_the_tuning_is_restored_and_the_thread_ended_when_the_body_raises():
    import sys
    t, d = make()
    threshold, interval = gc.get_threshold(), sys.getswitchinterval()
    try:
        with d.busy.serving():
            raise KeyError("boom")
    except KeyError:
        pass
    assert gc.get_threshold() == threshold and sys.getswitchinterval() == interval
    assert not [th for th in threading.enumerate() if th.name == "smagent-serve"]
