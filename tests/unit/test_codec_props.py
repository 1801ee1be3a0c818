"""Property tests for the codec: every layout round-trips, the generated fast path equals
construct's reference path, and bad input only ever raises MadError subclasses.

Strategies are built from each layout's own field list (`Layout.fields`), so a layout
added to `mad.attributes` is covered without touching this file.
"""
from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mad import attributes as A
from mad import errors as E
from mad import gmp, perfmgt
from mad import smp as S
from mad.header import MadHeader
from mad.layout import Layout, LayoutValue

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- the layouts under test ----------------------------------------------------------
def _module_layouts(mod) -> list[Layout]:
    return [x.LAYOUT for x in vars(mod).values()
            if isinstance(x, type) and issubclass(x, LayoutValue) and "LAYOUT" in vars(x)]


REGISTRY = {A.layout_for(i) for i in A.ATTRIBUTE_NAMES}
ATTR_LAYOUTS = sorted(set(_module_layouts(A)) | REGISTRY, key=lambda lay: lay.name)
SMP_LAYOUTS = [S.LidSmp.LAYOUT, S.DrSmp.LAYOUT]
GMP_LAYOUTS = [gmp.ClassPortInfo.LAYOUT, perfmgt.PortCounters.LAYOUT]  # GMP data areas (mad.gmp, mad.perfmgt)
ALL_LAYOUTS = ATTR_LAYOUTS + SMP_LAYOUTS + [MadHeader.LAYOUT] + GMP_LAYOUTS
DATA_LAYOUTS = [lay for lay in ATTR_LAYOUTS if getattr(lay.cls, "ATTR_ID", None) is not None]


def test_layout_inventory():
    names = {lay.name for lay in ATTR_LAYOUTS}
    assert {"PortInfo", "PortInfoExtSpeeds", "SwitchInfo", "NodeInfo", "NodeDescription",
            "LinearForwardingTable", "RandomForwardingTable", "MulticastForwardingTable",
            "SMInfo", "Notice", "P_KeyTable", "SLtoVLMappingTable", "RandomForwardingEntry"} <= names
    assert REGISTRY <= set(ATTR_LAYOUTS)
    for lay in DATA_LAYOUTS:
        assert lay.size == A.SMP_DATA_SIZE, lay.name
    assert S.LidSmp.LAYOUT.size == S.DrSmp.LAYOUT.size == 256 and MadHeader.LAYOUT.size == 24
    assert A.layout_for(A.AttrID.PORT_INFO, 1 << 31) is A.PortInfoExtSpeeds.LAYOUT


def _ids(lays):
    return [lay.name for lay in lays]


# -- strategies from Layout.fields -------------------------------------------------------
def _text(n: int):
    """Strings whose UTF-8 (surrogate-escaped) form fits n bytes and has no NUL: what a
    NUL-padded field can carry and give back unchanged."""
    raw = st.binary(max_size=n).map(lambda b: b.replace(b"\0", b""))
    return raw.map(lambda b: b.decode("utf-8", "surrogateescape"))


def field_strategy(f):
    top = (1 << f.width) - 1
    if f.kind == "int":
        return st.integers(0, top)
    if f.kind == "array":
        return st.lists(st.integers(0, top), min_size=f.count, max_size=f.count)
    if f.kind == "bytes":
        return st.binary(min_size=f.count, max_size=f.count)
    if f.kind == "text":
        return _text(f.count)
    raise AssertionError(f.kind)


def value_strategy(lay: Layout, **fixed):
    fields = {f.name: field_strategy(f) for f in lay.fields if f.name}
    fields.update({k: st.just(v) for k, v in fixed.items()})
    return st.builds(lay.cls, **fields)


def layout_and_value(lays):
    return st.sampled_from(lays).flatmap(lambda lay: st.tuples(st.just(lay), value_strategy(lay)))


# -- round trips --------------------------------------------------------------------------
@SETTINGS
@given(layout_and_value(ALL_LAYOUTS))
def test_roundtrip_every_layout(lv):
    lay, value = lv
    raw = lay.encode(value)
    assert len(raw) == lay.size
    assert lay.decode(raw) == value
    assert lay.decode(b"\xAA" * 7 + raw, 7) == value  # at an offset


