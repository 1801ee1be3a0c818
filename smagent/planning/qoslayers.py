"""A QoS policy's SLs on the routes a sweep plans: the SL of every path as the policy
and the engine together give it (`rows`: what the sweep keeps for `verify --path-sls`
and what the SA answers), and the check that a policy SL does not bring back a credit
loop that a VL-layering engine's layers broke (`check`).

How the policy and the engine's layers combine. OpenSM's dfsssp overrides whatever SL
the QoS policy chose with its layer's (`get_dfsssp_sl` takes the policy's SL as a hint
only, used for pairs it has no layer for), so its policy SLs silently do nothing. smagent
keeps the engine's layer where the policy says nothing but ``default`` (a path's layer is
what keeps it deadlock-free), and honours a rule that names the path (destination or
source group, service ID, P_Key, QoS class) only if the VL that SL lands on stays free of credit loops: the
channel dependency graph per VL is built with every SL a path may be given (its layer,
or its target rule's SL, and the SL of every rule by source, service ID, P_Key or QoS
class that may match a query for it first: a rule by source for the switches its
source groups have CA ports on), each hop mapping the SL to a VL by the SL2VL table the sweep plans
for that port. A cycle refuses the policy (exit 2: the policy and the engine disagree,
whatever the switches hold), naming a pair on it, the rule and the SLs."""
from __future__ import annotations

from smagent.routing.cycles import find_cycle
from smagent.config.qospolicy import DEFAULT_PKEY, Membership, QosPolicy, QosPolicyError, Rule, covers
from smagent.routing.base import NO_PORT


def dlid_ports(topo, plan=None) -> dict[int, tuple[int, object, int]]:
    """DLID -> (port GUID, node, port) of every LID the plan gives (a CA port's 2^LMC), or
    without a plan every LID the ports hold (PortInfo LID and LMC: a live fabric)."""
    out = {}
    for n in topo.nodes.values():
        for p in n.lid_ports():
            pg = n.port_guids.get(p, n.guid)
            if plan is not None:
                base, lmc = plan.lids.get(pg), plan.lmc
            else:
                pi = n.ports.get(p)
                base, lmc = (pi.lid or None, pi.lmc) if pi is not None else (None, 0)
            if base is None:
                continue
            for lid in range(base, base + (1 if n.is_switch else 1 << lmc)):
                out[lid] = (pg, n, p)
    return out


def _forced(policy: QosPolicy, dests: dict, layered: bool, members: Membership | None) -> dict[int, int]:
    """DLID -> the SL every query for a path to it gets when it names no service ID, P_Key
    or QoS class and no rule by source matches: a target rule's; the default's too unless
    the engine layers (its layer wins)."""
    out = {}
    for dlid, (pg, _n, _p) in dests.items():
        _maybe, rule = policy.possible(pg, lambda r: False, members)
        if rule is not None:
            out[dlid] = rule.sl
        elif not layered and policy.default_sl:
            out[dlid] = policy.default_sl
    return out


def rows(policy: QosPolicy | None, switches, layer_sls: dict[int, bytes] | None,
         dests: dict, members: Membership | None = None) -> dict[int, bytes] | None:
    """{switch GUID: SL by DLID} of the paths from its CA ports (`smagent.planning.pathsl`'s rows):
    the engine's layers (``layer_sls``, None: SL 0) with the policy's SLs over them; None
    when every path is on SL 0. ``members``: the policy's groups on this fabric (None: by
    GUID only). A rule by source is not in the rows (one row serves a switch's CA ports):
    the SA gives its SL per query, and `check` counts it."""
    if policy is None:
        return layer_sls
    forced = _forced(policy, dests, layer_sls is not None, members)
    if not forced:
        return layer_sls
    size = max(max(dests, default=0) + 1, max((len(r) for r in (layer_sls or {}).values()), default=0))
    out = {}
    for g in switches:
        row = bytearray(size)
        if layer_sls is not None and g in layer_sls:
            row[:len(layer_sls[g])] = layer_sls[g]
        for dlid, sl in forced.items():
            row[dlid] = sl
        out[g] = bytes(row)
    return out


