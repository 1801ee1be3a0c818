"""The partition check: for every ordered pair of end ports (linked CA ports with a LID),
whether the P_Key tables let the first send to the second, against whether the
partitions (`smagent.config.partitions`, resolved on the fabric into `Snapshot.partition_rules`)
allow it.

The tables let ``a`` send to ``b`` when some P_Key ``k`` in ``a``'s table (block 0, as
read) matches a key in ``b``'s (same 15-bit base, not 0, at least one a full member: IBA
10.9.3) and passes the switch ports next to both ends that enforce partitions (the
ingress port facing ``a`` with PartitionEnforcementInbound, the egress port facing ``b``
with PartitionEnforcementOutbound: the base of ``k`` in that port's table, IBA 10.9.4).
Enforcement on ports between switches is not considered (an SM sets it only on ports
facing end ports). Whether the route itself delivers is the unicast checks' matter.

``partition_leak``     a pair the tables let talk without a shared partition (or only as
                       two limited members)
``partition_blocked``  a pair the partitions allow that the tables block
``partition_enforcement_off``  a switch port facing an end port, on a switch with
                       PartitionEnforcementCap, whose PartitionEnforcementInbound or
                       Outbound is off though the end port's keys fit its table: any
                       P_Key the host sends passes the switch (OpenSM and smagent set both)
"""
from __future__ import annotations

from mad.forwarding import PKEY_FULL_MEMBER
from smagent.config.partitions import enforcement_keys

from smagent.verify.model import _Defects, _Net


def keys_match(a: int, b: int) -> bool:
    """IBA 10.9.3: same 15-bit base (not 0), and at least one of the two a full member."""
    base = a & ~PKEY_FULL_MEMBER
    return bool(base) and base == b & ~PKEY_FULL_MEMBER and bool((a | b) & PKEY_FULL_MEMBER)


def _passes(snap, port, key: int, direction: str) -> bool:
    """Whether switch port ``port`` (guid, port) lets ``key`` through in ``direction``."""
    pi = snap.port_info.get(port)
    if pi is None or not getattr(pi, f"partition_enforcement_{direction}"):
        return True
    table = snap.enforce_pkeys.get(port)
    base = key & ~PKEY_FULL_MEMBER
    return table is not None and bool(base) and any(k & ~PKEY_FULL_MEMBER == base for k in table if k)


def tables_allow(snap, a, b) -> list[int]:
    """The P_Keys of ``a``'s table that reach ``b`` (end ports (guid, port)) by the tables."""
    src, dst = snap.pkeys.get(a, ()), snap.pkeys.get(b, ())
    ing, egr = snap.links.get(a), snap.links.get(b)
    return [k for k in src if k and any(keys_match(k, d) for d in dst if d)
            and (ing is None or _passes(snap, ing, k, "inbound"))
            and (egr is None or _passes(snap, egr, k, "outbound"))]


def rules_allow(rules: dict, a, b) -> list[int]:
    """The P_Keys the partitions give ``a`` that let it talk to ``b``."""
    dst = rules.get(b, ())
    return [k for k in rules.get(a, ()) if any(keys_match(k, d) for d in dst)]


def end_ports(snap) -> list:
    return sorted(k for k, c in snap.ca_ports.items() if k in snap.links and c.lid and k in snap.pkeys)


def _check_partition_rules(net: _Net, D: _Defects) -> int:
    """Every ordered pair of end ports; returns the pairs checked."""
    snap = net.snap
    rules = snap.partition_rules
    if rules is None or not snap.tables_read:
        return 0
    _check_enforcement(net, D)
    ports = end_ports(snap)
    pairs = 0
    for a in ports:
        for b in ports:
            if a == b:
                continue
            pairs += 1
            got, want = tables_allow(snap, a, b), rules_allow(rules, a, b)
            if got and not want:
                an, bn = net.port_name(a), net.port_name(b)
                D.add("partition_leak", {"src": an, "dst": bn, "pkeys": [f"{k:#06x}" for k in got]},
                      f"{an} -> {bn}: the tables let P_Key {got[0]:#06x} through; the partitions share none")
            elif want and not got:
                an, bn = net.port_name(a), net.port_name(b)
                D.add("partition_blocked", {"src": an, "dst": bn, "pkeys": [f"{k:#06x}" for k in want]},
                      f"{an} -> {bn}: the partitions allow P_Key {want[0]:#06x}; the tables block it")
    return pairs


def _check_enforcement(net: _Net, D: _Defects) -> None:
    snap = net.snap
    rules = snap.partition_rules or {}
    for (g, p), end in sorted(snap.links.items()):
        cap = snap.enforce_cap.get(g, 0)
        pi = snap.port_info.get((g, p))
        if (g not in snap.switches or end[0] in snap.switches or not cap or pi is None
                or end not in rules or len(enforcement_keys(list(rules[end]))) > cap):
            continue
        off = [d for d in ("inbound", "outbound") if not getattr(pi, f"partition_enforcement_{d}")]
        if off:
            where, host = net.port_name((g, p)), net.port_name(end)
            D.add("partition_enforcement_off", {"port": where, "facing": host, "off": off},
                  f"{where} (facing {host}): Partition Enforcement {' and '.join(off)} off; "
                  f"any P_Key {host} sends passes the switch")