@SETTINGS
@given(layout_and_value(DATA_LAYOUTS), st.sampled_from([0, 1, 0x1F, 0x10000003]))
def test_roundtrip_attribute_api(lv, modifier):
    lay, value = lv
    if lay is A.PortInfoExtSpeeds.LAYOUT:
        modifier |= 1 << 31
    elif lay is A.PortInfo.LAYOUT:
        modifier &= 0x7FFFFFFF
    data = A.encode_attribute(value, modifier)
    assert A.decode_attribute(value.ATTR_ID, data, modifier) == value


@SETTINGS
@given(st.data())
def test_roundtrip_smp_api(data):
    lay = data.draw(st.sampled_from(SMP_LAYOUTS))
    cls = 0x01 if lay is S.LidSmp.LAYOUT else 0x81
    value = data.draw(value_strategy(lay, base_version=1, mgmt_class=cls))
    raw = S.encode(value)
    back = S.decode(raw)
    assert back == value and type(back) is lay.cls
    assert S.decode(bytearray(raw)) == value and S.decode(memoryview(raw)) == value


# -- fast path == construct reference path --------------------------------------------------
@SETTINGS
@given(st.sampled_from(ALL_LAYOUTS), st.data())
def test_fast_decode_equals_construct(lay, data):
    buf = data.draw(st.binary(min_size=lay.size, max_size=lay.size))
    assert lay.decode(buf) == lay.decode_construct(buf)


@SETTINGS
@given(layout_and_value(ALL_LAYOUTS))
def test_fast_encode_equals_construct(lv):
    lay, value = lv
    assert lay.encode(value) == lay.encode_construct(value)


def test_one_struct_call_for_all_but_text_layouts():
    """The struct-based codec (mad.layout._struct_items) covers every layout without text,
    so the properties above test it, not only the per-field fallback."""
    from mad.layout import _struct_items
    for lay in ALL_LAYOUTS:
        has_text = any(f.kind == "text" for f in lay.fields)
        assert (_struct_items(lay.fields) is None) == has_text, lay.name


@SETTINGS
@given(layout_and_value(ALL_LAYOUTS), st.data())
def test_patch_equals_replace_and_encode(lv, data):
    """`Layout.patch` (the ACTIVE Set built from the ARMED one's bytes) gives exactly
    what decode-replace-encode gives, for any integer field and value."""
    lay, value = lv
    ints = [f for f in lay.fields if f.name and f.kind == "int"]
    assume(ints)
    chosen = data.draw(st.lists(st.sampled_from(ints), min_size=1, max_size=3, unique_by=lambda f: f.name))
    changes = {f.name: data.draw(st.integers(0, (1 << f.width) - 1)) for f in chosen}
    assert lay.patch(lay.encode(value), **changes) == lay.encode(lay.replace(value, **changes))


def test_patch_refuses_what_encode_refuses():
    lay = A.PortInfo.LAYOUT
    raw = A.PortInfo().encode()
    with pytest.raises(E.MadFieldError, match="port_state"):
        lay.patch(raw, port_state=16)
    with pytest.raises(E.MadFieldError, match="no_such_field"):
        lay.patch(raw, no_such_field=1)
    with pytest.raises(E.MadLengthError):
        lay.patch(raw[:10], port_state=1)


@SETTINGS
@given(st.data())
def test_raw_readers_equal_decode(data):
    """What a transport reads from the bytes (mad.smp.is_smp, status_of, attribute_id_of,
    attribute_of) is what the full decode says."""
    lay = data.draw(st.sampled_from(SMP_LAYOUTS))
    cls = 0x01 if lay is S.LidSmp.LAYOUT else 0x81
    attr = data.draw(st.sampled_from(sorted(A.ATTRIBUTE_NAMES)))
    value = data.draw(value_strategy(lay, base_version=1, mgmt_class=cls, attribute_id=attr))
    raw = S.encode(value)
    back = S.decode(raw)
    assert S.is_smp(raw) and not S.is_smp(raw[:255]) and not S.is_smp(b"\x02" + raw[1:])
    assert S.status_of(raw) == back.status and S.attribute_id_of(raw) == attr
    try:
        want = back.attribute()
    except E.MadError as e:
        with pytest.raises(type(e)):
            S.attribute_of(raw)
    else:
        assert S.attribute_of(raw) == want


