"""Error paths of smagent.transport.umad_lib with libibumad replaced by a fake.

No ibsim or InfiniBand hardware needed: ``ctypes.CDLL`` is patched to return
a fake library whose functions behave like libibumad's (negative errno
returns, errno left in ctypes' private errno, structs filled in place).
"""

from __future__ import annotations

import ctypes
import errno
import signal
import time
from unittest.mock import call

import pytest

from smagent.transport import umad_lib
from smagent.transport.umad_lib import (
    LibraryMissing,
    NoDevice,
    PermissionDenied,
    UmadError,
    UmadIOError,
    UmadPort,
    UnknownPort,
)
from fake_umad import FakeUmad, _pointer



@pytest.fixture
def fake(mocker):
    lib = FakeUmad(mocker)
    mocker.patch.object(umad_lib.ctypes, "CDLL", return_value=lib)
    mocker.patch.object(umad_lib.ctypes, "PyDLL", return_value=lib)  # the hot calls that keep the GIL
    return lib


# -- library ---------------------------------------------------------------


def test_library_missing(mocker):
    mocker.patch.object(umad_lib.ctypes, "CDLL", side_effect=OSError("libibumad.so.3: cannot open shared object file"))
    with pytest.raises(LibraryMissing) as exc:
        UmadPort()
    msg = str(exc.value)
    assert msg.startswith("libibumad.so.3 not found: install rdma-core's libibumad3")
    assert "apt install libibumad3" in msg
    assert isinstance(exc.value, UmadError) and isinstance(exc.value, RuntimeError)
    with pytest.raises(LibraryMissing):
        umad_lib.list_ports()


def test_library_without_umad_symbols(mocker):
    class NotUmad:
        pass

    mocker.patch.object(umad_lib.ctypes, "CDLL", return_value=NotUmad())
    with pytest.raises(LibraryMissing, match="has no umad_init"):
        UmadPort(lib_path="/usr/lib/libsomethingelse.so")


def test_lib_path_is_passed_to_cdll(fake):
    UmadPort(lib_path="/opt/rdma/libibumad.so.3").close()
    calls = umad_lib.ctypes.CDLL.call_args_list  # the second: the hot functions' handle, without argtypes
    assert calls == [call("/opt/rdma/libibumad.so.3", use_errno=True)] * 2
    # and the same, keeping the GIL, for the flood's calls that cannot wait
    assert umad_lib.ctypes.PyDLL.call_args_list == [call("/opt/rdma/libibumad.so.3", use_errno=True)]


# -- no device -------------------------------------------------------------


def test_no_device_when_no_ca(fake):
    fake.cas = {}
    with pytest.raises(NoDevice) as exc:
        UmadPort()
    assert "no InfiniBand device/port found" in str(exc.value)
    assert "--transport sim" in str(exc.value) and "ibstat" in str(exc.value)
    fake.umad_open_port.assert_not_called()
    fake.umad_done.assert_called_once()  # umad_init is balanced even on failure


def test_no_device_when_only_libibumads_made_up_default(fake):
    # Without /sys/class/infiniband, umad_get_cas_names() reports one CA
    # called "mthca0" that does not exist; umad_get_ca() then fails.
    fake.umad_get_cas_names.side_effect = lambda names, max_: (setattr(names[0], "value", b"mthca0"), 1)[1]
    fake.cas = {}
    with pytest.raises(NoDevice):
        UmadPort()
    fake.umad_open_port.assert_not_called()


@pytest.mark.parametrize("rc", [-errno.ENODEV, -errno.ENOENT, -errno.EINVAL])
def test_no_device_from_open_port(fake, rc):
    fake.open_rc = rc
    with pytest.raises(NoDevice, match="--transport sim"):
        UmadPort()


def test_no_umad_kernel_module(fake):
    fake.open_rc = -errno.EOPNOTSUPP
    with pytest.raises(NoDevice, match="modprobe ib_umad"):
        UmadPort()


# -- permissions -----------------------------------------------------------


@pytest.mark.parametrize(
    "rc, saved_errno",
    [
        (-errno.EIO, errno.EACCES),  # what libibumad really does: -EIO, errno from open()
        (-errno.EIO, errno.EPERM),
        (-errno.EACCES, 0),
        (-errno.EPERM, 0),
    ],
)
def test_permission_denied(fake, rc, saved_errno):
    fake.open_rc = rc
    if saved_errno:
        fake.errno_on["umad_open_port"] = saved_errno
    with pytest.raises(PermissionDenied) as exc:
        UmadPort()
    msg = str(exc.value)
    assert "/dev/infiniband/umad" in msg and "root" in msg and "rdma group" in msg
    fake.umad_done.assert_called_once()


