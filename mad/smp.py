"""Subnet Management Packets: the LID-routed (class 0x01) and directed-route (class 0x81)
formats (IBA 14.2.1), built on the common header's pieces, plus request builders."""
from __future__ import annotations

import itertools
import random

from typing import Any, ClassVar, Iterable, Literal, TypeVar, overload

from construct import BitsInteger, Bytes, Bytewise, Padding

from mad.attributes import ATTRIBUTE_NAMES, SMP_DATA_SIZE, Attribute, decode_attribute, encode_attribute
from mad.errors import MadError, MadFieldError, MadLengthError, UnknownVersionError
from mad.forwarding import PERMISSIVE_LID
from mad.header import (
    BASE_VERSION, HEADER_LEAD, HEADER_STATUS, HEADER_TAIL, MAD_SIZE, TID_SLICE, MadHeader, Method, MgmtClass,
    Status, method_name,
)
from mad.layout import ZEROS, Layout, LayoutValue, layout

S = TypeVar("S", bound="LidSmp | DrSmp")
AT = TypeVar("AT", bound=Attribute)

MAX_HOPS = 63  # InitialPath/ReturnPath have 64 entries; entry 0 is unused
D_BIT = 0x8000


class Smp(LayoutValue):
    """Behaviour shared by both SMP formats (`LidSmp`, `DrSmp`)."""
    __slots__ = ()
    directed: ClassVar[bool] = False
    # the fields both formats have (declared again by each)
    method: int
    status: int
    transaction_id: int
    attribute_id: int
    attribute_modifier: int
    m_key: int
    data: bytes

    @property
    def is_response(self) -> bool:
        return bool(self.method & 0x80)

    @property
    def attribute_name(self) -> str:
        return attribute_name(self.attribute_id)

    @property
    def method_name(self) -> str:
        return method_name(self.method)

    @property
    def tid32(self) -> int:
        """The low 32 bits of the TID: the kernel and umad2sim rewrite the high half."""
        return self.transaction_id & 0xFFFFFFFF

    @property
    def status_info(self) -> Status:
        return Status.from_word(self.status)

    @property
    def status_word(self) -> int:
        """Status as the wire carries it."""
        return self.status

    @overload
    def attribute(self) -> Attribute: ...
    @overload
    def attribute(self, kind: type[AT]) -> AT: ...

    def attribute(self, kind: type[Attribute] = Attribute) -> Attribute:
        """Decode the data area by AttributeID (and modifier, for PortInfo). ``kind``: the
        attribute class expected (another one raises MadFieldError)."""
        return _of_kind(decode_attribute(self.attribute_id, self.data, self.attribute_modifier),
                        self.attribute_id, kind)

    def encode(self) -> bytes:
        return encode(self)

    def target(self) -> str:
        raise NotImplementedError


# The SMP-specific tail: M_Key, then either reserved space around the 64-byte data
# (LID-routed) or DrSLID/DrDLID and the two 64-entry paths (directed route).
@layout(
    *HEADER_LEAD, *HEADER_STATUS, *HEADER_TAIL,
    "m_key" / BitsInteger(64), Padding(32 * 8),
    "data" / Bytewise(Bytes(SMP_DATA_SIZE)), Padding(128 * 8),
)
class LidSmp(Smp, MadHeader):
    """LID-routed SMP (management class 0x01): the common header's fields, then these."""
    directed: ClassVar[Literal[False]] = False
    m_key: int = 0
    data: bytes = ZEROS

    def target(self) -> str:
        return "LID-routed"


@layout(
    *HEADER_LEAD,
    "d" / BitsInteger(1), "status" / BitsInteger(15),  # Status: D bit + 15 bits
    "hop_pointer" / BitsInteger(8), "hop_count" / BitsInteger(8),  # ClassSpecific
    *HEADER_TAIL,
    "m_key" / BitsInteger(64), "dr_slid" / BitsInteger(16), "dr_dlid" / BitsInteger(16),
    Padding(28 * 8),
    "data" / Bytewise(Bytes(SMP_DATA_SIZE)),
    "initial_path" / Bytewise(Bytes(64)), "return_path" / Bytewise(Bytes(64)),
)
class DrSmp(Smp):
    """Directed-route SMP (management class 0x81)."""
    directed: ClassVar[Literal[True]] = True
    base_version: int = 0
    mgmt_class: int = 0
    class_version: int = 0
    method: int = 0
    d: int = 0
    status: int = 0
    hop_pointer: int = 0
    hop_count: int = 0
    transaction_id: int = 0
    attribute_id: int = 0
    attribute_modifier: int = 0
    m_key: int = 0
    dr_slid: int = 0
    dr_dlid: int = 0
    data: bytes = ZEROS
    initial_path: bytes = ZEROS
    return_path: bytes = ZEROS

    @property
    def status_word(self) -> int:
        """Status as the wire carries it: D bit on top of the 15 status bits."""
        return (self.d << 15) | self.status

    @property
    def path(self) -> tuple[int, ...]:
        """The InitialPath as infiniband-diags writes it: 0, then one port per hop."""
        return (0, *self.initial_path[1:self.hop_count + 1])

    def target(self) -> str:
        return "DR " + ",".join(map(str, self.path))


