"""A QoS policy (`--qos-policy FILE`, a desired state's ``qos_policy:``): OpenSM's
``qos-policy.conf`` (what `opensm -Q -Y FILE` reads), whole, and the per-port-class
SL2VL and VLArbitration tables OpenSM takes from its opensm.conf (``qos_ca_*``,
``qos_sw0_*``, ``qos_swe_*`` and the ``qos_*`` they default to), written as opensm.conf
lines in the same file. The grammar and every check are `smagent.config.qosparse`'s::

    qos_swe_sl2vl 0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7      # tables (opensm.conf lines)
    port-groups                                         # groups of ports, by
        port-group
            name: Storage                               #   (required; names: case ignored)
            port-guid: 0x10000001, 0x10000005-0x1000000F  #  port GUID ranges
            port-name: stor1/P1                         #   NodeDescription/Pn
            partition: Part1                            #   partition name (partitions file)
            pkey: 0x10-0x12                             #   partition P_Key
            node-type: CA, SELF                         #   CA SWITCH ROUTER ALL SELF (the SM's port)
        end-port-group
    end-port-groups
    qos-setup ... end-qos-setup                         # checked, then ignored (as OpenSM)
    qos-levels
        qos-level
            name: DEFAULT                               # a level named DEFAULT (or qos-ulps'
            sl: 0                                       # default) is required
        end-qos-level
        qos-level
            name: Fast
            sl: 2                                       # required
            mtu-limit: 4       rate-limit: 7            # caps (MTU / Rate codes)
            packet-life: 14    path-bits: 0-1           # lifetime; path bits (read, unused: as OpenSM)
            pkey: 0x10                                  # the P_Keys its paths may have
        end-qos-level
    end-qos-levels
    qos-match-rules
        qos-match-rule                                  # all of its criteria must match
            source: Storage     destination: Storage    # port groups
            service-id: 0x10000-0x1FFFF   pkey: 0x10    # ranges the query must give
            qos-class: 1-3
            qos-level-name: Fast                        # required
        end-qos-match-rule
    end-qos-match-rules
    qos-ulps
        default                                : 0      # SL of the simplified levels
        any, service-id 0x10000-0x1FFFF        : 1      # also: pkey, target-port-guid,
        sdp, port-num 10000-20000              : 4      #   source-port-guid, source-target-port-guid
        ipoib                                  : 5      # sdp rds iser (service ID), ipoib (P_Key), srp
    end-qos-ulps

A PathRecord query gets the level of the first rule it matches (qos-match-rules in file
order, then qos-ulps' rules), else the default level (OpenSM's order): a rule by
service ID, P_Key or QoS class matches only a query that gives that component; a rule
by source and destination groups needs both ends in them. The level's SL is the path's,
its MTU and rate limits cap the path's, its packet lifetime replaces the subnet's, and
with P_Keys a query must ask one of them (or gets the first the two ports share).

Group membership by port name, partition, P_Key, node type and SELF needs the fabric:
`membership`. Every problem is reported with its line in one `QosPolicyError` (exit 2),
before anything is sent."""
from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, Mapping

from smagent.config import files as paths
from smagent.errors import FileProblems

CLASSES = ("ca", "sw0", "swe")
OPTIONS = ("max_vls", "high_limit", "vlarb_high", "vlarb_low", "sl2vl")
# the ULPs OpenSM names, as the service IDs / P_Keys it matches them by (QoS_management_in_OpenSM)
SDP_BASE, RDS_BASE = 0x10000, 0x1060000
RDS_PORT, ISER_PORT = 0x48CA, 0x0CBC
DEFAULT_PKEY = 0x7FFF
NODE_TYPES = {"ca": 1, "switch": 2, "router": 3}  # NodeInfo.NodeType
Ranges = tuple[tuple[int, int], ...]


class QosPolicyError(FileProblems):
    """A QoS policy that cannot be used; every problem, with its line."""


def covers(ranges: Ranges, value: int) -> bool:
    return any(lo <= value <= hi for lo, hi in ranges)


@dataclasses.dataclass(frozen=True)
class PortGroup:
    """A port-group: ports by GUID ranges, ``port_names`` ((NodeDescription, port), as
    written), partitions by P_Key ranges (15 bits) and by name, node types (NodeType
    numbers) and ``self`` (the SM's port). Who is in it: `Membership`."""
    name: str
    line: int = 0
    guids: Ranges = ()
    port_names: tuple[tuple[str, int], ...] = ()
    pkeys: Ranges = ()
    partitions: tuple[str, ...] = ()
    node_types: frozenset[int] = frozenset()
    self_port: bool = False
    use: str = ""


