"""Subnet-management attributes (IBA 14.2.5), each one layout, components in snake_case.

Every layout is padded to the 64-byte SMP data area; `decode_attribute` and
`encode_attribute` pick the layout from the AttributeID (and, for PortInfo, from
AttributeModifier bit 31).
"""
from __future__ import annotations

import enum
import operator
from typing import Annotated, Any, Callable, ClassVar, Iterable, TypeVar, dataclass_transform

from construct import Array, Bytes, BitsInteger, Bytewise, Padding

from mad.errors import MadFieldError, MadLengthError, UnknownAttributeError
from mad.layout import (
    U1, U4, U8, U16, U24, U32, U64, ZEROS, Before, Layout, LayoutValue, NulText, Reserved, T, annotated_subcons, bit_size,
    layout, shared_fields,
)

SMP_DATA_SIZE = 64
# PortInfo's AttributeModifier bit 31 (SMSupportExtendedSpeeds, IBA 1.4+) selects the
# extended-speeds layout; mad.forwarding builds and reads the modifier
PORTINFO_EXT_SPEEDS = 1 << 31


class AttrID(enum.IntEnum):
    NOTICE = 0x0002
    NODE_DESCRIPTION = 0x0010
    NODE_INFO = 0x0011
    SWITCH_INFO = 0x0012
    GUID_INFO = 0x0014
    PORT_INFO = 0x0015
    P_KEY_TABLE = 0x0016
    SL_TO_VL_MAPPING_TABLE = 0x0017
    VL_ARBITRATION_TABLE = 0x0018
    LINEAR_FORWARDING_TABLE = 0x0019
    RANDOM_FORWARDING_TABLE = 0x001A
    MULTICAST_FORWARDING_TABLE = 0x001B
    SM_INFO = 0x0020


class Attribute(LayoutValue):
    """Base of attribute values: which attribute they are (``ATTR_ID``)."""
    __slots__ = ()
    ATTR_ID: ClassVar[int] = 0

    def to_dict(self) -> dict[str, Any]:
        return {n: getattr(self, n) for n in self.LAYOUT.names}


A = TypeVar("A", bound=Attribute)


@dataclass_transform(eq_default=True)
def _attribute(attr_id: AttrID, *subcons: Any) -> Callable[[type[A]], type[A]]:
    """Class decorator: an attribute's layout, padded to the SMP data area."""
    def attr(cls: type[A]) -> type[A]:
        subs = subcons or tuple(annotated_subcons(cls))
        pad = SMP_DATA_SIZE * 8 - bit_size(subs)
        cls.ATTR_ID = int(attr_id)
        return layout(*subs, *([Padding(pad)] if pad else []))(cls)
    return attr



B = BitsInteger


@shared_fields
class NoticeFields:
    """Notice's fields (mad.sa_records.SaNotice embeds them)."""
    is_generic: U1 = 0
    type: Annotated[int, B(7)] = 0
    producer_type_or_vendor_id: U24 = 0
    trap_number_or_device_id: U16 = 0
    issuer_lid: U16 = 0
    notice_toggle: U1 = 0
    notice_count: Annotated[int, B(15)] = 0
    data_details: Annotated[bytes, Bytewise(Bytes(54))] = ZEROS


@_attribute(AttrID.NOTICE)
class Notice(NoticeFields, Attribute):
    """Notice (IBA 13.4.8.2), the 64 bytes an SMP carries."""


NOTICE_DETAILS_SIZE = 54


class TrapNumber(enum.IntEnum):
    """Generic trap numbers an SMA (or an SM, 144) sends to the master SM (IBA 14.2.5.1)."""
    LINK_STATE_CHANGE = 128  # a switch port changed state (SwitchInfo.PortStateChange)
    LINK_INTEGRITY = 129
    BUFFER_OVERRUN = 130
    FLOW_CONTROL_WATCHDOG = 131
    CAPABILITY_CHANGE = 144  # CapabilityMask, NodeDescription, ... (also: an SM announcing itself)
    SYSTEM_IMAGE_GUID_CHANGE = 145
    BAD_M_KEY = 256
    BAD_P_KEY = 257
    BAD_Q_KEY = 258
    SWITCH_BAD_P_KEY = 259