def check(policy: QosPolicy, routes, rin, sl_rows: dict[int, bytes], dests: dict, vl_of,
          partitions: bool, members: Membership | None = None) -> None:
    """Refuse (QosPolicyError) a policy whose SLs put paths on a VL whose channel
    dependency graph then has a cycle. ``vl_of(switch, out port, SL)``: the VL the planned
    SL2VL table gives; ``partitions``: whether P_Keys other than the default exist (a P_Key
    rule may then match any pair)."""
    def pkey_applies(r: Rule) -> bool:
        return partitions or covers(r.pkeys, DEFAULT_PKEY)

    rules = {dlid: policy.possible(pg, pkey_applies, members) for dlid, (pg, _n, _p) in dests.items()}
    if not any(maybe or target for maybe, target in rules.values()):
        return  # the policy moves no path off its layer
    sources = sorted({g for lid, (g, p) in rin.lid_homes.items() if p})
    by_source = _by_source(policy, rin, dests, members or Membership())
    nbr = {(g, p): g2 for g in rin.switches for p, g2 in rin.adjacency.get(g, ())}
    deps: dict = {}
    for dlid in sorted(dests):
        if dlid not in rin.lid_homes:
            continue
        seen: set = set()
        for x in sources:
            row = sl_rows.get(x)
            maybe, target = rules[dlid]
            own = row[dlid] if row is not None and dlid < len(row) else 0
            sls = {(own, target if target is not None and target.sl == own else None)}
            sls |= {(r.sl, r) for r in maybe if not r.sources or id(r) in by_source.get(x, ())}
            for sl, rule in sorted(sls, key=lambda t: (t[0], t[1] is not None, t[1] and t[1].line)):
                _walk(routes, nbr, x, dlid, sl, rule, vl_of, deps, seen)
    cycle = find_cycle(deps)
    if cycle:
        raise QosPolicyError(policy.source, [_describe(cycle, deps, dests, rin, routes.sls or {})])


def _by_source(policy: QosPolicy, rin, dests: dict, members: Membership) -> dict[int, set[int]]:
    """Switch GUID -> the rules by source (their ids) that hold a CA port on it."""
    hosts: dict[int, set[int]] = {}
    for lid, (g, p) in rin.lid_homes.items():
        if p and lid in dests:
            hosts.setdefault(g, set()).add(dests[lid][0])
    return {g: {id(r) for r in policy.rules if r.sources and any(members.contains(r.sources, pg) for pg in pgs)}
            for g, pgs in hosts.items()}


def _walk(routes, nbr, x, dlid, sl, rule, vl_of, deps, seen) -> None:
    """One path's channels from switch ``x`` to ``dlid`` on SL ``sl`` into ``deps``
    ({(switch, port, VL): {(switch, port, VL): (source switch, DLID, SL, rule)}}); a
    walk stops where an earlier one to this DLID went on with the same SL."""
    prev, start = None, x
    for _ in range(len(routes) + 1):
        table = routes.get(x)
        out = table.ports[dlid] if table is not None and dlid < len(table.ports) else NO_PORT
        nxt = nbr.get((x, out))
        if out in (0, NO_PORT) or nxt is None:
            return
        node = (x, out, vl_of(x, out, sl))
        if prev is not None:
            deps.setdefault(prev, {}).setdefault(node, (start, dlid, sl, rule))
        if (x, sl) in seen:
            return
        seen.add((x, sl))
        prev, x = node, nxt


def _describe(cycle, deps, dests, rin, layer_sls) -> str:
    labels = [deps[a][cycle[(k + 1) % len(cycle)]] for k, a in enumerate(cycle)]
    by_rule = [lab for lab in labels if lab[3] is not None] or labels
    src, dlid, sl, rule = by_rule[0]
    _pg, dn, dp = dests[dlid]
    dname = dn.description + ("" if dn.is_switch else f" port {dp}")
    row = layer_sls.get(src, b"")
    layer = row[dlid] if dlid < len(row) else 0
    vl = cycle[0][2]
    hops = " -> ".join(f"{rin.name(g)}[{p}]" for g, p, _vl in cycle)
    why = f"rule {rule.describe()} puts them on SL {sl}" if rule is not None else f"they ride SL {sl}"
    return (f"the policy brings back a credit loop on VL{vl}: paths from the CA ports of {rin.name(src)} to "
            f"LID {dlid} ({dname}): {why}, its layer gives SL {layer}; the cycle: {hops} "
            f"(give those paths the SL of their layer, or another SL whose VL stays loop-free)")
