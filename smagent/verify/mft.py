"""Multicast: every member of every group (MLIDs with a port set on some switch) sending
must reach every other member exactly once through the MFTs."""
from __future__ import annotations

from smagent.verify.model import Snapshot, _Defects, _Net


def _check_mcast(net: _Net, D: _Defects, only=None) -> int:
    """Every group (``only``: those MLIDs) flooded from each member; the count of groups."""
    snap = net.snap
    mlids = sorted({m for s in snap.switches.values() for m, ports in s.mft.items() if ports
                    and (only is None or m in only)})
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


def group_defects(snap: Snapshot, mlids) -> tuple[list[dict], list[str]]:
    """The multicast defects of the groups ``mlids`` only, every one (not a few examples):
    what the plan check of `mft set` compares before and after (`smagent.sweep.plancheck`)."""
    D = _Defects(1 << 30)
    _check_mcast(_Net.of(snap), D, set(mlids))
    return D.d.get("mcast", {}).get("examples", []), D.texts.get("mcast", [])


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
