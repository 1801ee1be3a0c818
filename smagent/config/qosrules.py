"""The model of a QoS policy (`smagent.config.qospolicy`): port groups, QoS levels, match
rules and the per-port-class tables, and how a PathRecord query is matched to a level
(`QosPolicy.match`, OpenSM's __qos_policy_get_match_rule_by_params), with group
membership on a fabric (`Membership`)."""
from __future__ import annotations

import dataclasses
from typing import Callable, Mapping

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


