"""`Subnet`: the subnet model, one immutable value of what the SM knows of its fabric.

The nodes (with the PortInfo and SwitchInfo last read or confirmed by a Set), the cables,
the LIDs, the LFTs and MFT units the switches hold as far as our own reads and confirmed
Sets know (a block never read, or written without confirmation, is unknown), the nodes
whose link tables are unknown, and what the SA answers from besides (the SMs seen, path
SLs, P_Keys, the per-port tables, the QoS policy). Its builder is `model.topology.Topology`,
which the directed-route walk (and a sweep, and a repair's patch) fills; `Subnet.build`
freezes one into the model: from then on nobody changes it, a repair patches a `fork`.

Who makes one: a sweep when its writes end (`SweepResult.known`, `sweep.write.known_after`);
the daemon's own discovery (`build` with no table known); the SA's extras go on at
`from_sweep`. Who holds one: the running SM, one object (`sm.shared.Shared.subnet`), which
its SA answers from and its repairs, the audit and a drain plan against
(`SweepOptions.known`, read through `sweep.tables.KnownTables`). Readers never see a
half-swept state.
"""
from __future__ import annotations

import bisect
import dataclasses
import functools
import types
import weakref
from array import array
from typing import TYPE_CHECKING, AbstractSet, Any, Callable, Container, Generic, Iterable, Iterator, Mapping, Sequence, TypeVar

from mad.attributes import SMInfo
from mad.forwarding import LFT_BLOCK_SIZE, LFT_NO_PORT, PKEY_DEFAULT, PKEY_FULL_MEMBER
from smagent.model import walk
from smagent.model.order import opensm_key

if TYPE_CHECKING:
    from smagent.config.qospolicy import Membership, QosLevel, QosPolicy, Rule
    from smagent.model.topology import DNode, Topology

NO_PORT = LFT_NO_PORT  # an LFT entry that forwards nowhere
_EMPTY: Mapping = types.MappingProxyType({})


