"""Directed-route discovery: breadth first from the local port, one batch per frontier.

Level by level: a NodeInfo Get down every new path (one batch), then, for the nodes
seen for the first time, NodeDescription, PortInfo of their ports and SwitchInfo (a
second batch). A GUID seen again is a loop or a parallel link: we record the link,
never a second node. Every node keeps the first (so a shortest) DR path that reached it.

M_Keys (`smagent.config.mkeys`): a NodeInfo goes out with the key the transport's key chain
has for its path (the default, for a path never seen). The answer names the node, and
the chain learns the node's key for that path, so every later SMP there (this module's
Gets, a sweep's Sets) carries it. A path that does not answer is asked once more with
each other key the chain holds (one batch for the whole level); the key it answers is
learnt for that path and the node's GUID. A node that answers no key is listed in
`Topology.unreachable` with where it is (DR path, behind which node and port).

Loss: when the transport has seen SMPs lost and then answered (its retry policy says the
fabric is lossy), what failed is asked again, up to `REPAIR_PASSES` times: the NodeInfos
and details that got no answer, then the walk goes on from what they found. A fabric that
loses nothing is not asked twice: a node that never answers there is gone or refuses our
key, and asking again would only cost time (and M_Key violations).
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Iterable

from mad.attributes import AttrID, NodeDescription, NodeInfo, NodeType, PortInfo, PortState, SwitchInfo
from mad import codes
from mad.forwarding import portinfo_modifier
from mad.header import Method
from mad import smp as smpcodec
from smagent.model.topology import DNode, Topology  # the model's builder, filled here
from smagent.transport.base import Reply, Request, SmpTimeout, Transport

if TYPE_CHECKING:
    from smagent.model.fabric import Fabric
    from smagent.config.mkeys import KeyChain

PHYS_LINK_UP = 5
log = logging.getLogger("smagent.discovery")
REPAIR_PASSES = 3  # extra passes over what got no answer, on a lossy fabric

NO_ANSWER = ("no response: the node did not answer; if its port is M_Key-protected the key was refused "
             "(protected SMAs drop SMPs with a wrong M_Key)")


def _get(attr_id, path, modifier=0) -> Request:
    return Request.dr(Method.GET, attr_id, path, modifier)


def _node_infos(transport: Transport, paths: list[tuple[int, ...]]) -> tuple[list[Reply], dict[tuple[int, ...], int]]:
    """NodeInfo down every path, one batch. A path that times out is tried once more
    with each other candidate M_Key of the transport's key chain (one batch); the key
    it answers is learnt for the path and the node. Every node that answers has its
    key learnt for its path. Returns (replies in order, {path: keys tried} for those
    that never answered)."""
    keys = transport.keys
    replies = transport.execute([_get(AttrID.NODE_INFO, p) for p in paths])
    tried: dict[tuple[int, ...], int] = {}
    lost = [i for i, r in enumerate(replies) if isinstance(r.error, SmpTimeout)]
    if lost:
        cands = keys.candidates()
        probes = [(i, k) for i in lost for k in cands if k != replies[i].request.smp.m_key]
        for i in lost:
            tried[paths[i]] = 1 + sum(1 for j, _k in probes if j == i)
        if probes:
            reqs = [Request(smpcodec.dr(Method.GET, AttrID.NODE_INFO, paths[i], m_key=k)) for i, k in probes]
            for (i, k), r in zip(probes, transport.execute(reqs, retries=0)):
                if r.ok and not replies[i].ok:
                    replies[i] = r
                    ni = r.value(NodeInfo)
                    keys.learn(path=paths[i], guid=ni.node_guid, port_guid=ni.port_guid, key=k)
                    tried.pop(paths[i], None)
    for p, r in zip(paths, replies):
        if r.ok and keys.per_node:  # (re-)learnt: a path may lead elsewhere since the last discovery
            ni = r.value(NodeInfo)
            keys.learn(path=p, guid=ni.node_guid, port_guid=ni.port_guid)
    return replies, tried


def _port_up(pi: PortInfo) -> bool:
    return pi.port_state != PortState.DOWN or pi.port_physical_state == PHYS_LINK_UP


Frontier = list[tuple[tuple[int, ...], int | None, int | None]]  # (path, parent GUID, parent exit port)


class _Walk:
    """What a breadth-first discovery has learnt so far, and its steps per BFS level."""

    def __init__(self, transport: Transport, sent0: int = 0):
        self.t, self.sent0 = transport, sent0  # SMPs sent before the walk: progress counts from there
        self.nodes: dict[int, DNode] = {}
        self.links: dict[tuple[int, int], tuple[int, int]] = {}
        self.loopbacks: list[tuple[int, int]] = []
        self.fixed: list[tuple[str, dict]] = []  # what no pass can reach (beyond 63 hops)
        # what got no answer, and how to ask again: (("path", frontier entry) or
        # ("detail", (node, what, port)), readable, fields)
        self.pending: list[tuple[tuple, str, dict]] = []
        self.passes = 0  # repair passes made

    def lost(self, where: str, error, path=None, node=None, port=None, retry=None) -> None:
        log.warning("unreachable: %s: %s", where, error)
        item = (f"{where}: {error}", {"where": where, "path": list(path) if path else None,
                                      "node": node and (node.description or hex(node.guid)),
                                      "guid": node and f"0x{node.guid:016x}", "port": port, "error": str(error)})
        if retry is None:
            self.fixed.append(item)
        else:
            self.pending.append((retry, *item))

    @property
    def unreachable(self) -> list[str]:
        return [text for text, _ in self.fixed] + [text for _r, text, _ in self.pending]

    @property
    def unreached(self) -> list[dict[str, Any]]:
        return [d for _, d in self.fixed] + [d for _r, _t, d in self.pending]

    def node_infos(self, frontier: Frontier, known: dict[tuple[int, ...], NodeInfo]) -> dict[tuple[int, ...], NodeInfo]:
        """NodeInfo down every path of the frontier that ``known`` lacks: {path: NodeInfo}."""
        todo = [f for f in frontier if f[0] not in known]
        replies, tried = _node_infos(self.t, [f[0] for f in todo]) if todo else ([], {})
        infos = dict(known)
        for (path, parent, pport), r in zip(todo, replies):
            if r.ok:
                infos[path] = r.value(NodeInfo)
                continue
            behind = self.nodes.get(parent) if parent is not None else None
            where = f" (behind {behind.description or hex(behind.guid)} port {pport})" if behind else ""
            why: object = r.error
            if isinstance(why, SmpTimeout):
                n = tried.get(path, 1)
                why = NO_ANSWER + (f"; {n} M_Keys tried" if n > 1 else "")
            self.lost(f"DR {','.join(map(str, path))}{where}", why, path, behind, pport if behind else None,
                      retry=("path", (path, parent, pport)))
        return infos

    def learn(self, frontier: Frontier, infos: dict[tuple[int, ...], NodeInfo]
              ) -> tuple[list[DNode], list[tuple[DNode, int]]]:
        """Record the links and nodes the NodeInfos show: (new nodes, new CA ports)."""
        new_nodes: list[DNode] = []
        new_ca_ports: list[tuple[DNode, int]] = []
        for path, parent, pport in frontier:
            ni = infos.get(path)
            if ni is None:
                continue
            if parent is not None and pport is not None:
                a, b = (parent, pport), (ni.node_guid, ni.local_port_num)
                if a == b:
                    self.loopbacks.append(a)
                    continue
                self.links[a], self.links[b] = b, a
            node = self.nodes.get(ni.node_guid)
            if node is None:
                node = self.nodes[ni.node_guid] = DNode(ni.node_guid, ni.node_type, ni.num_ports, path, ni)
                new_nodes.append(node)
            if not node.is_switch and ni.local_port_num not in node.port_paths:
                node.port_paths[ni.local_port_num] = path
                node.port_guids[ni.local_port_num] = ni.port_guid
                new_ca_ports.append((node, ni.local_port_num))
            elif node.is_switch:
                node.port_guids[0] = ni.port_guid
        return new_nodes, new_ca_ports

    def details(self, new_nodes: list[DNode], new_ca_ports: list[tuple[DNode, int]],
                again: Iterable[tuple[DNode, str, int | None]] = ()) -> None:
        """NodeDescription, SwitchInfo and PortInfo of what is new (and the (node, what,
        port) of ``again``), in one batch."""
        sinks: list[tuple[DNode, str, int | None]] = list(again)
        for n in new_nodes:
            sinks.append((n, "desc", None))
            if n.is_switch:
                sinks.append((n, "swinfo", None))
                sinks += [(n, "port", p) for p in range(n.num_ports + 1)]
        sinks += [(n, "port", p) for n, p in new_ca_ports]
        reqs = [_get(AttrID.NODE_DESCRIPTION, n.path) if what == "desc" else
                _get(AttrID.SWITCH_INFO, n.path) if what == "swinfo" else
                _port_get(n, p) for n, what, p in sinks]
        for (n, what, port), r in zip(sinks, self.t.execute(reqs)):
            if not r.ok:
                label = {"desc": "NodeDescription", "swinfo": "SwitchInfo"}.get(what, f"PortInfo of port {port}")
                self.lost(f"{n.description or hex(n.guid)} ({label})", r.error, n.path, n, port,
                          retry=("detail", (n, what, port)))
            elif what == "desc":
                n.node_description = r.value(NodeDescription).node_string
                n.description = self.t.names.name(n.guid, n.node_description)
            elif what == "swinfo":
                n.switch_info = r.value(SwitchInfo)
            elif port is not None:
                n.ports[port] = r.value(PortInfo)

    def next_frontier(self, new_nodes: list[DNode], local: tuple[int, int]) -> Frontier:
        """Every up port of a new switch but the one we came in by; from a CA, its local port."""
        nxt: Frontier = []
        for n in new_nodes:
            if n.is_switch:
                came_in = n.node_info.local_port_num if len(n.path) > 1 else None
                for p in range(1, n.num_ports + 1):
                    pi = n.ports.get(p)
                    # skip the way in, down ports, and links already learnt from the far
                    # side (in a Clos many are: the spines saw the new leaves first)
                    if pi is None or not _port_up(pi) or p == came_in or (n.guid, p) in self.links:
                        continue
                    if len(n.path) > smpcodec.MAX_HOPS:
                        self.fixed.append((f"beyond {smpcodec.MAX_HOPS} hops from {n.description}",
                                           {"where": f"{n.description} port {p}", "path": None,
                                            "node": n.description, "guid": f"0x{n.guid:016x}", "port": p,
                                            "error": f"beyond {smpcodec.MAX_HOPS} hops"}))
                        continue
                    nxt.append((n.path + (p,), n.guid, p))
            elif len(n.path) == 1:
                pi = n.ports.get(local[1])
                if pi is not None and _port_up(pi):
                    nxt.append(((0, local[1]), n.guid, local[1]))
        return nxt

    def walk(self, frontier: Frontier, known: dict, local, progress=None, again=()) -> None:
        """Breadth first from ``frontier`` (``known``: NodeInfos already in hand), the
        details ``again`` asked with the first level."""
        while frontier or again:
            new_nodes, new_ca_ports = self.learn(frontier, self.node_infos(frontier, known))
            known = {}
            self.details(new_nodes, new_ca_ports, again)
            # a switch whose PortInfo came only now: its up ports lead on
            new = {n.guid for n in new_nodes}
            redone = {n.guid: n for n, what, _p in again if what == "port" and n.is_switch and n.guid not in new}
            again = ()
            frontier = self.next_frontier(new_nodes + list(redone.values()), local)
            log.debug("discovery: %d nodes after a BFS level, %d SMPs", len(self.nodes), self.t.stats.sent - self.sent0)
            if progress is not None:
                progress(len(self.nodes), self.t.stats.sent - self.sent0)

    def repair(self, local, progress=None) -> None:
        """Ask again what got no answer, while the fabric is lossy (see the module doc);
        then give every node its shortest path again (a node first reached the long way
        round, because its short path lost the NodeInfo, would pay the loss of every
        extra hop on every later SMP)."""
        while self.pending and self.passes < REPAIR_PASSES and self.t.policy.lossy():
            self.passes += 1
            items, self.pending = self.pending, []
            paths = [entry for (kind, entry), _t, _d in items if kind == "path"]
            again = [entry for (kind, entry), _t, _d in items if kind == "detail"]
            self.walk(paths, {}, local, progress, again)
        if self.passes:
            self.shortest_paths(local)

    def shortest_paths(self, local) -> None:
        """Every node's path again, the shortest over the links learnt (`shortest_paths`);
        left as walked if the links do not reach every node they reached."""
        if not shortest_paths(self.nodes, self.links, local, self.t.keys):
            log.debug("discovery: the links learnt do not reach every node; paths kept as walked")


Paths = dict[int, tuple[int, ...]]  # node GUID (or port) -> DR path


def reach(nodes: dict[int, DNode], links: dict, local) -> tuple[Paths, dict[int, Paths]]:
    """Breadth first over ``links`` ({(guid, port): (guid, port)}) from the ``local`` node
    (guid, port), as a walk reaches them (a CA does not forward; the local CA leaves by its
    own port only): ({node GUID: shortest DR path}, {CA GUID: {port: shortest DR path}}).
    A node missing from the first is cut off from our port. Of several shortest paths, the
    first in port order (the one a walk finds first)."""
    lg, lp = local
    root = nodes[lg]
    paths: Paths = {lg: (0,)}
    ca_ports: dict[int, Paths] = {lg: {lp: (0,)}} if not root.is_switch else {}
    get, node_of = links.get, nodes.get
    # level order: the switches to go on from (a CA forwards nothing: never queued, its
    # path and port paths set as it is met), a list read as it grows
    queue = [lg]
    for g in queue:
        n, here = nodes[g], paths[g]
        for p in range(1, n.num_ports + 1) if n.is_switch else (lp,) if g == lg else ():
            peer = get((g, p))
            if peer is None:
                continue
            pg = peer[0]
            m = node_of(pg)
            if m is None:
                continue
            if m.is_switch:
                if pg not in paths:
                    paths[pg] = here + (p,)
                    queue.append(pg)
                continue
            path = here + (p,)
            held = ca_ports.get(pg)
            if held is None:
                ca_ports[pg] = {peer[1]: path}
            elif peer[1] not in held:
                held[peer[1]] = path
            if pg not in paths:
                paths[pg] = path
    return paths, ca_ports


def shortest_paths(nodes: dict[int, DNode], links: dict, local, keys: KeyChain | None = None,
                   reached: tuple[Paths, dict[int, Paths]] | None = None) -> bool:
    """The one shortest-DR-path computation (discovery's final pass, the daemon's repair).

    Each switch's path and each CA port's path, the shortest (`reach`; ``reached``: its
    answer over these very nodes and links, worked out already); a CA's `path` is
    its shortest port's. Returns False and changes nothing when a node, or a CA port that
    has a path now, is not reached (a node cut off, a CA port that lost or gained its link);
    otherwise sets every `path` and `port_paths`, and tells ``keys`` (when it maps keys
    per node) the node behind every path, so SMPs on the new paths carry the right M_Key."""
    lg = local[0]
    paths, ca_ports = reached if reached is not None else reach(nodes, links, local)
    if not all(map(paths.__contains__, nodes)):
        return False
    empty: Paths = {}
    if any(ca_ports.get(g, empty).keys() != n.port_paths.keys() for g, n in nodes.items() if not n.is_switch):
        return False
    learn = keys is not None and keys.per_node
    for g, n in nodes.items():
        n.path = paths[g]
        if not n.is_switch:
            n.port_paths = ca_ports[g]  # made by `reach` for this node alone
        if learn and g != lg:
            assert keys is not None
            if n.is_switch:
                keys.learn(path=n.path, guid=g, port_guid=n.port_guids.get(0))
            else:
                for p, path in n.port_paths.items():
                    keys.learn(path=path, guid=g, port_guid=n.port_guids.get(p))
    return True


def _port_get(n: DNode, port: int | None) -> Request:
    assert port is not None  # a "port" sink names its port
    return _get(AttrID.PORT_INFO, n.path_to_port(port), portinfo_modifier(port))


def discover(transport: Transport, *, progress=None) -> Topology:
    """Discover the subnet reachable from the transport's local port.

    `progress`, if given, is called as ``progress(nodes_found, smps_sent)`` once per
    BFS level (a handful of calls even on a large fabric, so printing from it is cheap).
    """
    t0, sent0 = time.monotonic(), transport.stats.sent
    (root_reply,), _ = _node_infos(transport, [(0,)])
    if isinstance(root_reply.error, SmpTimeout):
        raise SmpTimeout(f"{root_reply.request.describe()} (the local port): {NO_ANSWER}",
                         request=root_reply.request.describe())
    root = root_reply.value(NodeInfo)  # the local port must answer: raise if not
    local = (root.node_guid, root.local_port_num)
    w = _Walk(transport, sent0)
    w.walk([((0,), None, None)], {(0,): root}, local, progress)
    w.repair(local, progress)
    topo = Topology(w.nodes, w.links, local, w.unreachable, w.loopbacks, w.unreached)
    topo.passes = 1 + w.passes
    topo.smps = transport.stats.sent - sent0
    topo.seconds = time.monotonic() - t0
    log.info("discovered %d nodes (%d switches), %d links: %d SMPs, %.3f s%s", len(topo.nodes),
             len(topo.switches()), topo.num_links(), topo.smps, topo.seconds,
             f"; {len(topo.unreachable)} part(s) unreachable" if topo.unreachable else "")
    return topo


def extend(transport: Transport, topo: Topology, starts: list[tuple[DNode, int, NodeInfo]]) -> list[str]:
    """Discover what came up behind ports of a known topology: the walk of `discover` from
    each (node, port, the NodeInfo read behind it), breadth first, every node it finds
    added to ``topo`` with its details and links; a node ``topo`` knows ends the walk there
    (its link is recorded, its ports are not walked again). Returns what did not answer,
    readable (empty: the part that came up is complete); paths are left as walked."""
    w = _Walk(transport, transport.stats.sent)
    w.nodes, w.links = topo.nodes, topo.links  # known nodes are not new: the walk stops at them
    w.walk([(n.path + (p,), n.guid, p) for n, p, _ni in starts], {n.path + (p,): ni for n, p, ni in starts},
           topo.local)
    topo.loopbacks += w.loopbacks
    return w.unreachable


NAME_MAX_BYTES = 64  # ibsim's NODEIDLEN - 1
_BAD_NAME_CHARS = frozenset('"#@\n\r')


def valid_name(text: str) -> bool:
    """Can `text` be a node name in a net file (ibsim's and ibnetdiscover's)?

    Not empty, at most 64 bytes (UTF-8), no '"', '#', '@' or newline, no
    surrounding blanks: the rules `smagent.model.netfile` enforces on write.
    """
    return (bool(text) and len(text.encode("utf-8")) <= NAME_MAX_BYTES
            and not (set(text) & _BAD_NAME_CHARS) and text == text.strip())


def guid_name(node: DNode) -> str:
    """ibnetdiscover's GUID-based name: ``S-<16 hex>`` for a switch, ``H-<16 hex>`` otherwise."""
    return f"{'S' if node.is_switch else 'H'}-{node.guid:016x}"


