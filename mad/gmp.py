"""What every General Services MAD (GMP: SA, PerfMgt, and the other classes on QP1) has
in common: ClassPortInfo (IBA 13.4.8.1), building a request or a response of any class,
and reading one's status and data.

A GMP is the common header (mad.header) and 232 bytes of the class's own: most classes
put 40 reserved bytes before a 192-byte data area (`data_offset`), Subnet Administration
its SA header (mad.sa) before 200 bytes of data.
"""
from __future__ import annotations

from typing import Annotated, ClassVar, TypeVar

from construct import Bytes, BitsInteger, Bytewise

from mad.errors import MadFieldError, MadLengthError, UnknownVersionError
from mad.header import (
    ATTRIBUTE_ID_SLICE, ATTRIBUTE_MODIFIER_SLICE, BASE_VERSION, CLASS_VERSIONS, HEADER_SIZE, MAD_SIZE,
    METHOD_OFFSET, RESPONSE_BIT, SMP_CLASSES, STATUS_SLICE, TID_SLICE, MadHeader, MgmtClass, Status, method_name,
    response_method, status_word_of,
)
from mad.layout import U4, U8, U16, U24, U32, LayoutValue, layout

L = TypeVar("L", bound=LayoutValue)

CLASS_PORT_INFO = 0x0001  # the AttributeID of ClassPortInfo in every class
# where a class's data area starts (bytes into the MAD); classes not named: 64
_DATA_OFFSETS = {int(MgmtClass.SUBN_ADM): 56}
DEFAULT_DATA_OFFSET = 64

B = BitsInteger


def data_offset(mgmt_class: int) -> int:
    """Where ``mgmt_class``'s data area starts in a MAD."""
    return _DATA_OFFSETS.get(mgmt_class, DEFAULT_DATA_OFFSET)


_GID = Annotated[bytes, Bytewise(Bytes(16))]


@layout()
class ClassPortInfo(LayoutValue):
    """ClassPortInfo (IBA 13.4.8.1, 72 bytes): what a class agent supports, where it
    redirects requests to and where it sends traps."""
    ATTR_ID: ClassVar[int] = CLASS_PORT_INFO
    base_version: U8 = 0
    class_version: U8 = 0
    capability_mask: U16 = 0
    capability_mask2: Annotated[int, B(27)] = 0
    resp_time_value: Annotated[int, B(5)] = 0
    redirect_gid: _GID = bytes(16)
    redirect_tc: U8 = 0
    redirect_sl: U4 = 0
    redirect_fl: Annotated[int, B(20)] = 0
    redirect_lid: U16 = 0
    redirect_p_key: U16 = 0
    reserved: U8 = 0
    redirect_qp: U24 = 0
    redirect_q_key: U32 = 0
    trap_gid: _GID = bytes(16)
    trap_tc: U8 = 0
    trap_sl: U4 = 0
    trap_fl: Annotated[int, B(20)] = 0
    trap_lid: U16 = 0
    trap_p_key: U16 = 0
    trap_hl: U8 = 0
    trap_qp: U24 = 0
    trap_q_key: U32 = 0


assert ClassPortInfo.LAYOUT.size == 72


def _payload(mgmt_class: int, data: bytes | bytearray | LayoutValue | None) -> bytes:
    room = MAD_SIZE - data_offset(mgmt_class)
    if data is None:
        return b""
    raw = bytes(data) if isinstance(data, (bytes, bytearray)) else data.encode()
    if len(raw) > room:
        raise MadFieldError("data", f"{len(raw)} bytes", f"at most {room} bytes in a class {mgmt_class:#04x} MAD")
    return raw


def build(mgmt_class: int, method: int, attribute_id: int, modifier: int = 0,
          data: bytes | bytearray | LayoutValue | None = None, *, tid: int, status: int = 0,
          class_version: int | None = None, class_header: bytes = b"") -> bytes:
    """One GMP of any class: the common header, ``class_header`` (the bytes between the
    header and the data area: SA's RMPP header, SM_Key, ...; zeros if not given), then
    ``data`` at the class's data offset. ``class_version``: the class's (CLASS_VERSIONS)."""
    if mgmt_class in SMP_CLASSES:
        raise MadFieldError("mgmt_class", f"{mgmt_class:#04x}", "a GMP class (SMPs are built by mad.smp)")
    if class_version is None:
        class_version = CLASS_VERSIONS.get(mgmt_class, 1)
    start = data_offset(mgmt_class)
    if len(class_header) > start - HEADER_SIZE:
        raise MadFieldError("class_header", f"{len(class_header)} bytes", f"at most {start - HEADER_SIZE} bytes")
    head = MadHeader(base_version=BASE_VERSION, mgmt_class=mgmt_class, class_version=class_version,
                     method=int(method), status=status, class_specific=0, transaction_id=tid,
                     attribute_id=int(attribute_id), attribute_modifier=modifier).encode()
    body = _payload(mgmt_class, data)
    return (head + class_header.ljust(start - HEADER_SIZE, b"\0") + body).ljust(MAD_SIZE, b"\0")


