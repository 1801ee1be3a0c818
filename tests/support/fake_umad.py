"""A stand-in for libibumad's CDLL: every function a MagicMock (`FakeUmad`), for the
unit tests of the umad transport's paths."""
from __future__ import annotations
import ctypes
import errno
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
        info.link_layer = b"InfiniBand"
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
