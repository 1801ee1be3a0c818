"""One cycle of a directed graph: what the credit-loop check (`smagent.verify.cdg`) and the
dfsssp engine's layering (`smagent.routing.dfsssp`) look for in a channel dependency
graph. A leaf: imports nothing of the agent."""
from __future__ import annotations


def find_cycle(adj) -> list | None:
    """One cycle of a directed graph ({node: iterable of successors}; iterative DFS,
    white/grey/black, nodes and successors in sorted order), as its nodes in order, or None."""
    GREY, BLACK = 1, 2
    color: dict = {}
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
