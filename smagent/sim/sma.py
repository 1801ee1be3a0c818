"""The Subnet Management Agent of a simulated node: SubnGet/SubnSet of each attribute.

`process` takes a decoded request SMP that reached `node` through `in_port` and
returns (status word, 64 response data bytes), or raises Dropped when the SMA sends no
response at all (M_Key violation, a response or TrapRepress arriving). Status words
(IBA 13.4.7, Table 110): 0x0004 bad class version, 0x0008 method not supported,
0x000C method/attribute combination not supported, 0x001C invalid attribute value or
modifier. Error responses carry an all-zero data area, as ibsim's do.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from mad.attributes import (
    AttrID, GUIDInfo, LinearForwardingTable, MulticastForwardingTable, NodeDescription, P_KeyTable, PortInfo,
    PortInfoExtSpeeds, RandomForwardingTable, SLtoVLMappingTable, SMInfo,
    SMState, SwitchInfo, SMP_DATA_SIZE, vlarb_block, vlarb_entries,
)
from mad.errors import MadError
from mad.forwarding import (
    GUID_BLOCK_SIZE, LFT_BLOCKS, LFT_BLOCK_SIZE, LFT_NO_PORT, MFT_BLOCK_SIZE, MFT_PORTS_PER_POSITION, PKEY_BLOCK_SIZE,
    PORTINFO_EXT_SPEEDS, RFT_BLOCKS, RFT_BLOCK_SIZE, SL2VL_ALL_INPUTS, SL2VL_ALL_OUTPUTS, UNICAST_LID_MAX,
    VLARB_BLOCK_SIZE, mft_from_modifier, rft_decode, sl2vl_optimized, vlarb_from_modifier,
)
from mad.header import Method
from smagent.sim import mkey, nodes as model
from smagent.sim.nodes import ACTIVE, ARMED, DOWN, INIT, PHYS_DISABLED, PHYS_POLLING, Dropped

OK = 0x0000
BAD_VERSION = 0x0004
METHOD_NOT_SUPPORTED = 0x0008
ATTR_NOT_SUPPORTED = 0x000C
INVALID_VALUE = 0x001C

ZERO_DATA = bytes(SMP_DATA_SIZE)


class SmaStatus(Exception):
    """Abort processing with a non-zero status word."""

    def __init__(self, status: int, why: str = ""):
        super().__init__(why)
        self.status = status


def _invalid(why: str):
    raise SmaStatus(INVALID_VALUE, why)


def process(sim, node, in_port: int, smp, slid: int | None = None) -> tuple[int, bytes]:
    """Handle one request at `node`'s SMA; see the module docstring. ``slid``: the LRH
    SLID of a LID-routed request (who sent it, for trap 256)."""
    method = smp.method
    if method & 0x80:
        raise Dropped("a response method arrived at an SMA", (node.name, in_port))
    if method == Method.TRAP_REPRESS:
        # a TrapRepress is M_Key-checked like a Set (a wrong key counts a violation and
        # starts the lease), then consumed: this SMA never has a trap outstanding
        mkey.check(node, in_port, method, smp.m_key, sim.clock())
        raise Dropped("TrapRepress consumed: the SMA has no outstanding trap", (node.name, in_port))
    if smp.class_version != 1:
        return BAD_VERSION, ZERO_DATA
    if method != Method.GET and method != Method.SET:
        return METHOD_NOT_SUPPORTED, ZERO_DATA
    verdict = mkey.check(node, in_port, method, smp.m_key, sim.clock())
    if verdict == mkey.REFUSE:
        sim.bad_mkey_trap(node, in_port, smp, slid)  # IBA 14.2.4.1: the SMA reports the violation
        raise Dropped(f"M_Key mismatch ({method_label(method)} refused at protection level "
                      f"{node.pi[node.lid_port(in_port)].m_key_protect_bits})", (node.name, in_port))
    handler = _HANDLERS.get(smp.attribute_id)
    if handler is None:
        return ATTR_NOT_SUPPORTED, ZERO_DATA
    get, set_, switch_only = handler
    if switch_only and not node.is_switch:
        return ATTR_NOT_SUPPORTED, ZERO_DATA
    fn = get if method == Method.GET else set_
    if fn is None:
        return ATTR_NOT_SUPPORTED, ZERO_DATA
    try:
        return OK, fn(node, in_port, smp, verdict == mkey.ALLOW)
    except SmaStatus as e:
        return e.status, ZERO_DATA


def method_label(method: int) -> str:
    labels: dict[int, str] = {Method.GET: "Get", Method.SET: "Set"}
    return labels.get(method, f"method {method:#04x}")


def _attribute(smp):
    """The request's data decoded by its attribute (PortInfo: honouring modifier bit 31)."""
    try:
        return smp.attribute()
    except MadError as e:  # pragma: no cover - every layout decodes any 64 bytes
        _invalid(str(e))


