"""The common MAD header (IBA 13.4.2), methods, management classes and the status word;
how a GMP is addressed (GSI: QP1 and its well-known Q_Key) and each class's version."""
from __future__ import annotations

import dataclasses
import enum

from construct import BitsInteger, Padding

from mad.layout import LayoutValue, layout

MAD_SIZE = 256
BASE_VERSION = 1


class MgmtClass(enum.IntEnum):
    SUBN_LID_ROUTED = 0x01
    SUBN_DIRECTED_ROUTE = 0x81
    SUBN_ADM = 0x03  # Subnet Administration (GMP, QP1)
    PERF_MGT = 0x04  # Performance Management (GMP, QP1)


SMP_CLASSES = frozenset({int(MgmtClass.SUBN_LID_ROUTED), int(MgmtClass.SUBN_DIRECTED_ROUTE)})
# The ClassVersion each class's MADs carry (IBA 13.4.2: SA is version 2 since IBA 1.1)
CLASS_VERSIONS = {int(MgmtClass.SUBN_LID_ROUTED): 1, int(MgmtClass.SUBN_DIRECTED_ROUTE): 1,
                  int(MgmtClass.SUBN_ADM): 2, int(MgmtClass.PERF_MGT): 1}
# General Services Interface: every GMP class is served on QP1 with this Q_Key (IBA 13.5.1)
GSI_QP = 1
GSI_QKEY = 0x80010000


class Method(enum.IntEnum):
    """Method byte including the R (response) bit, as libibmad and Wireshark show it.
    The SA methods (GetTable and the rest, IBA 15.2.2) are GMP-only."""
    GET = 0x01
    SET = 0x02
    SEND = 0x03
    TRAP = 0x05
    REPORT = 0x06
    TRAP_REPRESS = 0x07
    GET_TABLE = 0x12
    GET_TRACE_TABLE = 0x13
    GET_MULTI = 0x14
    DELETE = 0x15
    GET_RESP = 0x81
    REPORT_RESP = 0x86
    GET_TABLE_RESP = 0x92
    GET_MULTI_RESP = 0x94
    DELETE_RESP = 0x95

    @property
    def api_name(self) -> str:
        """The name with the subnet-management prefix ("SubnGet"): `method_name` for others."""
        return method_name(self)


_METHOD_BASE = {
    Method.GET: "Get", Method.SET: "Set", Method.SEND: "Send", Method.TRAP: "Trap", Method.REPORT: "Report",
    Method.TRAP_REPRESS: "TrapRepress", Method.GET_TABLE: "GetTable", Method.GET_TRACE_TABLE: "GetTraceTable",
    Method.GET_MULTI: "GetMulti", Method.DELETE: "Delete", Method.GET_RESP: "GetResp",
    Method.REPORT_RESP: "ReportResp", Method.GET_TABLE_RESP: "GetTableResp",
    Method.GET_MULTI_RESP: "GetMultiResp", Method.DELETE_RESP: "DeleteResp",
}
# the prefix IBA gives a class's methods (SubnGet, SubnAdmGetTable, PerfGet)
_CLASS_PREFIX = {int(MgmtClass.SUBN_LID_ROUTED): "Subn", int(MgmtClass.SUBN_DIRECTED_ROUTE): "Subn",
                 int(MgmtClass.SUBN_ADM): "SubnAdm", int(MgmtClass.PERF_MGT): "Perf"}


def method_name(method: int, mgmt_class: int = MgmtClass.SUBN_LID_ROUTED) -> str:
    """A method as IBA names it for ``mgmt_class`` (subnet management unless told)."""
    base = _METHOD_BASE.get(method)  # type: ignore[call-overload]
    if base is None:
        return f"method {method:#04x}"
    prefix = _CLASS_PREFIX.get(mgmt_class)
    return prefix + base if prefix is not None else f"class {mgmt_class:#04x} {base}"


def response_method(method: int) -> int:
    """The method of the response to a request (IBA 13.4.5: Get and Set get GetResp)."""
    return Method.GET_RESP if method in (Method.GET, Method.SET) else method | RESPONSE_BIT


# The first 24 bytes of every MAD. Split into pieces so the directed-route SMP can
# reuse them with its own reading of Status and ClassSpecific (see mad.smp).
HEADER_LEAD = [
    "base_version" / BitsInteger(8),
    "mgmt_class" / BitsInteger(8),
    "class_version" / BitsInteger(8),
    "method" / BitsInteger(8),  # R bit (0x80) + Method
]
HEADER_STATUS = [
    "status" / BitsInteger(16),
    "class_specific" / BitsInteger(16),
]
HEADER_TAIL = [
    "transaction_id" / BitsInteger(64),
    "attribute_id" / BitsInteger(16),
    Padding(16),
    "attribute_modifier" / BitsInteger(32),
]



