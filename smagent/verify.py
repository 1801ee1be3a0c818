"""Verify the forwarding tables a fabric actually holds: trace every source to every LID.

Two halves. `collect` reads what the switches hold (discovery, then every LFT block up
to LinearFDBTop and, optionally, the MFT) into a `Snapshot`; `check` is pure and runs
the seed's forwarding rules over it, so tests hand-build snapshots.

Forwarding rules (seed 000, IBA 18.2.4): a switch looks the DLID up in its LFT. It
discards when the DLID is above LinearFDBTop, at or above LinearFDBCap, or when the
entry is 255 or names a port the switch does not have. Port 0 delivers to the switch
itself (right only if the DLID is the switch's LID). Any other port sends the packet
over its link, which must exist and be ACTIVE at both ends (data needs ACTIVE ports);
a channel adapter port accepts DLIDs base .. base + 2^LMC - 1, anything else reaching
it is misdelivered.

Sources are every ACTIVE CA port with a LID and every switch (its port 0); destinations
are every LID assigned (all 2^LMC of a CA port). A packet's route depends only on the
switch it is at and its DLID, so outcomes are computed once per (switch, DLID) and
shared by every source entering there: O(switches x LIDs), not O(pairs x hops).

Defect classes (`Report.defects`), each with a count and examples:

``unreachable``    (source, DLID) pairs whose packets are not delivered, by cause
``dead_end``       where packets are discarded: switch, DLID, why (no route / above
                   LinearFDBTop / above LinearFDBCap / no such port / port unlinked /
                   port not ACTIVE / no LFT)
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
``mcast``          multicast groups (MLIDs with a port set on any switch): every member
                   (a CA port or switch port 0 the MFT entries point at) sending must
                   reach every other member exactly once: members missed, members
                   reached twice, loops in the tree, branches into unlinked or inactive
                   ports or into a switch without an entry for the group.
"""
from __future__ import annotations

import dataclasses
import time

from mad import forwarding as fw
from mad.attributes import PortState
from smagent.fdb import linear
from smagent.fdb import multicast as mfttab
from smagent.transport.base import Transport

EXAMPLES = 5

# why a packet stops (dead_end reasons), and the other terminal outcomes
REASONS = {
    "no_lft": "the switch has no LinearForwardingTable (LinearFDBCap 0)",
    "above_top": "DLID above LinearFDBTop",
    "above_cap": "DLID at or above LinearFDBCap",
    "no_route": "LFT entry 255 (no route)",
    "no_such_port": "LFT entry names a port the switch does not have",
    "unlinked_port": "LFT entry names a port with no link",
    "port_not_active": "LFT entry names a port whose link is not ACTIVE",
}


class VerifyError(RuntimeError):
    """The tables could not be read (a fabric failure, not a defect of the tables)."""


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


@dataclasses.dataclass
class CaPortState:
    guid: int  # node GUID
    port: int
    name: str
    lid: int
    lmc: int
    active: bool


@dataclasses.dataclass
class Snapshot:
    switches: dict  # guid -> SwitchState
    ca_ports: dict  # (guid, port) -> CaPortState
    links: dict  # (guid, port) -> (guid, port), both ways
    smps: int = 0
    seconds: float = 0.0
    mcast_read: bool = False


@dataclasses.dataclass
class Report:
    summary: dict
    defects: dict  # class -> {"count": n, "examples": [...], ...}

    @property
    def ok(self) -> bool:
        return not self.defects

    def as_json(self) -> dict:
        return {"ok": self.ok, "summary": self.summary, "defects": self.defects}


# ----------------------------------------------------------------------------- check
class _Defects:
    def __init__(self, examples: int):
        self.n = examples
        self.d: dict[str, dict] = {}

    def add(self, cls: str, example=None, count: int = 1, **extra):
        e = self.d.setdefault(cls, {"count": 0, "examples": []})
        e["count"] += count
        if example is not None and len(e["examples"]) < self.n:
            e["examples"].append(example)
        for k, v in extra.items():
            e[k] = v
        return e


