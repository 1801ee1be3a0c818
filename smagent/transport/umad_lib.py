"""Thin ctypes binding over rdma-core's libibumad (``libibumad.so.3``).

This is the live link layer: the same library OpenSM and infiniband-diags use
to reach the kernel's ib_umad devices. It deliberately knows nothing about MAD
contents; callers hand it whole 256-byte MADs and get whole MADs back.

Layouts and signatures follow ``libibumad/umad.h`` (rdma-core 44). Two
behaviours of libibumad shape this module:

* Most calls return a negative errno, but ``umad_open_port`` collapses a failed
  ``open()`` of ``/dev/infiniband/umadN`` into ``-EIO`` and leaves the real
  cause (EACCES, ...) in ``errno``; the library is loaded with
  ``use_errno=True`` so that errno can be read back.
* The device is always opened *through libibumad*: ibsim's umad2sim is an
  LD_PRELOAD library that intercepts libc ``open``/``read``/``write``/``poll``
  (and hands out fake descriptors >= 1024). Python's ``os.open`` and
  ``select.select`` would bypass or choke on it; ``select.poll`` goes through
  libc ``poll`` and therefore works with :meth:`UmadPort.fileno`.

A :class:`UmadPort` is not thread-safe: it reuses one send and one receive
buffer to keep the per-MAD cost at a couple of foreign calls.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno as _errno
import logging
import os
import signal
import struct
import threading
import time
from dataclasses import dataclass

from smagent.errors import FabricFailure

log = logging.getLogger("smagent.transport")

__all__ = [
    "UmadError",
    "LibraryMissing",
    "NoDevice",
    "PermissionDenied",
    "UnknownPort",
    "UmadIOError",
    "LocalPortInfo",
    "UmadPort",
    "list_ports",
    "ports",
    "find_port_guid",
    "PortSummary",
    "DEFAULT_LIBRARY",
    "MAD_SIZE",
    "UMAD_HEADER_SIZE",
    "DEFAULT_TIMEOUT_MS",
    "STATUS_TIMEOUT",
]

DEFAULT_LIBRARY = "libibumad.so.3"
MAD_SIZE = 256
# umad status the kernel (and umad2sim, at once) reports for an unanswered request.
STATUS_TIMEOUT = _errno.ETIMEDOUT
# The kernel only matches a response to a request sent with timeout_ms > 0
# ("zero value means not solicited", umad_send(3)): a response to a request
# sent with 0 is dropped on real hardware. So requests default to a timeout.
DEFAULT_TIMEOUT_MS = 1000

_UMAD_CA_NAME_LEN = 20
_UMAD_CA_MAX_PORTS = 10
# CA names asked of umad_get_cas_names, which fills at most the count it is given: a
# host with more than umad.h's UMAD_MAX_DEVICES (32) CAs, SR-IOV functions or planarized
# HCAs among them, still shows every one
_UMAD_MAX_DEVICES = 128
# Longest single blocking call in recv(): long waits are sliced so that Ctrl-C
# (handled between bytecodes) is not stuck behind a foreign call for minutes.
_RECV_SLICE_MS = 200


# --------------------------------------------------------------------------
# Errors


class UmadError(FabricFailure):
    """Base class of everything this module raises about libibumad."""


class LibraryMissing(UmadError):
    """libibumad.so.3 cannot be loaded."""


class NoDevice(UmadError):
    """No usable InfiniBand CA/port (or no ib_umad kernel support)."""


class PermissionDenied(UmadError):
    """The umad device exists but may not be opened by this user."""


class UnknownPort(UmadError):
    """The requested CA name or port number does not exist."""


class UmadIOError(UmadError):
    """A send, receive or agent registration failed."""

    def __init__(self, message: str, errno: int = 0):
        super().__init__(message)
        self.errno = errno


_LIBRARY_MISSING_MSG = (
    "libibumad.so.3 not found: install rdma-core's libibumad3 "
    "(Debian/Ubuntu: apt install libibumad3)"
)
_NO_DEVICE_HINT = "use `--transport sim` for the built-in simulator, or check `ibstat`"


def _errtext(code: int) -> str:
    return f"{_errno.errorcode.get(code, f'errno {code}')}: {os.strerror(code)}"


# --------------------------------------------------------------------------
# C layouts (libibumad/umad.h)


class _IbMadAddr(ctypes.Structure):
    _fields_ = [
        ("qpn", ctypes.c_uint32),  # big-endian
        ("qkey", ctypes.c_uint32),  # big-endian
        ("lid", ctypes.c_uint16),  # big-endian
        ("sl", ctypes.c_uint8),
        ("path_bits", ctypes.c_uint8),
        ("grh_present", ctypes.c_uint8),
        ("gid_index", ctypes.c_uint8),
        ("hop_limit", ctypes.c_uint8),
        ("traffic_class", ctypes.c_uint8),
        ("gid", ctypes.c_uint8 * 16),
        ("flow_label", ctypes.c_uint32),  # big-endian
        ("pkey_index", ctypes.c_uint16),
        ("reserved", ctypes.c_uint8 * 6),
    ]


class _IbUserMad(ctypes.Structure):
    """struct ib_user_mad without its flexible ``data[]`` tail."""

    _fields_ = [
        ("agent_id", ctypes.c_uint32),
        ("status", ctypes.c_uint32),
        ("timeout_ms", ctypes.c_uint32),
        ("retries", ctypes.c_uint32),
        ("length", ctypes.c_uint32),
        ("addr", _IbMadAddr),
    ]


UMAD_HEADER_SIZE = ctypes.sizeof(_IbUserMad)
assert UMAD_HEADER_SIZE == 64, UMAD_HEADER_SIZE
_STATUS_OFF = _IbUserMad.status.offset
_LID_OFF = _IbUserMad.addr.offset + _IbMadAddr.lid.offset
_ADDR = slice(_IbUserMad.addr.offset, _IbUserMad.addr.offset + ctypes.sizeof(_IbMadAddr))
assert _ADDR.stop == UMAD_HEADER_SIZE
_STATUS = struct.Struct("=I")  # host order, like the kernel writes it
_BE16 = struct.Struct(">H")


class _UmadPortT(ctypes.Structure):
    _fields_ = [
        ("ca_name", ctypes.c_char * _UMAD_CA_NAME_LEN),
        ("portnum", ctypes.c_int),
        ("base_lid", ctypes.c_uint),
        ("lmc", ctypes.c_uint),
        ("sm_lid", ctypes.c_uint),
        ("sm_sl", ctypes.c_uint),
        ("state", ctypes.c_uint),
        ("phys_state", ctypes.c_uint),
        ("rate", ctypes.c_uint),
        ("capmask", ctypes.c_uint32),  # big-endian
        ("gid_prefix", ctypes.c_uint64),  # big-endian
        ("port_guid", ctypes.c_uint64),  # big-endian
        ("pkeys_size", ctypes.c_uint),
        ("pkeys", ctypes.POINTER(ctypes.c_uint16)),
        ("link_layer", ctypes.c_char * _UMAD_CA_NAME_LEN),
    ]


class _UmadCaT(ctypes.Structure):
    _fields_ = [
        ("ca_name", ctypes.c_char * _UMAD_CA_NAME_LEN),
        ("node_type", ctypes.c_uint),
        ("numports", ctypes.c_int),
        ("fw_ver", ctypes.c_char * 20),
        ("ca_type", ctypes.c_char * 40),
        ("hw_ver", ctypes.c_char * 20),
        ("node_guid", ctypes.c_uint64),  # big-endian
        ("system_guid", ctypes.c_uint64),  # big-endian
        ("ports", ctypes.POINTER(_UmadPortT) * _UMAD_CA_MAX_PORTS),
    ]


_CaName = ctypes.c_char * _UMAD_CA_NAME_LEN


def _be64(value: int) -> int:
    """A be64 field read as a native (little-endian) integer, back to its value."""
    return int.from_bytes(value.to_bytes(8, "little"), "big")


def _be32(value: int) -> int:
    return int.from_bytes(value.to_bytes(4, "little"), "big")


_SIGNATURES = {
    "umad_init": ([], ctypes.c_int),
    "umad_done": ([], ctypes.c_int),
    "umad_get_cas_names": ([ctypes.POINTER(_CaName), ctypes.c_int], ctypes.c_int),
    "umad_get_ca": ([ctypes.c_char_p, ctypes.POINTER(_UmadCaT)], ctypes.c_int),
    "umad_release_ca": ([ctypes.POINTER(_UmadCaT)], ctypes.c_int),
    "umad_get_port": ([ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(_UmadPortT)], ctypes.c_int),
    "umad_release_port": ([ctypes.POINTER(_UmadPortT)], ctypes.c_int),
    "umad_open_port": ([ctypes.c_char_p, ctypes.c_int], ctypes.c_int),
    "umad_close_port": ([ctypes.c_int], ctypes.c_int),
    "umad_size": ([], ctypes.c_size_t),
    "umad_send": (
        [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int],
        ctypes.c_int,
    ),
    "umad_recv": (
        [ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int],
        ctypes.c_int,
    ),
    "umad_get_fd": ([ctypes.c_int], ctypes.c_int),
    "umad_register": (
        [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_uint8, ctypes.POINTER(ctypes.c_long)],
        ctypes.c_int,
    ),
    "umad_register_oui": (
        [ctypes.c_int, ctypes.c_int, ctypes.c_uint8, ctypes.POINTER(ctypes.c_uint8), ctypes.POINTER(ctypes.c_long)],
        ctypes.c_int,
    ),
    "umad_unregister": ([ctypes.c_int, ctypes.c_int], ctypes.c_int),
}


def _libc():
    """libc as the process sees it (``dlopen(NULL)``): under LD_PRELOAD, umad2sim's
    ``open``/``close`` come first, as they do for C callers."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.open.argtypes = [ctypes.c_char_p, ctypes.c_int]
    libc.open.restype = ctypes.c_int
    libc.close.argtypes = [ctypes.c_int]
    libc.close.restype = ctypes.c_int
    return libc


