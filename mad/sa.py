"""Subnet Administration (management class 0x03, IBA 15.2): the SA MAD, its methods and
status codes, and the SA records, each one layout.

The SA MAD (IBA 15.2.1.1) is the common MAD header, the RMPP header (`mad.rmpp`), the SA
header (SM_Key, AttributeOffset, ComponentMask) and 200 bytes of SA data. A Get carries one
record; a GetTable response carries many, one every AttributeOffset 8-byte words, over as
many RMPP segments as they need (`encode_table`, `decode_table`).

Every record is declared by its annotated fields, as attributes are (`mad.layout`); a record
embedding an SMP attribute lists the attribute's field group among its bases
(`mad.layout.shared_fields`: NodeRecord NodeInfo's and NodeDescription's, PortInfoRecord
PortInfo's, and so on), so each field is declared once. Each record's components, in the
order IBA lists them, are derived from its layout: every field is a component, every
reserved run is one too; a group ``_record(whole=)`` names is one component (the embedded
VLArbitrationTable), a field annotated ``Each()`` one per entry (ServiceData), ``Split(...)``
several (PathRecord's ServiceID: 8 and 56 bits), ``Extra()`` none. A component's
ComponentMask bit is its index in that list, and `SaRecord.matches` compares two records on
the components a mask selects: the core of every SA query.
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Any, Callable, ClassVar, Iterable, Sequence, TypeVar, dataclass_transform

from construct import BitsInteger, Bytes, Bytewise, Padding

from mad.errors import MadFieldError, MadLengthError
from mad.header import BASE_VERSION, CLASS_VERSIONS, HEADER_LEAD, HEADER_SIZE, HEADER_STATUS, HEADER_TAIL, MAD_SIZE, MadHeader, MgmtClass
from mad.layout import ZEROS, LayoutValue, annotated_fields, annotated_subcons, bit_size, field_sources, layout
from mad.rmpp import RMPP_HEADER, RmppHeader

B = BitsInteger

SA_CLASS = MgmtClass.SUBN_ADM
SA_CLASS_VERSION = CLASS_VERSIONS[SA_CLASS]  # SA methods: mad.header.Method
SA_DATA_SIZE = 200
RECORD_ALIGN = 8  # AttributeOffset counts 8-byte words: records in a table start on them


class SaStatus(enum.IntEnum):
    """The SA's class-specific status codes: bits 15:8 of the MAD status (IBA 15.2.1.2)."""
    SUCCESS = 0
    ERR_NO_RESOURCES = 1
    ERR_REQ_INVALID = 2
    ERR_NO_RECORDS = 3
    ERR_TOO_MANY_RECORDS = 4
    ERR_REQ_INVALID_GID = 5
    ERR_REQ_INSUFFICIENT_COMPONENTS = 6
    ERR_REQ_DENIED = 7
    ERR_STATUS_PRIO_SUGGESTED = 8

    @property
    def word(self) -> int:
        """The code in place in the 16-bit status word."""
        return self.value << 8

    @property
    def text(self) -> str:
        return _STATUS_TEXT[self]


_STATUS_TEXT = {
    SaStatus.SUCCESS: "success",
    SaStatus.ERR_NO_RESOURCES: "insufficient resources to complete the request",
    SaStatus.ERR_REQ_INVALID: "the request is invalid",
    SaStatus.ERR_NO_RECORDS: "no records match the query",
    SaStatus.ERR_TOO_MANY_RECORDS: "more than one record matches a Get",
    SaStatus.ERR_REQ_INVALID_GID: "a GID in the request is invalid",
    SaStatus.ERR_REQ_INSUFFICIENT_COMPONENTS: "the request lacks components it needs",
    SaStatus.ERR_REQ_DENIED: "the request was denied",
    SaStatus.ERR_STATUS_PRIO_SUGGESTED: "the requested priority is suggested, not granted",
}


def sa_status(word: int) -> SaStatus | int:
    """The class-specific code of a status word: a `SaStatus`, or the bare number when
    IBA reserves it."""
    code = (word >> 8) & 0xFF
    try:
        return SaStatus(code)
    except ValueError:
        return code