def check(snap: Snapshot, examples: int = EXAMPLES) -> Report:
    t0 = time.monotonic()
    D = _Defects(examples)
    sws = sorted(snap.switches)
    S = len(sws)
    idx = {g: i for i, g in enumerate(sws)}
    st = [snap.switches[g] for g in sws]
    names = [s.name or f"0x{s.guid:016x}" for s in st]

    def port_name(key) -> str:
        g, p = key
        if g in snap.switches:
            return f"{snap.switches[g].name}[{p}]"
        c = snap.ca_ports.get(key)
        return f"{c.name}[{p}]" if c else f"0x{g:016x}[{p}]"

    # --- who owns which LID; sanity of ports
    owner: dict[int, tuple] = {}  # lid -> ("sw", i) | ("ca", key)
    for i, s in enumerate(st):
        if not s.lid:
            D.add("no_lid", f"switch {names[i]} has no LID")
            continue
        if s.lid in owner:
            D.add("duplicate_lid", f"LID {s.lid}: {names[i]} and {_owner_name(owner[s.lid], names, port_name)}")
        else:
            owner[s.lid] = ("sw", i)
    sources_at = [[] for _ in range(S)]  # CA ports entering at each switch
    for key in sorted(snap.ca_ports):
        c = snap.ca_ports[key]
        peer = snap.links.get(key)
        if peer is None:
            continue
        if not c.active:
            D.add("inactive_port", f"{port_name(key)} is linked but not ACTIVE")
        if not c.lid:
            D.add("no_lid", f"{port_name(key)} is linked but has no LID")
            continue
        for lid in range(c.lid, c.lid + (1 << c.lmc)):
            if lid in owner:
                D.add("duplicate_lid", f"LID {lid}: {port_name(key)} and {_owner_name(owner[lid], names, port_name)}")
            else:
                owner[lid] = ("ca", key)
        if c.active and peer[0] in idx:
            sources_at[idx[peer[0]]].append(key)
    for i, s in enumerate(st):
        for p in range(1, s.num_ports + 1):
            peer = snap.links.get((s.guid, p))
            if peer is not None and p not in s.active and (peer[0] in snap.switches or
                                                           (peer in snap.ca_ports and snap.ca_ports[peer].active)):
                D.add("inactive_port", f"{names[i]}[{p}] is linked (to {port_name(peer)}) but not ACTIVE")
    dlids = sorted(owner)

    # --- per switch: where each port leads (a terminal code or a next switch)
    # step kinds: ("sw", j) forward to switch j; ("ca", key) deliver to CA port; "self"; or a reason
    exits: list[dict[int, object]] = []
    for i, s in enumerate(st):
        ex: dict[int, object] = {}
        for p in range(1, s.num_ports + 1):
            peer = snap.links.get((s.guid, p))
            if peer is None:
                ex[p] = "unlinked_port"
            elif p not in s.active:
                ex[p] = "port_not_active"
            elif peer[0] in idx:
                ex[p] = ("sw", idx[peer[0]]) if peer[1] in snap.switches[peer[0]].active else "port_not_active"
            elif peer in snap.ca_ports:
                ex[p] = ("ca", peer) if snap.ca_ports[peer].active else "port_not_active"
            else:
                ex[p] = "unlinked_port"  # a router or something discovery did not describe
        exits.append(ex)
    n_src = [len(sources_at[i]) + 1 for i in range(S)]
    has_ca = [bool(sources_at[i]) for i in range(S)]

    pairs_total = pairs_bad = 0
    by_reason: dict[str, int] = {}
    seen_dead: set = set()
    deps: dict[int, dict[int, int]] = {}  # channel -> {channel: first DLID}
    DELIVERED = 0
    for dlid in dlids:
        own = owner[dlid]
        # one step from every switch
        step: list = [None] * S
        for i, s in enumerate(st):
            if not s.cap:
                step[i] = ("no_lft", None)
            elif dlid > s.top:
                step[i] = ("above_top", s.top)
            elif dlid >= s.cap:
                step[i] = ("above_cap", s.cap)
            else:
                e = s.lft[dlid] if dlid < len(s.lft) else fw.LFT_NO_PORT
                if e == fw.LFT_NO_PORT:
                    step[i] = ("no_route", e)
                elif e > s.num_ports:
                    step[i] = ("no_such_port", e)
                elif e == 0:
                    step[i] = DELIVERED if own == ("sw", i) else ("misdelivered", (i, 0, f"{names[i]} (port 0)"))
                else:
                    x = exits[i][e]
                    if isinstance(x, str):
                        step[i] = (x, e)
                    elif x[0] == "sw":
                        step[i] = (e, x[1])  # (out port, next switch): forward
                    elif own == x:
                        step[i] = DELIVERED
                    else:
                        step[i] = ("misdelivered", (i, e, port_name(x[1])))
        # resolve every switch's outcome: follow forwards, memoised, loops detected
        out: list = [None] * S  # DELIVERED, or (kind, at switch, detail)
        for s0 in range(S):
            if out[s0] is not None:
                continue
            path, pos = [], {}
            cur = s0
            while True:
                if out[cur] is not None:
                    res = out[cur]
                    break
                if cur in pos:
                    cyc = path[pos[cur]:]
                    res = ("loop", cur, tuple(cyc))
                    break
                pos[cur] = len(path)
                path.append(cur)
                stp = step[cur]
                if stp is DELIVERED or stp == DELIVERED:
                    res = DELIVERED
                    path.pop()
                    out[cur] = DELIVERED
                    break
                if isinstance(stp[0], str):
                    res = (stp[0], cur, stp[1])
                    path.pop()
                    out[cur] = res
                    break
                cur = stp[1]
            for x in path:
                out[x] = res
        # pairs, defects
        if own[0] == "ca":
            own_entry = idx.get(snap.links[own[1]][0])
        else:
            own_entry = own[1]
        for i in range(S):
            n = n_src[i] - (1 if i == own_entry else 0)
            pairs_total += n
            res = out[i]
            if res == DELIVERED or n == 0:
                continue
            kind, at, detail = res
            pairs_bad += n
            by_reason[kind] = by_reason.get(kind, 0) + n
            if kind == "loop":
                where = ("loop", dlid, frozenset(detail))
            else:
                where = (kind, dlid, at)
            first = where not in seen_dead
            seen_dead.add(where)
            why = _why(kind, at, detail, names)
            dest = _owner_name(own, names, port_name)
            if first:
                if kind == "loop":
                    D.add("loop", f"LID {dlid} ({dest}): loops through "
                                  f"{' -> '.join(names[x] for x in detail)} -> {names[detail[0]]}")
                elif kind == "misdelivered":
                    D.add("misdelivered", f"LID {dlid} ({dest}): delivered to {detail[2]} by {names[at]}")
                else:
                    D.add("dead_end", f"{names[at]} LID {dlid} ({dest}): {why}")
            srcs = [port_name(k) for k in sources_at[i] if not (own[0] == "ca" and k == own[1])] + \
                   ([f"{names[i]} (port 0)"] if not (own[0] == "sw" and own[1] == i) else [])
            e = D.add("unreachable", None, count=n)
            for sname in srcs:
                if len(e["examples"]) >= D.n:
                    break
                e["examples"].append(f"{sname} -> LID {dlid} ({dest}): {why}")
        # channel dependencies of data traffic (routes from switches with CA sources)
        hot = [False] * S
        for i in range(S):
            if not has_ca[i]:
                continue
            cur = i
            while not hot[cur]:
                hot[cur] = True
                stp = step[cur]
                if stp == DELIVERED or isinstance(stp[0], str):
                    break
                cur = stp[1]
        for i in range(S):
            stp = step[i]
            if not hot[i] or stp == DELIVERED or isinstance(stp[0], str):
                continue
            p, j = stp
            nstp = step[j]
            if nstp == DELIVERED or isinstance(nstp[0], str):
                continue
            a, b = (i << 8) | p, (j << 8) | nstp[0]
            deps.setdefault(a, {}).setdefault(b, dlid)
    if pairs_bad:
        D.d["unreachable"]["by_cause"] = dict(sorted(by_reason.items(), key=lambda kv: -kv[1]))

    # --- CDG cycle
    cycle = find_cycle(deps)
    n_deps = sum(len(v) for v in deps.values())
    chans = set(deps)
    for v in deps.values():
        chans.update(v)
    if cycle:
        hops = []
        for k, c in enumerate(cycle):
            nxt = cycle[(k + 1) % len(cycle)]
            i, p = c >> 8, c & 0xFF
            hops.append({"switch": names[i], "port": p, "dlid": deps[c][nxt]})
        text = " -> ".join(f"{h['switch']}[{h['port']}]" for h in hops) + f" -> {hops[0]['switch']}[{hops[0]['port']}]"
        D.add("cdg_cycle", f"channel dependency cycle of {len(cycle)} channels: {text} (dependencies from routes "
                           f"to LIDs {', '.join(str(h['dlid']) for h in hops)})", cycle=hops)

    # --- multicast
    groups = 0
    if snap.mcast_read:
        groups = _check_mcast(snap, D, names, idx, port_name)

    summary = {
        "switches": S, "ca_ports": sum(1 for k in snap.ca_ports if k in snap.links),
        "sources": sum(n_src), "lids": len(dlids), "pairs": pairs_total, "pairs_unreachable": pairs_bad,
        "channels": len(chans), "dependencies": n_deps, "mcast_groups": groups if snap.mcast_read else None,
        "smps": snap.smps, "read_seconds": round(snap.seconds, 3), "check_seconds": round(time.monotonic() - t0, 3),
    }
    return Report(summary, D.d)


