"""The SA's records of one `Subnet` snapshot (IBA 15.2.5), built once per snapshot and
filtered per query. Which records exist follows what OpenSM's database holds: a NodeRecord
per LID-carrying port (a switch one, a CA one per port), a PortInfoRecord per port of a
switch (at the switch's LID) and per CA port, a LinkRecord per direction of every link,
an SMInfoRecord per SM seen. P_KeyTableRecord, SLtoVLMappingTableRecord and
VLArbitrationTableRecord: one per table unit the SM read or wrote (`Subnet.tables`; OpenSM
reads every port's tables and answers zeros for those it never read: a unit we never read
has no record), keyed as OpenSM keys them: a CA port's at its LID and port number (its
SL2VL record with input and output port 0), a switch's at its LID with the ports its
AttributeModifier names.

Secrets are never handed out: M_Key (PortInfoRecord) and SM_Key (SMInfoRecord) read 0
unless the query carries the SM's own SM_Key (IBA 15.4.1; OpenSM does the same)."""
from __future__ import annotations

import array
import bisect
import functools
from collections.abc import Sequence
from typing import Any, Callable, Iterable, Iterator

from mad import codes
from mad import forwarding as fw
from mad.attributes import SMInfo, VLArbitrationTable
from mad.forwarding import LFT_BLOCK_SIZE
from mad.sa_records import (
    GUIDInfoRecord, LinearForwardingTableRecord, LinkRecord, MulticastForwardingTableRecord, NodeRecord,
    P_KeyTableRecord, PortInfoRecord, SLtoVLMappingTableRecord, SMInfoRecord, SwitchInfoRecord,
    VLArbitrationTableRecord,
)
from smagent.model.subnet import LinkTables, Subnet

DEFAULT_GID_PREFIX = 0xFE80000000000000
DOWNSTREAM_KEPT = 1 << 19  # (switch, DLID) path summaries kept a snapshot (~100 MB at most); more: start again
_NOTHING_CROSSED = 1 << 30  # the MTU of a summary over no port (above every MTU code)
_UNKNOWN = object()


def port_mtu(node, port: int) -> int:
    """The MTU a port carries: its MTUCap, and on a link the NeighborMTU the SM set (a
    switch's port 0 has no link: its NeighborMTU means nothing); 0 for a port not read."""
    pi = node.ports.get(port)
    if pi is None:
        return 0
    if node.is_switch and port == 0 or not pi.neighbor_mtu:
        return pi.mtu_cap
    return min(pi.mtu_cap, pi.neighbor_mtu)


