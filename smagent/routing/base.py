"""What every routing engine shares: the input (`RoutingInput`), the result (`Routes` of
one `RouteTable` per switch), `RoutingError` and the typed engine spec (`RoutingSpec`;
its one parser is `smagent.routing.parse_spec`). Engines import this module, never the
package that dispatches to them. It imports nothing of the agent but `errors`: a
`RoutingInput` is built from a discovered fabric above (`smagent.sweep`)."""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Mapping

from smagent.errors import BadInput

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
    # the data VLs every linked port will run (the fewest of any): how many layers (SLs)
    # a VL-layering engine (dfsssp) may use; None: not known (dfsssp assumes 8)
    data_vls: int | None = None

    def name(self, guid: int) -> str:
        n = self.names.get(guid)
        return f"{n} (0x{guid:016x})" if n else f"0x{guid:016x}"

    @classmethod
    def from_fabric(cls, fabric, lmc: int = 0) -> "RoutingInput":
        """A RoutingInput straight from a `smagent.model.fabric.Fabric` (a generated or loaded
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
    what the engine chose that an admin should see (updn's automatic roots). An engine
    that layers paths over VLs (dfsssp) also gives ``sls``: {source switch GUID: the SL
    of the paths from its CA ports, indexed by DLID (bytes)} and ``layers``, the SLs
    (= VLs, SL n on VL n) it uses; others leave ``sls`` None: every path on SL 0."""

    def __init__(self, tables=(), notes=()):
        super().__init__(tables)
        self.notes = list(notes)
        self.sls: dict[int, bytes] | None = None
        self.layers = 1
        self.needed = 1  # layers needed to break every credit loop (1: the routes have none)
        self.chosen: tuple[str, str] | None = None  # auto: (the engine it chose, why)
        # how these routes may be patched after a loss (`smagent.routing.patch`); None: route afresh
        self.patch_rule: PatchRule | None = None
        self.moved: int | None = None  # a patch: the entries it moved (`smagent.routing.patch`)


@dataclasses.dataclass(frozen=True)
class PatchRule:
    """The promise an engine's routes keep, which a patch of them must keep too
    (`smagent.routing.patch`): ``heights`` (switch GUID -> its place in the engine's
    up*/down* ranking, higher = up: ftree's levels, updn's ranks from its roots) for a
    deadlock-free engine; None for shortest paths with no deadlock promise (minhop)."""
    engine: str
    heights: Mapping[int, int] | None = None


@dataclasses.dataclass(frozen=True)
class RoutingSpec:
    """A routing engine and its arguments, as `smagent.routing.parse_spec` reads them from
    the ``--routing`` text (the one parser): ``engine`` (auto, minhop, updn, ftree, dfsssp, file),
    ``roots`` (updn: root switch GUIDs, none: chosen automatically), ``fallback`` (ftree:
    the engine that routes a fabric that is not a fat tree), ``file`` (file: the dump).
    ``text``: what was given, for messages (not compared)."""
    engine: str = "auto"
    roots: tuple[int, ...] = ()
    fallback: RoutingSpec | None = None
    file: str | None = None
    text: str = dataclasses.field(default="", compare=False)

    def __str__(self) -> str:
        return self.text or self.engine

    def with_roots(self, roots) -> RoutingSpec:
        """updn with these root GUIDs (a desired state's ``root:``)."""
        guids = tuple(roots)
        return dataclasses.replace(self, engine="updn", roots=guids,
                                   text="updn:" + ",".join(f"{g:#018x}" for g in guids))