def node_names(topo: Topology) -> dict[int, str]:
    """GUID -> net-file name: the description where it is a valid, unique name,
    else the GUID-based name (so two nodes both called "MT4123 HCA" are told apart)."""
    counts: dict[str, int] = {}
    for n in topo.nodes.values():
        counts[n.description] = counts.get(n.description, 0) + 1
    names = {g: (n.description if valid_name(n.description) and counts[n.description] == 1 else guid_name(n))
             for g, n in topo.nodes.items()}
    # a description may itself look like another node's GUID name ("S-0000..."): GUID names win
    taken = {nm for g, nm in names.items() if nm == guid_name(topo.nodes[g])}
    for g, nm in names.items():
        if nm != guid_name(topo.nodes[g]) and nm in taken:
            names[g] = guid_name(topo.nodes[g])
    return names


def _clean_description(text: str) -> str:
    """What a net file's ``# "desc"`` comment can carry: no '"', no line breaks."""
    return text.replace('"', "'").replace("\r", " ").replace("\n", " ")


def degraded_links(topo: Topology) -> list[tuple[DNode, int, DNode, int, list[str]]]:
    """Links running below what both ends support (active width or speed), each once:
    (node, port, peer node, peer port, reasons)."""
    out = []
    for (g, p), (g2, p2) in topo.links.items():
        if (g, p) > (g2, p2):
            continue
        a, b = topo.nodes[g].ports.get(p), topo.nodes[g2].ports.get(p2)
        why = codes.degraded(a, b) if a is not None and b is not None else []
        if why:
            out.append((topo.nodes[g], p, topo.nodes[g2], p2, why))
    return out