def _zero_modifier(smp) -> None:
    if smp.attribute_modifier:
        _invalid("this attribute takes AttributeModifier 0")


# -- NodeInfo, NodeDescription --------------------------------------------------------
def _get_nodeinfo(node, in_port, smp, reveal):
    _zero_modifier(smp)
    return node.nodeinfo(in_port)


def _get_nodedesc(node, in_port, smp, reveal):
    _zero_modifier(smp)
    return NodeDescription.LAYOUT.encode(NodeDescription(node_string=node.description))


# -- PortInfo ---------------------------------------------------------------------------
def _portinfo_port(node, in_port, smp) -> int:
    mod = smp.attribute_modifier
    if mod & ~(PORTINFO_EXT_SPEEDS | 0xFF):
        _invalid("PortInfo AttributeModifier bits 30:8 are reserved")
    port = mod & 0xFF
    if not node.is_switch and port == 0:
        port = in_port  # a CA answers port 0 with the port the SMP came in on (as ibsim does)
    if not node.port_exists(port):
        _invalid(f"port {port} does not exist")
    return port


_BASE_NAMES = PortInfo.LAYOUT.names


def _encode_portinfo(node, port, in_port, ext: bool, reveal: bool) -> bytes:
    pi = node.pi[port]
    pi.port_state = node.state[port]
    pi.port_physical_state = node.phys[port]
    pi.local_port_num = in_port  # IBA: the port this SMP came in on
    if not reveal:
        pi = dataclasses.replace(pi, m_key=0)
    if ext:
        return PortInfoExtSpeeds.LAYOUT.encode(pi)
    return PortInfo.LAYOUT.encode(PortInfo(**{n: getattr(pi, n) for n in _BASE_NAMES}))


def _get_portinfo(node, in_port, smp, reveal):
    port = _portinfo_port(node, in_port, smp)
    return _encode_portinfo(node, port, in_port, bool(smp.attribute_modifier & PORTINFO_EXT_SPEEDS), reveal)


# Fields an SM may write on every port, and those only port 0 / CA ports carry. Not
# ClientReregister: a one-shot event to the port's host stack, accepted and never kept (it
# reads back 0, as on a real port; `NODE_CAPS['client_reregister']` says if it is advertised).
_PORT_RW = ("vl_high_limit", "hoq_life", "vl_stall_count", "partition_enforcement_inbound",
            "partition_enforcement_outbound", "filter_raw_inbound", "filter_raw_outbound",
            "m_key_violations", "p_key_violations", "q_key_violations")
_ENDPORT_RW = ("m_key", "gid_prefix", "lid", "master_sm_lid", "m_key_lease_period",
               "m_key_protect_bits", "master_sm_sl", "subnet_timeout",
               "multicast_pkey_trap_suppression_enabled")


