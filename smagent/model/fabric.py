"""The fabric model: nodes, their ports, and the cables between them.

A `Fabric` is what discovery produces, what routing consumes, what the
simulator serves, and what `smagent.model.netfile` reads and writes. It holds
plain data only: no I/O, no SMPs.

Design notes (why it looks like this):

* Nodes are keyed by *name* (the ibsim node id, e.g. ``"L0"`` or
  ``"S-0008f10400411f56"``), because that is how net files refer to them
  and names are unique where GUIDs may be unknown. A GUID index is kept
  as well, for discovery, which knows GUIDs first.
* Per-port facts (port GUIDs, LIDs, LMC, link rate, ibsim options) live in
  small per-node dicts keyed by port number instead of one object per
  port: a 12,000-node fabric has ~450,000 ports and most carry nothing.
* Links live in one dict mapping ``Port -> Port`` (both directions), so
  `neighbor` and `connect` are O(1) and equality is a dict comparison.
* Insertion order of nodes is kept (dicts) and is meaningful: ibsim
  attaches its SM / default client port to the first node of a net file.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator, NamedTuple

from smagent.errors import BadInput

SWITCH = "Switch"
HCA = "Hca"
ROUTER = "Router"
NODE_TYPES = (SWITCH, HCA, ROUTER)

# NodeInfo.NumPorts is 8 bits, and port 255 means "no port" in forwarding
# tables, so 254 is the largest port number a node can usefully have.
MAX_PORTS = 254


class FabricError(BadInput):
    """An inconsistent fabric: unknown node, port out of range, port reused."""


class Port(NamedTuple):
    """One end of a link: a node name and a port number (1..num_ports)."""

    node: str
    num: int

    def __str__(self) -> str:
        return f'"{self.node}"[{self.num}]'


class Link(NamedTuple):
    """A cable. `a` is the end that sorts first in the fabric's node order."""

    a: Port
    b: Port


@dataclass
class Node:
    """A switch, channel adapter (HCA) or router.

    Only `name`, `node_type` and `num_ports` are required. Everything else
    is optional knowledge (a generated topology has no GUIDs; a discovered
    one has them all).

    * `description`: the NodeDescription string; defaults to `name`
      (ibsim does the same when a net file gives none).
    * `port_guids`: port -> PortGUID. A switch has one port GUID, that of
      port 0; use `port_guid()` to read with the switch/CA rule applied.
    * `lids`: port -> base LID. A switch's LID belongs to port 0. LID 0
      (unassigned) is never stored.
    * `lmcs`: port -> LMC, only when non-zero.
    * `rates`: port -> active link rate as ibnetdiscover prints it ("4xQDR").
      Give both ends of a link the same rate: ibsim aborts on a link whose
      two ends enable no common width or speed.
    * `port_opts`: port -> ibsim per-port options (``w=``, ``s=``, ``e=``),
      carried verbatim so an ibsim net file round-trips.
    * `caps`: per-node capability overrides for simulators and checks, e.g.
      ``linear_fdb_cap``, ``random_fdb_cap``, ``multicast_fdb_cap``,
      ``lids_per_port``, ``m_key``, ``enhanced_port0``, ``vendor_id``,
      ``device_id``. Consumers define the meaning; the model just carries
      the ints.
    """

    name: str
    node_type: str
    num_ports: int
    description: str | None = None
    guid: int | None = None
    system_guid: int | None = None
    port_guids: dict[int, int] = field(default_factory=dict)
    lids: dict[int, int] = field(default_factory=dict)
    lmcs: dict[int, int] = field(default_factory=dict)
    rates: dict[int, str] = field(default_factory=dict)
    port_opts: dict[int, dict[str, int]] = field(default_factory=dict)
    caps: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name:
            raise FabricError("node name must not be empty")
        if self.node_type not in NODE_TYPES:
            raise FabricError(
                f"node {self.name!r}: type {self.node_type!r} is not one of {', '.join(NODE_TYPES)}"
            )
        if not isinstance(self.num_ports, int) or not 1 <= self.num_ports <= MAX_PORTS:
            raise FabricError(
                f"node {self.name!r}: num_ports {self.num_ports!r} out of range 1..{MAX_PORTS}"
            )
        if self.description is None:
            self.description = self.name

    @property
    def is_switch(self) -> bool:
        return self.node_type == SWITCH

    @property
    def first_port(self) -> int:
        """Lowest port number that can carry a LID: 0 on switches, else 1."""
        return 0 if self.is_switch else 1

    def port_guid(self, port: int) -> int | None:
        """PortGUID of `port`: a switch answers with port 0's GUID for any port."""
        if self.is_switch:
            return self.port_guids.get(0, self.guid)
        return self.port_guids.get(port)

    def lid(self, port: int | None = None) -> int | None:
        """Base LID of `port` (switches: port 0's, whatever `port` is)."""
        if self.is_switch or port is None:
            return self.lids.get(self.first_port)
        return self.lids.get(port)

    def check_port(self, port: int) -> None:
        """Raise FabricError unless `port` is a cable port (1..num_ports)."""
        if not isinstance(port, int) or not 1 <= port <= self.num_ports:
            raise FabricError(
                f"node {self.name!r} has ports 1..{self.num_ports}; port {port!r} does not exist"
            )




