"""infiniband-diags' names and text -> our snake_case attribute fields and integers.

smpquery (and sminfo) print fields by libibmad's names with their own text for enums and
flag sets; `SMPQUERY[attribute][tool name]` is (our field, converter), or None for a field
deliberately not compared. Used by the golden-vector tests and by the live `query` test
against smpquery on ibsim.
"""
from __future__ import annotations


def _flags(table: dict[str, int]):
    """'1X or 4X' -> OR of the bits (smpquery prints enabled/supported sets that way)."""
    return lambda text: _or_bits(table, text)


def _or_bits(table, text):
    out = 0
    for part in text.split(" or "):
        out |= table[part.strip()]
    return out


def _enum(table: dict):
    return lambda text: table[text]


def _ident(x):
    return x


LINK_WIDTH = {"1X": 1, "4X": 2, "8X": 4, "12X": 8, "2X": 16}
LINK_SPEED = {"2.5 Gbps": 1, "5.0 Gbps": 2, "10.0 Gbps": 4}
LINK_STATE = {"NoChange": 0, "Down": 1, "Initialize": 2, "Armed": 3, "Active": 4}
PHYS_STATE = {"NoChange": 0, "Sleep": 1, "Polling": 2, "Disabled": 3, "PortConfigurationTraining": 4,
              "LinkUp": 5, "LinkErrorRecovery": 6, "PhyTest": 7}
MTU_BYTES = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}
VL_CAP = {"VL0": 1, "VL0-1": 2, "VL0-3": 3, "VL0-7": 4, "VL0-14": 5}
LINK_SPEED_EXT = {"No Extended Speed": 0, "14.0625 Gbps": 1, "25.78125 Gbps": 2, "53.125 Gbps": 4}


def _ext_speed(x):
    return x if isinstance(x, int) else _or_bits(LINK_SPEED_EXT, x)


NODE_TYPE = {"Channel Adapter": 1, "Switch": 2, "Router": 3}
SM_STATE = {"SMINFO_NOTACT": 0, "SMINFO_DISCOVERING": 1, "SMINFO_STANDBY": 2, "SMINFO_MASTER": 3}
# PortInfo.CapabilityMask bits (IBA 14.2.5.6, libibmad's names as smpquery prints them)
CAP_MASK_BITS = {
    "IsSM": 1, "IsNoticeSupported": 2, "IsTrapSupported": 3, "IsOptionalIPDSupported": 4,
    "IsAutomaticMigrationSupported": 5, "IsSLMappingSupported": 6, "IsMKeyNVRAM": 7,
    "IsPKeyNVRAM": 8, "IsLedInfoSupported": 9, "IsSMdisabled": 10,
    "IsSystemImageGUIDsupported": 11, "IsPkeySwitchExternalPortTrapSupported": 12,
    "IsExtendedSpeedsSupported": 14, "IsCapabilityMask2Supported": 15,
    "IsCommunicatonManagementSupported": 16, "IsSNMPTunnelingSupported": 17,
    "IsReinitSupported": 18, "IsDeviceManagementSupported": 19, "IsVendorClassSupported": 20,
    "IsDRNoticeSupported": 21, "IsCapabilityMaskNoticeSupported": 22,
    "IsBootManagementSupported": 23, "IsLinkRoundTripLatencySupported": 24,
    "IsClientRegistrationSupported": 25, "IsOtherLocalChangesNoticeSupported": 26,
    "IsLinkSpeedWidthPairsTableSupported": 27,
}
CAP_MASK2_BITS = {
    "IsSetNodeDescriptionSupported": 0, "IsPortInfoExtendedSupported": 1,
    "IsVirtualizationSupported": 2, "IsSwitchPortStateTableSupported": 3,
    "IsLinkWidth2xSupported": 4, "IsLinkSpeedHDRSupported": 5,
}