@dataclasses.dataclass(frozen=True)
class QosLevel:
    """A qos-level: the SL, and what else it imposes on a path (None: nothing)."""
    name: str
    sl: int
    mtu_limit: int | None = None  # MTU code (1: 256 .. 5: 4096)
    rate_limit: int | None = None  # Rate code (2 .. 22)
    packet_life: int | None = None
    path_bits: Ranges = ()
    pkeys: Ranges = ()  # 15-bit P_Keys
    line: int = 0
    use: str = ""


@dataclasses.dataclass(frozen=True)
class Rule:
    """A match rule (a qos-match-rule or a qos-ulps line): all its criteria must match."""
    level: QosLevel
    sources: tuple[PortGroup, ...] = ()
    destinations: tuple[PortGroup, ...] = ()
    service_ids: Ranges = ()
    pkeys: Ranges = ()  # 15-bit
    qos_classes: Ranges = ()
    line: int = 0
    text: str = ""
    ulp: str = ""  # the qos-ulps ULP it was written for (any, sdp, rds, iser, ipoib, srp); "" in qos-match-rules

    @property
    def sl(self) -> int:
        return self.level.sl

    @property
    def by_request(self) -> bool:
        """Whether it matches only queries that carry a component (service ID, P_Key,
        QoS class), not every path between its groups."""
        return bool(self.service_ids or self.pkeys or self.qos_classes)

    @property
    def by_destination(self) -> bool:
        """Whether every query for a path to a port of its destination groups matches it,
        whatever the source and the query say (a target rule)."""
        return not self.by_request and not self.sources

    @property
    def imposes(self) -> bool:
        """Whether its level imposes more than an SL."""
        lv = self.level
        return (lv.mtu_limit, lv.rate_limit, lv.packet_life) != (None, None, None) or bool(lv.pkeys)

    def describe(self) -> str:
        return f"line {self.line} ({self.text})" if self.line else self.text


@dataclasses.dataclass(frozen=True)
class PortClass:
    """One port class's tables (None: the class-less option's, else OpenSM's default)."""
    sl2vl: tuple | None = None
    vlarb_high: tuple | None = None
    vlarb_low: tuple | None = None
    high_limit: int | None = None
    max_vls: int | None = None


class Membership:
    """Who is in a policy's port groups on one fabric: by node type, GUID range, and the
    port GUIDs its port names, partitions and SELF resolve to (OpenSM's port map: a
    switch is in by its one port GUID, whichever of its ports is named). Without a fabric
    (`Membership()`) only GUID ranges count."""

    def __init__(self, types: Mapping[int, int] | None = None,
                 resolved: Mapping[PortGroup, frozenset[int]] | None = None):
        self.types = types or {}
        self.resolved = resolved or {}

    def contains(self, groups: tuple[PortGroup, ...], guid: int | None) -> bool:
        if guid is None:
            return False
        kind = self.types.get(guid)
        return any(kind in g.node_types or covers(g.guids, guid) or guid in self.resolved.get(g, ()) for g in groups)


