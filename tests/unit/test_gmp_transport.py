"""GMPs (any class on QP1) through the generic transport: the same window, TID matching
on the low 32 bits, timeouts, retries, busy answers, stats and recording as SMPs, with
the whole address handed to the backend; the SMP layer (M_Keys) leaves them alone; an
incoming request carries its address to `on_request` and is answered there.

`PerfAgents` is a backend whose class 0x04 agents answer in-process (as ibsim's do),
with scripted losses and busy answers."""
from __future__ import annotations

import pytest

from mad import gmp, perfmgt
from mad import smp as smpcodec
from mad.attributes import AttrID
from mad.header import GSI_QKEY, MadHeader, Method
from smagent.errors import BadInput
from smagent.config.mkeys import KeyChain
from smagent.transport.address import Address, Grh, Incoming
from smagent.transport.base import Request, SmpStatusError, SmpTimeout, TransportError
from smagent.transport.immediate import ImmediateTransport
from smagent.transport.sim import SimTransport


class PerfAgents(ImmediateTransport):
    """PerfMgt agents at LIDs 1..9: PortCounters with PortSelect echoed and
    SymbolErrorCounter = LID; `lose` / `busy`: how many tries of a TID-less key to drop or
    answer busy; `upper`: the high TID half the 'kernel' writes into answers."""
    name = "perf"

    def __init__(self, **kw):
        super().__init__(**kw)
        self.sent: list[tuple[bytes, Address]] = []
        self.lose = self.busy = 0
        self.upper = 0x5A5A0000

    def _answer(self, raw, dlid):
        return None

    def _answer_to(self, raw, addr):
        self.sent.append((raw, addr))
        if self.lose:
            self.lose -= 1
            return None
        h = gmp.header_of(raw)
        status = 0
        if self.busy:
            self.busy -= 1
            status = 1
        asked = perfmgt.PortCounters.decode(gmp.data_of(raw))
        resp = bytearray(gmp.response_to(raw, status=status, data=perfmgt.PortCounters(
            port_select=asked.port_select, symbol_error_counter=addr.lid)))
        resp[8:12] = self.upper.to_bytes(4, "big")  # the kernel's half of the TID
        assert h.mgmt_class == 0x04
        return bytes(resp)


def counters(lid, port=1):
    return Request.gmp(perfmgt.port_counters_get(port, tid=smpcodec.next_tid()), Address.gsi(lid))


def test_gmps_go_through_the_window_with_their_address_and_come_back_matched():
    t = PerfAgents(window=4)
    reqs = [counters(lid, port) for lid in range(1, 10) for port in (1, 2)]
    replies = t.execute(reqs, check=True)
    for r, req in zip(replies, reqs):
        pc = r.gmp(perfmgt.PortCounters)
        assert pc.symbol_error_counter == req.addr.lid  # matched to its own request
        assert pc.port_select == perfmgt.PortCounters.decode(gmp.data_of(req.raw)).port_select
        assert r.data == gmp.data_of(r.raw) and len(r.data) == 192 and r.response is None
    raw, addr = t.sent[0]
    assert (addr.qpn, addr.qkey, addr.lid) == (1, GSI_QKEY, 1)
    assert t.stats.sent == t.stats.received == 18
    assert t.stats.by_kind == {"PerfGet(PortCounters)": 18}


def test_lost_gmps_are_retried_with_a_fresh_tid_and_time_out_like_smps():
    t = PerfAgents(retries=2, timeout_ms=5)
    t.lose = 2
    req = counters(3)
    first_tid = gmp.tid_of(req.raw)
    (r,) = t.execute([req])
    assert r.ok and r.gmp(perfmgt.PortCounters).symbol_error_counter == 3
    tids = [gmp.tid_of(raw) for raw, _ in t.sent]
    assert tids[0] == first_tid and len(set(tids)) == 3  # every retry its own TID
    assert (t.stats.timeouts, t.stats.retries) == (2, 2)
    t.lose = 10
    (r,) = t.execute([counters(4)], retries=1)
    assert isinstance(r.error, SmpTimeout)
    assert "PerfGet(PortCounters, modifier 0x0) to LID 4 QP 1: no response after 2 tries" in str(r.error)
    assert "M_Key" not in str(r.error)  # the SMP write hint is the SMP layer's


