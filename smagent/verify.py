"""Verify the forwarding tables a fabric actually holds: trace every source to every LID.

Two halves. `collect` reads what the switches hold (discovery, then every LFT block up
to LinearFDBTop, the whole RFT of a switch without an LFT and, optionally, the MFT) into
a `Snapshot`; `check` is pure and runs the forwarding rules over it, so tests hand-build
snapshots. The simulator's data plane (`smagent.sim.dataplane`) implements the same rules
on its own: it is the independent witness the differential test compares against.

Forwarding rules (seed 000, IBA 18.2.4). A switch first looks whether the DLID is its own
(port 0's LID; a range of 2^LMC with enhanced port 0): then the packet is for its
management port, whatever the tables say (the seed: the receiving port checks the DLID
for the management port before any table lookup; ibsim and the simulator do the same).
Otherwise the unicast table decides:

* LFT (LinearFDBCap > 0): discard when the DLID is above LinearFDBTop or at or above
  LinearFDBCap, or when the entry is 255 or names a port the switch does not have.
* RFT (LinearFDBCap 0, RandomFDBCap > 0): the first Valid entry whose range holds the
  DLID (BaseLID with its low LMC bits cleared, 2^LMC LIDs) gives the exit port. No match:
  a packet that came in on DefaultPort is discarded; any other goes out DefaultPort,
  and is discarded if DefaultPort does not exist. So the outcome at an RFT switch also
  depends on whether the packet entered on DefaultPort.
* neither table: discard.

Port 0 delivers to the switch itself (right only if the DLID is the switch's). Any other
port sends the packet over its link, which must exist and be ACTIVE at both ends (data
needs ACTIVE ports); a channel adapter port accepts DLIDs base .. base + 2^LMC - 1 (base
with its low LMC bits cleared), anything else reaching it is misdelivered.

Sources are every ACTIVE CA port with a LID on an ACTIVE switch port and every switch
with a LID (its port 0); destinations are every LID assigned (all 2^LMC of a CA port). A packet's
route depends only on where it is (switch, and for an RFT switch whether it entered on
DefaultPort) and its DLID, so outcomes are computed once per (place, DLID) and shared by
every source entering there: O(switches x LIDs), not O(pairs x hops).

Defect classes (`Report.defects`: class -> {"count", "examples": [dict, ...], ...}; each
example a dict of fields, `Report.texts` the same examples as readable lines):

``unreached``      what discovery or the table reads could not reach (a silent node, a
                   switch whose tables did not answer): verified around, listed here
``unreachable``    (source, DLID) pairs whose packets are not delivered, by cause
``dead_end``       where packets are discarded: switch, DLID, cause (see CAUSES)
``loop``           DLIDs whose route revisits a switch, with the cycle of switches
``misdelivered``   routes that end at a port that does not own the DLID
``cdg_cycle``      a cycle in the channel dependency graph: credit-loop deadlock risk.
                   Channels are (switch, out port) links between switches; a route
                   through s -> t -> u makes channel (s,p) depend on (t,q). The graph is
                   built from the routes of data traffic: everything CA ports send.
                   A switch's own port 0 sends management packets (SMPs ride VL15,
                   which has no flow control and cannot deadlock); its routes are still
                   traced for reachability above. One cycle is reported explicitly.
``inactive_port``  linked ports that are not ACTIVE
``no_lid``         linked CA ports or switches without a LID
``duplicate_lid``  LIDs claimed by more than one port
``own_lid_not_port0`` a switch's own LID (each of its 2^LMC) whose LFT entry is not port
                   0 (another port, 255, or above LinearFDBTop). The seed delivers it to
                   the management port anyway (so no pair is lost above), but ibsim and
                   switches that look the DLID up in the LFT send the switch's own
                   LID-routed SMPs elsewhere (docs/PITFALLS.md, "Own-LID entries")
``rft_overlap``    valid RFT entries that match the same DLID and name different ports
                   (which wins is not specified; the check follows the first)
``mcast``          multicast groups (MLIDs with a port set on any switch): every member
                   (a CA port or switch port 0 the MFT entries point at) sending must
                   reach every other member exactly once: members missed, members
                   reached twice, loops in the tree, branches into unlinked or inactive
                   ports or into a switch without an entry for the group.

Link checks (when the snapshot holds the ports' PortInfo: `collect` always reads it;
hand-built snapshots without it skip them):

``link_mtu_mismatch``  links whose two ends hold different NeighborMTU
``link_vl_mismatch``   links whose two ends hold different OperationalVLs
``sl_unmapped``        hops on a data path (a CA port sending, or a switch's (input,
                       output) port pair some (source, DLID) route takes) whose SL2VL
                       table maps an SL to VL15 or to a VL at or above the data VLs the
                       link runs (the smaller OperationalVLs of its two ends): a packet on
                       that SL is dropped there. Computed per hop, like routes per
                       (switch, DLID): the hops of every route, each checked once.
``no_default_partition`` end ports (linked CA ports, switch port 0 of a switch with a
                       LID) whose P_Key block 0 lacks the default partition 0xFFFF (full
                       member); at reset ports hold 0x7FFF, and two limited members
                       cannot talk.

Warnings (listed in `Report.warnings`, the exit code and `Report.ok` ignore them: a
configured cap (`links.LinkOptions.max_mtu` / `max_vls`) or a cable that trained at a
lower rate keeps traffic flowing, only slower):

``degraded_link``          active width or speed below what both ends support
                           (`mad.codes.degraded`, iblinkinfo's "Could be")
``link_below_capability``  NeighborMTU or OperationalVLs agreeing on both ends but
                           below the smaller MTUCap / VLCap of the two
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any

from mad import codes
from mad import forwarding as fw
from mad.attributes import P_KeyTable, PortState, SLtoVLMappingTable
from smagent.fdb import linear, multicast
from smagent.fdb.random import read_rft_blocks
from smagent.fdb.switch import per_switch
from smagent.transport.base import Transport

EXAMPLES = 5
# switches x DLIDs from which LFT-only fabrics are walked in bulk (`_failing`): below it
# the DLID-by-DLID walk is done before numpy is imported (648 hosts: 54 x 702 = 37,908)
BULK_MIN = 100_000
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


# ----------------------------------------------------------------------------- model
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
    # P_Key block 0 of end ports ((guid, port) -> keys; switch port 0: (guid, 0)).
    # tables_read False: the SL2VL and P_Key checks are skipped.
    port_info: dict = dataclasses.field(default_factory=dict)
    sl2vl: dict = dataclasses.field(default_factory=dict)
    pkeys: dict = dataclasses.field(default_factory=dict)
    tables_read: bool = False


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
    balance: dict[str, Any] | None = None  # smagent.balance figures, when asked for
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


# ----------------------------------------------------------------------------- the net
DELIVERED = 0


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


# ----------------------------------------------------------------------------- check
def check(snap: Snapshot, examples: int = EXAMPLES, *, keep_outcomes: bool = False) -> Report:
    """Every check of the module docstring on a snapshot. ``keep_outcomes``: the unicast
    outcomes per place go to `Report.outcomes` (a `PlaceOutcomes`)."""
    t0 = time.monotonic()
    D = _Defects(examples)
    net = _Net.of(snap)
    _check_unreached(snap, D)
    _check_lids_and_sources(net, D)
    _check_ports(net, D)
    _check_own_lids(net, D)
    _check_rft_overlaps(net, D)
    keep = PlaceOutcomes(_place_sources(net), {}, {}) if keep_outcomes else None
    uni = _check_unicast(net, D, keep)
    _check_cdg(net, uni["deps"], D)
    groups = _check_mcast(net, D) if snap.mcast_read else None
    hops = _check_links(net, D)
    deps = uni["deps"]
    chans = set(deps)
    for v in deps.values():
        chans.update(v)
    summary = {
        "switches": len(net.st), "ca_ports": sum(1 for k in snap.ca_ports if k in snap.links),
        "sources": sum(len(v) for v in net.sources.values()), "lids": len(net.owner),
        "pairs": uni["pairs"], "pairs_unreachable": uni["bad"],
        "channels": len(chans), "dependencies": sum(len(v) for v in deps.values()), "mcast_groups": groups,
        "unreached": len(snap.unreached), "links_checked": bool(snap.port_info),
        "tables_checked": snap.tables_read, "data_hops": hops,
        "smps": snap.smps, "read_seconds": round(snap.seconds, 3), "check_seconds": round(time.monotonic() - t0, 3),
    }
    defects = {k: v for k, v in D.d.items() if k not in WARNINGS}
    return Report(summary, defects, D.texts, warnings={k: v for k, v in D.d.items() if k in WARNINGS},
                  outcomes=keep)


def _check_unreached(snap: Snapshot, D: _Defects) -> None:
    for u in snap.unreached:
        D.add("unreached", dict(u), f"{u['where']}: {u['error']}")


def _check_lids_and_sources(net: _Net, D: _Defects) -> None:
    """Who owns which LID (net.owner); switches and linked CA ports without a LID; LIDs
    claimed twice. Also where every source enters (net.sources)."""
    snap, owner = net.snap, net.owner

    def claim(lid, who):
        if lid in owner:
            a, b = net.owner_name(who), net.owner_name(owner[lid])
            D.add("duplicate_lid", {"lid": lid, "ports": [a, b]}, f"LID {lid}: {a} and {b}")
        else:
            owner[lid] = who

    for i, s in enumerate(net.st):
        if not s.lid:
            D.add("no_lid", {"node": net.names[i], "port": 0}, f"switch {net.names[i]} has no LID")
            continue
        for lid in s.lid_range():
            claim(lid, ("sw", i))
        net.sources.setdefault(net.place(i, 0), []).append(("sw", i))
    for key in sorted(snap.ca_ports):
        c = snap.ca_ports[key]
        peer = snap.links.get(key)
        if peer is None:
            continue
        if not c.active:
            D.add("inactive_port", {"port": net.port_name(key), "peer": None},
                  f"{net.port_name(key)} is linked but not ACTIVE")
        if not c.lid:
            D.add("no_lid", {"node": c.name, "port": c.port}, f"{net.port_name(key)} is linked but has no LID")
            continue
        for lid in c.lid_range():
            claim(lid, ("ca", key))
        si = net.idx.get(peer[0])
        if c.active and si is not None and peer[1] in net.st[si].active:
            net.sources.setdefault(net.place(si, peer[1]), []).append(("ca", key))
    for place in net.sources:  # CA ports first, then the switch itself: the order examples show
        net.sources[place].sort(key=lambda s: (s[0] == "sw", s[1]))


def _check_ports(net: _Net, D: _Defects) -> None:
    snap = net.snap
    for i, s in enumerate(net.st):
        for p in range(1, s.num_ports + 1):
            peer = snap.links.get((s.guid, p))
            if peer is not None and p not in s.active and (peer[0] in snap.switches or
                                                           (peer in snap.ca_ports and snap.ca_ports[peer].active)):
                me, other = f"{net.names[i]}[{p}]", net.port_name(peer)
                D.add("inactive_port", {"port": me, "peer": other}, f"{me} is linked (to {other}) but not ACTIVE")


def own_lid_entry(s: SwitchState, lid: int) -> int | None:
    """What an LFT switch's table says for one of its own LIDs: the port, or None above
    LinearFDBTop (or outside the table read)."""
    return s.lft[lid] if lid <= s.top and lid < s.cap and lid < len(s.lft) else None


def _check_own_lids(net: _Net, D: _Defects) -> None:
    """A switch's own LIDs must point at port 0 in its LFT (see the module docstring)."""
    for i, s in enumerate(net.st):
        if not s.read or not s.cap:
            continue
        for lid in s.lid_range():
            e = own_lid_entry(s, lid)
            if e != 0:
                what = f"LinearFDBTop {s.top} is below it" if e is None else f"its LFT entry is port {e}"
                D.add("own_lid_not_port0", {"switch": net.names[i], "lid": lid, "port": e},
                      f"{net.names[i]} LID {lid} (its own): {what}, not port 0 (LID-routed SMPs for it go astray)")