class Fabric:
    """Nodes by name plus the links between their ports.

    Iterating a Fabric yields its nodes in insertion order. Two fabrics are
    equal when they hold equal nodes (order ignored) and the same links.
    """

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self._by_guid: dict[int, Node] = {}
        self._peer: dict[Port, Port] = {}

    # -- nodes ---------------------------------------------------------
    def add_node(self, node: Node | None = None, /, **kwargs) -> Node:
        """Add `node`, or build one from keyword arguments; return it.

        Names must be unique, and so must node GUIDs where known.
        """
        if node is None:
            node = Node(**kwargs)
        elif kwargs:
            raise TypeError("pass either a Node or keyword arguments, not both")
        if node.name in self.nodes:
            raise FabricError(f"duplicate node name {node.name!r}")
        if node.guid is not None:
            other = self._by_guid.get(node.guid)
            if other is not None:
                raise FabricError(
                    f"node {node.name!r}: GUID {node.guid:#x} already belongs to node {other.name!r}"
                )
            self._by_guid[node.guid] = node
        self.nodes[node.name] = node
        return node

    def node(self, name: str | Node) -> Node:
        """The node called `name` (a Node is passed through after a check)."""
        key = name.name if isinstance(name, Node) else name
        try:
            return self.nodes[key]
        except KeyError:
            raise FabricError(f"no node named {key!r} in the fabric") from None

    def by_guid(self, guid: int) -> Node | None:
        """The node whose node GUID is `guid`, if any (GUIDs set via add_node)."""
        return self._by_guid.get(guid)

    def set_guid(self, name: str | Node, guid: int | None) -> None:
        """Change a node's GUID keeping the GUID index (and uniqueness) right."""
        node = self.node(name)
        if guid is not None:
            other = self._by_guid.get(guid)
            if other is not None and other is not node:
                raise FabricError(
                    f"node {node.name!r}: GUID {guid:#x} already belongs to node {other.name!r}"
                )
        if node.guid is not None and self._by_guid.get(node.guid) is node:
            del self._by_guid[node.guid]
        node.guid = guid
        if guid is not None:
            self._by_guid[guid] = node

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes.values())

    def __len__(self) -> int:
        return len(self.nodes)

    def __contains__(self, name: object) -> bool:
        return (name.name if isinstance(name, Node) else name) in self.nodes

    def switches(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.node_type == SWITCH]

    def cas(self) -> list[Node]:
        """Channel adapters (HCAs); routers are listed by `routers()`."""
        return [n for n in self.nodes.values() if n.node_type == HCA]

    def routers(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.node_type == ROUTER]

    # -- links ---------------------------------------------------------
    def connect(self, a: str | Node, pa: int, b: str | Node, pb: int) -> Link:
        """Cable port `pa` of `a` to port `pb` of `b`.

        Both ports must exist (1..num_ports; a switch's port 0 is internal)
        and be free.
        """
        na, nb = self.node(a), self.node(b)
        na.check_port(pa)
        nb.check_port(pb)
        ea, eb = Port(na.name, pa), Port(nb.name, pb)
        if ea == eb:
            raise FabricError(f"cannot connect {ea} to itself")
        for end, other in ((ea, eb), (eb, ea)):
            used = self._peer.get(end)
            if used is not None:
                raise FabricError(
                    f"cannot connect {ea} to {eb}: {end} is already connected to {used}"
                )
        self._peer[ea] = eb
        self._peer[eb] = ea
        return Link(ea, eb)

    def disconnect(self, a: str | Node, pa: int) -> Port | None:
        """Remove the cable on port `pa` of `a`; return the former peer."""
        end = Port(self.node(a).name, pa)
        peer = self._peer.pop(end, None)
        if peer is not None:
            del self._peer[peer]
        return peer

    def neighbor(self, node: str | Node, port: int) -> Port | None:
        """The (node, port) at the other end of `port`'s cable, or None."""
        name = node.name if isinstance(node, Node) else node
        return self._peer.get(Port(name, port))

    def connected_ports(self, node: str | Node) -> list[tuple[int, Port]]:
        """(local port, remote Port) for every cabled port of `node`, by port."""
        n = self.node(node)
        peer = self._peer
        out = []
        for p in range(1, n.num_ports + 1):
            r = peer.get(Port(n.name, p))
            if r is not None:
                out.append((p, r))
        return out

    def links(self) -> Iterator[Link]:
        """Every link once, in node order then port order (deterministic)."""
        order = {name: i for i, name in enumerate(self.nodes)}
        for name, node in self.nodes.items():
            for p, r in self.connected_ports(node):
                here = Port(name, p)
                if (order[here.node], here.num) < (order[r.node], r.num):
                    yield Link(here, r)

    @property
    def num_links(self) -> int:
        return len(self._peer) // 2

    def link_set(self, key: Callable[[Node], object] | None = None) -> frozenset:
        """Links as a set of ``frozenset({(key(node), port), ...})``.

        With `key` (e.g. ``lambda n: n.description``) two fabrics that name
        their nodes differently can be compared, as a discovered fabric
        (ibnetdiscover names nodes by GUID) against the generated one.
        """
        key = key or (lambda n: n.name)
        nodes = self.nodes
        return frozenset(
            frozenset({(key(nodes[a.node]), a.num), (key(nodes[b.node]), b.num)})
            for a, b in self.links()
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Fabric):
            return NotImplemented
        return self.nodes == other.nodes and self._peer == other._peer

    __hash__ = None  # type: ignore[assignment]  # mutable: unhashable, as object.__hash__ = None declares

    def __repr__(self) -> str:
        return (
            f"<Fabric {len(self.switches())} switches, {len(self.cas())} CAs, "
            f"{len(self.routers())} routers, {self.num_links} links>"
        )