@contextlib.contextmanager
def _ctrl_c_kills():
    """Ctrl-C during the opening calls ends the process as it would a C tool.

    Python only notes a SIGINT and acts on it when a foreign call returns; under
    umad2sim with no ibsim listening, umad_get_cas_names() never returns, so the
    default handler would leave the user no way out but SIGKILL. Nothing is written
    before a port is open, so dying by the signal (the shell's 130) loses nothing.
    """
    main = threading.current_thread() is threading.main_thread()
    if not main or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield  # a caller's own handler (or another thread) keeps its say
        return
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _load(lib_path: str | None):
    path = lib_path or DEFAULT_LIBRARY
    try:
        lib = ctypes.CDLL(path, use_errno=True)
    except OSError as exc:
        raise LibraryMissing(f"{_LIBRARY_MISSING_MSG} [{path}: {exc}]") from exc
    for name, (argtypes, restype) in _SIGNATURES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError as exc:
            raise LibraryMissing(f"{path} has no {name}(): not rdma-core's libibumad.so.3?") from exc
        fn.argtypes = argtypes
        fn.restype = restype
    return lib


def _cas(lib) -> dict[str, list[int]]:
    """Every CA libibumad can really open, with the port numbers it has.

    umad_get_cas_names() falls back to a made-up default name ("mthca0") when
    /sys/class/infiniband is missing, so each name is confirmed with
    umad_get_ca() before it counts.
    """
    names = (_CaName * _UMAD_MAX_DEVICES)()
    n = lib.umad_get_cas_names(names, _UMAD_MAX_DEVICES)
    found: dict[str, list[int]] = {}
    for i in range(max(0, min(n, _UMAD_MAX_DEVICES))):
        name = names[i].value
        ca = _UmadCaT()
        if lib.umad_get_ca(name, ca) < 0:
            continue
        try:
            found[name.decode(errors="replace")] = [
                p for p in range(min(ca.numports, _UMAD_CA_MAX_PORTS - 1) + 1) if ca.ports[p]
            ]
        finally:
            lib.umad_release_ca(ca)
    return found


