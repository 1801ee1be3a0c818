"""The umad transport as an SM (`serve=True`), with libibumad and libc replaced by fakes
(pytest-mock): IsSM through the issm device opened with libc's `open` (never os.open,
which umad2sim does not intercept), its error paths, the method mask that lets requests
in, untimed sends for responses, and the source LID of what arrives."""
from __future__ import annotations

import ctypes
import errno
import os
import struct

import pytest

from mad import smp as smpcodec
from mad.attributes import AttrID, SMInfo
from mad.header import Method
from smagent.transport import umad_lib
from smagent.transport.umad import UmadTransport
from smagent.transport.umad_lib import PermissionDenied, UmadError, UmadIOError, UmadPort
from fake_umad import FakeUmad, _pointer

ISSM = b"/dev/infiniband/issm0"


class ServeFake(FakeUmad):
    """FakeUmad plus umad_get_issm_path and libc's open/close (ctypes.CDLL(None) is the
    same patched CDLL, so one object plays both libraries)."""

    def __init__(self, mocker):
        super().__init__(mocker)
        self.open_result = 2048  # umad2sim's issm descriptors start there
        self.issm_rc = 0
        self.umad_get_issm_path = mocker.MagicMock(side_effect=self._issm_path)
        self.open = mocker.MagicMock(side_effect=self._open)
        self.close = mocker.MagicMock(return_value=0)
        self.slids = []  # source LIDs of the queued MADs, in order

    def _issm_path(self, ca, port, buf, size):
        if self.issm_rc < 0:
            return self.issm_rc
        ctypes.memmove(buf, ISSM + b"\0", len(ISSM) + 1)
        return 0

    def _open(self, path, flags):
        if self.open_result < 0:
            ctypes.set_errno(-self.open_result)
            return -1
        return self.open_result

    def _umad_recv(self, fd, addr, length, timeout_ms):
        rc = super()._umad_recv(fd, addr, length, timeout_ms)
        if rc == 0 and self.slids:
            ctypes.memmove(_pointer(addr) + 20 + 8, struct.pack(">H", self.slids.pop(0)), 2)  # ib_mad_addr.lid
        return rc


@pytest.fixture
def fake(mocker):
    lib = ServeFake(mocker)
    mocker.patch.object(umad_lib.ctypes, "CDLL", return_value=lib)
    mocker.patch.object(umad_lib.ctypes, "PyDLL", return_value=lib)  # the hot calls that keep the GIL
    return lib


def _mask(call) -> set[int]:
    mask = call.args[4]
    bits = ctypes.sizeof(ctypes.c_long) * 8
    value = sum((mask[i] & ((1 << bits) - 1)) << (bits * i) for i in range(len(mask)))
    return {m for m in range(128) if value >> m & 1}


def test_open_issm_through_libc_open_and_close_clears_it(fake):
    p = UmadPort()
    assert p.open_issm() == ISSM.decode()
    assert p.open_issm() == ISSM.decode()  # held once
    fake.open.assert_called_once_with(ISSM, os.O_RDWR | os.O_NONBLOCK)
    fake.umad_get_issm_path.assert_called_once()
    assert fake.umad_get_issm_path.call_args.args[:2] == (b"mlx5_0", 1)
    p.close()
    fake.close.assert_called_once_with(2048)
    p.close()
    fake.close.assert_called_once()  # idempotent


def test_issm_busy_names_the_other_sm(fake):
    fake.open_result = -errno.EBUSY
    with UmadPort() as p:
        with pytest.raises(UmadIOError, match="busy: another subnet manager holds mlx5_0 port 1") as e:
            p.open_issm()
    assert e.value.errno == errno.EBUSY


def test_issm_permission_denied(fake):
    fake.open_result = -errno.EACCES
    with UmadPort() as p:
        with pytest.raises(PermissionDenied, match="issm0.*run as root or join the rdma group"):
            p.open_issm()


def test_issm_other_open_error(fake):
    fake.open_result = -errno.ENOENT
    with UmadPort() as p:
        with pytest.raises(UmadIOError, match="cannot open /dev/infiniband/issm0: ENOENT"):
            p.open_issm()


def test_issm_path_unknown(fake):
    fake.issm_rc = -errno.ENODEV
    with UmadPort() as p:
        with pytest.raises(UmadError, match="cannot find the issm device of CA mlx5_0 port 1"):
            p.open_issm()
    fake.open.assert_not_called()


def test_old_libibumad_without_issm_path(fake, mocker):
    del fake.umad_get_issm_path
    with UmadPort() as p:
        with pytest.raises(UmadError, match="no umad_get_issm_path"):
            p.open_issm()


