"""The common MAD header (IBA 13.4.2), methods, management classes and the status word."""
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


class Method(enum.IntEnum):
    """Method byte including the R (response) bit, as libibmad and Wireshark show it."""
    GET = 0x01
    SET = 0x02
    SEND = 0x03
    TRAP = 0x05
    TRAP_REPRESS = 0x07
    GET_RESP = 0x81

    @property
    def api_name(self) -> str:
        return _METHOD_NAMES[self]


_METHOD_NAMES = {
    Method.GET: "SubnGet", Method.SET: "SubnSet", Method.SEND: "SubnSend",
    Method.TRAP: "SubnTrap", Method.TRAP_REPRESS: "SubnTrapRepress", Method.GET_RESP: "SubnGetResp",
}


def method_name(method: int) -> str:
    try:
        return Method(method).api_name
    except ValueError:
        return f"method {method:#04x}"


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
METHOD_OFFSET = MadHeader.LAYOUT.byte_slice("method").start
RESPONSE_BIT = 0x80  # the R bit of the method byte
TID_SLICE = MadHeader.LAYOUT.byte_slice("transaction_id")
_TID32 = slice(TID_SLICE.stop - 4, TID_SLICE.stop)


def tid32_of(buf: bytes | bytearray | memoryview) -> int:
    """The low 32 bits of a MAD's TransactionID, read from the bytes. The kernel and
    umad2sim rewrite the high half, so replies are matched on this."""
    return int.from_bytes(buf[_TID32], "big")


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
