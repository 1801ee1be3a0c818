"""Declarative layouts: one construct definition each, plus a fast codec compiled from it.

A layout is written once, as a list of construct subcons (``"lid" / BitsInteger(16)``,
``Padding(3)``, ``"ports" / Array(64, BitsInteger(8))``, ``"data" / Bytewise(Bytes(64))``),
or, most of them, as a class's annotated fields that make that list (``lid: U16``,
``Annotated[int, BitsInteger(5), Reserved(3)]``: `annotated_subcons`). From that single
list we build

* ``Layout.construct``: a construct ``BitStruct`` (the reference parser/builder), and
* a generated pair of Python functions (decode/encode) that do the same job with
  ``int.from_bytes`` shifts and ``struct``, several times faster than construct's own
  compiled parsers. Offsets and widths come from walking the subcons, never from a
  second hand-written table; a test checks the two paths agree on every layout.

Values are classes declared in the source (so `isinstance` and type checkers know them):
``@layout(*subcons)`` turns a `LayoutValue` subclass whose annotations name the fields into
a slots dataclass and binds it to its layout. The declared names and types are checked
against the subcons when the module loads; every default (zeros of the field's size) comes
from the layout.
"""
from __future__ import annotations

import dataclasses
import inspect
import struct
import typing
from typing import Any, Callable, ClassVar, Generic, Self, TypeVar, cast, dataclass_transform

import construct as cs

from mad.errors import MadFieldError, MadLengthError

_STRUCT_CODES = {8: "B", 16: "H", 32: "I", 64: "Q"}


class NulText(cs.Adapter):
    """A fixed-size, NUL-padded UTF-8 string (NodeDescription). Bad UTF-8 is kept as
    surrogate escapes, not raised: a node may report anything there and we must still
    show it, and re-encode it unchanged."""

    def __init__(self, length: int):
        super().__init__(cs.Bytes(length))
        self.length = length

    def _decode(self, obj, context, path):
        return bytes(obj).split(b"\0", 1)[0].decode("utf-8", "surrogateescape")

    def _encode(self, obj, context, path):
        raw = obj.encode("utf-8", "surrogateescape")
        if len(raw) > self.length:
            raise cs.ValidationError(f"text longer than {self.length} bytes")
        return raw.ljust(self.length, b"\0")


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str | None  # None: reserved bits
    kind: str  # "int" | "array" | "bytes" | "text"
    offset: int  # in bits from the start of the layout
    width: int  # bits of one element
    count: int = 1  # array length


def _walk(subcons: Any) -> tuple[list[_Field], int]:
    fields: list[_Field] = []
    pos = 0
    for sc in subcons:
        name = getattr(sc, "name", None)
        inner = sc.subcon if isinstance(sc, cs.Renamed) else sc
        if isinstance(inner, cs.BitsInteger):
            fields.append(_Field(name, "int", pos, inner.length))
            pos += inner.length
        elif isinstance(inner, cs.Padded) and name is None:  # construct's Padding(n)
            fields.append(_Field(None, "int", pos, inner.length))
            pos += inner.length
        elif isinstance(inner, cs.Array) and isinstance(inner.subcon, cs.BitsInteger):
            w = inner.subcon.length
            fields.append(_Field(name, "array", pos, w, inner.count))
            pos += w * inner.count
        elif isinstance(inner, (cs.Restreamed, cs.Transformed)) and isinstance(inner.subcon, (NulText, cs.Bytes)):
            # Bytewise(...) inside the BitStruct: byte-aligned raw bytes or text
            b = inner.subcon
            n = b.length
            fields.append(_Field(name, "text" if isinstance(b, NulText) else "bytes", pos, 8, n))
            pos += 8 * n
        else:
            raise TypeError(f"layout: unsupported subcon {sc!r}")
    return fields, pos


T = TypeVar("T", bound="LayoutValue")

# A field's Python type, by kind (checked against the declared annotations)
_KIND_TYPES = {"int": "int", "array": "list[int]", "bytes": "bytes", "text": "str"}

# Declared in a value class for fields whose default is zeros of the field's size
# (the layout replaces it: an array of zeros, zero bytes, "", 0)
ZEROS: Any = object()


# What a Layout builds on first use (see Layout.__getattr__)
_LAZY = frozenset({"construct", "_decode", "_encode", "_copy"})


