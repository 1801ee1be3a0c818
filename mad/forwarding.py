"""AttributeModifier and table-position math for the forwarding tables, PortInfo and the
per-port tables (P_KeyTable, SLtoVLMappingTable, VLArbitrationTable).

All functions check their inputs and raise MadFieldError naming the limit; each mapping
has its inverse. Constants are IBA 14.2.5.10-14.2.5.12 (see docs/PITFALLS.md).
"""
from __future__ import annotations

from mad.attributes import PORTINFO_EXT_SPEEDS, RandomForwardingEntry, RandomForwardingTable
from mad.errors import MadFieldError

# -- LIDs ------------------------------------------------------------------------
UNICAST_LID_MAX = 0xBFFF
LMC_MAX = 7  # PortInfo.LMC is 3 bits: a port has 2^LMC LIDs


def lmc_problem(lmc: object, what: str = "--lmc") -> str | None:
    """The one LMC rule: why ``lmc`` is not an LMC (an integer 0..7), or None. ``what``
    names the input in the message."""
    if isinstance(lmc, int) and not isinstance(lmc, bool) and 0 <= lmc <= LMC_MAX:
        return None
    return f"{what} {lmc!r}: the LMC is 0..{LMC_MAX}"


MULTICAST_LID_MIN = 0xC000
MULTICAST_LID_MAX = 0xFFFE
PERMISSIVE_LID = 0xFFFF

# -- LinearForwardingTable: 768 blocks of 64 one-byte ports -----------------------
LFT_BLOCK_SIZE = 64
LFT_BLOCKS = 768
LFT_NO_PORT = 0xFF

# -- RandomForwardingTable: 3072 blocks of 16 four-byte entries -------------------
RFT_BLOCK_SIZE = 16
RFT_BLOCKS = 3072

# -- MulticastForwardingTable: 512 blocks of 32 MLIDs x 16 positions of 16 ports ---
MFT_BLOCK_SIZE = 32
MFT_BLOCKS = 512
MFT_POSITIONS = 16
MFT_PORTS_PER_POSITION = 16
_MFT_BLOCK_MASK = 0x1FF  # bits 8:0
_MFT_POSITION_SHIFT = 28  # bits 31:28

MAX_PORT = 254  # 255 is the LFT "no port" value; switches have at most 254 ports


