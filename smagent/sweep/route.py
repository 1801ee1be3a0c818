"""The route phase: the routing input built from the topology and the LID plan, the
engine the typed spec names (`smagent.routing`), static LFT entries over its routes."""
from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

import numpy as np

from mad import codes, forwarding as fw
from smagent import discovery, linkconf as links, routing
from smagent.config import qospolicy
from smagent.planning import lidassign as lids, qoslayers
from smagent.routing import patch as patchmod
from smagent.sweep.state import SweepState

if TYPE_CHECKING:
    from smagent.model.subnet import Subnet

log = logging.getLogger("smagent.sweep")


def route(s: SweepState) -> None:
    """Routes for every switch by the spec's engine (a desired state's roots make it updn
    from them), static entries over them; LIDs left without a route are a problem."""
    topo, r, plan_ = s.topo, s.r, s.r.lid_plan
    with s.phase("route"):
        s.rin = routing_input(topo, plan_)
        caps = link_vl_caps(topo)
        s.rin.data_vls = planned_data_vls(s, caps)
        spec = s.route_spec
        if s.resolved is not None and s.resolved.roots:  # desired state `root:` (routing updn)
            spec = spec.with_roots(s.resolved.roots)
        if _may_choose_dfsssp(spec):  # auto takes dfsssp only within the layers the SL2VL tables carry
            s.rin.data_vls = layer_room(s, s.rin.data_vls, caps)
        routes = s.routes = patched(s, spec) or routing.route(spec, s.rin, s.engine_input, s.opts.routing_memory)
        r.notes += routes.notes
        engine, reason = routes.chosen or (spec.engine, "as asked")  # commands.sweep_cmd.ROUTED_AS_ASKED
        r.routing = {"engine": engine, "reason": reason}
        if routes.moved is not None:  # a patch: how many entries it moved
            r.routing["moved"] = routes.moved
        remember_basis(s, spec, routes)
        if s.opts.routing_memory is not None:  # a running SM's status shows it
            s.opts.routing_memory.routing = r.routing
        r.path_sls = routes.sls
        policy = qos_policy(s)
        if policy is not None:  # the policy's SLs over the engine's layers (smagent.planning.qoslayers)
            problems = qospolicy.fabric_problems(policy, topo)
            if problems:  # refused before the first Set, as OpenSM's parser refuses it
                raise qospolicy.QosPolicyError(policy.source, problems)
            parts = s.opts.partitions or getattr(s.opts.desired, "partitions", None)
            s.qos_members = qospolicy.topology_membership(policy, topo, parts)
            r.notes += qospolicy.fabric_notes(policy, topo, parts)
            s.qos_dests = qoslayers.dlid_ports(topo, plan_)
            r.path_sls = qoslayers.rows(policy, s.rin.switches, routes.sls, s.qos_dests, s.qos_members)
        static = s.resolved.static_lft if s.resolved is not None else {}
        for g, entries in static.items():  # static entries override routing
            routes[g] = routes[g].updated(entries)
            plan_.top = max(plan_.top, max(entries))
        # a static entry (even 255) is the admin's choice, not a missing route
        unrouted = _unrouted(routes, s.rin, static)
        if unrouted:
            names = sorted({topo.nodes[g].description for g, _ in unrouted})
            cause = ("the routing file has no entry for them" if spec.engine == "file"
                     else "the switch graph is split")
            r.problems.append(f"{len(unrouted)} (switch, LID) pairs have no route: {cause} "
                              f"(switches missing routes: {', '.join(names[:5])})")


def _unrouted(routes: routing.Routes, rin: routing.RoutingInput, static: dict) -> list[tuple[int, int]]:
    """(switch, LID) pairs without a route, a static entry aside: one numpy gather per
    switch (the usual case, every LID routed), LID by LID only where one is missing."""
    homes = sorted(rin.lid_homes)
    if not homes:
        return []
    at = np.array(homes, np.int64)
    out = []
    for g in rin.switches:
        ports = routes[g].ports
        if len(ports) > homes[-1] and not (np.frombuffer(ports, np.uint8)[at] == routing.NO_PORT).any():
            continue
        out += [(g, lid) for lid in routes[g].missing(homes) if lid not in static.get(g, ())]
    return out


