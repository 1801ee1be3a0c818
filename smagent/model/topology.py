"""The subnet model's builder: `Topology` (nodes, cables, our own port, what did not
answer) and its `DNode`s, the one mutable form of a fabric's nodes as the SM sees them.

The directed-route walk (`smagent.discovery`) fills one; a sweep plans on it and completes
it (LIDs, PortInfo and SwitchInfo as its Sets answered); a repair patches a `fork` of one;
`smagent.model.subnet.Subnet.build` freezes one into the subnet model, after which nobody
changes it. `smagent.discovery` re-exports both names.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from mad.attributes import NodeInfo, NodeType, PortInfo, SwitchInfo

_SWITCH = int(NodeType.SWITCH)  # a plain int: comparing with an IntEnum member costs 3x


@dataclasses.dataclass
class DNode:
    """A discovered node."""
    guid: int
    node_type: int
    num_ports: int
    path: tuple[int, ...]  # shortest DR path reaching it (for a CA: via its first-seen port)
    node_info: NodeInfo
    description: str = ""  # what to call it: its name in a node-name map, else its NodeDescription
    node_description: str = ""  # the NodeDescription it reports
    switch_info: SwitchInfo | None = None
    ports: dict[int, PortInfo] = dataclasses.field(default_factory=dict)  # port -> PortInfo
    port_paths: dict[int, tuple[int, ...]] = dataclasses.field(default_factory=dict)  # CA port -> DR path
    port_guids: dict[int, int] = dataclasses.field(default_factory=dict)
    # whether it is a switch: worked out of ``node_type`` (never changed) once, a plain
    # attribute because nearly every loop over the fabric asks it of every node
    is_switch: bool = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.is_switch = self.node_type == _SWITCH

    def copy(self) -> DNode:
        """A copy whose dicts may be changed without changing this node's (the PortInfos,
        replaced and never changed in place, shared): what `dataclasses.replace` makes,
        without going through ``__init__`` (a fork copies every node of the fabric)."""
        new = object.__new__(DNode)
        new.__dict__.update(self.__dict__)
        new.ports, new.port_paths, new.port_guids = dict(self.ports), dict(self.port_paths), dict(self.port_guids)
        return new

    def path_to_port(self, port: int) -> tuple[int, ...]:
        """DR path that addresses ``port``'s SMA (a switch: port 0's, via the node path)."""
        return self.path if self.is_switch else self.port_paths[port]

    def port_guid(self, port: int) -> int:
        """The GUID of ``port`` (a switch's ports share its port 0's); 0 if unknown."""
        return self.node_info.port_guid if self.is_switch else self.port_guids.get(port, 0)

    def lid(self, port: int = 0) -> int:
        pi = self.ports.get(0 if self.is_switch else port)
        return pi.lid if pi is not None else 0

    def lid_ports(self) -> list[int]:
        """Ports that carry a LID: port 0 of a switch, every discovered port of a CA."""
        return [0] if self.is_switch else sorted(self.port_paths) if len(self.port_paths) > 1 else list(self.port_paths)

    def __repr__(self) -> str:  # the PortInfos would make it kilobytes: say which node it is
        kind = "switch" if self.is_switch else "CA"
        lids = ",".join(str(self.lid(p)) for p in self.lid_ports())
        return (f"<DNode {kind} {self.description!r} GUID {self.guid:#018x}, {self.num_ports} ports, "
                f"DR path {','.join(map(str, self.path))}, LID {lids or '-'}>")


@dataclasses.dataclass
class Topology:
    """What discovery found."""
    nodes: dict[int, DNode]  # by node GUID
    links: dict[tuple[int, int], tuple[int, int]]  # (guid, port) -> (guid, port), both ways
    local: tuple[int, int]  # (guid, port) of the port we discover from
    unreachable: list[str] = dataclasses.field(default_factory=list)  # what failed, readable
    # (guid, port) of switch ports cabled back to themselves (a loopback plug or a
    # miscabled port): shown, never a link, so nothing routes through them
    loopbacks: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    # what failed, as fields: where (readable), path (DR path or None), node/guid/port (the
    # node and port it sits behind, or the node and port whose details failed; None if
    # unknown), error
    unreached: list[dict] = dataclasses.field(default_factory=list)
    smps: int = 0
    seconds: float = 0.0
    passes: int = 1  # discovery passes: 1 + repair passes over what got no answer

    def switches(self) -> list[DNode]:
        return [n for n in self.nodes.values() if n.is_switch]

    def cas(self) -> list[DNode]:
        return [n for n in self.nodes.values() if not n.is_switch]

    def neighbor(self, guid: int, port: int) -> tuple[int, int] | None:
        return self.links.get((guid, port))

    def num_links(self) -> int:
        return len(self.links) // 2

    def by_description(self, text: str) -> list[DNode]:
        """Every node called ``text``: by its name in a node-name map or by its own
        NodeDescription (descriptions need not be unique)."""
        return [n for n in self.nodes.values() if text in (n.description, n.node_description)]

    def __repr__(self) -> str:  # counts, not contents: the whole fabric would be megabytes
        return (f"<Topology {len(self.switches())} switches, {len(self.cas())} CAs, {self.num_links()} links, "
                f"{len(self.unreachable)} unreachable, local {self.local[0]:#018x} port {self.local[1]}>")

    def to_networkx(self) -> Any:
        """The fabric as a `networkx.MultiGraph` (parallel cables are parallel edges):
        nodes keyed by node GUID with ``description``, ``kind`` ("switch"/"ca"),
        ``num_ports``, ``path`` (DR path) and ``lids`` ({port: LID}); an edge per link with
        ``ports`` {GUID: port at that end} (loopback cables are not links). Needs networkx (``pip install smagent[graph]``)."""
        try:
            import networkx as nx  # optional: only this method needs it
        except ImportError:
            raise ImportError("Topology.to_networkx() needs networkx: pip install 'smagent[graph]' "
                              "(or pip install networkx)") from None
        g = nx.MultiGraph()
        for n in self.nodes.values():
            g.add_node(n.guid, description=n.description, kind="switch" if n.is_switch else "ca",
                       num_ports=n.num_ports, path=n.path, lids={p: n.lid(p) for p in n.lid_ports()})
        for (a, pa), (b, pb) in sorted(self.links.items()):
            if (a, pa) < (b, pb):  # the links map holds both directions
                g.add_edge(a, b, ports={a: pa, b: pb})
        return g

    def fork(self) -> Topology:
        """A copy that may be changed without changing this one: its dicts and nodes
        copied, the PortInfos (replaced, never changed in place) shared. Cheap: a few ms on
        a 648-host fabric (a deep copy: 150 ms)."""
        nodes = {g: n.copy() for g, n in self.nodes.items()}
        return dataclasses.replace(self, nodes=nodes, links=dict(self.links))

    def by_guid(self, guid: int) -> tuple[DNode, int | None] | None:
        """(node, None) for a node GUID, (node, port) for a port GUID, else None."""
        if guid in self.nodes:
            return self.nodes[guid], None
        for n in self.nodes.values():
            for p, g in n.port_guids.items():
                if g == guid:
                    return n, p
        return None