def _check(field: str, value: int, lo: int, hi: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise MadFieldError(field, value, f"{lo}..{hi} ({lo:#x}..{hi:#x})")
    return value


def check_unicast_lid(lid: int) -> int:
    return _check("lid", lid, 1, UNICAST_LID_MAX)


def check_mlid(mlid: int) -> int:
    return _check("mlid", mlid, MULTICAST_LID_MIN, MULTICAST_LID_MAX)


def check_port(port: int, num_ports: int = MAX_PORT) -> int:
    return _check("port", port, 0, num_ports)


# LFT
def lft_block(lid: int) -> tuple[int, int]:
    """LID -> (block = AttributeModifier, index in the block). LID 0 is reserved but
    addressable as entry 0 of block 0, so 0 is accepted here."""
    _check("lid", lid, 0, UNICAST_LID_MAX)
    return divmod(lid, LFT_BLOCK_SIZE)


def lft_lid(block: int, index: int) -> int:
    _check("lft block", block, 0, LFT_BLOCKS - 1)
    _check("lft index", index, 0, LFT_BLOCK_SIZE - 1)
    return block * LFT_BLOCK_SIZE + index


def lft_modifier(block: int) -> int:
    return _check("lft block", block, 0, LFT_BLOCKS - 1)


def lft_blocks_for(cap_or_top: int) -> int:
    """How many blocks cover LIDs 0..cap_or_top inclusive."""
    _check("lft top", cap_or_top, 0, UNICAST_LID_MAX)
    return cap_or_top // LFT_BLOCK_SIZE + 1


# RFT
def rft_block(entry: int) -> tuple[int, int]:
    """Entry number -> (block = AttributeModifier, index in the block)."""
    _check("rft entry", entry, 0, RFT_BLOCKS * RFT_BLOCK_SIZE - 1)
    return divmod(entry, RFT_BLOCK_SIZE)


def rft_entry(block: int, index: int) -> int:
    _check("rft block", block, 0, RFT_BLOCKS - 1)
    _check("rft index", index, 0, RFT_BLOCK_SIZE - 1)
    return block * RFT_BLOCK_SIZE + index


def rft_modifier(block: int) -> int:
    return _check("rft block", block, 0, RFT_BLOCKS - 1)


def rft_lid_range(base_lid: int, lmc: int) -> range:
    """LIDs an RFT entry matches: the base with its low LMC bits cleared, 2**LMC of them."""
    _check("lmc", lmc, 0, 7)
    first = base_lid & ~((1 << lmc) - 1)
    return range(first, first + (1 << lmc))


# MFT
def mft_position(port: int) -> tuple[int, int]:
    """Port -> (PortMask position, bit within the 16-bit mask)."""
    _check("port", port, 0, MFT_POSITIONS * MFT_PORTS_PER_POSITION - 1)
    return divmod(port, MFT_PORTS_PER_POSITION)


def mft_block(mlid: int) -> tuple[int, int]:
    """MLID -> (block, index of its PortMask entry in the block)."""
    check_mlid(mlid)
    return divmod(mlid - MULTICAST_LID_MIN, MFT_BLOCK_SIZE)


def mft_mlid(block: int, index: int) -> int:
    _check("mft block", block, 0, MFT_BLOCKS - 1)
    _check("mft index", index, 0, MFT_BLOCK_SIZE - 1)
    # block 511 entry 31 is LID 0xFFFF: a slot of the table, but the permissive LID and
    # not an MLID (mft_block refuses it); callers that program groups use check_mlid
    return MULTICAST_LID_MIN + block * MFT_BLOCK_SIZE + index


def mft_modifier(block: int, position: int) -> int:
    """(block, position) -> AttributeModifier: block in bits 8:0, position in bits 31:28."""
    _check("mft block", block, 0, MFT_BLOCKS - 1)
    _check("mft position", position, 0, MFT_POSITIONS - 1)
    return (position << _MFT_POSITION_SHIFT) | block


def mft_from_modifier(modifier: int) -> tuple[int, int]:
    """AttributeModifier -> (block, position); reserved bits 27:9 must be zero."""
    _check("attribute_modifier", modifier, 0, 0xFFFFFFFF)
    if modifier & 0x0FFFFE00:
        raise MadFieldError("attribute_modifier", hex(modifier), "MFT reserved bits 27:9 must be zero")
    return modifier & _MFT_BLOCK_MASK, modifier >> _MFT_POSITION_SHIFT


def mft_positions_for(num_ports: int) -> int:
    """PortMask positions a switch with ports 0..num_ports uses."""
    _check("num_ports", num_ports, 0, MAX_PORT)
    return num_ports // MFT_PORTS_PER_POSITION + 1


def mft_blocks_for(cap: int) -> int:
    """Blocks covering a MulticastFDBCap of ``cap`` entries."""
    _check("multicast_fdb_cap", cap, 0, MFT_BLOCKS * MFT_BLOCK_SIZE)
    return -(-cap // MFT_BLOCK_SIZE)


# -- packing: MFT PortMasks and RFT entries ------------------------------------------
# The one place ports become PortMask bits and RFT entries become 32-bit words. The RFT
# entry layout is mad.attributes.RandomForwardingEntry's, never restated here.
def mask_ports(mask: int, position: int) -> set[int]:
    """The ports a 16-bit PortMask at ``position`` names."""
    base = position * MFT_PORTS_PER_POSITION
    return {base + b for b in range(MFT_PORTS_PER_POSITION) if mask >> b & 1}


def ports_masks(ports, positions: int) -> list[int]:
    """A set of ports as one 16-bit PortMask per position 0..positions-1."""
    masks = [0] * positions
    for port in ports:
        pos, bit = mft_position(port)
        masks[pos] |= 1 << bit
    return masks


def masks_ports(masks) -> list[int]:
    """The inverse of `ports_masks`: ``masks[p]`` is position p's PortMask; sorted ports."""
    return sorted(port for p, m in enumerate(masks) for port in mask_ports(m, p))


def rft_decode(packed: int):
    """One packed 32-bit RFT word as a RandomForwardingEntry value (valid or not)."""
    return RandomForwardingEntry.decode(packed.to_bytes(4, "big"))


def rft_encode(entry) -> int:
    """A RandomForwardingEntry value as the 32-bit word RandomForwardingTable.entries holds."""
    return int.from_bytes(RandomForwardingEntry.LAYOUT.encode(entry), "big")


def rft_pack(base_lid: int, lmc: int, port: int) -> int:
    """One valid entry as its 32-bit word."""
    rft_lid_range(base_lid, lmc)  # checks the LMC
    return rft_encode(RandomForwardingEntry(base_lid=base_lid, valid=1, lmc=lmc, port=port))


def rft_unpack(packed: int) -> tuple[int, int, int] | None:
    """(base_lid, lmc, port) of a valid entry, None for an invalid one."""
    e = rft_decode(packed)
    return (e.base_lid, e.lmc, e.port) if e.valid else None


def rft_norm(packed: int) -> int:
    """Invalid entries compare equal whatever else they hold; reserved bits ignored."""
    e = rft_unpack(packed)
    return 0 if e is None else rft_pack(*e)


def rft_block_entries(block) -> list:
    """A RandomForwardingTable value as its 16 RandomForwardingEntry values."""
    return [rft_decode(e) for e in block.entries]


def rft_block_of(entries):
    """Up to 16 RandomForwardingEntry values as a RandomForwardingTable (the rest invalid)."""
    if len(entries) > RFT_BLOCK_SIZE:
        raise MadFieldError("entries", len(entries), f"at most {RFT_BLOCK_SIZE} per RFT block")
    packed = [rft_encode(e) for e in entries]
    return RandomForwardingTable(entries=packed + [0] * (RFT_BLOCK_SIZE - len(packed)))


# PortInfo: port number in bits 7:0; bit 31 = SMSupportExtendedSpeeds (IBA 1.4+), PORTINFO_EXT_SPEEDS


def portinfo_modifier(port: int, extended_speeds: bool = False) -> int:
    _check("port", port, 0, 255)
    return port | (PORTINFO_EXT_SPEEDS if extended_speeds else 0)


def portinfo_from_modifier(modifier: int) -> tuple[int, bool]:
    _check("attribute_modifier", modifier, 0, 0xFFFFFFFF)
    return modifier & 0xFF, bool(modifier & PORTINFO_EXT_SPEEDS)


# P_KeyTable (IBA 14.2.5.7): block of 32 P_Keys in bits 15:0; for a switch, port in
# bits 23:16 (a CA answers for the port the SMP came in on and reserves them)
PKEY_BLOCK_SIZE = 32
PKEY_BLOCKS = 2048
PKEY_FULL_MEMBER = 0x8000  # membership bit 15; bits 14:0 are the P_Key base
PKEY_DEFAULT = 0xFFFF  # the default partition, full member


def pkey_modifier(block: int, port: int = 0) -> int:
    _check("pkey block", block, 0, PKEY_BLOCKS - 1)
    _check("port", port, 0, 255)
    return (port << 16) | block


def pkey_from_modifier(modifier: int) -> tuple[int, int]:
    """AttributeModifier -> (block, port); reserved bits 31:24 must be zero."""
    _check("attribute_modifier", modifier, 0, 0xFFFFFFFF)
    if modifier >> 24:
        raise MadFieldError("attribute_modifier", hex(modifier), "P_KeyTable reserved bits 31:24 must be zero")
    return modifier & 0xFFFF, (modifier >> 16) & 0xFF


def pkey_blocks_for(cap: int) -> int:
    """Blocks covering a table of ``cap`` P_Keys (NodeInfo.PartitionCap, or a switch's
    SwitchInfo.PartitionEnforcementCap for its external ports)."""
    _check("partition cap", cap, 0, PKEY_BLOCKS * PKEY_BLOCK_SIZE)
    return -(-cap // PKEY_BLOCK_SIZE)


# GUIDInfo (IBA 14.2.5.5): AttributeModifier = the block of 8 GUIDs, 0..31 (GUIDCap is
# at most 255); the table is the port's the SMP came in on (a switch's: port 0's)
GUID_BLOCK_SIZE = 8
GUID_BLOCKS = 32


def guid_modifier(block: int) -> int:
    _check("GUIDInfo block", block, 0, GUID_BLOCKS - 1)
    return block


def guid_from_modifier(modifier: int) -> int:
    """AttributeModifier -> GUID block; 0..31, the rest reserved."""
    _check("attribute_modifier", modifier, 0, 0xFFFFFFFF)
    if modifier >= GUID_BLOCKS:
        raise MadFieldError("attribute_modifier", hex(modifier), f"GUIDInfo block 0..{GUID_BLOCKS - 1}")
    return modifier


def guid_blocks_for(cap: int) -> int:
    """Blocks covering a table of ``cap`` GUIDs (PortInfo.GUIDCap)."""
    _check("GUID cap", cap, 0, 255)
    return -(-cap // GUID_BLOCK_SIZE)


# SLtoVLMappingTable (IBA 14.2.5.8): a CA takes modifier 0 (the table of the port the SMP
# came in on); a switch has one table per (input port, output port): output port in bits
# 7:0, input port in bits 15:8. A switch whose SwitchInfo advertises
# OptimizedSLtoVLMappingProgramming (IBA 14.2.5.4) also takes, in a Set, bit 17: the
# table for every input port to the output port of bits 7:0 (the input port bits then
# 0), and bit 16: for every output port; OpenSM's QoS manager writes 0x20000 | out and
# 0x30000. Elsewhere bits 31:16 are reserved (ibsim ignores them: docs/PITFALLS.md).
SL2VL_SLS = 16
SL2VL_ALL_INPUTS = 1 << 17
SL2VL_ALL_OUTPUTS = 1 << 16


def sl2vl_optimized(switch_info) -> bool:
    """Does this SwitchInfo advertise OptimizedSLtoVLMappingProgramming (bit 0 of the field,
    as OpenSM reads it)?"""
    return bool(switch_info is not None and switch_info.optimized_sl_to_vl_mapping_programming & 1)


def sl2vl_all_inputs_modifier(out_port: int) -> int:
    """The Set of one output port's table for every input port (an optimized switch only)."""
    _check("output port", out_port, 0, 255)
    return SL2VL_ALL_INPUTS | out_port


def sl2vl_modifier(in_port: int, out_port: int) -> int:
    _check("input port", in_port, 0, 255)
    _check("output port", out_port, 0, 255)
    return (in_port << 8) | out_port


def sl2vl_from_modifier(modifier: int) -> tuple[int, int]:
    """AttributeModifier -> (input port, output port); bits 31:16 must be zero."""
    _check("attribute_modifier", modifier, 0, 0xFFFFFFFF)
    if modifier >> 16:
        raise MadFieldError("attribute_modifier", hex(modifier), "SLtoVLMappingTable bits 31:16 must be zero here")
    return (modifier >> 8) & 0xFF, modifier & 0xFF


# VLArbitrationTable (IBA 14.2.5.9): bits 31:16 = part 1..4 (low priority entries 0-31,
# low 32-63, high 0-31, high 32-63), bits 7:0 = output port on a switch (CAs ignore it).
# A part is 32 entries of (VL 4 bits after 4 reserved, Weight 8 bits).
VLARB_BLOCK_SIZE = 32
VLARB_LOW, VLARB_HIGH = "low", "high"
_VLARB_PARTS = {(VLARB_LOW, 0): 1, (VLARB_LOW, 1): 2, (VLARB_HIGH, 0): 3, (VLARB_HIGH, 1): 4}
_VLARB_BY_PART = {v: k for k, v in _VLARB_PARTS.items()}


def vlarb_part(table: str, half: int) -> int:
    """(low|high, 0 for entries 0-31 / 1 for 32-63) -> part number 1..4."""
    try:
        return _VLARB_PARTS[(table, half)]
    except KeyError:
        raise MadFieldError("vlarb table", f"{table}/{half}", "('low'|'high', 0|1)") from None


def vlarb_modifier(part: int, port: int = 0) -> int:
    _check("vlarb part", part, 1, 4)
    _check("port", port, 0, 255)
    return (part << 16) | port


def vlarb_from_modifier(modifier: int) -> tuple[str, int, int]:
    """AttributeModifier -> (low|high, half 0|1, port); bits 15:8 must be zero."""
    _check("attribute_modifier", modifier, 0, 0xFFFFFFFF)
    part = modifier >> 16
    if part not in _VLARB_BY_PART or modifier & 0xFF00:
        raise MadFieldError("attribute_modifier", hex(modifier), "VLArbitrationTable part 1..4 in bits 31:16, "
                            "port in bits 7:0, bits 15:8 zero")
    table, half = _VLARB_BY_PART[part]
    return table, half, modifier & 0xFF


def vlarb_parts_for(low_cap: int, high_cap: int) -> list[int]:
    """Parts a port with VLArbitrationLowCap / HighCap entries implements."""
    _check("vl_arbitration_low_cap", low_cap, 0, 2 * VLARB_BLOCK_SIZE)
    _check("vl_arbitration_high_cap", high_cap, 0, 2 * VLARB_BLOCK_SIZE)
    out = []
    for table, cap in ((VLARB_LOW, low_cap), (VLARB_HIGH, high_cap)):
        out += [vlarb_part(table, h) for h in range(2) if cap > h * VLARB_BLOCK_SIZE]
    return out