@dataclasses.dataclass(frozen=True)
class QosPolicy:
    rules: tuple[Rule, ...] = ()  # qos-match-rules, then qos-ulps' rules: the order they are tried
    default: QosLevel | None = None  # None: the file has no policy section (tables only)
    classes: tuple[tuple[str, PortClass], ...] = ()  # (class or "", options) as written
    source: str = "qos policy"
    groups: tuple[PortGroup, ...] = ()
    levels: tuple[QosLevel, ...] = ()

    @property
    def default_sl(self) -> int | None:
        return None if self.default is None else self.default.sl

    def port_class(self, name: str) -> PortClass:
        """``name``'s tables, each option falling back to the class-less one (OpenSM's
        qos_build_config); None where neither is given."""
        given = dict(self.classes)
        own, base = given.get(name, PortClass()), given.get("", PortClass())
        return PortClass(**{f: getattr(own, f) if getattr(own, f) is not None else getattr(base, f)
                            for f in OPTIONS if f in PortClass.__dataclass_fields__})

    @property
    def has_tables(self) -> bool:
        return any(getattr(pc, f) is not None for _n, pc in self.classes for f in ("sl2vl", "vlarb_high",
                                                                                 "vlarb_low", "high_limit"))

    @property
    def by_source(self) -> bool:
        """Whether some rule asks for the query's source port (its SL may differ between
        ports of one switch)."""
        return any(r.sources for r in self.rules)

    @property
    def by_qos_class(self) -> bool:
        return any(r.qos_classes for r in self.rules)

    def sls(self) -> list[tuple[int, str]]:
        """(SL, where it is given: "rule line N (...)" or "the default level") of every rule."""
        out = [(r.sl, f"rule {r.describe()}") for r in self.rules]
        return out + ([(self.default.sl, "the default level")] if self.default is not None else [])

    def match(self, dst_guid: int | None, service_id: int | None = None, pkey: int | None = None, *,
              src_guid: int | None = None, qos_class: int | None = None,
              members: Membership | None = None) -> Rule | None:
        """The first rule matching a query for a path from port ``src_guid`` to port
        ``dst_guid`` that gives ``service_id`` / ``pkey`` / ``qos_class`` (None: not in
        the query), or None (then the default level). ``members``: the groups on this
        fabric (None: by GUID ranges only)."""
        m = members if members is not None else Membership()
        for r in self.rules:
            if r.sources and not m.contains(r.sources, src_guid):
                continue
            if r.destinations and not m.contains(r.destinations, dst_guid):
                continue
            if r.qos_classes and (qos_class is None or not covers(r.qos_classes, qos_class)):
                continue
            if r.service_ids and (service_id is None or not covers(r.service_ids, service_id)):
                continue
            if r.pkeys and (pkey is None or not covers(r.pkeys, pkey & 0x7FFF)):
                continue
            return r
        return None

    def level(self, dst_guid: int | None, service_id: int | None = None, pkey: int | None = None, **kw) -> QosLevel | None:
        """The level such a query gets (`match`'s rule's, else the default's)."""
        r = self.match(dst_guid, service_id, pkey, **kw)
        return r.level if r is not None else self.default

    def sl(self, dst_guid: int | None, service_id: int | None = None, pkey: int | None = None, **kw) -> int | None:
        """The SL the policy gives such a query; None when it has no level at all."""
        lv = self.level(dst_guid, service_id, pkey, **kw)
        return None if lv is None else lv.sl

    def possible(self, dst_guid: int, pkey_applies: Callable[[Rule], bool],
                 members: Membership | None = None) -> tuple[list[Rule], Rule | None]:
        """What any query for a path to ``dst_guid`` may be given: the rules that may match
        before it, depending on the query or its source (``pkey_applies(rule)``: a P_Key
        rule names a partition the pair may share), and the first rule that matches
        whatever the query holds and wherever it comes from (a target rule), or None
        (then the default)."""
        m = members if members is not None else Membership()
        maybe: list[Rule] = []
        for r in self.rules:
            if r.destinations and not m.contains(r.destinations, dst_guid):
                continue
            if r.by_destination:
                return maybe, r
            if not r.pkeys or pkey_applies(r):
                maybe.append(r)
        return maybe, None


def parse(text: str, source: str = "qos policy") -> QosPolicy:
    """A QoS policy text; QosPolicyError lists every problem with its line."""
    from smagent.config.qosparse import Parser
    return Parser(source).parse(text)


def load(path) -> QosPolicy:
    """Read and parse a QoS policy file (before any SMP is sent)."""
    path, text = paths.read_config(path, QosPolicyError)
    return parse(text, path)


@dataclasses.dataclass(frozen=True)
class FabricPort:
    """What group membership reads of one port: its GUID, its node's type (NodeType),
    NodeDescription and port count, its port number."""
    guid: int
    node_type: int
    description: str
    num_ports: int
    port: int


