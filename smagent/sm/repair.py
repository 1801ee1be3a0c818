"""Incremental repair: bring the subnet model (what our last sweep left, a
`model.subnet.Subnet`) up to date from the switches that reported a change, without
rediscovering the fabric: a fork of it is patched.

For each such switch: read every port's PortInfo (one Get per port). A linked port that is
now DOWN loses its link; an up port with no link gets its neighbour's NodeInfo and, if the
neighbour is a switch we know, the link back. Both ends' switches are marked as having
PortStateChange set (the plan then clears it). A host (CA) port is handled alike: one that
went down leaves the topology as discovery would leave it (its port, and the CA once no
port of it is linked; its LID stays reserved in guid2lid); one that came up is added with
its NodeInfo, NodeDescription and PortInfo (3 Gets), and the sweep gives it its LID back,
arms and activates it and routes to it. Every DR path is recomputed over the new links
(`discovery.shortest_paths`, which keeps the M_Key chain informed). Anything this cannot
express (an unknown switch, our own port, a node no longer reachable, a failed read)
returns False: the caller does a full sweep instead. While the transport sees loss,
`update_or_retry` reads again before giving up (a switch that did not answer is most
likely lossy, not gone; a full sweep under loss meets more that does not answer, and its
plan check refuses what that hides).

The sweep then plans against this state (`SweepOptions.known`): LIDs, routes and
multicast trees are computed again, and only LFT/MFT blocks that differ from what the
switches hold are written.
"""
from __future__ import annotations

import dataclasses
import logging

from mad import smp as smpcodec
from mad.attributes import AttrID, NodeDescription, NodeInfo, NodeType, PortInfo, PortState, SwitchInfo
from mad.forwarding import portinfo_modifier
from mad.header import Method
from smagent import discovery
from smagent.discovery import DNode
from smagent.transport.base import Request

log = logging.getLogger("smagent.sm")
LOSSY_TRIES = 2  # `update` tries while the transport sees loss, before a full sweep
LOOK_ROUNDS = 3  # light looks after a patch: each may find switches whose traps were lost


def _get(attr, path, mod=0) -> Request:
    return Request(smpcodec.dr(Method.GET, attr, path, mod))


def recompute_paths(topo, keys=None) -> bool:
    """Shortest DR paths from the local port over `topo.links` (`discovery.shortest_paths`,
    which tells the M_Key chain `keys` about the new paths); False if a node is cut off or
    a CA port lost or gained its link."""
    return discovery.shortest_paths(topo.nodes, topo.links, topo.local, keys)


def _port_changed(topo, n, p, pi, flagged, changes, new_links) -> str | None:
    """Apply one port's fresh PortInfo; a reason string if this needs a full sweep."""
    n.ports[p] = pi
    up = pi.port_state >= PortState.INIT
    peer = topo.links.get((n.guid, p))
    if peer is not None and not up:
        pn = topo.nodes[peer[0]]
        del topo.links[(n.guid, p)], topo.links[peer]
        if not pn.is_switch:
            if pn.guid == topo.local[0]:
                return f"{n.description} port {p}: our own port's link went down"
            _ca_port_gone(topo, pn, peer[1])
            changes.append(f"host {pn.description}/{peer[1]} link to {n.description}/{p} down")
            return None
        old = pn.ports.get(peer[1])
        if old is not None:
            pn.ports[peer[1]] = dataclasses.replace(old, port_state=int(PortState.DOWN))
        flagged.add(pn.guid)
        changes.append(f"link {n.description}/{p} - {pn.description}/{peer[1]} down")
    elif peer is None and up and (n, p) not in new_links:
        new_links.append((n, p))
    return None


def _ca_port_gone(topo, ca: DNode, port: int) -> None:
    """What discovery would not find now: the port (and the CA once no port of it is linked)."""
    for held in (ca.ports, ca.port_paths, ca.port_guids):
        held.pop(port, None)
    if not ca.port_paths:
        del topo.nodes[ca.guid]


