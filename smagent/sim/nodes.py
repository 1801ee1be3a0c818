"""The simulated fabric's state: nodes, ports, links and switch tables.

Everything an SMA reads or writes lives here, in one place per fact, so the SMA
(`sma.py`), the SMP paths (`routes.py`) and the forwarding/trace code (`dataplane.py`)
all see the same state:

* per port, the logical and physical link state in two bytearrays (`state`,
  `phys`: the trace reads them on every hop) and everything else PortInfo holds
  in one PortInfo value (`pi`);
* per switch, the SwitchInfo value (`si`) and the forwarding tables as flat
  arrays: the LFT as a bytearray indexed by LID, the RFT as a list of packed
  32-bit entries, the MFT as a list of port-mask integers indexed by MLID-0xC000.

Defaults reproduce what ibsim 0.10 reports before any SM touched it (see the
golden vectors' README, "ibsim SwitchInfo", and the captured PortInfo/NodeInfo
responses), so a differential test against ibsim compares like with like, except the
link configuration: ibsim pre-sets what real ports leave at reset (docs/PITFALLS.md). The
capability ``link_reset`` picks which one a node models:

* ``"iba"`` (the default): what a port holds before an SM configures it, IBA 14.2.5.6-9;
  where the specification leaves a value to the implementation, the most conservative
  one: GidPrefix 0, NeighborMTU 256 bytes (code 1) on ports whose MTUCap is 4096, OperationalVLs VL0 only (code 1),
  VLHighLimit 0, HOQLife 0, SL2VL tables the identity (SL i -> VL i: with VL0 alone
  running, only SL0 passes; SL15 -> VL15 drops), VLArbitration tables all zero, and the
  P_Key table of an end port holding only the default partition as a limited member
  (0x7FFF): an SM must make it a full member (0xFFFF) before two ports can talk;
* ``"ibsim"``: ibsim 0.10's pre-set values (NeighborMTU 2048, OperationalVLs VL0-7,
  OpenSM's QoS default VLArb tables, 0xFFFF at P_Key index 0).
"""
from __future__ import annotations

from mad.attributes import (
    CAP_IS_CLIENT_REREGISTRATION, CAP_IS_SM, NodeInfo, NodeType, PortInfoExtSpeeds, PortState, SMInfo, SMState,
    SwitchInfo,
)
from mad.forwarding import LFT_NO_PORT, MFT_BLOCKS, MFT_BLOCK_SIZE, RFT_BLOCKS, RFT_BLOCK_SIZE, UNICAST_LID_MAX
from smagent.errors import BadInput
from smagent.model.fabric import HCA, ROUTER, SWITCH, Fabric, Node

# PortPhysicalState values (IBA 14.2.5.6)
PHYS_SLEEP, PHYS_POLLING, PHYS_DISABLED, PHYS_LINKUP = 1, 2, 3, 5

DOWN, INIT, ARMED, ACTIVE = PortState.DOWN, PortState.INIT, PortState.ARMED, PortState.ACTIVE

# ibsim's GUID plan (the golden vectors' GUIDs): CAs count from 0x100000 and take
# num_ports + 1 GUIDs each (node g, port p = g + p); switches count from 0x200000, one each
# (node = port 0 GUID). Routers number like CAs from 0x300000 (ibsim starts them at 0,
# which IBA does not allow as a GUID).
GUID_BASE = {HCA: 0x100000, ROUTER: 0x300000, SWITCH: 0x200000}

# Capabilities a node may override (Node.caps, or SimFabric.from_fabric keywords).
SWITCH_CAPS = {
    "linear_fdb_cap": 30720,  # ibsim 0.10
    "random_fdb_cap": 0,
    "multicast_fdb_cap": 1024,
    "lids_per_port": None,  # None: = random_fdb_cap (no per-port limit, IBA 14.2.5.4)
    "partition_enforcement_cap": 64,
    "inbound_enforcement_cap": 0,
    "outbound_enforcement_cap": 0,
    "filter_raw_inbound_cap": 1,
    "filter_raw_outbound_cap": 1,
    "enhanced_port0": 0,
    "partition_cap": 8,  # NodeInfo.PartitionCap: P_Keys of switch port 0
    # SwitchInfo.OptimizedSLtoVLMappingProgramming: 1, SL2VL Sets for all input (bit 17) or
    # output (bit 16) ports at once are taken; 0 (ibsim's): those bits are refused
    "optimized_sl2vl_mapping": 0,
}
NODE_CAPS = {
    "vendor_id": 0,
    "device_id": 0,
    "revision": 0xA1,
    "partition_cap": 64,  # CAs: P_Keys per port
    "m_key": 0,
    "m_key_protect_bits": 0,
    "m_key_lease_period": None,  # None: the port kind's default below
    "link_reset": "iba",  # "iba" | "ibsim": the link configuration a port starts with (see above)
    # 1: the end ports advertise IsClientReregistrationSupported (CapabilityMask bit 25), as
    # real HCAs do; 0, as ibsim's: the ClientReregister bit of a Set is accepted either way
    # and reads back 0 (a one-shot event, never a stored state)
    "client_reregister": 0,
    # 1: a GUIDInfo Set is taken (alias GUIDs at every index but 0 of block 0), as real
    # ports do; 0, as ibsim 0.10: only the Get is answered, a Set gets status 0x0008
    "guid_info_set": 1,
}
LINK_RESETS = ("iba", "ibsim")
KNOWN_CAPS = frozenset(SWITCH_CAPS) | frozenset(NODE_CAPS)