def black_hole_entries(snap: Snapshot) -> list[dict]:
    """Table entries that send a LID into a port with no usable link (what the unicast
    walk calls a dead end: no_such_port, unlinked_port, port_not_active), whether or not
    a LID owner is routed through them: LFT entries 1..LinearFDBTop (255 is "no route",
    port 0 the switch) and valid RFT entries, of every read switch. The plan check
    (`smagent.plancheck`) refuses them absolutely: a fresh fabric has no tables to
    compare with."""
    net = _Net.of(snap)
    out = []
    for i, s in enumerate(net.st):
        if not s.read:
            continue
        if s.cap:
            entries = ((lid, s.lft[lid]) for lid in range(1, min(s.top, s.cap - 1, len(s.lft) - 1) + 1))
        else:
            entries = ((lid, port) for base, lmc, port in (s.rft or ()) for lid in fw.rft_lid_range(base, lmc))
        for lid, port in entries:
            if port == 0 or port == fw.LFT_NO_PORT and s.cap:
                continue
            cause = "no_such_port" if port > s.num_ports else net.exits[i][port]
            if cause in ("no_such_port", "unlinked_port", "port_not_active"):
                out.append({"switch": net.names[i], "lid": lid, "port": port, "cause": cause})
    return out


def _check_rft_overlaps(net: _Net, D: _Defects) -> None:
    """Valid RFT entries whose ranges overlap and name different ports: the specification
    compares a DLID with every entry at once and does not say which wins; this check (and
    the simulator) follows the first in table order, a real switch may not."""
    for i, s in enumerate(net.st):
        if net.rft_maps[i] is None:
            continue
        first: dict[int, tuple] = {}
        seen: set = set()
        for e in s.rft:
            for lid in fw.rft_lid_range(e[0], e[1]):
                f = first.setdefault(lid, e)
                if f[2] != e[2] and (f, e) not in seen:
                    seen.add((f, e))
                    a, b = (f"lid {x[0]}/lmc {x[1]} -> port {x[2]}" for x in (f, e))
                    D.add("rft_overlap", {"switch": net.names[i], "lid": lid, "entries": [list(f), list(e)]},
                          f"{net.names[i]}: RFT entries {a} and {b} both match LID {lid}")