def membership(policy: QosPolicy, ports: Iterable[FabricPort], pkey_members: Mapping[int, Iterable[int]],
               partition_pkeys: Mapping[str, int], sm_guid: int | None) -> Membership:
    """Resolve ``policy``'s groups on a fabric: ``ports`` (every port: a switch's by its
    one port GUID), ``pkey_members`` (15-bit P_Key -> the GUIDs of its member ports, full
    or limited), ``partition_pkeys`` (partition name -> P_Key), the SM's port GUID."""
    ports = list(ports)
    types = {p.guid: p.node_type for p in ports}
    by_name: dict[str, list[FabricPort]] = {}
    for p in ports:
        by_name.setdefault(p.description, []).append(p)
    resolved = {}
    for g in policy.groups:
        got: set[int] = set()
        for desc, num in g.port_names:  # an unknown node is no one (OpenSM)
            got.update(p.guid for p in by_name.get(desc, ()) if p.port == num or p.node_type == 2 and num <= p.num_ports)
        for lo, hi in g.pkeys:
            for pk, guids in pkey_members.items():
                if lo <= pk <= hi:
                    got.update(guids)
        for name in g.partitions:
            pk = partition_pkeys.get(name)
            if pk is not None:
                got.update(pkey_members.get(pk, ()))
        if g.self_port and sm_guid is not None:
            got.add(sm_guid)
        resolved[g] = frozenset(got)
    return Membership(types, resolved)


def topology_membership(policy: QosPolicy, topo, partitions) -> Membership:
    """`membership` on a discovered topology with the partitions config the SM writes
    (None: every end port a member of the default partition, named Default)."""
    from smagent.config import partitions as partmod
    ports = []
    for n in topo.nodes.values():
        kind, desc = _kind(n), _description(n)
        if n.is_switch:
            ports.append(FabricPort(n.port_guids.get(0, n.guid), kind, desc, n.num_ports, 0))
        else:
            ports += [FabricPort(g, kind, desc, n.num_ports, p) for p, g in n.port_guids.items()]
    members: dict[int, set[int]] = {}
    if partitions is None:
        members[DEFAULT_PKEY] = {p.guid for p in ports}
        names = {"Default": DEFAULT_PKEY}
    else:
        for (g, p), keys in partmod.resolve(partitions, topo).ports.items():
            node = topo.nodes[g]
            for k in keys:
                members.setdefault(k & 0x7FFF, set()).add(node.port_guids.get(p, node.guid))
        names = {p.name: p.pkey for p in partitions.partitions}
    local = getattr(topo, "local", None)
    node = topo.nodes.get(local[0]) if local else None
    sm = node.port_guids.get(0 if node.is_switch else local[1], node.guid) if node is not None else None
    return membership(policy, ports, members, names, sm)


def _kind(node) -> int:
    if isinstance(node.node_type, int):
        return node.node_type
    return 2 if node.is_switch else 3 if node.node_type == "Router" else 1


def _description(node) -> str:
    """The NodeDescription the node reports (what OpenSM's port names are matched with)."""
    return getattr(node, "node_description", "") or node.description or getattr(node, "name", "")


def fabric_problems(policy: QosPolicy, topo) -> list[str]:
    """What OpenSM's policy parser refuses once it sees the fabric, beyond IPoIB
    (`ipoib_problems`): a port name whose node exists but has no such port."""
    out = []
    by_desc: dict[str, int] = {}
    for n in topo.nodes.values():
        by_desc.setdefault(_description(n), n.num_ports)
    for g in policy.groups:
        for desc, num in g.port_names:
            if desc in by_desc and num > by_desc[desc]:
                out.append(f"line {g.line}: port-group {g.name}: port name '{desc}/P{num}': {desc!r} has "
                           f"{by_desc[desc]} ports; OpenSM refuses a port number out of range")
    return out


def ipoib_problems(policy, full_members) -> list[str]:
    """What OpenSM 3.3.23's policy parser refuses once the partitions are made: an
    ``ipoib`` rule (with its P_Keys, or bare: the default partition 0x7fff) whose
    partition does not exist or has fewer than two full members, where IPoIB cannot work.
    ``full_members(pkey)``: the number of end ports that are full members of the 15-bit
    ``pkey`` on the fabric, None where no partition has it."""
    out = []
    for r in policy.rules:
        if r.ulp != "ipoib":
            continue
        for lo, hi in r.pkeys:
            bad = next(((pk, n) for pk in range(lo, hi + 1) for n in [full_members(pk)] if n is None or n < 2), None)
            if bad is not None:
                pk, n = bad
                why = "no partition has it" if n is None else f"its partition has {n} full member{'s' * (n != 1)}"
                out.append(f"line {r.line}: {r.text}: IPoIB partition {pk:#06x}: {why}; OpenSM refuses a policy "
                           f"whose IPoIB partition has fewer than two full members")
                break
    return out