def _set_portinfo(node, in_port, smp, reveal):
    port = _portinfo_port(node, in_port, smp)
    new = _attribute(smp)
    cur = node.pi[port]
    endport = not node.is_switch or port == 0
    base_sp0 = node.is_switch and port == 0 and not node.si.enhanced_port0
    updates = {name: getattr(new, name) for name in _PORT_RW}

    # Logical state: ARMED only from INIT, ACTIVE only from ARMED (re-setting the current
    # state is a no-op), DOWN from any, NoChange keeps; INIT is not a value an SM sets.
    want, now = new.port_state, node.state[port]
    if want == DOWN:
        if base_sp0:
            _invalid("base switch port 0 has no link to take down")
    elif want == ARMED:
        if now not in (INIT, ARMED):
            _invalid(f"PortState ARMED is reachable from INIT only (port {port} is {model.PortState(now).name})")
    elif want == ACTIVE:
        if now not in (ARMED, ACTIVE):
            _invalid(f"PortState ACTIVE is reachable from ARMED only (port {port} is {model.PortState(now).name})")
    elif want != 0:
        _invalid(f"PortState {want} cannot be set")

    phys = new.port_physical_state
    if phys not in (0, PHYS_POLLING, PHYS_DISABLED) or (phys and base_sp0):
        _invalid(f"PortPhysicalState {phys} cannot be set here")
    if new.link_down_default_state not in (0, 1, 2):
        _invalid(f"LinkDownDefaultState {new.link_down_default_state} is reserved")
    if new.link_down_default_state:
        updates["link_down_default_state"] = new.link_down_default_state

    for field, supported, everything in (("link_width_enabled", cur.link_width_supported, 0xFF),
                                         ("link_speed_enabled", cur.link_speed_supported, 0xF)):
        v = getattr(new, field)
        if v == everything:
            updates[field] = supported
        elif v:
            if v & ~supported:
                _invalid(f"{field} {v:#x} enables more than supported ({supported:#x})")
            updates[field] = v
    if not 1 <= new.neighbor_mtu <= cur.mtu_cap:
        _invalid(f"NeighborMTU {new.neighbor_mtu} outside 1..MTUCap {cur.mtu_cap}")
    updates["neighbor_mtu"] = new.neighbor_mtu
    if new.operational_vls:  # 0 = no change
        if new.operational_vls > cur.vl_cap:
            _invalid(f"OperationalVLs {new.operational_vls} above VLCap {cur.vl_cap}")
        updates["operational_vls"] = new.operational_vls
    if new.link_speed_ext_enabled:
        updates["link_speed_ext_enabled"] = new.link_speed_ext_enabled

    if endport:
        for name in _ENDPORT_RW:
            updates[name] = getattr(new, name)
        if new.lid > UNICAST_LID_MAX:
            _invalid(f"LID {new.lid:#x} is not a unicast LID")
        if new.master_sm_lid > UNICAST_LID_MAX:
            _invalid(f"MasterSMLID {new.master_sm_lid:#x} is not a unicast LID")
        if not base_sp0:  # base switch port 0 has a LID but no LMC
            updates["lmc"] = new.lmc

    # All checks passed: apply atomically.
    for name, v in updates.items():
        setattr(cur, name, v)
    if want in (ARMED, ACTIVE):
        node.state[port] = want
    if phys == PHYS_DISABLED:
        model.link_down(node, port, PHYS_DISABLED)
    elif phys == PHYS_POLLING:
        model.link_up(node, port)
    if want == DOWN and node.state[port] != DOWN:
        # The link goes down and retrains: the response reports DOWN, then both ends are in INIT.
        model.link_down(node, port)
        data = _encode_portinfo(node, port, in_port, bool(smp.attribute_modifier & PORTINFO_EXT_SPEEDS), reveal)
        model.link_up(node, port)
        return data
    return _encode_portinfo(node, port, in_port, bool(smp.attribute_modifier & PORTINFO_EXT_SPEEDS), reveal)