# ----------------------------------------------------------------------------- unicast
def _step(net: _Net, place: int, dlid: int):
    """One decision at a place: DELIVERED, (cause, detail) to stop, ("misdelivered",
    (i, port, name)), or (out port, next place) to forward."""
    i, on_default = place >> 1, place & 1
    s, own = net.st[i], net.owner[dlid]
    if dlid in s.lid_range():
        return DELIVERED if own == ("sw", i) else ("misdelivered", (i, 0, f"{net.names[i]} (port 0)"))
    if not s.read:
        return ("unread", None)
    if s.cap:
        if dlid > s.top:
            return ("above_top", s.top)
        if dlid >= s.cap:
            return ("above_cap", s.cap)
        e = s.lft[dlid] if dlid < len(s.lft) else fw.LFT_NO_PORT
        if e == fw.LFT_NO_PORT:
            return ("no_route", e)
    elif net.rft_maps[i] is not None:
        e = net.rft_maps[i].get(dlid)
        if e is None:
            if on_default:
                return ("rft_default_in", s.default_port)
            e = s.default_port
            if e > s.num_ports:
                return ("rft_no_default", e)
    else:
        return ("no_lft", None)
    if e > s.num_ports:
        return ("no_such_port", e)
    if e == 0:
        return ("misdelivered", (i, 0, f"{net.names[i]} (port 0)"))
    x = net.exits[i][e]
    if isinstance(x, str):
        return (x, e)
    if x[0] == "sw":
        return (e, net.place(x[1], x[2]))
    return DELIVERED if own == x else ("misdelivered", (i, e, net.port_name(x[1])))


def _stops(stp) -> bool:
    return stp == DELIVERED or isinstance(stp[0], str)


def _resolve(steps: dict) -> dict:
    """Every place's outcome for one DLID: follow forwards, memoised, loops detected.
    DELIVERED, or (kind, switch index, detail); a loop's detail is its cycle of switches."""
    out: dict = {}
    for p0 in steps:
        path: list[Any] = []
        pos: dict[Any, int] = {}
        cur = p0
        while True:
            if cur in out:
                res = out[cur]
                break
            if cur in pos:
                res = ("loop", cur >> 1, tuple(x >> 1 for x in path[pos[cur]:]))
                break
            stp = steps[cur]
            if stp.__class__ is int or stp[0].__class__ is str:  # `_stops`, inlined (hot)
                res = _outcome(stp, cur >> 1)
                break
            pos[cur] = len(path)
            path.append(cur)
            cur = stp[1]
        for x in path:
            out[x] = res
        out.setdefault(p0, res)
    return out


def _outcome(stp, i: int):
    """A walk's outcome where it stops, at switch i: DELIVERED or (kind, i, detail)."""
    return DELIVERED if stp == DELIVERED else (stp[0], i, stp[1])


def _steps_for(net: _Net, dlid: int) -> dict:
    """The decision at every place a packet for `dlid` can stand (place 2i+1 only exists
    at RFT switches: packets there came in on DefaultPort)."""
    steps = {}
    for i, fast in enumerate(net.fast):
        if fast is not None:
            own, top, cap, lft, hops = fast
            if dlid <= top and dlid < cap and dlid < len(lft) and dlid not in own:
                stp = hops[lft[dlid]]
                if stp is not None:
                    steps[2 * i] = stp
                    continue
        steps[2 * i] = _step(net, 2 * i, dlid)
        if net.rft_maps[i] is not None:
            steps[2 * i + 1] = _step(net, 2 * i + 1, dlid)
    return steps


@dataclasses.dataclass
class PlaceOutcomes:
    """Unicast outcomes per place, as `check` computes them: a packet's route depends only
    on where it enters (a switch; at an RFT switch also whether on DefaultPort) and its
    DLID. ``sources``: place -> the sources entering there; ``owner``: DLID -> its owner;
    ``at``: DLID -> {place: outcome}. A place is (switch GUID, entered on DefaultPort); a
    source or owner ("ca", (guid, port)) or ("sw", switch GUID); an outcome "delivered" or
    (kind, switch GUID): "loop", "misdelivered" or a dead-end cause, where it happens.
    ``at`` holds only the places a DLID is not delivered from: every other place of
    ``sources`` delivers it (`outcome`)."""
    sources: dict
    owner: dict
    at: dict

    def outcome(self, dlid: int, place) -> Any:
        """The outcome of ``dlid`` from ``place``: "delivered" unless `at` says otherwise."""
        return self.at.get(dlid, {}).get(place, "delivered")

    def pairs(self) -> dict:
        """{(source, DLID): outcome} for every pair `check` counts (a source never to its own LID)."""
        res = {}
        for dlid, own in self.owner.items():
            at = self.at.get(dlid, {})
            for place, srcs in self.sources.items():
                o = at.get(place, "delivered")
                for src in srcs:
                    if src != own:
                        res[(src, dlid)] = o
        return res