# PortInfo values ibsim reports (captured); IBA leaves these to the implementation.
_PORT_COMMON = dict(
    link_width_enabled=2, link_width_supported=31, link_width_active=2, link_speed_supported=7,
    link_down_default_state=PHYS_POLLING, link_speed_active=1, link_speed_enabled=1,
    vl_cap=4, vl_arbitration_high_cap=8, vl_arbitration_low_cap=8, operational_vls=4,
)
_CA_PORT = dict(_PORT_COMMON, capability_mask=0x0050C048, m_key_lease_period=4089, neighbor_mtu=4,
                mtu_cap=4, vl_stall_count=7, guid_cap=32, subnet_timeout=31, resp_time_value=0,
                capability_mask2=0x30)
_SW_PORT0 = dict(_PORT_COMMON, capability_mask=0x0000C048, m_key_lease_period=4089, neighbor_mtu=1,
                 mtu_cap=3, vl_stall_count=0, guid_cap=1, subnet_timeout=31, resp_time_value=8,
                 capability_mask2=0x30)
_SW_PORTN = dict(_PORT_COMMON, neighbor_mtu=4, mtu_cap=4, vl_stall_count=7)

PKEY_FULL_DEFAULT = 0xFFFF
PKEY_LIMITED_DEFAULT = 0x7FFF
# "ibsim" profile: SL i -> VL i mod 8 (8 data VLs: VLCap VL0-7). ibsim maps SL15 to VL7 and
# SLs 8-14 to VLs it does not have; any table is legal, this one only uses VLs that exist.
DEFAULT_SL2VL = tuple(i % 8 for i in range(16))
RESET_SL2VL = tuple(range(16))  # "iba" profile: identity, SL15 -> VL15
# "ibsim" profile VLArb tables (read from ibsim 0.10: OpenSM's QoS defaults, 8 entries)
IBSIM_VLARB = {"low": [(0, 0)] + [(vl, 4) for vl in range(1, 8)],
               "high": [(0, 4)] + [(vl, 0) for vl in range(1, 8)]}
# PortInfo link fields at reset in the "iba" profile (the rest as ibsim reports them)
_IBA_RESET = dict(neighbor_mtu=1, operational_vls=1, vl_high_limit=0, hoq_life=0)
# ... and the capability of a current HCA or switch port, where ibsim's is older: MTUCap 4096
_IBA_CAPS = dict(mtu_cap=5)

NODE_TYPE_CODE = {HCA: NodeType.CA, SWITCH: NodeType.SWITCH, ROUTER: NodeType.ROUTER}


class SimConfigError(BadInput):
    """A capability or topology the simulator cannot represent."""


class Dropped(Exception):
    """A packet the fabric discards: `reason` says why, `where` is (node name, port)."""

    def __init__(self, reason: str, where: tuple[str, int | None] | None = None):
        super().__init__(reason)
        self.reason, self.where = reason, where

    def __str__(self) -> str:
        if self.where is None:
            return self.reason
        node, port = self.where
        return f"{self.reason} (at {node!r}" + (f" port {port})" if port is not None else ")")


class Looped(Dropped):
    """A packet that went round in circles (more hops than any route needs)."""


