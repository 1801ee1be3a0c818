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
arms and activates it and routes to it. A switch lost with every link (every link to it
seen DOWN by a neighbour we read) leaves likewise, with whatever is cut off behind it
(switches and the CAs behind them: what a walk from our port no longer reaches); its LIDs
stay reserved. A switch we do not know behind a port that came up (a lost one back) is
found by discovery's walk from that port, which stops at the nodes we know. Every DR path
is recomputed over the new links (`discovery.shortest_paths`, which keeps the M_Key chain
informed). Anything this cannot express (our own port, a switch that does not answer
though not every link to it was seen down, a failed read, a part that came up and does
not answer whole) returns False: the caller does a full sweep instead. While the
transport sees loss, `update_or_retry` reads again before giving up (a switch that did not
answer is most likely lossy, not gone; a full sweep under loss meets more that does not
answer, and its plan check refuses what that hides).

The sweep then plans against this state (`SweepOptions.known`): LIDs, routes and
multicast trees are computed again, and only LFT/MFT blocks that differ from what the
switches hold are written.
"""
from __future__ import annotations

import collections
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


def recompute_paths(topo, keys=None, reached=None) -> bool:
    """Shortest DR paths from the local port over `topo.links` (`discovery.shortest_paths`,
    which tells the M_Key chain `keys` about the new paths; ``reached``: `discovery.reach`
    over them, worked out already); False if a node is cut off or a CA port lost or
    gained its link."""
    return discovery.shortest_paths(topo.nodes, topo.links, topo.local, keys, reached)


def _port_changed(topo, n, p, pi, flagged, changes, new_links, down) -> str | None:
    """Apply one port's fresh PortInfo; a reason string if this needs a full sweep.
    ``down`` gets both ends of a switch link seen DOWN, each with its line in ``changes``."""
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
        text = f"link {n.description}/{p} - {pn.description}/{peer[1]} down"
        down[(n.guid, p)] = down[peer] = text
        changes.append(text)
    elif peer is None and up and (n, p) not in new_links:
        new_links.append((n, p))
    return None


def _ca_port_gone(topo, ca: DNode, port: int) -> None:
    """What discovery would not find now: the port (and the CA once no port of it is linked)."""
    for held in (ca.ports, ca.port_paths, ca.port_guids):
        held.pop(port, None)
    if not ca.port_paths:
        del topo.nodes[ca.guid]


def _drop_cut_off(known, reached, down: dict[tuple[int, int], str], alive: set[int],
                  changes: list[str]) -> set[int] | None:
    """What a walk from our port no longer reaches over the links left, as discovery would
    leave it: the nodes go with their links (a CA also reached by another port keeps that
    one: `_ca_port_gone`); what the model holds of them leaves it (`_tables_unknown`; their
    LFT blocks and MFT units with the sweep that follows, which reads only the switches of
    the topology). A link leaves `topo.links` only when a read saw it DOWN, so
    every link into the part cut off was seen down; a switch that merely did not answer
    keeps its links and is never dropped. ``reached``: what a walk reaches (`discovery.reach`'s
    paths by GUID). Returns the GUIDs dropped; None (nothing
    changed) if a switch that answered us (``alive``) would be among them: the links
    seen do not explain the fabric."""
    topo = known.topology
    gone = [n for g, n in topo.nodes.items() if g not in reached]
    cut = {n.guid for n in gone}
    if cut & alive:
        return None
    for n in gone:
        for p in range(1, n.num_ports + 1):
            peer = topo.links.pop((n.guid, p), None)
            if peer is not None and topo.links.pop(peer, None) is not None and peer[0] not in cut:
                _ca_port_gone(topo, topo.nodes[peer[0]], peer[1])  # a CA that lives on by another port
        del topo.nodes[n.guid]
    seen = collections.Counter(g for g, _p in down)
    for n in gone:
        if n.is_switch:
            k = seen[n.guid]
            changes.append(f"switch {n.description} gone ({f'its {k} links down' if k else 'cut off behind it'})")
    hosts = [n.description for n in gone if not n.is_switch]
    if hosts:
        changes.append(f"{len(hosts)} host(s) gone with it: {', '.join(hosts[:4])}{', ...' if len(hosts) > 4 else ''}")
    return cut


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


def _learn_new_links(transport, known, new_links, flagged, changes) -> str | None:
    """NodeInfo behind every port that came up; the links to switches and CAs recorded,
    and what came up behind a switch we do not know walked (`_walk_new`). A reason string
    if this needs a full sweep."""
    topo = known.topology
    infos = transport.execute([_get(AttrID.NODE_INFO, n.path + (p,)) for n, p in new_links])
    unknown: list[tuple[DNode, int, NodeInfo]] = []
    for (n, p), r in zip(new_links, infos):
        if not r.ok:
            return f"{n.description} port {p}: the new neighbour does not answer"
        ni = r.value(NodeInfo)
        pn = topo.nodes.get(ni.node_guid)
        if ni.node_type == NodeType.SWITCH and pn is None:
            unknown.append((n, p, ni))
            continue
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
    return _walk_new(transport, known, unknown, flagged, changes) if unknown else None


def _walk_new(transport, known, starts, flagged, changes) -> str | None:
    """A switch we do not know came up (a lost one back, a new one): discovery's walk from
    the ports it came up behind, which stops at the nodes we know (`discovery.extend`),
    adds it and everything behind it; their link tables are read by the sweep (a node new to
    the model: `update_or_retry`).
    A reason string if part of it did not answer."""
    topo = known.topology
    before = set(topo.nodes)
    lost = discovery.extend(transport, topo, starts)
    if lost:
        return f"a switch we do not know came up, and part of what is behind it did not answer: {lost[0]}"
    new = [topo.nodes[g] for g in topo.nodes.keys() - before]
    for n in new:
        if n.is_switch:
            flagged.add(n.guid)
            links = sum(1 for p in range(1, n.num_ports + 1) if (n.guid, p) in topo.links)
            changes.append(f"switch {n.description} up ({links} links)")
    hosts = [n.description for n in new if not n.is_switch]
    if hosts:
        changes.append(f"{len(hosts)} host(s) up with it: {', '.join(hosts[:4])}{', ...' if len(hosts) > 4 else ''}")
    return None


def update(transport, known, switches: set[int], answered: set[int] | None = None,
           retries: int | None = 1, down: dict[tuple[int, int], str] | None = None) -> tuple[bool, list[str]]:
    """Refresh `known.topology` from the switches (node GUIDs) that reported a change.
    Returns (handled, what changed); not handled: do a full sweep. ``answered`` (if given)
    gets the GUIDs of the switches that answered any of their PortInfo Gets. ``retries``
    of the PortInfo Gets: one (a switch that is gone is given up at once: a full sweep
    follows), or None: as many as the loss calls for (`RetryPolicy`). ``down`` gets both
    ends of every switch link seen DOWN (kept across the reads of one repair: a switch is
    gone once every link to it was seen down, by this read or an earlier one).

    A part of the fabric no longer reached over the links left (a switch lost with every
    link to it, the hosts behind it) leaves the topology with its links, as discovery would
    leave it (`_drop_cut_off`); its LIDs stay reserved in guid2lid, as a vanished port's."""
    topo = known.topology
    nodes = [topo.nodes.get(g) for g in switches]
    if not nodes or any(n is None or not n.is_switch for n in nodes):
        return False, ["a reporting switch is not in the topology"]
    changes: list[str] = []
    flagged = set(switches)
    new_links: list[tuple[DNode, int]] = []
    down = {} if down is None else down
    alive: set[int] = set()  # the switches read: reachable whatever the links say
    pending = nodes
    walked = None  # (links, nodes) held when a walk of this update last set every path
    for _round in range(2):  # a switch whose DR path crossed a cut link is read again on a new path
        where = [(n, p) for n in pending for p in range(1, n.num_ports + 1)]
        replies = transport.execute([_get(AttrID.PORT_INFO, n.path, portinfo_modifier(p)) for n, p in where],
                                    retries=retries)
        failed = {n.guid for (n, _p), r in zip(where, replies) if not r.ok}
        if answered is not None:
            answered.update(n.guid for (n, _p), r in zip(where, replies) if r.ok)
        alive.update(n.guid for n in pending if n.guid not in failed)
        for (n, p), r in zip(where, replies):
            if n.guid in failed:
                continue
            why = _port_changed(topo, n, p, r.value(PortInfo), flagged, changes, new_links, down)
            if why:
                return False, [why]
        pending = [n for n in pending if n.guid in failed]
        if not pending:
            break
        if not _paths_around(transport, known, down, alive, flagged, changes):
            return False, changes + ["part of the fabric is cut off or a CA changed"]
        walked = (len(topo.links), len(topo.nodes))
        pending = [n for n in pending if n.guid in topo.nodes]  # one cut off with the rest is gone
    if pending:
        return False, changes + [f"{pending[0].description} does not answer"]
    if new_links:
        why = _learn_new_links(transport, known, new_links, flagged, changes)
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
    # the paths stand as that walk set them unless a link or node left since (a read
    # takes links away only: one that came is in ``new_links``)
    if (walked != (len(topo.links), len(topo.nodes)) or new_links) and \
            not _paths_around(transport, known, down, alive, flagged, changes):
        return False, changes + ["part of the fabric is cut off or a CA changed"]
    for g in flagged:  # each end's switch has PortStateChange set: the plan clears it
        n = topo.nodes[g]
        if n.switch_info is not None:
            n.switch_info = dataclasses.replace(n.switch_info, port_state_change=1)
    return True, _said_once(changes, down, topo)