def test_serving_transport_registers_requests_and_holds_issm(fake):
    t = UmadTransport(serve=True)
    assert t.issm == ISSM.decode()
    assert [_mask(c) for c in fake.umad_register.call_args_list] == [{0x01, 0x02, 0x05}] * 2
    t.close()
    fake.close.assert_called_once_with(2048)


def test_one_shot_transport_registers_no_requests_and_no_issm(fake):
    UmadTransport().close()
    assert [_mask(c) for c in fake.umad_register.call_args_list] == [set(), set()]
    fake.open.assert_not_called()


def test_failed_issm_closes_the_port(fake):
    fake.open_result = -errno.EBUSY
    with pytest.raises(UmadIOError, match="busy"):
        UmadTransport(serve=True)
    fake.umad_close_port.assert_called_once()
    fake.umad_done.assert_called_once()


def test_requests_go_to_the_handler_with_their_source_lid_and_responses_are_untimed(fake):
    get = smpcodec.encode(smpcodec.lid_routed(Method.GET, AttrID.SM_INFO))
    fake.recv_queue = [(0, get)]
    fake.slids = [0x0017]
    got = []
    t = UmadTransport(serve=True)
    t.on_request = lambda m: got.append((m.raw, m.slid))
    assert t.poll(0.5) == 1
    assert got == [(get, 0x17)]
    req = smpcodec.decode(get)
    answer = smpcodec.encode(smpcodec.response_to(req, value=SMInfo(guid=1, sm_key=0, act_count=0,
                                                                         priority=1, sm_state=3)))
    t.respond(answer, 0x17)
    agent, buf, timeout_ms, retries = fake.sent[-1]
    assert (agent, timeout_ms, retries) == (1, 0, 0)  # LID-routed agent; 0: not solicited, no response due
    assert buf[28:30] == b"\x00\x17" and buf[64:] == answer
    assert t.stats.sent == 1 and t.stats.by_kind == {"SubnGetResp(SMInfo)": 1}
    t.close()


def test_without_a_handler_requests_are_ignored_as_before(fake):
    fake.recv_queue = [(0, smpcodec.encode(smpcodec.lid_routed(Method.GET, AttrID.SM_INFO)))]
    t = UmadTransport()
    assert t.poll(0.2) == 0
    t.close()


def test_gmp_classes_are_registered_each_with_its_version_methods_and_rmpp(fake):
    from smagent.transport.umad import PERF_CLIENT, SA_SERVER
    t = UmadTransport(serve=True, classes=[SA_SERVER, PERF_CLIENT])
    calls = fake.umad_register.call_args_list
    assert [c.args[1:4] for c in calls] == [(0x81, 1, 0), (0x01, 1, 0), (0x03, 2, 0), (0x04, 1, 0)]
    assert [_mask(c) for c in calls] == [{0x01, 0x02, 0x05}] * 2 + [{0x01, 0x02, 0x12, 0x13, 0x14, 0x15}, set()]
    t.close()


def test_a_class_asked_twice_is_refused_before_the_port_opens(fake):
    from smagent.errors import BadInput
    from smagent.transport.umad import PERF_CLIENT, AgentClass
    with pytest.raises(BadInput, match="0x04 asked twice"):
        UmadTransport(classes=[PERF_CLIENT, PERF_CLIENT])
    with pytest.raises(BadInput, match="0x81 asked twice"):
        UmadTransport(classes=[AgentClass(0x81)])
    fake.umad_open_port.assert_not_called()


def test_a_gmp_of_a_class_not_registered_is_refused_by_name(fake):
    from mad import perfmgt
    from smagent.transport.address import Address
    from smagent.transport.base import Request, TransportError
    t = UmadTransport()
    with pytest.raises(TransportError, match="no agent for management class 0x04 on umad mlx5_0 port 1"):
        t.execute([Request.gmp(perfmgt.get(1, tid=5), Address.gsi(3))])
    assert fake.sent == []
    t.close()


def test_a_gmp_request_arrives_with_its_address_and_is_answered_at_it(fake):
    from mad import gmp
    from smagent.transport.address import Address
    from smagent.transport.umad import SA_SERVER
    query = gmp.build(0x03, Method.GET_TABLE, 0x0011, tid=0x77)
    fake.recv_queue = [(0, query)]
    fake.slids = [0x0009]
    got = []
    t = UmadTransport(serve=True, classes=[SA_SERVER])
    t.on_request = got.append
    orig = fake._umad_recv

    def recv(fd, addr, length, timeout_ms):  # the sender's QP1, as the kernel reports it
        rc = orig(fd, addr, length, timeout_ms)
        if rc == 0:
            ctypes.memmove(_pointer(addr) + 20, struct.pack(">I", 1), 4)
        return rc
    fake.umad_recv.side_effect = recv
    assert t.poll(0.5) == 1
    (m,) = got
    assert m.raw == query and (m.address.lid, m.address.qpn) == (9, 1)
    answer = gmp.response_to(query, status=0x000C)
    t.respond(answer, m.address.reply())
    agent, buf, timeout_ms, retries = fake.sent[-1]
    assert (agent, timeout_ms, retries) == (2, 0, 0)  # the SA agent, unsolicited
    assert buf[20:64] == Address.gsi(9).pack() and buf[64:] == answer
    t.close()