class SimNode:
    """One node: NodeInfo facts, per-port state, and (switches) the forwarding tables."""

    __slots__ = (
        "name", "kind", "is_switch", "node_type", "num_ports", "guid", "system_guid", "port_guids",
        "description", "caps", "peers", "state", "phys", "pi", "pkeys", "guids", "sl2vl", "sl2vl_default", "vlarb",
        "sm", "lease_start",
        "nodeinfo_cache", "si", "lft", "rft", "mft", "rft_map", "index",
    )

    def __init__(self, node: Node, caps: dict, guid: int, port_guids: list[int], index: int):
        self.name = node.name
        self.kind = node.node_type
        self.is_switch = node.node_type == SWITCH
        self.node_type = int(NODE_TYPE_CODE[node.node_type])
        self.num_ports = node.num_ports
        self.index = index
        self.guid = guid
        self.system_guid = node.system_guid if node.system_guid is not None else guid
        self.port_guids = port_guids  # index = port; a switch's are all port 0's GUID
        # ibsim truncates to the 64-byte NodeDescription; so do we (UTF-8 safe).
        self.description = (node.description or node.name).encode("utf-8")[:64].decode("utf-8", "ignore")
        self.caps = caps
        if caps["link_reset"] not in LINK_RESETS:
            raise SimConfigError(f"node {self.name!r}: link_reset {caps['link_reset']!r} is not one of "
                                 f"{', '.join(LINK_RESETS)}")
        iba = caps["link_reset"] == "iba"
        n = self.num_ports + 1  # index 0 = switch port 0 (unused on CAs)
        self.peers: list[tuple[SimNode, int] | None] = [None] * n
        self.state = bytearray([DOWN]) * n  # logical PortState
        self.phys = bytearray([PHYS_POLLING]) * n  # PortPhysicalState
        self.pi = [self._default_portinfo(p) for p in range(n)]
        self.pkeys = [self._default_pkeys(p) for p in range(n)]
        # GUIDInfo: per port GUIDCap GUIDs, index 0 the port GUID (read only), aliases 0 at reset
        self.guids = [[port_guids[p]] + [0] * (self.pi[p].guid_cap - 1) if self.pi[p].guid_cap else []
                      for p in range(n)]
        self.sl2vl: dict[tuple[int, int], list[int]] = {}  # (in, out) -> table; absent: sl2vl_default
        self.sl2vl_default = RESET_SL2VL if iba else DEFAULT_SL2VL
        # (port, "low"|"high") -> 64 (VL, weight) entries, of which the first *Cap are real
        self.vlarb = {(p, t): (([] if iba else list(IBSIM_VLARB[t])) + [(0, 0)] * 64)[:64]
                      for p in range(n) for t in ("low", "high")}
        self.sm: dict[int, object] = {}  # port -> SMInfo value, where an SM is attached
        self.lease_start: dict[int, float] = {}  # port -> when the M_Key lease timer started
        self.nodeinfo_cache: dict[int, bytes] = {}
        # the switch's tables (None on a CA, and for a table the switch lacks)
        self.si: SwitchInfo | None = None
        self.lft: bytearray | None = None
        self.rft: list[int] | None = None
        self.rft_map: dict[int, int] | None = None
        self.mft: list[int] | None = None
        if self.is_switch:
            self._init_switch()
            self.state[0] = ACTIVE  # base switch port 0 has no link; ibsim reports it Active/LinkUp
            self.phys[0] = PHYS_LINKUP

    # -- construction --------------------------------------------------------------
    def _default_portinfo(self, port: int):
        if self.is_switch:
            fields = _SW_PORT0 if port == 0 else _SW_PORTN
        else:
            fields = _CA_PORT
        pi = PortInfoExtSpeeds(**fields)
        if self.caps["link_reset"] == "iba" and not (self.is_switch and port == 0):
            for k, v in {**_IBA_RESET, **_IBA_CAPS}.items():
                setattr(pi, k, v)
        if self.is_switch and port != 0:
            return pi  # M_Key & co. belong to switch port 0 only
        caps = self.caps
        pi.m_key = caps["m_key"]
        pi.m_key_protect_bits = caps["m_key_protect_bits"]
        if caps["client_reregister"]:
            pi.capability_mask |= CAP_IS_CLIENT_REREGISTRATION
        if caps["m_key_lease_period"] is not None:
            pi.m_key_lease_period = caps["m_key_lease_period"]
        return pi

    def _default_pkeys(self, port: int) -> list[int]:
        if self.is_switch and port != 0:
            size = self.caps["partition_enforcement_cap"]
        else:
            size = self.caps["partition_cap"]
        table = [0] * size
        if size:
            endport = not self.is_switch or port == 0
            table[0] = PKEY_LIMITED_DEFAULT if endport and self.caps["link_reset"] == "iba" else PKEY_FULL_DEFAULT
        return table

    def _init_switch(self) -> None:
        c = self.caps
        lin, rnd, mc = c["linear_fdb_cap"], c["random_fdb_cap"], c["multicast_fdb_cap"]
        if lin and rnd:
            raise SimConfigError(f"switch {self.name!r}: a switch implements an LFT or an RFT, never both "
                                 f"(linear_fdb_cap={lin}, random_fdb_cap={rnd})")
        if not 0 <= lin <= UNICAST_LID_MAX + 1:
            raise SimConfigError(f"switch {self.name!r}: linear_fdb_cap {lin} outside 0..{UNICAST_LID_MAX + 1}")
        if not 0 <= rnd <= RFT_BLOCKS * RFT_BLOCK_SIZE:
            raise SimConfigError(f"switch {self.name!r}: random_fdb_cap {rnd} outside 0..{RFT_BLOCKS * RFT_BLOCK_SIZE}")
        if not 0 <= mc <= MFT_BLOCKS * MFT_BLOCK_SIZE:
            raise SimConfigError(f"switch {self.name!r}: multicast_fdb_cap {mc} outside 0..{MFT_BLOCKS * MFT_BLOCK_SIZE}")
        lpp = c["lids_per_port"]
        self.si = SwitchInfo(
            linear_fdb_cap=lin, random_fdb_cap=rnd, multicast_fdb_cap=mc, linear_fdb_top=0,
            default_port=0, default_multicast_primary_port=0, default_multicast_not_primary_port=0,
            life_time_value=0, port_state_change=1,  # ibsim (and real switches) start with it set
            optimized_sl_to_vl_mapping_programming=c["optimized_sl2vl_mapping"],
            lids_per_port=rnd if lpp is None else lpp,
            partition_enforcement_cap=c["partition_enforcement_cap"],
            inbound_enforcement_cap=c["inbound_enforcement_cap"],
            outbound_enforcement_cap=c["outbound_enforcement_cap"],
            filter_raw_inbound_cap=c["filter_raw_inbound_cap"],
            filter_raw_outbound_cap=c["filter_raw_outbound_cap"],
            enhanced_port0=c["enhanced_port0"], multicast_fdb_top=0,
        )
        self.lft = bytearray([LFT_NO_PORT]) * lin if lin else None
        self.rft = [0] * rnd if rnd else None
        self.rft_map = {}
        self.mft = [0] * mc if mc else None

    # -- facts -----------------------------------------------------------------------
    def port_exists(self, port: int) -> bool:
        """Ports 1..num_ports, plus port 0 on a switch."""
        return (0 if self.is_switch else 1) <= port <= self.num_ports

    def lid_port(self, port: int) -> int:
        """The port whose PortInfo holds the LID that `port` answers to."""
        return 0 if self.is_switch else port

    def lid_range(self, port: int) -> tuple[int, int]:
        """(first, last) LID the port (a switch: port 0) answers to; (0, -1) without a LID."""
        pi = self.pi[self.lid_port(port)]
        if not pi.lid:
            return 0, -1
        lmc = pi.lmc if (self.si is None or self.si.enhanced_port0) else 0
        base = pi.lid & ~((1 << lmc) - 1)
        return base, base + (1 << lmc) - 1

    def nodeinfo(self, in_port: int) -> bytes:
        """The encoded NodeInfo as seen through `in_port` (cached: it never changes)."""
        data = self.nodeinfo_cache.get(in_port)
        if data is None:
            c = self.caps
            data = NodeInfo.LAYOUT.encode(NodeInfo(
                base_version=1, class_version=1, node_type=self.node_type, num_ports=self.num_ports,
                system_image_guid=self.system_guid, node_guid=self.guid,
                port_guid=self.port_guids[in_port], partition_cap=c["partition_cap"],
                device_id=c["device_id"], revision=c["revision"], local_port_num=in_port,
                vendor_id=c["vendor_id"]))
            self.nodeinfo_cache[in_port] = data
        return data

    def attach_sm(self, port: int, *, guid: int | None = None, priority: int = 0,
                  state: int = SMState.NOT_ACTIVE) -> None:
        """Put an SM on `port` (a switch: port 0): IsSM is set and SMInfo answers there."""
        port = self.lid_port(port)
        self.sm[port] = SMInfo(guid=self.port_guids[port] if guid is None else guid, sm_key=0,
                                   act_count=0, priority=priority, sm_state=int(state))
        self.pi[port].capability_mask |= CAP_IS_SM

    def __repr__(self) -> str:
        return f"<SimNode {self.kind} {self.name!r} {self.num_ports} ports guid {self.guid:#x}>"


