"""The SA records (IBA 15.2.5), each one layout (`mad.sa` holds the SA MAD, the component
machinery and the tables). Most declare each field once, its wire type in its annotation
(a table's the attribute's: `mad.attributes.SlToVl`, ...). A record embedding a whole SMP
attribute (or InformInfo) takes those components from it (``SUBCONS``); its fields below
only name them for type checkers: the layout checks names and kinds when the module loads."""
from __future__ import annotations

from typing import Annotated

from construct import Array, BitsInteger, Bytewise, Padding

from mad.attributes import (
    GuidBlock, LftBlock, MftBlock, NodeDescription, NodeInfo, Notice, PKeyBlock, PortInfo, SlToVl, SMInfo, SwitchInfo,
    VLArbitrationTable,
)
from mad.errors import UnknownAttributeError
from mad.layout import U1, U4, U8, U16, U24, U32, U64, U128, ZEROS, NulText, Reserved, ReservedAfter
from mad.sa import MULTIPATH_GIDS, Each, Extra, SaAttrID, SaRecord, Split, Whole, _record

B = BitsInteger


@_record(SaAttrID.NODE_RECORD,
        "lid" / B(16), Padding(16), *NodeInfo.SUBCONS, *NodeDescription.SUBCONS)
class NodeRecord(SaRecord):
    """NodeRecord (IBA 15.2.5): a node's NodeInfo and NodeDescription, by LID."""
    lid: int = 0
    base_version: int = 0
    class_version: int = 0
    node_type: int = 0
    num_ports: int = 0
    system_image_guid: int = 0
    node_guid: int = 0
    port_guid: int = 0
    partition_cap: int = 0
    device_id: int = 0
    revision: int = 0
    local_port_num: int = 0
    vendor_id: int = 0
    node_string: str = ""


@_record(SaAttrID.PORT_INFO_RECORD,
        "endport_lid" / B(16), "port_num" / B(8), "options" / B(8), *PortInfo.SUBCONS)
class PortInfoRecord(SaRecord):
    """PortInfoRecord (IBA 15.2.5): a port's PortInfo."""
    endport_lid: int = 0
    port_num: int = 0
    options: int = 0
    m_key: int = 0
    gid_prefix: int = 0
    lid: int = 0
    master_sm_lid: int = 0
    capability_mask: int = 0
    diag_code: int = 0
    m_key_lease_period: int = 0
    local_port_num: int = 0
    link_width_enabled: int = 0
    link_width_supported: int = 0
    link_width_active: int = 0
    link_speed_supported: int = 0
    port_state: int = 0
    port_physical_state: int = 0
    link_down_default_state: int = 0
    m_key_protect_bits: int = 0
    lmc: int = 0
    link_speed_active: int = 0
    link_speed_enabled: int = 0
    neighbor_mtu: int = 0
    master_sm_sl: int = 0
    vl_cap: int = 0
    init_type: int = 0
    vl_high_limit: int = 0
    vl_arbitration_high_cap: int = 0
    vl_arbitration_low_cap: int = 0
    init_type_reply: int = 0
    mtu_cap: int = 0
    vl_stall_count: int = 0
    hoq_life: int = 0
    operational_vls: int = 0
    partition_enforcement_inbound: int = 0
    partition_enforcement_outbound: int = 0
    filter_raw_inbound: int = 0
    filter_raw_outbound: int = 0
    m_key_violations: int = 0
    p_key_violations: int = 0
    q_key_violations: int = 0
    guid_cap: int = 0
    client_reregister: int = 0
    multicast_pkey_trap_suppression_enabled: int = 0
    subnet_timeout: int = 0
    resp_time_value: int = 0
    local_phy_errors: int = 0
    overrun_errors: int = 0
    max_credit_hint: int = 0
    link_round_trip_latency: int = 0
    capability_mask2: int = 0
    link_speed_ext_active: int = 0
    link_speed_ext_supported: int = 0
    link_speed_ext_enabled: int = 0


@_record(SaAttrID.SL_TO_VL_MAPPING_TABLE_RECORD)
class SLtoVLMappingTableRecord(SaRecord):
    """SLtoVLMappingTableRecord (IBA 15.2.5)."""
    lid: U16 = 0
    input_port_num: U8 = 0
    output_port_num: U8 = 0
    sl_to_vl: Annotated[SlToVl, Reserved(32)] = ZEROS


@_record(SaAttrID.SWITCH_INFO_RECORD,
        "lid" / B(16), Padding(16), *SwitchInfo.SUBCONS)