@layout(*HEADER_LEAD, *HEADER_STATUS, *HEADER_TAIL)
class MadHeader(LayoutValue):
    """Common MAD header (24 bytes)."""
    base_version: int = 0
    mgmt_class: int = 0
    class_version: int = 0
    method: int = 0
    status: int = 0
    class_specific: int = 0
    transaction_id: int = 0
    attribute_id: int = 0
    attribute_modifier: int = 0


HEADER_SIZE = MadHeader.LAYOUT.size
MGMT_CLASS_OFFSET = MadHeader.LAYOUT.byte_slice("mgmt_class").start
STATUS_SLICE = MadHeader.LAYOUT.byte_slice("status")
ATTRIBUTE_ID_SLICE = MadHeader.LAYOUT.byte_slice("attribute_id")
ATTRIBUTE_MODIFIER_SLICE = MadHeader.LAYOUT.byte_slice("attribute_modifier")
METHOD_OFFSET = MadHeader.LAYOUT.byte_slice("method").start
RESPONSE_BIT = 0x80  # the R bit of the method byte
TID_SLICE = MadHeader.LAYOUT.byte_slice("transaction_id")
_TID32 = slice(TID_SLICE.stop - 4, TID_SLICE.stop)


def tid32_of(buf: bytes | bytearray | memoryview) -> int:
    """The low 32 bits of a MAD's TransactionID, read from the bytes. The kernel and
    umad2sim rewrite the high half, so replies are matched on this."""
    return int.from_bytes(buf[_TID32], "big")


def status_word_of(buf: bytes | bytearray | memoryview) -> int:
    """The 16-bit Status field as the wire carries it (for a directed-route SMP, D on top)."""
    return int.from_bytes(buf[STATUS_SLICE], "big")


def is_mad(buf: bytes | bytearray) -> bool:
    """A whole MAD of the base version this codec knows (any class)."""
    return len(buf) == MAD_SIZE and buf[0] == BASE_VERSION


class InvalidField(enum.IntEnum):
    """Status bits 4:2 (IBA Table 110)."""
    NONE = 0
    BAD_VERSION = 1
    METHOD_NOT_SUPPORTED = 2
    METHOD_ATTRIBUTE_NOT_SUPPORTED = 3
    INVALID_VALUE = 7

    @property
    def text(self) -> str:
        return _INVALID_TEXT[self]


_INVALID_TEXT = {
    InvalidField.NONE: "no invalid fields",
    InvalidField.BAD_VERSION: "bad version or class version not supported",
    InvalidField.METHOD_NOT_SUPPORTED: "method not supported",
    InvalidField.METHOD_ATTRIBUTE_NOT_SUPPORTED: "method/attribute combination not supported",
    InvalidField.INVALID_VALUE: "one or more fields in the attribute or attribute modifier contain an invalid value",
}


# The status bits that make an answer not ok (busy, redirect, InvalidField): for hot
# paths that read the word without building a Status; `Status.ok` is these bits clear
STATUS_ERROR_BITS = 0x1F


@dataclasses.dataclass(frozen=True, slots=True)
class Status:
    """The MAD status word decoded. For a directed-route SMP pass the 15 bits below D."""
    busy: bool
    redirect: bool
    invalid_field: int  # InvalidField value, or a reserved code 4..6
    class_specific: int  # bits 15:8 (bit 15 is D for directed route; callers strip it)

    @classmethod
    def from_word(cls, word: int) -> "Status":
        return cls(bool(word & 1), bool(word & 2), (word >> 2) & 7, (word >> 8) & 0xFF)

    @property
    def ok(self) -> bool:
        return not (self.busy or self.redirect or self.invalid_field)

    def describe(self) -> str:
        parts = []
        if self.busy:
            parts.append("busy")
        if self.redirect:
            parts.append("redirect required")
        if self.invalid_field:
            try:
                parts.append(InvalidField(self.invalid_field).text)
            except ValueError:
                parts.append(f"reserved invalid-field code {self.invalid_field}")
        if self.class_specific:
            parts.append(f"class-specific {self.class_specific:#04x}")
        return ", ".join(parts) or "ok"