def patched(s: SweepState, spec: routing.RoutingSpec) -> routing.Routes | None:
    """A repair that only lost links, switches or LIDs since the last routes: those routes
    as the known LFTs hold them, with only the entries through what was lost moved
    (`smagent.routing.patch`); None (route afresh) when the engine gives no rule to patch
    by, anything was gained (unless it gives back what the last patch lost: `restored`),
    or the rule finds no path (logged, and noted, with why)."""
    memory, known, rin = s.opts.routing_memory, s.opts.known, s.routing_input
    basis = getattr(memory, "basis", None)
    if memory is None or known is None or basis is None or basis.spec != spec:
        return None
    suspects, lost, why = patchmod.losses(basis, rin)
    if not lost and memory.undo:  # gained: what the last patch lost, back?
        back = restored(s, memory, basis, known, rin)
        if back is not None:
            return back
    if why is None:
        old, why = known_images(known, rin)
    if why is None:
        try:
            gone = patchmod.Lost.of(basis, rin, known.lft)
            done = patchmod.patch(rin, old, basis.rule, suspects, gone)
        except patchmod.PatchRefused as e:
            why = str(e)
    if why is not None:
        if lost:  # a loss the rule could not patch: say so beside the full routing
            s.r.notes.append(f"routes not patched ({why}): routed afresh")
        log.info("route patch: %s: routed afresh", why)
        return None
    routes = done.routes
    if not s.opts.dry_run:  # what the next repair puts back if this loss comes back (`restored`)
        memory.undo.append(patchmod.Undo.of(basis, rin, done, gone))
        del memory.undo[:-patchmod.UNDO_KEPT]
    reason = (f"{basis.rule.engine}'s routes kept, {done.moved} entries for {done.dlids} LIDs at "
              f"{done.switches} switches " + (f"moved off {lost // 2 or 1} lost link(s)" if lost else
                                              "changed: hosts' LIDs that left or came"))
    routes.chosen, routes.moved = (basis.rule.engine, reason), done.moved
    routes.notes.append(f"routes patched: {reason}")
    log.info("route patch: %s", reason)
    return routes


def restored(s: SweepState, memory: routing.AutoMemory, basis: patchmod.Basis, known: Subnet,
             rin: routing.RoutingInput) -> routing.Routes | None:
    """The routes before the last patch (`patchmod.restore`; ``basis``: the patched routes')
    when what it lost came back and nothing else changed; None (logged): patch or route
    afresh as without it."""
    undo = memory.undo[-1]
    if undo.spec != basis.spec:
        return None
    back = patchmod.restore(rin, _known_tables(known, rin)[0], undo, basis)
    if isinstance(back, str):
        log.info("route patch: the routes before the loss not put back: %s", back)
        return None
    if not s.opts.dry_run:
        memory.undo.pop()
    moved = sum(len(at) for at, _b, _a in undo.cells.values())
    reason = f"{undo.rule.engine}'s routes before the loss put back: {moved} entries at {len(undo.cells)} switches"
    back.chosen, back.moved = (undo.rule.engine, reason), moved
    back.notes.append(f"routes restored: {reason}")
    log.info("route patch: %s", reason)
    return back


def known_images(known: Subnet, rin: routing.RoutingInput) -> tuple[dict[int, bytes], str | None]:
    """The LFT image of every switch of ``rin``, known at least up to its highest LID (the
    subnet model's own tables, not copied); and why not (a block unknown)."""
    out, lacking = _known_tables(known, rin)
    for g, first in lacking.items():
        return {}, f"LFT block {first} of {rin.name(g)} is not known"
    return out, None