# -- P_KeyTable, SLtoVLMappingTable -----------------------------------------------------------
def _pkey_table(node, in_port, smp) -> tuple[list[int], int]:
    mod = smp.attribute_modifier
    if mod >> 24:
        _invalid("P_KeyTable AttributeModifier bits 31:24 are reserved")
    block = mod & 0xFFFF
    if node.is_switch:
        port = (mod >> 16) & 0xFF
        if port > node.num_ports:
            _invalid(f"port {port} does not exist")
    else:
        port = in_port  # CAs: bits 23:16 are reserved; the table is the receiving port's
    table = node.pkeys[port]
    if block * PKEY_BLOCK_SIZE >= len(table):
        _invalid(f"P_Key block {block} beyond the {len(table)}-entry table")
    return table, block * PKEY_BLOCK_SIZE


def _get_pkeys(node, in_port, smp, reveal):
    table, first = _pkey_table(node, in_port, smp)
    keys = table[first:first + PKEY_BLOCK_SIZE]
    return P_KeyTable.LAYOUT.encode(P_KeyTable(p_keys=keys + [0] * (PKEY_BLOCK_SIZE - len(keys))))


def _set_pkeys(node, in_port, smp, reveal):
    table, first = _pkey_table(node, in_port, smp)
    keys = _attribute(smp).p_keys
    n = min(PKEY_BLOCK_SIZE, len(table) - first)
    table[first:first + n] = keys[:n]
    return _get_pkeys(node, in_port, smp, reveal)


# -- GUIDInfo ----------------------------------------------------------------------------
def _guid_table(node, in_port, smp) -> tuple[list[int], int]:
    """The GUID table of the port the SMP came in on (a switch's: port 0's, the only one
    with GUIDs) and the first index of the block the modifier names."""
    block = smp.attribute_modifier
    table = node.guids[node.lid_port(in_port)]
    if block * GUID_BLOCK_SIZE >= len(table):
        _invalid(f"GUIDInfo block {block} beyond the {len(table)}-entry table (GUIDCap)")
    return table, block * GUID_BLOCK_SIZE


def _get_guids(node, in_port, smp, reveal):
    table, first = _guid_table(node, in_port, smp)
    guids = table[first:first + GUID_BLOCK_SIZE]
    return GUIDInfo.LAYOUT.encode(GUIDInfo(guids=guids + [0] * (GUID_BLOCK_SIZE - len(guids))))


def _set_guids(node, in_port, smp, reveal):
    """Aliases at every index but 0 (the port GUID, read only: kept, as the answer shows);
    entries past GUIDCap are ignored."""
    if not node.caps["guid_info_set"]:  # ibsim 0.10 answers the Get only
        raise SmaStatus(METHOD_NOT_SUPPORTED, "GUIDInfo Set not supported")
    table, first = _guid_table(node, in_port, smp)
    guids = _attribute(smp).guids
    for i in range(max(first, 1), min(first + GUID_BLOCK_SIZE, len(table))):
        table[i] = guids[i - first]
    return _get_guids(node, in_port, smp, reveal)


def _sl2vl_key(node, in_port, smp) -> tuple[int, int]:
    mod = smp.attribute_modifier
    if node.is_switch:
        if mod >> 16:
            _invalid("SLtoVLMappingTable AttributeModifier bits 31:16 are reserved")
        inp, outp = (mod >> 8) & 0xFF, mod & 0xFF
        if inp > node.num_ports or outp > node.num_ports:
            _invalid(f"port pair in {inp} / out {outp} does not exist")
        if outp == 0 and not node.si.enhanced_port0:
            _invalid("base switch port 0 has no VLs: no SLtoVLMappingTable with it as output port")
        return inp, outp
    if mod:
        _invalid("a channel adapter's SLtoVLMappingTable takes AttributeModifier 0")
    return 0, in_port


def _get_sl2vl(node, in_port, smp, reveal):
    table = node.sl2vl.get(_sl2vl_key(node, in_port, smp), node.sl2vl_default)
    return SLtoVLMappingTable.LAYOUT.encode(SLtoVLMappingTable(sl_to_vl=list(table)))