class NoticeType(enum.IntEnum):
    FATAL = 0
    URGENT = 1
    SECURITY = 2
    SUBNET_MANAGEMENT = 3
    INFO = 4


@dataclass_transform(eq_default=True)
def _details(*subcons: Any) -> Callable[[type[T]], type[T]]:
    """Class decorator: a trap's DataDetails layout, padded to Notice.DataDetails."""
    def bind(cls: type[T]) -> type[T]:
        subs = subcons or tuple(annotated_subcons(cls))
        pad = NOTICE_DETAILS_SIZE * 8 - bit_size(subs)
        return layout(*subs, *([Padding(pad)] if pad else []))(cls)
    return bind


# Notice.DataDetails of the traps an SM acts on (IBA 14.2.5.1, Table 119 and on)
@_details()
class Trap128Details(LayoutValue):
    """Trap 128: the LID of the switch whose PortStateChange was set."""
    lid: U16 = 0


@_details()
class Trap129Details(LayoutValue):
    """Traps 129-131: the LID and port of the faulty link."""
    lid: Annotated[U16, Reserved(16)] = 0
    port_num: U8 = 0


@_details()
class Trap144Details(LayoutValue):
    """Trap 144: a port's CapabilityMask (IsSM among them) or other local change."""
    lid: Annotated[U16, Reserved(16)] = 0
    other_local_changes: Annotated[U1, Reserved(15)] = 0
    capability_mask: U32 = 0
    change_flags: Annotated[int, B(6), Reserved(10)] = 0
    capability_mask2: U16 = 0


@_details()
class Trap256Details(LayoutValue):
    """Trap 256 (Bad M_Key): who sent the SMP (its LID; DRSLID for a directed route),
    its method, attribute and modifier, and the M_Key it carried (a secret: never shown)."""
    lid: Annotated[U16, Reserved(16)] = 0
    dr_slid: U16 = 0
    method: U8 = 0
    attribute_id: Annotated[U16, Reserved(8)] = 0
    attribute_modifier: U32 = 0
    m_key: U64 = 0
    dr_notice: U1 = 0
    dr_path_truncated: U1 = 0
    dr_hop_count: Annotated[int, B(6)] = 0


TRAP_DETAILS: dict[int, type[Trap128Details | Trap129Details | Trap144Details | Trap256Details]] = {
    TrapNumber.LINK_STATE_CHANGE: Trap128Details, TrapNumber.LINK_INTEGRITY: Trap129Details,
    TrapNumber.BUFFER_OVERRUN: Trap129Details, TrapNumber.FLOW_CONTROL_WATCHDOG: Trap129Details,
    TrapNumber.CAPABILITY_CHANGE: Trap144Details, TrapNumber.BAD_M_KEY: Trap256Details}


@shared_fields
class NodeDescriptionFields:
    """NodeDescription's fields (mad.sa_records.NodeRecord embeds them)."""
    node_string: Annotated[str, Bytewise(NulText(64))] = ""


@_attribute(AttrID.NODE_DESCRIPTION)
class NodeDescription(NodeDescriptionFields, Attribute):
    """NodeDescription (IBA 14.2.5.2): 64 bytes of UTF-8, NUL padded."""


@shared_fields
class NodeInfoFields:
    """NodeInfo's fields (mad.sa_records.NodeRecord embeds them)."""
    base_version: U8 = 0
    class_version: U8 = 0
    node_type: U8 = 0
    num_ports: U8 = 0
    system_image_guid: U64 = 0
    node_guid: U64 = 0
    port_guid: U64 = 0
    partition_cap: U16 = 0
    device_id: U16 = 0
    revision: U32 = 0
    local_port_num: U8 = 0
    vendor_id: U24 = 0


@_attribute(AttrID.NODE_INFO)
class NodeInfo(NodeInfoFields, Attribute):
    """NodeInfo (IBA 14.2.5.3)."""