assert LidSmp.LAYOUT.size == DrSmp.LAYOUT.size == MAD_SIZE

# Either SMP: ``smp.directed`` tells them apart (and narrows the type for mypy)
AnySmp = LidSmp | DrSmp

_BY_CLASS: dict[int, Layout[LidSmp] | Layout[DrSmp]] = {
    MgmtClass.SUBN_LID_ROUTED: LidSmp.LAYOUT, MgmtClass.SUBN_DIRECTED_ROUTE: DrSmp.LAYOUT}


def attribute_name(attr_id: int) -> str:
    """The attribute's name as the codec calls it (NodeInfo, PortInfo, ...)."""
    return ATTRIBUTE_NAMES.get(attr_id, f"attribute {attr_id:#06x}")


# -- reading a few fields straight from the bytes ---------------------------------------
# A transport matches and checks every response; decoding all of it (two 64-byte paths
# included) only to look at the status would cost more than the round trip. These read
# the header fields in place, at offsets taken from the layouts above.
DATA_SLICE = DrSmp.LAYOUT.byte_slice("data")
assert DATA_SLICE == LidSmp.LAYOUT.byte_slice("data")
_STATUS_SLICE = MadHeader.LAYOUT.byte_slice("status")
_ATTR_ID_SLICE = MadHeader.LAYOUT.byte_slice("attribute_id")
_ATTR_MOD_SLICE = MadHeader.LAYOUT.byte_slice("attribute_modifier")
_METHOD_AT = MadHeader.LAYOUT.byte_slice("method").start
_HOP_COUNT_AT = DrSmp.LAYOUT.byte_slice("hop_count").start
_M_KEY_SLICE = DrSmp.LAYOUT.byte_slice("m_key")
assert _M_KEY_SLICE == LidSmp.LAYOUT.byte_slice("m_key")
_DR_CLASS = int(MgmtClass.SUBN_DIRECTED_ROUTE)
_STATUS_BITS = 0x7FFF  # a directed-route SMP's status below the D bit


def is_smp(buf: bytes | bytearray) -> bool:
    """Whether `decode` would accept ``buf`` (length, version, class); `decode` says why not."""
    return len(buf) == MAD_SIZE and buf[0] == BASE_VERSION and buf[1] in _BY_CLASS


def status_of(buf: bytes | bytearray) -> int:
    """The status as `Smp.status` holds it (a directed-route SMP's 15 bits below D)."""
    word = int.from_bytes(buf[_STATUS_SLICE], "big")
    return word & _STATUS_BITS if buf[1] == _DR_CLASS else word


def attribute_id_of(buf: bytes | bytearray) -> int:
    return int.from_bytes(buf[_ATTR_ID_SLICE], "big")


def method_of(buf: bytes | bytearray) -> int:
    return buf[_METHOD_AT]


def hop_count_of(buf: bytes | bytearray) -> int | None:
    """A directed-route SMP's hop count (None for a LID-routed one)."""
    return buf[_HOP_COUNT_AT] if buf[1] == _DR_CLASS else None


def m_key_of(buf: bytes | bytearray) -> int:
    return int.from_bytes(buf[_M_KEY_SLICE], "big")


def with_tid(buf: bytes, tid: int) -> bytes:
    """``buf`` with another TransactionID (a retry's)."""
    return b"".join((buf[:TID_SLICE.start], tid.to_bytes(8, "big"), buf[TID_SLICE.stop:]))


def with_m_key(buf: bytes, m_key: int) -> bytes:
    return b"".join((buf[:_M_KEY_SLICE.start], m_key.to_bytes(8, "big"), buf[_M_KEY_SLICE.stop:]))


@overload
def attribute_of(buf: bytes | bytearray) -> Attribute: ...
@overload
def attribute_of(buf: bytes | bytearray, kind: type[AT]) -> AT: ...