def _set_sl2vl(node, in_port, smp, reveal):
    table = list(_attribute(smp).sl_to_vl)
    mod = smp.attribute_modifier
    if node.is_switch and mod >> 16 and not mod >> 18 and sl2vl_optimized(node.si):
        # OptimizedSLtoVLMappingProgramming: bit 17 every input port, bit 16 every output port
        ins = range(node.num_ports + 1) if mod & SL2VL_ALL_INPUTS else [(mod >> 8) & 0xFF]
        outs = range(1, node.num_ports + 1) if mod & SL2VL_ALL_OUTPUTS else [mod & 0xFF]
        if any(p > node.num_ports for p in (*ins, *outs)):
            _invalid(f"port in {(mod >> 8) & 0xFF} / out {mod & 0xFF} does not exist")
        for i in ins:
            for o in outs:
                node.sl2vl[(i, o)] = list(table)
        return SLtoVLMappingTable.LAYOUT.encode(SLtoVLMappingTable(sl_to_vl=table))
    node.sl2vl[_sl2vl_key(node, in_port, smp)] = table
    return _get_sl2vl(node, in_port, smp, reveal)


# -- VLArbitrationTable ---------------------------------------------------------------------
def _vlarb_part(node, in_port, smp) -> tuple[list, int, int]:
    """(the port's low or high table, first entry of the part, entries the part holds)."""
    try:
        table, half, port = vlarb_from_modifier(smp.attribute_modifier)
    except MadError as e:
        _invalid(str(e))
    if not node.is_switch:
        port = in_port  # a CA's table is the receiving port's
    elif not (0 if node.si.enhanced_port0 else 1) <= port <= node.num_ports:
        _invalid(f"port {port} has no VLArbitrationTable")  # base port 0 has no VLs to arbitrate
    pi = node.pi[port]
    cap = pi.vl_arbitration_low_cap if table == "low" else pi.vl_arbitration_high_cap
    first = half * VLARB_BLOCK_SIZE
    if cap <= first:
        _invalid(f"VLArbitration{table.capitalize()}Cap {cap}: no entries {first}-{first + VLARB_BLOCK_SIZE - 1}")
    return node.vlarb[(port, table)], first, min(VLARB_BLOCK_SIZE, cap - first)


def _get_vlarb(node, in_port, smp, reveal):
    entries, first, n = _vlarb_part(node, in_port, smp)
    block = vlarb_block(entries[first:first + n])
    return block.LAYOUT.encode(block)


def _set_vlarb(node, in_port, smp, reveal):
    entries, first, n = _vlarb_part(node, in_port, smp)
    entries[first:first + n] = vlarb_entries(_attribute(smp))[:n]  # entries past the cap are not there
    return _get_vlarb(node, in_port, smp, reveal)


# -- SwitchInfo ------------------------------------------------------------------------------
def _get_switchinfo(node, in_port, smp, reveal):
    _zero_modifier(smp)
    return SwitchInfo.LAYOUT.encode(node.si)


def _set_switchinfo(node, in_port, smp, reveal):
    _zero_modifier(smp)
    new = _attribute(smp)
    si = node.si
    if si.linear_fdb_cap and new.linear_fdb_top >= si.linear_fdb_cap:
        _invalid(f"LinearFDBTop {new.linear_fdb_top} not below LinearFDBCap {si.linear_fdb_cap}")
    for name in ("linear_fdb_top", "default_port", "default_multicast_primary_port",
                 "default_multicast_not_primary_port", "life_time_value", "multicast_fdb_top"):
        setattr(si, name, getattr(new, name))
    if new.port_state_change:
        si.port_state_change = 0  # write 1 to clear
    return SwitchInfo.LAYOUT.encode(si)


