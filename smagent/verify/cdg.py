"""Credit loops: a cycle in the channel dependency graph the unicast walk built from the
routes of data traffic, counted per virtual lane: a cycle whose channels carry the
packets on different VLs (the SL of each path, `Snapshot.path_sl`, through the SL2VL
table of each hop, `Snapshot.sl2vl`) does not deadlock, because each VL has its own
buffers. The per-VL graph is built only when the plain one has a cycle."""
from __future__ import annotations

from smagent.model import walk
from smagent.routing.cycles import find_cycle
from smagent.verify.model import _Defects, _Net

__all__ = ["find_cycle", "vl_deps"]


def _check_cdg(net: _Net, deps: dict, D: _Defects) -> None:
    cycle = find_cycle(deps)
    if not cycle:
        return
    vls = None
    if net.snap.path_sl is not None or net.snap.sl2vl:
        vl_graph = vl_deps(net)
        vl_cycle = find_cycle(vl_graph)
        if not vl_cycle:
            return  # the VLs break every cycle of the plain graph
        deps, cycle = vl_graph, vl_cycle
        vls = [c & 0xF for c in cycle]
    hops = []
    for k, c in enumerate(cycle):
        nxt = cycle[(k + 1) % len(cycle)]
        ch = c >> 4 if vls is not None else c
        hop = {"switch": net.names[ch >> 8], "port": ch & 0xFF, "dlid": deps[c][nxt]}
        if vls is not None:
            hop["vl"] = vls[k]
        hops.append(hop)
    on = f" on VL{vls[0]}" if vls is not None else ""
    text = " -> ".join(f"{h['switch']}[{h['port']}]" for h in hops) + f" -> {hops[0]['switch']}[{hops[0]['port']}]"
    D.add("cdg_cycle", {"channels": len(cycle), "cycle": hops},
          f"channel dependency cycle of {len(cycle)} channels{on}: {text} (dependencies from routes "
          f"to LIDs {', '.join(str(h['dlid']) for h in hops)})", cycle=hops)


def _exit(net: _Net, i: int, dlid: int, in_port: int) -> int | None:
    """The port switch i sends ``dlid`` out of (packet entered on ``in_port``), None when
    it stops there (delivered to the switch, discarded)."""
    s = net.st[i]
    if dlid in s.lid_range() or not s.read:
        return None
    rft = net.rft_maps[i]
    if rft is not None:
        p = rft.get(dlid)
        if p is None:
            return None if in_port == s.default_port else s.default_port
        return p
    if not s.cap:
        return None
    p = walk.lft_exit(s.lft, dlid, s.num_ports, s.top, s.cap)
    return p if p.__class__ is int else None


def vl_deps(net: _Net) -> dict[int, dict[int, int]]:
    """The dependency graph of (channel, VL) nodes, ``(switch index << 8 | port) << 4 | VL``,
    from every CA port's traffic to every LID: {node: {node: first DLID}}. A path keeps its
    SL (`Snapshot.path_sl` by the switch it enters, else 0); each hop maps it to a VL by
    the hop's SL2VL table, or to VL = SL where none was read. A walk stops where an
    earlier source's walk to the same DLID already went on with the same SL."""
    snap = net.snap
    sls, tables = snap.path_sl, snap.sl2vl
    entries = []  # (switch index, in port, switch GUID) where CA ports send
    for key, c in sorted(snap.ca_ports.items()):
        peer = snap.links.get(key)
        if c.active and peer is not None and peer[0] in net.idx:
            entries.append((net.idx[peer[0]], peer[1], peer[0]))
    deps: dict[int, dict[int, int]] = {}
    limit = len(net.st) + 1
    for dlid in sorted(net.owner):
        seen: set[tuple[int, int, int]] = set()
        for i, in_port, g in entries:
            row = sls.get(g) if sls else None
            sl = row[dlid] if row is not None and dlid < len(row) else 0
            prev = None
            for _ in range(limit):
                out = _exit(net, i, dlid, in_port)
                ex = net.exits[i].get(out) if out is not None else None
                if not isinstance(ex, tuple) or ex[0] != "sw":
                    break
                table = tables.get((net.st[i].guid, in_port, out))
                vl = table[sl] if table is not None else sl
                node = ((i << 8 | out) << 4) | (vl & 0xF)
                if prev is not None:
                    deps.setdefault(prev, {}).setdefault(node, dlid)
                state = (i, in_port, sl)
                if state in seen:
                    break
                seen.add(state)
                prev, i, in_port = node, ex[1], ex[2]
    return deps
