"""Incremental repair: bring the known topology (what our last sweep left, a
`sweep.KnownState`) up to date from the switches that reported a change, without
rediscovering the fabric.

For each such switch: read every port's PortInfo (one Get per port). A linked port that is
now DOWN loses its link; an up port with no link gets its neighbour's NodeInfo and, if the
neighbour is a switch we know, the link back. Both ends' switches are marked as having
PortStateChange set (the plan then clears it). Every DR path is recomputed over the new
links (`discovery.shortest_paths`, which keeps the M_Key chain informed). Anything this
cannot express (a CA lost or found, an unknown node, a node no longer
reachable, a failed read) returns False: the caller does a full sweep instead.

The sweep then plans against this state (`SweepOptions.known`): LIDs, routes and
multicast trees are computed again, and only LFT/MFT blocks that differ from what the
switches hold are written.
"""
from __future__ import annotations

import dataclasses

from mad import smp as smpcodec
from mad.attributes import AttrID, NodeInfo, PortInfo, PortState
from mad.forwarding import portinfo_modifier
from mad.header import Method
from smagent import discovery
from smagent.discovery import DNode
from smagent.transport.base import Request


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
        if not pn.is_switch:
            return f"{n.description} port {p}: a CA's link went down"
        del topo.links[(n.guid, p)], topo.links[peer]
        old = pn.ports.get(peer[1])
        if old is not None:
            pn.ports[peer[1]] = dataclasses.replace(old, port_state=int(PortState.DOWN))
        flagged.add(pn.guid)
        changes.append(f"link {n.description}/{p} - {pn.description}/{peer[1]} down")
    elif peer is None and up and (n, p) not in new_links:
        new_links.append((n, p))
    return None


def update(transport, known, switches: set[int]) -> tuple[bool, list[str]]:
    """Refresh `known.topology` from the switches (node GUIDs) that reported a change.
    Returns (handled, what changed); not handled: do a full sweep."""
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
                                    retries=1)
        failed = {n.guid for (n, _p), r in zip(where, replies) if not r.ok}
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
        infos = transport.execute([_get(AttrID.NODE_INFO, n.path + (p,)) for n, p in new_links])
        for (n, p), r in zip(new_links, infos):
            if not r.ok:
                return False, [f"{n.description} port {p}: the new neighbour does not answer"]
            ni = r.value(NodeInfo)
            pn = topo.nodes.get(ni.node_guid)
            if pn is None or not pn.is_switch:
                return False, [f"{n.description} port {p}: a node we do not know came up"]
            a, b = (n.guid, p), (pn.guid, ni.local_port_num)
            if topo.links.get(a) == b:
                continue  # both ends reported: the other end added it
            if b in topo.links:
                return False, [f"{pn.description} port {b[1]} is linked elsewhere"]
            topo.links[a], topo.links[b] = b, a
            flagged.add(pn.guid)
            changes.append(f"link {n.description}/{p} - {pn.description}/{b[1]} up")
        back = transport.execute([_get(AttrID.PORT_INFO, n.path + (p,), portinfo_modifier(topo.links[(n.guid, p)][1]))
                                  for n, p in new_links])
        for (n, p), r in zip(new_links, back):
            if not r.ok:
                return False, ["a new neighbour's PortInfo read failed"]
            pg, pp = topo.links[(n.guid, p)]
            topo.nodes[pg].ports[pp] = r.value(PortInfo)
    if not recompute_paths(topo, transport.keys):
        return False, changes + ["part of the fabric is cut off or a CA changed"]
    for g in flagged:  # each end's switch has PortStateChange set: the plan clears it
        n = topo.nodes[g]
        if n.switch_info is not None:
            n.switch_info = dataclasses.replace(n.switch_info, port_state_change=1)
    return True, changes