def _type_name(cls: type, name: str, declared: Any) -> str:
    """A field's declared Python type as written ("int", "list[int]"), through an
    ``Annotated`` wire type or an alias of one (U16)."""
    text = str(declared)
    if text in _KIND_TYPES.values():
        return text
    hint = typing.get_type_hints(cls, include_extras=True)[name]
    base = hint.__origin__ if typing.get_origin(hint) is typing.Annotated else hint
    return base.__name__ if isinstance(base, type) and not typing.get_args(base) else str(base)


class Layout(Generic[T]):
    """One layout: its construct definition, the value class bound to it, a fast codec.

    The generated codec and the construct BitStruct are built the first time one of
    them is used: a command that never touches a layout (the CLI's start-up, most
    layouts in most commands) does not pay for their code generation."""

    cls: type[T]
    construct: Any
    _decode: Callable[..., T]
    _encode: Callable[[T], bytes]
    _copy: Callable[[T], T]

    def __init__(self, name: str, *subcons: Any):
        self.name = name
        self.fields, bits = _walk(subcons)
        if bits % 8:
            raise TypeError(f"layout {name}: {bits} bits is not whole bytes")
        self.size = bits // 8
        self._subcons = subcons
        named = [f for f in self.fields if f.name]
        self.names: tuple[str, ...] = tuple(f.name for f in named if f.name)
        self._ints = {f.name: f for f in self.fields if f.name and f.kind == "int"}

    def __getattr__(self, name: str) -> Any:
        # only called for attributes not built yet
        if name not in _LAZY:
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
        if name == "construct":
            self.construct = cs.BitStruct(*self._subcons)
        else:
            self._compile()
        return self.__dict__[name]

    def bind(self, cls: type[T]) -> type[T]:
        """Make ``cls`` (its annotations: the named fields, in any order) the slots
        dataclass of this layout's values and compile the codec for it."""
        own = inspect.get_annotations(cls)
        declared = {n: t for c in reversed(cls.__mro__) for n, t in inspect.get_annotations(c).items()
                    if not str(t).startswith(("ClassVar", "typing.ClassVar"))}
        kinds = {f.name: f.kind for f in self.fields if f.name}
        if set(declared) != set(kinds):
            raise TypeError(f"{cls.__name__}: fields {sorted(set(declared) ^ set(kinds))} differ from its layout")
        for f in self.fields:
            if f.name is None:
                continue
            if _type_name(cls, f.name, declared[f.name]) != _KIND_TYPES[f.kind]:
                raise TypeError(f"{cls.__name__}.{f.name}: declared {declared[f.name]}, "
                                f"the layout holds {_KIND_TYPES[f.kind]}")
            if f.name in own:
                setattr(cls, f.name, _default(f))
        new = dataclasses.dataclass(cls, slots=True, eq=True)
        new.LAYOUT = self
        self.cls = new
        # the constructor's argument order
        self.order = tuple(f.name for f in dataclasses.fields(cast(Any, new)))
        return new

    # -- code generation -------------------------------------------------------
    def _segments(self):
        """Group fields into runs: packed bit fields become one big integer, byte-aligned
        arrays of 8/16/32/64-bit elements and raw bytes are sliced directly."""
        segs: list[tuple[str, list[_Field]]] = []
        for f in self.fields:
            direct = f.kind in ("bytes", "text") or (
                f.kind == "array" and f.width in _STRUCT_CODES and f.offset % 8 == 0
            )
            kind = "direct" if direct else "bits"
            if kind == "bits" and segs and segs[-1][0] == "bits":
                segs[-1][1].append(f)
            else:
                segs.append((kind, [f]))
        return segs

    def _compile(self):
        ns: dict[str, Any] = {"cls": self.cls, "from_bytes": int.from_bytes, "_bad": _bad,
                              "MadFieldError": MadFieldError, "struct": struct}
        dec = ["def decode(buf, off=0):"]
        enc = ["def encode(obj):", "    parts = []"]
        for i, (kind, flds) in enumerate(self._segments()):
            start = flds[0].offset
            end = flds[-1].offset + flds[-1].width * flds[-1].count
            b0, nbytes = start // 8, (end - start) // 8
            if kind == "bits":
                if start % 8 or (end - start) % 8:
                    raise TypeError(f"layout {self.name}: bit run not byte aligned")
                dec.append(f"    v{i} = from_bytes(buf[off+{b0}:off+{b0 + nbytes}], 'big')")
                terms = []
                for f in flds:
                    if f.name is None:
                        continue
                    if f.kind == "int":
                        sh = end - f.offset - f.width
                        m = (1 << f.width) - 1
                        expr = f"(v{i} >> {sh}) & {m:#x}" if sh else f"v{i} & {m:#x}"
                        var = f"f_{f.name}"
                        dec.append(f"    {var} = {expr}")
                        enc.append(f"    x = obj.{f.name}")
                        enc.append(f"    if not ((x.__class__ is int or isinstance(x, int)) and 0 <= x <= {m:#x}): x = _bad({f.name!r}, x, {m:#x})")
                        terms.append(f"(x << {sh})" if sh else "x")
                        enc.append(f"    t_{f.name} = {terms[-1]}")
                        terms[-1] = f"t_{f.name}"
                    else:  # array of unaligned or odd-width elements
                        m = (1 << f.width) - 1
                        sh0 = end - f.offset - f.width
                        var = f"f_{f.name}"
                        dec.append(f"    {var} = [(v{i} >> ({sh0} - {f.width} * k)) & {m:#x} for k in range({f.count})]")
                        enc.append(f"    xs = obj.{f.name}")
                        enc.append(f"    if not isinstance(xs, (list, tuple)) or len(xs) != {f.count}: _bad({f.name!r}, xs, 'exactly {f.count} entries')")
                        enc.append(f"    t_{f.name} = 0")
                        enc.append("    for k, x in enumerate(xs):")
                        enc.append(f"        if not ((x.__class__ is int or isinstance(x, int)) and 0 <= x <= {m:#x}): x = _bad({f.name!r}, x, {m:#x})")
                        enc.append(f"        t_{f.name} |= x << ({sh0} - {f.width} * k)")
                        terms.append(f"t_{f.name}")
                enc.append(f"    parts.append(({' | '.join(terms) or '0'}).to_bytes({nbytes}, 'big'))")
            else:
                (f,) = flds
                var = f"f_{f.name}"
                if f.kind == "bytes":
                    dec.append(f"    {var} = bytes(buf[off+{b0}:off+{b0 + nbytes}])")
                    enc.append(f"    x = obj.{f.name}")
                    enc.append(f"    if not isinstance(x, (bytes, bytearray)) or len(x) > {nbytes}: _bad({f.name!r}, x, 'at most {nbytes} bytes')")
                    enc.append(f"    parts.append(bytes(x).ljust({nbytes}, b'\\0'))")
                elif f.kind == "text":
                    dec.append(f"    {var} = bytes(buf[off+{b0}:off+{b0 + nbytes}]).split(b'\\0', 1)[0].decode('utf-8', 'surrogateescape')")
                    enc.append(f"    x = obj.{f.name}")
                    enc.append("    try: r = x.encode('utf-8', 'surrogateescape') if isinstance(x, str) else None")
                    enc.append("    except UnicodeError: r = None")
                    enc.append(f"    if r is None or len(r) > {nbytes}: _bad({f.name!r}, x, 'a string of at most {nbytes} UTF-8 bytes')")
                    enc.append(f"    parts.append(r.ljust({nbytes}, b'\\0'))")
                else:
                    code = _STRUCT_CODES[f.width]
                    ns[f"s_{f.name}"] = struct.Struct(f">{f.count}{code}")
                    if f.width == 8:
                        dec.append(f"    {var} = list(buf[off+{b0}:off+{b0 + nbytes}])")
                    else:
                        dec.append(f"    {var} = list(s_{f.name}.unpack_from(buf, off+{b0}))")
                    enc.append(f"    xs = obj.{f.name}")
                    enc.append(f"    try: parts.append(s_{f.name}.pack(*xs))")
                    enc.append(f"    except (struct.error, TypeError): _bad({f.name!r}, xs, 'exactly {f.count} integers 0..{(1 << f.width) - 1}')")
        dec.append(f"    return cls({', '.join('f_' + n for n in self.order)})")
        enc.append("    return b''.join(parts)")
        exec("\n".join(dec), ns)  # noqa: S102 - generated from the construct definition above
        exec("\n".join(enc), ns)  # noqa: S102
        self._decode = ns["decode"]
        self._encode = ns["encode"]
        # one struct call for the whole layout where it fits: several times faster still
        fast = _struct_items(self.fields)
        if fast is not None:
            self._encode = _struct_encoder(fast, dict(ns))
            self._decode = _struct_decoder(fast, self.order, dict(ns))
        # a shallow copy with changes, several times faster than dataclasses.replace
        src = f"def copy(o):\n    return cls({', '.join('o.' + n for n in self.order)})"
        exec(src, ns)  # noqa: S102
        self._copy = ns["copy"]

    def patch(self, buf: bytes | bytearray, **changes: int) -> bytes:
        """``buf`` (an encoding of this layout) with some integer fields set: the bytes
        ``encode(replace(decode(buf), **changes))`` gives, without the round trip. For hot
        paths that send one value twice with one field changed (ARMED, then ACTIVE)."""
        if len(buf) != self.size:
            raise MadLengthError(f"{self.name}: needs {self.size} bytes, got {len(buf)}")
        v = int.from_bytes(buf, "big")
        for name, x in changes.items():
            f = self._ints.get(name)
            if f is None:
                raise MadFieldError(name, x, f"an integer field of {self.name}")
            m = (1 << f.width) - 1
            if not (isinstance(x, int) and 0 <= x <= m):
                _bad(name, x, m)
            sh = self.size * 8 - f.offset - f.width
            v = (v & ~(m << sh)) | (x << sh)
        return v.to_bytes(self.size, "big")

    # -- public codec ----------------------------------------------------------
    def decode(self, buf: bytes | bytearray | memoryview, off: int = 0) -> T:
        """Decode ``self.size`` bytes of ``buf`` at ``off`` into a value."""
        if len(buf) - off < self.size:
            raise MadLengthError(f"{self.name}: needs {self.size} bytes, got {max(len(buf) - off, 0)}")
        return self._decode(buf, off)

    def encode(self, obj: T) -> bytes:
        """Encode a value; any field out of range raises MadFieldError naming it."""
        if not isinstance(obj, self.cls):
            raise MadFieldError(self.name, type(obj).__name__, f"a {self.name} value")
        return self._encode(obj)

    def replace(self, obj: T, **changes: Any) -> T:
        """A copy of ``obj`` with some fields changed (lists are shared, not copied)."""
        new = self._copy(obj)
        for k, v in changes.items():
            if k not in self.names:
                raise MadFieldError(k, v, f"a field of {self.name}")
            setattr(new, k, v)
        return new

    def decode_construct(self, buf: bytes | bytearray | memoryview) -> T:
        """The reference path: construct's own parser (tests compare it to `decode`)."""
        try:
            c = self.construct.parse(bytes(buf[: self.size]))
        except cs.ConstructError as e:
            raise MadLengthError(f"{self.name}: {e}") from None
        return self.cls(**{n: (list(c[n]) if isinstance(c[n], list) else c[n]) for n in self.names})

    def encode_construct(self, obj: T) -> bytes:
        try:
            return self.construct.build({n: getattr(obj, n) for n in self.names})
        except cs.ConstructError as e:
            raise MadFieldError(self.name, obj, str(e)) from None

    def field_info(self) -> list[tuple[str | None, int, int, int]]:
        """(name, bit offset, bit width, count) for every named field: docs and dumps."""
        return [(f.name, f.offset, f.width, f.count) for f in self.fields if f.name]

    def byte_slice(self, name: str) -> slice:
        """Where a byte-aligned field lies in the buffer: for hot paths that read one
        field from raw bytes without decoding the rest."""
        for f in self.fields:
            if f.name == name:
                bits = f.width * f.count
                if f.offset % 8 or bits % 8:
                    raise TypeError(f"{self.name}.{name} is not byte aligned")
                return slice(f.offset // 8, (f.offset + bits) // 8)
        raise KeyError(name)


class LayoutValue:
    """Base of layout values: what `layout` makes of a declared class."""
    __slots__ = ()
    LAYOUT: ClassVar[Layout[Any]]

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview, off: int = 0) -> Self:
        """Decode ``LAYOUT.size`` bytes of ``buf`` at ``off``."""
        value: Self = cls.LAYOUT.decode(buf, off)
        return value

    def encode(self) -> bytes:
        """The value's bytes; a field out of range raises MadFieldError naming it."""
        return self.LAYOUT.encode(self)

    def replace(self, **changes: Any) -> Self:
        """A copy with some fields changed (lists are shared, not copied)."""
        value: Self = self.LAYOUT.replace(self, **changes)
        return value