def _describe(cas: dict[str, list[int]]) -> str:
    if not cas:
        return "none"
    return ", ".join(
        f"{name} (port{'s' if len(ports) != 1 else ''} {','.join(map(str, ports)) or '-'})"
        for name, ports in cas.items()
    )


@dataclass(frozen=True)
class PortSummary:
    """One CA port as libibumad reads it from sysfs (`ports`)."""
    ca: str
    port: int
    port_guid: int
    phys_state: int  # 5: LinkUp
    link_layer: str  # "InfiniBand", or "Ethernet" (RoCE: no subnet to manage)

    def describe(self) -> str:
        return f"{self.ca} port {self.port} (port GUID {self.port_guid:#018x}, {self.link_layer})"


def _summaries(lib, cas: dict[str, list[int]]) -> list[PortSummary]:
    out = []
    for ca, nums in cas.items():
        for n in nums:
            info = _UmadPortT()
            if lib.umad_get_port(ca.encode(), n, info) < 0:
                continue
            try:
                out.append(PortSummary(ca, info.portnum, _be64(info.port_guid), info.phys_state,
                                       info.link_layer.decode(errors="replace")))
            finally:
                lib.umad_release_port(info)
    return out


def ports(lib_path: str | None = None) -> list[PortSummary]:
    """Every port of every CA libibumad lists (none: no library, module or device)."""
    lib = _load(lib_path)
    with _ctrl_c_kills():
        if lib.umad_init() < 0:
            return []
        try:
            return _summaries(lib, _cas(lib))
        finally:
            lib.umad_done()


def find_port_guid(guid: int, lib_path: str | None = None) -> tuple[str, int]:
    """The (CA, port number) whose port GUID is ``guid`` (OpenSM's -g), or UnknownPort
    naming the GUIDs there are."""
    found = ports(lib_path)
    for p in found:
        if p.port_guid == guid:
            return p.ca, p.port
    there = "; ".join(p.describe() for p in found) or "none (libibumad lists no CA)"
    raise UnknownPort(f"no local port has port GUID {guid:#018x}: the ports here: {there}")


def list_ports(lib_path: str | None = None) -> dict[str, list[int]]:
    """CA names libibumad can see, each with its port numbers (0 = switch port 0)."""
    lib = _load(lib_path)
    with _ctrl_c_kills():
        rc = lib.umad_init()
        if rc < 0:
            raise NoDevice(f"umad_init() failed ({_errtext(-rc)}); {_NO_DEVICE_HINT}")
        try:
            return _cas(lib)
        finally:
            lib.umad_done()