class Records:
    """The records of one snapshot, each list built on first use."""

    def __init__(self, subnet: Subnet, alias_port: Callable[[int], int | None] = lambda guid: None):
        self.subnet = subnet
        self.alias_port = alias_port  # alias GUID -> the port GUID it names (`smagent.sa.aliases`)
        self._downstream: dict[tuple[int, int], tuple[int, float, int] | None] = {}

    @functools.cached_property
    def nodes(self) -> list[NodeRecord]:
        s, out = self.subnet, []
        for n in sorted(s.nodes.values(), key=lambda n: n.guid):
            for p in n.lid_ports():
                lid = s.base_lid(n, p)
                if not lid:
                    continue
                # the port the record is about: a switch's is port 0, whichever port
                # discovery entered by
                ni = n.node_info.replace(port_guid=n.port_guid(p), local_port_num=p)
                out.append(NodeRecord(lid=lid, **{k: getattr(ni, k) for k in _NODE_INFO},
                                      node_string=n.description))
        return sorted(out, key=lambda r: r.lid)

    def port_infos(self, reveal_keys: bool) -> list[PortInfoRecord]:
        return self._port_infos_keyed if reveal_keys else self._port_infos

    @functools.cached_property
    def _port_infos_keyed(self) -> list[PortInfoRecord]:
        s, out = self.subnet, []
        for n in s.nodes.values():
            for p in n.lid_ports():
                lid = s.base_lid(n, p)
                if not lid:
                    continue
                for port in (sorted(n.ports) if n.is_switch else [p]):
                    pi = n.ports[port]
                    out.append(PortInfoRecord(endport_lid=lid, port_num=port,
                                              **{k: getattr(pi, k) for k in _PORT_INFO}))
        return sorted(out, key=lambda r: (r.endport_lid, r.port_num))

    @functools.cached_property
    def _port_infos(self) -> list[PortInfoRecord]:
        return [r.replace(m_key=0) for r in self._port_infos_keyed]

    @functools.cached_property
    def switches(self) -> list[SwitchInfoRecord]:
        s, out = self.subnet, []
        for n in s.nodes.values():
            lid = s.base_lid(n, 0)
            if n.is_switch and n.switch_info is not None and lid:
                si = n.switch_info
                out.append(SwitchInfoRecord(lid=lid, **{k: getattr(si, k) for k in _SWITCH_INFO}))
        return sorted(out, key=lambda r: r.lid)

    @functools.cached_property
    def links(self) -> list[LinkRecord]:
        out = [LinkRecord(from_lid=a, from_port_num=pa, to_port_num=pb, to_lid=b)
               for a, pa, pb, b in self.subnet.link_records() if a and b]
        return sorted(out, key=lambda r: (r.from_lid, r.from_port_num))

    @functools.cached_property
    def lfts(self) -> "CompactRecords":
        """The LFT blocks the SM programmed, up to each switch's LinearFDBTop; each block's
        ports read from the snapshot's own LFT (`Subnet.lft`) when its record is built."""
        def rows():
            s = self.subnet
            for n in s.nodes.values():
                lid, table = s.base_lid(n, 0), s.lft.get(n.guid)
                if not n.is_switch or not lid or table is None or n.switch_info is None:
                    continue
                last = min(n.switch_info.linear_fdb_top // LFT_BLOCK_SIZE, len(table) // LFT_BLOCK_SIZE - 1)
                yield from ((lid, b, 0, table) for b in range(last + 1))
        return CompactRecords(rows(), lambda lid, b, _, t: LinearForwardingTableRecord(
            lid=lid, block_num=b, ports=list(t[b * LFT_BLOCK_SIZE:(b + 1) * LFT_BLOCK_SIZE])), ("block_num", None))

    @functools.cached_property
    def mfts(self) -> "CompactRecords":
        """The MFT units (block, position) the SM programmed or read."""
        def rows():
            s = self.subnet
            for (sw, block, position), masks in s.mft.items():
                node = s.nodes.get(sw)
                lid = s.base_lid(node, 0) if node is not None else 0
                if lid:
                    yield lid, block, position, masks
        return CompactRecords(rows(), lambda lid, b, pos, masks: MulticastForwardingTableRecord(
            lid=lid, position=pos, block_num=b, port_masks=list(masks)), ("block_num", "position"))

    @functools.cached_property
    def guid_infos(self) -> "CompactRecords":
        """Every LID-carrying port's GUIDInfo blocks, as many as its GUIDCap fills (8 GUIDs
        a block; none for a GUIDCap of 0), as OpenSM answers: its port GUID at index 0 of
        block 0, the rest 0 (the SM assigns no alias GUIDs; the agent puts in those the SA
        was asked for). Kept as the GUID at index 0 alone."""
        def rows():
            s = self.subnet
            for n in s.nodes.values():
                for p in n.lid_ports():
                    lid, pi = s.base_lid(n, p), n.ports.get(p)
                    if lid and pi is not None:
                        guid = n.port_guid(p)
                        yield from ((lid, b, 0, guid if b == 0 else 0) for b in range((pi.guid_cap + 7) // 8))
        return CompactRecords(rows(), lambda lid, b, _, guid: GUIDInfoRecord(
            lid=lid, block_num=b, guids=[guid] + [0] * 7), ("block_num", None))

    def _tables(self, kind: str):
        """(LID, port: the CA port or 0 on a switch, AttributeModifier, table) of every unit
        of ``kind`` whose port still carries a LID."""
        s = self.subnet
        units = s.tables.units(kind) if isinstance(s.tables, LinkTables) else (
            (g, p, m, t) for (k, g, p, m), t in s.tables.items() if k == kind)
        for guid, port, modifier, table in units:
            n = s.nodes.get(guid)
            if n is None or (not n.is_switch and port not in n.port_guids):
                continue
            lid = s.base_lid(n, port)
            if lid:
                yield lid, port, modifier, table

    # The table records are kept as `CompactRecords`: a packed key and a shared table each.

    @functools.cached_property
    def port_caps(self) -> dict[tuple[int, int], tuple[int, int, float]]:
        """(node GUID, port) -> the MTU it carries (`port_mtu`), its link's Rate code and
        that rate's Gb/s, for every port read: a PathRecord's MTU and rate are minima over
        these, worked out once a snapshot rather than per path."""
        out = {}
        for n in self.subnet.nodes.values():
            for p, pi in n.ports.items():
                rate = codes.rate_code(pi)
                out[(n.guid, p)] = (port_mtu(n, p), rate, codes.rate_gbps(rate))
        return out

    def downstream(self, switch: int, dlid: int) -> tuple[int, float, int] | None:
        """(the smallest MTU, the slowest rate's Gb/s and code) over the ports a packet
        crosses from ``switch`` to ``dlid`` through the LFTs, from its exit port on (the
        destination port included); None if the LFTs do not deliver it. Kept per (switch,
        DLID) for the snapshot: the hosts of a leaf share it, so a PathRecord not asked
        before costs no walk; each is worked out from the next switch's (`_below`)."""
        out = self._below(switch, dlid)
        if out is None or out[0] != _NOTHING_CROSSED:
            return out
        own = self.port_caps.get((switch, 0))  # the switch's own LID (or no port on the way read): its port 0
        return (own[0], float("inf"), 0) if own else (0, float("inf"), 0)

    def _below(self, switch: int, dlid: int) -> tuple[int, float, int] | None:
        """`downstream`'s summary from ``switch`` on, kept: its exit port and the port that
        link enters, then the next switch's; at the destination switch nothing crossed
        (MTU `_NOTHING_CROSSED`, an infinite rate). The slowest port is the first one on the
        way of the slowest rate, as a walk finds it."""
        key = (switch, dlid)
        hit = self._downstream.get(key, _UNKNOWN)
        if hit is not _UNKNOWN:
            return hit  # type: ignore[return-value]
        if len(self._downstream) >= DOWNSTREAM_KEPT:
            self._downstream.clear()
        self._downstream[key] = None  # while worked out: a loop back here delivers nothing
        out = self._next_hop(switch, dlid)
        self._downstream[key] = out
        return out

    def _next_hop(self, switch: int, dlid: int) -> tuple[int, float, int] | None:
        s = self.subnet
        dest = s.lids.get(dlid)
        if dest is None:
            return None
        if dest[0] == switch:
            return (_NOTHING_CROSSED, float("inf"), 0)
        port = s.lft_exit(switch, dlid)
        peer = s.links.get((switch, port)) if port is not None else None
        if peer is None:
            return None
        if s.nodes[peer[0]].is_switch:
            rest = self._below(peer[0], dlid)
            if rest is None:
                return None
        elif peer == dest:
            rest = (_NOTHING_CROSSED, float("inf"), 0)
        else:
            return None  # a CA port that is not the destination sends it back: no delivery
        caps = self.port_caps
        crossed = [caps[k] for k in ((switch, port), peer) if k in caps]
        if not crossed:
            return rest
        slow = min(crossed, key=lambda c: c[2])
        mtu = min(rest[0], *(c[0] for c in crossed))
        return (mtu, slow[2], slow[1]) if slow[2] <= rest[1] else (mtu, rest[1], rest[2])

    @functools.cached_property
    def pkey_tables(self) -> "CompactRecords":
        def rows():
            for lid, port, modifier, t in self._tables("pkeys"):
                block, switch_port = fw.pkey_from_modifier(modifier)
                yield lid, port or switch_port, block, t
        return CompactRecords(rows(), lambda lid, a, b, t: P_KeyTableRecord(
            lid=lid, block_num=b, port_num=a, p_keys=t.p_keys), ("port_num", "block_num"))

    @functools.cached_property
    def sl2vl_tables(self) -> "CompactRecords":
        def rows():
            for lid, _port, modifier, t in self._tables("sl2vl"):
                inp, outp = fw.sl2vl_from_modifier(modifier)  # a CA port's: 0, 0
                yield lid, inp, outp, t
        return CompactRecords(rows(), lambda lid, a, b, t: SLtoVLMappingTableRecord(
            lid=lid, input_port_num=a, output_port_num=b, sl_to_vl=t.sl_to_vl), ("input_port_num", "output_port_num"))

    @functools.cached_property
    def vlarb_tables(self) -> "CompactRecords":
        def rows():
            for lid, port, modifier, t in self._tables("vlarb"):
                yield lid, port or modifier & 0xFF, modifier >> 16, t
        return CompactRecords(rows(), lambda lid, a, b, t: VLArbitrationTableRecord(
            lid=lid, output_port_num=a, block_num=b, **{k: getattr(t, k) for k in _VLARB}),
            ("output_port_num", "block_num"))

    @staticmethod
    def sms(sms: Iterable[tuple[int, SMInfo]], reveal_keys: bool) -> list[SMInfoRecord]:
        return [SMInfoRecord(lid=lid, guid=i.guid, sm_key=i.sm_key if reveal_keys else 0, act_count=i.act_count,
                             priority=i.priority, sm_state=i.sm_state) for lid, i in sms]

    def port_of_gid(self, gid: int):
        """(node, port) a GID names, by its port GUID or an alias GUID of the port (None: no
        port of the subnet, or another subnet prefix)."""
        guid = gid & (1 << 64) - 1
        hit = self.subnet.port_of_guid(guid)
        if hit is None:
            base = self.alias_port(guid)
            hit = self.subnet.port_of_guid(base) if base is not None else None
        return hit if hit is not None and self.gid(*hit) >> 64 == gid >> 64 else None

    def gid(self, node, port: int) -> int:
        """A port's GID: its GidPrefix (the default one when unset) and its port GUID."""
        pi = node.ports.get(0 if node.is_switch else port)
        prefix = (pi.gid_prefix if pi is not None else 0) or DEFAULT_GID_PREFIX
        return prefix << 64 | node.port_guid(port)


def _fields(record: type, skip: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(n for n in record.LAYOUT.names if n not in skip)  # type: ignore[attr-defined]


_NODE_INFO = _fields(NodeRecord, ("lid", "node_string"))
_PORT_INFO = _fields(PortInfoRecord, ("endport_lid", "port_num", "options"))
_SWITCH_INFO = _fields(SwitchInfoRecord, ("lid",))
_VLARB = VLArbitrationTable.LAYOUT.names  # type: ignore[attr-defined]


class CompactRecords(Sequence):
    """A table record kind kept compact: per record one packed (LID, a, b) key in an array
    and a reference to what the rest is built from (a table shared between equal units,
    `LinkTables`; a switch's whole LFT; a port GUID), sorted by that key, which is the
    order GetTable answers in; each record is built when a query reaches it, never kept.
    ``fields`` names the record fields a and b are (None: always 0). 2 million SL2VL
    records on an 11,664-host fat tree cost 16 bytes each, not ~104."""

    def __init__(self, rows: Iterable[tuple[int, int, int, Any]], build: Callable[..., Any],
                 fields: tuple[str | None, str | None]):
        keyed = sorted((((lid << 32 | a << 16 | b), t) for lid, a, b, t in rows), key=lambda kt: kt[0])
        self._keys = array.array("Q", (k for k, _ in keyed))
        self._tables = [t for _, t in keyed]
        self._build = build
        self._fields = fields

    def __len__(self) -> int:
        return len(self._keys)

    def _record(self, i: int):
        k = self._keys[i]
        return self._build(k >> 32, k >> 16 & 0xFFFF, k & 0xFFFF, self._tables[i])

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self._record(j) for j in range(*i.indices(len(self)))]
        return self._record(i if i >= 0 else i + len(self))

    def __iter__(self) -> Iterator[Any]:
        return (self._record(i) for i in range(len(self)))

    def _lid_range(self, lid: int) -> range:
        return range(bisect.bisect_left(self._keys, lid << 32), bisect.bisect_left(self._keys, (lid + 1) << 32))

    def of_lid(self, lid: int) -> list:
        """The records of one LID (a query that names its LID builds only those)."""
        return [self._record(i) for i in self._lid_range(lid)]

    def select(self, query: Any, mask: int) -> Iterator[Any]:
        """The records, in order, whose LID and key fields equal what ``query`` selects of
        them (``mask``, its ComponentMask; its other components are for the caller to
        match): a LID found by bisect, the key fields compared on the keys, a record built
        only for a key that passes."""
        cls = type(query)
        span = self._lid_range(query.lid) if mask & cls.mask("lid") else range(len(self))
        want = part = 0
        for name, shift in zip(self._fields, (16, 0)):
            if name is not None and mask & cls.mask(name):
                want, part = want | getattr(query, name) << shift, part | 0xFFFF << shift
        keys = self._keys
        return (self._record(i) for i in span if keys[i] & part == want)
