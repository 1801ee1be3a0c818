"""PortInfo: what each port needs (LID, LMC, MasterSMLID, link fields, INIT -> ARMED),
then the arming pass and the activation (ARMED -> ACTIVE), each Set read back."""
from __future__ import annotations

import dataclasses

from mad.attributes import AttrID, PortInfo, PortState
from mad.forwarding import portinfo_modifier
from mad.header import Method
from smagent import linkconf as links
from smagent.planning import qoslayers
from smagent.config import qospolicy
from smagent.transport.base import Request
from smagent.sweep import protect, route
from smagent.sweep.result import PortChange
from smagent.sweep.state import SweepState, dr


def plan_ports(s: SweepState) -> None:
    """Ports: LID/LMC/MasterSMLID, link fields (smagent.linkconf) and INIT -> ARMED."""
    topo, plan_, opts = s.topo, s.r.lid_plan, s.opts
    s.link_opts = None if opts.links is False else (
        opts.links or getattr(opts.desired, "links", None) or links.LinkOptions())
    parts = opts.partitions or getattr(opts.desired, "partitions", None)
    if s.link_opts is not None and parts is not None:
        s.link_opts = dataclasses.replace(s.link_opts, partitions=parts)
    layers = s.routes.layers if s.routes is not None and s.routes.sls is not None else 1
    if s.link_opts is not None and layers > 1:  # SL n must ride VL n: qos "auto" checks it
        s.link_opts = dataclasses.replace(s.link_opts, sl_layers=layers)
    _policy_tables(s)
    _check_ipoib(s, parts)
    token = (s.link_opts, plan_.lmc, plan_.master_lid)
    was = settled_before(s, token)
    settled: dict = {}
    for n in topo.nodes.values():
        _plan_node(s, n, was, settled)
    s.settled = (token, settled)
    if layers > 1:  # refused before the first Set: the layers would not hold
        why = ("the routing layers paths over VLs but the sweep configures no link (--no-links)"
               if s.link_opts is None else links.layers_problem(s.link_opts, s.op_vls))
        if why:
            raise links.LinkConfigError(f"{s.route_spec}: {why}")
    _check_policy_sls(s)


def _plan_node(s: SweepState, n, was: dict, settled: dict) -> None:
    """One node's ports into the plan (`PortChange`s) or, as planned already, ``settled``;
    a port that ``was`` settled with both ends' PortInfos the same objects now costs a
    few lookups (a repair's fabric is mostly that)."""
    topo, plan_ = s.topo, s.r.lid_plan
    cables, nodes = topo.links, topo.nodes
    is_switch = n.is_switch
    lid_ports = n.lid_ports()
    want_lmc = 0 if is_switch else plan_.lmc
    for p in sorted(n.ports):
        key = (n.guid, p)
        peer = cables.get(key)
        carries_lid = p in lid_ports
        if peer is None and not (is_switch and p == 0) or (not carries_lid and is_switch and p == 0):
            continue
        pi = n.ports[p]
        lid = plan_.lids[n.port_guids.get(p, n.guid)] if carries_lid else None
        lid_differs = lid is not None and (pi.lid != lid or pi.lmc != want_lmc or pi.master_sm_lid != plan_.master_lid)
        arm = pi.port_state in (PortState.INIT, PortState.ARMED)  # ARMED: left there earlier
        peer_pi = nodes[peer[0]].ports.get(peer[1]) if peer is not None and peer[0] in nodes else None
        before = was.get(key)
        if before is not None and before[0] is pi and before[1] is peer_pi and not lid_differs and not arm:
            s.op_vls[key] = before[2]  # both ends as the last sweep left them: as planned then
            settled[key] = before
            continue
        link = links.port_fields(topo, n, p, s.link_opts) if s.link_opts else {}
        link.update(protect.plan_fields(s, n, p))  # M_Key, ProtectBits, lease: in the same Set
        s.op_vls[key] = link.get("operational_vls", pi.operational_vls)
        link_diff = links.port_diff(pi, link)
        if lid_differs or arm or link_diff:
            s.r.port_changes.append(PortChange(n.guid, n.description, p, n.path_to_port(p), pi, lid, arm,
                                               link, link_diff))
        else:
            settled[key] = (pi, peer_pi, s.op_vls[key])


