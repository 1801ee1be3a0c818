"""AttributeModifier and table-position math (mad.forwarding): values, inverses, limits.

Table sizes are IBA 14.2.5.10-12 (docs/PITFALLS.md): LFT 768 blocks of 64
ports, RFT 3072 blocks of 16 entries, MFT 512 blocks of 32 MLIDs x 16 PortMask
positions, position in modifier bits 31:28 and block in bits 8:0.
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mad import forwarding as F
from mad.errors import MadError, MadFieldError

SET = settings(max_examples=300, deadline=None)


# -- constants ------------------------------------------------------------------------
def test_table_sizes():
    assert (F.LFT_BLOCKS, F.LFT_BLOCK_SIZE) == (768, 64)
    assert F.LFT_BLOCKS * F.LFT_BLOCK_SIZE == F.UNICAST_LID_MAX + 1 == 0xC000
    assert (F.RFT_BLOCKS, F.RFT_BLOCK_SIZE) == (3072, 16)
    assert F.RFT_BLOCKS * F.RFT_BLOCK_SIZE == 0xC000
    assert (F.MFT_BLOCKS, F.MFT_BLOCK_SIZE, F.MFT_POSITIONS, F.MFT_PORTS_PER_POSITION) == (512, 32, 16, 16)
    assert F.MFT_BLOCKS * F.MFT_BLOCK_SIZE == 0x10000 - F.MULTICAST_LID_MIN
    # the full MFT: 512 blocks x 16 positions x (32 masks x 2 bytes) = 512 KiB
    assert F.MFT_BLOCKS * F.MFT_POSITIONS * F.MFT_BLOCK_SIZE * 2 == 512 * 1024
    assert F.PERMISSIVE_LID == 0xFFFF and F.LFT_NO_PORT == 0xFF


# -- LinearForwardingTable ---------------------------------------------------------------
@pytest.mark.parametrize("lid,block,index", [(0, 0, 0), (1, 0, 1), (63, 0, 63), (64, 1, 0), (127, 1, 63),
                                             (0x7F, 1, 63), (0xBFFF, 767, 63), (30719, 479, 63)])
def test_lft_block(lid, block, index):
    assert F.lft_block(lid) == (block, index)
    assert F.lft_lid(block, index) == lid
    assert F.lft_modifier(block) == block


def test_lft_every_lid_inverse():
    for lid in range(0, F.UNICAST_LID_MAX + 1):
        assert F.lft_lid(*F.lft_block(lid)) == lid


@pytest.mark.parametrize("call,limit", [
    (lambda: F.lft_block(0xC000), "0..49151"), (lambda: F.lft_block(-1), "0..49151"),
    (lambda: F.lft_modifier(768), "lft block"), (lambda: F.lft_modifier(-1), "lft block"),
    (lambda: F.lft_lid(768, 0), "0..767"), (lambda: F.lft_lid(0, 64), "0..63"),
    (lambda: F.lft_blocks_for(0xC000), "lft top"),
])
def test_lft_range_errors(call, limit):
    with pytest.raises(MadFieldError, match=limit):
        call()


@pytest.mark.parametrize("top,blocks", [(0, 1), (63, 1), (64, 2), (127, 2), (128, 3), (30719, 480), (0xBFFF, 768)])
def test_lft_blocks_for(top, blocks):
    assert F.lft_blocks_for(top) == blocks


# -- RandomForwardingTable ---------------------------------------------------------------
@pytest.mark.parametrize("entry,block,index", [(0, 0, 0), (15, 0, 15), (16, 1, 0), (3071 * 16 + 15, 3071, 15)])
def test_rft_block(entry, block, index):
    assert F.rft_block(entry) == (block, index)
    assert F.rft_entry(block, index) == entry
    assert F.rft_modifier(block) == block


@pytest.mark.parametrize("call", [lambda: F.rft_modifier(3072), lambda: F.rft_block(3072 * 16),
                                  lambda: F.rft_entry(3072, 0), lambda: F.rft_entry(0, 16),
                                  lambda: F.rft_lid_range(1, 8)])
def test_rft_range_errors(call):
    with pytest.raises(MadFieldError):
        call()


def test_rft_lid_range():
    assert F.rft_lid_range(0x13, 0) == range(0x13, 0x14)
    assert F.rft_lid_range(0x13, 2) == range(0x10, 0x14)
    assert len(F.rft_lid_range(0x100, 7)) == 128


# -- MulticastForwardingTable ---------------------------------------------------------------
def test_mft_design_example():
    """MLID 0xC000+32*3+5 on port 20: block 3, index 5, position 1, bit 4; modifier 0x10000003."""
    mlid = 0xC000 + 32 * 3 + 5
    assert F.mft_block(mlid) == (3, 5)
    assert F.mft_position(20) == (1, 4)
    assert F.mft_modifier(3, 1) == 0x10000003
    assert F.mft_from_modifier(0x10000003) == (3, 1)
    assert F.mft_mlid(3, 5) == mlid


@pytest.mark.parametrize("block,position,modifier", [
    (0, 0, 0), (0, 1, 0x10000000), (0, 2, 0x20000000), (11, 0, 0x0B), (11, 2, 0x2000000B),
    (31, 2, 0x2000001F), (40, 0, 0x28), (0, 3, 0x30000000), (511, 15, 0xF00001FF),
])
def test_mft_modifier(block, position, modifier):
    """The modifiers OpenSM and ibroute sent in the vectors, plus the extremes."""
    assert F.mft_modifier(block, position) == modifier
    assert F.mft_from_modifier(modifier) == (block, position)


def test_mft_every_modifier_inverse():
    for block in range(F.MFT_BLOCKS):
        for position in range(F.MFT_POSITIONS):
            assert F.mft_from_modifier(F.mft_modifier(block, position)) == (block, position)


def test_mft_every_mlid_inverse():
    for mlid in range(F.MULTICAST_LID_MIN, F.MULTICAST_LID_MAX + 1):
        assert F.mft_mlid(*F.mft_block(mlid)) == mlid


def test_mft_last_slot_is_the_permissive_lid():
    """Block 511 entry 31 addresses 0xFFFF: a table slot, but the permissive LID, not an
    MLID; mft_mlid gives the slot's LID and mft_block refuses it as an MLID."""
    assert F.mft_mlid(511, 31) == 0xFFFF
    with pytest.raises(MadFieldError, match="mlid"):
        F.mft_block(0xFFFF)