def test_plain_eio_is_an_io_error(fake):
    fake.open_rc = -errno.EIO
    fake.errno_on["umad_open_port"] = 0
    with pytest.raises(UmadIOError) as exc:
        UmadPort()
    assert exc.value.errno == errno.EIO and "EIO" in str(exc.value)


# -- unknown CA / port -----------------------------------------------------


def test_unknown_ca_lists_the_cas(fake):
    fake.cas = {"mlx5_0": {1: 0x10}, "mlx5_1": {1: 0x20, 2: 0x21}}
    with pytest.raises(UnknownPort) as exc:
        UmadPort(ca="mlx4_0")
    msg = str(exc.value)
    assert "unknown --ca mlx4_0" in msg
    assert "mlx5_0 (port 1)" in msg and "mlx5_1 (ports 1,2)" in msg
    fake.umad_open_port.assert_not_called()


def test_unknown_port_on_known_ca(fake):
    fake.cas = {"mlx5_0": {1: 0x10}, "mlx5_1": {1: 0x20, 2: 0x21}}
    with pytest.raises(UnknownPort, match=r"unknown --port 3 on CA mlx5_1: available: mlx5_1 \(ports 1,2\)"):
        UmadPort(ca="mlx5_1", port=3)
    fake.umad_open_port.assert_not_called()


def test_unknown_port_without_ca(fake):
    with pytest.raises(UnknownPort, match=r"unknown --port 2: no CA has it; available: mlx5_0 \(port 1\)"):
        UmadPort(port=2)


def test_negative_port(fake):
    with pytest.raises(UnknownPort):
        UmadPort(port=-1)


def test_resolves_and_opens_the_chosen_port(fake):
    fake.cas = {"mlx5_0": {1: 0x10}, "mlx5_1": {1: 0x20, 2: 0x21}}
    with UmadPort(ca="mlx5_1", port=2) as p:
        assert (p.ca, p.port) == ("mlx5_1", 2)
        assert p.fileno() == 7
    fake.umad_open_port.assert_called_once_with(b"mlx5_1", 2)


def test_default_port_is_libibumads_choice(fake):
    with UmadPort() as p:
        assert (p.ca, p.port) == ("mlx5_0", 1)
    assert fake.umad_get_port.call_args_list[0].args[:2] == (None, 0)


def test_old_umad_abi_is_refused_and_closed(fake):
    fake.size = 56  # ABI without P_Key index: different header size
    with pytest.raises(UmadError, match="56-byte umad header"):
        UmadPort()
    fake.umad_close_port.assert_called_once_with(7)
    fake.umad_done.assert_called_once()


# -- I/O -------------------------------------------------------------------


def _smp(tid_low=0x01020304):
    mad = bytearray(256)
    mad[0:4] = bytes([1, 0x81, 1, 1])
    mad[12:16] = tid_low.to_bytes(4, "big")
    return bytes(mad)


def test_send_builds_the_umad_buffer(fake):
    with UmadPort() as p:
        agent = p.register(0x81)
        p.send(agent, _smp(), dlid=0xFFFF, timeout_ms=100, retries=2)
        p.send(agent, bytearray(_smp(5)), dlid=0x0012)  # any bytes-like
    (a1, buf1, t1, r1), (a2, buf2, t2, r2) = fake.sent
    assert (a1, t1, r1) == (0, 100, 2)
    assert t2 == umad_lib.DEFAULT_TIMEOUT_MS > 0  # responses to timeout 0 are dropped by the kernel
    assert buf1[64:] == _smp() and buf2[64:] == _smp(5)
    assert buf1[28:30] == b"\xff\xff" and buf2[28:30] == b"\x00\x12"  # be16 LID
    assert buf1[20:28] == bytes(8)  # QP0, qkey 0
    assert buf2[30] == 0  # SL 0


def test_send_failure(fake):
    fake.send_rc = -errno.EIO
    fake.errno_on["umad_send"] = errno.ENOMEM
    with UmadPort() as p:
        agent = p.register(0x81)
        with pytest.raises(UmadIOError) as exc:
            p.send(agent, _smp(), dlid=0xFFFF)
    assert exc.value.errno == errno.ENOMEM
    assert "umad_send to LID 0xffff" in str(exc.value) and "ENOMEM" in str(exc.value)