class SaAttrID(enum.IntEnum):
    """SA attribute IDs (IBA 15.2.5)."""
    NOTICE = 0x0002
    INFORM_INFO = 0x0003
    NODE_RECORD = 0x0011
    PORT_INFO_RECORD = 0x0012
    SL_TO_VL_MAPPING_TABLE_RECORD = 0x0013
    SWITCH_INFO_RECORD = 0x0014
    LINEAR_FORWARDING_TABLE_RECORD = 0x0015
    RANDOM_FORWARDING_TABLE_RECORD = 0x0016
    MULTICAST_FORWARDING_TABLE_RECORD = 0x0017
    SM_INFO_RECORD = 0x0018
    LINK_RECORD = 0x0020
    GUID_INFO_RECORD = 0x0030
    SERVICE_RECORD = 0x0031
    P_KEY_TABLE_RECORD = 0x0033
    PATH_RECORD = 0x0035
    VL_ARBITRATION_TABLE_RECORD = 0x0036
    MC_MEMBER_RECORD = 0x0038
    TRACE_RECORD = 0x0039
    MULTI_PATH_RECORD = 0x003A
    SERVICE_ASSOCIATION_RECORD = 0x003B
    INFORM_INFO_RECORD = 0x00F3


# -- the SA MAD ------------------------------------------------------------------------
@layout(*HEADER_LEAD, *HEADER_STATUS, *HEADER_TAIL, *RMPP_HEADER,
        "sm_key" / B(64), "attribute_offset" / B(16), Padding(16), "component_mask" / B(64),
        "data" / Bytewise(Bytes(SA_DATA_SIZE)))
class SaMad(MadHeader):
    """An SA MAD (IBA 15.2.1.1). ``attribute_offset`` is in 8-byte words; ``data`` holds
    one record, or a piece of a table when RMPP carries it. The SM_Key is a secret: never
    print it."""
    rmpp_version: int = 0
    rmpp_type: int = 0
    r_resp_time: int = 0
    rmpp_flags: int = 0
    rmpp_status: int = 0
    segment_number: int = 0
    payload_length: int = 0
    sm_key: int = 0
    attribute_offset: int = 0
    component_mask: int = 0
    data: bytes = ZEROS

    @property
    def is_response(self) -> bool:
        return bool(self.method & 0x80)

    @property
    def sa_status(self) -> SaStatus | int:
        return sa_status(self.status)

    @property
    def rmpp(self) -> RmppHeader:
        return RmppHeader(**{n: getattr(self, n) for n in RmppHeader.LAYOUT.names})

    def record(self, kind: type[R]) -> R:
        """The data area as one record of ``kind`` (a Get, a Set, a GetResp)."""
        if self.attribute_id != kind.ATTR_ID:
            raise MadFieldError("attribute_id", self.attribute_id, f"{kind.ATTR_ID:#06x} for a {kind.__name__}")
        return kind.decode(self.data)


assert SaMad.LAYOUT.size == MAD_SIZE
# where the SA header lies: RMPP copies it into every segment (`mad.rmpp.RmppSender`)
SA_HEADER = slice(SaMad.LAYOUT.byte_slice("sm_key").start, SaMad.LAYOUT.byte_slice("data").start)
SA_HEADER_SIZE = SA_HEADER.stop - SA_HEADER.start
assert HEADER_SIZE + RmppHeader.LAYOUT.size + SA_HEADER_SIZE + SA_DATA_SIZE == MAD_SIZE