@pytest.mark.parametrize("port,position,bit", [(0, 0, 0), (15, 0, 15), (16, 1, 0), (20, 1, 4), (33, 2, 1),
                                               (35, 2, 3), (254, 15, 14), (255, 15, 15)])
def test_mft_position(port, position, bit):
    assert F.mft_position(port) == (position, bit)


@pytest.mark.parametrize("call,limit", [
    (lambda: F.mft_modifier(512, 0), "mft block"), (lambda: F.mft_modifier(0, 16), "mft position"),
    (lambda: F.mft_modifier(-1, 0), "mft block"),
    (lambda: F.mft_from_modifier(0x00000200), "reserved bits 27:9"),
    (lambda: F.mft_from_modifier(0x08000000), "reserved bits 27:9"),
    (lambda: F.mft_from_modifier(1 << 32), "attribute_modifier"),
    (lambda: F.mft_block(0xBFFF), "mlid"), (lambda: F.mft_block(0x10000), "mlid"),
    (lambda: F.mft_mlid(512, 0), "mft block"), (lambda: F.mft_mlid(0, 32), "mft index"),
    (lambda: F.mft_position(256), "port"), (lambda: F.mft_position(-1), "port"),
    (lambda: F.mft_positions_for(255), "num_ports"),
    (lambda: F.mft_blocks_for(512 * 32 + 1), "multicast_fdb_cap"),
])
def test_mft_range_errors(call, limit):
    with pytest.raises(MadFieldError, match=limit) as ei:
        call()
    assert ".." in str(ei.value) or "must be zero" in str(ei.value)


@pytest.mark.parametrize("num_ports,positions", [(0, 1), (8, 1), (15, 1), (16, 2), (36, 3), (47, 3), (48, 4), (254, 16)])
def test_mft_positions_for(num_ports, positions):
    """An 8-port switch uses position 0 only, a 36-port one positions 0..2 (vectors README)."""
    assert F.mft_positions_for(num_ports) == positions


@pytest.mark.parametrize("cap,blocks", [(0, 0), (1, 1), (32, 1), (33, 2), (1024, 32), (16384, 512)])
def test_mft_blocks_for(cap, blocks):
    assert F.mft_blocks_for(cap) == blocks