@dataclasses.dataclass(frozen=True)
class Subnet:
    """The subnet model. ``topology``: the nodes (`model.topology.DNode`: ``ports`` port ->
    PortInfo, port 0 of a switch its management port; ``switch_info``; ``port_guids``; DR
    paths), cables (``links``, (guid, port) -> (guid, port), both ways), our own port and
    what did not answer; never changed once in a Subnet. ``lids``: LID -> (node GUID,
    LID-carrying port) for every LID of every port's LMC range; ``lft``: switch GUID -> its
    whole LFT as far as known (entry i is LID i's exit port; NO_PORT where unknown or
    unused), ``lft_unknown`` the (switch, block)s inside it that are unknown (a block past
    a table's end is unknown too); ``mft``: (switch, block, position) -> PortMasks known;
    ``link_tables_unknown``: GUIDs of nodes whose SL2VL/VLArb/P_Key tables are unknown
    (a repair reads them again); ``sms``: (LID, SMInfo) of every SM seen, ours first;
    ``generation`` counts the snapshots a daemon published."""
    topology: Topology
    lmc: int
    sm_lid: int
    lft: Mapping[int, bytes]
    mft: Mapping[tuple[int, int, int], tuple[int, ...]]
    lft_unknown: frozenset[tuple[int, int]] = frozenset()
    link_tables_unknown: frozenset[int] = frozenset()
    # the ports the last sweep found as planned: (what it planned with, {(guid, port): (its
    # PortInfo, the peer's, OperationalVLs)}): a repair plans only the others
    # (`smagent.sweep.ports.settled_before`); None: plan every port
    settled: tuple | None = None
    sms: tuple[tuple[int, SMInfo], ...] = ()
    generation: int = 0
    # the SL of the paths from each switch's CA ports, by DLID, as a VL-layering engine
    # (dfsssp) chose them (`SweepResult.path_sls`); None: every path on SL 0
    path_sls: Mapping[int, bytes] | None = None
    # every end port's P_Keys ((node GUID, port: 0 on a switch) -> 16-bit keys, membership
    # bit set for full), as the partitions the sweep wrote give them; None: the default
    # partition, full, everywhere
    pkeys: Mapping[tuple[int, int], tuple[int, ...]] | None = None
    # the per-port tables as the SM last read or wrote them: (kind "pkeys" | "sl2vl" |
    # "vlarb", node GUID, CA port or 0 on a switch, AttributeModifier) -> the table
    # attribute (`SweepResult.link_tables`, kept compact: `LinkTables`); a unit never
    # read is absent
    tables: Mapping[tuple[str, int, int, int], Any] = dataclasses.field(default_factory=lambda: LinkTables({}))
    # the QoS policy the sweep planned with (`smagent.config.qospolicy.QosPolicy`): the SL of a
    # query that names a service ID or P_Key (`request_sl`); None: none
    qos_policy: QosPolicy | None = None
    # who is in the policy's port groups on this fabric (`qospolicy.Membership`)
    qos_members: Membership | None = None
    # partition (15-bit P_Key) -> the SL its partitions.conf line gives (`sl=`), where the
    # SM manages QoS (not with links qos false, as OpenSM honours it only with -Q)
    partition_sls: Mapping[int, int] = dataclasses.field(default_factory=lambda: _EMPTY)

    @classmethod
    def build(cls, topology: Topology, lft_blocks: Mapping[tuple[int, int], bytes] | None = None,
              mft: Mapping[tuple[int, int, int], Sequence[int]] | None = None, *, lmc: int = 0, sm_lid: int = 0,
              link_tables_unknown: Iterable[int] = ()) -> Subnet:
        """``topology`` frozen into the model, with the LFT blocks {(switch, block): bytes}
        and MFT units {(switch, block, position): masks} known (None: none, as discovery
        leaves it). ``topology`` is the model's from now on: its builder leaves it alone."""
        known = LftBlocks.of(lft_blocks or {}).cut()  # a sweep's `LftBlocks`: its tables, not cut up and joined again
        return cls(topology=topology, lmc=lmc, sm_lid=sm_lid, lft=known.tables, lft_unknown=known.unknown,
                   mft=types.MappingProxyType({k: tuple(v) for k, v in (mft or {}).items()}),
                   link_tables_unknown=frozenset(link_tables_unknown))

    @classmethod
    def from_sweep(cls, result, *, sms: tuple[tuple[int, SMInfo], ...] = (), generation: int = 0,
                   partitions=None, qos_policy=None, previous: Subnet | None = None, qos: bool = True) -> Subnet:
        """The model a finished (not dry-run) `SweepResult` leaves, with what the SA answers
        from: its ``known`` when the apply ran (else the tables planned against with the
        planned blocks on top). ``partitions``: the `smagent.config.partitions.PartitionConfig`
        the sweep wrote (None: the default partition everywhere); ``qos_policy``: the QoS
        policy it planned with (its SLs by target port are in the result's ``path_sls``
        already); ``qos``: whether the SM manages QoS (partitions' `sl=` then give path SLs).
        ``previous``: the model before, whose per-port tables of nodes still there stand
        where this sweep read none (a repair reads only the nodes that changed)."""
        core = result.known
        if core is None:
            blocks = dict(result.lft_current)
            blocks.update(((c.switch, c.block), bytes(c.new)) for c in result.lft_changes)
            mft = dict(result.mft_current)
            mft.update(((m.switch, m.block, m.position), list(m.new)) for m in result.mft_changes)
            core = cls.build(result.topology, blocks, mft, lmc=result.lid_plan.lmc,
                             sm_lid=result.lid_plan.master_lid)
        topo = core.topology
        pkeys = None if partitions is None else _pkeys(partitions, topo)
        return dataclasses.replace(
            core, sms=tuple(sms), generation=generation,
            path_sls=None if result.path_sls is None else types.MappingProxyType(dict(result.path_sls)),
            pkeys=pkeys, qos_policy=qos_policy,
            qos_members=None if qos_policy is None else _qos_members(qos_policy, topo, partitions, pkeys),
            tables=_tables(previous, result.link_tables, topo), partition_sls=types.MappingProxyType(
                {} if partitions is None or not qos else
                {p.pkey: p.flag("sl") for p in partitions.partitions if p.flag("sl") is not None}))

    # -- the topology, read only -------------------------------------------------------
    @functools.cached_property
    def nodes(self) -> Mapping[int, DNode]:
        return types.MappingProxyType(self.topology.nodes)

    @functools.cached_property
    def links(self) -> Mapping[tuple[int, int], tuple[int, int]]:
        return types.MappingProxyType(self.topology.links)

    @property
    def local(self) -> tuple[int, int]:
        return self.topology.local

    @functools.cached_property
    def end_ports(self) -> tuple[tuple[DNode, int], ...]:
        """(node, port) of every LID-carrying port (`DNode.lid_ports`: port 0 of a switch,
        every discovered port of a CA), in node order: the one walk over the nodes that
        `lids`, `by_port_guid`, the SA's end ports and the audit share."""
        return tuple((n, p) for n in self.topology.nodes.values() for p in n.lid_ports())

    @functools.cached_property
    def lids(self) -> Mapping[int, tuple[int, int]]:
        """LID -> (node GUID, LID-carrying port), every LID of every port's LMC range."""
        lids: dict[int, tuple[int, int]] = {}
        for n, p in self.end_ports:
            pi = n.ports.get(p)
            if pi is None or not pi.lid:
                continue
            if n.is_switch or not pi.lmc:
                lids[pi.lid] = (n.guid, p)
                continue
            where = (n.guid, p)
            for lid in range(pi.lid, pi.lid + (1 << pi.lmc)):
                lids[lid] = where
        return types.MappingProxyType(lids)

    @functools.cached_property
    def by_port_guid(self) -> Mapping[int, tuple[int, int]]:
        """Port GUID -> (node GUID, port) of every LID-carrying port."""
        return types.MappingProxyType({n.port_guid(p): (n.guid, p) for n, p in self.end_ports})

    @functools.cached_property
    def switches(self) -> tuple[DNode, ...]:
        """The switches, in node order (`Topology.switches`, worked out once)."""
        return tuple(n for n in self.topology.nodes.values() if n.is_switch)

    @functools.cached_property
    def _switch_lids(self) -> Mapping[int, int]:
        at: dict[int, int] = {}
        for n in self.switches:
            at.setdefault(n.lid(0), n.guid)
        return at

    def switch_at_lid(self, lid: int) -> int | None:
        """The GUID of the first switch (in node order) whose port 0 has LID ``lid`` (0:
        the first without one), or None."""
        return self._switch_lids.get(lid)

    # -- functional updates ------------------------------------------------------------
    def evolve(self, **changes: Any) -> Subnet:
        """The same model with ``changes`` (field names) in place: a new value."""
        return dataclasses.replace(self, **changes)

    def fork(self) -> Subnet:
        """The same model with a topology of its own (`Topology.fork`), for a repair or the
        audit to patch before anyone reads it, or a sweep to plan on; the tables shared.
        What the model works out of its topology (`lids`, ...) is worked out on first
        read, so a fork's follows its patch."""
        return dataclasses.replace(self, topology=self.topology.fork())

    def with_tables(self, lft_blocks: Mapping[tuple[int, int], bytes] = _EMPTY,
                    mft: Mapping[tuple[int, int, int], Sequence[int]] = _EMPTY) -> Subnet:
        """The same model with these LFT blocks and MFT units known (what was read in
        their place: the audit's drift); blocks a table grows by that nobody read are unknown."""
        known = self.lft_blocks.updated(put=lft_blocks)
        units = {**self.mft, **{k: tuple(v) for k, v in mft.items()}}
        return dataclasses.replace(self, lft=known.tables, lft_unknown=known.unknown,
                                   mft=types.MappingProxyType(units))

    # -- the LFTs by block ---------------------------------------------------------------
    def lft_block(self, switch: int, block: int) -> bytes | None:
        """LFT block ``block`` of ``switch`` as known; None where unknown."""
        return self.lft_blocks.get((switch, block))

    @functools.cached_property
    def lft_blocks(self) -> LftBlocks:
        """The known LFT blocks as {(switch, block): bytes}, a view (no copy)."""
        return LftBlocks(self.lft, self.lft_unknown)

    def path_sl(self, src: tuple[int, int], dlid: int) -> int:
        """The SL of the path from port ``src`` to ``dlid``: its switch's (a CA port's, the
        switch it hangs off) row of `path_sls`; 0 without one."""
        if self.path_sls is None:
            return 0
        g, p = src
        switch = g if self.nodes[g].is_switch else self.links.get((g, p), (None, 0))[0]
        row = self.path_sls.get(switch) if switch is not None else None
        return row[dlid] if row is not None and dlid < len(row) else 0

    def qos_rule(self, src_guid: int | None, dst_guid: int, service_id: int | None = None, pkey: int | None = None,
                 qos_class: int | None = None) -> Rule | None:
        """The QoS policy's first rule a PathRecord query from port ``src_guid`` to port
        ``dst_guid`` naming ``service_id`` / ``pkey`` / ``qos_class`` (None: not in the
        query) matches (`QosPolicy.match`), or None."""
        if self.qos_policy is None:
            return None
        return self.qos_policy.match(dst_guid, service_id, pkey, src_guid=src_guid, qos_class=qos_class,
                                     members=self.qos_members)

    def qos_level(self, rule: Rule | None) -> QosLevel | None:
        """The level a query gets: its rule's, else the policy's default; None without a policy."""
        if rule is not None:
            return rule.level
        return self.qos_policy.default if self.qos_policy is not None else None

    def request_sl(self, src: tuple[int, int], dst_guid: int, dlid: int, service_id: int | None = None,
                   pkey: int | None = None, path_pkey: int | None = None, rule: Rule | None = None) -> int:
        """The SL of a PathRecord query for the path from port ``src`` to ``dlid`` (port GUID
        ``dst_guid``) naming ``service_id`` / ``pkey`` (None: not in the query), in
        OpenSM's order: the QoS policy's first matching rule (``rule``, else
        `qos_rule`) unless it is a target rule, else the path's SL (`path_sl`: the
        engine's layer, or the policy's target-port or default SL, which the sweep checked
        against the layers), else the policy's default level, else the SL of the partition
        of the path's P_Key (``path_pkey``; `partition_sls`), else 0."""
        if rule is None and self.qos_policy is not None:
            node = self.nodes.get(src[0])
            rule = self.qos_rule(node.port_guid(src[1]) if node else None, dst_guid, service_id, pkey)
        if rule is not None and not rule.by_destination:
            return rule.sl
        if self.path_sls is None:
            level = self.qos_level(rule)
            if level is not None:
                return level.sl
            if path_pkey is not None:
                return self.partition_sls.get(path_pkey & 0x7FFF, 0)
        return self.path_sl(src, dlid)

    def sl_fixed(self) -> bool:
        """Whether the SM decides a path's SL (a query asking another finds no path, as
        OpenSM answers): the engine's layers or the QoS policy's SLs (`path_sls`), or a
        QoS policy (its levels all give one); else any SL the SL2VL tables carry will do."""
        return self.path_sls is not None or self.qos_policy is not None

    def sl_dropped(self, hops: list[tuple[tuple[int, int], tuple[int, int]]], sl: int) -> bool:
        """Whether an SL2VL table on the way (the source port's, each switch's from its
        entry to its exit port), as the SM read or wrote it, sends ``sl`` to VL15, where a
        data packet is dropped. A table the snapshot does not hold is taken to carry it."""
        if not hops or sl not in self._sls_to_vl15:
            return False
        (g, p), _peer = hops[0]
        units = [("sl2vl", g, p, 0)] if not self.nodes[g].is_switch else []
        for ((_g, _p), (peer, entry)), ((_g2, out), _n) in zip(hops, hops[1:]):
            units.append(("sl2vl", peer, 0, entry << 8 | out))
        for key in units:
            try:
                table = self.tables[key]
            except KeyError:
                continue
            if table.sl_to_vl[sl] & 0xF == 15:
                return True
        return False

    @functools.cached_property
    def _sls_to_vl15(self) -> frozenset[int]:
        """The SLs some SL2VL table of the snapshot sends to VL15 (usually none: then no
        path needs its tables looked up). Each distinct table is looked at once."""
        tables = self.tables
        distinct: list[Any]
        if isinstance(tables, LinkTables):
            kind = LINK_TABLE_KINDS.index("sl2vl")
            distinct = list({id(values[i]): values[i] for keys, idx, values in tables._nodes.values()
                             for k, i in zip(keys, idx) if k >> 40 == kind}.values())
        else:
            distinct = [t for (k, *_rest), t in tables.items() if k == "sl2vl"]
        return frozenset(sl for t in distinct for sl, vl in enumerate(t.sl_to_vl) if vl & 0xF == 15)

    def path_pkey(self, src: tuple[int, int], dst: tuple[int, int], wanted: int | None = None) -> int | None:
        """The P_Key of a path between two end ports ((node GUID, port), 0 on a switch): the
        source's key (its membership bit as the source holds it) of the first partition the
        destination is in too, with at least one of them a full member (``wanted``: that
        partition only); None when they share no partition, so there is no path (IBA 10.9:
        limited members do not talk to each other). Which partition is first, when they
        share several, IBA leaves open: OpenSM's order (`model.order.opensm_key`), so hosts
        get the P_Key they would get from OpenSM."""
        if self.pkeys is None:
            return PKEY_DEFAULT if wanted is None or wanted & 0x7FFF == 0x7FFF else None
        theirs = {k & 0x7FFF: k for k in self.pkeys.get(dst, ())}
        for k in sorted(self.pkeys.get(src, ()), key=lambda k: opensm_key(k & 0x7FFF, 2)):
            other = theirs.get(k & 0x7FFF)
            if other is None or not (k | other) & PKEY_FULL_MEMBER or (wanted is not None and (wanted ^ k) & 0x7FFF):
                continue
            return k
        return None

    def share_pkey(self, a: tuple[int, int], b: tuple[int, int]) -> bool:
        """Whether two ports ((node GUID, port): an end port, 0 on a switch, or a switch's
        external port) share a partition, as OpenSM's SA decides who may see what: the
        same port; either without P_Keys (no partitions configured, an end port in none,
        a switch port whose table the SM did not write; IBA 10.9.2 does not require one);
        else a partition in both with at least one a full member (`path_pkey`'s rule). A
        switch port facing an end port holds that end port's P_Keys where the SM wrote
        them (partition enforcement), so it shares what its peer shares."""
        if self.pkeys is None or a == b:
            return True
        held = []
        for g, p in (a, b):
            node = self.nodes.get(g)
            if node is not None and node.is_switch and p:
                if ("pkeys", g, 0, p << 16) not in self.tables:  # block 0 of port p: never written
                    return True
                g, p = self.links.get((g, p), (g, p))
            if not self.pkeys.get((g, p)):
                return True
            held.append((g, p))
        return self.path_pkey(held[0], held[1]) is not None

    def holds_pkey(self, port: tuple[int, int], pkey: int) -> bool:
        """Whether an end port ((node GUID, port), 0 on a switch) is a member, full or
        limited, of ``pkey``'s partition (without partitions: the default one only)."""
        base = pkey & 0x7FFF
        if self.pkeys is None:
            return base == PKEY_DEFAULT & 0x7FFF
        return any(k & 0x7FFF == base for k in self.pkeys.get(port, ()))

    def with_sms(self, sms: tuple[tuple[int, SMInfo], ...]) -> Subnet:
        """The same snapshot with the SMs seen replaced (they change without a sweep)."""
        return dataclasses.replace(self, sms=tuple(sms))

    def port_of_lid(self, lid: int) -> tuple[DNode, int] | None:
        hit = self.lids.get(lid)
        return (self.nodes[hit[0]], hit[1]) if hit else None

    def port_of_guid(self, guid: int) -> tuple[DNode, int] | None:
        """(node, LID-carrying port) of a port GUID."""
        hit = self.by_port_guid.get(guid)
        return (self.nodes[hit[0]], hit[1]) if hit else None

    def base_lid(self, node: DNode, port: int) -> int:
        pi = node.ports.get(0 if node.is_switch else port)
        return pi.lid if pi is not None else 0

    def lft_exit(self, switch: int, dlid: int) -> int | None:
        """The port a switch's LFT sends ``dlid`` out of; None where it sends it nowhere (no
        entry, NO_PORT, a port it lacks, or port 0 at a switch that does not own the LID:
        `model.walk.lft_exit`)."""
        node = self.nodes.get(switch)
        port = walk.lft_exit(self.lft.get(switch, b""), dlid, node.num_ports if node is not None else 0)
        return port if isinstance(port, int) else None

    def route(self, src: tuple[int, int], dlid: int) -> list[tuple[tuple[int, int], tuple[int, int]]] | None:
        """The links a packet from port ``src`` (node GUID, port) to ``dlid`` crosses, as
        (exit port, entry port) pairs, following the LFTs (`model.walk`); [] when ``src``
        owns ``dlid``; None when the LFTs do not deliver it (no entry, a loop, a dead end)."""
        dest = self.lids.get(dlid)
        if dest is None:
            return None
        nodes = self.nodes

        def owns(guid: int, port: int) -> bool:
            return guid == dest[0] and (port == dest[1] or nodes[guid].is_switch)

        def exit_of(switch: int, dlid: int) -> int | str:
            return walk.lft_exit(self.lft.get(switch, b""), dlid, nodes[switch].num_ports)

        w = walk.walk(src, dlid, is_switch=lambda g: nodes[g].is_switch, owns=owns, exit_of=exit_of,
                      link_of=self.links.get)
        return w.hops if w.delivered else None

    def link_records(self) -> Iterator[tuple[int, int, int, int]]:
        """(from LID, from port, to port, to LID) of every link, both directions."""
        for (a, pa), (b, pb) in self.links.items():
            na, nb = self.nodes[a], self.nodes[b]
            yield self.base_lid(na, pa), pa, pb, self.base_lid(nb, pb)


