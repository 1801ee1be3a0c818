"""RandomForwardingTable: routes as (BaseLID, LMC, port) entries, DefaultPort, placement;
reads, diffs and the raw block writes (`apply` adds backup and journal), `rft set`.

For a switch with LinearFDBCap 0 and RandomFDBCap > 0 (the seed's RFT; IBA 14.2.5.10).
A routing engine's answer (LID -> exit port) becomes entries like this:

* **cover**: the LIDs that leave by the same port are covered by aligned power-of-two
  ranges, as large as possible (an entry matches BaseLID with its low LMC bits cleared,
  2^LMC LIDs, LMC <= 7). LIDs are LMC-aligned when assigned, so one port's whole LID
  range costs one entry, and runs of consecutive LIDs that share an exit merge further.
  Only LIDs that are routed are covered: an entry never claims a LID nobody has.
* **DefaultPort** (the seed's chassis example): if every routed LID whose exit port
  leads to another switch leaves by one and the same port D, then D becomes the
  switch's DefaultPort and those LIDs get no entry: the switch sends what matches no
  entry out D, and discards what arrives on D and matches nothing (so a packet for an
  unknown LID cannot bounce between two switches). Otherwise (no switch-facing port in
  use, or several) DefaultPort stays as the switch holds it and every routed LID gets
  an entry: a default out one of several uplinks would send unknown LIDs round a
  cycle of switches, which the discard rule only stops on a 2-cycle.
* **limits**: at most SwitchInfo.LIDsPerPort valid entries may name one exit port
  (port 0 exempt; 0 read as "no limit", IBA's LIDsPerPort = RandomFDBCap), and at most
  RandomFDBCap entries in all. A routing that needs more is an `RftError` naming the
  switch and the port; nothing is sent.
* **placement**: an entry already in the table stays in its slot; new entries take the
  lowest free slots; everything else is invalidated. So a second sweep writes nothing,
  and a small routing change rewrites few blocks.
* **write order**: a switch that enforces LIDsPerPort checks it on every Set, so if
  writing the changed blocks in order would pass through a table with too many
  entries for a port, the blocks are first written with only their surviving entries
  (phase 1, removals), then in full (phase 2, additions): every table in between is a
  subset of the old or of the new one.
"""
from __future__ import annotations

import dataclasses
from typing import ClassVar, Sequence

from mad import forwarding as fw
from mad.attributes import AttrID, RandomForwardingTable
from smagent.fdb.switch import TableFailure, Where, failed_units_lines, interleave, read_units, set_units
from smagent.transport.base import Transport
from smagent.errors import BadInput


class RftError(BadInput):
    """A routing that an RFT switch cannot hold; the message names switch and port."""


@dataclasses.dataclass(frozen=True, order=True)
class Entry:
    base_lid: int
    lmc: int
    port: int

    def lids(self) -> range:
        return fw.rft_lid_range(self.base_lid, self.lmc)

    def packed(self) -> int:
        return fw.rft_pack(self.base_lid, self.lmc, self.port)

    def __str__(self) -> str:
        return f"lid {self.base_lid}/lmc {self.lmc} -> port {self.port}"


def cover(routes: dict[int, int]) -> list[Entry]:
    """Aligned ranges covering exactly the LIDs of `routes`, each leaving by one port."""
    out: list[Entry] = []
    for lid in sorted(routes):
        port = routes[lid]
        if out and lid in out[-1].lids():
            continue
        for lmc in range(7, -1, -1):
            size = 1 << lmc
            if lid % size == 0 and all(routes.get(x) == port for x in range(lid, lid + size)):
                out.append(Entry(lid, lmc, port))
                break
    return out


@dataclasses.dataclass
class RftPlan:
    switch: int
    name: str
    entries: list[Entry]
    default_port: int | None  # None: leave DefaultPort as the switch holds it
    omitted: int = 0  # LIDs left to DefaultPort