def to_fabric(topo: Topology) -> "Fabric":
    """The discovered graph as a `smagent.model.fabric.Fabric`.

    Names are the node descriptions where they are valid, unique net-file names,
    else GUID-based like ibnetdiscover's (`S-<guid>` / `H-<guid>`). A description
    that a net file cannot quote (a '"' or a newline) is kept with those
    characters replaced ('"' -> "'", newline -> blank).
    """
    from smagent.model.fabric import HCA, ROUTER, SWITCH, Fabric, Node
    fab = Fabric()
    names = node_names(topo)
    ordered = sorted(topo.nodes.values(), key=lambda n: (n.path != (0,), len(n.path), n.path))
    for n in ordered:
        kinds: dict[int, str] = {NodeType.SWITCH: SWITCH, NodeType.ROUTER: ROUTER}
        kind = kinds.get(n.node_type, HCA)
        node = Node(name=names[n.guid], node_type=kind, num_ports=n.num_ports,
                    description=_clean_description(n.description),
                    guid=n.guid, system_guid=n.node_info.system_image_guid)
        ids = {"vendor_id": n.node_info.vendor_id, "device_id": n.node_info.device_id}
        node.caps.update({k: v for k, v in ids.items() if v})  # 0: unknown, as netfile reads it
        for p, pi in n.ports.items():
            rate = codes.rate_text(pi) if p and (n.guid, p) in topo.links else ""
            if rate:
                node.rates[p] = rate
        for p, g in n.port_guids.items():
            node.port_guids[p] = g
        for p in n.lid_ports():
            lpi = n.ports.get(p)
            if lpi is not None and lpi.lid:
                node.lids[p] = lpi.lid
                if lpi.lmc:
                    node.lmcs[p] = lpi.lmc
        fab.add_node(node)
    done = set()
    for (g, p), (g2, p2) in topo.links.items():
        if (g2, p2) in done:
            continue
        done.add((g, p))
        fab.connect(names[g], p, names[g2], p2)
    return fab