class SwitchInfoRecord(SaRecord):
    """SwitchInfoRecord (IBA 15.2.5)."""
    lid: int = 0
    linear_fdb_cap: int = 0
    random_fdb_cap: int = 0
    multicast_fdb_cap: int = 0
    linear_fdb_top: int = 0
    default_port: int = 0
    default_multicast_primary_port: int = 0
    default_multicast_not_primary_port: int = 0
    life_time_value: int = 0
    port_state_change: int = 0
    optimized_sl_to_vl_mapping_programming: int = 0
    lids_per_port: int = 0
    partition_enforcement_cap: int = 0
    inbound_enforcement_cap: int = 0
    outbound_enforcement_cap: int = 0
    filter_raw_inbound_cap: int = 0
    filter_raw_outbound_cap: int = 0
    enhanced_port0: int = 0
    multicast_fdb_top: int = 0


@_record(SaAttrID.LINEAR_FORWARDING_TABLE_RECORD)
class LinearForwardingTableRecord(SaRecord):
    """LinearForwardingTableRecord (IBA 15.2.5): one LFT block."""
    lid: U16 = 0
    block_num: U16 = 0
    ports: Annotated[LftBlock, Reserved(32)] = ZEROS


@_record(SaAttrID.MULTICAST_FORWARDING_TABLE_RECORD)
class MulticastForwardingTableRecord(SaRecord):
    """MulticastForwardingTableRecord (IBA 15.2.5): one MFT block."""
    lid: U16 = 0
    position: U4 = 0
    block_num: Annotated[int, B(9), Reserved(3)] = 0
    port_masks: Annotated[MftBlock, Reserved(32)] = ZEROS


@_record(SaAttrID.SM_INFO_RECORD,
        "lid" / B(16), Padding(16), *SMInfo.SUBCONS)
class SMInfoRecord(SaRecord):
    """SMInfoRecord (IBA 15.2.5). ``sm_key`` is a secret: never print it."""
    lid: int = 0
    guid: int = 0
    sm_key: int = 0
    act_count: int = 0
    priority: int = 0
    sm_state: int = 0


@_record(SaAttrID.LINK_RECORD)
class LinkRecord(SaRecord):
    """LinkRecord (IBA 15.2.5): one link, from a port to its neighbour."""
    from_lid: U16 = 0
    from_port_num: U8 = 0
    to_port_num: U8 = 0
    to_lid: U16 = 0


@_record(SaAttrID.GUID_INFO_RECORD)
class GUIDInfoRecord(SaRecord):
    """GUIDInfoRecord (IBA 15.2.5): one block of 8 port GUIDs (a GUIDInfo; each GUID its own
    component)."""
    lid: U16 = 0
    block_num: U8 = 0
    guids: Annotated[GuidBlock, Reserved(8), Reserved(32), Each()] = ZEROS


@_record(SaAttrID.SERVICE_RECORD)
class ServiceRecord(SaRecord):
    """ServiceRecord (IBA 15.2.5); each ServiceData entry its own component."""
    service_id: U64 = 0
    service_gid: U128 = 0
    service_p_key: U16 = 0
    service_lease: Annotated[U32, Reserved(16)] = 0
    service_key: U128 = 0
    service_name: Annotated[str, Bytewise(NulText(64))] = ""
    service_data8: Annotated[list[int], Array(16, B(8)), Each()] = ZEROS
    service_data16: Annotated[list[int], Array(8, B(16)), Each()] = ZEROS
    service_data32: Annotated[list[int], Array(4, B(32)), Each()] = ZEROS
    service_data64: Annotated[list[int], Array(2, B(64)), Each()] = ZEROS


@_record(SaAttrID.P_KEY_TABLE_RECORD)
class P_KeyTableRecord(SaRecord):
    """P_KeyTableRecord (IBA 15.2.5): one block of 32 P_Keys."""
    lid: U16 = 0
    block_num: U16 = 0
    port_num: U8 = 0
    p_keys: Annotated[PKeyBlock, Reserved(24)] = ZEROS


