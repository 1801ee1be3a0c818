"""The SA records (IBA 15.2.5), each one layout (`mad.sa` holds the SA MAD, the component
machinery and the tables). A record embedding an SMP attribute takes its components from
`mad.attributes` (``SUBCONS``); the fields below only name them for type checkers: the
layout checks names and kinds when the module loads."""
from __future__ import annotations

from construct import Array, BitsInteger, Bytewise, Padding

from mad.attributes import (
    GUIDInfo, LinearForwardingTable, MulticastForwardingTable, NodeDescription, NodeInfo, Notice, P_KeyTable, PortInfo,
    SLtoVLMappingTable, SMInfo, SwitchInfo, VLArbitrationTable,
)
from mad.errors import UnknownAttributeError
from mad.layout import ZEROS, NulText
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


@_record(SaAttrID.SL_TO_VL_MAPPING_TABLE_RECORD,
        "lid" / B(16), "input_port_num" / B(8), "output_port_num" / B(8), Padding(32),
        Whole("sl_to_vl", SLtoVLMappingTable.SUBCONS))
class SLtoVLMappingTableRecord(SaRecord):
    """SLtoVLMappingTableRecord (IBA 15.2.5)."""
    lid: int = 0
    input_port_num: int = 0
    output_port_num: int = 0
    sl_to_vl: list[int] = ZEROS


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


@_record(SaAttrID.LINEAR_FORWARDING_TABLE_RECORD,
        "lid" / B(16), "block_num" / B(16), Padding(32), Whole("ports", LinearForwardingTable.SUBCONS))
class LinearForwardingTableRecord(SaRecord):
    """LinearForwardingTableRecord (IBA 15.2.5): one LFT block."""
    lid: int = 0
    block_num: int = 0
    ports: list[int] = ZEROS


@_record(SaAttrID.MULTICAST_FORWARDING_TABLE_RECORD,
        "lid" / B(16), "position" / B(4), Padding(3), "block_num" / B(9), Padding(32),
        Whole("port_masks", MulticastForwardingTable.SUBCONS))
class MulticastForwardingTableRecord(SaRecord):
    """MulticastForwardingTableRecord (IBA 15.2.5): one MFT block."""
    lid: int = 0
    position: int = 0
    block_num: int = 0
    port_masks: list[int] = ZEROS


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


@_record(SaAttrID.LINK_RECORD,
        "from_lid" / B(16), "from_port_num" / B(8), "to_port_num" / B(8), "to_lid" / B(16))
class LinkRecord(SaRecord):
    """LinkRecord (IBA 15.2.5): one link, from a port to its neighbour."""
    from_lid: int = 0
    from_port_num: int = 0
    to_port_num: int = 0
    to_lid: int = 0


@_record(SaAttrID.GUID_INFO_RECORD,
        "lid" / B(16), "block_num" / B(8), Padding(8), Padding(32), Each(*GUIDInfo.SUBCONS))
class GUIDInfoRecord(SaRecord):
    """GUIDInfoRecord (IBA 15.2.5): one block of 8 port GUIDs (a GUIDInfo; each GUID its own
    component)."""
    lid: int = 0
    block_num: int = 0
    guids: list[int] = ZEROS


@_record(SaAttrID.SERVICE_RECORD,
        "service_id" / B(64), "service_gid" / B(128), "service_p_key" / B(16), Padding(16),
        "service_lease" / B(32), "service_key" / B(128), "service_name" / Bytewise(NulText(64)),
        Each("service_data8" / Array(16, B(8))), Each("service_data16" / Array(8, B(16))),
        Each("service_data32" / Array(4, B(32))), Each("service_data64" / Array(2, B(64))))
class ServiceRecord(SaRecord):
    """ServiceRecord (IBA 15.2.5); each ServiceData entry its own component."""
    service_id: int = 0
    service_gid: int = 0
    service_p_key: int = 0
    service_lease: int = 0
    service_key: int = 0
    service_name: str = ""
    service_data8: list[int] = ZEROS
    service_data16: list[int] = ZEROS
    service_data32: list[int] = ZEROS
    service_data64: list[int] = ZEROS


@_record(SaAttrID.P_KEY_TABLE_RECORD,
        "lid" / B(16), "block_num" / B(16), "port_num" / B(8), Padding(24),
        Whole("p_keys", P_KeyTable.SUBCONS))
class P_KeyTableRecord(SaRecord):
    """P_KeyTableRecord (IBA 15.2.5): one block of 32 P_Keys."""
    lid: int = 0
    block_num: int = 0
    port_num: int = 0
    p_keys: list[int] = ZEROS


@_record(SaAttrID.PATH_RECORD,
        Split("service_id" / B(64), ("service_id_msb", 8), ("service_id_lsb", 56)), "dgid" / B(128),
        "sgid" / B(128), "dlid" / B(16), "slid" / B(16), "raw_traffic" / B(1), Padding(3),
        "flow_label" / B(20), "hop_limit" / B(8), "tclass" / B(8), "reversible" / B(1), "num_path" / B(7),
        "p_key" / B(16), "qos_class" / B(12), "sl" / B(4), "mtu_selector" / B(2), "mtu" / B(6),
        "rate_selector" / B(2), "rate" / B(6), "packet_life_time_selector" / B(2), "packet_life_time" / B(6),
        "preference" / B(8), Padding(48))