def attribute_of(buf: bytes | bytearray, kind: type[Attribute] = Attribute) -> Attribute:
    """The attribute an SMP's bytes carry, decoded by AttributeID and modifier: what
    ``decode(buf).attribute(kind)`` returns, without decoding the rest of the SMP."""
    attr_id = int.from_bytes(buf[_ATTR_ID_SLICE], "big")
    return _of_kind(decode_attribute(attr_id, bytes(buf[DATA_SLICE]), int.from_bytes(buf[_ATTR_MOD_SLICE], "big")),
                    attr_id, kind)


def _of_kind(value: Attribute, attr_id: int, kind: type[Attribute]) -> Attribute:
    """``value``, if it is the attribute class the caller expects (MadFieldError if not)."""
    if not isinstance(value, kind):
        raise MadFieldError("attribute_id", f"{attr_id:#06x} ({type(value).__name__})", f"a {kind.__name__}")
    return value


def decode(buf: bytes | bytearray | memoryview) -> AnySmp:
    """Decode one 256-byte SMP. Only codec errors (MadError) escape."""
    if not isinstance(buf, (bytes, bytearray, memoryview)):
        raise MadLengthError(f"MAD: expected bytes, got {type(buf).__name__}")
    if len(buf) != MAD_SIZE:
        raise MadLengthError(f"MAD: {len(buf)} bytes, an SMP is exactly {MAD_SIZE}")
    if buf[0] != BASE_VERSION:
        raise UnknownVersionError(f"base_version={buf[0]}: only {BASE_VERSION} is defined")
    lay = _BY_CLASS.get(buf[1])
    if lay is None:
        raise UnknownVersionError(f"mgmt_class={buf[1]:#04x}: not a subnet management class (0x01, 0x81)")
    smp: AnySmp = lay._decode(buf, 0)
    return smp


def encode(smp: Smp) -> bytes:
    lay = getattr(smp, "LAYOUT", None)
    if lay not in (LidSmp.LAYOUT, DrSmp.LAYOUT):
        raise MadFieldError("smp", type(smp).__name__, "an SMP from mad.smp")
    data = smp.data
    if not isinstance(data, (bytes, bytearray)) or len(data) != SMP_DATA_SIZE:
        what = f"{len(data)} bytes" if isinstance(data, (bytes, bytearray)) else type(data).__name__
        raise MadFieldError("data", what, f"exactly {SMP_DATA_SIZE} bytes")
    raw: bytes = lay._encode(smp)
    return raw


# -- request builders --------------------------------------------------------------
_tids = itertools.count(random.randrange(1, 1 << 30))


def next_tid() -> int:
    """A fresh TID whose low 32 bits are unique within the process."""
    return next(_tids) & 0xFFFFFFFF or next(_tids) & 0xFFFFFFFF


def _payload(value: Attribute | bytes | bytearray | None, modifier: int) -> bytes:
    if value is None:
        return bytes(SMP_DATA_SIZE)
    if isinstance(value, (bytes, bytearray)):
        if len(value) != SMP_DATA_SIZE:
            raise MadFieldError("data", f"{len(value)} bytes", f"exactly {SMP_DATA_SIZE} bytes")
        return bytes(value)
    return encode_attribute(value, modifier)


# a checked DR path -> (that tuple, its InitialPath bytes): `dr` builds many SMPs per path,
# mostly from the same tuple (a node's path), which is then not checked again
_PATHS: dict[tuple[int, ...], tuple[tuple[int, ...], bytes]] = {}
_PATHS_MAX = 1 << 17


def parse_path(path: str | Iterable[int]) -> tuple[int, ...]:
    """A DR path in infiniband-diags form ("0,1,3" or a sequence): 0, then exit ports."""
    if isinstance(path, str):
        try:
            hops = tuple(int(p, 0) for p in path.replace(" ", "").split(","))
        except ValueError:
            raise MadFieldError("path", path, "comma-separated port numbers starting with 0, e.g. 0,1,3") from None
    else:
        hops = tuple(path)
    if not hops or hops[0] != 0:
        raise MadFieldError("path", path, "a directed route starts at 0 (the local port)")
    if len(hops) - 1 > MAX_HOPS:
        raise MadFieldError("path", f"{len(hops) - 1} hops", f"at most {MAX_HOPS} hops")
    for p in hops[1:]:
        if not isinstance(p, int) or not 1 <= p <= 254:
            raise MadFieldError("path", path, "every hop is an exit port 1..254")
    return hops