# -- LinearForwardingTable ----------------------------------------------------------------------
def _lft_block(node, smp) -> int:
    if node.lft is None:
        raise SmaStatus(ATTR_NOT_SUPPORTED, "no linear forwarding table (LinearFDBCap 0)")
    block = smp.attribute_modifier
    if block >= LFT_BLOCKS or block * LFT_BLOCK_SIZE >= len(node.lft):
        _invalid(f"LFT block {block} beyond LinearFDBCap {len(node.lft)}")
    return block * LFT_BLOCK_SIZE


def _get_lft(node, in_port, smp, reveal):
    first = _lft_block(node, smp)
    ports = bytes(node.lft[first:first + LFT_BLOCK_SIZE]).ljust(LFT_BLOCK_SIZE, bytes([LFT_NO_PORT]))
    return LinearForwardingTable.LAYOUT.encode(LinearForwardingTable(ports=list(ports)))


def _set_lft(node, in_port, smp, reveal):
    first = _lft_block(node, smp)
    ports = _attribute(smp).ports
    n = min(LFT_BLOCK_SIZE, len(node.lft) - first)
    node.lft[first:first + n] = bytes(ports[:n])
    return _get_lft(node, in_port, smp, reveal)


# -- RandomForwardingTable ----------------------------------------------------------------------
def _rft_block(node, smp) -> int:
    if node.rft is None:
        raise SmaStatus(ATTR_NOT_SUPPORTED, "no random forwarding table (RandomFDBCap 0)")
    block = smp.attribute_modifier
    if block >= RFT_BLOCKS or block * RFT_BLOCK_SIZE >= len(node.rft):
        _invalid(f"RFT block {block} beyond RandomFDBCap {len(node.rft)}")
    return block * RFT_BLOCK_SIZE


def _get_rft(node, in_port, smp, reveal):
    first = _rft_block(node, smp)
    entries = node.rft[first:first + RFT_BLOCK_SIZE]
    return RandomForwardingTable.LAYOUT.encode(RandomForwardingTable(entries=entries + [0] * (RFT_BLOCK_SIZE - len(entries))))


def _set_rft(node, in_port, smp, reveal):
    first = _rft_block(node, smp)
    entries = _attribute(smp).entries
    n = min(RFT_BLOCK_SIZE, len(node.rft) - first)
    table = list(node.rft)
    table[first:first + n] = entries[:n]
    limit = node.si.lids_per_port
    if limit:  # LIDsPerPort: how many valid entries may name one exit port (port 0 exempt)
        per_port: dict[int, int] = {}
        for packed in table:
            e = rft_decode(packed) if packed else None
            if e is not None and e.valid and e.port:
                per_port[e.port] = per_port.get(e.port, 0) + 1
        over = [p for p, k in per_port.items() if k > limit]
        if over:
            _invalid(f"more than LIDsPerPort={limit} entries for port {over[0]}")
    node.rft[first:first + n] = entries[:n]
    node.rft_map = None  # rebuilt on the next lookup
    return _get_rft(node, in_port, smp, reveal)


# -- MulticastForwardingTable -------------------------------------------------------------------
def _mft_slot(node, smp) -> tuple[int, int]:
    if node.mft is None:
        raise SmaStatus(ATTR_NOT_SUPPORTED, "no multicast forwarding table (MulticastFDBCap 0)")
    try:
        block, position = mft_from_modifier(smp.attribute_modifier)
    except MadError as e:
        _invalid(str(e))
    if block * MFT_BLOCK_SIZE >= len(node.mft):
        _invalid(f"MFT block {block} beyond MulticastFDBCap {len(node.mft)}")
    if position > node.num_ports // MFT_PORTS_PER_POSITION:
        _invalid(f"MFT position {position} beyond the switch's ports 0..{node.num_ports}")
    return block * MFT_BLOCK_SIZE, position * MFT_PORTS_PER_POSITION


