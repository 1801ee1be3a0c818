"""How evenly routes spread over the links: balance figures from a `verify.Snapshot`.

Pure (no I/O), and blind to who computed the tables: it reads the LFTs the snapshot
holds, so it measures ours and another SM's alike.

What is counted: every (source CA port, destination CA LID) pair whose packet is
delivered (data traffic; switch LIDs receive only management traffic) adds one route to
every directed switch-to-switch link it crosses, the link named by the sending switch
and port. Per link the number of routes; overall the maximum and the mean over all such
links (idle ones included). When the switch graph is a fat tree (`routing.ftree.
tree_levels`: leaves level 1, every link between adjacent levels), the same per group of
links between two levels, one direction ("1->2" up, "2->1" down), with the *ideal*: the
routes that group carries divided by its links, the load every link would have if they
were spread perfectly (shortest up*/down* routes cross the same levels whatever the
engine, so the total per group is fixed). ``worst``: the link loaded most above the ideal
of its group, with that ratio (`verify --max-imbalance` makes a ratio above a limit a
defect; the sweep names it). Also the hottest links by name, per group a
histogram (load -> links), and, so that a saved `verify --json` draws the whole fabric
(`smagent report --from-json`), every switch (``switches``: GUID, name, CA ports cabled to
it) and every directed switch-to-switch link (``link_loads``: from GUID, port, to GUID,
port, routes, the ideal of its group).

Speed: a route depends only on (switch, DLID), so the loads come from per-(switch, DLID)
arrays, vectorised with numpy over DLIDs in chunks: flows start as the number of CA
sources at each switch, and hop by hop move to the next switch, adding to the link they
cross. Only (switch, DLID) that deliver are followed (undelivered routes are verify's
defects, not load).
"""
from __future__ import annotations

import numpy as np

from mad import forwarding as fw

HOTTEST = 10
ROWS = ("switches", "link_loads")  # the per-switch and per-link lists, one entry per line in JSON
# (switch, DLID) cells worked out at once: `_chunk` holds about ten arrays of that many
# 8-byte entries, so DLIDs go in chunks of CELLS // switches (2,048 DLIDs a chunk at any
# size was 60 MiB at 500 switches, 210 MiB at 1,620: the plan check's peak)
CELLS = 1 << 18