def test_send_rejects_bad_arguments(fake):
    with UmadPort() as p:
        with pytest.raises(ValueError, match="at most 256"):
            p.send(0, bytes(257), dlid=1)
        with pytest.raises(ValueError, match="dlid"):
            p.send(0, _smp(), dlid=0x10000)
    assert fake.sent == []


def test_register_failure(fake):
    fake.register_rc = -errno.EPERM  # libibumad's answer to every failure
    fake.errno_on["umad_register"] = errno.EINVAL
    with UmadPort() as p:
        with pytest.raises(UmadIOError, match="management class 0x81") as exc:
            p.register(0x81)
    assert exc.value.errno == errno.EINVAL


def test_register_method_mask(fake):
    with UmadPort() as p:
        p.register(0x81, methods=[0x05, 0x07, 0x45])
    mask = fake.umad_register.call_args.args[4]
    bits = ctypes.sizeof(ctypes.c_long) * 8
    value = sum((mask[i] & ((1 << bits) - 1)) << (bits * i) for i in range(len(mask)))
    assert value == (1 << 5) | (1 << 7) | (1 << 0x45)


def test_recv_timeout_returns_none(fake):
    with UmadPort() as p:
        assert p.recv(0) is None  # -EAGAIN: nothing queued
        assert p.recv(50) is None  # -ETIMEDOUT
        t0 = time.monotonic()
        assert p.recv(450) is None  # sliced into several waits, still honours the total
        assert time.monotonic() - t0 >= 0.44
    waits = [c.args[3] for c in fake.umad_recv.call_args_list]
    assert waits[:2] == [0, 50] and len(waits) >= 4 and max(waits) <= 200


def test_recv_returns_mad_and_status(fake):
    fake.recv_queue = [(0, _smp(9)), (errno.ETIMEDOUT, _smp(10))]
    with UmadPort() as p:
        assert p.recv(100) == (_smp(9), 0)
        mad, status = p.recv(100)
    assert status == umad_lib.STATUS_TIMEOUT == 110 and mad[12:16] == (10).to_bytes(4, "big")


def test_recv_failure(fake):
    fake.recv_queue = [-errno.EIO]
    fake.errno_on["umad_recv"] = errno.EIO
    with UmadPort() as p:
        with pytest.raises(UmadIOError, match="umad_recv on mlx5_0 port 1 failed: EIO"):
            p.recv(100)


# -- info and lifecycle ------------------------------------------------------


def test_local_port_info(fake):
    with UmadPort() as p:
        info = p.local_port_info()
    assert (info.ca, info.port, info.base_lid, info.sm_lid) == ("mlx5_0", 1, 5, 1)
    assert info.state == 4 and info.state_name == "Active"
    assert info.port_guid == 0x0002C90300A1B2C3
    assert info.node_guid == 0x0002C90300A1B2C0
    assert info.gid_prefix == 0xFE80000000000000
    assert info.capability_mask == 0x2651E848
    assert info.link_layer == "InfiniBand" and info.node_type == 1
    assert fake.umad_release_port.call_count == fake.umad_get_port.call_count


def test_close_is_complete_and_idempotent(fake):
    p = UmadPort()
    a = p.register(0x81)
    b = p.register(0x01)
    p.close()
    p.close()
    assert p.closed
    assert [c.args for c in fake.umad_unregister.call_args_list] == [(7, a), (7, b)]
    fake.umad_close_port.assert_called_once_with(7)
    fake.umad_done.assert_called_once()
    for call in (lambda: p.send(a, _smp(), 0xFFFF), lambda: p.recv(0), p.fileno, p.local_port_info, lambda: p.register(0x81)):
        with pytest.raises(UmadError, match="closed"):
            call()


def test_context_manager_closes_on_error(fake):
    with pytest.raises(KeyError):
        with UmadPort() as p:
            raise KeyError("boom")
    assert p.closed
    fake.umad_close_port.assert_called_once()


def test_list_ports(fake):
    fake.cas = {"mlx5_0": {1: 0x10}, "ibsim0": {0: 0x20}}
    assert umad_lib.list_ports() == {"mlx5_0": [1], "ibsim0": [0]}


# -- GMP classes and addresses --------------------------------------------------


def test_register_passes_class_version_and_rmpp_version(fake):
    with UmadPort() as p:
        p.register(0x03, 2, methods=[0x12], rmpp_version=0)
        assert fake.umad_register.call_args.args[1:4] == (0x03, 2, 0)
        p.register(0x04, 1, rmpp_version=1)
        assert fake.umad_register.call_args.args[1:4] == (0x04, 1, 1)