@dataclass_transform(eq_default=True)
def layout(*subcons: Any) -> Callable[[type[T]], type[T]]:
    """Class decorator: the declared class becomes the values of ``Layout(name, *subcons)``
    (see `Layout.bind`); ``cls.LAYOUT`` is that layout. Without subcons, the class's
    annotations declare them (`annotated_subcons`)."""
    def bind(cls: type[T]) -> type[T]:
        return Layout[T](cls.__name__, *(subcons or annotated_subcons(cls))).bind(cls)
    return bind


# -- one struct call per layout ----------------------------------------------------
# (struct code, kind, fields): kind "pad", "int", "array", "bytes", or "group" (a run of
# bit fields filling one unit, split with shifts)
_Item = tuple[str, str, list[_Field]]


def _struct_items(fields: list[_Field]) -> list[_Item] | None:
    """The layout as one `struct` format, or None when some field does not fit one
    (text, a run of bit fields that does not end on a byte)."""
    items: list[_Item] = []
    run: list[_Field] = []
    for f in fields:
        aligned = not run and f.offset % 8 == 0
        if f.kind == "bytes" and aligned:
            items.append((f"{f.count}s", "bytes", [f]))
        elif f.kind == "array" and aligned and f.width in _STRUCT_CODES:
            items.append((f"{f.count}{_STRUCT_CODES[f.width]}", "array", [f]))
        elif f.kind == "int" and aligned and f.name is None and f.width % 8 == 0:
            items.append((f"{f.width // 8}x", "pad", [f]))
        elif f.kind == "int" and aligned and f.width in _STRUCT_CODES:
            items.append((_STRUCT_CODES[f.width], "int", [f]))
        elif f.kind == "int" or (f.kind == "array" and f.width * f.count <= 64):
            run.append(f)
            end = f.offset + f.width * f.count
            if end % 8 == 0:  # the run fills whole bytes: one unit (odd widths as bytes)
                bits = end - run[0].offset
                items.append((_STRUCT_CODES.get(bits) or f"{bits // 8}s", "group", run))
                run = []
        else:
            return None
    return None if run else items