@SET
@given(st.integers(0, 0xFFFFFFFF))
def test_mft_from_modifier_any_word(word):
    try:
        block, position = F.mft_from_modifier(word)
    except MadFieldError:
        assert word & 0x0FFFFE00
        return
    assert F.mft_modifier(block, position) == word


# -- PortInfo, P_KeyTable, SLtoVL modifiers --------------------------------------------------
@SET
@given(st.integers(0, 255), st.booleans())
def test_portinfo_modifier_inverse(port, ext):
    mod = F.portinfo_modifier(port, ext)
    assert F.portinfo_from_modifier(mod) == (port, ext)
    assert (mod >> 31) == int(ext) and mod & 0x7FFFFF00 == 0


def test_other_modifiers():
    assert F.pkey_modifier(3, port=5) == 0x50003
    assert F.sl2vl_modifier(2, 7) == 0x0207
    for call in (lambda: F.pkey_modifier(2048), lambda: F.pkey_modifier(0, 256),
                 lambda: F.sl2vl_modifier(256, 0), lambda: F.portinfo_modifier(256)):
        with pytest.raises(MadFieldError):
            call()


# -- inputs of the wrong type ------------------------------------------------------------------
@pytest.mark.parametrize("fn", [F.lft_block, F.lft_modifier, F.rft_modifier, F.mft_block, F.mft_position,
                                F.mft_from_modifier, F.check_unicast_lid, F.check_mlid, F.check_port,
                                F.portinfo_from_modifier])
@pytest.mark.parametrize("bad", [None, "1", 1.0, True, [1]])
def test_wrong_types_are_field_errors(fn, bad):
    with pytest.raises(MadError):
        fn(bad)


def test_checks():
    assert F.check_unicast_lid(1) == 1 and F.check_unicast_lid(0xBFFF) == 0xBFFF
    assert F.check_mlid(0xC000) == 0xC000 and F.check_mlid(0xFFFE) == 0xFFFE
    assert F.check_port(36, 36) == 36
    for call in (lambda: F.check_unicast_lid(0), lambda: F.check_unicast_lid(0xC000),
                 lambda: F.check_mlid(0xFFFF), lambda: F.check_port(37, 36)):
        with pytest.raises(MadFieldError):
            call()


# -- per-port tables: P_KeyTable, SLtoVLMappingTable, VLArbitrationTable ----------------
def test_pkey_modifier_roundtrip_and_limits():
    assert F.pkey_modifier(0, 0) == 0
    assert F.pkey_modifier(1, 5) == (5 << 16) | 1
    assert F.pkey_from_modifier((5 << 16) | 1) == (1, 5)
    assert F.pkey_blocks_for(64) == 2 and F.pkey_blocks_for(65) == 3 and F.pkey_blocks_for(0) == 0
    with pytest.raises(MadFieldError, match="pkey block"):
        F.pkey_modifier(2048)
    with pytest.raises(MadFieldError, match="31:24"):
        F.pkey_from_modifier(1 << 24)


def test_guid_modifier_roundtrip_and_limits():
    assert F.guid_modifier(0) == 0 and F.guid_modifier(31) == 31
    assert F.guid_from_modifier(5) == 5
    assert F.guid_blocks_for(32) == 4 and F.guid_blocks_for(33) == 5 and F.guid_blocks_for(1) == 1
    with pytest.raises(MadFieldError, match="GUIDInfo block"):
        F.guid_modifier(32)
    with pytest.raises(MadFieldError, match="GUIDInfo block 0..31"):
        F.guid_from_modifier(32)
    with pytest.raises(MadFieldError, match="GUID cap"):
        F.guid_blocks_for(256)


def test_guidinfo_layout():
    """GUIDInfo (IBA 14.2.5.5): 8 GUIDs of 64 bits, big-endian, from byte 0; the SA's
    GUIDInfoRecord embeds the same components."""
    from mad.attributes import AttrID, GUIDInfo, decode_attribute, encode_attribute
    from mad.sa_records import GUIDInfoRecord
    raw = encode_attribute(GUIDInfo(guids=[0x0002C90300000001 + i for i in range(8)]))
    assert raw[:8] == bytes.fromhex("0002c90300000001") and raw[56:64] == bytes.fromhex("0002c90300000008")
    assert decode_attribute(AttrID.GUID_INFO, raw).guids[7] == 0x0002C90300000008
    assert GUIDInfoRecord(lid=1, block_num=2, guids=list(range(8))).encode()[8:] == \
        encode_attribute(GUIDInfo(guids=list(range(8))))


