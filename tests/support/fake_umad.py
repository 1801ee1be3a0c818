"""A stand-in for libibumad's CDLL: every function a MagicMock (`FakeUmad`), for the
unit tests of the umad transport's paths."""
from __future__ import annotations
import ctypes
import errno
import os
import struct
import time
from smagent.transport import umad_lib


class FakeUmad:
    """Stands in for the CDLL object; each libibumad function is a MagicMock.

    ``cas`` maps CA name -> {port number: port GUID}. Without argtypes
    conversion (the fake is not a foreign function) the binding's struct
    arguments arrive as the ctypes objects themselves, as C would see them
    through the pointer.
    """

    def __init__(self, mocker, cas=None, node_type=1):
        self.cas = {"mlx5_0": {1: 0x0002C90300A1B2C3}} if cas is None else cas
        self.node_type = node_type
        self._keep = []  # port structs that umad_get_ca points at
        self.sent = []
        self.recv_queue = []  # (status, mad bytes) or negative int
        self.errno_on = {}  # function name -> errno to leave behind
        self.link_layers: dict[str, bytes] = {}  # CA name -> its ports' link layer (b"Ethernet": RoCE)
        for name in (
            "umad_init", "umad_done", "umad_get_cas_names", "umad_get_ca", "umad_release_ca",
            "umad_get_port", "umad_release_port", "umad_open_port", "umad_close_port", "umad_size",
            "umad_send", "umad_recv", "umad_get_fd", "umad_register", "umad_register_oui", "umad_unregister",
        ):
            setattr(self, name, mocker.MagicMock(name=name, side_effect=getattr(self, "_" + name)))
        self.open_rc = 7
        self.size = 64
        self.register_rc = None
        self.send_rc = 0

    def _err(self, fn, rc):
        if fn in self.errno_on:
            ctypes.set_errno(self.errno_on[fn])
        return rc

    def _umad_init(self):
        return 0

    def _umad_done(self):
        return 0

    def _umad_get_cas_names(self, names, max_):
        for i, name in enumerate(list(self.cas)[:max_]):
            names[i].value = name.encode()
        return min(len(self.cas), max_)

    def _umad_get_ca(self, name, ca):
        ports = self.cas.get(name.decode()) if name else next(iter(self.cas.values()), None)
        if ports is None:
            return -errno.ENOENT
        ca.ca_name = name or list(self.cas)[0].encode()
        ca.node_type = self.node_type
        ca.numports = max(ports)
        ca.node_guid = int.from_bytes(struct.pack(">Q", 0x0002C90300A1B2C0), "little")
        for p in ports:
            s = umad_lib._UmadPortT()
            self._keep.append(s)
            ca.ports[p] = ctypes.pointer(s)
        return 0

    def _umad_release_ca(self, ca):
        return 0

    def _umad_get_port(self, name, port, info):
        if name is None:
            name = list(self.cas)[0].encode()
        ports = self.cas.get(name.decode())
        if ports is None:
            return -errno.ENODEV
        if port == 0:
            port = min(ports)
        if port not in ports:
            return -errno.EIO
        info.ca_name = name
        info.portnum = port
        info.base_lid = 5
        info.sm_lid = 1
        info.state = 4
        info.phys_state = 5
        info.link_layer = self.link_layers.get(name.decode(), b"InfiniBand")
        # libibumad keeps GUIDs in network order inside a native uint64.
        info.port_guid = int.from_bytes(struct.pack(">Q", ports[port]), "little")
        info.gid_prefix = int.from_bytes(struct.pack(">Q", 0xFE80000000000000), "little")
        info.capmask = int.from_bytes(struct.pack(">I", 0x2651E848), "little")
        return 0

    def _umad_release_port(self, info):
        return 0

    def _umad_open_port(self, name, port):
        return self._err("umad_open_port", self.open_rc)

    def _umad_close_port(self, fd):
        return 0

    def _umad_size(self):
        return self.size

    def _umad_get_fd(self, portid):
        return portid

    def _umad_register(self, fd, mgmt_class, version, rmpp, mask):
        if self.register_rc is not None:
            return self._err("umad_register", self.register_rc)
        return {0x81: 0, 0x01: 1}.get(mgmt_class, 2)

    def _umad_register_oui(self, fd, mgmt_class, rmpp, oui, mask):
        if self.register_rc is not None:
            return self._err("umad_register_oui", self.register_rc)
        return 3

    def _umad_unregister(self, fd, agent):
        return 0

    def _umad_send(self, fd, agent, addr, length, timeout_ms, retries):
        addr = _pointer(addr)
        self.sent.append((agent, ctypes.string_at(addr, 64 + length), timeout_ms, retries))
        return self._err("umad_send", self.send_rc)

    def _umad_recv(self, fd, addr, length, timeout_ms):
        addr, length = _pointer(addr), getattr(length, "_obj", length)  # byref(c_int): the c_int
        if not self.recv_queue:
            time.sleep(timeout_ms / 1000)
            return -errno.ETIMEDOUT if timeout_ms else -errno.EAGAIN
        item = self.recv_queue.pop(0)
        if isinstance(item, int):
            return self._err("umad_recv", item)
        status, mad = item
        ctypes.memmove(addr, struct.pack("=IIIII", 0, status, 0, 0, 64 + len(mad)), 20)
        ctypes.memmove(addr + 64, mad, len(mad))
        length.value = len(mad)
        return 0


