"""LID assignment, persisted in OpenSM's guid2lid format so LIDs survive restarts.

The file holds one record per port GUID: ``0x<port guid> 0x<min lid> 0x<max lid>``
(OpenSM writes a blank line between records; we read either way). Assignment is
deterministic: keep what a port already holds when it is valid and unique, else what
the file says, else the lowest free LMC-aligned range. Switches get one LID, on port 0.
Every LID stays under the smallest LinearFDBCap of the fabric.
"""
from __future__ import annotations

import dataclasses
import os
import re

from mad.forwarding import UNICAST_LID_MAX, lmc_problem
from smagent import paths
from smagent.errors import BadInput

_LINE = re.compile(r"^\s*(0x[0-9a-fA-F]+)\s+(0x[0-9a-fA-F]+|\d+)\s+(0x[0-9a-fA-F]+|\d+)\s*$")


class LidFileError(BadInput):
    pass


class LidError(BadInput):
    pass


def load_guid2lid(path) -> dict[int, tuple[int, int]]:
    """Read a guid2lid file: port GUID -> (min LID, max LID). Garbage is an error that
    names the line; a missing file is an empty table; an unreadable one is BadInput."""
    if not os.path.exists(path):
        return {}
    out: dict[int, tuple[int, int]] = {}
    for n, line in enumerate(paths.read_text(path, "LID file", errors="replace").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            raise LidFileError(f"{path}:{n}: not a guid2lid record (expected '0xGUID 0xMINLID 0xMAXLID'): {line.strip()[:60]!r}")
        guid, lo, hi = (int(x, 0) for x in m.groups())
        if not (1 <= lo <= hi <= UNICAST_LID_MAX):
            raise LidFileError(f"{path}:{n}: LID range {lo:#x}-{hi:#x} is not within 0x1-{UNICAST_LID_MAX:#x}")
        out[guid] = (lo, hi)
    return out


def save_guid2lid(path, table: dict[int, tuple[int, int]]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for guid, (lo, hi) in sorted(table.items(), key=lambda kv: kv[1]):
            f.write(f"0x{guid:016x} 0x{lo:04x} 0x{hi:04x}\n\n")
    os.replace(tmp, path)


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
    """
    problem = lmc_problem(lmc)
    if problem:
        raise LidError(problem)
    persisted = persisted or {}
    limit = min(limit, UNICAST_LID_MAX)
    ports = list(ports)
    size = {g: (1 if sw else 1 << lmc) for g, sw, _ in ports}
    used: dict[int, int] = {}  # lid -> guid
    lids: dict[int, int] = {}
    notes: list[str] = []

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
    top = max(used) if used else 0
    return LidPlan(lids, lmc, top, notes)
