"""Credit loops: a cycle in the channel dependency graph the unicast walk built from the
routes of data traffic."""
from __future__ import annotations

from smagent.verify.model import _Defects, _Net


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