@shared_fields
class SwitchInfoFields:
    """SwitchInfo's fields (mad.sa_records.SwitchInfoRecord embeds them)."""
    linear_fdb_cap: U16 = 0
    random_fdb_cap: U16 = 0
    multicast_fdb_cap: U16 = 0
    linear_fdb_top: U16 = 0
    default_port: U8 = 0
    default_multicast_primary_port: U8 = 0
    default_multicast_not_primary_port: U8 = 0
    life_time_value: Annotated[int, B(5)] = 0
    port_state_change: U1 = 0
    optimized_sl_to_vl_mapping_programming: Annotated[int, B(2)] = 0
    lids_per_port: U16 = 0
    partition_enforcement_cap: U16 = 0
    inbound_enforcement_cap: U1 = 0
    outbound_enforcement_cap: U1 = 0
    filter_raw_inbound_cap: U1 = 0
    filter_raw_outbound_cap: U1 = 0
    enhanced_port0: U1 = 0
    multicast_fdb_top: Annotated[U16, Reserved(3), Reserved(8)] = 0


@_attribute(AttrID.SWITCH_INFO)
class SwitchInfo(SwitchInfoFields, Attribute):
    """SwitchInfo (IBA 14.2.5.4)."""


@shared_fields
class PortInfoFields:
    """PortInfo's fields (mad.sa_records.PortInfoRecord embeds them)."""
    m_key: U64 = 0
    gid_prefix: U64 = 0
    lid: U16 = 0
    master_sm_lid: U16 = 0
    capability_mask: U32 = 0
    diag_code: U16 = 0
    m_key_lease_period: U16 = 0
    local_port_num: U8 = 0
    link_width_enabled: U8 = 0
    link_width_supported: U8 = 0
    link_width_active: U8 = 0
    link_speed_supported: U4 = 0
    port_state: U4 = 0
    port_physical_state: U4 = 0
    link_down_default_state: U4 = 0
    m_key_protect_bits: Annotated[int, B(2)] = 0
    lmc: Annotated[int, B(3), Reserved(3)] = 0
    link_speed_active: U4 = 0
    link_speed_enabled: U4 = 0
    neighbor_mtu: U4 = 0
    master_sm_sl: U4 = 0
    vl_cap: U4 = 0
    init_type: U4 = 0
    vl_high_limit: U8 = 0
    vl_arbitration_high_cap: U8 = 0
    vl_arbitration_low_cap: U8 = 0
    init_type_reply: U4 = 0
    mtu_cap: U4 = 0
    vl_stall_count: Annotated[int, B(3)] = 0
    hoq_life: Annotated[int, B(5)] = 0
    operational_vls: U4 = 0
    partition_enforcement_inbound: U1 = 0
    partition_enforcement_outbound: U1 = 0
    filter_raw_inbound: U1 = 0
    filter_raw_outbound: U1 = 0
    m_key_violations: U16 = 0
    p_key_violations: U16 = 0
    q_key_violations: U16 = 0
    guid_cap: U8 = 0
    client_reregister: U1 = 0
    multicast_pkey_trap_suppression_enabled: Annotated[int, B(2)] = 0
    subnet_timeout: Annotated[int, B(5)] = 0
    resp_time_value: Annotated[int, B(5), Reserved(3)] = 0
    local_phy_errors: U4 = 0
    overrun_errors: U4 = 0
    max_credit_hint: U16 = 0
    # byte 56 reserved here; the extended-speeds form below gives it meaning
    link_round_trip_latency: Annotated[U24, Reserved(8)] = 0
    capability_mask2: U16 = 0
    link_speed_ext_active: U4 = 0
    link_speed_ext_supported: U4 = 0
    link_speed_ext_enabled: Annotated[int, B(5), Reserved(3)] = 0


@_attribute(AttrID.PORT_INFO)
class PortInfo(PortInfoFields, Attribute):
    """PortInfo (IBA 14.2.5.6). ``port_state`` is a `PortState` value where the session
    API decodes it (`smagent.Session.query`, `read_portinfos`)."""