def dr(method: int, attribute_id: int, path: str | Iterable[int], modifier: int = 0,
       value: Attribute | bytes | bytearray | None = None, *, m_key: int = 0, tid: int | None = None) -> DrSmp:
    """A directed-route SMP from the local port along ``path`` (permissive DrSLID/DrDLID)."""
    known = _PATHS.get(path) if path.__class__ is tuple else None  # type: ignore[arg-type]
    if known is not None and known[0] is path:  # this very tuple was checked: (0, 1.0) == (0, 1) is not
        hops, ipath = known
    else:
        hops = parse_path(path)
        ipath = bytes(hops).ljust(64, b"\0")
        if path.__class__ is tuple:
            if len(_PATHS) >= _PATHS_MAX:
                _PATHS.clear()
            _PATHS[hops] = (hops, ipath)
    return DrSmp(
        base_version=BASE_VERSION, mgmt_class=MgmtClass.SUBN_DIRECTED_ROUTE, class_version=1,
        method=int(method), d=0, status=0, hop_pointer=0, hop_count=len(hops) - 1,
        transaction_id=next_tid() if tid is None else tid, attribute_id=int(attribute_id),
        attribute_modifier=modifier, m_key=m_key, dr_slid=PERMISSIVE_LID, dr_dlid=PERMISSIVE_LID,
        data=_payload(value, modifier), initial_path=ipath, return_path=bytes(64),
    )


# (method, attribute, path) -> the bytes of its SMP around TID, modifier and data: a sweep
# sends many SMPs of one kind down each path (LFT blocks, a node's ports), so `dr_raw`
# joins five pieces instead of building and encoding an SMP
_TEMPLATES: dict[tuple[int, int, tuple[int, ...]], tuple[bytes, bytes, bytes, bytes]] = {}
# equal pieces shared: a path's tail (its InitialPath) serves every attribute sent down it,
# and the head pieces every path of a hop count (about 500 -> 190 bytes per template)
_PIECES: dict[bytes, bytes] = {}
assert TID_SLICE.stop <= _ATTR_MOD_SLICE.start and _ATTR_MOD_SLICE.stop <= DATA_SLICE.start


def dr_raw(method: int, attribute_id: int, path: tuple[int, ...], modifier: int = 0,
           value: Attribute | bytes | bytearray | None = None, *, tid: int | None = None) -> bytes:
    """``encode(dr(method, attribute_id, path, modifier, value, tid=tid))``, M_Key 0, for
    less: the bytes are joined from a template per (method, attribute, path)."""
    key = (method, attribute_id, path)
    t = _TEMPLATES.get(key)
    if t is None:
        proto = encode(dr(method, attribute_id, path, tid=0))  # checks the path
        if len(_TEMPLATES) >= _PATHS_MAX:
            _TEMPLATES.clear()
            _PIECES.clear()
        a, b, c, d = (proto[:TID_SLICE.start], proto[TID_SLICE.stop:_ATTR_MOD_SLICE.start],
                      proto[_ATTR_MOD_SLICE.stop:DATA_SLICE.start], proto[DATA_SLICE.stop:])
        share = _PIECES.setdefault
        t = _TEMPLATES[key] = (share(a, a), share(b, b), share(c, c), share(d, d))
    if not isinstance(value, bytes) or len(value) != SMP_DATA_SIZE:
        value = _payload(value, modifier)
    return b"".join((t[0], (next_tid() if tid is None else tid).to_bytes(8, "big"), t[1],
                     modifier.to_bytes(4, "big"), t[2], value, t[3]))


def lid_routed(method: int, attribute_id: int, modifier: int = 0,
               value: Attribute | bytes | bytearray | None = None, *, m_key: int = 0,
               tid: int | None = None) -> LidSmp:
    """A LID-routed SMP (the destination LID travels in the LRH, not in the MAD)."""
    return LidSmp(
        base_version=BASE_VERSION, mgmt_class=MgmtClass.SUBN_LID_ROUTED, class_version=1,
        method=int(method), status=0, class_specific=0,
        transaction_id=next_tid() if tid is None else tid, attribute_id=int(attribute_id),
        attribute_modifier=modifier, m_key=m_key, data=_payload(value, modifier),
    )


def response_to(req: S, *, status: int = 0, value: Attribute | bytes | bytearray | None = None) -> S:
    """The GetResp a responder builds for ``req`` (same TID, attribute and modifier)."""
    import dataclasses
    data = _payload(value, req.attribute_modifier) if value is not None else req.data
    fields: dict[str, Any] = dict(method=Method.GET_RESP, status=status, data=data)
    if req.directed:
        fields["d"] = 1
    return dataclasses.replace(req, **fields)


__all__ = ["Smp", "AnySmp", "LidSmp", "DrSmp", "decode", "encode", "dr", "lid_routed", "response_to", "parse_path",
           "next_tid", "MAX_HOPS", "MadError", "attribute_name", "is_smp", "status_of", "attribute_id_of",
           "attribute_of", "DATA_SLICE", "dr_raw", "method_of", "hop_count_of", "m_key_of", "with_tid", "with_m_key"]