def _owner_name(own, names, port_name) -> str:
    return f"{names[own[1]]} port 0" if own[0] == "sw" else port_name(own[1])


def _why(kind, at, detail, names) -> str:
    if kind == "loop":
        return f"loops ({' -> '.join(names[x] for x in detail)} -> {names[detail[0]]})"
    if kind == "misdelivered":
        return f"{names[at]} delivers it to {detail[2]}"
    what = REASONS.get(kind, kind)
    if kind in ("above_top",):
        return f"dead end at {names[at]}: {what} ({detail})"
    if kind == "above_cap":
        return f"dead end at {names[at]}: {what} ({detail})"
    if kind == "no_lft":
        return f"dead end at {names[at]}: {what}"
    return f"dead end at {names[at]}: {what} (port {detail})"


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


def _check_mcast(snap: Snapshot, D: _Defects, names, idx, port_name) -> int:
    mlids = sorted({m for s in snap.switches.values() for m, ports in s.mft.items() if ports})
    for mlid in mlids:
        # members: what the entries point at (CA ports, switch port 0)
        members = []
        for g in sorted(snap.switches):
            s = snap.switches[g]
            ports = s.mft.get(mlid, ())
            if 0 in ports:
                members.append(("sw", g))
            for p in sorted(ports):
                if p == 0:
                    continue
                peer = snap.links.get((g, p))
                if peer is not None and peer in snap.ca_ports:
                    members.append(("ca", peer))
        label = f"MLID 0x{mlid:04x}"

        def mname(m):
            return f"{snap.switches[m[1]].name} port 0" if m[0] == "sw" else port_name(m[1])

        reported = set()
        for src in members:
            if src[0] == "sw":
                start = [(src[1], 0)]
            else:
                start = [snap.links[src[1]]]
            got: dict = {}
            visited = set()
            queue = list(start)
            while queue:
                g, inp = queue.pop()
                again = g in visited
                if again:  # a cycle: the switch delivers again (and would forward forever)
                    if ("loop", g) not in reported:
                        reported.add(("loop", g))
                        D.add("mcast", f"{label}: the tree has a cycle: {snap.switches[g].name} is reached twice "
                                       f"(from {mname(src)})", )
                visited.add(g)
                s = snap.switches[g]
                ports = s.mft.get(mlid)
                if not ports:
                    if again:
                        continue
                    if ("empty", g) not in reported:
                        reported.add(("empty", g))
                        D.add("mcast", f"{label}: {s.name} receives the group but has no MFT entry for it "
                                       f"(from {mname(src)})")
                    continue
                for p in sorted(ports):
                    if p == inp:
                        continue
                    if p == 0:
                        got[("sw", g)] = got.get(("sw", g), 0) + 1
                        continue
                    peer = snap.links.get((g, p))
                    ok = peer is not None and p in s.active
                    if ok and peer[0] in snap.switches:
                        ok = peer[1] in snap.switches[peer[0]].active
                    elif ok:
                        ok = peer in snap.ca_ports and snap.ca_ports[peer].active
                    if not ok:
                        if ("branch", g, p) not in reported:
                            reported.add(("branch", g, p))
                            D.add("mcast", f"{label}: {s.name} forwards to port {p}, which is "
                                           f"{'not linked' if peer is None else 'not ACTIVE'}")
                        continue
                    if peer[0] in snap.switches:
                        if not again:
                            queue.append(peer)
                    else:
                        got[("ca", peer)] = got.get(("ca", peer), 0) + 1
            for m in members:
                if m == src:
                    continue
                n = got.get(m, 0)
                if n != 1:
                    D.add("mcast", f"{label}: {mname(m)} receives {n} copies of what {mname(src)} sends")
    return len(mlids)