def _failing(net: _Net, deps: dict | None = None):
    """(DLID, its owner, {source place: outcome} of the places sources enter that it is
    not delivered from), DLID by DLID: the one walk `check`, `place_outcomes` and
    `outcomes` share. With ``deps``, the channel dependencies of the routes from where CA
    ports send are added (`_add_deps`). A fabric of LFT switches is walked for many DLIDs
    at once (`smagent.lftwalk`, the same outcomes) when it is large enough to pay for
    numpy (`BULK_MIN`), any other DLID by DLID."""
    sending = [place for place, srcs in net.sources.items() if any(s[0] == "ca" for s in srcs)]

    def one(dlid: int, deps: dict | None) -> dict:
        steps = _steps_for(net, dlid)
        out = _resolve(steps)
        if deps is not None:
            _add_deps(sending, steps, dlid, deps)
        return {p: out[p] for p in net.sources if out[p] != DELIVERED}

    walker = None
    if len(net.st) * len(net.owner) >= BULK_MIN:
        from smagent import lftwalk  # numpy: imported where it pays (its import alone is ~0.1 s)
        walker = lftwalk.Walker.of(net)
    if walker is not None:
        def stop(i: int, dlid: int):
            o = _outcome(_step(net, 2 * i, dlid), i)
            return None if o == DELIVERED else o
        yield from walker.failing(stop, one, [p >> 1 for p in sending], deps)
        return
    for dlid in sorted(net.owner):
        yield dlid, net.owner[dlid], one(dlid, deps)


def _keep(net: _Net, keep: PlaceOutcomes, dlid: int, own, failing: dict) -> None:
    """One DLID's outcomes at the places sources enter, in `PlaceOutcomes` terms."""
    def name(x):
        return ("sw", net.st[x[1]].guid) if x[0] == "sw" else x
    keep.owner[dlid] = name(own)
    keep.at[dlid] = {(net.st[p >> 1].guid, bool(p & 1)): (o[0], net.st[o[1]].guid) for p, o in failing.items()}


def _place_sources(net: _Net) -> dict:
    return {(net.st[p >> 1].guid, bool(p & 1)): [("sw", net.st[s[1]].guid) if s[0] == "sw" else s for s in srcs]
            for p, srcs in net.sources.items()}


def place_outcomes(snap: Snapshot) -> PlaceOutcomes:
    """Every place's unicast outcome for every DLID (`PlaceOutcomes`), without the rest
    of `check` (``check(snap, keep_outcomes=True)`` gives the same with the report)."""
    net = _Net.of(snap)
    _check_lids_and_sources(net, _Defects(0))
    keep = PlaceOutcomes(_place_sources(net), {}, {})
    for dlid, own, failing in _failing(net):
        _keep(net, keep, dlid, own, failing)
    return keep


def outcomes(snap: Snapshot) -> dict:
    """{(source, DLID): outcome} for every pair `check` counts: a source is ("ca", (guid,
    port)) or ("sw", switch GUID); the outcome is "delivered", or (kind, switch GUID) where
    kind is "loop", "misdelivered" or a dead-end cause and the switch where it happens."""
    return place_outcomes(snap).pairs()


def _check_unicast(net: _Net, D: _Defects, keep: PlaceOutcomes | None = None) -> dict:
    pairs = bad = 0
    by_cause: dict[str, int] = {}
    seen: set = set()
    deps: dict[int, dict[int, int]] = {}  # channel -> {channel: first DLID}
    entry = {src: place for place, srcs in net.sources.items() for src in srcs}  # where each source enters
    everyone = sum(len(srcs) for srcs in net.sources.values())
    for dlid, own, failing in _failing(net, deps):
        if keep is not None:
            _keep(net, keep, dlid, own, failing)
        own_place = entry.get(own)
        pairs += everyone - (net.sources[own_place].count(own) if own_place is not None else 0)
        for place, res in failing.items():
            srcs = [s for s in net.sources[place] if s != own]
            if not srcs:
                continue
            bad += len(srcs)
            by_cause[res[0]] = by_cause.get(res[0], 0) + len(srcs)
            _report_stop(net, D, dlid, res, srcs, seen)
    if bad:
        D.d["unreachable"]["by_cause"] = dict(sorted(by_cause.items(), key=lambda kv: -kv[1]))
    return {"pairs": pairs, "bad": bad, "deps": deps}


def _report_stop(net: _Net, D: _Defects, dlid: int, res, srcs: list, seen: set) -> None:
    """The defects of one undelivered (place, DLID): the place where it stops (once) and
    the pairs it costs."""
    kind, at, detail = res
    own = net.owner[dlid]
    dest = net.owner_name(own)
    where = ("loop", dlid, frozenset(detail)) if kind == "loop" else (kind, dlid, at)
    why = _why(kind, at, detail, net.names)
    if where not in seen:
        seen.add(where)
        if kind == "loop":
            cyc = [net.names[x] for x in detail]
            D.add("loop", {"lid": dlid, "dest": dest, "cycle": cyc},
                  f"LID {dlid} ({dest}): loops through {' -> '.join(cyc)} -> {cyc[0]}")
        elif kind == "misdelivered":
            D.add("misdelivered", {"lid": dlid, "dest": dest, "delivered_to": detail[2], "by": net.names[at]},
                  f"LID {dlid} ({dest}): delivered to {detail[2]} by {net.names[at]}")
        else:
            D.add("dead_end", {"switch": net.names[at], "lid": dlid, "dest": dest, "cause": kind,
                               **_detail_fields(kind, detail)},
                  f"{net.names[at]} LID {dlid} ({dest}): {why}")
    D.add("unreachable", None, count=len(srcs))
    for src in srcs:
        if not D.room("unreachable"):
            break
        sname = net.source_name(src)
        D.add("unreachable", {"source": sname, "lid": dlid, "dest": dest, "cause": kind, "at": net.names[at]},
              f"{sname} -> LID {dlid} ({dest}): {why}", count=0)