def test_sl2vl_modifier_roundtrip_and_limits():
    assert F.sl2vl_modifier(3, 7) == 0x0307
    assert F.sl2vl_from_modifier(0x0307) == (3, 7)
    with pytest.raises(MadFieldError, match="31:16"):
        F.sl2vl_from_modifier(0x30000)  # the optimized all-ports form is not ours
    with pytest.raises(MadFieldError, match="output port"):
        F.sl2vl_modifier(0, 256)


def test_vlarb_modifier_parts():
    # part 1..4 = low 0-31, low 32-63, high 0-31, high 32-63 (IBA 14.2.5.9)
    assert [F.vlarb_part(t, h) for t, h in (("low", 0), ("low", 1), ("high", 0), ("high", 1))] == [1, 2, 3, 4]
    assert F.vlarb_modifier(3, 12) == 0x3000C
    assert F.vlarb_from_modifier(0x3000C) == ("high", 0, 12)
    assert F.vlarb_from_modifier(0x20000) == ("low", 1, 0)
    for bad in (0, 0x50000, 0x10100):
        with pytest.raises(MadFieldError, match="VLArbitrationTable"):
            F.vlarb_from_modifier(bad)
    assert F.vlarb_parts_for(8, 8) == [1, 3]
    assert F.vlarb_parts_for(64, 33) == [1, 2, 3, 4]
    assert F.vlarb_parts_for(0, 0) == []


def test_vlarb_layout_decodes_ibsims_answer():
    # part 1 of an ibsim 0.10 switch port's VLArbitrationTable as ibsim answered it (read
    # live): VL0 weight 0, VL1-7 weight 4, then 24 empty entries
    from mad.attributes import AttrID, decode_attribute, encode_attribute, vlarb_block, vlarb_entries
    raw = bytes.fromhex("00000104020403040404050406040704") + bytes(48)
    block = decode_attribute(AttrID.VL_ARBITRATION_TABLE, raw, F.vlarb_modifier(1, 3))
    assert vlarb_entries(block)[:9] == [(0, 0)] + [(vl, 4) for vl in range(1, 8)] + [(0, 0)]
    assert encode_attribute(vlarb_block(vlarb_entries(block))) == raw
    # the 4 reserved bits before each VL are not part of the value
    assert vlarb_entries(decode_attribute(AttrID.VL_ARBITRATION_TABLE, b"\xf1\x04" + bytes(62)))[0] == (1, 4)


# -- the one packer of MFT PortMasks and RFT entries ----------------------------------------
def test_port_masks_round_trip():
    assert F.ports_masks([1, 17, 20, 35], 3) == [0x0002, 0x0012, 0x0008]
    assert F.masks_ports([0x0002, 0x0012, 0x0008]) == [1, 17, 20, 35]
    assert F.mask_ports(0x0012, 1) == {17, 20}
    assert F.ports_masks([], 1) == [0]
    every = list(range(0, 255))
    assert F.masks_ports(F.ports_masks(every, F.MFT_POSITIONS)) == every
    with pytest.raises(MadFieldError):
        F.ports_masks([256], F.MFT_POSITIONS)


def test_rft_entry_packing():
    word = F.rft_pack(0x20, 2, 7)
    assert word == (0x20 << 16) | (1 << 15) | (2 << 12) | 7  # BaseLID 16, Valid 1, LMC 3, reserved 4, Port 8
    assert F.rft_unpack(word) == (0x20, 2, 7)
    assert F.rft_unpack(0x0020_2007) is None  # Valid clear
    assert F.rft_norm(0x0020_2007) == 0 and F.rft_norm(word | 0x0F00) == word  # reserved bits ignored
    block = F.rft_block_of([F.rft_decode(word)])
    assert block.entries == [word] + [0] * 15 and F.rft_block_entries(block)[0].port == 7
    with pytest.raises(MadFieldError):
        F.rft_pack(1, 8, 1)
