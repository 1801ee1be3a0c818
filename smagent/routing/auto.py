"""``auto``: the default engine. On every sweep, the best deadlock-free engine for the
fabric as it is: ftree where ftree accepts the fabric as a fat tree (ideal balance), else
dfsssp within the VLs every port runs (``RoutingInput.data_vls``: the sweep lowers it to
what the SL2VL tables it writes can carry, so a layered route is never refused later),
else updn (deadlock-free on any connected fabric). Every one of them is free of credit
loops, so the sweep never refuses auto's routes as minhop's are refused on a ring.

The choice depends only on the fabric (the same fabric, the same choice), except in a
running SM: an `AutoMemory` passed from sweep to sweep keeps the engine chosen before
for as long as that engine still routes the fabric deadlock-free, so a flapping link
does not flip a fat tree between ftree and dfsssp (and re-route every switch) on each
cut and return. The memory moves to another engine only when its engine fails; a
restart (or SIGHUP with another ``routing``) starts afresh. The choice and its reason
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
    """What a running SM remembers between sweeps: the engine auto chose last."""
    engine: str | None = None


def _try(engine: str, rin: RoutingInput) -> tuple[Routes | None, str]:
    """Routes by ``engine`` and why it fits, or None and why it does not (a RoutingError
    other than "this engine cannot route this fabric" propagates)."""
    if engine == "ftree":
        from smagent.routing.ftree import NotFatTree, route as ftree
        try:
            return ftree(rin), "a fat tree: ftree routes it with every uplink evenly loaded"
        except NotFatTree as e:
            return None, str(e)
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
        routes, why = _try(engine, rin)
        if routes is None:
            passed.append(f"{engine}: {why}")
            continue
        if engine == kept and kept != ORDER[0]:
            why = f"kept from the previous sweep (still deadlock-free): {why}"
        elif passed:
            why = f"{why} ({'; '.join(passed)})"
        routes.chosen = (engine, why)
        routes.notes.insert(0, f"routing auto: {engine}: {why}")
        if memory is not None:
            if memory.engine not in (None, engine):
                log.warning("routing auto: %s -> %s: %s", memory.engine, engine, why)
            memory.engine = engine
        log.info("routing auto: %s: %s", engine, why)
        return routes
    raise RoutingError("routing auto: no engine routes this fabric")  # updn always does