# ----------------------------------------------------------------------------- collect
def collect(transport: Transport, *, mcast: bool = True) -> Snapshot:
    """Discover the fabric and read every switch's tables (DR-routed Gets, batched)."""
    from smagent import discovery
    t0 = time.monotonic()
    sent0 = transport.stats.sent
    topo = discovery.discover(transport)
    if topo.unreachable:
        raise VerifyError("discovery did not reach everything, so the tables cannot be verified: "
                          + "; ".join(topo.unreachable[:5]))
    switches, ca_ports = {}, {}
    wanted = []
    for n in topo.switches():
        si = n.switch_info
        if si is None:
            raise VerifyError(f"{n.description}: no SwitchInfo")
        top = min(si.linear_fdb_top, fw.UNICAST_LID_MAX, max(si.linear_fdb_cap - 1, 0))
        if si.linear_fdb_cap:
            wanted += [(n.guid, n.path, b) for b in range(top // fw.LFT_BLOCK_SIZE + 1)]
    got, errors = linear.read_lft_blocks(transport, wanted)
    if errors:
        raise VerifyError("reading LFTs: " + "; ".join(errors[:5]) + (f" (+{len(errors) - 5} more)" if len(errors) > 5 else ""))
    mfts: dict[int, dict[int, frozenset]] = {}
    if mcast:
        mfts = _read_mfts(transport, topo)
    for n in topo.switches():
        si = n.switch_info
        nb = (min(si.linear_fdb_top, fw.UNICAST_LID_MAX) // fw.LFT_BLOCK_SIZE + 1) if si.linear_fdb_cap else 0
        lft = b"".join(got.get((n.guid, b), bytes([fw.LFT_NO_PORT]) * fw.LFT_BLOCK_SIZE) for b in range(nb))
        p0 = n.ports.get(0)
        active = frozenset(p for p, pi in n.ports.items() if p and pi.port_state == PortState.ACTIVE)
        switches[n.guid] = SwitchState(n.guid, n.description, n.num_ports, p0.lid if p0 else 0, lft,
                                       si.linear_fdb_top, si.linear_fdb_cap, active, mfts.get(n.guid, {}))
    for n in topo.cas():
        for p in n.lid_ports():
            pi = n.ports.get(p)
            if pi is None:
                continue
            ca_ports[(n.guid, p)] = CaPortState(n.guid, p, n.description, pi.lid, pi.lmc,
                                                pi.port_state == PortState.ACTIVE)
    return Snapshot(switches, ca_ports, dict(topo.links), transport.stats.sent - sent0,
                    time.monotonic() - t0, mcast_read=mcast)


def _read_mfts(transport: Transport, topo) -> dict[int, dict[int, frozenset]]:
    wanted = []
    for n in topo.switches():
        si = n.switch_info
        if not si.multicast_fdb_cap:
            continue
        positions = fw.mft_positions_for(n.num_ports)
        wanted += [(n.guid, n.path, b, pos) for b in mfttab.mft_blocks_to_read(si.multicast_fdb_cap, si.multicast_fdb_top)
                   for pos in range(positions)]
    got, errors = mfttab.read_mft_units(transport, wanted)
    if errors:
        raise VerifyError("reading MFTs: " + "; ".join(errors[:5]) + (f" (+{len(errors) - 5} more)" if len(errors) > 5 else ""))
    out: dict[int, dict[int, set]] = {}
    for (g, b, pos), masks in got.items():
        for i, mask in enumerate(masks):
            if mask:
                ports = {p for p in fw.mask_ports(mask, pos) if p <= topo.nodes[g].num_ports}
                out.setdefault(g, {}).setdefault(fw.mft_mlid(b, i), set()).update(ports)
    return {g: {m: frozenset(p) for m, p in d.items()} for g, d in out.items()}


def snapshot_from_routes(fabric, routes: dict, *, top: int | None = None, lmc: int = 0) -> Snapshot:
    """A Snapshot of a `smagent.fabric.Fabric` whose nodes carry GUIDs and LIDs, with the
    LFTs ``routes`` ({switch GUID: {LID: port}}) would give, every linked port ACTIVE:
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
            for lid, port in routes.get(n.guid, {}).items():
                if lid < len(lft):
                    lft[lid] = port
            active = frozenset(p for p, _peer in fabric.connected_ports(n))
            switches[n.guid] = SwitchState(n.guid, n.description, n.num_ports, n.lid(0) or 0, bytes(lft), top,
                                           fw.UNICAST_LID_MAX + 1, active)
        else:
            for p, _peer in fabric.connected_ports(n):
                ca_ports[(n.guid, p)] = CaPortState(n.guid, p, n.description, n.lid(p) or 0,
                                                    n.lmcs.get(p, lmc), True)
    return Snapshot(switches, ca_ports, links)


def verify(transport: Transport, *, mcast: bool = True, examples: int = EXAMPLES) -> Report:
    snap = collect(transport, mcast=mcast)
    return check(snap, examples)
