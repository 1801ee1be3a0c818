"""What every routing engine shares: the input (`RoutingInput`), the result (`Routes` of
one `RouteTable` per switch), `RoutingError` and the engine spec syntax (`parse_spec`).
Engines import this module, never the package that dispatches to them."""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Mapping

from smagent.discovery import Topology
from smagent.errors import BadInput
from smagent.lids import LidPlan

NO_PORT = 0xFF


class RoutingError(BadInput):
    """An engine could not route this fabric, or its spec/input is bad."""


@dataclasses.dataclass
class RoutingInput:
    switches: list[int]  # switch GUIDs, deterministic order
    # switch -> list of (port, neighbour switch) for every switch-to-switch link
    adjacency: dict[int, list[tuple[int, int]]]
    # destination LID -> (switch it hangs off, port on that switch); port 0 = the switch itself
    lid_homes: dict[int, tuple[int, int]]
    num_ports: dict[int, int]
    # switch GUID -> node description (error messages, reports); optional
    names: dict[int, str] = dataclasses.field(default_factory=dict)

    def name(self, guid: int) -> str:
        n = self.names.get(guid)
        return f"{n} (0x{guid:016x})" if n else f"0x{guid:016x}"

    @classmethod
    def build(cls, topo: Topology, plan: LidPlan) -> "RoutingInput":
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
        return cls(switches, adjacency, lid_homes, {g: topo.nodes[g].num_ports for g in switches},
                   {g: topo.nodes[g].description for g in switches})

    @classmethod
    def from_fabric(cls, fabric, lmc: int = 0) -> "RoutingInput":
        """A RoutingInput straight from a `smagent.fabric.Fabric` (a generated or loaded
        topology), without discovery: for tests and benchmarks. Nodes without a GUID get
        ibsim's GUIDs (`netfile.assign_ibsim_guids` numbering, on a copy of the numbers
        only); LIDs the fabric does not give are assigned in node order, switches first
        (one each), then CA ports (2^lmc, aligned)."""
        guid: dict[str, int] = {}
        nxt = {True: 0x200000, False: 0x100000}
        for n in fabric:
            if n.guid is not None:
                guid[n.name] = n.guid
            else:
                guid[n.name] = nxt[n.is_switch]
                nxt[n.is_switch] += 1 if n.is_switch else n.num_ports + 1
        switches = sorted(guid[n.name] for n in fabric.switches())
        adjacency: dict[int, list[tuple[int, int]]] = {g: [] for g in switches}
        lid_homes: dict[int, tuple[int, int]] = {}
        used: set[int] = set()
        for n in fabric:
            for p, lid in n.lids.items():
                size = 1 if n.is_switch else 1 << lmc
                used.update(range(lid, lid + size))
        lid = 1
        for n in fabric.switches():
            base = n.lid(0)
            if not base:
                while lid in used:
                    lid += 1
                base = lid
                used.add(base)
            lid_homes[base] = (guid[n.name], 0)
        size = 1 << lmc
        for n in fabric.cas():
            for p, peer in fabric.connected_ports(n):
                pn = fabric.node(peer.node)
                if not pn.is_switch:
                    continue
                base = n.lid(p)
                if not base:
                    base = -(-lid // size) * size
                    while any(x in used for x in range(base, base + size)):
                        base += size
                    used.update(range(base, base + size))
                    lid = base
                for x in range(base, base + size):
                    lid_homes[x] = (guid[pn.name], peer.num)
        for link in fabric.links():
            a, b = link
            na, nb = fabric.node(a.node), fabric.node(b.node)
            if na.is_switch and nb.is_switch and a.node != b.node:
                adjacency[guid[a.node]].append((a.num, guid[b.node]))
                adjacency[guid[b.node]].append((b.num, guid[a.node]))
        for g in switches:
            adjacency[g].sort()
        return cls(switches, adjacency, lid_homes, {guid[n.name]: n.num_ports for n in fabric.switches()},
                   {guid[n.name]: n.description for n in fabric.switches()})


class RouteTable(Mapping):
    """One switch's routes, LID -> port, stored as an LFT image (a bytearray indexed by
    LID, 0xFF = no route): 1 byte per LID instead of ~70 for a dict entry, which is what
    lets 1,620 switches x 13,284 LIDs fit in memory. Behaves as a read-only dict. Every
    engine returns one per switch; consumers read the image (``ports``) directly."""

    __slots__ = ("ports", "_lids")

    def __init__(self, ports: bytearray, lids=None):
        self.ports = ports
        self._lids = lids  # optional: the LIDs that should be routed (sorted), to iterate fast

    @classmethod
    def from_entries(cls, entries: Mapping[int, int], size: int = 0) -> "RouteTable":
        """A table from {LID: port} (port 0xFF: no route); the image covers at least
        LIDs 0..size-1."""
        ports = bytearray([NO_PORT]) * max(size, max(entries, default=-1) + 1)
        for lid, port in entries.items():
            ports[lid] = port
        return cls(ports)

    def updated(self, entries: Mapping[int, int]) -> "RouteTable":
        """A copy with ``entries`` ({LID: port}) written over these routes (static entries)."""
        ports = bytearray(self.ports)
        top = max(entries, default=-1)
        if top >= len(ports):
            ports += bytearray([NO_PORT]) * (top + 1 - len(ports))
        for lid, port in entries.items():
            ports[lid] = port
        return RouteTable(ports)

    def missing(self, lids: list[int]) -> list[int]:
        """Those of ``lids`` (sorted) this table has no route for; looked up in C when
        every one is routed, the usual case."""
        ports = self.ports
        if lids and lids[-1] < len(ports):
            got = operator.itemgetter(*lids)(ports) if len(lids) > 1 else (ports[lids[0]],)
            if NO_PORT not in got:
                return []
        return [lid for lid in lids if lid not in self]

    def __getitem__(self, lid: int) -> int:
        if 0 <= lid < len(self.ports):
            p = self.ports[lid]
            if p != NO_PORT:
                return p
        raise KeyError(lid)

    def __contains__(self, lid) -> bool:
        return isinstance(lid, int) and 0 <= lid < len(self.ports) and self.ports[lid] != NO_PORT

    def _routed(self) -> list[int]:
        ports = self.ports
        if self._lids is not None and not self.missing(self._lids) and \
                ports.count(NO_PORT) == len(ports) - len(self._lids):
            return self._lids
        return [i for i, p in enumerate(ports) if p != NO_PORT]

    def __iter__(self):
        return iter(self._routed())

    def __len__(self) -> int:
        return len(self.ports) - self.ports.count(NO_PORT)

    def items(self):
        lids = self._routed()
        if not lids:
            return iter(())
        got = operator.itemgetter(*lids)(self.ports) if len(lids) > 1 else (self.ports[lids[0]],)
        return zip(lids, got)

    def __repr__(self) -> str:
        return f"RouteTable({dict(self.items())!r})"


class Routes(dict):
    """An engine's result: {switch GUID: `RouteTable`} for every switch, and ``notes``,
    what the engine chose that an admin should see (updn's automatic roots)."""

    def __init__(self, tables=(), notes=()):
        super().__init__(tables)
        self.notes = list(notes)


ENGINES = ("minhop", "updn", "ftree", "file")


def parse_spec(spec: str) -> tuple[str, str | None]:
    """``"updn:0x1,0x2"`` -> ("updn", "0x1,0x2"); ``"minhop"`` -> ("minhop", None)."""
    name, sep, arg = (spec or "").partition(":")
    name = name.strip().lower()
    if name not in ENGINES:
        raise RoutingError(f"unknown routing engine {spec!r}: choose one of minhop, updn, updn:GUID[,GUID...], "
                           f"ftree, ftree:fallback=ENGINE, file:PATH")
    if name == "minhop" and sep:
        raise RoutingError(f"routing engine minhop takes no argument (got {spec!r})")
    if name == "file" and not arg:
        raise RoutingError("routing engine file needs the dump to load: --routing file:PATH")
    if name == "updn" and sep and not arg.strip():
        raise RoutingError("--routing updn:GUID[,GUID...]: no root GUID given")
    if name == "ftree" and sep:
        ftree_fallback(arg)
    return name, (arg if sep else None)


def ftree_fallback(arg: str | None) -> str | None:
    """``"fallback=updn"`` -> "updn" (the fallback spec); None -> None."""
    if arg is None:
        return None
    key, eq, val = arg.partition("=")
    val = val.strip()
    if key.strip().lower() != "fallback" or not eq or not val:
        raise RoutingError(f"routing engine ftree takes ftree or ftree:fallback=ENGINE, got 'ftree:{arg}'")
    name, _ = parse_spec(val)
    if name not in ("minhop", "updn"):
        raise RoutingError(f"ftree:fallback={val}: the fallback is minhop, updn or updn:GUID[,GUID...]")
    return val