class PathRecord(SaRecord):
    """PathRecord (IBA 15.2.5). ServiceID is one field and two components (its 8 high bits, its
    56 low bits)."""
    service_id: int = 0
    dgid: int = 0
    sgid: int = 0
    dlid: int = 0
    slid: int = 0
    raw_traffic: int = 0
    flow_label: int = 0
    hop_limit: int = 0
    tclass: int = 0
    reversible: int = 0
    num_path: int = 0
    p_key: int = 0
    qos_class: int = 0
    sl: int = 0
    mtu_selector: int = 0
    mtu: int = 0
    rate_selector: int = 0
    rate: int = 0
    packet_life_time_selector: int = 0
    packet_life_time: int = 0
    preference: int = 0


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


@_record(SaAttrID.MC_MEMBER_RECORD,
        "mgid" / B(128), "port_gid" / B(128), "q_key" / B(32), "mlid" / B(16), "mtu_selector" / B(2),
        "mtu" / B(6), "tclass" / B(8), "p_key" / B(16), "rate_selector" / B(2), "rate" / B(6),
        "packet_life_time_selector" / B(2), "packet_life_time" / B(6), "sl" / B(4), "flow_label" / B(20),
        "hop_limit" / B(8), "scope" / B(4), "join_state" / B(4), "proxy_join" / B(1), Padding(23))
class MCMemberRecord(SaRecord):
    """MCMemberRecord (IBA 15.2.5): a port's membership of a multicast group."""
    mgid: int = 0
    port_gid: int = 0
    q_key: int = 0
    mlid: int = 0
    mtu_selector: int = 0
    mtu: int = 0
    tclass: int = 0
    p_key: int = 0
    rate_selector: int = 0
    rate: int = 0
    packet_life_time_selector: int = 0
    packet_life_time: int = 0
    sl: int = 0
    flow_label: int = 0
    hop_limit: int = 0
    scope: int = 0
    join_state: int = 0
    proxy_join: int = 0


@_record(SaAttrID.TRACE_RECORD,
        "gid_prefix" / B(64), "id_generation" / B(16), Padding(8), "node_type" / B(8), "node_id" / B(64),
        "chassis_id" / B(64), "entry_port_id" / B(64), "exit_port_id" / B(64), "entry_port" / B(8),
        "exit_port" / B(8))
class TraceRecord(SaRecord):
    """TraceRecord (IBA 15.2.5, attribute 0x0039): one node a path crosses, as SubnAdmGetTraceTable answers
    a PathRecord (`smagent.sa.trace` says what each field holds). 46 bytes, a table's stride 48."""
    gid_prefix: int = 0
    id_generation: int = 0
    node_type: int = 0
    node_id: int = 0
    chassis_id: int = 0
    entry_port_id: int = 0
    exit_port_id: int = 0
    entry_port: int = 0
    exit_port: int = 0


@_record(SaAttrID.MULTI_PATH_RECORD,
        "raw_traffic" / B(1), Padding(3), "flow_label" / B(20), "hop_limit" / B(8), "tclass" / B(8),
        "reversible" / B(1), "num_path" / B(7), "p_key" / B(16), "qos_class" / B(12), "sl" / B(4),
        "mtu_selector" / B(2), "mtu" / B(6), "rate_selector" / B(2), "rate" / B(6),
        "packet_life_time_selector" / B(2), "packet_life_time" / B(6), "service_id_msb" / B(8),
        "independence_selector" / B(2), Padding(6), "sgid_count" / B(8), "dgid_count" / B(8),
        "service_id_lsb" / B(56), Extra("sdgids" / Array(MULTIPATH_GIDS, B(128))))
class MultiPathRecord(SaRecord):
    """MultiPathRecord (IBA 15.2.5): the fixed part, then up to 11 GIDs (SGIDCount source
    GIDs, then DGIDCount destination GIDs: what fits one MAD); the GIDs are no component."""
    raw_traffic: int = 0
    flow_label: int = 0
    hop_limit: int = 0
    tclass: int = 0
    reversible: int = 0
    num_path: int = 0
    p_key: int = 0
    qos_class: int = 0
    sl: int = 0
    mtu_selector: int = 0
    mtu: int = 0
    rate_selector: int = 0
    rate: int = 0
    packet_life_time_selector: int = 0
    packet_life_time: int = 0
    service_id_msb: int = 0
    independence_selector: int = 0
    sgid_count: int = 0
    dgid_count: int = 0
    service_id_lsb: int = 0
    sdgids: list[int] = ZEROS


@_record(SaAttrID.INFORM_INFO,
        "gid" / B(128), "lid_range_begin" / B(16), "lid_range_end" / B(16), Padding(16), "is_generic" / B(8),
        "subscribe" / B(8), "type" / B(16), "trap_number_or_device_id" / B(16), "qpn" / B(24), Padding(3),
        "resp_time_value" / B(5), Padding(8), "producer_type_or_vendor_id" / B(24))
class InformInfo(SaRecord):
    """InformInfo (IBA 13.4.8.3): a subscription to traps (Set to the SA)."""
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