def _known_tables(known: Subnet, rin: routing.RoutingInput) -> tuple[dict[int, bytes], dict[int, int]]:
    """The switches of ``rin`` whose LFT image the model knows at least up to the highest
    LID (their own tables), and the others' first block not known, in ``rin``'s order."""
    blocks = max(rin.lid_homes, default=0) // fw.LFT_BLOCK_SIZE + 1
    size = blocks * fw.LFT_BLOCK_SIZE
    unknown: dict[int, int] = {}
    for g, b in known.lft_unknown:
        if b < blocks:
            unknown[g] = min(b, unknown.get(g, b))
    out, lacking = {}, {}
    for g in rin.switches:
        table = known.lft.get(g, b"")
        first = unknown.get(g, len(table) // fw.LFT_BLOCK_SIZE if len(table) < size else None)
        if first is not None:
            lacking[g] = first
        else:
            out[g] = table  # the model's own (immutable) table: the patch reads up to its highest LID
    return out, lacking


def remember_basis(s: SweepState, spec: routing.RoutingSpec, routes: routing.Routes) -> None:
    """What a running SM's next repair may patch these routes against (not after a dry
    run: a plan changes no switch)."""
    memory = s.opts.routing_memory
    if memory is None or s.opts.dry_run:
        return
    rule = routes.patch_rule
    memory.basis = None if rule is None else patchmod.Basis.of(rule, spec, s.routing_input)
    if routes.moved is None:  # routed afresh: no patch of these routes to put back
        memory.undo.clear()


def _may_choose_dfsssp(spec: routing.RoutingSpec) -> bool:
    return spec.engine == "auto" or (spec.fallback is not None and _may_choose_dfsssp(spec.fallback))


def layer_room(s: SweepState, data_vls: int | None, caps: set[tuple[int, int, int]]) -> int:
    """The most routing layers (SL n on VL n) the link configuration this sweep writes can
    carry on every port, up to ``data_vls``: 1 when it writes no link (--no-links) or
    leaves the SL2VL tables alone (--no-qos), else the largest count `layers_problem`
    accepts (the same rule the port phase refuses a layered route by); ``caps``: the
    links' `link_vl_caps`."""
    opts = None if s.opts.links is False else (
        s.opts.links or getattr(s.opts.desired, "links", None) or links.LinkOptions())
    most = data_vls or 8
    if opts is None or opts.qos_mode == "never" or most <= 1:
        return 1
    codes_run = {max(1, min(a, b, opts.vls_code)) for a, b, _op in caps}
    op_vls = {i: c for i, c in enumerate(codes_run)}
    for layers in range(most, 1, -1):
        if links.layers_problem(dataclasses.replace(opts, sl_layers=layers), op_vls) is None:
            return layers
    return 1


def qos_policy(s: SweepState):
    """The QoS policy in force: the sweep's option, else the desired state's, else None."""
    return s.opts.qos_policy or getattr(s.opts.desired, "qos_policy", None)


def link_vl_caps(topo: discovery.Topology) -> set[tuple[int, int, int]]:
    """The distinct (VLCap, the far end's VLCap, OperationalVLs) of the link ends both of
    whose PortInfos are known: all that the VL rules below read of the links, gathered in
    one pass (a handful of values on a fabric of one hardware kind)."""
    nodes, out = topo.nodes, set()
    for (g, p), (g2, p2) in topo.links.items():
        a, b = nodes.get(g), nodes.get(g2)
        pa = a.ports.get(p) if a else None
        pb = b.ports.get(p2) if b else None
        if pa is not None and pb is not None:
            out.add((pa.vl_cap, pb.vl_cap, pa.operational_vls))
    return out


def planned_data_vls(s: SweepState, caps: set[tuple[int, int, int]]) -> int | None:
    """The fewest data VLs any linked port will run: what a VL-layering engine may use.
    OperationalVLs as the link planner sets it (both ends' VLCap and the options' max VLs;
    `links.port_fields`), or as ports hold it when the sweep configures no link; ``caps``:
    the links' `link_vl_caps`."""
    opts = s.opts.links
    cap = None if opts is False else (opts or getattr(s.opts.desired, "links", None))
    code_max = cap.vls_code if cap else codes.VL_CODES[15]
    return min((codes.DATA_VLS.get(op if opts is False else max(1, min(a, b, code_max)), 1) for a, b, op in caps),
               default=None)


def routing_input(topo: discovery.Topology, plan: lids.LidPlan) -> routing.RoutingInput:
    """What the routing engines read: the switch graph and where every LID lives (port 0
    of a switch; the switch port a CA port hangs off, for each of its 2^LMC LIDs)."""
    switches = sorted(n.guid for n in topo.switches())
    sw = set(switches)
    adjacency: dict[int, list[tuple[int, int]]] = {g: [] for g in switches}
    lid_homes: dict[int, tuple[int, int]] = {}
    for (g, p), (g2, p2) in topo.links.items():
        if g in sw and g2 in sw and g != g2:
            adjacency[g].append((p, g2))
    for g in switches:
        adjacency[g].sort()
        pg = topo.nodes[g].port_guids.get(0, g)
        if pg in plan.lids:
            lid_homes[plan.lids[pg]] = (g, 0)
    for n in topo.cas():
        for p in n.lid_ports():
            ca_pg = n.port_guids.get(p)
            peer = topo.links.get((n.guid, p))
            if ca_pg is None or ca_pg not in plan.lids or peer is None or peer[0] not in sw:
                continue  # a CA-to-CA cable or an unassigned port: nothing to route to
            base = plan.lids[ca_pg]
            for lid in range(base, base + (1 << plan.lmc)):
                lid_homes[lid] = peer
    return routing.RoutingInput(switches, adjacency, lid_homes, {g: topo.nodes[g].num_ports for g in switches},
                                {g: topo.nodes[g].description for g in switches})