def test_register_oui_for_a_vendor_class(fake):
    with UmadPort() as p:
        assert p.register(0x30, methods=[0x01], oui=0x001405) == 3
        fd, cls, rmpp, oui, _mask = fake.umad_register_oui.call_args.args
        assert (cls, rmpp, bytes(oui)) == (0x30, 0, b"\x00\x14\x05")
        fake.umad_register.assert_not_called()
        with pytest.raises(ValueError, match="vendor class 0x30..0x4f"):
            p.register(0x04, oui=0x001405)


def test_register_oui_failure_names_the_oui(fake):
    fake.register_rc = -errno.EPERM
    fake.errno_on["umad_register_oui"] = errno.EBUSY
    with UmadPort() as p:
        with pytest.raises(UmadIOError, match="class 0x31 OUI 0x001405 version 1 .*EBUSY"):
            p.register(0x31, oui=0x001405)


def test_send_to_an_address_then_an_smp_clears_it(fake):
    from smagent.transport.address import Address, Grh
    addr = Address.gsi(0x22, sl=4, pkey_index=3, grh=Grh(bytes(range(16)), hop_limit=9))
    mad = bytes(256)
    with UmadPort() as p:
        p.send(2, mad, 0, addr=addr.pack())
        p.send(0, mad, 0x22)  # the same DLID as the GMP's: QP0 must still be written
        p.send(0, mad, 0x22)
    (_a, gmp_buf, *_), (_b, smp_buf, *_), (_c, again, *_) = fake.sent
    assert gmp_buf[20:64] == addr.pack()
    assert gmp_buf[20:24] == b"\x00\x00\x00\x01" and gmp_buf[24:28] == b"\x80\x01\x00\x00"
    assert smp_buf[20:64] == again[20:64] == bytes(8) + b"\x00\x22" + bytes(34)  # QP0, Q_Key 0, no GRH
    with UmadPort() as p:
        with pytest.raises(ValueError, match="ib_mad_addr is 44"):
            p.send(2, mad, 0, addr=b"\0" * 10)


def test_recv_keeps_the_whole_source_address(fake, mocker):
    from smagent.transport.address import Address, Grh
    src = Address(lid=0x31, qpn=1, sl=2, pkey_index=5, grh=Grh(bytes(range(16, 32)), 1, 7, 3, 0x12345))
    orig = fake._umad_recv

    def recv(fd, addr, length, timeout_ms):
        rc = orig(fd, addr, length, timeout_ms)
        if rc == 0:
            ctypes.memmove(_pointer(addr) + 20, src.pack(), 44)
        return rc
    fake.umad_recv.side_effect = recv
    fake.recv_queue = [(0, b"\x01" * 256)]
    with UmadPort() as p:
        assert p.recv(100) == (b"\x01" * 256, 0)
        assert Address.unpack(p.last_addr) == src and p.last_slid == 0x31


def test_answer_until_reads_without_polling_after_an_answer(fake):
    """After an answered request the next read is tried at once (timeout 0: no poll), since
    under a flood another is usually queued; once one finds nothing, the loop waits again."""
    from smagent.transport.address import Address
    req = bytearray(256)
    req[0:4] = bytes([1, 0x03, 2, 0x01])  # an SA Get
    fake.recv_queue = [(0, bytes(req)), (0, bytes(req))]
    answered = []

    def answer(mad, addr):
        answered.append(mad)
        return [(bytes([1, 0x03, 2, 0x81]) + mad[4:], Address(lid=7).pack())]
    with UmadPort() as p:
        p.register(0x03, methods=[1])
        sent: list = []
        assert p.answer_until(answer, {0x03: 2}, time.monotonic() + 0.3, sent) is None
    waits = [c.args[3] for c in fake.umad_recv.call_args_list]
    assert len(answered) == 2 and len(sent) == 2 and [s[0] for s in fake.sent] == [2, 2]
    assert waits[0] > 0 and waits[1:3] == [0, 0] and waits[3] > 0  # wait, read at once twice (the 2nd: EAGAIN), wait


def _sa_get(tid: int) -> bytes:
    req = bytearray(256)
    req[0:4] = bytes([1, 0x03, 2, 0x01])
    req[8:16] = tid.to_bytes(8, "big")
    return bytes(req)