def response_to(request: bytes | bytearray, *, status: int = 0,
                data: bytes | bytearray | LayoutValue | None = None) -> bytes:
    """The response a class agent sends to ``request``: same class, version, TID,
    attribute and modifier; the response method (GetResp for Get and Set); ``data``
    (the request's data area if None) and ``status``; the class header kept."""
    check(request)
    if request[METHOD_OFFSET] & RESPONSE_BIT:
        raise MadFieldError("method", f"{request[METHOD_OFFSET]:#04x}", "a request (R bit clear)")
    cls = request[1]
    start = data_offset(cls)
    out = bytearray(request)
    out[METHOD_OFFSET] = response_method(request[METHOD_OFFSET])
    out[STATUS_SLICE] = status.to_bytes(2, "big")
    if data is not None:
        body = _payload(cls, data)
        out[start:] = body.ljust(MAD_SIZE - start, b"\0")
    return bytes(out)


def check(buf: bytes | bytearray | memoryview) -> None:
    """MadError unless ``buf`` is a whole MAD of a GMP class."""
    if len(buf) != MAD_SIZE:
        raise MadLengthError(f"MAD: {len(buf)} bytes, a GMP is exactly {MAD_SIZE}")
    if buf[0] != BASE_VERSION:
        raise UnknownVersionError(f"base_version={buf[0]}: only {BASE_VERSION} is defined")
    if buf[1] in SMP_CLASSES:
        raise UnknownVersionError(f"mgmt_class={buf[1]:#04x}: a subnet management class, not a GMP")


def header_of(buf: bytes | bytearray | memoryview) -> MadHeader:
    """The common header of a GMP (any class), checked."""
    check(buf)
    return MadHeader.decode(buf)


def status_of(buf: bytes | bytearray | memoryview) -> Status:
    """A GMP's status (busy, redirect, invalid field, the class's own bits 15:8)."""
    return Status.from_word(status_word_of(buf))


def data_of(buf: bytes | bytearray | memoryview) -> bytes:
    """A GMP's data area (from the class's data offset to the end of the MAD)."""
    return bytes(buf[data_offset(buf[1]):MAD_SIZE])


def value_of(buf: bytes | bytearray | memoryview, kind: type[L]) -> L:
    """The data area decoded as ``kind`` (a layout: ClassPortInfo, PortCounters, ...)."""
    data = data_of(buf)
    if len(data) < kind.LAYOUT.size:  # type: ignore[attr-defined]
        raise MadLengthError(f"{kind.__name__}: {kind.LAYOUT.size} bytes, "  # type: ignore[attr-defined]
                             f"the data area holds {len(data)}")
    return kind.decode(data)


# Attribute names per class, for messages and counts; classes register theirs (mad.perfmgt)
ATTRIBUTE_NAMES: dict[int, dict[int, str]] = {}


def attribute_name(mgmt_class: int, attribute_id: int) -> str:
    names = ATTRIBUTE_NAMES.get(mgmt_class, {})
    if attribute_id == CLASS_PORT_INFO:
        return "ClassPortInfo"
    return names.get(attribute_id, f"attribute {attribute_id:#06x}")


def describe(buf: bytes | bytearray | memoryview) -> str:
    """"PerfGet(PortCounters, modifier 0x0)": method, attribute and modifier from the bytes."""
    cls = buf[1]
    attr = int.from_bytes(buf[ATTRIBUTE_ID_SLICE], "big")
    mod = int.from_bytes(buf[ATTRIBUTE_MODIFIER_SLICE], "big")
    return f"{method_name(buf[METHOD_OFFSET], cls)}({attribute_name(cls, attr)}, modifier {mod:#x})"


def tid_of(buf: bytes | bytearray | memoryview) -> int:
    return int.from_bytes(buf[TID_SLICE], "big")


__all__ = ["ClassPortInfo", "CLASS_PORT_INFO", "build", "response_to", "check", "header_of", "status_of",
           "data_of", "value_of", "data_offset", "attribute_name", "describe", "tid_of", "ATTRIBUTE_NAMES"]