@SETTINGS
@given(method=st.sampled_from([1, 2, 0x81]), attr=st.sampled_from(sorted(A.ATTRIBUTE_NAMES)),
       path=st.lists(st.integers(1, 254), max_size=S.MAX_HOPS).map(lambda hops: (0, *hops)),
       modifier=st.integers(0, 2**32 - 1), data=st.binary(min_size=64, max_size=64),
       tid=st.integers(0, 2**64 - 1), tid2=st.integers(0, 2**64 - 1), key=st.integers(0, 2**64 - 1))
def test_dr_raw_equals_the_encoded_smp(method, attr, path, modifier, data, tid, tid2, key):
    """The bulk phases' requests (mad.smp.dr_raw, joined from a template per method,
    attribute and path) and a retry's or a keyed request's patched bytes are what the
    codec encodes; the readers see their fields."""
    raw = S.dr_raw(method, attr, path, modifier, data, tid=tid)
    smp = S.dr(method, attr, path, modifier, data, tid=tid)
    assert raw == S.encode(smp)
    assert S.dr_raw(method, attr, path, modifier, data, tid=tid) == raw  # from the cached template
    smp.transaction_id, smp.m_key = tid2, key
    assert S.with_m_key(S.with_tid(raw, tid2), key) == S.encode(smp)
    assert S.method_of(raw) == method and S.hop_count_of(raw) == len(path) - 1 and S.m_key_of(raw) == 0
    assert S.hop_count_of(S.encode(S.lid_routed(method, attr, modifier))) is None


@pytest.mark.parametrize("lay", ALL_LAYOUTS, ids=_ids(ALL_LAYOUTS))
@pytest.mark.parametrize("fill", [0x00, 0xFF, 0x5A, 0xA5])
def test_fast_equals_construct_patterns(lay, fill):
    buf = bytes([fill]) * lay.size
    v = lay.decode(buf)
    assert v == lay.decode_construct(buf)
    assert lay.encode(v) == lay.encode_construct(v)


@pytest.mark.parametrize("lay", ALL_LAYOUTS, ids=_ids(ALL_LAYOUTS))
def test_field_info_matches_construct(lay):
    """Each named field's offset/width from field_info() equals where construct puts it:
    set the field to all ones, everything else zero, and look at the bits construct built."""
    for name, offset, width, count in lay.field_info():
        f = next(x for x in lay.fields if x.name == name)
        value = lay.cls()
        if f.kind == "int":
            setattr(value, name, (1 << width) - 1)
        elif f.kind == "array":
            setattr(value, name, [(1 << width) - 1] * count)
        elif f.kind == "bytes":
            setattr(value, name, b"\xff" * count)
        else:
            continue  # text: no way to write 0xFF bytes as UTF-8; covered by round trips
        bits = int.from_bytes(lay.encode_construct(value), "big")
        total = lay.size * 8
        expect = ((1 << (width * count)) - 1) << (total - offset - width * count)
        assert bits == expect, name


# -- bad input raises only MadError --------------------------------------------------------
JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70), st.floats(allow_nan=True),
    st.text(max_size=8), st.binary(max_size=300), st.lists(st.integers(-5, 300), max_size=70),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=3), st.just(object()),
    st.just(math.inf), st.tuples(st.integers()), st.just(b"\x01" * 256),
)


def _only_mad_errors(fn, *args):
    try:
        fn(*args)
    except E.MadError:
        pass
    # anything else propagates and fails the test with its own traceback


@SETTINGS
@given(st.binary(max_size=600))
def test_decode_random_bytes(buf):
    _only_mad_errors(S.decode, buf)
    _only_mad_errors(S.decode, bytearray(buf))
    _only_mad_errors(S.decode, memoryview(buf))


