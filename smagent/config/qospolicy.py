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
            mtu-limit: 4                                # caps the path's MTU (an MTU code)
            rate-limit: 7                               # caps its rate (a Rate code)
            packet-life: 14                             # its packet lifetime
            path-bits: 0-1                              # read, unused (as OpenSM)
            pkey: 0x10                                  # the P_Keys its paths may have
        end-qos-level
    end-qos-levels
    qos-match-rules
        qos-match-rule                                  # all of its criteria must match
            source: Storage                             # port groups
            destination: Storage
            service-id: 0x10000-0x1FFFF                 # ranges the query must give
            pkey: 0x10
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
from typing import Iterable, Mapping

from smagent.config import files as paths
from smagent.config.qosparse import Parser
from smagent.config.qosrules import (CLASSES, DEFAULT_PKEY, ISER_PORT, NODE_TYPES, OPTIONS, RDS_BASE, RDS_PORT,
                                     SDP_BASE, Membership, PortClass, PortGroup, QosLevel, QosPolicy,
                                     QosPolicyError, Ranges, Rule, covers)

__all__ = ["CLASSES", "DEFAULT_PKEY", "ISER_PORT", "NODE_TYPES", "OPTIONS", "RDS_BASE", "RDS_PORT", "SDP_BASE",
           "Membership", "PortClass", "PortGroup", "QosLevel", "QosPolicy", "QosPolicyError", "Ranges", "Rule",
           "covers", "parse", "load", "membership", "topology_membership", "fabric_problems", "ipoib_problems"]


def parse(text: str, source: str = "qos policy") -> QosPolicy:
    """A QoS policy text; QosPolicyError lists every problem with its line."""
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
            named = partition_pkeys.get(name)
            if named is not None:
                got.update(pkey_members.get(named, ()))
        if g.self_port and sm_guid is not None:
            got.add(sm_guid)
        resolved[g] = frozenset(got)
    return Membership(types, resolved)


def topology_membership(policy: QosPolicy, topo, partitions, port_keys=None) -> Membership:
    """`membership` on a discovered topology with the partitions config the SM writes
    (None: every end port a member of the default partition, named Default);
    ``port_keys``: its resolved keys ((node GUID, port) -> P_Keys), if at hand."""
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
        for (g, p), keys in (port_keys if port_keys is not None else partmod.resolve(partitions, topo).ports).items():
            node = topo.nodes[g]
            for k in keys:
                members.setdefault(k & 0x7FFF, set()).add(node.port_guids.get(p, node.guid))
        names = {p.name: p.pkey for p in partitions.partitions}
    local = getattr(topo, "local", None)
    node = topo.nodes.get(local[0]) if local is not None else None
    sm = None if node is None or local is None else node.port_guids.get(0 if node.is_switch else local[1], node.guid)
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


def fabric_notes(policy: QosPolicy, topo, partitions) -> list[str]:
    """What of a policy names nothing on this fabric (taken, as OpenSM takes it, and said):
    a rule's P_Keys no partition has (OpenSM logs ERR AC14), a port name of no node, a
    partition name no partition has (OpenSM is silent on those two)."""
    known = {DEFAULT_PKEY} if partitions is None else {p.pkey & 0x7FFF for p in partitions.partitions}
    names = {"Default"} if partitions is None else {p.name for p in partitions.partitions}
    descs = {_description(n) for n in topo.nodes.values()}
    out = []
    for r in policy.rules:
        for lo, hi in r.pkeys:
            if r.ulp != "ipoib" and not any(lo <= k <= hi for k in known):
                span = f"{lo:#06x}" if lo == hi else f"{lo:#06x}-{hi:#06x}"
                out.append(f"{policy.source}: line {r.line}: P_Key {span}: no partition has it; the rule matches "
                           f"no query for a path that exists")
    for g in policy.groups:
        out += [f"{policy.source}: line {g.line}: port-group {g.name}: port name '{d}/P{n}': no node {d!r} on the "
                f"fabric" for d, n in g.port_names if d not in descs]
        out += [f"{policy.source}: line {g.line}: port-group {g.name}: no partition named {name!r}"
                for name in g.partitions if name not in names]
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