def _qos_members(policy, topo, partitions, pkeys):
    from smagent.config import qospolicy
    return qospolicy.topology_membership(policy, topo, partitions, pkeys)


def _pkeys(config, topo) -> Mapping[tuple[int, int], tuple[int, ...]]:
    from smagent.config import partitions as partmod
    return types.MappingProxyType({k: tuple(v) for k, v in partmod.resolve(config, topo).ports.items()})


def _tables(previous: Subnet | None, read: dict, topo) -> LinkTables:
    before = previous.tables if previous is not None else None
    if before is not None and not isinstance(before, LinkTables):  # a snapshot built by hand
        read = {**{k: v for k, v in before.items() if k[1] in topo.nodes}, **read}
        before = None
    return LinkTables.build(before, read, topo.nodes)


LINK_TABLE_KINDS = ("pkeys", "sl2vl", "vlarb")  # `LinkTables` keys: kind, port, modifier in one int
_KIND_BITS = {k: i << 40 for i, k in enumerate(LINK_TABLE_KINDS)}


class LinkTables(Mapping):
    """(kind, node GUID, port, AttributeModifier) -> table attribute, held per node, not
    per entry: a switch has an SL2VL table per (input, output) pair (2 million on an
    11,664-host fat tree) but only a handful of distinct ones. Per node: its keys packed in
    one sorted array (kind << 40 | port << 32 | modifier), an array of indices into the
    node's distinct tables, and those tables, each distinct value one object across the
    snapshot. Immutable; the next snapshot shares the nodes no sweep read again."""
    __slots__ = ("_nodes", "_len")

    def __init__(self, nodes: Mapping[int, tuple[array, array, tuple]]):
        self._nodes = types.MappingProxyType(dict(nodes))
        self._len = sum(len(keys) for keys, _idx, _values in nodes.values())

    @classmethod
    def build(cls, previous: LinkTables | None, read: Mapping[tuple[str, int, int, int], Any],
              present: Container[int]) -> LinkTables:
        """The tables of ``previous`` for the nodes in ``present``, with ``read`` (the
        units a sweep read or wrote) on top; only the nodes read are packed again."""
        nodes = {} if previous is None else {g: t for g, t in previous._nodes.items() if g in present}
        # by node, as packed keys and their tables in read order: 16 bytes a unit while
        # building, a dict only for one node at a time
        fresh: dict[int, tuple[array, list]] = {}
        for (kind, guid, port, modifier), table in read.items():
            keys, tables = fresh.setdefault(guid, (array("Q"), []))
            keys.append(_KIND_BITS[kind] | port << 32 | modifier)
            tables.append(table)
        interned: dict[Any, Any] = {}
        for guid, (keys, tables) in fresh.items():
            old = nodes.get(guid)
            units = {} if old is None else dict(zip(old[0], (old[2][i] for i in old[1])))  # not read again: stand
            units.update(zip(keys, tables))
            nodes[guid] = _pack(units, interned)
        return cls(nodes)

    def __getitem__(self, key: tuple[str, int, int, int]) -> Any:
        kind, guid, port, modifier = key
        node, bits = self._nodes.get(guid), _KIND_BITS.get(kind)
        if node is not None and bits is not None:
            keys, idx, values = node
            want = bits | port << 32 | modifier
            i = bisect.bisect_left(keys, want)
            if i < len(keys) and keys[i] == want:
                return values[idx[i]]
        raise KeyError(key)

    def __iter__(self) -> Iterator[tuple[str, int, int, int]]:
        return (k for k, _t in self.items())

    def __len__(self) -> int:
        return self._len

    def items(self) -> Iterator[tuple[tuple[str, int, int, int], Any]]:  # type: ignore[override]
        for guid, (keys, idx, values) in self._nodes.items():
            for key, i in zip(keys, idx):
                yield (LINK_TABLE_KINDS[key >> 40], guid, key >> 32 & 0xFF, key & 0xFFFFFFFF), values[i]

    def units(self, kind: str) -> Iterator[tuple[int, int, int, Any]]:
        """(node GUID, port, AttributeModifier, table) of every unit of ``kind``."""
        lo = _KIND_BITS[kind]
        for guid, (keys, idx, values) in self._nodes.items():
            for i in range(bisect.bisect_left(keys, lo), bisect.bisect_left(keys, lo + (1 << 40))):
                key = keys[i]
                yield guid, key >> 32 & 0xFF, key & 0xFFFFFFFF, values[idx[i]]