def _node_caps(node: Node, overrides: dict, per_node: dict) -> dict:
    """Defaults < global overrides < the node's own caps < per-node overrides."""
    caps = dict(NODE_CAPS)
    if node.node_type == SWITCH:
        caps.update(SWITCH_CAPS)
    for layer in (overrides, node.caps, per_node.get(node.name, {})):
        for k, v in layer.items():
            if k not in KNOWN_CAPS:
                raise SimConfigError(f"node {node.name!r}: unknown capability {k!r} "
                                     f"(known: {', '.join(sorted(KNOWN_CAPS))})")
            if k in SWITCH_CAPS and k not in NODE_CAPS and node.node_type != SWITCH:
                continue  # a switch-only capability given to every node
            caps[k] = v
    return caps


def build_nodes(fabric: Fabric, overrides: dict | None = None,
                per_node: dict | None = None) -> dict[str, SimNode]:
    """SimNodes for every node of `fabric`, cabled as the fabric says, links up (INIT)."""
    overrides, per_node = overrides or {}, per_node or {}
    unknown = set(per_node) - set(fabric.nodes)
    if unknown:
        raise SimConfigError(f"capabilities given for unknown node(s): {', '.join(sorted(unknown))}")
    counters = dict(GUID_BASE)
    nodes: dict[str, SimNode] = {}
    for i, n in enumerate(fabric):
        # Like ibsim: a known GUID is used and the counter continues after it.
        g = n.guid if n.guid is not None else counters[n.node_type]
        if n.node_type == SWITCH:
            pg = n.port_guids.get(0, g)
            port_guids = [pg] * (n.num_ports + 1)
            counters[SWITCH] = g + 1
        else:
            port_guids = [0] + [n.port_guids.get(p, g + p) for p in range(1, n.num_ports + 1)]
            counters[n.node_type] = g + n.num_ports + 1
        nodes[n.name] = SimNode(n, _node_caps(n, overrides, per_node), g, port_guids, i)
    for link in fabric.links():
        a, b = nodes[link.a.node], nodes[link.b.node]
        connect(a, link.a.num, b, link.b.num)
    return nodes