def test_answer_until_sends_each_answer_before_the_next_read(fake):
    """Requests queued together are answered one by one, each answer sent before the next
    request is read (a requester waiting on its window gets it at once); a MAD the caller
    must see (declined here) comes back after the answers before it went; an answer that
    raises stops the loop with the ones before it sent."""
    from smagent.transport.address import Address
    events = []
    orig_send, orig_recv = fake.umad_send.side_effect, fake.umad_recv.side_effect

    def send(*args):
        events.append("send")
        return orig_send(*args)

    def recv(*args):
        rc = orig_recv(*args)
        if rc == 0:
            events.append("read")
        return rc
    fake.umad_send.side_effect, fake.umad_recv.side_effect = send, recv

    def answer(mad, addr):
        tid = int.from_bytes(mad[8:16], "big")
        if tid == 99:
            raise RuntimeError("a defect")
        return None if tid == 50 else [(bytes([1, 0x03, 2, 0x81]) + mad[4:], Address(lid=7).pack())]
    with UmadPort() as p:
        p.register(0x03, methods=[1])
        sent: list = []
        fake.recv_queue = [(0, _sa_get(t)) for t in range(5)]
        assert p.answer_until(answer, {0x03: 2}, time.monotonic() + 0.3, sent) is None
        assert events == ["read", "send"] * 5
        assert [int.from_bytes(m[8:16], "big") for m in sent] == list(range(5))
        fake.recv_queue = [(0, _sa_get(t)) for t in (1, 2, 50, 3)]
        events.clear()
        got = p.answer_until(answer, {0x03: 2}, time.monotonic() + 0.3, sent)
        assert got is not None and got[3] and int.from_bytes(got[0][8:16], "big") == 50
        assert events == ["read", "send", "read", "send", "read"]
        fake.recv_queue = [(0, _sa_get(t)) for t in (4, 99, 5)]
        events.clear()
        with pytest.raises(RuntimeError):
            p.answer_until(answer, {0x03: 2}, time.monotonic() + 0.3, sent)
        assert events == ["read", "send", "read"]


def test_method_mask_fits_32_bit_longs():
    """umad_register's mask is long[]: with 32-bit longs four of them hold 128 methods."""
    m32 = umad_lib.method_mask([0x01, 0x05, 0x12, 0x7F], ctypes.c_int32)
    assert len(m32) == 4 and [m32[i] & 0xFFFFFFFF for i in range(4)] == [0x40022, 0, 0, 0x80000000]
    m64 = umad_lib.method_mask([0x01, 0x7F], ctypes.c_int64)
    assert len(m64) == 2 and m64[0] == 2 and m64[1] & (1 << 63)


def test_more_cas_than_umad_max_devices_are_listed(fake):
    fake.cas = {f"mlx5_{i}": {1: 0x0002C90300A10000 + i} for i in range(40)}
    assert len(umad_lib.list_ports()) == 40


def test_qp0_registration_refused_by_the_security_module_says_so(fake):
    fake.register_rc = -errno.EPERM  # umad_register's own return; the ioctl's errno says why
    fake.errno_on["umad_register"] = errno.EACCES
    with UmadPort() as p:
        with pytest.raises(UmadIOError, match="EACCES.*security module refused.*mlx5_0 port 1 .QP0.*manage_subnet"):
            p.register(0x81)


# -- Ctrl-C while opening (the live proof: tests/live/test_umad_interrupt_live.py) ----------


def _sigint_seen_by(fake, name):
    seen = []
    original = getattr(fake, name).side_effect
    getattr(fake, name).side_effect = lambda *a: (seen.append(signal.getsignal(signal.SIGINT)), original(*a))[1]
    return seen


def test_opening_calls_run_with_sigint_default_and_python_handler_comes_back(fake):
    names, opens = _sigint_seen_by(fake, "umad_get_cas_names"), _sigint_seen_by(fake, "umad_open_port")
    with UmadPort() as port:
        assert port.ca
    assert names == [signal.SIG_DFL] and opens == [signal.SIG_DFL]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_opening_failure_restores_python_handler(fake):
    fake.open_rc = -errno.EIO
    with pytest.raises(UmadError):
        UmadPort()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_callers_own_sigint_handler_is_left_alone(fake):
    def mine(signum, frame):
        pass
    names = _sigint_seen_by(fake, "umad_get_cas_names")
    old = signal.signal(signal.SIGINT, mine)
    try:
        umad_lib.list_ports()
        assert names == [mine] and signal.getsignal(signal.SIGINT) is mine
    finally:
        signal.signal(signal.SIGINT, old)
