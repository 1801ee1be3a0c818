"""The SA records (IBA 15.2.5), each one layout (`mad.sa` holds the SA MAD, the component
machinery and the tables), each field declared once, its wire type in its annotation (a
table's the attribute's: `mad.attributes.SlToVl`, ...). A record embedding an SMP attribute
(or InformInfo) has its field group as a base (`mad.layout.shared_fields`): listed after
`SaRecord` its fields follow the record's own, listed before they come first (SaNotice)."""
from __future__ import annotations

from typing import Annotated

from construct import Array, BitsInteger, Bytewise

from mad.attributes import (
    GuidBlock, LftBlock, MftBlock, NodeDescriptionFields, NodeInfoFields, NoticeFields, PKeyBlock, PortInfoFields,
    SlToVl, SMInfoFields, SwitchInfoFields, VLArbitrationTableFields,
)
from mad.errors import UnknownAttributeError
from mad.layout import U1, U4, U8, U16, U24, U32, U64, U128, ZEROS, NulText, Reserved, ReservedAfter, shared_fields
from mad.sa import MULTIPATH_GIDS, Each, Extra, SaAttrID, SaRecord, Split, _record

B = BitsInteger


@_record(SaAttrID.NODE_RECORD)
class NodeRecord(SaRecord, NodeInfoFields, NodeDescriptionFields):
    """NodeRecord (IBA 15.2.5): a node's NodeInfo and NodeDescription, by LID."""
    lid: Annotated[U16, ReservedAfter(16)] = 0


@_record(SaAttrID.PORT_INFO_RECORD)
class PortInfoRecord(SaRecord, PortInfoFields):
    """PortInfoRecord (IBA 15.2.5): a port's PortInfo."""
    endport_lid: U16 = 0
    port_num: U8 = 0
    options: U8 = 0


@_record(SaAttrID.SL_TO_VL_MAPPING_TABLE_RECORD)
class SLtoVLMappingTableRecord(SaRecord):
    """SLtoVLMappingTableRecord (IBA 15.2.5)."""
    lid: U16 = 0
    input_port_num: U8 = 0
    output_port_num: U8 = 0
    sl_to_vl: Annotated[SlToVl, Reserved(32)] = ZEROS


@_record(SaAttrID.SWITCH_INFO_RECORD)
class SwitchInfoRecord(SaRecord, SwitchInfoFields):
    """SwitchInfoRecord (IBA 15.2.5)."""
    lid: Annotated[U16, ReservedAfter(16)] = 0


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


@_record(SaAttrID.SM_INFO_RECORD)
class SMInfoRecord(SaRecord, SMInfoFields):
    """SMInfoRecord (IBA 15.2.5). ``sm_key`` is a secret: never print it."""
    lid: Annotated[U16, ReservedAfter(16)] = 0


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


@_record(SaAttrID.VL_ARBITRATION_TABLE_RECORD, whole={VLArbitrationTableFields: "vl_arbitration_table"})
class VLArbitrationTableRecord(SaRecord, VLArbitrationTableFields):
    """VLArbitrationTableRecord (IBA 15.2.5): one part of a port's VLArbitrationTable
    (the whole table one component)."""
    lid: U16 = 0
    output_port_num: U8 = 0
    block_num: Annotated[U8, ReservedAfter(32)] = 0


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


@shared_fields
class InformInfoFields:
    """InformInfo's fields (InformInfoRecord embeds them)."""
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


@_record(SaAttrID.INFORM_INFO)
class InformInfo(InformInfoFields, SaRecord):
    """InformInfo (IBA 13.4.8.3): a subscription to traps (Set to the SA)."""


@_record(SaAttrID.INFORM_INFO_RECORD)
class InformInfoRecord(SaRecord, InformInfoFields):
    """InformInfoRecord (IBA 15.2.5): a subscription as the SA keeps it."""
    subscriber_gid: U128 = 0
    enum: Annotated[U16, ReservedAfter(48)] = 0


@_record(SaAttrID.NOTICE)
class SaNotice(NoticeFields, SaRecord):
    """Notice as an SA Report carries it (IBA 13.4.8.2): the 64 bytes `mad.attributes.Notice`
    holds, then IssuerGID (80 bytes)."""
    issuer_gid: U128 = 0


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