def connect(a: SimNode, pa: int, b: SimNode, pb: int) -> None:
    """Cable two ports: both come up physically (LinkUp) and logically in INIT."""
    a.peers[pa] = (b, pb)
    b.peers[pb] = (a, pa)
    for node, port in ((a, pa), (b, pb)):
        node.state[port] = INIT
        node.phys[port] = PHYS_LINKUP
        _state_changed(node)


def disconnect(node: SimNode, port: int) -> tuple[SimNode, int] | None:
    """Pull the cable on `port`: both ends go DOWN/Polling. Returns the former peer."""
    peer = node.peers[port]
    if peer is None:
        return None
    other, oport = peer
    node.peers[port] = None
    other.peers[oport] = None
    for n, p in ((node, port), (other, oport)):
        n.state[p] = DOWN
        if n.phys[p] != PHYS_DISABLED:
            n.phys[p] = PHYS_POLLING
        _state_changed(n)
    return peer


def link_down(node: SimNode, port: int, phys: int = PHYS_POLLING) -> None:
    """The link on `port` goes down but the cable stays (a disabled port, a fault)."""
    node.state[port] = DOWN
    node.phys[port] = phys
    _state_changed(node)
    peer = node.peers[port]
    if peer is not None:
        other, oport = peer
        other.state[oport] = DOWN
        if other.phys[oport] != PHYS_DISABLED:
            other.phys[oport] = PHYS_POLLING
        _state_changed(other)


def link_up(node: SimNode, port: int) -> bool:
    """Enable `port` and retrain its link if both ends are cabled and enabled: both go to
    INIT. Returns whether the link came up."""
    if node.phys[port] == PHYS_DISABLED:
        node.phys[port] = PHYS_POLLING
    peer = node.peers[port]
    if peer is None:
        return False
    other, oport = peer
    if other.phys[oport] == PHYS_DISABLED:
        return False
    for n, p in ((node, port), (other, oport)):
        n.state[p] = INIT
        n.phys[p] = PHYS_LINKUP
        _state_changed(n)
    return True


def _state_changed(node: SimNode) -> None:
    # SwitchInfo.PortStateChange: set when the link state machine moves a port to or from
    # DOWN (cables, link bounces, disabled ports); ARMED/ACTIVE by SubnSet leave it alone.
    if node.si is not None:  # a switch
        node.si.port_state_change = 1