def settled_before(s: SweepState, token) -> dict:
    """The ports the known state's sweep found as planned, with the PortInfo objects of
    both ends then (a repair replaces those it reads again, never changes one in place)
    and their OperationalVLs; empty unless this sweep plans against that state with the
    same link options, LMC and SM LID, and no M_Keys (their fields are planned per node)."""
    known = s.opts.known
    if known is None or known.settled is None or known.settled[0] != token or protect.protection(s) is not None:
        return {}
    return known.settled[1]


def settle(s: SweepState) -> tuple | None:
    """After the activation: the ports now as planned, with both ends' PortInfos as the
    topology holds them now (a Set's answer replaced a changed port's): those found
    settled and those whose Sets went through; for the known state (`settled_before`)."""
    if s.settled is None:
        return None
    token, before = s.settled
    failed = s.arm_failed | {(c.guid, c.port) for c in s.not_active}
    topo, out = s.topo, dict(before)
    # only a Set's answer replaced a PortInfo since the plan: the ports changed, and the
    # peers of those, whose entries hold the changed port's PortInfo, are looked at again
    changed = {(c.guid, c.port) for c in s.r.port_changes}
    peers: set[tuple[int, int]] = set()
    for key in changed:
        peer = topo.links.get(key)
        if peer is not None and peer in before:
            peers.add(peer)
    for key in changed | peers:
        n = topo.nodes.get(key[0])
        pi = n.ports.get(key[1]) if n is not None else None
        if pi is None or key in failed:
            out.pop(key, None)
            continue
        out[key] = (pi, _peer_info(topo, key), s.op_vls[key])
    return token, out


def _peer_info(topo, key: tuple[int, int]):
    """The PortInfo of the port cabled to ``key`` (node GUID, port), None if none."""
    peer = topo.links.get(key)
    return topo.nodes[peer[0]].ports.get(peer[1]) if peer is not None and peer[0] in topo.nodes else None


def _policy_tables(s: SweepState) -> None:
    """A QoS policy's per-port-class SL2VL/VLArb tables into the link options."""
    policy = route.qos_policy(s)
    if policy is None or not policy.has_tables:
        return
    if s.link_opts is None or s.link_opts.qos_mode == "never":
        raise links.LinkConfigError(f"{policy.source}: its qos_* SL2VL/VLArb tables need the link tables written: "
                                    f"drop {'--no-links' if s.link_opts is None else '--no-qos'}")
    names = {"sl2vl": "sl2vl", "vlarb_high": "vlarb_high", "vlarb_low": "vlarb_low", "high_limit": "vl_high_limit"}
    classes = tuple((c, tuple((names[f], v) for f in names if (v := getattr(policy.port_class(c), f)) is not None))
                    for c in qospolicy.CLASSES)
    s.link_opts = dataclasses.replace(s.link_opts, qos_classes=classes)
    dropped = [(sl, where, c) for sl, where in policy.sls() for c in ("ca", "swe")
               if s.link_opts.for_class(c).sl2vl[sl] == 15]
    if dropped:  # VL15 carries no data: OpenSM's SA answers no path on such an SL
        sl, where, c = dropped[0]
        raise qospolicy.QosPolicyError(policy.source, [f"{where} gives SL {sl}, which the {c} ports' SL2VL table "
                                                       f"(qos_{c}_sl2vl / qos_sl2vl) sends to VL15, where no data "
                                                       f"goes"])


def _check_ipoib(s: SweepState, parts) -> None:
    """A QoS policy's ipoib rules against the partitions on this fabric (`qospolicy.ipoib_problems`),
    before the first Set. Without partitions every end port is a full member of 0x7fff."""
    policy = route.qos_policy(s)
    if policy is None or not any(r.ulp == "ipoib" for r in policy.rules):
        return
    from smagent.config import partitions as partmod
    if parts is None:
        ends = len(partmod.end_ports(s.topo))

        def full(pk: int) -> int | None:
            return ends if pk == partmod.DEFAULT_PKEY else None
    else:
        keys = partmod.resolve(parts, s.topo).ports
        known = {p.pkey for p in parts.partitions}

        def full(pk: int) -> int | None:
            return sum((pk | partmod.FULL_BIT) in k for k in keys.values()) if pk in known else None
    problems = qospolicy.ipoib_problems(policy, full)
    if problems:
        raise qospolicy.QosPolicyError(policy.source, problems)