@_attribute(AttrID.PORT_INFO)
class PortInfoExtSpeeds(PortInfo):
    """PortInfo as read or written with AttributeModifier bit 31 (SMSupportExtendedSpeeds)
    set: PortInfo's fields, and these in its byte 56."""
    link_speed_ext_active2: Annotated[int, B(2), Reserved(1), Before("link_round_trip_latency")] = 0
    link_speed_ext_supported2: Annotated[int, B(2)] = 0
    link_speed_ext_enabled2: Annotated[int, B(3)] = 0


# entry i: the port's GUID of index 8*block + i (AttributeModifier = block); GUID 0 of
# block 0 is the port GUID, read only; entries past PortInfo.GUIDCap read 0
GuidBlock = Annotated[list[int], Array(8, B(64))]  # GUIDInfo's, and GUIDInfoRecord's


@_attribute(AttrID.GUID_INFO)
class GUIDInfo(Attribute):
    """GUIDInfo (IBA 14.2.5.5): one block of 8 of a port's GUIDs (its own and alias GUIDs)."""
    guids: GuidBlock = ZEROS


# each entry: membership type (bit 15) + P_KeyBase (bits 14:0)
PKeyBlock = Annotated[list[int], Array(32, B(16))]  # P_KeyTable's, and P_KeyTableRecord's


@_attribute(AttrID.P_KEY_TABLE)
class P_KeyTable(Attribute):
    """P_KeyTable (IBA 14.2.5.7): one block of 32 P_Keys."""
    p_keys: PKeyBlock = ZEROS


# entry i: the VL for SL i
SlToVl = Annotated[list[int], Array(16, B(4))]  # SLtoVLMappingTable's, and its record's


@_attribute(AttrID.SL_TO_VL_MAPPING_TABLE)
class SLtoVLMappingTable(Attribute):
    """SLtoVLMappingTable (IBA 14.2.5.8)."""
    sl_to_vl: SlToVl = ZEROS


# 32 entries of 16 bits: reserved 4, VL 4, Weight 8 (IBA 14.2.5.9); flattened into parallel
# fields so the layout stays one construct, like the RFT below.
@shared_fields
class VLArbitrationTableFields:
    """VLArbitrationTable's fields (mad.sa_records.VLArbitrationTableRecord embeds them)."""
    vl_0: Annotated[U4, Reserved(4)] = 0
    weight_0: U8 = 0
    vl_1: Annotated[U4, Reserved(4)] = 0
    weight_1: U8 = 0
    vl_2: Annotated[U4, Reserved(4)] = 0
    weight_2: U8 = 0
    vl_3: Annotated[U4, Reserved(4)] = 0
    weight_3: U8 = 0
    vl_4: Annotated[U4, Reserved(4)] = 0
    weight_4: U8 = 0
    vl_5: Annotated[U4, Reserved(4)] = 0
    weight_5: U8 = 0
    vl_6: Annotated[U4, Reserved(4)] = 0
    weight_6: U8 = 0
    vl_7: Annotated[U4, Reserved(4)] = 0
    weight_7: U8 = 0
    vl_8: Annotated[U4, Reserved(4)] = 0
    weight_8: U8 = 0
    vl_9: Annotated[U4, Reserved(4)] = 0
    weight_9: U8 = 0
    vl_10: Annotated[U4, Reserved(4)] = 0
    weight_10: U8 = 0
    vl_11: Annotated[U4, Reserved(4)] = 0
    weight_11: U8 = 0
    vl_12: Annotated[U4, Reserved(4)] = 0
    weight_12: U8 = 0
    vl_13: Annotated[U4, Reserved(4)] = 0
    weight_13: U8 = 0
    vl_14: Annotated[U4, Reserved(4)] = 0
    weight_14: U8 = 0
    vl_15: Annotated[U4, Reserved(4)] = 0
    weight_15: U8 = 0
    vl_16: Annotated[U4, Reserved(4)] = 0
    weight_16: U8 = 0
    vl_17: Annotated[U4, Reserved(4)] = 0
    weight_17: U8 = 0
    vl_18: Annotated[U4, Reserved(4)] = 0
    weight_18: U8 = 0
    vl_19: Annotated[U4, Reserved(4)] = 0
    weight_19: U8 = 0
    vl_20: Annotated[U4, Reserved(4)] = 0
    weight_20: U8 = 0
    vl_21: Annotated[U4, Reserved(4)] = 0
    weight_21: U8 = 0
    vl_22: Annotated[U4, Reserved(4)] = 0
    weight_22: U8 = 0
    vl_23: Annotated[U4, Reserved(4)] = 0
    weight_23: U8 = 0
    vl_24: Annotated[U4, Reserved(4)] = 0
    weight_24: U8 = 0
    vl_25: Annotated[U4, Reserved(4)] = 0
    weight_25: U8 = 0
    vl_26: Annotated[U4, Reserved(4)] = 0
    weight_26: U8 = 0
    vl_27: Annotated[U4, Reserved(4)] = 0
    weight_27: U8 = 0
    vl_28: Annotated[U4, Reserved(4)] = 0
    weight_28: U8 = 0
    vl_29: Annotated[U4, Reserved(4)] = 0
    weight_29: U8 = 0
    vl_30: Annotated[U4, Reserved(4)] = 0
    weight_30: U8 = 0
    vl_31: Annotated[U4, Reserved(4)] = 0
    weight_31: U8 = 0