def _add_deps(sending: list, steps: dict, dlid: int, deps: dict) -> None:
    """Channel dependencies of data traffic to `dlid`: the routes from the places where
    CA ports send (`sending`). A step stops where `_stops` says (inlined: this runs once
    per DLID and place)."""
    hot: set = set()
    for cur in sending:
        while cur not in hot:
            hot.add(cur)
            stp = steps[cur]
            if stp.__class__ is int or stp[0].__class__ is str:
                break
            cur = stp[1]
    for place in hot:
        stp = steps[place]
        if stp.__class__ is int or stp[0].__class__ is str:
            continue
        p, nxt = stp
        nstp = steps[nxt]
        if nstp.__class__ is int or nstp[0].__class__ is str:
            continue
        a, b = ((place >> 1) << 8) | p, ((nxt >> 1) << 8) | nstp[0]
        d = deps.get(a)
        if d is None:
            deps[a] = {b: dlid}
        elif b not in d:
            d[b] = dlid


def _detail_fields(kind: str, detail) -> dict:
    """A dead end's detail as a named field: the port, LinearFDBTop/Cap or DefaultPort."""
    if detail is None:
        return {}
    name = {"above_top": "linear_fdb_top", "above_cap": "linear_fdb_cap", "rft_default_in": "default_port",
            "rft_no_default": "default_port"}.get(kind, "port")
    return {name: detail}


def _why(kind, at, detail, names) -> str:
    if kind == "loop":
        return f"loops ({' -> '.join(names[x] for x in detail)} -> {names[detail[0]]})"
    if kind == "misdelivered":
        return f"{names[at]} delivers it to {detail[2]}"
    what = CAUSES.get(kind, kind)
    if kind in ("above_top", "above_cap"):
        return f"dead end at {names[at]}: {what} ({detail})"
    if kind in ("no_lft", "unread"):
        return f"dead end at {names[at]}: {what}"
    if kind in ("rft_default_in", "rft_no_default"):
        return f"dead end at {names[at]}: {what} (DefaultPort {detail})"
    return f"dead end at {names[at]}: {what} (port {detail})"


# ----------------------------------------------------------------------------- links
def _check_links(net: _Net, D: _Defects) -> int | None:
    """The link checks, when the snapshot holds PortInfo; the number of data hops whose
    SL2VL tables were checked (None: not checked)."""
    if not net.snap.port_info:
        return None
    _check_link_params(net, D)
    _check_degraded(net, D)
    if not net.snap.tables_read:
        return None
    _check_partitions(net, D)
    return _check_sl_to_vl(net, D)


def _link_ends(snap: Snapshot):
    """Every link once, as (key, PortInfo, peer key, PortInfo), both ends read."""
    for a, b in sorted(snap.links.items()):
        if a < b and a in snap.port_info and b in snap.port_info:
            yield a, snap.port_info[a], b, snap.port_info[b]


# (defect class, field, capability field, code -> value shown, unit)
_LINK_PARAMS = (("link_mtu_mismatch", "neighbor_mtu", "mtu_cap", codes.MTUS, "MTU"),
                ("link_vl_mismatch", "operational_vls", "vl_cap", codes.DATA_VLS, "data VLs"))


def _check_link_params(net: _Net, D: _Defects) -> None:
    """Both ends of a link must run the same MTU and VLs; agreeing values below what both
    ends can do are a warning (an SM's configured cap looks the same)."""
    for a, pa, b, pb in _link_ends(net.snap):
        for cls, field, cap, shown, unit in _LINK_PARAMS:
            va, vb = getattr(pa, field), getattr(pb, field)
            x, y = shown.get(va, va), shown.get(vb, vb)
            an, bn = net.port_name(a), net.port_name(b)
            if va != vb:
                D.add(cls, {"port": an, "peer": bn, "value": x, "peer_value": y},
                      f"{an} runs {unit} {x}, its peer {bn} {y}")
                continue
            best = min(getattr(pa, cap), getattr(pb, cap))
            if va < best:
                D.add("link_below_capability", {"port": an, "peer": bn, "field": field, "value": x,
                                                "capable": shown.get(best, best)},
                      f"{an} - {bn}: {unit} {x}, both ends can run {shown.get(best, best)}")


def _check_degraded(net: _Net, D: _Defects) -> None:
    for a, pa, b, pb in _link_ends(net.snap):
        why = codes.degraded(pa, pb)
        if why:
            an, bn = net.port_name(a), net.port_name(b)
            D.add("degraded_link", {"port": an, "peer": bn, "rate": codes.rate_text(pa), "why": why},
                  f"{an} - {bn} ({codes.rate_text(pa) or 'rate unknown'}): {'; '.join(why)}")


def _check_partitions(net: _Net, D: _Defects) -> None:
    """End ports that send or receive data must hold the default partition as a full
    member (a port whose P_Key table was not read is listed as unreached)."""
    snap = net.snap
    for key in sorted(snap.pkeys):
        keys = snap.pkeys[key]
        if fw.PKEY_DEFAULT not in keys:
            name = net.port_name(key)
            held = [f"{k:#06x}" for k in keys if k]
            D.add("no_default_partition", {"port": name, "pkeys": held},
                  f"{name}: P_Key block 0 holds {', '.join(held) or 'no key'}, not 0xffff")


def _check_sl_to_vl(net: _Net, D: _Defects) -> int:
    """Every hop data takes maps every SL to a data VL the link runs."""
    snap = net.snap
    sw_hops, ca_hops = data_hops(snap)
    checked = 0
    for g, inp, out in sorted(sw_hops) + [(g, 0, p) for g, p in sorted(ca_hops)]:
        table = snap.sl2vl.get((g, inp, out))
        if table is None:
            continue  # not read: listed as unreached, or the port has no SL2VL table
        checked += 1
        vls = _link_vls(snap, (g, out))
        bad = [list(x) for x in codes.unmapped_sls(table, vls)]
        if bad:
            sw = g in snap.switches
            name = net.port_name((g, out))
            where = f"{snap.switches[g].name} in {inp} out {out}" if sw else name
            D.add("sl_unmapped", {"port": name, "in_port": inp if sw else None, "out_port": out,
                                  "data_vls": vls, "sls": bad},
                  f"{where}: " + ", ".join(f"SL {sl} -> VL{vl}" for sl, vl in bad)
                  + f" (the link runs {vls} data VL{'s' if vls != 1 else ''})")
    return checked


