"""Routes from a file: the unicast tables of an ibroute / dump_lfts / `smagent lft dump`
output, as OpenSM's file engine (``opensm -R file -U FILE``) loads them.

Spec: ``--routing file:PATH``. Each "Unicast lids ... guid 0x..." section is one
switch's whole table (LIDs it does not list, or lists with port 255, get no route).
The parser is `smagent.model.lftdump.parse_lft_dump` (the one `lft load` uses).

Stricter than OpenSM, which skips what it cannot use and fills the gaps with minhop:

* a file that does not parse, names a switch this fabric lacks, or gives a port the
  switch does not have is an error;
* every switch of the fabric must have a section;
* where the file routes one of this fabric's LIDs at the switch the LID lives on, it
  must route it to the port the LID lives on (port 0 for the switch's own LID): else
  the dump was taken with other LIDs (run the sweep with the same ``--lid-file``).

LIDs the file leaves unrouted are reported by the sweep (a switch without a route to a
LID), never silently patched.
"""
from __future__ import annotations

from smagent.routing.base import NO_PORT, Routes, RouteTable, RoutingError, RoutingInput


def load(path: str) -> list:
    """Read and parse the dump (the only I/O of this engine): done before any SMP, so a
    bad file is refused with nothing sent."""
    from smagent.model.lftdump import DumpError, parse_lft_dump  # the one parser of this format
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError as e:
        raise RoutingError(f"routing file: {e}") from None
    try:
        return parse_lft_dump(text, path)
    except DumpError as e:
        shown = e.problems[:10]
        more = f"\n  (+{len(e.problems) - 10} more)" if len(e.problems) > 10 else ""
        raise RoutingError("routing file: not a unicast table dump:\n  " + "\n  ".join(shown) + more) from None


def route(rin: RoutingInput, path: str, sections: list | None = None) -> Routes:
    """Tables from the dump at ``path`` (``sections``: as `load` returned it already)."""
    if sections is None:
        sections = load(path)
    problems = []
    by_guid = {s.guid: s for s in sections}
    for s in sections:
        if s.guid not in rin.num_ports:
            problems.append(f"{path}:{s.line}: switch GUID 0x{s.guid:016x}"
                            f"{f' ({s.description})' if s.description else ''} is not a switch of this fabric")
            continue
        n = rin.num_ports[s.guid]
        for lid, (port, line) in sorted(s.entries.items()):
            if port != NO_PORT and port > n:
                problems.append(f"{path}:{line}: LID 0x{lid:04x} -> port {port}, but {rin.name(s.guid)} has "
                                f"ports 0..{n}")
    missing = [g for g in rin.switches if g not in by_guid]
    if missing:
        problems.append(f"{path}: no table for {len(missing)} switch(es) of this fabric: "
                        + ", ".join(rin.name(g) for g in missing[:5]) + (" ..." if len(missing) > 5 else ""))
    wrong = []
    for lid, (g, port) in sorted(rin.lid_homes.items()):
        s = by_guid.get(g)
        got = s.entries.get(lid) if s is not None else None
        if got is not None and got[0] != NO_PORT and got[0] != port:
            wrong.append(f"{path}:{got[1]}: {rin.name(g)} sends LID 0x{lid:04x} to port {got[0]}, but that LID "
                         f"lives on its port {port}")
    if wrong:
        problems += wrong[:10] + ([f"(+{len(wrong) - 10} more)"] if len(wrong) > 10 else [])
        problems.append("the dump was taken with other LIDs: sweep with the LID file of that fabric (--lid-file)")
    if problems:
        raise RoutingError("routing file: cannot use it for this fabric:\n  " + "\n  ".join(problems))
    size = max(rin.lid_homes, default=0) + 1
    return Routes({g: RouteTable.from_entries({lid: port for lid, (port, _line) in by_guid[g].entries.items()}, size)
                   for g in rin.switches})
