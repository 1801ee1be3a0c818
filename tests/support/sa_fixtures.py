"""The in-process SA tests' shared fixtures and helpers: one swept simulated fabric's
`Subnet` per module, a fresh `SaAgent` answering from it per test (imported by the test
files that use them), and `table`: a GetTable's records through our RMPP receiver."""
import pytest

import smagent
from mad import sa
from mad.header import Method
from mad.rmpp import RmppReceiver, RmppState
from smagent.sa import SaAgent
from smagent.model.subnet import Subnet
from smagent.transport.address import Address, Incoming
from mad.sa_records import PathRecord


@pytest.fixture(scope="module")
def subnet():
    with smagent.connect("sim") as fabric:
        r = fabric.sweep()
    return Subnet.from_sweep(r)


@pytest.fixture
def agent(subnet):
    a = SaAgent()
    a.publish(subnet)
    return a


def table(agent, record, *fields, drop=None, src=Address.gsi(1), modifier=0, **kw):
    """A GetTable's records, reassembled by an RMPP receiver (segment ``drop`` lost once;
    ``modifier``: the request's AttributeModifier)."""
    q = sa.request(Method.GET_TABLE, record, component_mask=type(record).mask(*fields) if fields else 0,
                   transaction_id=77, **kw)
    q = q.replace(attribute_modifier=modifier) if modifier else q
    rx = RmppReceiver(class_header_size=sa.SA_HEADER_SIZE)
    pending, now = [m for m, _a in agent.handle(Incoming(q.encode(), src), 0.0)], 0.0
    while not rx.finished:
        if not pending and agent.working:  # a table worked out later (every pair's PathRecords)
            pending = [m for m, _a in agent.work(now, lambda: True)]
            continue
        if not pending:  # nothing in flight: let the sender's timer run out
            now = agent.deadline
            assert now is not None, "the sender gave up"
            pending = [m for m, _a in agent.on_timeout(now)]
            continue
        mad, pending = pending[0], pending[1:]
        seg, flags = int.from_bytes(mad[28:32], "big"), mad[26] & 7
        if flags & 4:  # the last segment ends with its payload (saquery counts records by length)
            assert len(mad) == 36 + int.from_bytes(mad[32:36], "big")
            mad = mad.ljust(256, b"\0")
        else:
            assert len(mad) == 256
        if seg == drop:
            drop = None
            continue
        for ack in rx.on_mad(mad, now):
            pending += [m for m, _a in agent.handle(Incoming(ack, src), now)]
    assert rx.state is RmppState.DONE
    first = sa.SaMad.decode(rx.first)
    assert first.method == Method.GET_TABLE_RESP and first.status == 0
    return sa.decode_table(rx.data, type(record), first.attribute_offset)


_TIDS = iter(range(1000, 2000))  # a TID per transaction: the SA takes a repeated one for a duplicate
ME = Address.gsi(1)


def multi(agent, mpr, gids, *fields, src=None):
    """A GetMulti as a requester (``src``, else ME) sends it (an RMPP transfer: one segment
    for up to 11 GIDs), the SA's ACKs fed to our sender, its GetMultiResp reassembled:
    (status, PathRecords)."""
    me = src if src is not None else ME
    from mad.rmpp import RmppSender, RmppType, rmpp_of
    from mad.sa_records import MultiPathRecord
    tid = next(_TIDS)
    pad = list(gids[:11]) + [0] * (11 - len(gids[:11]))
    raw = sa.request(Method.GET_MULTI, mpr.replace(sdgids=pad), component_mask=MultiPathRecord.mask(*fields),
                     transaction_id=tid).encode()
    data = raw[sa.SA_HEADER.stop:sa.SA_HEADER.stop + 24] + b"".join(g.to_bytes(16, "big") for g in gids)
    tx = RmppSender(raw[:24], raw[sa.SA_HEADER], data, timeout=1.0)
    rx = RmppReceiver(class_header_size=sa.SA_HEADER_SIZE)
    to_sa, now = tx.start(0.0), 0.0
    while not rx.finished:
        assert to_sa, "the exchange stalled"
        out = [m for req in to_sa for m, _a in agent.handle(Incoming(req, me), now)]
        to_sa = []
        for m in out:
            assert m[3] == Method.GET_MULTI_RESP
            hdr = rmpp_of(m.ljust(256, b"\0"))
            if hdr.active and hdr.rmpp_type == RmppType.ACK and not rx.first:
                to_sa += tx.on_mad(m, now)  # the SA ACKs our request's segments
            else:
                to_sa += rx.on_mad(m.ljust(256, b"\0"), now)
    for ack in to_sa:  # our last ACK ends the SA's sender
        assert agent.handle(Incoming(ack, me), now) == []
    first = sa.SaMad.decode(rx.first)
    assert first.attribute_id == sa.SaAttrID.PATH_RECORD
    return first.status, sa.decode_table(rx.data, PathRecord, first.attribute_offset) if not first.status else []