def _link_vls(snap: Snapshot, key) -> int:
    """Data VLs a link runs: the smaller OperationalVLs of its two ends."""
    ends = [snap.port_info.get(k) for k in (key, snap.links.get(key))]
    return min(codes.DATA_VLS.get(pi.operational_vls, 0) if pi is not None else 0 for pi in ends)


def data_hops(snap: Snapshot) -> tuple[set, set]:
    """Where data leaves a port on some (source, DLID) route: switch hops as (switch GUID,
    input port, output port) (input 0: the switch sends) and CA ports that send, as
    (GUID, port). Per DLID, each (switch, input port) is followed once."""
    net = _Net.of(snap)
    _check_lids_and_sources(net, _Defects(0))
    starts: dict = {}  # place -> {input port: {sources}}
    ca_hops = set()
    for place, srcs in net.sources.items():
        for src in srcs:
            inp = 0 if src[0] == "sw" else snap.links[src[1]][1]
            starts.setdefault(place, {}).setdefault(inp, set()).add(src)
            if src[0] == "ca":
                ca_hops.add(src[1])
    hops: set = set()
    for dlid in sorted(net.owner):
        own = net.owner[dlid]
        # the last hop to a CA port: out of the switch port it is linked to
        last = snap.links[own[1]] if own[0] == "ca" else None
        last = (net.idx.get(last[0]), last[1]) if last else None
        steps = _steps_for(net, dlid)
        todo = [(pl, inp) for pl, ins in starts.items() for inp, srcs in ins.items() if srcs != {own}]
        seen: set = set()
        while todo:
            place, inp = todo.pop()
            stp, i = steps[place], place >> 1
            if (place, inp) in seen:
                continue
            seen.add((place, inp))
            if stp == DELIVERED and last and last[0] == i:
                hops.add((i, inp, last[1]))
            if _stops(stp):
                continue
            hops.add((i, inp, stp[0]))
            todo.append((stp[1], net.exits[i][stp[0]][2]))
    return {(net.st[i].guid, inp, out) for i, inp, out in hops}, ca_hops


# ----------------------------------------------------------------------------- CDG
def _check_cdg(net: _Net, deps: dict, D: _Defects) -> None:
    cycle = find_cycle(deps)
    if not cycle:
        return
    hops = []
    for k, c in enumerate(cycle):
        nxt = cycle[(k + 1) % len(cycle)]
        hops.append({"switch": net.names[c >> 8], "port": c & 0xFF, "dlid": deps[c][nxt]})
    text = " -> ".join(f"{h['switch']}[{h['port']}]" for h in hops) + f" -> {hops[0]['switch']}[{hops[0]['port']}]"
    D.add("cdg_cycle", {"channels": len(cycle), "cycle": hops},
          f"channel dependency cycle of {len(cycle)} channels: {text} (dependencies from routes "
          f"to LIDs {', '.join(str(h['dlid']) for h in hops)})", cycle=hops)


def find_cycle(adj: dict[int, dict[int, int]]) -> list[int] | None:
    """One cycle of a directed graph (iterative DFS, white/grey/black), or None."""
    GREY, BLACK = 1, 2
    color: dict[int, int] = {}
    for start in sorted(adj):
        if color.get(start):
            continue
        color[start] = GREY
        path = [start]
        pos = {start: 0}
        stack = [iter(sorted(adj.get(start, ())))]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                node = path.pop()
                del pos[node]
                color[node] = BLACK
                stack.pop()
                continue
            c = color.get(nxt)
            if c == GREY:
                return path[pos[nxt]:]
            if c is None:
                color[nxt] = GREY
                pos[nxt] = len(path)
                path.append(nxt)
                stack.append(iter(sorted(adj.get(nxt, ()))))
    return None


# ----------------------------------------------------------------------------- multicast
def _check_mcast(net: _Net, D: _Defects) -> int:
    snap = net.snap
    mlids = sorted({m for s in snap.switches.values() for m, ports in s.mft.items() if ports})
    for mlid in mlids:
        members = _mcast_members(snap, mlid)
        reported: set = set()
        for src in members:
            got = _mcast_flood(net, D, mlid, src, reported)
            for m in members:
                n = got.get(m, 0)
                if m != src and n != 1:
                    a, b = _mname(net, m), _mname(net, src)
                    D.add("mcast", {"mlid": mlid, "problem": "copies", "member": a, "sender": b, "copies": n},
                          f"MLID 0x{mlid:04x}: {a} receives {n} copies of what {b} sends")
    return len(mlids)


def _mcast_members(snap: Snapshot, mlid: int) -> list:
    """What the entries point at: CA ports, switch port 0."""
    members = []
    for g in sorted(snap.switches):
        ports = snap.switches[g].mft.get(mlid, ())
        if 0 in ports:
            members.append(("sw", g))
        for p in sorted(ports):
            peer = snap.links.get((g, p)) if p else None
            if peer is not None and peer in snap.ca_ports:
                members.append(("ca", peer))
    return members


def _mname(net: _Net, m) -> str:
    return f"{net.snap.switches[m[1]].name} port 0" if m[0] == "sw" else net.port_name(m[1])


