"""Routing engines behind one small interface.

An engine takes a `RoutingInput` (the switch graph, where every LID lives) and returns,
for every switch GUID, a `RouteTable` (LID -> exit port, held as an LFT image). The sweep never special-cases an engine.

Engines are chosen by a *spec* string (the sweep's ``--routing`` value):

``minhop``
    shortest paths, balanced by routes per port (`smagent.routing.minhop`).
``updn`` / ``updn:GUID[,GUID...]``
    up*/down* from automatically chosen roots, or from the listed root switch GUIDs
    (`smagent.routing.updn`): deadlock-free on any topology.
``ftree`` / ``ftree:fallback=ENGINE``
    fat-tree routing: levels found from the topology, each destination down its one
    downward path, uplinks evenly loaded, deadlock-free (`smagent.routing.ftree`). On a
    fabric that is not a fat tree it raises RoutingError saying why, unless a fallback
    (minhop, updn or updn:GUID[,GUID...]) is named: then that engine routes, with a warning.
``file:PATH``
    the unicast tables of an ibroute / dump_lfts / ``smagent lft dump`` file, as
    OpenSM's ``-R file -U PATH`` loads them (`smagent.routing.file`).

An engine that cannot route raises `RoutingError` (a ValueError: the CLI reports it
with exit code 2). There is no silent fallback to another engine (OpenSM falls back
to minhop; we never do, except to the fallback an ftree spec names).
"""
from __future__ import annotations

import logging

from smagent.routing.base import (  # noqa: F401 - the package's public names
    ENGINES, NO_PORT, Routes, RouteTable, RoutingError, RoutingInput, parse_spec,
)

log = logging.getLogger("smagent.routing")


def _ftree(rin: RoutingInput, arg: str | None) -> Routes:
    """ftree, or the fallback its spec names when the fabric is not a fat tree (said in
    the engine's notes and logged: never a silent fallback)."""
    from smagent.routing.base import ftree_fallback
    from smagent.routing.ftree import NotFatTree, route as ftree
    fallback = ftree_fallback(arg)
    try:
        return ftree(rin)
    except NotFatTree as e:
        if fallback is None:
            raise NotFatTree(f"{e}; use another engine or --routing ftree:fallback=updn") from None
        log.warning("ftree: %s; routing with %s instead", e, fallback)
        routes = route(fallback, rin)
        routes.notes.insert(0, f"ftree: {e}; routed with {fallback} instead (ftree:fallback)")
        return routes


def preload(engine: str):
    """Check the spec and read what the engine needs from disk (the file engine's dump),
    so that a bad spec or file is refused before any SMP. Pass the result to `route`."""
    name, arg = parse_spec(engine)
    if name == "file":
        from smagent.routing.file import load
        assert arg is not None  # parse_spec refuses file without a path
        return load(arg)
    return None


def route(engine: str, rin: RoutingInput, preloaded=None) -> Routes:
    """Route with the engine named by the spec ``engine`` (see the module docstring):
    a `RouteTable` for every switch of ``rin``, with the engine's notes. ``preloaded`` is what `preload` returned
    for it."""
    name, arg = parse_spec(engine)
    if name == "minhop":
        from smagent.routing.minhop import route as minhop
        return minhop(rin)
    if name == "updn":
        from smagent.routing.updn import parse_roots, route as updn
        return updn(rin, roots=parse_roots(arg, rin) if arg else None)
    if name == "ftree":
        return _ftree(rin, arg)
    from smagent.routing.file import route as from_file
    assert arg is not None  # parse_spec refuses file without a path
    return from_file(rin, arg, preloaded)
