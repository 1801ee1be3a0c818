"""LID assignment, persisted in OpenSM's guid2lid format so LIDs survive restarts.

The file holds one record per port GUID: ``0x<port guid> 0x<min lid> 0x<max lid>``
(OpenSM writes a blank line between records; we read either way). Assignment is
deterministic: what the file says when it is valid and unique (that is what survives
restarts), else what the port already holds, else the lowest free LMC-aligned range; a
LID the file gives a port that is away stays reserved for it. Switches get one LID, on port 0.
Every LID stays under the smallest LinearFDBCap of the fabric.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import re
import shutil

from mad.forwarding import UNICAST_LID_MAX, lmc_problem
from smagent.config import atomicfile, files as paths
from smagent.errors import BadInput

_LINE = re.compile(r"^\s*(0x[0-9a-fA-F]+)\s+(0x[0-9a-fA-F]+|\d+)\s+(0x[0-9a-fA-F]+|\d+)\s*$")


log = logging.getLogger("smagent.planning.lidassign")


class LidFileError(BadInput):
    pass


class LidError(BadInput):
    pass


class LidTable(dict):
    """A guid2lid file read: port GUID -> (min LID, max LID), with ``problems``: the lines
    skipped and why (`assign` passes them on as notes, so a sweep prints them)."""

    def __init__(self, *args, problems=None):
        super().__init__(*args)
        self.problems: list[str] = list(problems or [])


def parse_guid2lid(text: str, where: str) -> LidTable:
    """The records of a guid2lid text. A bad line is a problem naming it, and skipped
    (OpenSM does the same: a garbled file must not stop the SM from routing). A LID
    claimed by two GUIDs (overlapping ranges), and a GUID listed twice with different
    ranges, are given to neither: which claim is true cannot be told, and keeping either
    could hand one LID to two ports; the ports get a LID as if the file never named them
    (the one they hold, if it is free), so nothing is duplicated."""
    entries: dict[int, tuple[int, int]] = {}
    problems: list[str] = []
    twice: set[int] = set()
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            problems.append(f"{where}:{n}: not a guid2lid record (expected '0xGUID 0xMINLID 0xMAXLID'): "
                            f"{line.strip()[:40]!r}; skipped")
            continue
        guid, lo, hi = (int(x, 0) for x in m.groups())
        if not (1 <= lo <= hi <= UNICAST_LID_MAX):
            problems.append(f"{where}:{n}: LID range {lo:#x}-{hi:#x} is not within 0x1-{UNICAST_LID_MAX:#x}; skipped")
            continue
        size = hi - lo + 1
        if size > 1 << 7 or size & (size - 1) or lo % size:  # what an LMC of 0..7 gives, aligned
            problems.append(f"{where}:{n}: LID range {lo:#x}-{hi:#x} is not an aligned range of 2^LMC LIDs "
                            f"(LMC 0..7); skipped")
            continue
        if entries.get(guid, (lo, hi)) != (lo, hi):
            problems.append(f"{where}:{n}: port {guid:#018x} is listed twice with different LIDs; "
                            f"neither is kept")
            twice.add(guid)
        entries[guid] = (lo, hi)
    for guid in twice:
        del entries[guid]
    owner: dict[int, int] = {}  # LID -> the first GUID claiming it
    clash: set[int] = set()
    for guid, (lo, hi) in sorted(entries.items(), key=lambda kv: kv[1]):
        for lid in range(lo, hi + 1):
            first = owner.setdefault(lid, guid)
            if first != guid and guid not in clash:  # each port named once
                problems.append(f"{where}: LID {lid:#x} is claimed by ports {first:#018x} and {guid:#018x}; "
                                f"neither keeps its LIDs from the file")
                clash |= {first, guid}
    return LidTable({g: r for g, r in entries.items() if g not in clash}, problems=problems)


def load_guid2lid(path, *, strict: bool = False) -> LidTable:
    """Read a guid2lid file (`parse_guid2lid`; its problems also logged as warnings). A
    missing file is an empty table; an unreadable one is BadInput. ``strict``: any
    problem is a `LidFileError` listing them all (a file the user names for a one-shot
    sweep: fixed by the user before anything is sent, rather than partly applied)."""
    try:
        text = paths.read_state_text(path, "LID file", errors="replace")
    except FileNotFoundError:
        return LidTable()
    except paths.NotAStateFile as e:  # a device or a huge file: not trusted; LIDs as for a new fabric
        if strict:
            raise
        log.warning("%s; LIDs are assigned as if it were empty", e)
        return LidTable(problems=[str(e)])
    table = parse_guid2lid(text, os.fspath(path))
    if strict and table.problems:
        more = f" (and {len(table.problems) - 5} more)" if len(table.problems) > 5 else ""
        raise LidFileError("; ".join(p.removesuffix("; skipped") for p in table.problems[:5]) + more)
    for p in table.problems:
        log.warning("%s", p)
    return table


def save_guid2lid(path, table: dict[int, tuple[int, int]]) -> None:
    """Replace the file atomically (`smagent.config.atomicfile`). A file that had bad lines is
    kept first as ``<path>.bad-<stamp>``: what it said is not lost, and the new file has
    none of them. A full disk under the running SM is a warning (`atomicfile.tolerated`):
    the old file stays, the LIDs on the fabric are right."""
    text = "".join(f"0x{guid:016x} 0x{lo:04x} 0x{hi:04x}\n\n"
                   for guid, (lo, hi) in sorted(table.items(), key=lambda kv: kv[1]))
    try:
        _keep_if_bad(path)
        atomicfile.write_text(path, text)
    except OSError as e:
        if not atomicfile.tolerated(e, f"LID file {os.fspath(path)} not written"):
            raise


def _keep_if_bad(path) -> None:
    p = os.fspath(path)
    try:
        bad = parse_guid2lid(paths.read_state_text(p, "LID file", errors="replace"), p).problems
    except (OSError, BadInput):
        return  # no file yet (or unreadable, or not a file: replacing it is the repair)
    if bad:
        kept = f"{p}.bad-{paths.stamp()}"
        shutil.copyfile(p, kept)
        log.warning("%s had %d bad line(s): kept as %s, rewritten without them", p, len(bad), kept)


@dataclasses.dataclass
class LidPlan:
    """Port GUID -> base LID, the LMC, the highest LID (LinearFDBTop), what was decided on
    the way, and the SM's own LID (``master_lid``: every port's MasterSMLID; set by the
    sweep once it knows the local port)."""
    lids: dict[int, int]
    lmc: int
    top: int
    notes: list[str]
    master_lid: int = 0

    def range_of(self, guid: int, is_switch: bool) -> range:
        base = self.lids[guid]
        return range(base, base + (1 if is_switch else 1 << self.lmc))


def assign(ports, *, lmc: int = 0, limit: int = UNICAST_LID_MAX, persisted=None) -> LidPlan:
    """Assign LIDs.

    ``ports``: iterable of (port_guid, is_switch, current_lid) in a deterministic order.
    ``limit``: the highest LID allowed (the fabric's smallest LinearFDBCap - 1).
    ``persisted``: the LID file (a `LidTable`, or a plain dict). A LID it gives a port
    that is not in ``ports`` stays that port's (OpenSM's rule: a LID in guid2lid belongs
    to its GUID while the file keeps it), so a port that is away gets its LIDs back and
    no other port is handed them.
    """
    problem = lmc_problem(lmc)
    if problem:
        raise LidError(problem)
    persisted = persisted if persisted is not None else {}
    limit = min(limit, UNICAST_LID_MAX)
    ports = list(ports)
    size = {g: (1 if sw else 1 << lmc) for g, sw, _ in ports}
    used: dict[int, int] = {}  # lid -> guid
    lids: dict[int, int] = {}
    notes: list[str] = list(getattr(persisted, "problems", ()))
    for guid, (lo, hi) in persisted.items():  # absent ports: reserved
        if guid not in size:
            for x in range(lo, hi + 1):
                used[x] = guid

    def fits(guid, base):
        n = size[guid]
        return (base >= 1 and base % n == 0 and base + n - 1 <= limit
                and all(used.get(x, guid) == guid for x in range(base, base + n)))

    def take(guid, base):
        for x in range(base, base + size[guid]):
            used[x] = guid
        lids[guid] = base

    # 1. what the file says wins (that is what survives restarts), 2. then what ports hold
    for source, pick in (("file", lambda g, cur: persisted.get(g, (0, 0))[0]), ("port", lambda g, cur: cur)):
        for guid, _sw, cur in ports:
            if guid in lids:
                continue
            want = pick(guid, cur)
            if not want:
                continue
            if fits(guid, want):
                take(guid, want)
            elif source == "file":
                notes.append(f"port {guid:#018x}: LID {want:#x} from the LID file conflicts or is out of range "
                             f"(limit {limit:#x}, LMC {lmc}); reassigned")
    # 3. the rest: lowest free aligned range. One pointer per range size: everything
    # below it is taken for that size, so a fabric of N ports costs O(N), not O(N^2).
    nxt: dict[int, int] = {}
    for guid, _sw, _cur in ports:
        if guid in lids:
            continue
        n = size[guid]
        base = nxt.get(n, n if n > 1 else 1)
        while not fits(guid, base):
            base += n
            if base + n - 1 > limit:
                raise LidError(f"out of LIDs: {len(ports)} ports with LMC {lmc} do not fit under LID {limit:#x} "
                               f"(the smallest LinearFDBCap of the fabric)")
        take(guid, base)
        nxt[n] = base + n
    top = max((base + size[g] - 1 for g, base in lids.items()), default=0)  # reserved LIDs forward nothing
    return LidPlan(lids, lmc, top, notes)