def _mcast_flood(net: _Net, D: _Defects, mlid: int, src, reported: set) -> dict:
    """Follow what `src` sends to `mlid` through the MFTs; {member: copies received}.
    Problems of the tree (cycles, switches without an entry, bad branches) go to D once."""
    snap, label = net.snap, f"MLID 0x{mlid:04x}"
    got: dict = {}
    visited: set = set()
    queue = [(src[1], 0)] if src[0] == "sw" else [snap.links[src[1]]]
    while queue:
        g, inp = queue.pop()
        again = g in visited
        s = snap.switches[g]
        if again and ("loop", g) not in reported:  # a cycle: the switch delivers again (and would forward forever)
            reported.add(("loop", g))
            D.add("mcast", {"mlid": mlid, "problem": "cycle", "switch": s.name, "sender": _mname(net, src)},
                  f"{label}: the tree has a cycle: {s.name} is reached twice (from {_mname(net, src)})")
        visited.add(g)
        ports = s.mft.get(mlid)
        if not ports and not s.mft_read:
            continue  # its MFT did not answer: listed as unreached
        if not ports:
            if not again and ("empty", g) not in reported:
                reported.add(("empty", g))
                D.add("mcast", {"mlid": mlid, "problem": "no_entry", "switch": s.name, "sender": _mname(net, src)},
                      f"{label}: {s.name} receives the group but has no MFT entry for it (from {_mname(net, src)})")
            continue
        for p in sorted(ports):
            if p == inp:
                continue
            if p == 0:
                got[("sw", g)] = got.get(("sw", g), 0) + 1
                continue
            peer = snap.links.get((g, p))
            ok = peer is not None and p in s.active and (
                peer[1] in snap.switches[peer[0]].active if peer[0] in snap.switches
                else peer in snap.ca_ports and snap.ca_ports[peer].active)
            if not ok and (g, p) in net.silent:
                continue  # the member behind it did not answer: listed as unreached
            if not ok or peer is None:
                if ("branch", g, p) not in reported:
                    reported.add(("branch", g, p))
                    state = "not linked" if peer is None else "not ACTIVE"
                    D.add("mcast", {"mlid": mlid, "problem": "bad_branch", "switch": s.name, "port": p,
                                    "state": state.replace(" ", "_").lower()},
                          f"{label}: {s.name} forwards to port {p}, which is {state}")
                continue
            if peer[0] in snap.switches:
                if not again:
                    queue.append(peer)
            else:
                got[("ca", peer)] = got.get(("ca", peer), 0) + 1
    return got
# ----------------------------------------------------------------------------- collect
def collect(transport: Transport, *, mcast: bool = True, links: bool = True) -> Snapshot:
    """Discover the fabric and read every switch's tables (DR-routed Gets, batched);
    with ``links`` also the SL2VL and P_Key tables the link checks need.

    What does not answer (a silent node, a switch whose tables cannot be read) does not
    stop the reading: it is listed in `Snapshot.unreached` and the rest is verified."""
    from smagent import discovery
    t0 = time.monotonic()
    sent0 = transport.stats.sent
    topo = discovery.discover(transport)
    unreached = [dict(u) for u in topo.unreached]
    unread: set = set()  # switches whose unicast tables did not answer
    mft_unread: set = set()

    def failed(what: str, errors: list[tuple[int, str]], into: set):
        for g, err in errors:
            n = topo.nodes[g]
            into.add(g)
            unreached.append({"where": f"{n.description} ({what})", "path": list(n.path), "node": n.description,
                              "guid": f"0x{g:016x}", "port": None, "error": err})

    switches = [n for n in topo.switches() if n.switch_info is not None]
    unread.update(n.guid for n in topo.switches() if n.switch_info is None)  # discovery listed it
    lfts, errors = _read_lfts(transport, switches)
    failed("LFT", errors, unread)
    rfts, errors = _read_rfts(transport, switches)
    failed("RFT", errors, unread)
    mfts: dict[int, dict[int, frozenset]] | None = None
    if mcast:
        mfts, errors = _read_mfts(transport, switches)
        failed("MFT", errors, mft_unread)
    snap = snapshot_of(topo, lfts, rfts, mfts, unread=unread, mft_unread=mft_unread, unreached=unreached)
    if links:
        _read_link_tables(transport, topo, snap)
    snap.smps, snap.seconds = transport.stats.sent - sent0, time.monotonic() - t0
    return snap


def snapshot_of(topo, lfts: dict, rfts: dict, mfts: dict | None, *, unread=frozenset(), mft_unread=frozenset(),
                unreached=None) -> Snapshot:
    """A Snapshot of a discovered topology (PortInfo and SwitchInfo as its nodes hold
    them) and table contents: LFT blocks {(GUID, block): bytes}, valid RFT entries {GUID:
    ((base, lmc, port), ...)} (`rft_entries`), MFT groups {GUID: {MLID: ports}}
    (`mft_groups`; None: multicast is not checked). `collect` builds one from what it
    read; a sweep from what its plan would leave (`smagent.plancheck`)."""
    states = {}
    for n in topo.switches():
        states[n.guid] = _switch_state(n, lfts, rfts.get(n.guid), (mfts or {}).get(n.guid, {}))
        states[n.guid].read = n.guid not in unread
        states[n.guid].mft_read = n.guid not in mft_unread and n.guid not in unread
    ca_ports = {}
    for n in topo.cas():
        for p in n.lid_ports():
            pi = n.ports.get(p)
            if pi is not None:
                ca_ports[(n.guid, p)] = CaPortState(n.guid, p, n.description, pi.lid, pi.lmc,
                                                    pi.port_state == PortState.ACTIVE)
    return Snapshot(states, ca_ports, dict(topo.links), mcast_read=mfts is not None,
                    unreached=list(unreached or []),
                    port_info={k: topo.nodes[k[0]].ports[k[1]] for k in topo.links if k[1] in topo.nodes[k[0]].ports})


def _read_link_tables(transport: Transport, topo, snap: Snapshot) -> None:
    """The SL2VL tables of every hop data takes (`data_hops`) and P_Key block 0 of every
    end port, one batch: one SMP per switch (input, output) pair on a route, per CA port
    that sends, per end port. A port without IsSLMappingSupported (switches: port 0's
    bit) or without a P_Key table is not asked. A recording made without these reads
    (replay) leaves the checks out (`tables_read` False)."""
    from smagent.links import CAP_SL_MAPPING, Want
    from smagent.transport.replay import ReplayMiss
    sw_hops, ca_hops = data_hops(snap)
    wants, keys = [], []

    def want(kind, n, path, mod, key):
        wants.append(Want(kind, n.guid, n.description, path, mod, None))
        keys.append(key)

    for g, inp, out in sorted(sw_hops):
        n = topo.nodes[g]
        if 0 in n.ports and n.ports[0].capability_mask & CAP_SL_MAPPING:
            want("sl2vl", n, n.path, fw.sl2vl_modifier(inp, out), (g, inp, out))
    for g, p in sorted(ca_hops):
        n = topo.nodes[g]
        if n.ports[p].capability_mask & CAP_SL_MAPPING:
            want("sl2vl", n, n.port_paths[p], 0, (g, 0, p))
    for g, p in sorted(k for k in snap.ca_ports if k in snap.links):
        if topo.nodes[g].node_info.partition_cap:
            want("pkeys", topo.nodes[g], topo.nodes[g].port_paths[p], fw.pkey_modifier(0), (g, p))
    for g, s in sorted(snap.switches.items()):
        if s.lid and topo.nodes[g].node_info.partition_cap:
            want("pkeys", topo.nodes[g], topo.nodes[g].path, fw.pkey_modifier(0, 0), (g, 0))
    try:
        replies = transport.execute([w.get() for w in wants])
    except ReplayMiss:
        return
    for w, key, rep in zip(wants, keys, replies):
        if not rep.ok:
            n = topo.nodes[w.guid]
            snap.unreached.append({"where": f"{n.description} ({rep.request.describe()})", "path": list(w.path),
                                   "node": n.description, "guid": f"0x{w.guid:016x}", "port": None,
                                   "error": rep.error})
        elif w.kind == "sl2vl":
            snap.sl2vl[key] = tuple(rep.value(SLtoVLMappingTable).sl_to_vl)
        else:
            snap.pkeys[key] = tuple(rep.value(P_KeyTable).p_keys)
    snap.tables_read = True