@_record(SaAttrID.PATH_RECORD)
class PathRecord(SaRecord):
    """PathRecord (IBA 15.2.5). ServiceID is one field and two components (its 8 high bits, its
    56 low bits)."""
    service_id: Annotated[U64, Split(("service_id_msb", 8), ("service_id_lsb", 56))] = 0
    dgid: U128 = 0
    sgid: U128 = 0
    dlid: U16 = 0
    slid: U16 = 0
    raw_traffic: U1 = 0
    flow_label: Annotated[int, B(20), Reserved(3)] = 0
    hop_limit: U8 = 0
    tclass: U8 = 0
    reversible: U1 = 0
    num_path: Annotated[int, B(7)] = 0
    p_key: U16 = 0
    qos_class: Annotated[int, B(12)] = 0
    sl: U4 = 0
    mtu_selector: Annotated[int, B(2)] = 0
    mtu: Annotated[int, B(6)] = 0
    rate_selector: Annotated[int, B(2)] = 0
    rate: Annotated[int, B(6)] = 0
    packet_life_time_selector: Annotated[int, B(2)] = 0
    packet_life_time: Annotated[int, B(6)] = 0
    preference: Annotated[U8, ReservedAfter(48)] = 0


@_record(SaAttrID.VL_ARBITRATION_TABLE_RECORD,
        "lid" / B(16), "output_port_num" / B(8), "block_num" / B(8), Padding(32),
        Whole("vl_arbitration_table", VLArbitrationTable.SUBCONS))
class VLArbitrationTableRecord(SaRecord):
    """VLArbitrationTableRecord (IBA 15.2.5): one part of a port's VLArbitrationTable
    (the whole table one component)."""
    lid: int = 0
    output_port_num: int = 0
    block_num: int = 0
    vl_0: int = 0
    weight_0: int = 0
    vl_1: int = 0
    weight_1: int = 0
    vl_2: int = 0
    weight_2: int = 0
    vl_3: int = 0
    weight_3: int = 0
    vl_4: int = 0
    weight_4: int = 0
    vl_5: int = 0
    weight_5: int = 0
    vl_6: int = 0
    weight_6: int = 0
    vl_7: int = 0
    weight_7: int = 0
    vl_8: int = 0
    weight_8: int = 0
    vl_9: int = 0
    weight_9: int = 0
    vl_10: int = 0
    weight_10: int = 0
    vl_11: int = 0
    weight_11: int = 0
    vl_12: int = 0
    weight_12: int = 0
    vl_13: int = 0
    weight_13: int = 0
    vl_14: int = 0
    weight_14: int = 0
    vl_15: int = 0
    weight_15: int = 0
    vl_16: int = 0
    weight_16: int = 0
    vl_17: int = 0
    weight_17: int = 0
    vl_18: int = 0
    weight_18: int = 0
    vl_19: int = 0
    weight_19: int = 0
    vl_20: int = 0
    weight_20: int = 0
    vl_21: int = 0
    weight_21: int = 0
    vl_22: int = 0
    weight_22: int = 0
    vl_23: int = 0
    weight_23: int = 0
    vl_24: int = 0
    weight_24: int = 0
    vl_25: int = 0
    weight_25: int = 0
    vl_26: int = 0
    weight_26: int = 0
    vl_27: int = 0
    weight_27: int = 0
    vl_28: int = 0
    weight_28: int = 0
    vl_29: int = 0
    weight_29: int = 0
    vl_30: int = 0
    weight_30: int = 0
    vl_31: int = 0
    weight_31: int = 0


@_record(SaAttrID.MC_MEMBER_RECORD)
class MCMemberRecord(SaRecord):
    """MCMemberRecord (IBA 15.2.5): a port's membership of a multicast group."""
    mgid: U128 = 0
    port_gid: U128 = 0
    q_key: U32 = 0
    mlid: U16 = 0
    mtu_selector: Annotated[int, B(2)] = 0
    mtu: Annotated[int, B(6)] = 0
    tclass: U8 = 0
    p_key: U16 = 0
    rate_selector: Annotated[int, B(2)] = 0
    rate: Annotated[int, B(6)] = 0
    packet_life_time_selector: Annotated[int, B(2)] = 0
    packet_life_time: Annotated[int, B(6)] = 0
    sl: U4 = 0
    flow_label: Annotated[int, B(20)] = 0
    hop_limit: U8 = 0
    scope: U4 = 0
    join_state: U4 = 0
    proxy_join: Annotated[U1, ReservedAfter(23)] = 0


@_record(SaAttrID.TRACE_RECORD)
class TraceRecord(SaRecord):
    """TraceRecord (IBA 15.2.5, attribute 0x0039): one node a path crosses, as SubnAdmGetTraceTable answers
    a PathRecord (`smagent.sa.trace` says what each field holds). 46 bytes, a table's stride 48."""
    gid_prefix: U64 = 0
    id_generation: U16 = 0
    node_type: Annotated[U8, Reserved(8)] = 0
    node_id: U64 = 0
    chassis_id: U64 = 0
    entry_port_id: U64 = 0
    exit_port_id: U64 = 0
    entry_port: U8 = 0
    exit_port: U8 = 0