def _said_once(changes: list[str], down: dict[tuple[int, int], str], topo) -> list[str]:
    """``changes`` without the links seen down to a node that left: "switch S0 gone (its
    54 links down)" says them."""
    said = {text for (g, _p), text in down.items() if g not in topo.nodes}
    return [c for c in changes if c not in said] if said else changes


def _paths_around(transport, known, down, alive, flagged, changes) -> bool:
    """`recompute_paths`; when a part is cut off, that part dropped first (`_drop_cut_off`).
    False if the paths still cannot be computed (a switch that answered is cut off, a CA
    port that gained a link unseen)."""
    topo = known.topology
    reached = discovery.reach(topo.nodes, topo.links, topo.local)
    if recompute_paths(topo, transport.keys, reached):
        return True
    cut = _drop_cut_off(known, reached[0], down, alive, changes)
    if cut is None:
        return False
    flagged -= cut
    # what is dropped was not reached: the walk over what is left reaches the rest as before
    return recompute_paths(topo, transport.keys, reached)


def _tables_unknown(known, work):
    """``work`` (a patched fork of ``known``) with the nodes whose link tables the sweep
    must read: those unknown before that are still there, and every node new to the model
    (a switch walked to, with what is behind it)."""
    before, after = known.topology.nodes.keys(), work.topology.nodes.keys()
    return work.evolve(link_tables_unknown=frozenset((work.link_tables_unknown & after) | (after - before)))