def _get_mft(node, in_port, smp, reveal):
    first, shift = _mft_slot(node, smp)
    mft = node.mft
    masks = [(mft[i] >> shift) & 0xFFFF if i < len(mft) else 0 for i in range(first, first + MFT_BLOCK_SIZE)]
    return MulticastForwardingTable.LAYOUT.encode(MulticastForwardingTable(port_masks=masks))


def _set_mft(node, in_port, smp, reveal):
    first, shift = _mft_slot(node, smp)
    mft = node.mft
    keep = ~(0xFFFF << shift)
    for i, m in enumerate(_attribute(smp).port_masks):
        if first + i < len(mft):  # entries past the cap are read-only zeros
            mft[first + i] = (mft[first + i] & keep) | (m << shift)
    return _get_mft(node, in_port, smp, reveal)


# -- SMInfo --------------------------------------------------------------------------------------
# SubnSet(SMInfo) AttributeModifier: the SM-to-SM control packets (IBA 14.4.1).
_SM_CONTROL = {1: SMState.MASTER,  # HANDOVER
               2: None,  # ACKNOWLEDGE
               3: SMState.NOT_ACTIVE,  # DISABLE
               4: SMState.STANDBY,  # STANDBY
               5: SMState.DISCOVERING}  # DISCOVER


def _sm(node, in_port):
    sm = node.sm.get(node.lid_port(in_port))
    if sm is None:
        raise SmaStatus(ATTR_NOT_SUPPORTED, "no SM on this port (IsSM clear)")
    return sm


def _encode_sminfo(sm, req) -> bytes:
    # SM_Key is shown only to a requester that already knows it.
    shown = sm if req.sm_key == sm.sm_key else dataclasses.replace(sm, sm_key=0)
    return SMInfo.LAYOUT.encode(shown)


def _get_sminfo(node, in_port, smp, reveal):
    sm = _sm(node, in_port)
    _zero_modifier(smp)
    return _encode_sminfo(sm, _attribute(smp))


def _set_sminfo(node, in_port, smp, reveal):
    sm = _sm(node, in_port)
    req = _attribute(smp)
    mod = smp.attribute_modifier
    if mod == 0:
        # Simulator extension: modifier 0 writes the SM's identity and state directly.
        if req.sm_state > SMState.MASTER:
            _invalid(f"SMState {req.sm_state} is reserved")
        sm.guid, sm.priority, sm.sm_state, sm.sm_key = req.guid, req.priority, req.sm_state, req.sm_key
    elif mod in _SM_CONTROL:
        if _SM_CONTROL[mod] is not None:
            sm.sm_state = int(_SM_CONTROL[mod])
    else:
        _invalid(f"SMInfo control {mod} is reserved")
    return _encode_sminfo(sm, req)


# attribute -> (Get handler, Set handler or None, switches only)
_HANDLERS: dict[int, tuple[Any, Any, bool]] = {
    AttrID.NODE_INFO: (_get_nodeinfo, None, False),
    AttrID.NODE_DESCRIPTION: (_get_nodedesc, None, False),
    AttrID.PORT_INFO: (_get_portinfo, _set_portinfo, False),
    AttrID.GUID_INFO: (_get_guids, _set_guids, False),
    AttrID.P_KEY_TABLE: (_get_pkeys, _set_pkeys, False),
    AttrID.SL_TO_VL_MAPPING_TABLE: (_get_sl2vl, _set_sl2vl, False),
    AttrID.VL_ARBITRATION_TABLE: (_get_vlarb, _set_vlarb, False),
    AttrID.SWITCH_INFO: (_get_switchinfo, _set_switchinfo, True),
    AttrID.LINEAR_FORWARDING_TABLE: (_get_lft, _set_lft, True),
    AttrID.RANDOM_FORWARDING_TABLE: (_get_rft, _set_rft, True),
    AttrID.MULTICAST_FORWARDING_TABLE: (_get_mft, _set_mft, True),
    AttrID.SM_INFO: (_get_sminfo, _set_sminfo, False),
}
_HANDLERS = {int(k): v for k, v in _HANDLERS.items()}
