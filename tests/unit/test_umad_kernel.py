"""The umad transport against the kernel-faithful libibumad mock (`fake_umad.KernelUmad`):
what the kernel's ib_umad and ib_mad do that umad2sim does not (TIDs rewritten per
agent, responses matched to sends awaiting them or dropped, 24-byte status-110 packets on
expiry, directed-route send checks, issm opens that block, ENOSPC), and the defects of
issue 43 each seen through it."""
from __future__ import annotations

import errno
import os

import pytest

from mad.attributes import AttrID
from mad.header import Method
from mad.sa_records import InformInfo
from smagent.sa import informs as informsmod
from smagent.transport import umad_lib
from smagent.transport.base import Request
from smagent.transport.umad import SA_SERVER, UmadTransport
from smagent.transport.umad_lib import UmadIOError, UmadPort
from fake_umad import IssmWouldBlock, KernelUmad


def _kernel(mocker, **kw) -> KernelUmad:
    lib = KernelUmad(mocker, **kw)
    mocker.patch.object(umad_lib.ctypes, "CDLL", return_value=lib)
    mocker.patch.object(umad_lib.ctypes, "PyDLL", return_value=lib)
    return lib


def _smp_answer(delay: float):
    """A fabric whose every SMA answers each SMP after ``delay`` seconds."""
    def answer(mad: bytes):
        if mad[1] not in (0x01, 0x81) or mad[3] & 0x80:
            return []
        resp = bytearray(mad)
        resp[3] |= 0x80
        if mad[1] == 0x81:
            resp[4] |= 0x80  # direction: returning
        return [(delay, bytes(resp))]
    return answer


# -- the mock itself ------------------------------------------------------------------


def test_kernel_rewrites_the_upper_tid_drops_unmatched_and_times_out_with_24_bytes(mocker):
    lib = _kernel(mocker, answer=_smp_answer(0.0))
    with UmadPort() as p:
        agent = p.register(0x81)
        req = Request.dr(Method.GET, AttrID.NODE_INFO, (0,)).raw
        p.send(agent, req, 0xFFFF, timeout_ms=50)
        mad, status = p.recv(500)
        assert status == 0 and mad[8:12] != req[8:12] and mad[12:16] == req[12:16]
        p.send(agent, req, 0xFFFF, timeout_ms=0)  # untimed: nothing to match its answer
        assert p.recv(100) is None and len(lib.dropped) == 1
        lib.answer = lambda mad: []
        p.send(agent, req, 0xFFFF, timeout_ms=30)
        mad, status = p.recv(500)
        assert status == errno.ETIMEDOUT and len(mad) == 24 and mad[12:16] == req[12:16]


# -- item 1: InformInfo subscribers kept past their first Report ----------------------


def test_report_resp_through_the_kernel_keeps_the_subscription(mocker):
    def subscriber(mad: bytes):  # a host's SA client: ReportResp with the Report's TID
        if mad[1] == 0x03 and mad[3] == Method.REPORT:
            resp = bytearray(mad)
            resp[3] = Method.REPORT_RESP
            return [(0.01, bytes(resp))]
        return []

    lib = _kernel(mocker, answer=subscriber)
    informs = informsmod.Informs()
    informs.subscribe(InformInfo(gid=0, lid_range_begin=0xFFFF, is_generic=1, subscribe=1, type=0xFFFF,
                                 trap_number_or_device_id=0xFFFF, qpn=1, producer_type_or_vendor_id=0xFFFFFF),
                      lid=0x17, subscriber_gid=0, source_qpn=1)
    t = UmadTransport(serve=True, classes=(SA_SERVER,))
    got = []
    t.on_request = got.append
    try:
        notice = informsmod.sm_notice(informsmod.GID_IN, 0xFE80000000000000_0002C90300000001, 1, 0)
        (raw, to), = informs.notify(notice, 0.0)
        t.respond(raw, to, wait_ms=1000)  # as the SA service sends a Report
        t.poll(0.5)
        assert [m.raw[3] for m in got] == [Method.REPORT_RESP] and not lib.dropped
        informs.on_report_resp(int.from_bytes(got[0].raw[8:16], "big"))  # the agent's lookup
        assert not informs.pending
        assert informs.on_timeout(100.0) == [] and len(informs.subs) == 1
    finally:
        t.close()


# -- item 2: a slow SMA is slow, not lossy --------------------------------------------


def test_a_slow_sma_is_read_as_slow_not_lossy(mocker):
    _kernel(mocker, answer=_smp_answer(0.045))  # answers after 1.5 x the timeout
    t = UmadTransport(timeout_ms=30, retries=3, window=4)
    try:
        replies = t.execute([Request.dr(Method.GET, AttrID.NODE_INFO, (0,)) for _ in range(12)])
        assert all(r.error is None for r in replies)
        assert t.policy.loss() == 0.0  # the late answers were not lost tries
        assert t.policy.timeout_scale > 1  # and they lengthened the timeout
    finally:
        t.close()


# -- item 4: issm held by another SM ---------------------------------------------------


def test_issm_held_elsewhere_is_refused_not_waited_for(mocker):
    lib = _kernel(mocker)
    lib.issm_held = True
    with UmadPort() as p:
        with pytest.raises(UmadIOError, match="another subnet manager holds mlx5_0 port 1") as e:
            p.open_issm()
    assert e.value.errno == errno.EAGAIN and lib.open_flags[-1] & os.O_NONBLOCK


# -- item 5: a directed route the kernel refuses fails that request, not the batch -----


def test_a_refused_directed_route_fails_alone_with_the_reason(mocker):
    lib = _kernel(mocker, answer=_smp_answer(0.0))  # the SM's port is 1
    t = UmadTransport(timeout_ms=50, retries=1)
    try:
        good, bad = (0, 1, 3), (0, 2, 3)
        replies = t.execute([Request.dr(Method.GET, AttrID.NODE_INFO, good),
                             Request.dr(Method.GET, AttrID.NODE_INFO, bad),
                             Request.dr(Method.GET, AttrID.NODE_INFO, good)])
        assert replies[0].error is None and replies[2].error is None
        assert "first hop is 1" in str(replies[1].error) and "not 2" in str(replies[1].error)
        assert sum(1 for s in lib.sent if s[1][64 + 129] == 2) == 1  # refused once, not retried
    finally:
        t.close()


# -- item 5: a message longer than the receive buffer (ENOSPC) ---------------------------


def test_an_oversize_message_is_dropped_not_wedging_the_port(mocker, caplog):
    lib = _kernel(mocker)
    with UmadPort() as p:
        p.register(0x03)
        big = bytearray(256 * 3)
        big[0:4] = b"\x01\x03\x02\x06"  # an SA Report, as a kernel-RMPP agent would get it whole
        lib.arrive(bytes(big))
        small = bytearray(256)
        small[0:4] = b"\x01\x03\x02\x01"
        lib.arrive(bytes(small))
        mad, status = p.recv(500)  # the next MAD, not ENOSPC for ever
        assert status == 0 and mad[:4] == bytes(small[:4])
    assert "dropped a 768-byte MAD message" in caplog.text