def _group_bits(flds: list[_Field]) -> tuple[int, int]:
    """(first bit, end bit) of a group's unit."""
    return flds[0].offset, flds[-1].offset + flds[-1].width * flds[-1].count


def _struct_encoder(items: list[_Item], ns: dict[str, Any]) -> Callable[[Any], bytes]:
    """An encoder packing the whole layout with one `struct` call. Range checks are
    struct's own, plus explicit ones for bit fields sharing a unit; a value it refuses
    (or a wrong type) goes to the checked encoder, which names the field: the bytes and
    the errors are the same as the checked encoder's."""
    ns["_S"] = struct.Struct(">" + "".join(code for code, _k, _f in items))
    ns["_checked"] = ns["encode"]
    guards, args = [], []
    for code, kind, flds in items:
        if kind == "pad":
            continue
        if kind != "group":
            (f,) = flds
            args.append(f"*obj.{f.name}" if kind == "array" else f"obj.{f.name}")
            if kind == "bytes":  # struct pads a short value and would cut a long one
                guards.append(f"len(obj.{f.name}) <= {f.count}")
            continue
        start, end = _group_bits(flds)
        terms = []
        for f in flds:
            if f.name is None:
                continue
            m, sh = (1 << f.width) - 1, end - f.offset - f.width
            if f.kind == "array":  # a short array of odd-width entries: every entry checked
                guards.append(f"len(obj.{f.name}) == {f.count}")
                for k in range(f.count):
                    guards.append(f"0 <= obj.{f.name}[{k}] <= {m:#x}")
                    terms.append(f"(obj.{f.name}[{k}] << {sh - f.width * k})")
                continue
            guards.append(f"0 <= obj.{f.name} <= {m:#x}")
            terms.append(f"(obj.{f.name} << {sh})" if sh else f"obj.{f.name}")
        expr = " | ".join(terms) or "0"
        args.append(expr if code in _STRUCT_CODES.values() else f"({expr}).to_bytes({(end - start) // 8}, 'big')")
    src = ["def encode_fast(obj):", "    try:"]
    if guards:
        src.append(f"        if not ({' and '.join(guards)}): return _checked(obj)")
    src += [f"        return _S.pack({', '.join(args)})",
            "    except (struct.error, TypeError, AttributeError, OverflowError):",
            "        return _checked(obj)"]
    exec("\n".join(src), ns)  # noqa: S102 - generated from the construct definition
    fn: Callable[[Any], bytes] = ns["encode_fast"]
    return fn