_T = TypeVar("_T")


class PerModel(Generic[_T]):
    """``fn(model)`` kept while the model asked about is the one it was worked out of
    (weakly: never keeps an old model alive): what a service derives of the model the
    daemon holds and is asked often, worked out once per model."""

    def __init__(self, fn: Callable[[Any], _T]):
        self.fn = fn
        self._of: Callable[[], object] = lambda: None
        self._value: _T | None = None

    def __call__(self, model: Any) -> _T:
        if self._of() is not model:
            self._value, self._of = self.fn(model), weakref.ref(model)
        return self._value  # type: ignore[return-value]  # set for this very model

    def held(self, model: Any) -> _T | None:
        """The value if it was worked out of ``model`` already (None: not, or of another)."""
        return self._value if self._of() is model else None


class InterningTables(dict):
    """`SweepResult.link_tables` as a sweep fills it: equal tables (`table_key`) stored as
    one object, so the millions of units a big fabric's sweep reads hold a handful of
    tables until the snapshot packs them (`LinkTables`)."""

    def __init__(self, *args: Any, **kw: Any):
        super().__init__()
        self._interned: dict[Any, Any] = {}
        self._held: set[int] = set()  # ids of the interned tables (alive in ``_interned``)
        self.update(*args, **kw)

    def __setitem__(self, key: Any, table: Any) -> None:
        if id(table) not in self._held:  # an interned table is stored as it is, its key not worked out again
            table = self._interned.setdefault(table_key(table), table)
            self._held.add(id(table))
        super().__setitem__(key, table)

    def update(self, *args: Any, **kw: Any) -> None:  # dict.update would bypass __setitem__
        # a sweep's confirmed Sets share a few table objects (2 million SL2VL units on
        # 11,664 hosts): each object's key worked out once, not once per unit; the pairs
        # are taken as they come (a copy of them all was 2 million entries more at the peak)
        by_id: dict[int, tuple[Any, Any]] = {}  # id -> (the table, held so the id stays its; interned)
        put = super().__setitem__
        for key, table in _pairs(args, kw):
            hit = by_id.get(id(table))
            if hit is None:
                hit = by_id[id(table)] = (table, self._interned.setdefault(table_key(table), table))
                self._held.add(id(hit[1]))
            put(key, hit[1])

    def __reduce__(self):  # copy/pickle as what it holds
        return (type(self), (dict(self),))