def _first_errors(errors: list[str], keys: list) -> list[tuple[int, str]]:
    """One error per switch: (GUID, its first error and how many more); `keys` are the
    switches of the failed reads, in the order of `errors`."""
    return [(g, es[0] + (f" (+{len(es) - 1} more)" if len(es) > 1 else ""))
            for g, es in per_switch(errors, keys).items()]


def _read_lfts(transport: Transport, switches) -> tuple[dict, list]:
    wanted = [(n.guid, n.path, b) for n in switches for b in linear.lft_blocks_to_read(n.switch_info)]
    got, errors = linear.read_lft_blocks(transport, wanted)
    return got, _first_errors(errors, [g for g, _p, b in wanted if (g, b) not in got])


def _read_rfts(transport: Transport, switches) -> tuple[dict, list]:
    """The whole RFT of every switch that forwards by one (LinearFDBCap 0, RandomFDBCap >
    0): a stale valid entry anywhere in it still matches. {GUID: [(base, lmc, port)]}."""
    rft = [n for n in switches if not n.switch_info.linear_fdb_cap and n.switch_info.random_fdb_cap]
    wanted = [(n.guid, n.path, b) for n in rft for b in range(_rft_blocks(n.switch_info))]
    got, errors = read_rft_blocks(transport, wanted)
    failed = _first_errors(errors, [g for g, _p, b in wanted if (g, b) not in got])
    out = {}
    for n in rft:
        nb = _rft_blocks(n.switch_info)
        if any((n.guid, b) not in got for b in range(nb)):
            continue
        out[n.guid] = rft_entries([e for b in range(nb) for e in got[(n.guid, b)]], n.switch_info.random_fdb_cap)
    return out, failed


def rft_entries(packed: list[int], cap: int) -> tuple:
    """A switch's RFT as `SwitchState.rft` holds it: the valid entries of its packed
    table (RandomFDBCap of them), in table order, as (base, lmc, port)."""
    return tuple(e for e in map(fw.rft_unpack, packed[:cap]) if e is not None)


def _rft_blocks(si) -> int:
    return fw.rft_block(si.random_fdb_cap - 1)[0] + 1  # the block of the last entry, and those before


def _switch_state(n, lfts: dict, rft, mft: dict) -> SwitchState:
    si = n.switch_info
    p0 = n.ports.get(0)
    active = frozenset(p for p, pi in n.ports.items() if p and pi.port_state == PortState.ACTIVE)
    if si is None:
        return SwitchState(n.guid, n.description, n.num_ports, p0.lid if p0 else 0, b"", 0, 0, active)
    lft = b"".join(bytes(lfts.get((n.guid, b), [fw.LFT_NO_PORT] * fw.LFT_BLOCK_SIZE))
                   for b in linear.lft_blocks_to_read(si))
    lmc = p0.lmc if p0 is not None and si.enhanced_port0 else 0
    return SwitchState(n.guid, n.description, n.num_ports, p0.lid if p0 else 0, lft, si.linear_fdb_top,
                       si.linear_fdb_cap, active, mft, rft, si.default_port, lmc)


def _read_mfts(transport: Transport, switches) -> tuple[dict, list]:
    wanted, ports = [], {}
    for n in switches:
        si = n.switch_info
        ports[n.guid] = n.num_ports
        if si.multicast_fdb_cap:
            wanted += [(n.guid, n.path, b, pos) for b in multicast.mft_blocks_to_read(si.multicast_fdb_cap, si.multicast_fdb_top)
                       for pos in range(fw.mft_positions_for(n.num_ports))]
    got, errors = multicast.read_mft_units(transport, wanted)
    failed = _first_errors(errors, [g for g, _p, b, pos in wanted if (g, b, pos) not in got])
    return mft_groups(got, ports), failed


def mft_groups(units: dict, num_ports: dict) -> dict[int, dict[int, frozenset]]:
    """MFT units {(GUID, block, position): 32 PortMasks} as `SwitchState.mft` holds them:
    {GUID: {MLID: ports}} (ports a switch does not have are left out)."""
    out: dict[int, dict[int, set]] = {}
    for (g, b, pos), masks in units.items():
        for i, mask in enumerate(masks):
            if mask:
                mp = {p for p in fw.mask_ports(mask, pos) if p <= num_ports[g]}
                out.setdefault(g, {}).setdefault(fw.mft_mlid(b, i), set()).update(mp)
    return {g: {m: frozenset(p) for m, p in d.items()} for g, d in out.items()}


def snapshot_from_routes(fabric, routes: dict, *, top: int | None = None, lmc: int = 0) -> Snapshot:
    """A Snapshot of a `smagent.fabric.Fabric` whose nodes carry GUIDs and LIDs, with the
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


def verify(transport: Transport, *, mcast: bool = True, examples: int = EXAMPLES, balance: bool = True) -> Report:
    """Read the tables (`collect`), check them (`check`) and, with ``balance``, add the
    link-load figures of `smagent.balance`."""
    snap = collect(transport, mcast=mcast)
    report = check(snap, examples)
    if balance:
        from smagent import balance as balancemod
        report.balance = balancemod.compute(snap)
    return report