def _struct_decoder(items: list[_Item], order: tuple[str, ...], ns: dict[str, Any]) -> Callable[..., Any]:
    """A decoder unpacking the whole layout with one `struct` call, splitting bit-field
    units with shifts on small integers."""
    ns["_S"] = struct.Struct(">" + "".join(code for code, _k, _f in items))
    src = ["def decode_fast(buf, off=0):", "    t = _S.unpack_from(buf, off)"]
    i = 0
    for code, kind, flds in items:
        if kind == "pad":
            continue
        if kind == "array":
            (f,) = flds
            src.append(f"    f_{f.name} = list(t[{i}:{i + f.count}])")
            i += f.count
            continue
        if kind in ("int", "bytes"):
            src.append(f"    f_{flds[0].name} = t[{i}]")
            i += 1
            continue
        start, end = _group_bits(flds)
        src.append(f"    v = t[{i}]" if code in _STRUCT_CODES.values() else f"    v = from_bytes(t[{i}], 'big')")
        i += 1
        for f in flds:
            if f.name is None:
                continue
            m, sh = (1 << f.width) - 1, end - f.offset - f.width
            if f.kind == "array":
                src.append(f"    f_{f.name} = [(v >> ({sh} - {f.width} * k)) & {m:#x} for k in range({f.count})]")
            else:
                src.append(f"    f_{f.name} = (v >> {sh}) & {m:#x}" if sh else f"    f_{f.name} = v & {m:#x}")
    src.append(f"    return cls({', '.join('f_' + n for n in order)})")
    exec("\n".join(src), ns)  # noqa: S102 - generated from the construct definition
    fn: Callable[..., Any] = ns["decode_fast"]
    return fn