def test_answers_at_once_are_sent_inside_the_receive_loop(fake):
    """`UmadTransport.poll` with `answer_at_once` (the SA's cached PathRecords): what it
    answers is sent from the port's receive loop, untimed, at the address it gave, and
    counted; a stray response is dropped without ending the wait; the first request it
    declines goes to `on_request` (once, no second look) and ends the poll."""
    from mad import gmp
    from smagent.transport.address import Address
    from smagent.transport.umad import SA_SERVER
    asked = [gmp.build(0x03, Method.GET, 0x0035, tid=t) for t in (1, 2)]
    declined = gmp.build(0x03, Method.GET_TABLE, 0x0011, tid=3)
    fake.recv_queue = [(0, asked[0]), (0, gmp.response_to(asked[0], status=0)), (0, asked[1]), (0, declined),
                       (0, asked[0])]
    fake.slids = [9, 9, 10, 11, 12]
    seen, got = [], []

    def answer(raw, source):
        seen.append(raw)
        if raw[3] != Method.GET:
            return None
        return [(gmp.response_to(raw, status=0), Address.gsi(Address.unpack(source).lid).pack())]
    t = UmadTransport(serve=True, classes=[SA_SERVER])
    t.answer_at_once, t.on_request = answer, got.append
    assert t.poll(0.5) == 1
    assert seen == [asked[0], asked[1], declined]  # the response never offered, the declined once
    assert [(m.raw, m.address.lid) for m in got] == [(declined, 11)]
    assert [(a, buf[20:64], buf[64:], tmo, r) for a, buf, tmo, r in fake.sent] == [
        (2, Address.gsi(lid).pack(), gmp.response_to(q, status=0), 0, 0) for q, lid in zip(asked, (9, 10))]
    assert t.stats.sent == 2 and t.stats.kinds == {(0x03, Method.GET_RESP, b"\x00\x35"): 2}  # as `respond` counts
    assert fake.recv_queue == [(0, asked[0])]  # left for the next poll
    assert t.poll(0.05) == 0 and len(fake.sent) == 3 and not fake.recv_queue  # answered; then the deadline
    fake.recv_queue = [(0, asked[0])] * 100  # a flood that never lets the queue empty: the deadline holds
    sent = len(fake.sent)
    assert t.poll(0.0) == 0 and len(fake.sent) - sent == 64 and len(fake.recv_queue) == 36
    fake.recv_queue = [-errno.EIO]
    fake.errno_on["umad_recv"] = errno.EIO
    with pytest.raises(UmadIOError, match="umad_recv on mlx5_0 port 1 failed: EIO"):
        t.poll(0.05)
    t.close()


def test_an_optional_class_another_process_serves_is_skipped(fake):
    """A running SM registers the OpenIB vendor classes (ibping, ibsysstat) only to refuse
    them; where another process on the port serves them (its methods registered), the
    registration fails and the SM goes on without them. A class it needs still fails."""
    from smagent.transport.umad import SA_SERVER, UNSERVED_CLASSES
    fake.register_rc = None
    fake.umad_register_oui.side_effect = lambda *a: fake._err("umad_register_oui", -errno.EBUSY)
    t = UmadTransport(serve=True, classes=[SA_SERVER, *UNSERVED_CLASSES])
    assert 0x03 in t._agents and not {0x32, 0x33} & set(t._agents)
    t.close()
    fake.umad_register.side_effect = lambda *a: fake._err("umad_register", -errno.EBUSY)
    with pytest.raises(UmadError):
        UmadTransport(serve=True, classes=[SA_SERVER])


def test_vendor_classes_are_registered_only_under_umad2sim():
    """The kernel answers a class nobody registered; registering ibping's and ibsysstat's
    there would keep `ibping -S` off the SM's host. umad2sim crashes instead: there only."""
    from smagent.transport.umad import SA_SERVER, UNSERVED_CLASSES, sm_classes
    assert sm_classes({}) == [SA_SERVER]
    assert sm_classes({"LD_PRELOAD": "/usr/lib/libfoo.so"}) == [SA_SERVER]
    pre = {"LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"}
    assert sm_classes(pre) == [SA_SERVER, *UNSERVED_CLASSES]
