"""What the checks work on: the `Snapshot` of a fabric's tables (a view of the subnet model,
`Snapshot.of`, which `collect` and the plan check build; or by hand), the `Report` they fill, and `_Net`, the numbering of switches
and places every check shares (see the package docstring for the rules)."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Mapping

from mad import forwarding as fw
from mad.attributes import PortState
from smagent.fdb.lft import lft_blocks_to_read

if TYPE_CHECKING:
    from smagent.model.subnet import Subnet
    from smagent.verify.unicast import PlaceOutcomes


EXAMPLES = 5


WARNINGS = frozenset({"degraded_link", "link_below_capability"})  # listed; not defects


# why a packet stops (dead_end causes)
CAUSES = {
    "no_lft": "the switch has no unicast forwarding table (LinearFDBCap and RandomFDBCap 0)",
    "unread": "the switch's tables could not be read",
    "above_top": "DLID above LinearFDBTop",
    "above_cap": "DLID at or above LinearFDBCap",
    "no_route": "LFT entry 255 (no route)",
    "no_such_port": "the forwarding table names a port the switch does not have",
    "rft_default_in": "no RFT entry matches the DLID and the packet came in on DefaultPort",
    "rft_no_default": "no RFT entry matches the DLID and DefaultPort is a port the switch does not have",
    "unlinked_port": "the exit port has no link",
    "unreached_port": "the exit port leads to a node that did not answer",
    "port_not_active": "the exit port's link is not ACTIVE",
}


@dataclasses.dataclass
class SwitchState:
    guid: int
    name: str
    num_ports: int
    lid: int  # port 0's LID, 0 if none
    lft: bytes  # entries for LIDs 0 .. len-1 (at least 0 .. top)
    top: int  # LinearFDBTop
    cap: int  # LinearFDBCap
    active: frozenset  # ports (1..) whose PortInfo says ACTIVE
    mft: dict = dataclasses.field(default_factory=dict)  # MLID -> frozenset of ports
    rft: tuple | None = None  # valid RFT entries in table order: (base_lid, lmc, port); None: no RFT
    default_port: int = 0  # SwitchInfo.DefaultPort (RFT switches)
    lmc: int = 0  # port 0's LMC if the switch has enhanced port 0, else 0
    read: bool = True  # False: its unicast tables did not answer (listed as unreached)
    mft_read: bool = True  # False: its MFT did not answer (listed as unreached)

    def lid_range(self) -> range:
        return _lid_range(self.lid, self.lmc)


@dataclasses.dataclass
class CaPortState:
    guid: int  # node GUID
    port: int
    name: str
    lid: int
    lmc: int
    active: bool

    def lid_range(self) -> range:
        return _lid_range(self.lid, self.lmc)


def _lid_range(lid: int, lmc: int) -> range:
    """The DLIDs a port accepts: its LID with the low LMC bits cleared, 2^LMC of them."""
    base = lid & ~((1 << lmc) - 1)
    return range(base, base + (1 << lmc)) if lid else range(0)


@dataclasses.dataclass
class Snapshot:
    switches: dict  # guid -> SwitchState
    ca_ports: dict  # (guid, port) -> CaPortState
    links: dict  # (guid, port) -> (guid, port), both ways
    smps: int = 0
    seconds: float = 0.0
    mcast_read: bool = False
    unreached: list = dataclasses.field(default_factory=list)  # dicts: what, where, error
    # link checks: PortInfo of linked ports ((guid, port) -> PortInfo; empty: not checked),
    # SL2VL tables ((guid, in, out) -> 16 VLs; a CA port's own: (guid, 0, port)) and
    # P_Key tables of end ports ((guid, port) -> keys; switch port 0: (guid, 0)).
    # tables_read False: the SL2VL and P_Key checks are skipped.
    port_info: dict = dataclasses.field(default_factory=dict)
    sl2vl: dict = dataclasses.field(default_factory=dict)
    pkeys: dict = dataclasses.field(default_factory=dict)
    tables_read: bool = False
    # the partition check (`verify.partitions`): the tables of switch ports facing end ports
    # that enforce partitions ((guid, port) -> keys), and what the partitions give each
    # end port ((guid, port) -> keys; None: no partitions given, the check is skipped)
    enforce_pkeys: dict = dataclasses.field(default_factory=dict)
    partition_rules: dict | None = None
    # switch GUID -> SwitchInfo.PartitionEnforcementCap (0: the switch cannot enforce)
    enforce_cap: dict = dataclasses.field(default_factory=dict)
    # the SL of the paths from each switch's CA ports, by DLID ({switch GUID: bytes}), as
    # a VL-layering engine (dfsssp) gives them; None: every path on SL 0 (what hosts send
    # without an SA). A hop's VL is its SL2VL table's entry for the SL (`sl2vl`), or the SL
    # itself where no table was read (a plan: the sweep writes SL n -> VL n)
    path_sl: dict | None = None
    # LID -> (port GUID, node, port), read with a QoS policy (`collect`): its SLs by port
    lid_ports: dict | None = None
    # with a QoS policy: who is in its port groups on this fabric (`qospolicy.Membership`)
    qos_members: Any = None

    @classmethod
    def of(cls, subnet: Subnet, rfts: dict | None = None, *, mcast: bool = True, unread=frozenset(),
           mft_unread=frozenset(), unreached=None) -> Snapshot:
        """A view of the subnet model ``subnet`` for the checks: its nodes (PortInfo and
        SwitchInfo as held), cables, LFTs (each 0 .. `fdb.lft.lft_blocks_to_read`, unknown
        entries 255) and MFT units; beside them what verify knows and the model does not:
        the valid RFT entries {GUID: ((base, lmc, port), ...)} (`collect.rft_entries`),
        whether multicast is checked (``mcast``), the switches whose unicast tables
        (``unread``) or MFTs (``mft_unread``) did not answer, and what did not answer
        (``unreached``). `collect` builds one from what it read; the plan check from what
        its plan would leave (`smagent.sweep.plancheck`)."""
        topo, rfts = subnet.topology, rfts or {}
        mfts = mft_groups(subnet.mft, {n.guid: n.num_ports for n in topo.switches()})
        states = {}
        for n in topo.switches():
            states[n.guid] = _switch_state(n, subnet.lft.get(n.guid, b""), rfts.get(n.guid), mfts.get(n.guid, {}))
            states[n.guid].read = n.guid not in unread
            states[n.guid].mft_read = n.guid not in mft_unread and n.guid not in unread
        ca_ports = {}
        for n in topo.cas():
            for p in n.lid_ports():
                pi = n.ports.get(p)
                if pi is not None:
                    ca_ports[(n.guid, p)] = CaPortState(n.guid, p, n.description, pi.lid, pi.lmc,
                                                        pi.port_state == PortState.ACTIVE)
        return cls(states, ca_ports, dict(topo.links), mcast_read=mcast, unreached=list(unreached or []),
                   port_info={k: topo.nodes[k[0]].ports[k[1]] for k in topo.links if k[1] in topo.nodes[k[0]].ports},
                   enforce_cap={n.guid: n.switch_info.partition_enforcement_cap for n in topo.switches()
                                if n.switch_info is not None})


def _switch_state(n, table: bytes, rft, mft: dict) -> SwitchState:
    """A switch as the checks see it: ``table`` its whole LFT as the model holds it, cut or
    padded with 255 to the blocks a reader of whole LFTs reads (`lft_blocks_to_read`)."""
    si = n.switch_info
    p0 = n.ports.get(0)
    active = frozenset(p for p, pi in n.ports.items() if p and pi.port_state == PortState.ACTIVE)
    if si is None:
        return SwitchState(n.guid, n.description, n.num_ports, p0.lid if p0 else 0, b"", 0, 0, active)
    size = len(lft_blocks_to_read(si)) * fw.LFT_BLOCK_SIZE
    lft = table if len(table) == size else (table + bytes([fw.LFT_NO_PORT]) * max(0, size - len(table)))[:size]
    lmc = p0.lmc if p0 is not None and si.enhanced_port0 else 0
    return SwitchState(n.guid, n.description, n.num_ports, p0.lid if p0 else 0, lft, si.linear_fdb_top,
                       si.linear_fdb_cap, active, mft, rft, si.default_port, lmc)


def mft_groups(units: Mapping, num_ports: dict) -> dict[int, dict[int, frozenset]]:
    """MFT units {(GUID, block, position): 32 PortMasks} as `SwitchState.mft` holds them:
    {GUID: {MLID: ports}} (ports a switch does not have are left out)."""
    out: dict[int, dict[int, set]] = {}
    for (g, b, pos), masks in units.items():
        for i, mask in enumerate(masks):
            if mask:
                mp = {p for p in fw.mask_ports(mask, pos) if p <= num_ports[g]}
                out.setdefault(g, {}).setdefault(fw.mft_mlid(b, i), set()).update(mp)
    return {g: {m: frozenset(p) for m, p in d.items()} for g, d in out.items()}


@dataclasses.dataclass
class Report:
    """What `verify` found tracing every source to every destination on the tables the
    switches hold: ``summary`` (counts), ``defects`` by class (each a count and examples;
    empty: ``ok``), ``texts`` the examples as readable lines, ``warnings`` (classes that
    do not fail the fabric), ``balance`` (route balance figures, when asked for).
    `as_json` is what ``smagent verify --json`` prints."""
    summary: dict[str, Any]
    defects: dict[str, Any]  # class -> {"count": n, "examples": [dict, ...], ...}
    texts: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # class -> the examples as readable lines
    balance: dict[str, Any] | None = None  # smagent.verify.balance figures, when asked for
    warnings: dict[str, Any] = dataclasses.field(default_factory=dict)  # WARNINGS classes, as defects
    outcomes: "PlaceOutcomes | None" = None  # check(..., keep_outcomes=True): unicast outcomes per place

    @property
    def ok(self) -> bool:
        return not self.defects

    def as_json(self) -> dict[str, Any]:
        out = {"ok": self.ok, "summary": self.summary, "defects": self.defects, "warnings": self.warnings}
        if self.balance is not None:
            out["balance"] = self.balance
        return out


class _Defects:
    def __init__(self, examples: int):
        self.n = examples
        self.d: dict[str, dict] = {}
        self.texts: dict[str, list[str]] = {}

    def add(self, cls: str, example: dict | None = None, text: str = "", count: int = 1, **extra):
        e = self.d.setdefault(cls, {"count": 0, "examples": []})
        self.texts.setdefault(cls, [])
        e["count"] += count
        if example is not None and len(e["examples"]) < self.n:
            e["examples"].append(example)
            self.texts[cls].append(text)
        e.update(extra)
        return e

    def room(self, cls: str) -> bool:
        return len(self.d.get(cls, {"examples": ()})["examples"]) < self.n


@dataclasses.dataclass
class _Net:
    """What every check shares. Switches are numbered 0..S-1 (sorted by GUID); a *place*
    is 2*i + f: switch i, f = 1 if the packet entered an RFT switch on its DefaultPort."""
    snap: Snapshot
    st: list  # SwitchState by index
    idx: dict  # GUID -> index
    names: list
    exits: list = dataclasses.field(default_factory=list)  # per switch: port -> ("sw", j, q) | ("ca", key) | cause
    rft_maps: list = dataclasses.field(default_factory=list)  # per switch: {DLID: port} (first match) or None
    owner: dict = dataclasses.field(default_factory=dict)  # LID -> ("sw", i) | ("ca", key)
    sources: dict = dataclasses.field(default_factory=dict)  # place -> [("ca", key) | ("sw", i)]
    silent: set = dataclasses.field(default_factory=set)  # (GUID, port) behind which nothing answered
    # per switch: what `_steps_for` decides without `_step` (see `_fast_hops`), or None
    fast: list = dataclasses.field(default_factory=list)

    @classmethod
    def of(cls, snap: Snapshot) -> "_Net":
        sws = sorted(snap.switches)
        st = [snap.switches[g] for g in sws]
        net = cls(snap, st, {g: i for i, g in enumerate(sws)}, [s.name or f"0x{s.guid:016x}" for s in st])
        net.silent = {(int(u["guid"], 16), u["port"]) for u in snap.unreached if u.get("guid") and u.get("port")}
        net.exits = [net._exits(s) for s in st]
        net.rft_maps = [_rft_map(s.rft) if s.rft is not None and not s.cap else None for s in st]
        net.fast = [net._fast_hops(i) for i in range(len(st))]
        return net

    def _fast_hops(self, i: int) -> tuple | None:
        """For a read LFT switch: (its own DLIDs, LinearFDBTop, LinearFDBCap, LFT, the
        step for each LFT entry that forwards to another switch: (port, next place), else
        None). `_steps_for` decides with it what `_step` would, for the DLIDs most
        switches only pass on; every other case goes to `_step`."""
        s = self.st[i]
        if not s.read or not s.cap or self.rft_maps[i] is not None:
            return None
        hops: list = [None] * 256
        for p, x in self.exits[i].items():
            if isinstance(x, tuple) and x[0] == "sw" and p <= s.num_ports:
                hops[p] = (p, self.place(x[1], x[2]))
        return s.lid_range(), s.top, s.cap, s.lft, hops

    def _exits(self, s) -> dict:
        snap = self.snap
        ex: dict[int, str | tuple[Any, ...]] = {}
        for p in range(1, s.num_ports + 1):
            peer = snap.links.get((s.guid, p))
            if peer is None:
                ex[p] = "unreached_port" if (s.guid, p) in self.silent else "unlinked_port"
            elif p not in s.active:
                ex[p] = "port_not_active"
            elif peer[0] in self.idx:
                ex[p] = ("sw", self.idx[peer[0]], peer[1]) if peer[1] in snap.switches[peer[0]].active \
                    else "port_not_active"
            elif peer in snap.ca_ports:
                ex[p] = ("ca", peer) if snap.ca_ports[peer].active else "port_not_active"
            else:
                ex[p] = "unlinked_port"  # a router or something discovery did not describe
        return ex

    def place(self, i: int, in_port: int) -> int:
        """Where a packet entering switch i on in_port (0: sent by the switch) stands."""
        on_default = self.rft_maps[i] is not None and in_port == self.st[i].default_port
        return 2 * i + on_default

    def port_name(self, key) -> str:
        g, p = key
        if g in self.snap.switches:
            return f"{self.snap.switches[g].name}[{p}]"
        c = self.snap.ca_ports.get(key)
        return f"{c.name}[{p}]" if c else f"0x{g:016x}[{p}]"

    def owner_name(self, own) -> str:
        return f"{self.names[own[1]]} port 0" if own[0] == "sw" else self.port_name(own[1])

    def source_name(self, src) -> str:
        return f"{self.names[src[1]]} (port 0)" if src[0] == "sw" else self.port_name(src[1])


def _rft_map(entries) -> dict[int, int]:
    """DLID -> exit port of the first valid entry that matches it."""
    m: dict[int, int] = {}
    for base, lmc, port in entries:
        for lid in fw.rft_lid_range(base, lmc):
            m.setdefault(lid, port)
    return m


def snapshot_from_routes(fabric, routes: dict, *, top: int | None = None, lmc: int = 0) -> Snapshot:
    """A Snapshot of a `smagent.model.fabric.Fabric` whose nodes carry GUIDs and LIDs, with the
    LFTs ``routes`` ({switch GUID: `routing.RouteTable`}) would give, every linked port ACTIVE:
    checks a routing engine's output without a fabric (tests, benchmarks)."""
    switches, ca_ports, links = {}, {}, {}
    for link in fabric.links():
        a, b = link
        ka = (fabric.node(a.node).guid, a.num)
        kb = (fabric.node(b.node).guid, b.num)
        links[ka], links[kb] = kb, ka
    all_lids = [lid for n in fabric for lid in n.lids.values()]
    if top is None:
        top = max(all_lids, default=0) + (1 << lmc) - 1
    for n in fabric:
        if n.is_switch:
            lft = bytearray([fw.LFT_NO_PORT]) * ((top // fw.LFT_BLOCK_SIZE + 1) * fw.LFT_BLOCK_SIZE)
            image = routes[n.guid].ports
            n_lids = min(len(lft), len(image))
            lft[:n_lids] = image[:n_lids]
            active = frozenset(p for p, _peer in fabric.connected_ports(n))
            switches[n.guid] = SwitchState(n.guid, n.description, n.num_ports, n.lid(0) or 0, bytes(lft), top,
                                           fw.UNICAST_LID_MAX + 1, active)
        else:
            for p, _peer in fabric.connected_ports(n):
                ca_ports[(n.guid, p)] = CaPortState(n.guid, p, n.description, n.lid(p) or 0,
                                                    n.lmcs.get(p, lmc), True)
    return Snapshot(switches, ca_ports, links)