def method_mask(methods, long_type=ctypes.c_long):
    """The 128-bit method mask umad_register takes as ``long[]``: four 32-bit longs or
    two 64-bit ones, bit m of the whole for method m (libibumad sets bits per long)."""
    bits = ctypes.sizeof(long_type) * 8
    mask = (long_type * (128 // bits))()
    for m in methods:
        if not 0 <= m < 128:
            raise ValueError(f"method 0x{m:x} outside 0..0x7f")
        mask[m // bits] |= 1 << (m % bits)
    return mask


# --------------------------------------------------------------------------
# The port


_PORT_STATES = {0: "NoChange", 1: "Down", 2: "Initialize", 3: "Armed", 4: "Active"}


@dataclass(frozen=True)
class LocalPortInfo:
    """What the kernel (or umad2sim's fake sysfs) says about the local port."""

    ca: str
    port: int
    base_lid: int
    lmc: int
    sm_lid: int
    sm_sl: int
    state: int  # 1 Down, 2 Initialize, 3 Armed, 4 Active
    phys_state: int  # 5 LinkUp
    port_guid: int
    gid_prefix: int
    capability_mask: int
    link_layer: str
    node_type: int  # 1 CA, 2 switch (SM on switch port 0), 3 router
    node_guid: int

    @property
    def state_name(self) -> str:
        return _PORT_STATES.get(self.state, f"state {self.state}")


class UmadPort:
    """One opened umad port, through libibumad::

        with UmadPort() as p:                       # libibumad's default CA/port
            agent = p.register(0x81)                # directed-route SMPs
            p.send(agent, smp_bytes, dlid=0xFFFF)   # 0xFFFF: permissive, for DR
            got = p.recv(1000)                      # (mad bytes, umad status) or None

    Responses are matched by the caller on the low 32 bits of the TID (MAD
    bytes 12..15): the kernel and umad2sim overwrite the upper half with the
    agent id.
    """

    def __init__(self, ca: str | None = None, port: int | None = None, lib_path: str | None = None):
        self._portid = -1  # what umad_open_port returned (the fd itself in current rdma-core)
        self._issm_fd, self._issm_path = -1, ""
        self.last_addr = bytes(_ADDR.stop - _ADDR.start)  # ib_mad_addr of the MAD `recv` returned last
        self._fd = -1
        self._agents: list[int] = []
        self._initialized = False
        self._lib = lib = _load(lib_path)
        with _ctrl_c_kills():
            rc = lib.umad_init()
            if rc < 0:
                raise NoDevice(f"umad_init() failed ({_errtext(-rc)}); {_NO_DEVICE_HINT}")
            self._initialized = True
            try:
                self.ca, self.port = self._resolve(ca, port)
                self._open()
            except BaseException:
                self.close()
                raise

        # Preallocated buffers: header + one MAD each, reused for every call.
        # Copies go through byte memoryviews: several times cheaper than
        # ctypes.memmove/string_at, and they take any bytes-like MAD.
        # umad_send and umad_recv are called with their pointers as ready ctypes objects
        # (c_void_p, byref) through a second handle on the library whose functions have
        # no argtypes: argtypes conversion cost more than the rest of a cached SA answer.
        self._sbuf = ctypes.create_string_buffer(UMAD_HEADER_SIZE + MAD_SIZE)
        self._saddr = ctypes.c_void_p(ctypes.addressof(self._sbuf))
        self._sview = memoryview(self._sbuf).cast("B")
        self._rbuf = ctypes.create_string_buffer(UMAD_HEADER_SIZE + MAD_SIZE)
        self._raddr = ctypes.c_void_p(ctypes.addressof(self._rbuf))
        self._rview = memoryview(self._rbuf).cast("B")
        self._rlen = ctypes.c_int(MAD_SIZE)
        self._rlen_ref = ctypes.byref(self._rlen)
        # QP0, qkey 0, SL 0, no GRH, pkey index 0: all zero already; only the
        # destination LID changes per SMP, so remember the last one written (-1: the
        # address holds a GMP's, cleared before the next SMP).
        self._last_dlid = -1
        bare = ctypes.CDLL(lib_path or DEFAULT_LIBRARY, use_errno=True)  # the same library, loaded already
        self._send_fn, self._recv_fn = bare.umad_send, bare.umad_recv
        # the same two keeping the GIL, for the flood's calls that cannot wait (a send; a
        # receive with timeout 0): a release and re-take around each costs more than they do
        held = ctypes.PyDLL(lib_path or DEFAULT_LIBRARY, use_errno=True)
        self._send_now, self._recv_now = held.umad_send, held.umad_recv
        for fn in (self._send_fn, self._recv_fn, self._send_now, self._recv_now):
            fn.restype = ctypes.c_int  # and argtypes None: ints go as C int, pointers as the objects above

    # -- opening ---------------------------------------------------------

    def _resolve(self, ca: str | None, port: int | None) -> tuple[str, int]:
        lib = self._lib
        cas = _cas(lib)
        if not cas:
            raise NoDevice(
                f"no InfiniBand device/port found (libibumad lists no CA under "
                f"/sys/class/infiniband); {_NO_DEVICE_HINT}"
            )
        if ca is not None and ca not in cas:
            raise UnknownPort(f"unknown --ca {ca}: available CAs: {_describe(cas)}")
        if port is not None:
            if port < 0:
                raise UnknownPort(f"unknown --port {port}: port numbers are >= 0")
            if port and ca is not None and port not in cas[ca]:
                raise UnknownPort(f"unknown --port {port} on CA {ca}: available: {_describe({ca: cas[ca]})}")
            if port and ca is None and not any(port in ports for ports in cas.values()):
                raise UnknownPort(f"unknown --port {port}: no CA has it; available: {_describe(cas)}")

        # Let libibumad make its usual choice (first Active port, else LinkUp,
        # else any enabled; switch port 0 on a switch), then read it back.
        info = _UmadPortT()
        rc = lib.umad_get_port(ca.encode() if ca is not None else None, port or 0, info)
        if rc < 0:
            what = f"CA {ca or '(default)'} port {port if port is not None else '(default)'}"
            if port:
                raise UnknownPort(f"unknown --port {port}: {what} not usable; available: {_describe(cas)}")
            raise self._error(rc, ctypes.get_errno(), f"cannot query {what}")
        try:
            link = info.link_layer.decode(errors="replace")
            if link == "Ethernet":  # RoCE: no SMPs, no subnet (umad2sim says "IB", sysfs "InfiniBand")
                raise UnknownPort(f"CA {info.ca_name.decode(errors='replace')} port {info.portnum} has link layer "
                                  f"{link} (RoCE): it has no InfiniBand subnet to manage; the ports here: "
                                  f"{_describe(cas)}")
            return info.ca_name.decode(errors="replace"), info.portnum
        finally:
            lib.umad_release_port(info)

    def _open(self) -> None:
        lib = self._lib
        rc = lib.umad_open_port(self.ca.encode(), self.port)
        if rc < 0:
            raise self._error(rc, ctypes.get_errno(), f"cannot open umad device of CA {self.ca} port {self.port}")
        self._portid = rc
        fd = lib.umad_get_fd(rc)
        self._fd = fd if fd >= 0 else rc
        # umad_size() is 64 only once the kernel ABI with P_Key support is in
        # use (decided inside umad_open_port); the buffers assume it.
        size = lib.umad_size()
        if size != UMAD_HEADER_SIZE:
            raise UmadError(
                f"libibumad uses a {size}-byte umad header (kernel ib_umad ABI without "
                f"P_Key support); only the {UMAD_HEADER_SIZE}-byte ABI 5+ header is supported"
            )

    def _error(self, rc: int, saved_errno: int, action: str) -> UmadError:
        """Map a negative libibumad return (plus errno) to the exception family."""
        code = -rc if rc < 0 else saved_errno
        # umad_open_port turns every failed open() into -EIO; errno keeps why.
        if code in (_errno.EIO, _errno.EPERM) and saved_errno and saved_errno != code:
            code = saved_errno
        if code in (_errno.EACCES, _errno.EPERM):
            return PermissionDenied(
                f"{action}: {_errtext(code)} opening /dev/infiniband/umadN: "
                f"run as root or join the rdma group"
            )
        if code == _errno.EOPNOTSUPP:
            return NoDevice(
                f"{action}: the ib_umad kernel module is not loaded "
                f"(no /sys/class/infiniband_mad/abi_version; try `modprobe ib_umad`); {_NO_DEVICE_HINT}"
            )
        if code in (_errno.ENODEV, _errno.ENOENT, _errno.ENXIO, _errno.EINVAL):
            # EINVAL from umad_open_port: no /dev/infiniband/umadN maps to that CA/port.
            return NoDevice(f"{action}: no InfiniBand device/port found ({_errtext(code)}); {_NO_DEVICE_HINT}")
        return UmadIOError(f"{action}: {_errtext(code)}", code)

    # -- agents ------------------------------------------------------------

    def register(self, mgmt_class: int, class_version: int = 1, methods=(), *, rmpp_version: int = 0,
                 oui: int | None = None) -> int:
        """Register an agent for a management class; returns its agent id.

        0x81 (directed-route SMPs) and 0x01 (LID-routed SMPs) go to QP0, every
        other class to QP1. ``methods`` lists request methods to receive
        unsolicited (e.g. 0x05 Trap, an SA's 0x12 GetTable); responses to our
        own requests arrive regardless. ``rmpp_version`` 0: the kernel leaves
        RMPP to us (umad2sim knows none). ``oui``: a vendor class of the range
        0x30-0x4F, registered with its OUI (umad_register_oui).
        """
        self._check_open()
        mask = method_mask(methods)
        what = f"management class 0x{mgmt_class:02x}"
        if oui is None:
            rc = self._lib.umad_register(self._portid, mgmt_class, class_version, rmpp_version, mask)
        else:
            if not 0x30 <= mgmt_class <= 0x4F or not 0 <= oui <= 0xFFFFFF:
                raise ValueError(f"an OUI registers a vendor class 0x30..0x4f with a 24-bit OUI, not class "
                                 f"0x{mgmt_class:02x} OUI 0x{oui:x}")
            rc = self._lib.umad_register_oui(self._portid, mgmt_class, rmpp_version,
                                             (ctypes.c_uint8 * 3)(*oui.to_bytes(3, "big")), mask)
            what += f" OUI 0x{oui:06x}"
        if rc < 0:
            # umad_register reports every failure as -EPERM; the ioctl's errno is the real cause.
            err = ctypes.get_errno() or -rc
            why = ""
            if err == _errno.EACCES and mgmt_class in (0x01, 0x81):
                # the kernel asks the security module (SELinux: ib_endport manage_subnet) for
                # every QP0 agent: a confined service is refused here, not at open
                why = (f": the kernel's security module refused this process the management of the subnet "
                       f"on {self.ca} port {self.port} (QP0); allow it (SELinux: ib_endport manage_subnet) "
                       f"or run the SM unconfined")
            raise UmadIOError(
                f"cannot register an agent for {what} version {class_version} on {self.ca} port "
                f"{self.port}: {_errtext(err)}{why}",
                err,
            )
        self._agents.append(rc)
        return rc

    # -- I/O ---------------------------------------------------------------

    def send(self, agent_id: int, mad: bytes, dlid: int, timeout_ms: int = DEFAULT_TIMEOUT_MS, retries: int = 0,
             addr: bytes | None = None) -> None:
        """Send one MAD on QP0 to ``dlid`` (0xFFFF, permissive, for directed route), or,
        with ``addr`` (a packed ib_mad_addr: `smagent.transport.address.Address.pack`),
        to that address (a GMP: its QP, Q_Key, SL, P_Key index, GRH; ``dlid`` unused).

        ``timeout_ms`` must be > 0 for a request whose response you want on
        real hardware; the request then comes back from :meth:`recv` with
        status 110 if nothing answers (umad2sim does so at once).
        """
        if self._portid < 0:
            self._check_open()
        n = len(mad)
        if n > MAD_SIZE:
            raise ValueError(f"MAD is {n} bytes; at most {MAD_SIZE}")
        if addr is not None:
            if len(addr) != _ADDR.stop - _ADDR.start:
                raise ValueError(f"address is {len(addr)} bytes; ib_mad_addr is {_ADDR.stop - _ADDR.start}")
            self._sview[_ADDR] = addr
            dlid = _BE16.unpack_from(addr, _LID_OFF - _ADDR.start)[0]
            self._last_dlid = -1
        elif dlid != self._last_dlid:
            if not 0 <= dlid <= 0xFFFF:
                raise ValueError(f"dlid {dlid} outside 0..0xFFFF")
            if self._last_dlid == -1:  # after a GMP (or first): QP0, Q_Key 0, no GRH
                self._sview[_ADDR] = bytes(_ADDR.stop - _ADDR.start)
            _BE16.pack_into(self._sview, _LID_OFF, dlid)
            self._last_dlid = dlid
        self._sview[UMAD_HEADER_SIZE : UMAD_HEADER_SIZE + n] = mad
        rc = self._send_fn(self._portid, agent_id, self._saddr, n, timeout_ms, retries)
        if rc < 0:
            err = ctypes.get_errno() or -rc
            raise UmadIOError(f"umad_send to LID 0x{dlid:04x} (agent {agent_id}) failed: {_errtext(err)}", err)

    def recv(self, timeout_ms: int) -> tuple[bytes, int] | None:
        """Wait up to ``timeout_ms`` (< 0: forever, 0: don't wait) for one MAD.

        Returns ``(mad, status)``, status being the umad status (0, or 110 =
        ETIMEDOUT for a request nobody answered: the MAD is then our request),
        or None when nothing arrived in time.
        """
        portid = self._portid
        if portid < 0:
            self._check_open()
        rlen = self._rlen
        if 0 <= timeout_ms <= _RECV_SLICE_MS:
            deadline = None
            wait = timeout_ms
        else:
            deadline = None if timeout_ms < 0 else time.monotonic() + timeout_ms / 1000
            wait = _RECV_SLICE_MS
        while True:
            rlen.value = MAD_SIZE
            rc = self._recv_fn(portid, self._raddr, self._rlen_ref, wait)
            if rc == -_errno.ENOSPC:
                self._drop_oversize()
                continue
            if rc >= 0:
                view = self._rview
                mad = view[UMAD_HEADER_SIZE : UMAD_HEADER_SIZE + rlen.value].tobytes()
                self.last_addr = view[_ADDR].tobytes()
                return mad, _STATUS.unpack_from(view, _STATUS_OFF)[0]
            err = ctypes.get_errno()
            if rc not in (-_errno.ETIMEDOUT, -_errno.EAGAIN) and err != _errno.EINTR:
                err = err or -rc
                raise UmadIOError(f"umad_recv on {self.ca} port {self.port} failed: {_errtext(err)}", err)
            # Timed out (or interrupted): go on waiting only within a long timeout.
            if timeout_ms < 0:
                continue
            if deadline is None:
                # Short wait cut by a signal: wait once more, the full time at most.
                if err == _errno.EINTR and timeout_ms:
                    deadline = time.monotonic() + timeout_ms / 1000
                else:
                    return None
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            wait = min(_RECV_SLICE_MS, max(1, int(left * 1000 + 0.999)))

    def recv_ready(self, limit: int = 64) -> list[tuple[bytes, int, bytes]]:
        """The MADs already queued (up to ``limit``), without waiting: (mad, umad status,
        packed ib_mad_addr) each. One foreign call per MAD and none of `recv`'s slicing:
        what a server drains after each wake-up under a flood of requests."""
        fn, portid, raddr, rlen, rlen_ref, view = (self._recv_fn, self._portid, self._raddr, self._rlen, self._rlen_ref,
                                                   self._rview)
        if portid < 0:
            self._check_open()
        out: list[tuple[bytes, int, bytes]] = []
        while len(out) < limit:
            rlen.value = MAD_SIZE
            rc = fn(portid, raddr, rlen_ref, 0)
            if rc == -_errno.ENOSPC:
                self._drop_oversize()
                continue
            if rc < 0:
                err = ctypes.get_errno()
                if rc not in (-_errno.ETIMEDOUT, -_errno.EAGAIN) and err != _errno.EINTR:
                    err = err or -rc
                    raise UmadIOError(f"umad_recv on {self.ca} port {self.port} failed: {_errtext(err)}", err)
                break
            out.append((view[UMAD_HEADER_SIZE : UMAD_HEADER_SIZE + rlen.value].tobytes(),
                        _STATUS.unpack_from(view, _STATUS_OFF)[0], view[_ADDR].tobytes()))
        if out:
            self.last_addr = out[-1][2]
        return out

    def answer_until(self, answer, agents: dict[int, int], deadline: float, sent: list[bytes],
                     late_limit: int = 64) -> tuple[bytes, int, bytes, bool] | None:
        """Receive until time.monotonic() passes ``deadline``, answering at once every
        request (status 0, no response bit) that ``answer(mad, packed ib_mad_addr)``
        answers (it returns [(answer, packed address)] or None), each answer sent untimed
        through ``agents[its class]`` and appended to ``sent``. Returns the first MAD it
        did not answer as (mad, status, packed ib_mad_addr, whether ``answer`` declined
        it), or None at the deadline: past it, at most ``late_limit`` more queued MADs are
        answered (a flood that never lets the queue empty must not hold the caller's
        timers). A flood of cached answers is served here, in one Python frame and two
        foreign calls a MAD (`UmadTransport.poll` calls it). Each answer goes before the
        next request is read: holding answers while more requests were queued (to send them
        back to back) left the requesters idle meanwhile, and a single requester flooding
        with 8 in flight got 4-10 % fewer answers per second."""
        fn, now_fn, portid, raddr, rlen, rlen_ref, view = (self._recv_fn, self._recv_now, self._portid, self._raddr,
                                                           self._rlen, self._rlen_ref, self._rview)
        if portid < 0:
            self._check_open()
        self._last_dlid = -1  # the send buffer's address will hold a GMP's: the next SMP writes its own
        monotonic, late, ready = time.monotonic, 0, False
        while True:
            left = deadline - monotonic()
            if left <= 0:
                if late >= late_limit:
                    return None
                late += 1
            rlen.value = MAD_SIZE
            # after an answer, another request is often queued already: a read without the
            # poll first (timeout 0, the GIL kept) takes it, one system call instead of two
            rc = (now_fn(portid, raddr, rlen_ref, 0) if ready or left <= 0 else
                  fn(portid, raddr, rlen_ref, min(_RECV_SLICE_MS, int(left * 1000 + 0.999))))
            if rc == -_errno.ENOSPC:
                self._drop_oversize()
                continue
            if rc < 0:
                err = ctypes.get_errno()
                if rc not in (-_errno.ETIMEDOUT, -_errno.EAGAIN) and err != _errno.EINTR:
                    err = err or -rc
                    raise UmadIOError(f"umad_recv on {self.ca} port {self.port} failed: {_errtext(err)}", err)
                if left <= 0:
                    return None
                ready = False
                continue
            ready = True
            mad = view[UMAD_HEADER_SIZE : UMAD_HEADER_SIZE + rlen.value].tobytes()
            status, addr = _STATUS.unpack_from(view, _STATUS_OFF)[0], view[_ADDR].tobytes()
            if status or len(mad) < 4 or mad[3] & 0x80:
                self.last_addr = addr
                return mad, status, addr, False
            answers = answer(mad, addr)
            if answers is None:
                self.last_addr = addr
                return mad, status, addr, True
            self._send_answers(answers, agents, sent)

    def _send_answers(self, answers: list[tuple[bytes, bytes]], agents: dict[int, int], sent: list[bytes]) -> None:
        """`answer_until`'s answers to one request, sent in order, untimed, the GIL kept."""
        send_fn, portid, sview, saddr = self._send_now, self._portid, self._sview, self._saddr
        for out, to in answers:
            agent = agents.get(out[1])
            if agent is None:
                raise UmadError(f"no agent for management class {out[1]:#04x} on {self.ca} port {self.port}")
            n = len(out)
            sview[_ADDR] = to  # 44 bytes, or the memoryview raises
            sview[UMAD_HEADER_SIZE : UMAD_HEADER_SIZE + n] = out
            if send_fn(portid, agent, saddr, n, 0, 0) < 0:
                err = ctypes.get_errno()
                raise UmadIOError(f"umad_send to LID 0x{_BE16.unpack_from(to, _LID_OFF - _ADDR.start)[0]:04x} "
                                  f"(agent {agent}) failed: {_errtext(err)}", err)
            sent.append(out)

    def _drop_oversize(self) -> None:
        """umad_recv said ENOSPC: the MAD queued first is longer than one MAD (a message the
        kernel reassembled, RMPP it does for an agent registered with an RMPP version; ours
        leave RMPP to us) and stays queued until read, so every later read would fail the
        same. Read it whole into a buffer of the length umad_recv asked for and drop it."""
        need = max(self._rlen.value, MAD_SIZE)
        buf = ctypes.create_string_buffer(UMAD_HEADER_SIZE + need)
        length = ctypes.c_int(need)
        rc = self._recv_fn(self._portid, ctypes.c_void_p(ctypes.addressof(buf)), ctypes.byref(length), 0)
        log.warning("dropped a %d-byte MAD message on %s port %s (longer than one MAD: RMPP done by the kernel, "
                    "which smagent does itself)%s", need, self.ca, self.port, "" if rc >= 0 else f": {_errtext(-rc)}")

    def send_to(self, agent_id: int, mad: bytes, addr: bytes) -> None:
        """Send one MAD that expects no answer (timeout 0) to a packed ib_mad_addr (a GMP's
        reply address, `Address.pack`): `send`'s checks left to the caller, the SA's
        answers under a flood take this path."""
        if self._portid < 0:
            self._check_open()
        n = len(mad)
        view = self._sview
        view[_ADDR] = addr  # 44 bytes, or the memoryview raises
        view[UMAD_HEADER_SIZE : UMAD_HEADER_SIZE + n] = mad
        self._last_dlid = -1  # the address holds a GMP's: the next SMP writes its own
        rc = self._send_fn(self._portid, agent_id, self._saddr, n, 0, 0)
        if rc < 0:
            err = ctypes.get_errno() or -rc
            raise UmadIOError(f"umad_send to LID 0x{_BE16.unpack_from(addr, _LID_OFF - _ADDR.start)[0]:04x} "
                              f"(agent {agent_id}) failed: {_errtext(err)}", err)

    @property
    def last_slid(self) -> int:
        """The source LID of the MAD `recv` returned last (whom to answer)."""
        return _BE16.unpack_from(self.last_addr, _LID_OFF - _ADDR.start)[0]

    def open_issm(self) -> str:
        """Set IsSM on this port the way an SM does on Linux: hold its issm device open
        (``/dev/infiniband/issmN``) until `close`. Returns the device path.

        The device is opened with libc's ``open`` through ctypes, never ``os.open``:
        ibsim's umad2sim intercepts ``open`` only (Python's os.open calls ``open64``),
        so the same call sets IsSM on real hardware and under ibsim. The kernel lets one
        process hold a port's issm device; opened without O_NONBLOCK a second SM's open
        waits until the first closes it (for ever), so it is opened O_NONBLOCK, as OpenSM
        does, and EAGAIN means another SM holds the port.
        """
        self._check_open()
        if self._issm_fd >= 0:
            return self._issm_path
        try:
            fn = self._lib.umad_get_issm_path
        except AttributeError:
            raise UmadError("libibumad has no umad_get_issm_path(): rdma-core too old to run an SM") from None
        fn.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        fn.restype = ctypes.c_int
        buf = ctypes.create_string_buffer(256)
        rc = fn(self.ca.encode(), self.port, buf, len(buf))
        if rc < 0:
            raise self._error(rc, ctypes.get_errno(), f"cannot find the issm device of CA {self.ca} port {self.port}")
        path = buf.value.decode(errors="replace")
        libc = _libc()
        fd = libc.open(path.encode(), os.O_RDWR | os.O_NONBLOCK)
        if fd < 0:
            err = ctypes.get_errno()
            if err in (_errno.EAGAIN, _errno.EBUSY):
                raise UmadIOError(f"{path} is busy: another subnet manager holds {self.ca} port {self.port}", err)
            if err in (_errno.EACCES, _errno.EPERM):
                raise PermissionDenied(f"cannot open {path}: {_errtext(err)}: run as root or join the rdma group")
            raise UmadIOError(f"cannot open {path}: {_errtext(err or _errno.EIO)}", err)
        self._issm_fd, self._issm_path = fd, path
        return path

    def fileno(self) -> int:
        """The umad descriptor, for ``select.poll()``.

        Not for ``select.select``/epoll: umad2sim's fake descriptors are >=
        1024 and exist only for its interposed libc calls. Under umad2sim a
        poll() set that holds the umad fd waits on that fd alone and never
        reports the others, so poll it by itself.
        """
        self._check_open()
        return self._fd

    def local_port_info(self) -> LocalPortInfo:
        """Read the local port's state afresh (LIDs change when an SM runs)."""
        self._check_open()
        lib = self._lib
        info = _UmadPortT()
        rc = lib.umad_get_port(self.ca.encode(), self.port, info)
        if rc < 0:
            raise self._error(rc, ctypes.get_errno(), f"cannot query CA {self.ca} port {self.port}")
        try:
            ca = _UmadCaT()
            node_type = node_guid = 0
            if lib.umad_get_ca(self.ca.encode(), ca) >= 0:
                node_type, node_guid = ca.node_type, _be64(ca.node_guid)
                lib.umad_release_ca(ca)
            return LocalPortInfo(
                ca=info.ca_name.decode(errors="replace"),
                port=info.portnum,
                base_lid=info.base_lid,
                lmc=info.lmc,
                sm_lid=info.sm_lid,
                sm_sl=info.sm_sl,
                state=info.state,
                phys_state=info.phys_state,
                port_guid=_be64(info.port_guid),
                gid_prefix=_be64(info.gid_prefix),
                capability_mask=_be32(info.capmask),
                link_layer=info.link_layer.decode(errors="replace"),
                node_type=node_type,
                node_guid=node_guid,
            )
        finally:
            lib.umad_release_port(info)

    # -- closing -------------------------------------------------------------

    def _check_open(self) -> None:
        if self._portid < 0:
            raise UmadError("umad port is closed")

    @property
    def closed(self) -> bool:
        return self._portid < 0

    def close(self) -> None:
        """Unregister agents, close the port, release libibumad. Idempotent."""
        lib = self._lib
        if self._issm_fd >= 0:  # IsSM clears when the device closes
            _libc().close(self._issm_fd)
            self._issm_fd = -1
        if self._portid >= 0:
            for agent in self._agents:
                lib.umad_unregister(self._portid, agent)
            self._agents.clear()
            lib.umad_close_port(self._portid)
            self._portid = self._fd = -1
        if self._initialized:
            self._initialized = False
            lib.umad_done()

    def __enter__(self) -> UmadPort:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._portid < 0 else f"fd {self._fd}"
        return f"<UmadPort {getattr(self, 'ca', '?')} port {getattr(self, 'port', '?')} {state}>"
