"""The PortInfo link fields a port should hold (GidPrefix, NeighborMTU, OperationalVLs,
HOQLife, VLStallCount, VLHighLimit, SubnetTimeout), and their difference from what it
holds: folded into the PortInfo Sets the sweep sends."""
from __future__ import annotations

from mad import codes
from mad.attributes import NodeType
from smagent.linkconf import pkeys
from smagent.config.linkoptions import LinkOptions


CAP_SL_MAPPING = 1 << 6  # PortInfo.CapabilityMask: IsSLMappingSupported


# the PortInfo fields this module owns; RIDE_ALONG ones never trigger a Set on their own
LINK_FIELDS = ("gid_prefix", "neighbor_mtu", "operational_vls", "hoq_life", "vl_stall_count",
               "vl_high_limit", "subnet_timeout", "partition_enforcement_inbound", "partition_enforcement_outbound")


RIDE_ALONG = frozenset({"subnet_timeout"})


def enhanced_port0(n) -> bool:
    """Whether switch ``n``'s port 0 is enhanced (SwitchInfo.EnhancedPort0): it then runs
    VLs and has SL2VL (as an output port) and VLArb tables; a base port 0 has none."""
    return bool(n.switch_info is not None and n.switch_info.enhanced_port0)


def _vl_mask(op_vls: int) -> int:
    """OpenSM's mask for folding a VL into the VLs a port runs (op_vls is the code)."""
    return (1 << (op_vls - 1)) - 1 if op_vls else 0


def _peer(topo, node, port):
    other = topo.links.get((node.guid, port))
    if other is None:
        return None, None
    n = topo.nodes.get(other[0])
    return n, (n.ports.get(other[1]) if n is not None else None)


def port_fields(topo, node, port: int, opts: LinkOptions) -> dict:
    """The PortInfo link fields `port` of `node` should hold (only those that apply)."""
    pi = node.ports[port]
    want = {}
    if not node.is_switch or port == 0:
        want["gid_prefix"] = opts.subnet_prefix
        want["subnet_timeout"] = opts.subnet_timeout
    if node.is_switch and port == 0:
        if opts.qos_mode == "always" and enhanced_port0(node):  # OpenSM's sw0 class (qos_sw0_high_limit)
            want["vl_high_limit"] = opts.for_class("sw0").vl_high_limit
        return want  # switch port 0 has no link
    peer_node, peer_pi = _peer(topo, node, port)
    if peer_pi is None:
        return want
    want["neighbor_mtu"] = max(1, min(pi.mtu_cap, peer_pi.mtu_cap, opts.mtu_code))
    want["operational_vls"] = max(1, min(pi.vl_cap, peer_pi.vl_cap, opts.vls_code))
    leaf = peer_node.node_type != NodeType.SWITCH
    if node.is_switch:
        want.update(pkeys.enforcement(topo, node, port, opts))
        want["hoq_life"] = opts.leaf_hoq_life if leaf else opts.hoq_life
        want["vl_stall_count"] = opts.leaf_vl_stall_count if leaf else opts.vl_stall_count
    elif node.node_type == NodeType.ROUTER:
        want["hoq_life"] = opts.leaf_hoq_life
    if opts.qos_mode == "always":  # "auto" leaves it: its reset value, 0, is OpenSM's default
        want["vl_high_limit"] = opts.for_class("swe" if node.is_switch else "ca").vl_high_limit
    return want


def port_diff(pi, want: dict) -> dict:
    """{field: (old, new)} of the fields that differ and would trigger a Set."""
    return {k: (getattr(pi, k), v) for k, v in want.items() if k not in RIDE_ALONG and getattr(pi, k) != v}


SECRET_FIELDS = frozenset({"m_key"})  # set by a sweep (smagent.sweep.protect), never shown
HIDDEN = "(not shown)"


def describe_diff(diff: dict) -> list[str]:
    """The changed link fields as text, each value in its human unit (`codes.value_text`);
    a secret (the M_Key) only as changed."""
    return [f"{k} changes {HIDDEN}" if k in SECRET_FIELDS else f"{k} {codes.value_text(k, o)} -> {codes.value_text(k, n)}"
            for k, (o, n) in diff.items()]