def test_busy_gmp_is_retried_and_an_error_status_kept():
    t = PerfAgents(retries=3)
    t.busy = 1
    (r,) = t.execute([counters(2)])
    assert r.ok and t.stats.busy == 1
    t.busy = 5
    (r,) = t.execute([counters(2)], retries=1)
    assert isinstance(r.error, SmpStatusError) and isinstance(r.error.response, MadHeader)
    assert r.error.response.method == Method.GET_RESP and r.error.raw == r.raw
    assert "status 0x0001 (busy)" in str(r.error)
    with pytest.raises(SmpStatusError):
        r.gmp(perfmgt.PortCounters)


def test_an_answer_of_another_class_is_malformed():
    class Wrong(PerfAgents):
        def _answer_to(self, raw, addr):
            resp = bytearray(super()._answer_to(raw, addr))
            resp[1] = 0x03
            return bytes(resp)
    (r,) = Wrong().execute([counters(1)])
    assert isinstance(r.error, TransportError) and "malformed response" in str(r.error)
    assert "management class 0x03, not the request's 0x04" in str(r.error)


def test_m_keys_are_an_smp_matter():
    t = PerfAgents()
    t.keys = KeyChain()
    t.keys.default = 0x1122334455667788
    req = counters(1)
    before = req.raw
    t.execute([req], check=True)
    assert t.sent[0][0] == before  # bytes 24..31 of a GMP are the class's, not an M_Key


def test_request_gmp_refuses_smps_and_responses():
    with pytest.raises(BadInput, match="subnet management class"):
        Request.gmp(smpcodec.dr_raw(Method.GET, AttrID.NODE_INFO, (0,)), Address.gsi(1))
    with pytest.raises(BadInput, match="is a response"):
        Request.gmp(gmp.response_to(perfmgt.get(1, tid=1)), Address.gsi(1))


def test_an_smp_only_backend_says_so():
    t = SimTransport()
    with pytest.raises(TransportError, match="the sim transport carries SMPs only, not PerfGet"):
        t.execute([counters(1)])


def test_smps_and_gmps_share_one_batch():
    class Both(PerfAgents):
        def _answer(self, raw, dlid):
            s = smpcodec.decode(raw)
            return smpcodec.encode(smpcodec.response_to(s))
    t = Both()
    smp_req = Request.dr(Method.GET, AttrID.NODE_INFO, (0, 1))
    replies = t.execute([counters(5), smp_req, counters(6)], check=True)
    assert [r.gmp(perfmgt.PortCounters).symbol_error_counter for r in (replies[0], replies[2])] == [5, 6]
    assert replies[1].response.attribute_id == AttrID.NODE_INFO
    assert t.stats.by_kind == {"PerfGet(PortCounters)": 2, "SubnGet(NodeInfo)": 1}


def test_an_incoming_gmp_reaches_on_request_with_its_address_and_is_answered_there():
    t = SimTransport()
    got: list[Incoming] = []
    t.on_request = got.append
    src = Address(lid=7, qpn=1, sl=2, pkey_index=1, grh=Grh(bytes(range(16)), hop_limit=3))
    query = gmp.build(0x03, Method.GET_TABLE, 0x0011, tid=0x99)
    t.deliver(query, src)
    t.deliver(smpcodec.encode(smpcodec.lid_routed(Method.GET, AttrID.SM_INFO)), 12)  # an SMP: a LID
    assert t.poll(0.1) == 2
    assert got[0] == Incoming(query, src) and got[1].slid == 12 and got[1].address.qpn == 0
    answer = gmp.response_to(query, status=0x000C)
    t.respond(answer, got[0].address.reply())
    (raw, to), = t.outbox
    assert raw == answer and to == Address(7, 1, GSI_QKEY, 2, 0, 1, src.grh)
    ((kind, n),) = t.stats.by_kind.items()
    assert n == 1 and kind.startswith("SubnAdmGetTableResp(")
