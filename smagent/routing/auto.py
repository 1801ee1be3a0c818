"""``auto``: the default engine. On every sweep, the best deadlock-free engine for the
fabric as it is: ftree where the fabric is a complete fat tree (ideal balance: every
switch of a level with the same hosts, uplinks and downlinks; `irregular`), else
dfsssp within the VLs every port runs (``RoutingInput.data_vls``: the sweep lowers it to
what the SL2VL tables it writes can carry, so a layered route is never refused later),
else updn (deadlock-free on any connected fabric). Every one of them is free of credit
loops, so the sweep never refuses auto's routes as minhop's are refused on a ring.

The choice depends only on the fabric (the same fabric, the same choice), except in a
running SM: an `AutoMemory` passed from sweep to sweep keeps the engine chosen before
for as long as that engine still routes the fabric deadlock-free, so a flapping link
does not flip a fat tree between ftree and dfsssp (and re-route every switch) on each
cut and return. The memory moves to another engine only when its engine fails; a
restart chooses afresh. The choice and its reason
are ``Routes.chosen`` (engine, reason): the sweep puts them in its summary, its
``--json``, the log and the daemon's status."""
from __future__ import annotations

import dataclasses
import logging

from smagent.routing.base import Routes, RoutingError, RoutingInput

log = logging.getLogger("smagent.routing")

ORDER = ("ftree", "dfsssp", "updn")  # best first


@dataclasses.dataclass
class AutoMemory:
    """What a running SM remembers between sweeps: the engine auto chose last, the
    routing of the last sweep that routed ({"engine", "reason"}, whatever the spec; the
    sweep sets it), which the daemon's status shows, and what the last routes were made
    on (a `smagent.routing.patch.Basis`, whatever the spec; None: they cannot be patched),
    which a repair that only lost links patches them against, and the patches to undo."""
    engine: str | None = None
    routing: dict[str, object] | None = None
    basis: object = None
    # the patches made since the routes were last made afresh, newest last, each put back
    # when what it lost comes back (`smagent.routing.patch.Undo`)
    undo: list = dataclasses.field(default_factory=list)


def irregular(rin: RoutingInput) -> str | None:
    """Why a fabric ftree accepts is not a *complete* fat tree (None: it is): switches of
    one level differ in uplinks or downlinks (a cable or a switch missing; hosts missing
    do not count: ftree balances what is there). ftree's balance is ideal only on a complete tree; on a damaged one dfsssp,
    balancing by the load each link really carries, cools the hottest link (a 3-level
    tree without a core and an aggregation switch: 172 routes against ftree's 240)."""
    from smagent.routing._core import Graph
    from smagent.routing.ftree import tree_levels
    G = Graph(rin)
    level = tree_levels(G.nbrs, [bool(G.ca_lids[x]) for x in range(G.S)], G.name)
    shapes: dict[int, dict[tuple[int, int], int]] = {}
    for x in range(G.S):
        up = sum(len(G.nbr_ports[x][y]) for y in G.nbrs[x] if level[y] > level[x])
        down = sum(len(G.nbr_ports[x][y]) for y in G.nbrs[x] if level[y] < level[x])
        shape = (up, down)
        shapes.setdefault(level[x], {}).setdefault(shape, x)
    for lv, seen in sorted(shapes.items()):
        if len(seen) > 1:
            (a, sa), (b, sb) = sorted(seen.items())[:2]
            return (f"an incomplete fat tree: level-{lv} switches differ ({G.name(sa)}: {a[0]} up, {a[1]} down; "
                    f"{G.name(sb)}: {b[0]} up, {b[1]} down)")
    return None


def _try(engine: str, rin: RoutingInput, kept: bool) -> tuple[Routes | None, str]:
    """Routes by ``engine`` and why it fits, or None and why it does not (a RoutingError
    other than "this engine cannot route this fabric" propagates). ``kept``: the engine
    a running SM chose before, which needs only to route the fabric deadlock-free."""
    if engine == "ftree":
        from smagent.routing.ftree import NotFatTree, route as ftree
        try:
            routes = ftree(rin)
        except NotFatTree as e:
            return None, str(e)
        damaged = None if kept else irregular(rin)
        if damaged:
            return None, f"{damaged}: its balance is not ideal there"
        return routes, "a complete fat tree: ftree routes it with every uplink evenly loaded"
    if engine == "dfsssp":
        from smagent.routing.dfsssp import TooFewVLs, route as dfsssp
        try:
            routes = dfsssp(rin)
        except TooFewVLs as e:
            return None, str(e)
        vls = rin.data_vls or 8
        if routes.needed == 1:
            return routes, "its shortest paths have no credit loop: dfsssp balances them by link load"
        return routes, (f"dfsssp breaks every credit loop in {routes.needed} layers, within the "
                        f"{vls} data VL{'s' if vls != 1 else ''} every port runs")
    from smagent.routing.updn import route as updn
    return updn(rin), "up*/down* is deadlock-free on any fabric"


def route(rin: RoutingInput, memory: AutoMemory | None = None) -> Routes:
    """Route with the first of ftree, dfsssp, updn that fits (the engine ``memory`` kept
    first, while it still fits); ``Routes.chosen`` is (engine, reason)."""
    kept = memory.engine if memory is not None and memory.engine in ORDER else None
    order = ((kept,) if kept else ()) + tuple(e for e in ORDER if e != kept)
    passed: list[str] = []
    for engine in order:
        routes, why = _try(engine, rin, engine == kept)
        if routes is None:
            passed.append(f"{engine}: {why}")
            continue
        if engine == kept and kept != ORDER[0]:
            why = f"kept from the previous sweep (still deadlock-free): {why}"
        elif passed:
            why = f"{why} ({'; '.join(passed)})"
        routes.chosen = (engine, why)  # the sweep reports it in its own field, not among the notes
        if memory is not None:
            if memory.engine not in (None, engine):
                log.warning("routing auto: %s -> %s: %s", memory.engine, engine, why)
            memory.engine = engine
        log.info("routing auto: %s: %s", engine, why)
        return routes
    raise RoutingError("routing auto: no engine routes this fabric")  # updn always does