@SETTINGS
@given(st.binary(min_size=256, max_size=256), st.integers(0, 255), st.integers(0, 255))
def test_decode_any_256_bytes_of_an_smp_class(buf, lo, hi):
    b = bytearray(buf)
    b[0], b[1] = 1, (0x01, 0x81)[lo % 2]
    smp = S.decode(bytes(b))  # every bit pattern is a valid SMP: no exception at all
    _only_mad_errors(smp.attribute)
    assert S.encode(smp)[:4] == bytes(b[:4])


@SETTINGS
@given(st.binary(max_size=600), st.integers(0, 260))
def test_decode_truncated_and_oversized(buf, cut):
    good = S.encode(S.dr(1, 0x11, "0,1,2", tid=1))
    for bad in (good[:cut], good + buf[:1] + buf, good[:cut] + buf):
        if len(bad) != 256:
            with pytest.raises(E.MadLengthError):
                S.decode(bad)
        else:
            _only_mad_errors(S.decode, bad)


@SETTINGS
@given(JUNK)
def test_decode_junk_objects(obj):
    _only_mad_errors(S.decode, obj)


@SETTINGS
@given(st.one_of(st.integers(-5, 0x10000), JUNK), st.one_of(st.binary(max_size=80), JUNK),
       st.one_of(st.integers(-5, 1 << 33), JUNK))
def test_decode_attribute_junk(attr_id, data, modifier):
    _only_mad_errors(A.decode_attribute, attr_id, data, modifier)


@SETTINGS
@given(st.integers(0, 0xFFFF), st.binary(min_size=64, max_size=64))
def test_decode_attribute_any_64_bytes(attr_id, data):
    try:
        v = A.decode_attribute(attr_id, data)
    except E.UnknownAttributeError:
        assert attr_id not in A.ATTRIBUTE_NAMES
        return
    assert v.LAYOUT.decode_construct(data) == v


@SETTINGS
@given(JUNK, st.one_of(st.integers(0, 1 << 31), JUNK))
def test_encode_junk_objects(obj, modifier):
    _only_mad_errors(S.encode, obj)
    _only_mad_errors(A.encode_attribute, obj, modifier)
    for lay in ALL_LAYOUTS:
        _only_mad_errors(lay.encode, obj)


@SETTINGS
@given(st.sampled_from(ALL_LAYOUTS), st.data())
def test_encode_junk_in_fields(lay, data):
    """A value of the right class with junk in one or more fields."""
    value = data.draw(value_strategy(lay))
    names = [f.name for f in lay.fields if f.name]
    for name in data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=3)):
        setattr(value, name, data.draw(JUNK))
    _only_mad_errors(lay.encode, value)
    if lay in SMP_LAYOUTS:
        _only_mad_errors(S.encode, value)
    if lay in DATA_LAYOUTS:
        _only_mad_errors(A.encode_attribute, value)


def test_wrong_layout_value_rejected():
    with pytest.raises(E.MadFieldError):
        A.SwitchInfo.LAYOUT.encode(A.NodeInfo())
    with pytest.raises(E.MadFieldError):
        S.encode(A.SwitchInfo())
    with pytest.raises(E.MadFieldError):
        A.encode_attribute(S.dr(1, 0x12, "0"))
    with pytest.raises(E.UnknownAttributeError):
        A.decode_attribute(0x7777, bytes(64))
    with pytest.raises(E.MadLengthError):
        A.decode_attribute(0x12, bytes(63))
    with pytest.raises(E.UnknownVersionError):
        S.decode(b"\x02\x81" + bytes(254))
    with pytest.raises(E.UnknownVersionError):
        S.decode(b"\x01\x03" + bytes(254))


# -- out-of-range values name the field and the limit ---------------------------------------
def _int_fields(lays):
    return [(lay, f) for lay in lays for f in lay.fields if f.name and f.kind in ("int", "array")]


INT_FIELDS = _int_fields(ALL_LAYOUTS)


