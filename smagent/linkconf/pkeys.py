"""P_Keys, as OpenSM's P_Key manager writes them.

Without partitions (`LinkOptions.partitions` None): the default partition 0xFFFF (full
member) at index 0 of every end port (CA ports, switch port 0); other entries are left
as they are (what smagent always did: OpenSM's default without a partitions file).

With partitions (`smagent.config.partitions`: a partitions.conf or a desired state's
``partitions:``): every end port's whole table, in the order `partitions.resolve` gives
(index 0 the default partition unless ``indx0``), unused entries 0, as many blocks as
its keys need (stale keys in blocks beyond are not read); and on every switch whose
SwitchInfo advertises PartitionEnforcementCap, each external port facing an end port
gets that end port's P_Keys and PartitionEnforcementInbound/Outbound 1 (`enforcement`),
unless they do not fit the switch's table, where enforcement is left off (a note says
so). Ports between switches are left as they are. One `Want` per block: blocks are
diffed like LFT blocks, only changed ones are sent.
"""
from __future__ import annotations

from mad import forwarding as fw
from smagent.config import partitions as partmod
from smagent.fdb.porttables import Want

_cache: list = []  # [(topology, config, Assignment)]: one sweep asks many times


def assignment(topo, config) -> partmod.Assignment:
    """`partitions.resolve` of ``config`` on ``topo``, computed once per sweep."""
    if _cache and _cache[0][0] is topo and _cache[0][1] is config:
        return _cache[0][2]
    a = partmod.resolve(config, topo)
    _cache[:] = [(topo, config, a)]
    return a


def _blocks(n, path, keys: list[int], cap: int, port: int, modifier_port: int = 0) -> list[Want]:
    keys = keys[:cap]
    blocks = max(1, -(-len(keys) // fw.PKEY_BLOCK_SIZE))
    table = keys + [0] * (blocks * fw.PKEY_BLOCK_SIZE - len(keys))
    return [Want("pkeys", n.guid, n.description, path, fw.pkey_modifier(b, modifier_port),
                 tuple(table[b * fw.PKEY_BLOCK_SIZE:(b + 1) * fw.PKEY_BLOCK_SIZE]), port=port)
            for b in range(blocks)]


def switch_wants(topo, n, opts) -> list[Want]:
    """Port 0's P_Key blocks of a switch, and with partitions its enforcing external ports'."""
    if opts.partitions is None:
        return [Want("pkeys", n.guid, n.description, n.path, fw.pkey_modifier(0, 0), None)]
    a = assignment(topo, opts.partitions)
    out = _blocks(n, n.path, a.keys_of(n.guid, 0), n.node_info.partition_cap, 0)
    for p in enforced_ports(topo, n, opts):
        peer = topo.links[(n.guid, p)]
        out += _blocks(n, n.path, a.keys_of(*peer), _enforce_cap(n), 0, p)
    return out


def ca_port_wants(topo, n, p: int, path, opts) -> list[Want]:
    """The P_Key blocks of a CA's port ``p`` (reached by ``path``)."""
    if opts.partitions is None:
        return [Want("pkeys", n.guid, n.description, path, fw.pkey_modifier(0), None, port=p)]
    keys = assignment(topo, opts.partitions).keys_of(n.guid, p)
    return _blocks(n, path, keys, n.node_info.partition_cap, p)


def _enforce_cap(n) -> int:
    return n.switch_info.partition_enforcement_cap if n.switch_info is not None else 0


def enforced_ports(topo, n, opts) -> list[int]:
    """A switch's external ports that enforce partitions: facing an end port, on a switch
    with PartitionEnforcementCap, the peer's P_Keys fitting it (only with partitions)."""
    if opts.partitions is None or not n.is_switch or not _enforce_cap(n):
        return []
    a = assignment(topo, opts.partitions)
    out = []
    for p in range(1, n.num_ports + 1):
        peer = topo.links.get((n.guid, p))
        if peer is None or peer[0] not in topo.nodes or topo.nodes[peer[0]].is_switch:
            continue
        if len(a.keys_of(*peer)) <= _enforce_cap(n):
            out.append(p)
    return out


def enforcement(topo, n, port: int, opts) -> dict:
    """The PortInfo enforcement bits ``port`` of switch ``n`` should hold (none: leave them)."""
    if opts.partitions is None or not n.is_switch or port == 0:
        return {}
    if port in enforced_ports(topo, n, opts):
        return {"partition_enforcement_inbound": 1, "partition_enforcement_outbound": 1}
    return {}


def notes(topo, opts) -> list[str]:
    """Warnings of the partitions on this fabric: members not on it, tables too small."""
    if opts.partitions is None:
        return []
    a = assignment(topo, opts.partitions)
    out = list(a.warnings)
    for (g, p), keys in sorted(a.ports.items()):
        n = topo.nodes.get(g)
        if n is not None and len(keys) > n.node_info.partition_cap:
            out.append(f"{n.description or hex(g)} port {p}: {len(keys)} P_Keys, its table holds "
                       f"{n.node_info.partition_cap}: the last ones are left out")
    for n in topo.switches():
        if _enforce_cap(n):
            for p in range(1, n.num_ports + 1):
                peer = topo.links.get((n.guid, p))
                if (peer and peer[0] in topo.nodes and not topo.nodes[peer[0]].is_switch
                        and len(a.keys_of(*peer)) > _enforce_cap(n)):
                    out.append(f"{n.description or hex(n.guid)} port {p}: the attached port's P_Keys do not fit "
                               f"PartitionEnforcementCap {_enforce_cap(n)}: no enforcement there")
    return out
