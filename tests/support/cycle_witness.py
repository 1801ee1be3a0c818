"""The tests' own cycle finder for dependency graphs (an independent witness: it shares
no code with `smagent.routing.cycles`, which dfsssp and verify use)."""


def graph_cycle(deps: dict) -> list | None:
    """A cycle of ``deps`` ({node: set of nodes it depends on}) as the nodes on the DFS
    stack when it closed, or None if the graph is acyclic. Iterative three-colour DFS."""
    state: dict = {}
    for start in deps:
        if state.get(start):
            continue
        state[start] = 1
        stack = [(start, iter(deps[start]))]
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return [n for n, _ in stack]
            elif not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, iter(deps.get(nxt, ()))))
    return None