def _ca_port_found(topo, n: DNode, p: int, ni: NodeInfo) -> DNode:
    """A CA port newly linked to switch `n` port `p`: the CA (a new DNode when none of its
    ports was linked), with the port's path and GUID as discovery records them."""
    path = n.path + (p,)
    ca = topo.nodes.get(ni.node_guid)
    if ca is None:
        ca = topo.nodes[ni.node_guid] = DNode(ni.node_guid, ni.node_type, ni.num_ports, path, ni)
    ca.port_paths[ni.local_port_num] = path
    ca.port_guids[ni.local_port_num] = ni.port_guid
    return ca


def _learn_new_links(transport, topo, new_links, flagged, changes) -> str | None:
    """NodeInfo behind every port that came up; the links to switches and CAs recorded.
    A reason string if this needs a full sweep."""
    infos = transport.execute([_get(AttrID.NODE_INFO, n.path + (p,)) for n, p in new_links])
    for (n, p), r in zip(new_links, infos):
        if not r.ok:
            return f"{n.description} port {p}: the new neighbour does not answer"
        ni = r.value(NodeInfo)
        pn = topo.nodes.get(ni.node_guid)
        if ni.node_type == NodeType.SWITCH and pn is None:
            return f"{n.description} port {p}: a switch we do not know came up"
        a, b = (n.guid, p), (ni.node_guid, ni.local_port_num)
        if topo.links.get(a) == b:
            continue  # both ends reported: the other end added it
        if b in topo.links:
            return f"{pn.description if pn else hex(ni.node_guid)} port {b[1]} is linked elsewhere"
        if ni.node_type != NodeType.SWITCH:
            pn = _ca_port_found(topo, n, p, ni)
        assert pn is not None
        topo.links[a], topo.links[b] = b, a
        if pn.is_switch:
            flagged.add(pn.guid)
            changes.append(f"link {n.description}/{p} - {pn.description}/{b[1]} up")
    return None


def update(transport, known, switches: set[int], answered: set[int] | None = None,
           retries: int | None = 1) -> tuple[bool, list[str]]:
    """Refresh `known.topology` from the switches (node GUIDs) that reported a change.
    Returns (handled, what changed); not handled: do a full sweep. ``answered`` (if given)
    gets the GUIDs of the switches that answered any of their PortInfo Gets. ``retries``
    of the PortInfo Gets: one (a switch that is gone is given up at once: a full sweep
    follows), or None: as many as the loss calls for (`RetryPolicy`)."""
    topo = known.topology
    nodes = [topo.nodes.get(g) for g in switches]
    if not nodes or any(n is None or not n.is_switch for n in nodes):
        return False, ["a reporting switch is not in the topology"]
    changes: list[str] = []
    flagged = set(switches)
    new_links: list[tuple[DNode, int]] = []
    pending = nodes
    for _round in range(2):  # a switch whose DR path crossed a cut link is read again on a new path
        where = [(n, p) for n in pending for p in range(1, n.num_ports + 1)]
        replies = transport.execute([_get(AttrID.PORT_INFO, n.path, portinfo_modifier(p)) for n, p in where],
                                    retries=retries)
        failed = {n.guid for (n, _p), r in zip(where, replies) if not r.ok}
        if answered is not None:
            answered.update(n.guid for (n, _p), r in zip(where, replies) if r.ok)
        for (n, p), r in zip(where, replies):
            if n.guid in failed:
                continue
            why = _port_changed(topo, n, p, r.value(PortInfo), flagged, changes, new_links)
            if why:
                return False, [why]
        pending = [n for n in pending if n.guid in failed]
        if not pending:
            break
        if not recompute_paths(topo, transport.keys):
            return False, changes + ["part of the fabric is cut off or a CA changed"]
    if pending:
        return False, changes + [f"{pending[0].description} does not answer"]
    if new_links:
        why = _learn_new_links(transport, topo, new_links, flagged, changes)
        if why:
            return False, [why]
        back = transport.execute([_get(AttrID.PORT_INFO, n.path + (p,), portinfo_modifier(topo.links[(n.guid, p)][1]))
                                  for n, p in new_links])
        for (n, p), r in zip(new_links, back):
            if not r.ok:
                return False, ["a new neighbour's PortInfo read failed"]
            pg, pp = topo.links[(n.guid, p)]
            topo.nodes[pg].ports[pp] = r.value(PortInfo)
        behind = (topo.nodes[topo.links[(n.guid, p)][0]] for n, p in new_links)
        new_cas = list({ca.guid: ca for ca in behind if not ca.is_switch}.values())
        for ca, r in zip(new_cas, transport.execute([_get(AttrID.NODE_DESCRIPTION, ca.path) for ca in new_cas])):
            if not r.ok:
                return False, [f"{ca.description or hex(ca.guid)}: NodeDescription read failed"]
            ca.node_description = r.value(NodeDescription).node_string
            ca.description = transport.names.name(ca.guid, ca.node_description)
            changes.append(f"host {ca.description} up")
    if not recompute_paths(topo, transport.keys):
        return False, changes + ["part of the fabric is cut off or a CA changed"]
    for g in flagged:  # each end's switch has PortStateChange set: the plan clears it
        n = topo.nodes[g]
        if n.switch_info is not None:
            n.switch_info = dataclasses.replace(n.switch_info, port_state_change=1)
    return True, changes