def bit_size(subcons: Any) -> int:
    """Total bits a list of subcons occupies."""
    return _walk(subcons)[1]


def _default(f: _Field) -> Any:
    if f.kind == "array":
        n = f.count
        return dataclasses.field(default_factory=lambda: [0] * n)
    if f.kind == "bytes":  # full length, so a default value round-trips and construct builds it
        return dataclasses.field(default=bytes(f.count))
    return dataclasses.field(default={"int": 0, "text": ""}[f.kind])


def _bad(name: str, value: Any, limit: Any) -> Any:
    if isinstance(limit, int):
        limit = f"0..{limit} ({limit:#x})"
    raise MadFieldError(name, value, limit)


# The wire types fields declare in their annotations (``lid: U16 = 0``); odd widths inline
# (``Annotated[int, BitsInteger(5)]``)
U1 = typing.Annotated[int, cs.BitsInteger(1)]
U4 = typing.Annotated[int, cs.BitsInteger(4)]
U8 = typing.Annotated[int, cs.BitsInteger(8)]
U16 = typing.Annotated[int, cs.BitsInteger(16)]
U24 = typing.Annotated[int, cs.BitsInteger(24)]
U32 = typing.Annotated[int, cs.BitsInteger(32)]
U64 = typing.Annotated[int, cs.BitsInteger(64)]
U128 = typing.Annotated[int, cs.BitsInteger(128)]


@dataclasses.dataclass(frozen=True)
class Reserved:
    """In a field's ``Annotated`` metadata: reserved bits on the wire before the field."""
    bits: int


@dataclasses.dataclass(frozen=True)
class ReservedAfter:
    """In a field's ``Annotated`` metadata: reserved bits on the wire after the field (a
    record's trailing reserved bits, which nothing follows)."""
    bits: int


@dataclasses.dataclass(frozen=True)
class Before:
    """In the metadata of a subclass's first own field: its own fields, in order, take the
    place of the reserved bits just before ``field`` in its base's layout (PortInfo's byte
    56, which the extended-speeds form gives meaning)."""
    field: str