def update_or_retry(transport, known, switches: set[int], down: dict[tuple[int, int], str] | None = None):
    """`update` on a fork of the subnet model (`Subnet.fork`); when it fails and SMPs are
    being lost (the transport has seen loss, or every reporting switch answered part of its
    Gets), tried again on a fresh fork, up to LOSSY_TRIES in all (a switch that answers
    nothing may be gone: a full sweep at once, issue 30.1). ``down``: as `update`'s.
    Returns (the patched model, or None: do a full sweep; what changed, or why not)."""
    what: list[str] = []
    for n in range(1, LOSSY_TRIES + 1):
        work = known.fork()
        answered: set[int] = set()
        lossy = n > 1 or transport.policy.lossy()  # then as many retries as the loss calls for
        ok, what = update(transport, work, switches, answered, retries=None if lossy else 1, down=down)
        if ok:
            return _tables_unknown(known, work), what
        # every reporting switch answered some Gets: none is gone, SMPs are being lost
        if n == LOSSY_TRIES or not (transport.policy.lossy() or answered >= switches):
            break
        log.info("repair: %s; reading again (the fabric loses SMPs: try %d of %d)", "; ".join(what), n + 1,
                 LOSSY_TRIES)
    return None, what


def changed_elsewhere(transport, topo, read: set[int]) -> tuple[set[int], list[DNode]]:
    """A light look after a patch: SwitchInfo of every switch (one Get each, on the paths
    recomputed around the cuts found so far). Returns (the switches not ``read`` yet whose
    PortStateChange is set, the switches that did not answer: a cut no trap reported lies
    on their path, or they are lost with links no read saw down yet)."""
    sws = topo.switches()
    replies = transport.execute([_get(AttrID.SWITCH_INFO, n.path) for n in sws])
    more = {n.guid for n, r in zip(sws, replies)
            if r.ok and n.guid not in read and r.value(SwitchInfo).port_state_change}
    return more, [n for n, r in zip(sws, replies) if not r.ok]


def update_all(transport, known, switches: set[int]):
    """`update_or_retry` from the switches that reported, then light looks for changes no
    trap reported (a switch's trap travels by the LFTs, and is lost when its route to the
    SM crossed a cable just cut) until none is left: one repair finds every change. No
    look follows reads that found nothing new (every switch answered the last one, and
    what it flagged is read): a cut whose far end sent no trap costs one look, not two.
    A switch that does not answer a look is fine once the switches read since have seen
    every link to it down (it left the topology: lost, its neighbours' traps lost too);
    one still there after the last look read what it could is a full sweep.
    Returns (the patched state, or None: do a full sweep; what changed, or why not)."""
    read = set(switches)
    down: dict[tuple[int, int], str] = {}
    patched, what = update_or_retry(transport, known, switches, down)
    silent: list[DNode] = []
    for _round in range(LOOK_ROUNDS):
        if patched is None:
            return None, what
        more, silent = changed_elsewhere(transport, patched.topology, read)
        if not more:
            break
        log.info("repair: PortStateChange also at %s (no trap from there)",
                 ", ".join(patched.topology.nodes[g].description for g in sorted(more)))
        read |= more
        shape = len(patched.topology.links), len(patched.topology.nodes)
        patched, again = update_or_retry(transport, patched, more, down)
        what = what + again
        if patched is not None and not again and not silent and \
                shape == (len(patched.topology.links), len(patched.topology.nodes)):
            break  # they held nothing new (the far ends of cuts read already): the look stands
    if patched is None:
        return None, what
    silent = [n for n in silent if n.guid in patched.topology.nodes]
    if silent:
        return None, what + [f"{silent[0].description} did not answer the light look (a cut no trap reported)"]
    return patched, _said_once(what, down, patched.topology)
