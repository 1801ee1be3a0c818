"""The in-process SA tests' shared fixtures and helpers: one swept simulated fabric's
`Subnet` per module, a fresh `SaAgent` answering from it per test (imported by the test
files that use them), and `table`: a GetTable's records through our RMPP receiver."""
import pytest

import smagent
from mad import sa
from mad.header import Method
from mad.rmpp import RmppReceiver, RmppState
from smagent.sa import SaAgent
from smagent.subnet import Subnet
from smagent.transport.address import Address, Incoming


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


def table(agent, record, *fields, drop=None, src=Address.gsi(1), **kw):
    """A GetTable's records, reassembled by an RMPP receiver (segment ``drop`` lost once)."""
    q = sa.request(Method.GET_TABLE, record, component_mask=type(record).mask(*fields) if fields else 0,
                   transaction_id=77, **kw)
    rx = RmppReceiver(class_header_size=sa.SA_HEADER_SIZE)
    pending, now = [m for m, _a in agent.handle(Incoming(q.encode(), src), 0.0)], 0.0
    while not rx.finished:
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
