"""P_Keys, as OpenSM's P_Key manager writes them.

Without partitions (`LinkOptions.partitions` None): the default partition 0xFFFF (full
member) at index 0 of every end port (CA ports, switch port 0); other entries are left
as they are (what smagent always did: OpenSM's default without a partitions file).

With partitions (`smagent.config.partitions`: a partitions.conf or a desired state's
``partitions:``): every block of every end port's table up to its PartitionCap is read,
and the whole table is laid out at once from what it holds (`partitions.layout`: keys
it already holds stay at their index, as OpenSM 3.3.23 keeps them; new ones are
appended), zeros wherever no key belongs, so stale keys in any block go. On every switch
whose SwitchInfo advertises PartitionEnforcementCap, each external port facing an end
port gets that end port's new keys (`partitions.enforcement_keys`), every block up to
PartitionEnforcementCap, zeros after them (OpenSM leaves the blocks past the last one it
fills: a stale key there would still pass), and PartitionEnforcementInbound/Outbound 1
(`enforcement`), unless the keys do not fit, where enforcement is left off (a note says
so). Ports between switches are left as they are. One `Want` per block, the blocks of a
port sharing one `PortTable` that `settle` fills once all are read: blocks are diffed
like LFT blocks, only changed ones are sent.
"""
from __future__ import annotations

import dataclasses

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


@dataclasses.dataclass(eq=False)
class PortTable:
    """One port's whole P_Key table: the blocks read (``read``: block -> 32 keys), then
    laid out once (`settle`). ``key``: (node GUID, port) of an end port; for an
    enforcing switch port, ``key`` is the end port it faces and ``host`` that port's
    table (`settle` puts the one read in place of an unread stand-in)."""
    key: tuple
    wanted: list
    indx0: int
    cap: int
    host: PortTable | None = None
    read: dict = dataclasses.field(default_factory=dict)
    result: list | None = None

    def laid_out(self) -> list[int]:
        if self.result is None:
            if self.host is not None:
                keys = partmod.enforcement_keys(self.host.laid_out())[:self.cap]
                self.result = keys + [0] * (self.cap - len(keys))
            else:
                current = None
                if self.read:
                    current = [0] * (max(self.read) + 1) * fw.PKEY_BLOCK_SIZE
                    for b, keys in self.read.items():
                        current[b * fw.PKEY_BLOCK_SIZE:(b + 1) * fw.PKEY_BLOCK_SIZE] = keys
                self.result = partmod.layout(current, self.wanted, self.indx0, self.cap)
        return self.result

    def block(self, b: int) -> tuple:
        keys = self.laid_out()[b * fw.PKEY_BLOCK_SIZE:(b + 1) * fw.PKEY_BLOCK_SIZE]
        return tuple(keys) + (0,) * (fw.PKEY_BLOCK_SIZE - len(keys))


def settle(read: list) -> None:
    """Give every whole-table P_Key want of [(want, value read)] its block of the table
    laid out from all the blocks of its port that were read."""
    tables = [w for w, _v in read if w.table is not None]
    for w, v in read:
        if w.table is not None:
            w.table.read[fw.pkey_from_modifier(w.modifier)[0]] = list(v.p_keys)
    ends = {w.table.key: w.table for w in tables if w.table.host is None}
    for w in tables:
        if w.table.host is not None:
            w.table.host = ends.get(w.table.key, w.table.host)
    for w in tables:
        w.value = w.table.block(fw.pkey_from_modifier(w.modifier)[0])


def _blocks(n, path, table: PortTable, port: int, modifier_port: int = 0) -> list[Want]:
    return [Want("pkeys", n.guid, n.description, path, fw.pkey_modifier(b, modifier_port), None, port=port,
                 table=table)
            for b in range(max(1, -(-table.cap // fw.PKEY_BLOCK_SIZE)))]


def _end_table(a: partmod.Assignment, key: tuple, cap: int) -> PortTable:
    return PortTable(key, a.pending.get(key, []), a.indx0.get(key, 0), cap)


def switch_wants(topo, n, opts) -> list[Want]:
    """Port 0's P_Key blocks of a switch, and with partitions its enforcing external ports'."""
    if opts.partitions is None:
        return [Want("pkeys", n.guid, n.description, n.path, fw.pkey_modifier(0, 0), None)]
    a = assignment(topo, opts.partitions)
    out = _blocks(n, n.path, _end_table(a, (n.guid, 0), n.node_info.partition_cap), 0)
    for p in enforced_ports(topo, n, opts):
        peer = topo.links[(n.guid, p)]
        # the end port's table as laid out on an empty one, until `settle` finds it read
        host = _end_table(a, peer, topo.nodes[peer[0]].node_info.partition_cap)
        out += _blocks(n, n.path, PortTable(peer, [], 0, _enforce_cap(n), host), 0, p)
    return out


def ca_port_wants(topo, n, p: int, path, opts) -> list[Want]:
    """The P_Key blocks of a CA's port ``p`` (reached by ``path``)."""
    if opts.partitions is None:
        return [Want("pkeys", n.guid, n.description, path, fw.pkey_modifier(0), None, port=p)]
    table = _end_table(assignment(topo, opts.partitions), (n.guid, p), n.node_info.partition_cap)
    return _blocks(n, path, table, p)


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
        if len(partmod.enforcement_keys(a.keys_of(*peer))) <= _enforce_cap(n):
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
                        and len(partmod.enforcement_keys(a.keys_of(*peer))) > _enforce_cap(n)):
                    out.append(f"{n.description or hex(n.guid)} port {p}: the attached port's P_Keys do not fit "
                               f"PartitionEnforcementCap {_enforce_cap(n)}: no enforcement there")
    return out