@pytest.mark.parametrize("lay,f", INT_FIELDS, ids=[f"{lay.name}.{f.name}" for lay, f in INT_FIELDS])
def test_out_of_range_names_field_and_limit(lay, f):
    top = (1 << f.width) - 1
    for bad in (top + 1, -1, top + 0.0, str(top)):
        value = lay.cls()
        if f.kind == "int":
            setattr(value, f.name, bad)
        else:
            arr = [0] * f.count
            arr[f.count // 2] = bad
            setattr(value, f.name, arr)
        with pytest.raises(E.MadFieldError) as ei:
            lay.encode(value)
        err = ei.value
        assert err.field == f.name
        assert f.name in str(err)
        assert str(top) in str(err) or f"{top:#x}" in str(err), str(err)
        if isinstance(bad, int):  # construct itself accepts floats and numeric strings
            with pytest.raises(E.MadFieldError):
                lay.encode_construct(value)
    if f.kind == "array":  # wrong length
        value = lay.cls()
        setattr(value, f.name, [0] * (f.count + 1))
        with pytest.raises(E.MadFieldError) as ei:
            lay.encode(value)
        assert ei.value.field == f.name and str(f.count) in str(ei.value)


def test_out_of_range_examples():
    si = A.SwitchInfo(life_time_value=32)
    with pytest.raises(E.MadFieldError, match=r"life_time_value=32 .*0\.\.31"):
        A.encode_attribute(si)
    with pytest.raises(E.MadFieldError, match=r"lid=65536 .*65535"):
        A.encode_attribute(A.PortInfo(lid=0x10000))
    with pytest.raises(E.MadFieldError, match=r"node_string"):
        A.encode_attribute(A.NodeDescription(node_string="x" * 65))
    with pytest.raises(E.MadFieldError, match=r"ports.*64"):
        A.encode_attribute(A.LinearForwardingTable(ports=[0] * 63))
    with pytest.raises(E.MadFieldError, match=r"ports.*255"):
        A.encode_attribute(A.LinearForwardingTable(ports=[256] * 64))
    smp = S.dr(1, 0x12, "0")
    smp.data = b"\0" * 65
    with pytest.raises(E.MadFieldError, match="data"):
        S.encode(smp)
    smp = S.dr(1, 0x12, "0")
    smp.hop_count = 64
    S.encode(smp)  # 64 fits the 8-bit field: the codec encodes what it is given
    smp.hop_count = 256
    with pytest.raises(E.MadFieldError, match=r"hop_count=256"):
        S.encode(smp)


@pytest.mark.parametrize("path,limit", [("0," + ",".join(["1"] * 64), "63 hops"), ("1,2", "starts at 0"),
                                        ("0,255", "1..254"), ("0,x", "comma-separated"), ((), "starts at 0")])
def test_bad_paths(path, limit):
    with pytest.raises(E.MadFieldError, match=limit):
        S.parse_path(path)


def test_max_path():
    path = (0,) + (1,) * 63
    smp = S.dr(1, 0x11, path)
    assert S.decode(S.encode(smp)).path == path


@SETTINGS
@given(st.lists(st.integers(1, 254), max_size=63), st.integers(0, 0xFFFFFFFF))
def test_dr_builder_roundtrip(hops, tid):
    smp = S.dr(1, 0x11, (0, *hops), tid=tid)
    back = S.decode(S.encode(smp))
    assert back.path == (0, *hops) and back.hop_count == len(hops) and back.tid32 == tid
    assert back.dr_slid == back.dr_dlid == 0xFFFF and back.d == 0 and not back.is_response
    resp = S.decode(S.encode(S.response_to(back)))
    assert resp.d == 1 and resp.is_response and resp.transaction_id == back.transaction_id


@SETTINGS
@given(st.text(max_size=80))
def test_node_description_text(text):
    raw = text.encode("utf-8", "surrogateescape") if _encodable(text) else None
    value = A.NodeDescription(node_string=text)
    if raw is None or len(raw) > 64:
        with pytest.raises(E.MadFieldError):
            A.encode_attribute(value)
        return
    data = A.encode_attribute(value)
    assume(b"\0" not in raw)
    assert A.decode_attribute(0x10, data).node_string == text


def _encodable(text):
    try:
        text.encode("utf-8", "surrogateescape")
        return True
    except UnicodeError:
        return False


@given(st.integers(0, 0x7FFF))
def test_status_error_bits_are_status_ok(word):
    from mad.header import STATUS_ERROR_BITS, Status
    assert Status.from_word(word).ok == (not word & STATUS_ERROR_BITS)


@given(st.binary(min_size=64, max_size=64))
def test_lft_block_bytes_are_its_ports(raw):
    """fdb.lft sends and reads LFT blocks as raw bytes: the layout must agree."""
    value = A.LinearForwardingTable(ports=list(raw))
    assert value.encode() == raw and A.LinearForwardingTable.decode(raw) == value


# module level: annotations are strings, resolved in the module's globals
from typing import Annotated  # noqa: E402

from construct import Array, BitsInteger  # noqa: E402

from mad.layout import Before, Reserved, ReservedAfter, shared_fields  # noqa: E402

U8 = Annotated[int, BitsInteger(8)]


def test_annotated_fields_declare_the_layout_once():
    """A field's wire type in its annotation is the layout: reserved bits come first
    wherever Annotated flattening leaves them; a field without one is refused."""
    import pytest as _pytest

    from mad.layout import LayoutValue, layout

    @layout()
    class Two(LayoutValue):
        a: U8 = 0
        b: Annotated[U8, Reserved(4), Reserved(4)] = 0

    assert Two.LAYOUT.size == 3
    assert Two.LAYOUT.encode(Two(0x12, 0x34)) == bytes([0x12, 0, 0x34])
    assert Two.LAYOUT.decode(bytes([1, 0xFF, 2])) == Two(1, 2)

    with _pytest.raises(TypeError, match="no wire type"):
        @layout()
        class Bare(LayoutValue):
            a: int = 0


def test_a_subclass_fills_reserved_bits_of_its_base():
    """`Before`: a subclass's own fields take the place of the reserved run before a field
    of its base (PortInfo's byte 56); fields that do not fill it exactly are refused;
    `ReservedAfter` puts reserved bits after a field."""
    import pytest as _pytest

    from mad.layout import LayoutValue, layout

    @layout()
    class Base(LayoutValue):
        a: U8 = 0
        b: Annotated[U8, Reserved(8)] = 0

    @layout()
    class Filled(Base):
        x: Annotated[int, BitsInteger(4), Reserved(2), Before("b")] = 0
        y: Annotated[int, BitsInteger(2)] = 0

    assert Filled.LAYOUT.encode(Filled(1, 2, 0xF, 3)) == bytes([1, 0b00111111, 2])
    assert Base.LAYOUT.decode(bytes([1, 0xFF, 2])) == Base(1, 2)

    with _pytest.raises(TypeError, match="4 bits of fields, 8 reserved"):
        @layout()
        class Short(Base):
            x: Annotated[int, BitsInteger(4), Before("b")] = 0

    @layout()
    class Tail(LayoutValue):
        a: Annotated[U8, ReservedAfter(16)] = 0

    assert Tail.LAYOUT.size == 3 and Tail.LAYOUT.encode(Tail(7)) == bytes([7, 0, 0])


def test_shared_field_groups_are_declared_once_and_placed_by_the_bases():
    """`shared_fields`: a group of annotated fields several layouts inherit (an attribute's,
    which an SA record embeds); listed before the class's other bases its fields come first,
    after them after its own; the layout class holds the slots, so values have no __dict__."""
    from mad.layout import LayoutValue, layout

    @shared_fields
    class G1:
        a: U8 = 0

    @shared_fields
    class G2:
        b: Annotated[list[int], Array(2, BitsInteger(8))] = A.ZEROS

    @layout()
    class Head(G1, LayoutValue):
        x: U8 = 0

    @layout()
    class Tail(LayoutValue, G1, G2):
        x: Annotated[U8, ReservedAfter(8)] = 0

    assert Head.LAYOUT.names == ("a", "x") and Tail.LAYOUT.names == ("x", "a", "b")
    assert Tail(x=1, a=2, b=[3, 4]).encode() == bytes([1, 0, 2, 3, 4])
    assert Tail().b == [0, 0] and Tail().b is not Tail().b  # the group's default from its wire type
    assert not hasattr(Tail(), "__dict__") and not hasattr(Head(), "__dict__")