def update_or_retry(transport, known, switches: set[int]):
    """`update` on a fork of the subnet model (`Subnet.fork`); when it fails and SMPs are
    being lost (the transport has seen loss, or every reporting switch answered part of its
    Gets), tried again on a fresh fork, up to LOSSY_TRIES in all (a switch that answers
    nothing may be gone: a full sweep at once, issue 30.1).
    Returns (the patched model, or None: do a full sweep; what changed, or why not)."""
    what: list[str] = []
    for n in range(1, LOSSY_TRIES + 1):
        work = known.fork()
        answered: set[int] = set()
        lossy = n > 1 or transport.policy.lossy()  # then as many retries as the loss calls for
        ok, what = update(transport, work, switches, answered, retries=None if lossy else 1)
        if ok:
            return work, what
        # every reporting switch answered some Gets: none is gone, SMPs are being lost
        if n == LOSSY_TRIES or not (transport.policy.lossy() or answered >= switches):
            break
        log.info("repair: %s; reading again (the fabric loses SMPs: try %d of %d)", "; ".join(what), n + 1,
                 LOSSY_TRIES)
    return None, what


def changed_elsewhere(transport, topo, read: set[int]) -> set[int] | None:
    """A light look after a patch: SwitchInfo of every switch (one Get each, on the paths
    recomputed around the cuts found so far); the switches not ``read`` yet whose
    PortStateChange is set. None when one does not answer (a cut no trap reported lies
    on its path: a full sweep finds it)."""
    sws = topo.switches()
    replies = transport.execute([_get(AttrID.SWITCH_INFO, n.path) for n in sws])
    if any(not r.ok for r in replies):
        return None
    return {n.guid for n, r in zip(sws, replies) if n.guid not in read and r.value(SwitchInfo).port_state_change}


def update_all(transport, known, switches: set[int]):
    """`update_or_retry` from the switches that reported, then light looks for changes no
    trap reported (a switch's trap travels by the LFTs, and is lost when its route to the
    SM crossed a cable just cut) until none is left: one repair finds every change.
    Returns (the patched state, or None: do a full sweep; what changed, or why not)."""
    read = set(switches)
    patched, what = update_or_retry(transport, known, switches)
    for _round in range(LOOK_ROUNDS):
        if patched is None:
            return None, what
        more = changed_elsewhere(transport, patched.topology, read)
        if more is None:
            return None, what + ["a switch did not answer the light look (a cut no trap reported)"]
        if not more:
            return patched, what
        log.info("repair: PortStateChange also at %s (no trap from there)",
                 ", ".join(patched.topology.nodes[g].description for g in sorted(more)))
        read |= more
        patched, again = update_or_retry(transport, patched, more)
        what = what + again
    return (patched, what) if patched is not None else (None, what)