def _check_policy_sls(s: SweepState) -> None:
    """With a VL-layering engine whose routes have credit loops, refuse a QoS policy SL
    that brings one back (`smagent.planning.qoslayers.check`), before the first Set."""
    policy, routes = route.qos_policy(s), s.routes
    if policy is None or routes is None or routes.sls is None or routes.needed <= 1 or s.r.path_sls is None:
        return
    opts = s.link_opts

    def vl_of(g: int, port: int, sl: int) -> int:
        if opts is None:
            return sl
        return links.sl2vl_table(opts, "swe", s.op_vls.get((g, port), 1))[sl] & 0xF

    parts = s.link_opts.partitions if s.link_opts is not None else None
    qoslayers.check(policy, routes, s.routing_input, s.r.path_sls, s.qos_dests, vl_of, parts is not None,
                    s.qos_members)


def portinfo_set(c: PortChange, state: int, master_lid: int, lmc: int) -> Request:
    pi = c.current
    key = (c.lid, master_lid, lmc)
    if c.encoded is not None and c.encoded[0] is pi and c.encoded[1] == key:
        # the Set built before (ARMED) but for its PortState (ACTIVE): patch its bytes
        data = pi.LAYOUT.patch(c.encoded[2], port_state=state)
    else:
        fields = dict(port_state=state, port_physical_state=0, link_down_default_state=0,
                      link_width_enabled=0, link_speed_enabled=0)  # 0 = no change for these
        if c.lid is not None:
            fields.update(lid=c.lid, lmc=lmc, master_sm_lid=master_lid)
        fields.update(c.link)
        data = pi.LAYOUT.replace(pi, **fields).encode()
        c.encoded = (pi, key, data)
    return dr(Method.SET, AttrID.PORT_INFO, c.path, portinfo_modifier(c.port), data)


def confirm_port_sets(transport, failed, want, master_lid, lmc_for, topo=None):
    """A PortInfo Set whose response was lost may have been applied, and its retry then
    asks for a state transition the port has already made (ARMED -> ARMED), which the SMA
    refuses. So a failed Set is re-read: if the port already holds what we wanted, it is
    done. What is read goes into ``topo`` (a repair pass plans on it). Returns the
    (change, error) pairs that really failed."""
    if not failed:
        return []
    reqs = [dr(Method.GET, AttrID.PORT_INFO, c.path, portinfo_modifier(c.port)) for c, _e in failed]
    still = []
    for (c, err), rep in zip(failed, transport.execute(reqs)):
        if rep.ok:
            pi = rep.value()
            if topo is not None:
                topo.nodes[c.guid].ports[c.port] = pi
            want_state = want(c) if callable(want) else want
            lid_ok = c.lid is None or (pi.lid == c.lid and pi.lmc == lmc_for(c) and pi.master_sm_lid == master_lid)
            state_ok = want_state is None or pi.port_state == want_state or (
                want_state == PortState.ARMED and pi.port_state == PortState.ACTIVE)
            if lid_ok and state_ok:
                continue
            if pi.port_state == PortState.DOWN:
                err = "the port is DOWN now: its link went away during the sweep (the next sweep picks it up)"
        still.append((c, err))
    return still


def lmc_for(s: SweepState, c: PortChange) -> int:
    return 0 if s.topo.nodes[c.guid].is_switch else s.r.lid_plan.lmc


def needs_set(c: PortChange, master_lid: int, lmc: int) -> bool:
    """Does the arming phase send this port anything? Not a port already ARMED with its
    LID fields and link fields as wanted (a repair pass only activates it)."""
    if c.arm and c.current.port_state != PortState.ARMED:
        return True
    pi = c.current
    return bool(c.link_diff) or (c.lid is not None and (pi.lid != c.lid or pi.lmc != lmc
                                                        or pi.master_sm_lid != master_lid))


def arm_ports(s: SweepState) -> None:
    """LIDs, LMC, MasterSMLID and link fields to every changed port; INIT ports to ARMED."""
    r, lp = s.r, s.r.lid_plan
    with s.phase("lids_arm"):
        todo = [c for c in r.port_changes if needs_set(c, lp.master_lid, lmc_for(s, c))]
        failed: list = []
        for batch in protect.key_last(todo):  # a new M_Key last: the other Sets carry the old one
            failed += _arm_batch(s, batch)
        protect.relearn(s, failed)  # a lost answer to a Set that changed the key
        for c, err in confirm_port_sets(s.transport, failed, lambda c: PortState.ARMED if c.arm else None,
                                         lp.master_lid, lambda c: lmc_for(s, c), r.topology):
            r.problems.append(f"{c.name} port {c.port}: PortInfo Set failed: {err}")
            s.arm_failed.add((c.guid, c.port))