@_attribute(AttrID.VL_ARBITRATION_TABLE)
class VLArbitrationTable(VLArbitrationTableFields, Attribute):
    """VLArbitrationTable: one part (32 entries) of a port's low or high priority table."""


# VL0, Weight0, VL1, ...: the part's fields in layout order, read in one C call
_VLARB_FIELDS = operator.attrgetter(*(f"{k}_{i}" for i in range(32) for k in ("vl", "weight")))


def vlarb_entries(block: VLArbitrationTable) -> list[tuple[int, int]]:
    """A VLArbitrationTable part as 32 (VL, Weight) pairs."""
    flat = _VLARB_FIELDS(block)
    return list(zip(flat[::2], flat[1::2]))


def vlarb_block(entries: Iterable[tuple[int, int]]) -> VLArbitrationTable:
    """Up to 32 (VL, Weight) pairs as a part; missing entries are (0, 0). Built from
    its fields in layout order (VL0, Weight0, ...): a simulated fabric answers 140,000
    VLArb Gets on 11,664 hosts, and names built per field cost 60 times more."""
    flat = [x for vl, w in entries for x in (vl, w)]  # each entry a pair, as before
    if len(flat) > 64:
        raise MadFieldError("entries", len(flat) // 2, "at most 32 per VLArbitrationTable part")
    return VLArbitrationTable(*flat, *([0] * (64 - len(flat))))


# port for LID 64*block + i; 0xFF = none
LftBlock = Annotated[list[int], Array(64, B(8))]  # LinearForwardingTable's, and its record's


@_attribute(AttrID.LINEAR_FORWARDING_TABLE)
class LinearForwardingTable(Attribute):
    """LinearForwardingTable (IBA 14.2.5.10): the ports of 64 LIDs."""
    ports: LftBlock = ZEROS


# One RFT entry is 32 bits: BaseLID 16, Valid 1, LMC 3, reserved 4, Port 8. The block is
# 16 of them, held packed (RandomForwardingTable.entries) so the layout stays one construct.
@layout()
class RandomForwardingEntry(LayoutValue):
    """One RFT entry (4 bytes)."""
    base_lid: U16 = 0
    valid: U1 = 0
    lmc: Annotated[int, B(3)] = 0
    port: Annotated[U8, Reserved(4)] = 0


# each entry a packed RandomForwardingEntry; see mad.forwarding.rft_decode
@_attribute(AttrID.RANDOM_FORWARDING_TABLE)
class RandomForwardingTable(Attribute):
    """RandomForwardingTable (IBA 14.2.5.12): 16 packed entries."""
    entries: Annotated[list[int], Array(16, B(32))] = ZEROS


# entry i: MLID 0xC000+32*block+i, bit j: port 16*position+j
MftBlock = Annotated[list[int], Array(32, B(16))]  # MulticastForwardingTable's, and its record's


@_attribute(AttrID.MULTICAST_FORWARDING_TABLE)
class MulticastForwardingTable(Attribute):
    """MulticastForwardingTable (IBA 14.2.5.11): 32 PortMasks of 16 ports."""
    port_masks: MftBlock = ZEROS


@shared_fields
class SMInfoFields:
    """SMInfo's fields (mad.sa_records.SMInfoRecord embeds them)."""
    guid: U64 = 0
    sm_key: U64 = 0
    act_count: U32 = 0
    priority: U4 = 0
    sm_state: U4 = 0


@_attribute(AttrID.SM_INFO)
class SMInfo(SMInfoFields, Attribute):
    """SMInfo (IBA 14.2.5.13)."""


class SMState(enum.IntEnum):
    NOT_ACTIVE = 0
    DISCOVERING = 1
    STANDBY = 2
    MASTER = 3


class PortState(enum.IntEnum):
    NO_CHANGE = 0
    DOWN = 1
    INIT = 2
    ARMED = 3
    ACTIVE = 4


class NodeType(enum.IntEnum):
    CA = 1
    SWITCH = 2
    ROUTER = 3


CAP_IS_SM = 1 << 1  # PortInfo.CapabilityMask bit 1: IsSM
# PortInfo.CapabilityMask bit 25: the port honours PortInfo.ClientReregister (IBA 14.2.5.6)
CAP_IS_CLIENT_REREGISTRATION = 1 << 25

_BY_ID: dict[int, Layout[Any]] = {
    cls.ATTR_ID: cls.LAYOUT
    for cls in (Notice, NodeDescription, NodeInfo, SwitchInfo, GUIDInfo, PortInfo, P_KeyTable,
                SLtoVLMappingTable, VLArbitrationTable, LinearForwardingTable, RandomForwardingTable,
                MulticastForwardingTable, SMInfo)
}
ATTRIBUTE_NAMES = {i: lay.name for i, lay in _BY_ID.items()}
ATTRIBUTE_IDS = {lay.name.lower(): i for i, lay in _BY_ID.items()}


def layout_for(attr_id: int, modifier: int = 0) -> Layout[Any]:
    if not isinstance(attr_id, int) or not 0 <= attr_id <= 0xFFFF:
        raise MadFieldError("attribute_id", attr_id, "0..65535 (0xffff)")
    if not isinstance(modifier, int) or not 0 <= modifier <= 0xFFFFFFFF:
        raise MadFieldError("attribute_modifier", modifier, "0..4294967295 (0xffffffff)")
    if attr_id == AttrID.PORT_INFO and modifier & PORTINFO_EXT_SPEEDS:
        return PortInfoExtSpeeds.LAYOUT
    try:
        return _BY_ID[attr_id]
    except KeyError:
        raise UnknownAttributeError(f"attribute_id={attr_id:#06x}: no layout for this attribute") from None


def decode_attribute(attr_id: int, data: bytes | bytearray | memoryview, modifier: int = 0) -> Attribute:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise MadLengthError(f"SMP data: expected bytes, got {type(data).__name__}")
    if len(data) != SMP_DATA_SIZE:
        raise MadLengthError(f"SMP data: {len(data)} bytes, must be {SMP_DATA_SIZE}")
    value: Attribute = layout_for(attr_id, modifier).decode(data)
    return value


def encode_attribute(value: Attribute, modifier: int = 0) -> bytes:
    """Encode an attribute value into the 64-byte SMP data area."""
    lay = getattr(value, "LAYOUT", None)
    if lay is None or getattr(value, "ATTR_ID", None) is None:
        raise MadFieldError("attribute", type(value).__name__, "an attribute value from mad.attributes")
    return lay.encode(value)
