"""Routing engines behind one small interface.

An engine takes a `RoutingInput` (the switch graph, where every LID lives) and returns,
for every switch GUID, a `RouteTable` (LID -> exit port, held as an LFT image). The sweep never special-cases an engine.

Engines are chosen by a *spec* string (the sweep's ``--routing`` value):

``auto`` (the default)
    the best deadlock-free engine for the fabric as it is, chosen on every sweep: ftree
    where it is a fat tree, else dfsssp within the VLs every port runs, else updn; the
    choice and its reason are ``Routes.chosen``; a running SM keeps its engine while it
    still fits (`smagent.routing.auto`).
``minhop``
    shortest paths, balanced by routes per port (`smagent.routing.minhop`): credit loops
    on rings (tori, meshes), which the sweep refuses.
``updn`` / ``updn:GUID[,GUID...]``
    up*/down* from automatically chosen roots, or from the listed root switch GUIDs
    (`smagent.routing.updn`): deadlock-free on any topology.
``ftree`` / ``ftree:fallback=ENGINE``
    fat-tree routing: levels found from the topology, each destination down its one
    downward path, uplinks evenly loaded, deadlock-free (`smagent.routing.ftree`). On a
    fabric that is not a fat tree it raises RoutingError saying why, unless a fallback
    (any other spec: auto, minhop, updn[:GUID,...], dfsssp, file:PATH) is named: then that
    engine routes, with a warning.
``dfsssp``
    deadlock-free SSSP: shortest paths balanced by link weight, then paths layered over
    virtual lanes so that no VL's channel dependency graph has a cycle; every path gets an
    SL (``Routes.sls``) and SL n rides VL n (`smagent.routing.dfsssp`). Refused (RoutingError)
    when the layers needed exceed the data VLs the ports run.
``file:PATH``
    the unicast tables of an ibroute / dump_lfts / ``smagent lft dump`` file, as
    OpenSM's ``-R file -U PATH`` loads them (`smagent.routing.file`).

The spec is parsed once, where it arrives (the CLI option, a desired state, the API),
by `parse_spec` into a `RoutingSpec`; the engines are a registry (`ENGINES`: name ->
`Engine`, how to read its argument, what it loads before any SMP, how it routes).

An engine that cannot route raises `RoutingError` (a ValueError: the CLI reports it
with exit code 2). There is no silent fallback to another engine (OpenSM falls back
to minhop; we never do, except to the fallback an ftree spec names, and auto's choice,
which is named with its reason).
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Any, Callable

from smagent.routing.auto import AutoMemory  # noqa: F401 - the package's public names
from smagent.routing.base import (  # noqa: F401 - the package's public names
    NO_PORT, Routes, RouteTable, RoutingError, RoutingInput, RoutingSpec,
)

log = logging.getLogger("smagent.routing")

SYNTAX = "auto, minhop, updn, updn:GUID[,GUID...], ftree, ftree:fallback=ENGINE, dfsssp, file:PATH"


@dataclasses.dataclass(frozen=True)
class Engine:
    """One routing engine: ``parse`` reads the argument after ``NAME:`` (None: no colon)
    into `RoutingSpec` fields, ``text`` being the whole spec for messages; ``preload``
    reads what it needs from disk before any SMP; ``route`` routes."""
    parse: Callable[[str | None, str], dict[str, Any]]
    route: Callable[[RoutingSpec, RoutingInput, Any, AutoMemory | None], Routes]
    preload: Callable[[RoutingSpec], Any] = lambda spec: None


def parse_spec(spec: str | RoutingSpec) -> RoutingSpec:
    """The one parser of a routing spec: ``"updn:0x1,0x2"`` -> RoutingSpec("updn", roots=(1, 2));
    names are case-insensitive. A RoutingSpec is returned as it is. RoutingError (exit 2)
    names what is wrong."""
    if isinstance(spec, RoutingSpec):
        return spec
    text = spec if isinstance(spec, str) else ""
    name, sep, arg = text.partition(":")
    name = name.strip().lower()
    engine = ENGINES.get(name)
    if engine is None:
        raise RoutingError(f"unknown routing engine {spec!r}: choose one of {SYNTAX}")
    return RoutingSpec(name, **engine.parse(arg if sep else None, text), text=text)


def preload(spec: str | RoutingSpec):
    """Check the spec and read what the engine needs from disk (the file engine's dump),
    so that a bad spec or file is refused before any SMP. Pass the result to `route`."""
    spec = parse_spec(spec)
    return ENGINES[spec.engine].preload(spec)


def route(spec: str | RoutingSpec, rin: RoutingInput, preloaded=None, memory: AutoMemory | None = None) -> Routes:
    """Route with the engine the spec names (see the module docstring): a `RouteTable` for
    every switch of ``rin``, with the engine's notes. ``preloaded``: what `preload` returned;
    ``memory``: a running SM's `AutoMemory` (auto keeps the engine it chose before)."""
    spec = parse_spec(spec)
    return ENGINES[spec.engine].route(spec, rin, preloaded, memory)


# -- the engines -----------------------------------------------------------------------------
def _no_argument(arg: str | None, text: str) -> dict[str, Any]:
    if arg is not None:
        raise RoutingError(f"routing engine {text.partition(':')[0].strip().lower()} takes no argument (got {text!r})")
    return {}


def _auto(spec: RoutingSpec, rin: RoutingInput, _preloaded, memory) -> Routes:
    from smagent.routing.auto import route as auto
    return auto(rin, memory)


def _minhop(spec: RoutingSpec, rin: RoutingInput, _preloaded, _memory) -> Routes:
    from smagent.routing.minhop import route as minhop
    return minhop(rin)


def _updn_roots(arg: str | None, text: str) -> dict[str, Any]:
    """``updn:0x1a,0x1b`` -> roots (GUIDs; whether they are switches is checked on the fabric)."""
    if arg is None:
        return {}
    roots = []
    for tok in arg.replace(";", ",").split(","):
        tok = tok.strip()
        if not tok:
            continue
        try:
            roots.append(int(tok, 0) if tok.lower().startswith("0x") else int(tok, 16))
        except ValueError:
            raise RoutingError(f"updn root {tok!r} is not a GUID (hex, e.g. 0x0002c90300001234)") from None
    if not roots:
        raise RoutingError("--routing updn:GUID[,GUID...]: no root GUID given")
    return {"roots": tuple(roots)}


def _updn(spec: RoutingSpec, rin: RoutingInput, _preloaded, _memory) -> Routes:
    from smagent.routing.updn import check_roots, route as updn
    return updn(rin, roots=check_roots(spec.roots, rin) if spec.roots else None)


def _ftree_fallback(arg: str | None, text: str) -> dict[str, Any]:
    """``fallback=ENGINE`` -> the fallback's spec (any engine but ftree itself)."""
    if arg is None:
        return {}
    key, eq, val = arg.partition("=")
    val = val.strip()
    if key.strip().lower() != "fallback" or not eq or not val:
        raise RoutingError(f"routing engine ftree takes ftree or ftree:fallback=ENGINE, got 'ftree:{arg}'")
    fallback = parse_spec(val)
    if fallback.engine == "ftree":
        raise RoutingError(f"ftree:fallback={val}: the fallback is another engine (auto, minhop, updn, dfsssp, file:PATH)")
    return {"fallback": fallback}


def _ftree_preload(spec: RoutingSpec):
    """What the fallback loads (a file fallback's dump), read before any SMP."""
    return preload(spec.fallback) if spec.fallback is not None else None


def _ftree(spec: RoutingSpec, rin: RoutingInput, preloaded, memory) -> Routes:
    """ftree, or the fallback its spec names when the fabric is not a fat tree (said in
    the engine's notes and logged: never a silent fallback)."""
    from smagent.routing.ftree import NotFatTree, route as ftree
    fallback = spec.fallback
    try:
        return ftree(rin)
    except NotFatTree as e:
        if fallback is None:
            raise NotFatTree(f"{e}; use another engine or --routing ftree:fallback=updn") from None
        log.warning("ftree: %s; routing with %s instead", e, fallback)
        routes = route(fallback, rin, preloaded, memory)
        routes.notes.insert(0, f"ftree: {e}; routed with {fallback} instead (ftree:fallback)")
        return routes


def _dfsssp(spec: RoutingSpec, rin: RoutingInput, _preloaded, _memory) -> Routes:
    from smagent.routing.dfsssp import route as dfsssp
    return dfsssp(rin)


def _file_path(arg: str | None, text: str) -> dict[str, Any]:
    if not arg:
        raise RoutingError("routing engine file needs the dump to load: --routing file:PATH")
    return {"file": arg}


def _file_load(spec: RoutingSpec):
    from smagent.routing.file import load
    assert spec.file is not None  # the parser refuses file without a path
    return load(spec.file)


def _file(spec: RoutingSpec, rin: RoutingInput, preloaded, _memory) -> Routes:
    from smagent.routing.file import route as from_file
    assert spec.file is not None  # the parser refuses file without a path
    return from_file(rin, spec.file, preloaded)


ENGINES: dict[str, Engine] = {
    "auto": Engine(_no_argument, _auto),
    "minhop": Engine(_no_argument, _minhop),
    "updn": Engine(_updn_roots, _updn),
    "ftree": Engine(_ftree_fallback, _ftree, _ftree_preload),
    "dfsssp": Engine(_no_argument, _dfsssp),
    "file": Engine(_file_path, _file, _file_load),
}
DEFAULT = parse_spec("auto")