@_record(SaAttrID.MULTI_PATH_RECORD)
class MultiPathRecord(SaRecord):
    """MultiPathRecord (IBA 15.2.5): the fixed part, then up to 11 GIDs (SGIDCount source
    GIDs, then DGIDCount destination GIDs: what fits one MAD); the GIDs are no component."""
    raw_traffic: U1 = 0
    flow_label: Annotated[int, B(20), Reserved(3)] = 0
    hop_limit: U8 = 0
    tclass: U8 = 0
    reversible: U1 = 0
    num_path: Annotated[int, B(7)] = 0
    p_key: U16 = 0
    qos_class: Annotated[int, B(12)] = 0
    sl: U4 = 0
    mtu_selector: Annotated[int, B(2)] = 0
    mtu: Annotated[int, B(6)] = 0
    rate_selector: Annotated[int, B(2)] = 0
    rate: Annotated[int, B(6)] = 0
    packet_life_time_selector: Annotated[int, B(2)] = 0
    packet_life_time: Annotated[int, B(6)] = 0
    service_id_msb: U8 = 0
    independence_selector: Annotated[int, B(2)] = 0
    sgid_count: Annotated[U8, Reserved(6)] = 0
    dgid_count: U8 = 0
    service_id_lsb: Annotated[int, B(56)] = 0
    sdgids: Annotated[list[int], Array(MULTIPATH_GIDS, B(128)), Extra()] = ZEROS


@_record(SaAttrID.INFORM_INFO)
class InformInfo(SaRecord):
    """InformInfo (IBA 13.4.8.3): a subscription to traps (Set to the SA)."""
    gid: U128 = 0
    lid_range_begin: U16 = 0
    lid_range_end: U16 = 0
    is_generic: Annotated[U8, Reserved(16)] = 0
    subscribe: U8 = 0
    type: U16 = 0
    trap_number_or_device_id: U16 = 0
    qpn: U24 = 0
    resp_time_value: Annotated[int, B(5), Reserved(3)] = 0
    producer_type_or_vendor_id: Annotated[U24, Reserved(8)] = 0


@_record(SaAttrID.INFORM_INFO_RECORD,
        "subscriber_gid" / B(128), "enum" / B(16), Padding(48), *InformInfo.SUBCONS)
class InformInfoRecord(SaRecord):
    """InformInfoRecord (IBA 15.2.5): a subscription as the SA keeps it."""
    subscriber_gid: int = 0
    enum: int = 0
    gid: int = 0
    lid_range_begin: int = 0
    lid_range_end: int = 0
    is_generic: int = 0
    subscribe: int = 0
    type: int = 0
    trap_number_or_device_id: int = 0
    qpn: int = 0
    resp_time_value: int = 0
    producer_type_or_vendor_id: int = 0


@_record(SaAttrID.NOTICE,
        *Notice.SUBCONS, "issuer_gid" / B(128))
class SaNotice(SaRecord):
    """Notice as an SA Report carries it (IBA 13.4.8.2): the 64 bytes `mad.attributes.Notice`
    holds, then IssuerGID (80 bytes)."""
    is_generic: int = 0
    type: int = 0
    producer_type_or_vendor_id: int = 0
    trap_number_or_device_id: int = 0
    issuer_lid: int = 0
    notice_toggle: int = 0
    notice_count: int = 0
    data_details: bytes = ZEROS
    issuer_gid: int = 0


RECORDS: dict[int, type[SaRecord]] = {
    cls.ATTR_ID: cls for cls in (
        SaNotice, InformInfo, NodeRecord, PortInfoRecord, SLtoVLMappingTableRecord, SwitchInfoRecord,
        LinearForwardingTableRecord, MulticastForwardingTableRecord, SMInfoRecord, LinkRecord, GUIDInfoRecord,
        ServiceRecord, P_KeyTableRecord, PathRecord, VLArbitrationTableRecord, MCMemberRecord, TraceRecord,
        MultiPathRecord, InformInfoRecord)
}


def record_class(attr_id: int) -> type[SaRecord]:
    """The record class of an SA AttributeID."""
    try:
        return RECORDS[attr_id]
    except KeyError:
        raise UnknownAttributeError(f"attribute_id={attr_id:#06x}: no SA record layout for this attribute") from None
