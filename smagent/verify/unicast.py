"""Unicast routes: who owns which LID, where every source enters, the decision of one
switch for one DLID (`_step`; what an LFT entry means is `model.walk.lft_exit`'s rule),
the walk of every DLID from every place (in bulk through `smagent.verify.lftwalk` on large
LFT fabrics), the defects it finds, and the table entries no route may hold
(`black_hole_entries`, switches' own LIDs not at port 0)."""
from __future__ import annotations

import dataclasses
from typing import Any

from mad import forwarding as fw
from smagent.model import walk
from smagent.verify.model import CAUSES, Snapshot, SwitchState, _Defects, _Net


# switches x DLIDs from which LFT-only fabrics are walked in bulk (`_failing`): below it
# the DLID-by-DLID walk is done before numpy is imported (648 hosts: 54 x 702 = 37,908)
BULK_MIN = 100_000


DELIVERED = 0


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
    (`smagent.sweep.plancheck`) refuses them absolutely: a fresh fabric has no tables to
    compare with."""
    net = _Net.of(snap)
    out = []
    for i, s in enumerate(net.st):
        if not s.read:
            continue
        holes = [_hole(net, i, port) for port in range(s.num_ports + 1)]
        holes += ["no_such_port"] * (fw.LFT_NO_PORT - len(holes)) + [None if s.cap else "no_such_port"]
        if s.cap:
            # the entries are scanned at C speed (bytes.translate, find): an 11,664-host
            # fabric has 1,620 switches x 13,284 LIDs of them
            marks = s.lft[:min(s.top, s.cap - 1, len(s.lft) - 1) + 1].translate(bytes(map(bool, holes)))
            lid = marks.find(1, 1)
            while lid != -1:
                out.append({"switch": net.names[i], "lid": lid, "port": s.lft[lid], "cause": holes[s.lft[lid]]})
                lid = marks.find(1, lid + 1)
            continue
        for base, lmc, port in s.rft or ():
            if holes[port]:
                out += [{"switch": net.names[i], "lid": lid, "port": port, "cause": holes[port]}
                        for lid in fw.rft_lid_range(base, lmc)]
    return out


def _hole(net: _Net, i: int, port: int) -> str | None:
    """Why an entry naming ``port`` (0 .. the switch's ports) at switch i is a black hole,
    or None."""
    if port == 0:
        return None
    x = net.exits[i][port]
    return x if x in ("unlinked_port", "port_not_active") else None


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
        e = walk.lft_exit(s.lft, dlid, s.num_ports, s.top, s.cap)  # the rule every LFT walker follows
        if e.__class__ is str:
            return _lft_stop(net, i, dlid, e)
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


def _lft_stop(net: _Net, i: int, dlid: int, why: str):
    """`_step`'s stop for what `model.walk.lft_exit` says of switch i's LFT entry for ``dlid``."""
    s = net.st[i]
    if why == walk.PORT_ZERO:
        return ("misdelivered", (i, 0, f"{net.names[i]} (port 0)"))
    if why == walk.ABOVE_TOP:
        return (why, s.top)
    if why == walk.ABOVE_CAP:
        return (why, s.cap)
    return (why, s.lft[dlid] if why == walk.NO_SUCH_PORT else fw.LFT_NO_PORT)


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
    at once (`smagent.verify.lftwalk`, the same outcomes) when it is large enough to pay for
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
        from smagent.verify import lftwalk  # numpy: imported where it pays (its import alone is ~0.1 s)
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