def _arm_batch(s: SweepState, todo: list[PortChange]) -> list:
    """One batch of arming Sets; returns the (change, error) pairs that failed."""
    r, lp = s.r, s.r.lid_plan
    reqs = [portinfo_set(c, PortState.ARMED if c.arm and c.current.port_state == PortState.INIT
                          else PortState.NO_CHANGE, lp.master_lid, lmc_for(s, c)) for c in todo]
    failed = []
    for c, rep in zip(todo, s.transport.execute(reqs) if reqs else []):
        if not rep.ok:
            failed.append((c, rep.error))
            continue
        back = rep.value(PortInfo)
        r.topology.nodes[c.guid].ports[c.port] = back  # what the port holds now (a repair plans on it)
        if "m_key" in c.link_diff:
            protect.learn_set(s, c, back)
        if c.lid is not None and back.lid != c.lid:
            r.problems.append(f"{c.name} port {c.port}: LID reads back {back.lid}, expected {c.lid}")
    return failed


def activate(s: SweepState) -> None:
    """ARMED -> ACTIVE, each response read back."""
    r, lp, topo = s.r, s.r.lid_plan, s.r.topology
    with s.phase("activate"):
        arming = []
        for c in r.port_changes:
            if not c.arm:
                continue
            if (c.guid, c.port) in s.arm_failed:
                s.not_active.append(c)  # reported with its failed Set
                continue
            peer = topo.links.get((c.guid, c.port))
            if peer in s.arm_failed:  # ACTIVE needs the neighbour ARMED: it would be refused
                s.not_active.append(c)  # the neighbour's failed Set is the problem reported
                r.notes.append(f"{c.name} port {c.port}: not activated: its neighbour "
                               f"{topo.nodes[peer[0]].description} port {peer[1]} did not reach ARMED")
                continue
            arming.append(c)
        # the same LID fields again: a Set writes the whole attribute
        reqs = [portinfo_set(c, PortState.ACTIVE, lp.master_lid, lmc_for(s, c)) for c in arming]
        failed = []
        for c, rep in zip(arming, s.transport.execute(reqs)):
            if not rep.ok:
                failed.append((c, rep.error))
                continue
            back = topo.nodes[c.guid].ports[c.port] = rep.value(PortInfo)
            if back.port_state != PortState.ACTIVE:
                s.not_active.append(c)
                r.problems.append(f"{c.name} port {c.port}: port state reads back "
                                  f"{PortState(back.port_state).name}, not ACTIVE")
        for c, err in confirm_port_sets(s.transport, failed, PortState.ACTIVE, lp.master_lid,
                                         lambda c: lmc_for(s, c), topo):
            s.not_active.append(c)
            r.problems.append(f"{c.name} port {c.port}: Set ACTIVE failed: {err}")
        r.activations = len(arming)


def client_reregister(transport, topo, targets: list[tuple[int, int]]) -> tuple[list[tuple[int, int]], list[str]]:
    """PortInfo.ClientReregister to each (GUID, port) of `targets`: one Set each, the
    PortInfo as last read (no state change, the link fields as they are) with the one-shot
    bit on (IBA 14.4.11: the port's host stack rejoins its multicast groups and subscribes
    again with the SA). What the port answers goes into `topo` (the bit reads back 0).
    Returns the ports that took it and the problems of the others."""
    reqs, where = [], []
    for guid, port in targets:
        n = topo.nodes[guid]
        pi = n.ports[port]
        data = pi.LAYOUT.replace(pi, port_state=PortState.NO_CHANGE, port_physical_state=0, link_down_default_state=0,
                                 link_width_enabled=0, link_speed_enabled=0, client_reregister=1).encode()
        reqs.append(dr(Method.SET, AttrID.PORT_INFO, n.path_to_port(port), portinfo_modifier(port), data))
        where.append((n, port))
    done, problems = [], []
    for (n, port), rep in zip(where, transport.execute(reqs) if reqs else []):
        if rep.ok:
            n.ports[port] = rep.value(PortInfo)
            done.append((n.guid, port))
        else:
            problems.append(f"{n.description} port {port}: PortInfo Set (ClientReregister) failed: {rep.error}")
    return done, problems