# tool field name -> (our attribute field, converter); None = deliberately not compared
SMPQUERY = {
    "NodeInfo": {
        "BaseVers": ("base_version", _ident), "ClassVers": ("class_version", _ident),
        "NodeType": ("node_type", _enum(NODE_TYPE)), "NumPorts": ("num_ports", _ident),
        "SystemGuid": ("system_image_guid", _ident), "Guid": ("node_guid", _ident),
        "PortGuid": ("port_guid", _ident), "PartCap": ("partition_cap", _ident),
        "DevId": ("device_id", _ident), "Revision": ("revision", _ident),
        "LocalPort": ("local_port_num", _ident), "VendorId": ("vendor_id", _ident),
    },
    "NodeDescription": {"Node Description": ("node_string", _ident)},
    "PortInfo": {
        "Mkey": None,  # smpquery prints "<not displayed>"
        "GidPrefix": ("gid_prefix", _ident), "Lid": ("lid", _ident), "SMLid": ("master_sm_lid", _ident),
        "CapMask": ("capability_mask", _ident), "DiagCode": ("diag_code", _ident),
        "MkeyLeasePeriod": ("m_key_lease_period", _ident), "LocalPort": ("local_port_num", _ident),
        "LinkWidthEnabled": ("link_width_enabled", _flags(LINK_WIDTH)),
        "LinkWidthSupported": ("link_width_supported", _flags(LINK_WIDTH)),
        "LinkWidthActive": ("link_width_active", _flags(LINK_WIDTH)),
        "LinkSpeedSupported": ("link_speed_supported", _flags(LINK_SPEED)),
        "LinkState": ("port_state", _enum(LINK_STATE)),
        "PhysLinkState": ("port_physical_state", _enum(PHYS_STATE)),
        "LinkDownDefState": ("link_down_default_state", _enum(PHYS_STATE)),
        "ProtectBits": ("m_key_protect_bits", _ident), "LMC": ("lmc", _ident),
        "LinkSpeedActive": ("link_speed_active", _flags(LINK_SPEED)),
        "LinkSpeedEnabled": ("link_speed_enabled", _flags(LINK_SPEED)),
        "NeighborMTU": ("neighbor_mtu", _enum(MTU_BYTES)), "SMSL": ("master_sm_sl", _ident),
        "VLCap": ("vl_cap", _enum(VL_CAP)), "InitType": ("init_type", _ident),
        "VLHighLimit": ("vl_high_limit", _ident), "VLArbHighCap": ("vl_arbitration_high_cap", _ident),
        "VLArbLowCap": ("vl_arbitration_low_cap", _ident), "InitReply": ("init_type_reply", _ident),
        "MtuCap": ("mtu_cap", _enum(MTU_BYTES)), "VLStallCount": ("vl_stall_count", _ident),
        "HoqLife": ("hoq_life", _ident), "OperVLs": ("operational_vls", _enum(VL_CAP)),
        "PartEnforceInb": ("partition_enforcement_inbound", _ident),
        "PartEnforceOutb": ("partition_enforcement_outbound", _ident),
        "FilterRawInb": ("filter_raw_inbound", _ident), "FilterRawOutb": ("filter_raw_outbound", _ident),
        "MkeyViolations": ("m_key_violations", _ident), "PkeyViolations": ("p_key_violations", _ident),
        "QkeyViolations": ("q_key_violations", _ident), "GuidCap": ("guid_cap", _ident),
        "ClientReregister": ("client_reregister", _ident),
        "McastPkeyTrapSuppressionEnabled": ("multicast_pkey_trap_suppression_enabled", _ident),
        "SubnetTimeout": ("subnet_timeout", _ident), "RespTimeVal": ("resp_time_value", _ident),
        "LocalPhysErr": ("local_phy_errors", _ident), "OverrunErr": ("overrun_errors", _ident),
        "MaxCreditHint": ("max_credit_hint", _ident), "RoundTrip": ("link_round_trip_latency", _ident),
        "CapabilityMask2": ("capability_mask2", _ident),
        "LinkSpeedExtActive": ("link_speed_ext_active", _ext_speed),  # text ("No Extended Speed") or 0
        "LinkSpeedExtSupported": ("link_speed_ext_supported", _ext_speed),
        "LinkSpeedExtEnabled": ("link_speed_ext_enabled", _ext_speed),
        "CapMask_flags": None,  # checked bit by bit below
        "CapabilityMask2_flags": None,
    },
    "SwitchInfo": {
        "LinearFdbCap": ("linear_fdb_cap", _ident), "RandomFdbCap": ("random_fdb_cap", _ident),
        "McastFdbCap": ("multicast_fdb_cap", _ident), "LinearFdbTop": ("linear_fdb_top", _ident),
        "DefPort": ("default_port", _ident), "DefMcastPrimPort": ("default_multicast_primary_port", _ident),
        "DefMcastNotPrimPort": ("default_multicast_not_primary_port", _ident),
        "LifeTime": ("life_time_value", _ident), "StateChange": ("port_state_change", _ident),
        "OptSLtoVLMapping": ("optimized_sl_to_vl_mapping_programming", _ident),
        "LidsPerPort": ("lids_per_port", _ident), "PartEnforceCap": ("partition_enforcement_cap", _ident),
        "InboundPartEnf": ("inbound_enforcement_cap", _ident),
        "OutboundPartEnf": ("outbound_enforcement_cap", _ident),
        "FilterRawInbound": ("filter_raw_inbound_cap", _ident),
        "FilterRawOutbound": ("filter_raw_outbound_cap", _ident),
        "EnhancedPort0": ("enhanced_port0", _ident), "MulticastFDBTop": ("multicast_fdb_top", _ident),
    },
    "SMInfo": {
        "GUID": ("guid", _ident), "ActCount": ("act_count", _ident), "Priority": ("priority", _ident),
        "SMState": ("sm_state", _ident), "SMState_name": ("sm_state", _enum(SM_STATE)),
    },
    "LinearForwardingTable": {"ports": ("ports", _ident)},
    "MulticastForwardingTable": {"masks": ("port_masks", _ident)},
}