def _pointer(addr) -> int:
    """An address as C sees it: umad_send and umad_recv get their buffers as c_void_p
    (called without argtypes), the rest as ints."""
    return addr.value if isinstance(addr, ctypes.c_void_p) else addr


class KernelUmad(FakeUmad):
    """`FakeUmad` with the kernel's ib_umad/ib_mad behaviour behind it (the kernel-faithful
    mode; umad2sim, which the live tests run on, does none of this):

    * a request's TID gets its upper 32 bits replaced by the sending agent's hi_tid
      (user_mad.c, ib_umad_write), so a response carries that, not what user space wrote;
    * a request sent with timeout_ms > 0 waits in the agent's list of sends awaiting a
      response (mad.c, wait_list); a response is delivered only if it matches one (same
      64-bit TID and class), else dropped (`dropped`); an unanswered send expires after
      timeout_ms x (retries + 1) and comes back as a 24-byte packet, the request's MAD
      header, with status ETIMEDOUT (user_mad.c, send_handler);
    * a directed-route SMP leaving an HCA must pass smi.h's send checks (first hop the
      local port number, hop pointer 0 or past the path, hop count < 64), else the
      write fails: umad_send returns -EIO with errno EINVAL;
    * a MAD longer than the reader's buffer is refused with ENOSPC, the length needed
      left in ``*length`` (user_mad.c copy_recv_mad, libibumad umad_recv);
    * the issm device: held by another process, ``open`` blocks without O_NONBLOCK
      (`IssmWouldBlock` raised here instead of hanging the test) and fails EAGAIN with it.

    ``answer(request bytes as sent) -> [(delay s, MAD bytes)]`` plays the fabric: each
    MAD reaches the kernel ``delay`` seconds after the send; `arrive` injects one.
    """

    def __init__(self, mocker, *, port: int = 1, answer=None, **kw):
        super().__init__(mocker, **kw)
        self.local_port = port
        self.answer = answer or (lambda mad: [])
        self.hi_tid: dict[int, int] = {}
        self.waiting: list[list] = []  # [agent, tid64, class, expiry, request MAD]
        self.wire: list[tuple[float, bytes]] = []  # (arrival, MAD) not yet through the kernel
        self.dropped: list[bytes] = []
        self.issm_held = False
        self.open_flags: list[int] = []
        self.umad_get_issm_path = mocker.MagicMock(side_effect=self._issm_path)
        self.open = mocker.MagicMock(side_effect=self._open)
        self.close = mocker.MagicMock(return_value=0)

    # -- agents: hi_tid per registration (mad.c: a counter over every agent) --------------
    def _umad_register(self, fd, mgmt_class, version, rmpp, mask):
        agent = super()._umad_register(fd, mgmt_class, version, rmpp, mask)
        if agent >= 0:
            self.hi_tid[agent] = 0x100 + agent
        return agent

    def _umad_register_oui(self, fd, mgmt_class, rmpp, oui, mask):
        agent = super()._umad_register_oui(fd, mgmt_class, rmpp, oui, mask)
        if agent >= 0:
            self.hi_tid[agent] = 0x100 + agent
        return agent

    # -- send ------------------------------------------------------------------------
    def _umad_send(self, fd, agent, addr, length, timeout_ms, retries):
        p = _pointer(addr)
        mad = bytearray(ctypes.string_at(p + 64, length))
        if mad[1] == 0x81 and not mad[3] & 0x80 and not self._dr_ok(mad):
            ctypes.set_errno(errno.EINVAL)  # handle_outgoing_dr_smp: "Invalid directed route"
            self.sent.append((agent, ctypes.string_at(p, 64 + length), timeout_ms, retries))
            return -errno.EIO  # umad_send: a short write is -EIO, errno says why
        if not _is_response(mad):
            tid = (self.hi_tid.get(agent, 0) << 32) | int.from_bytes(mad[12:16], "big")
            mad[8:16] = tid.to_bytes(8, "big")
            ctypes.memmove(p + 64 + 8, bytes(mad[8:16]), 8)
            if timeout_ms > 0:
                expiry = time.monotonic() + timeout_ms * (retries + 1) / 1000
                self.waiting.append([agent, tid, mad[1], expiry, bytes(mad)])
        self.sent.append((agent, ctypes.string_at(p, 64 + length), timeout_ms, retries))
        now = time.monotonic()
        for delay, reply in self.answer(bytes(mad)):
            self.wire.append((now + delay, bytes(reply)))
        return self._err("umad_send", self.send_rc)

    def _dr_ok(self, smp: bytearray) -> bool:
        """smi.h's checks of an outgoing directed-route SMP (direction 0) at an HCA."""
        hop_ptr, hop_cnt = smp[6], smp[7]
        if smp[4] & 0x80:  # returning (direction 1): a response path, not checked here
            return True
        if hop_cnt >= 64:
            return False
        if hop_cnt and hop_ptr == 0:
            return smp[128 + 1] == self.local_port  # C14-9:1, the first hop leaves by our port
        if hop_ptr and hop_ptr < hop_cnt:
            return False  # C14-9:2: only a switch forwards mid-path
        if hop_ptr == hop_cnt:
            return smp[34:36] == b"\xff\xff"  # C14-9:3 at an HCA: DrDLID permissive
        return hop_ptr == hop_cnt + 1  # C14-9:4/5

    def arrive(self, mad: bytes, delay: float = 0.0) -> None:
        self.wire.append((time.monotonic() + delay, bytes(mad)))

    # -- the kernel between the wire and the reader --------------------------------------
    def _advance(self) -> None:
        now = time.monotonic()
        for item in sorted(w for w in self.wire if w[0] <= now):
            self.wire.remove(item)
            self._deliver(item[1])
        for w in [w for w in self.waiting if w[3] <= now]:
            self.waiting.remove(w)  # expired: the request's header comes back, status 110
            self.recv_queue.append((errno.ETIMEDOUT, w[4][:24]))

    def _deliver(self, mad: bytes) -> None:
        if not _is_response(mad):
            self.recv_queue.append((0, mad))
            return
        tid = int.from_bytes(mad[8:16], "big")
        for w in self.waiting:  # find_send_wr: the agent by hi_tid, then TID and class
            if w[1] == tid and w[2] == mad[1]:
                self.waiting.remove(w)
                self.recv_queue.append((0, mad))
                return
        self.dropped.append(mad)

    def _next_event(self) -> float | None:
        times = [w[0] for w in self.wire] + [w[3] for w in self.waiting]
        return min(times, default=None)

    def _umad_recv(self, fd, addr, length, timeout_ms):
        end = time.monotonic() + max(timeout_ms, 0) / 1000
        while True:
            self._advance()
            if self.recv_queue:
                break
            nxt = self._next_event()
            left = end - time.monotonic()
            if left <= 0:
                return -errno.ETIMEDOUT if timeout_ms else -errno.EAGAIN
            time.sleep(max(0.0, min(left, (nxt - time.monotonic()) if nxt else left)))
        size = getattr(length, "_obj", length)
        item = self.recv_queue[0]
        if not isinstance(item, int) and len(item[1]) > size.value:
            size.value = len(item[1])  # umad_recv: what the reader needs
            return -errno.ENOSPC  # and the MAD stays queued
        return super()._umad_recv(fd, addr, length, 0)

    # -- issm --------------------------------------------------------------------------
    def _issm_path(self, ca, port, buf, size):
        path = b"/dev/infiniband/issm0"
        ctypes.memmove(buf, path + b"\0", len(path) + 1)
        return 0

    def _open(self, path, flags):
        self.open_flags.append(flags)
        if self.issm_held:
            if not flags & os.O_NONBLOCK:
                raise IssmWouldBlock(path)  # ib_umad_sm_open: down_interruptible, for ever
            ctypes.set_errno(errno.EAGAIN)  # down_trylock failed
            return -1
        return 2048


class IssmWouldBlock(AssertionError):
    """The kernel's issm open would wait until the other SM closes the device."""


def _is_response(mad) -> bool:
    """ib_response_mad: the R bit, or TrapRepress."""
    return bool(mad[3] & 0x80) or mad[3] == 0x07