def plan_switch(switch: int, name: str, routes: dict[int, int], switch_ports: set[int], si) -> RftPlan:
    """Entries and DefaultPort for one RFT switch; RftError if they do not fit."""
    uplinks = {p for p in routes.values() if p in switch_ports}
    default = next(iter(uplinks)) if len(uplinks) == 1 else None
    kept = {lid: p for lid, p in routes.items() if p != default}
    entries = cover(kept)
    limit = si.lids_per_port
    per_port: dict[int, list[Entry]] = {}
    for e in entries:
        per_port.setdefault(e.port, []).append(e)
    for port, es in sorted(per_port.items()):
        if port and limit and len(es) > limit:
            raise RftError(f"switch {name} (0x{switch:016x}): port {port} needs {len(es)} RFT entries "
                           f"({', '.join(str(e) for e in es[:4])}{', ...' if len(es) > 4 else ''}) but its "
                           f"LIDsPerPort is {limit}")
    if len(entries) > si.random_fdb_cap:
        raise RftError(f"switch {name} (0x{switch:016x}): the routes need {len(entries)} RFT entries, "
                       f"RandomFDBCap is {si.random_fdb_cap}")
    return RftPlan(switch, name, entries, default, len(routes) - len(kept))


def blocks_for(cap: int) -> int:
    return -(-cap // fw.RFT_BLOCK_SIZE)


def place(entries: list[Entry], current: list[int], cap: int) -> list[int]:
    """The new table (packed entries, same length as `current`): entries already present
    keep their slot, the others fill the lowest free slots below `cap`."""
    cur = [fw.rft_norm(x) for x in current]
    want = {e.packed(): e for e in entries}
    new = [0] * len(cur)
    kept = set()
    for i in range(min(cap, len(cur))):
        if cur[i] in want and cur[i] not in kept:
            new[i] = cur[i]
            kept.add(cur[i])
    free = iter(i for i in range(min(cap, len(cur))) if not new[i])
    for e in sorted(want[k] for k in want if k not in kept):
        new[next(free)] = e.packed()
    return new


def _counts(table: list[int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for x in table:
        e = fw.rft_unpack(x)
        if e is not None and e[2]:
            out[e[2]] = out.get(e[2], 0) + 1
    return out


def changes(plan: RftPlan, path, current: list[int], si) -> list["RftChange"]:
    """Block writes turning `current` (the whole table as read) into the planned one."""
    new = place(plan.entries, current, si.random_fdb_cap)
    B = fw.RFT_BLOCK_SIZE
    norm = [fw.rft_norm(x) for x in current]
    diff = [b for b in range(len(new) // B) if norm[b * B:(b + 1) * B] != new[b * B:(b + 1) * B]]
    limit = si.lids_per_port
    table = list(norm)
    two_phase = False
    for b in diff:  # would one pass in block order ever exceed LIDsPerPort?
        table[b * B:(b + 1) * B] = new[b * B:(b + 1) * B]
        if limit and any(k > limit for k in _counts(table).values()):
            two_phase = True
            break
    out = []
    for b in diff:
        old, fin = list(current[b * B:(b + 1) * B]), new[b * B:(b + 1) * B]
        if two_phase:
            mid = [o if o == n else 0 for o, n in zip(norm[b * B:(b + 1) * B], fin)]
            if mid != norm[b * B:(b + 1) * B]:
                out.append(RftChange(plan.switch, plan.name, path, b, old, mid, phase=1))
                old = mid
            if mid == fin:
                continue
        out.append(RftChange(plan.switch, plan.name, path, b, old, fin, phase=2))
    return out


@dataclasses.dataclass
class RftChange:
    """One RFT block Set: 16 packed entries as read (``old``) and as written (``new``)."""
    TABLE: ClassVar[str] = "rft"  # what `fdb.journal.table_of` names it
    switch: int
    name: str
    path: Where  # DR path tuple, or a Target
    block: int
    old: list[int] | None  # 16 packed entries as read
    new: list[int]
    phase: int = 2  # 1: a clearing write that must go before every phase-2 write

    def changed_entries(self) -> list[tuple[int, int | None, int]]:
        """(entry number, old, new) of the slots that differ, entries normalised."""
        out = []
        for i in range(fw.RFT_BLOCK_SIZE):
            o = None if self.old is None else fw.rft_norm(self.old[i])
            n = fw.rft_norm(self.new[i])
            if o != n:
                out.append((self.block * fw.RFT_BLOCK_SIZE + i, o, n))
        return out

    def describe(self) -> str:
        parts = [f"entry {e}: {_entry_str(o)} -> {_entry_str(n)}" for e, o, n in self.changed_entries()]
        what = " (clear first)" if self.phase == 1 else ""
        return f"{self.name} block {self.block}{what}: " + "; ".join(parts)


def _entry_str(packed: int | None) -> str:
    if packed is None:
        return "?"
    e = fw.rft_unpack(packed)
    if e is None:
        return "invalid"
    base, lmc, port = e
    return f"lid {base}/lmc {lmc} port {port}"


def read_rft_blocks(transport: Transport, wanted: Sequence[tuple[int, Where, int]]
                    ) -> tuple[dict[tuple[int, int], list[int]], list[str]]:
    return read_units(transport, wanted, AttrID.RANDOM_FORWARDING_TABLE, fw.rft_modifier,
                      lambda v: list(v.entries), lambda b: f"RFT block {b}")


def write_rft_blocks(transport, changes: list[RftChange]):
    """Phase-1 (clearing) writes of every switch first, then the rest; read-back checked."""
    written, problems, failed = [], [], []
    for phase in (1, 2):
        for c, r in set_units(transport, interleave([c for c in changes if c.phase == phase]),
                              AttrID.RANDOM_FORWARDING_TABLE, lambda c: fw.rft_modifier(c.block),
                              lambda c: RandomForwardingTable(entries=list(c.new))):
            if not r.ok:
                failed.append((c.name, str(c.block), f"Set failed: {r.error}"))
                continue
            back = [fw.rft_norm(e) for e in r.value(RandomForwardingTable).entries]
            if back != [fw.rft_norm(e) for e in c.new]:
                bad = [c.block * fw.RFT_BLOCK_SIZE + i for i in range(fw.RFT_BLOCK_SIZE)
                       if back[i] != fw.rft_norm(c.new[i])]
                problems.append(f"{c.name} RFT block {c.block}: read back differs at entries {bad[:8]}")
            written.append(c)
    return written, failed_units_lines(failed, "RFT block") + problems


def read_table(transport, target, si) -> list[int]:
    """The whole RFT of one switch (RandomFDBCap entries, whole blocks), packed."""
    nb = blocks_for(si.random_fdb_cap)
    got, errors = read_rft_blocks(transport, [(0, target, b) for b in range(nb)])
    if errors:
        raise TableFailure(errors[0])
    return [e for b in range(nb) for e in got[(0, b)]]


def valid_entries(table):
    """(slot, (base_lid, lmc, port)) of every valid entry."""
    for i, packed in enumerate(table):
        e = fw.rft_unpack(packed)
        if e is not None:
            yield i, e


def plan_set(f, target, table: list[int], lid: int, lmc: int, port: int):
    """`rft set`: LIDs lid..lid+2^lmc-1 leave by PORT (255: removed) on the switch of facts
    ``f``; overlapping entries are replaced, an old entry only partly inside the range keeps
    its other LIDs. Returns (changes, problems); problems (limits) mean nothing to send."""
    si = f.switch_info
    span = set(fw.rft_lid_range(lid, lmc))
    old = [Entry(b, m, p) for _i, (b, m, p) in valid_entries(table)]
    keep = [e for e in old if not span & set(e.lids())]
    rest = {x: e.port for e in old if span & set(e.lids()) for x in e.lids() if x not in span}
    wanted = keep + cover(rest) + ([Entry(lid, lmc, port)] if port != fw.LFT_NO_PORT else [])
    per_port: dict[int, int] = {}
    for e in wanted:
        per_port[e.port] = per_port.get(e.port, 0) + 1
    problems = [f"{f.name}: port {p} would have {n} RFT entries, LIDsPerPort is {si.lids_per_port}"
                for p, n in sorted(per_port.items()) if p and si.lids_per_port and n > si.lids_per_port]
    if len(wanted) > si.random_fdb_cap:
        problems.append(f"{f.name}: {len(wanted)} entries do not fit RandomFDBCap {si.random_fdb_cap}")
    if problems:
        return [], problems
    return changes(RftPlan(f.guid, f.name, wanted, None), target, table, si), []