def compute(snap, hottest: int = HOTTEST) -> dict:
    """Balance figures (a JSON-ready dict, see the module docstring) of ``snap``."""
    sws = sorted(snap.switches)
    S = len(sws)
    idx = {g: i for i, g in enumerate(sws)}
    st = [snap.switches[g] for g in sws]
    # where each switch port leads: next switch (exit_sw) or a CA port (exit_ca)
    exit_sw = np.full((max(S, 1), 256), -1, np.int32)
    exit_ca = np.full((max(S, 1), 256), -1, np.int32)
    ca_keys = sorted(k for k, c in snap.ca_ports.items() if k in snap.links and c.active and c.lid)
    ca_index = {k: n for n, k in enumerate(ca_keys)}
    for i, s in enumerate(st):
        for p in s.active:
            peer = snap.links.get((s.guid, p))
            if peer is None or p > 255:
                continue
            if peer[0] in idx and peer[1] in snap.switches[peer[0]].active:
                exit_sw[i, p] = idx[peer[0]]
            elif peer in ca_index:
                exit_ca[i, p] = ca_index[peer]
    sources = np.zeros(max(S, 1), np.int64)
    at = np.full(len(ca_keys) + 1, -1, np.int32)  # the switch each CA port hangs off
    dlids, owner = [], []
    for k in ca_keys:
        c = snap.ca_ports[k]
        sw = snap.links[k][0]
        if sw in idx:
            sources[idx[sw]] += 1
            at[ca_index[k]] = idx[sw]
        for lid in range(c.lid, c.lid + (1 << c.lmc)):
            dlids.append(lid)
            owner.append(ca_index[k])
    load = np.zeros(max(S, 1) * 256, np.int64)
    pairs = 0
    step = max(1, CELLS // max(S, 1))
    for a in range(0, len(dlids), step):
        own = np.array(owner[a:a + step], np.int32)
        pairs += _chunk(st, exit_sw, exit_ca, sources, np.array(dlids[a:a + step], np.int64), own, at[own], load)
    links = [(i, p, int(exit_sw[i, p]), snap.links[(st[i].guid, p)][1])
             for i in range(S) for p in range(256) if exit_sw[i, p] >= 0]
    hosts = [0] * S  # CA ports cabled to each switch
    for k in snap.ca_ports:
        peer = snap.links.get(k)
        if peer is not None and peer[0] in idx:
            hosts[idx[peer[0]]] += 1
    per = np.array([load[i * 256 + p] for i, p, _j, _q in links], np.int64)
    return _figures([s.guid for s in st], [s.name or _hex(s.guid) for s in st], hosts, links, per, pairs, hottest)


def from_counters(topo, sent: dict, hottest: int = HOTTEST) -> dict:
    """The same figures with each directed switch-to-switch link's load taken from its
    transmitting port's counter (``sent``: (switch GUID, port) -> bytes, e.g. PortXmitData
    x 4 or its delta over an interval) instead of routes; ``unit`` "bytes", ``pairs`` 0.
    ``topo``: a discovered `Topology`. A link whose port was not read counts 0."""
    sws = sorted(n.guid for n in topo.switches())
    idx = {g: i for i, g in enumerate(sws)}
    hosts = [0] * len(sws)
    links = []
    for (g, p), (g2, q) in sorted(topo.links.items()):
        if g in idx and g2 in idx:
            links.append((idx[g], p, idx[g2], q))
        elif g2 in idx:
            hosts[idx[g2]] += 1
    per = np.array([sent.get((sws[i], p), 0) for i, p, _j, _q in links], np.int64)
    names = [topo.nodes[g].description or _hex(g) for g in sws]
    out = _figures(sws, names, hosts, links, per, 0, hottest)
    out["unit"] = "bytes"
    return out


def _chunk(st, exit_sw, exit_ca, sources, dl, own, own_at, load) -> int:
    """Add the routes to the DLIDs ``dl`` (owned by CA ports ``own``, hanging off
    switches ``own_at``) to ``load``
    (indexed switch * 256 + port); returns the (source, DLID) pairs delivered."""
    S, n = len(st), len(dl)
    P = np.full((S, n), fw.LFT_NO_PORT, np.int64)
    for i, s in enumerate(st):
        if not s.cap:
            continue
        lft = np.frombuffer(s.lft, np.uint8)
        ok = (dl <= s.top) & (dl < s.cap) & (dl < len(lft))
        P[i, ok] = lft[dl[ok]]
    rows = np.arange(S)[:, None]
    NX = exit_sw[rows, P]
    done = exit_ca[rows, P] == own[None, :]  # delivered here
    cols = np.arange(n)[None, :]
    fwd = NX >= 0
    NXc = np.where(fwd, NX, 0)
    good = done.copy()
    while True:  # good: the route from here is delivered (a loop never becomes good)
        nxt = good | (fwd & good[NXc, cols])
        if (nxt == good).all():
            break
        good = nxt
    flow = np.where(good, sources[:S, None], 0)
    # pairs: every CA source at a switch, minus the owner sending to itself
    mine = own_at >= 0
    delivered = int(flow.sum()) - int(good[own_at[mine], np.flatnonzero(mine)].sum())
    flow = np.where(fwd & good, flow, 0)
    keys = (rows * 256 + P)
    while flow.any():
        m = flow > 0
        load += np.bincount(keys[m], weights=flow[m], minlength=len(load)).astype(np.int64)
        arrive = np.bincount((NX[m] * n + np.broadcast_to(cols, flow.shape)[m]), weights=flow[m],
                             minlength=S * n).reshape(S, n).astype(np.int64)
        flow = np.where(fwd & ~done, arrive, 0)
    return delivered


def _figures(guids, names, hosts, links, per, pairs, hottest) -> dict:
    """The figures of directed links ``links`` ((from switch, port, to switch, its port),
    switches by index into ``guids``/``names``/``hosts``) loaded ``per``."""
    from smagent.routing.ftree import NotFatTree, tree_levels
    S = len(guids)
    total = int(per.sum())
    out = {"pairs": pairs, "routes": total, "links": len(links),
           "max": int(per.max()) if len(links) else 0,
           "mean": round(total / len(links), 2) if links else 0.0}
    nb: list[set] = [set() for _ in range(S)]
    for i, _p, j, _q in links:
        nb[i].add(j)
    nbrs = [sorted(x) for x in nb]
    leaves = [h > 0 for h in hosts]
    try:
        level = tree_levels(nbrs, leaves, names.__getitem__) if S else None
    except NotFatTree as e:
        level, out["levels_note"] = None, str(e)
    groups: dict[tuple, list] = {}
    for n, (i, _p, j, _q) in enumerate(links):
        key = (level[i], level[j]) if level else ("all", "all")
        groups.setdefault(key, []).append(n)
    out["levels"] = []
    for (a, b), members in _sorted_groups(groups):
        v = per[members]
        vals, counts = np.unique(v, return_counts=True)
        out["levels"].append({
            "name": f"{a}->{b} {'up' if a < b else 'down'}" if level else "all links",
            "from": a, "to": b, "links": len(members), "routes": int(v.sum()), "max": int(v.max()),
            "ideal": round(float(v.sum()) / len(members), 2),
            "histogram": [[int(x), int(c)] for x, c in zip(vals, counts)]})
    out["ideal"] = max((lv["ideal"] for lv in out["levels"]), default=0.0)
    order = np.argsort(-per, kind="stable")[:hottest]
    hot = []
    for n in order:
        i, p, j, q = links[n]
        hot.append({"link": f"{names[i]}[{p}] -> {names[j]}[{q}]", "routes": int(per[n]),
                    "level": f"{level[i]}->{level[j]}" if level else None})
    out["hottest"] = hot
    ideal_of = {n: lv["ideal"] for lv, (_k, members) in zip(out["levels"], _sorted_groups(groups)) for n in members}
    out["worst"] = _worst(links, names, per, ideal_of, level)
    out["switches"] = [[_hex(g), names[i], hosts[i]] for i, g in enumerate(guids)]
    out["link_loads"] = [[_hex(guids[i]), p, _hex(guids[j]), q, int(per[n]), ideal_of[n]]
                         for n, (i, p, j, q) in enumerate(links)]
    return out


def _worst(links, names, per, ideal_of: dict, level) -> dict | None:
    """The link loaded most above the ideal of its group: its name, routes, that ideal and
    the ratio (what `verify --max-imbalance` and the sweep summary name); None: no link
    carries a route."""
    best = None
    for n, (i, p, j, q) in enumerate(links):
        ideal = ideal_of[n]
        if ideal > 0 and (best is None or per[n] / ideal > best[0]):
            best = (per[n] / ideal, n)
    if best is None:
        return None
    ratio, n = best
    i, p, j, q = links[n]
    return {"link": f"{names[i]}[{p}] -> {names[j]}[{q}]", "routes": int(per[n]), "ideal": ideal_of[n],
            "ratio": round(float(ratio), 2), "level": f"{level[i]}->{level[j]}" if level else None}


def worst_line(b: dict) -> str | None:
    """The hottest link against its ideal, as one line (None: no routes)."""
    w = b.get("worst")
    if not w:
        return None
    return f"hottest link {w['link']}: {w['routes']} routes, {w['ratio']:.2f} times its ideal {w['ideal']:g}"


def imbalance_defect(b: dict, limit: float) -> tuple[dict, str] | None:
    """``verify --max-imbalance LIMIT``: the worst link as a defect example and its text
    when its ratio is above LIMIT, else None."""
    w = b.get("worst")
    if not w or w["ratio"] <= limit:
        return None
    return {**w, "limit": limit}, f"{worst_line(b)}, above --max-imbalance {limit:g}"


def _hex(guid: int) -> str:
    return f"0x{guid:016x}"


def _sorted_groups(groups: dict) -> list:
    """Link groups in the order the figures list them: up before down, lower levels first."""
    return sorted(groups.items(), key=lambda kv: (str(min(kv[0])), kv[0][0] > kv[0][1]))