def _pairs(args: tuple, kw: dict) -> Iterator[tuple[Any, Any]]:
    """The (key, value) pairs ``dict.update(*args, **kw)`` would store, in its order."""
    for a in args:
        yield from ((k, a[k]) for k in a.keys()) if hasattr(a, "keys") else a
    yield from kw.items()


def table_key(table: Any) -> tuple:
    """What makes two table attributes equal, hashable: the type and the field values."""
    return (type(table), *(_frozen(getattr(table, n)) for n in table.LAYOUT.names))


def _pack(units: dict[int, Any], interned: dict[Any, Any]) -> tuple[array, array, tuple]:
    """One node's units (packed key -> table) as (sorted keys, index per key, distinct
    tables); equal tables (by type and field values) become one object via ``interned``."""
    keys = array("Q", sorted(units))
    values: list[Any] = []
    where: dict[int, int] = {}  # id of a table object -> its index: most pairs share objects
    slot: dict[int, int] = {}  # id of an interned table -> its index
    idx = array("H")
    for key in keys:
        table = units[key]
        i = where.get(id(table))
        if i is None:
            one = interned.setdefault(table_key(table), table)
            i = slot.setdefault(id(one), len(values))
            if i == len(values):
                values.append(one)
            where[id(table)] = i
        idx.append(i)
    return keys, idx, tuple(values)