def request(method: int, record: SaRecord, *, component_mask: int = 0, transaction_id: int = 0,
            sm_key: int = 0) -> SaMad:
    """An SA request carrying one record (Get, GetTable, Set, Delete: the record and the
    mask are the query). A record bigger than the data area raises MadLengthError."""
    if not isinstance(record, SaRecord):
        raise MadFieldError("record", type(record).__name__, "an SA record from mad.sa_records")
    record.check_mask(component_mask)
    raw = record.encode()
    if len(raw) > SA_DATA_SIZE:
        raise MadLengthError(f"{type(record).__name__}: {len(raw)} bytes, the SA data area holds {SA_DATA_SIZE}")
    return SaMad(base_version=BASE_VERSION, mgmt_class=SA_CLASS, class_version=SA_CLASS_VERSION, method=method,
                 transaction_id=transaction_id, attribute_id=record.ATTR_ID, sm_key=sm_key,
                 attribute_offset=record.STRIDE // RECORD_ALIGN, component_mask=component_mask, data=raw)


# -- records and their components ------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Component:
    """One component of a record: its ComponentMask bit and the bits it covers."""
    name: str  # the field's name, or "reserved"; an Each entry "name[i]"; a Split part its own name
    field: str  # the field it is (part of), or "reserved"
    bit: int
    offset: int  # first bit, from the start of the record
    width: int


class Each:
    """In an array field's annotation: every entry is a component (ServiceData8, the GUIDs
    of GUIDInfo)."""

    def pieces(self, subcon: Any) -> list[tuple[str | None, str, int]]:
        inner = subcon.subcon
        return [(f"{subcon.name}[{i}]", subcon.name, inner.subcon.length) for i in range(inner.count)]


class Split:
    """In a field's annotation: the field is several components (PathRecord's ServiceID: 8
    and 56 bits)."""

    def __init__(self, *parts: tuple[str, int]):
        self.parts = parts

    def pieces(self, subcon: Any) -> list[tuple[str | None, str, int]]:
        if sum(w for _n, w in self.parts) != bit_size([subcon]):
            raise TypeError(f"Split {subcon.name}: parts do not cover the field")
        return [(n, subcon.name, w) for n, w in self.parts]


class Extra:
    """In a field's annotation: its bits are no component (MultiPathRecord's GIDs)."""

    def pieces(self, subcon: Any) -> list[tuple[str | None, str, int]]:
        return [(None, subcon.name, bit_size([subcon]))]


_MARKS = (Each, Split, Extra)


class _Part:
    """Subcons and the components they make."""

    def __init__(self, subcons: list[Any], parts: list[tuple[str | None, str, int]]):
        self.subcons = subcons
        self.parts = parts


def _annotated_parts(cls: type, whole: dict[type, str]) -> list[Any]:
    """A record's parts from its annotated fields and its embedded field groups
    (`mad.layout.field_sources`): reserved bits and plain fields are one component each, a
    field marked `Each`, `Split` or `Extra` what its mark says, a group ``whole`` names one
    component (an embedded VLArbitrationTable)."""
    parts: list[Any] = []
    for source in field_sources(cls):
        if source in whole:
            subcons = annotated_subcons(source)
            parts.append(_Part(subcons, [(whole[source], whole[source], bit_size(subcons))]))
            continue
        for name, before, wire, after in annotated_fields(source):
            marks = [m for m in wire if isinstance(m, _MARKS)]
            (subcon,) = [name / m for m in wire if not isinstance(m, _MARKS)]
            part = _Part([subcon], marks[0].pieces(subcon)) if marks else subcon
            parts += [*before, part, *after]
    return parts


def _components(parts: Iterable[Any]) -> tuple[list[Any], tuple[Component, ...]]:
    """The layout's subcons and the components, in order, from a record's parts."""
    subcons: list[Any] = []
    comps: list[Component] = []
    pos = 0
    for p in parts:
        if isinstance(p, _Part):
            subcons += p.subcons
            pieces = p.parts
        else:
            subcons.append(p)
            name = getattr(p, "name", None) or "reserved"
            pieces = [(name, name, bit_size([p]))]
        for name, field, width in pieces:
            if name is not None:
                comps.append(Component(name, field, len(comps), pos, width))
            pos += width
    if len(comps) > 64:
        raise TypeError(f"{len(comps)} components, a ComponentMask has 64 bits")
    return subcons, tuple(comps)


R = TypeVar("R", bound="SaRecord")


class SaRecord(LayoutValue):
    """Base of SA records: the attribute (``ATTR_ID``), the components (``COMPONENTS``:
    bit i of a ComponentMask is ``COMPONENTS[i]``) and the bytes a record takes in a table
    (``STRIDE``: its size rounded up to 8)."""
    __slots__ = ()
    ATTR_ID: ClassVar[int] = 0
    COMPONENTS: ClassVar[tuple[Component, ...]] = ()
    STRIDE: ClassVar[int] = 0

    @classmethod
    def mask(cls, *names: str) -> int:
        """The ComponentMask selecting these components; a field name selects all its
        components (every entry of an Each array, both halves of a Split field)."""
        bits = 0
        for name in names:
            bits |= _component_bits(cls, name)
        return bits

    @classmethod
    def component_names(cls, mask: int) -> list[str]:
        """The components a mask selects, by name."""
        cls.check_mask(mask)
        return [c.name for c in cls.COMPONENTS if mask >> c.bit & 1]

    @classmethod
    def check_mask(cls, mask: int) -> None:
        """A mask with bits past the last component raises MadFieldError (an SA answers
        such a query with ERR_REQ_INVALID)."""
        top = len(cls.COMPONENTS)
        if not isinstance(mask, int) or not 0 <= mask < 1 << 64:
            raise MadFieldError("component_mask", mask, "a 64-bit mask")
        if mask >> top:
            raise MadFieldError("component_mask", f"{mask:#x}",
                                f"bits 0..{top - 1}: {cls.__name__} has {top} components")

    @classmethod
    def selector(cls, mask: int) -> int:
        """The record's bits a mask selects, as an integer over its encoding."""
        cls.check_mask(mask)
        return _selector(cls, mask)

    def matches(self, query: SaRecord, mask: int) -> bool:
        """Whether this record equals ``query`` on every component ``mask`` selects."""
        if type(query) is not type(self):
            raise MadFieldError("query", type(query).__name__, f"a {type(self).__name__}")
        sel = self.selector(mask)
        return not (int.from_bytes(self.encode(), "big") ^ int.from_bytes(query.encode(), "big")) & sel

    def to_dict(self) -> dict[str, Any]:
        return {n: getattr(self, n) for n in self.LAYOUT.names}


def matcher(query: R, mask: int) -> Callable[[R], bool]:
    """A test for many records against one query: the query encoded once (an SA's table
    scan)."""
    sel = query.selector(mask)
    if not sel:  # no component asked (a whole table): nothing to encode only to compare
        return lambda rec: True
    want = int.from_bytes(query.encode(), "big") & sel
    return lambda rec: (int.from_bytes(rec.encode(), "big") & sel) == want


_SELECTORS: dict[tuple[type[SaRecord], int], int] = {}


def _selector(cls: type[SaRecord], mask: int) -> int:
    sel = _SELECTORS.get((cls, mask))
    if sel is None:
        size = cls.LAYOUT.size * 8
        sel = 0
        for c in cls.COMPONENTS:
            if mask >> c.bit & 1:
                sel |= ((1 << c.width) - 1) << (size - c.offset - c.width)
        if len(_SELECTORS) > 4096:  # a bound on what odd queries can make us keep
            _SELECTORS.clear()
        _SELECTORS[(cls, mask)] = sel
    return sel


@dataclass_transform(eq_default=True)
def _record(attr_id: SaAttrID, whole: dict[type, str] | None = None) -> Callable[[type[R]], type[R]]:
    """Class decorator: an SA record's layout and components from its annotated fields and
    embedded field groups (`_annotated_parts`; ``whole``: groups that are one component,
    by their component's name)."""
    def rec(cls: type[R]) -> type[R]:
        subcons, comps = _components(_annotated_parts(cls, whole or {}))
        cls.ATTR_ID = int(attr_id)
        new = layout(*subcons)(cls)
        new.COMPONENTS = comps
        new.STRIDE = -(-new.LAYOUT.size // RECORD_ALIGN) * RECORD_ALIGN
        return new
    return rec


# -- tables ------------------------------------------------------------------------------
def encode_table(records: Sequence[SaRecord]) -> tuple[int, bytes]:
    """(AttributeOffset, data) of a GetTable response: each record padded to its stride."""
    kinds = {type(r) for r in records}
    if len(kinds) > 1:
        raise MadFieldError("records", sorted(k.__name__ for k in kinds), "records of one kind")
    if not records:
        return 0, b""
    stride = records[0].STRIDE
    return stride // RECORD_ALIGN, b"".join(r.encode().ljust(stride, b"\0") for r in records)


def decode_table(data: bytes | bytearray | memoryview, kind: type[R], attribute_offset: int) -> list[R]:
    """The records of a GetTable response's data (reassembled from its RMPP segments)."""
    if not data:
        return []
    stride = attribute_offset * RECORD_ALIGN
    if stride < kind.LAYOUT.size:
        raise MadLengthError(f"{kind.__name__}: AttributeOffset {attribute_offset} ({stride} bytes) is shorter "
                             f"than the record ({kind.LAYOUT.size} bytes)")
    if len(data) % stride:
        raise MadLengthError(f"{kind.__name__} table: {len(data)} bytes is not a whole number of "
                             f"{stride}-byte records")
    return [kind.decode(data, off) for off in range(0, len(data), stride)]


MULTIPATH_GIDS = 11  # the GIDs of a MultiPathRecord that fit the SA data area


_BITS: dict[tuple[type, str], int] = {}


def _component_bits(cls: type[SaRecord], name: str) -> int:
    """The mask bits of one component name (cached: the SA asks per request)."""
    bits = _BITS.get((cls, name))
    if bits is None:
        hit = [c.bit for c in cls.COMPONENTS if name in (c.name, c.field)]
        if not hit or name == "reserved":
            raise MadFieldError("component", name, f"a component of {cls.__name__}")
        bits = _BITS[(cls, name)] = sum(1 << b for b in set(hit))
    return bits