_PLACEMENT = (Reserved, ReservedAfter, Before)


def annotated_fields(cls: type) -> list[tuple[str, list[Any], Any, list[Any]]]:
    """Each field a class declares in its own annotations, in order: (name, reserved
    subcons before it, its metadata less the reserved marks, reserved subcons after it).
    Reserved bits come first wherever Annotated flattening leaves the marks
    (``Annotated[U16, Reserved(8)]`` flattens to ``Annotated[int, BitsInteger(16), Reserved(8)]``)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = []
    for name in cls.__dict__.get("__annotations__", {}):
        hint = hints[name]
        if typing.get_origin(hint) is ClassVar:
            continue
        if typing.get_origin(hint) is not typing.Annotated:
            raise TypeError(f"layout {cls.__name__}.{name}: no wire type (Annotated[...])")
        meta = hint.__metadata__
        fields.append((name, [cs.Padding(m.bits) for m in meta if isinstance(m, Reserved)],
                       tuple(m for m in meta if not isinstance(m, _PLACEMENT)),
                       [cs.Padding(m.bits) for m in meta if isinstance(m, ReservedAfter)]))
    return fields


# the classes made by `shared_fields`
_SHARED: set[type] = set()
G = TypeVar("G")


@dataclass_transform(eq_default=True)
def shared_fields(cls: type[G]) -> type[G]:
    """Class decorator: annotated fields declared once for several layouts (an SMP
    attribute's, which an SA record embeds). A dataclass that holds no instance storage
    (``__slots__ = ()``: each layout's class holds the slots, several groups can be its
    bases), each field's default from its wire type. Listed before a layout class's other
    bases its fields come before the class's own, after them after (`field_sources`)."""
    ns = {k: v for k, v in vars(cls).items() if k not in ("__dict__", "__weakref__")}
    new = cast(Any, type)(cls.__name__, cls.__bases__, {**ns, "__slots__": ()})
    for f in _walk(annotated_subcons(new))[0]:
        if f.name:
            setattr(new, f.name, _default(f))
    _SHARED.add(new)
    group: type[G] = dataclasses.dataclass(new, eq=False)
    return group


def field_sources(cls: type) -> list[type]:
    """The classes whose own annotated fields make ``cls``'s layout, in wire order: the
    `shared_fields` groups among its bases before its first other base, itself, the groups
    after."""
    bases = cls.__bases__
    split = next((i for i, b in enumerate(bases) if b not in _SHARED), len(bases))
    return [*bases[:split], cls, *(b for b in bases[split:] if b in _SHARED)]


def annotated_subcons(cls: type) -> list[Any]:
    """The layout a class declares in its annotations (its own and its `shared_fields`
    groups'), each field once: ``lid: Annotated[int, BitsInteger(16)] = 0``
    (``Reserved(n)`` for reserved bits before it, ``ReservedAfter(n)`` after it, in any place
    of the metadata). The annotation is the one declaration: type checkers see the field,
    the layout gets its wire type. A subclass whose first field is marked ``Before(name)`` is
    its base's layout with its own fields in the reserved bits before ``name``."""
    subcons: list[Any] = []
    for source in field_sources(cls):
        for name, before, wire, after in annotated_fields(source):
            subcons += [*before, *(name / m for m in wire), *after]
    own = annotated_fields(cls)
    hints = typing.get_type_hints(cls, include_extras=True)
    marks = hints[own[0][0]].__metadata__ if own else ()
    place = next((m.field for m in marks if isinstance(m, Before)), None)
    return subcons if place is None else _fill(cls, place, subcons)


def _fill(cls: type, place: str, own: list[Any]) -> list[Any]:
    """The base's annotated layout with ``own`` in place of the reserved run before ``place``."""
    base = annotated_subcons(cls.__mro__[1])
    at = next((i for i, sc in enumerate(base) if getattr(sc, "name", None) == place), None)
    if at is None:
        raise TypeError(f"layout {cls.__name__}: its base has no field {place!r}")
    start, width, need = at, 0, bit_size(own)
    while width < need and start and getattr(base[start - 1], "name", None) is None:
        start -= 1
        width += bit_size([base[start]])
    if width != need:
        raise TypeError(f"layout {cls.__name__}: {need} bits of fields, {width} reserved before {place!r}")
    return base[:start] + own + base[at:]