def _frozen(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _lfts(blocks: Mapping[tuple[int, int], bytes]) -> tuple[dict[int, bytes], frozenset[tuple[int, int]]]:
    """Switch GUID -> the whole LFT from its blocks (missing blocks: NO_PORT), and the
    (switch, block)s missing below each table's last block."""
    top: dict[int, int] = {}
    for sw, b in blocks:
        top[sw] = max(top.get(sw, -1), b)
    out: dict[int, bytes] = {}
    unknown: set[tuple[int, int]] = set()
    for sw, last in top.items():
        table = bytearray([NO_PORT]) * ((last + 1) * LFT_BLOCK_SIZE)
        for b in range(last + 1):
            blk = blocks.get((sw, b))
            if blk is not None:
                table[b * LFT_BLOCK_SIZE:(b + 1) * LFT_BLOCK_SIZE] = blk
            else:
                unknown.add((sw, b))
        out[sw] = bytes(table)
    return out, frozenset(unknown)


class LftBlocks(Mapping):
    """LFT blocks as {(switch, block): bytes}, held as whole tables: ``tables`` switch ->
    its LFT (whole blocks), ``unknown`` the (switch, block)s inside them not known (a block
    past a table's end is not in it either). A `Subnet`'s known blocks (`Subnet.lft_blocks`,
    a view of its tables: one copy of the LFTs, not two) and what a sweep's LFT read found
    (`SweepResult.lft_current`): so that a repair compares, and the model after it is made
    of, whole tables, the switches it did not touch keeping their very bytes, instead of
    cutting every table of the fabric into blocks and joining them again."""
    __slots__ = ("tables", "unknown", "_by_switch")

    def __init__(self, tables: Mapping[int, bytes], unknown: frozenset[tuple[int, int]] = frozenset()):
        self.tables = tables if isinstance(tables, types.MappingProxyType) else types.MappingProxyType(tables)
        self.unknown = unknown
        self._by_switch: dict[int, set[int]] | None = None

    def __reduce__(self):  # copy/pickle as what it holds (a mappingproxy does not pickle)
        return (type(self), (dict(self.tables), self.unknown))

    @classmethod
    def of(cls, blocks: Mapping[tuple[int, int], bytes]) -> LftBlocks:
        """``blocks`` {(switch, block): bytes} as whole tables (as they are if they are)."""
        if isinstance(blocks, LftBlocks):
            return blocks
        tables, unknown = _lfts(blocks)
        return cls(tables, unknown)

    def __getitem__(self, key: tuple[int, int]) -> bytes:
        blk = self.get(key)
        if blk is None:
            raise KeyError(key)
        return blk

    def get(self, key: tuple[int, int], default: Any = None) -> Any:
        switch, block = key
        table = self.tables.get(switch)
        end = (block + 1) * LFT_BLOCK_SIZE
        if table is None or len(table) < end or block < 0 or key in self.unknown:
            return default
        return table[end - LFT_BLOCK_SIZE:end]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, tuple) and len(key) == 2 and self.get(key) is not None

    def __iter__(self) -> Iterator[tuple[int, int]]:
        unknown = self.unknown
        for sw, table in self.tables.items():
            for b in range(len(table) // LFT_BLOCK_SIZE):
                if (sw, b) not in unknown:
                    yield sw, b

    def __len__(self) -> int:
        tables = self.tables
        inside = sum(1 for sw, b in self.unknown if b < len(tables.get(sw, b"")) // LFT_BLOCK_SIZE)
        return sum(len(t) // LFT_BLOCK_SIZE for t in tables.values()) - inside

    def unknown_of(self, switch: int) -> AbstractSet[int]:
        """The blocks of ``switch``'s table that are not known."""
        if self._by_switch is None:
            by: dict[int, set[int]] = {}
            for sw, b in self.unknown:
                by.setdefault(sw, set()).add(b)
            self._by_switch = by
        return self._by_switch.get(switch, frozenset())

    def whole(self, switch: int) -> bytes | None:
        """``switch``'s table when every block of it is known (None: else, or none)."""
        table = self.tables.get(switch)
        if table is None or any(b < len(table) // LFT_BLOCK_SIZE for b in self.unknown_of(switch)):
            return None
        return table

    def cut(self, limits: Mapping[int, int] | None = None) -> LftBlocks:
        """These blocks as `_lfts` would join them again: each table ending at its last
        known block, NO_PORT in the unknown ones (``limits``: only the switches it names,
        each cut to its first so many blocks first). A table that needs none of that is
        the very same object."""
        tables: dict[int, bytes] = {}
        unknown: list[tuple[int, int]] = []
        for sw, n in (limits.items() if limits is not None else ((sw, None) for sw in self.tables)):
            table = self.tables.get(sw)
            if table is None:
                continue
            table, lacking = _settled(table, self.unknown_of(sw), n)
            if table:
                tables[sw] = table
                unknown += [(sw, b) for b in lacking]
        return LftBlocks(tables, frozenset(unknown))

    def updated(self, dropped: Iterable[tuple[int, int]] = (),
                put: Mapping[tuple[int, int], bytes] | Iterable[tuple[tuple[int, int], bytes]] = ()) -> LftBlocks:
        """These blocks (in `_lfts`'s form: `cut`) with ``dropped`` no longer known and
        ``put`` ({(switch, block): bytes}, or such pairs) known on top, as `_lfts` would join
        a dict of them popped and updated so: only the switches touched are copied, the
        others keep their tables."""
        drops: dict[int, set[int]] = {}
        for sw, b in dropped:
            drops.setdefault(sw, set()).add(b)
        puts: dict[int, dict[int, bytes]] = {}
        for (sw, b), blk in (put.items() if isinstance(put, Mapping) else put):
            puts.setdefault(sw, {})[b] = blk
        if not drops and not puts:
            return self
        tables = dict(self.tables)
        unknown = set(self.unknown)
        for sw in dict.fromkeys([*drops, *puts]):  # in a stable order: a switch new to the tables goes last
            before = self.unknown_of(sw)
            unknown.difference_update((sw, b) for b in before)
            table, lacking = _patched(tables.get(sw, b""), before, drops.get(sw, ()), puts.get(sw, {}))
            if table:
                tables[sw] = table
                unknown.update((sw, b) for b in lacking)
            else:
                tables.pop(sw, None)
        return LftBlocks(tables, frozenset(unknown))


_NO_BLOCK = bytes([NO_PORT]) * LFT_BLOCK_SIZE


def _settled(table: bytes, unknown: Container[int], blocks: int | None) -> tuple[bytes, list[int]]:
    """``table`` cut to ``blocks`` blocks (None: its own), then to its last known block,
    the unknown blocks NO_PORT (`_lfts`'s form), and those unknown blocks; the very same
    object where that changes nothing."""
    nb = len(table) // LFT_BLOCK_SIZE if blocks is None else min(blocks, len(table) // LFT_BLOCK_SIZE)
    lacking = [b for b in range(nb) if b in unknown] if unknown else []
    while lacking and lacking[-1] == nb - 1:
        nb -= 1
        lacking.pop()
    if lacking:
        out = bytearray(table[:nb * LFT_BLOCK_SIZE])
        for b in lacking:
            out[b * LFT_BLOCK_SIZE:(b + 1) * LFT_BLOCK_SIZE] = _NO_BLOCK
        return bytes(out), lacking
    return (table if len(table) == nb * LFT_BLOCK_SIZE else table[:nb * LFT_BLOCK_SIZE]), lacking


def _patched(table: bytes, unknown: Container[int], dropped: Container[int],
             put: Mapping[int, bytes]) -> tuple[bytes, list[int]]:
    """One switch's ``table`` with the blocks ``dropped`` unknown and ``put`` written, in
    `_lfts`'s form, and its unknown blocks."""
    known = {b for b in range(len(table) // LFT_BLOCK_SIZE) if b not in unknown and b not in dropped} | put.keys()
    if not known:
        return b"", []
    end = (max(known) + 1) * LFT_BLOCK_SIZE
    out = bytearray(table[:end])
    out += bytes([NO_PORT]) * (end - len(out))
    lacking = [b for b in range(end // LFT_BLOCK_SIZE) if b not in known]
    for b in lacking:
        out[b * LFT_BLOCK_SIZE:(b + 1) * LFT_BLOCK_SIZE] = _NO_BLOCK
    for b, blk in put.items():
        out[b * LFT_BLOCK_SIZE:(b + 1) * LFT_BLOCK_SIZE] = blk
    return bytes(out), lacking
