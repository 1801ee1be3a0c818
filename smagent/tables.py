"""Forwarding tables as data: desired state, what a switch holds now, the difference in blocks.

LFT: by block of 64 LIDs. MFT: by (block of 32 MLIDs, PortMask position of 16 ports),
the unit one SMP carries (DESIGN.md, Known pitfalls). RFT: by block of 16 entries.
Every write is checked against the GetResp of its Set (the switch's read-back).
"""
from __future__ import annotations

import dataclasses

from mad import forwarding as fw
from mad.attributes import (
    AttrID, LinearForwardingTable, MulticastForwardingTable, RandomForwardingEntry, RandomForwardingTable,
)
from mad.header import Method
from mad import smp as smpcodec
from smagent.transport.base import Request, Transport


def request(where, method: int, attr_id: int, modifier: int, value=None) -> Request:
    """An SMP to a switch addressed by its DR path (what discovery knows) or by a
    `smagent.targets.Target` (a LID or path an operator gave)."""
    if hasattr(where, "request"):
        return where.request(method, attr_id, modifier, value)
    return Request(smpcodec.dr(method, attr_id, where, modifier, value))


def where_str(where) -> str:
    return where.describe() if hasattr(where, "describe") else "DR " + ",".join(map(str, where))


@dataclasses.dataclass
class BlockChange:
    switch: int  # node GUID
    name: str  # node description, for people
    path: object  # DR path tuple, or a Target (see `request`)
    block: int
    old: bytes | None  # None: not read (above the switch's LinearFDBTop, so unknown)
    new: bytes

    def changed_lids(self) -> list[tuple[int, int | None, int]]:
        base = self.block * fw.LFT_BLOCK_SIZE
        return [(base + i, None if self.old is None else self.old[i], self.new[i])
                for i in range(fw.LFT_BLOCK_SIZE) if self.old is None or self.old[i] != self.new[i]]


def desired_lft(routes, top: int) -> bytearray:
    """A switch's `routing.RouteTable` as a table covering LIDs 0..top (whole blocks),
    0xFF elsewhere."""
    table = bytearray([fw.LFT_NO_PORT]) * (fw.lft_blocks_for(top) * fw.LFT_BLOCK_SIZE)
    n = min(top + 1, len(routes.ports))
    table[:n] = routes.ports[:n]
    return table
    for lid, port in routes.items():
        if lid <= top:
            table[lid] = port
    return table


def read_lft_blocks(transport: Transport, wanted: list[tuple[int, tuple[int, ...], int]]):
    """Read (switch, path, block) triples, interleaved across switches so the window
    stays full; returns {(switch, block): bytes} for those that answered, and errors."""
    reqs = [request(path, Method.GET, AttrID.LINEAR_FORWARDING_TABLE, fw.lft_modifier(b)) for _sw, path, b in wanted]
    got, errors = {}, []
    for (sw, path, b), r in zip(wanted, transport.execute(reqs)):
        if r.ok:
            got[(sw, b)] = bytes(r.value().ports)
        else:
            errors.append(f"{where_str(path)}: LFT block {b}: {r.error}")
    return got, errors


def interleave(changes: list) -> list:
    """Order writes round-robin over switches (block 0 of every switch, then block 1, ...)
    so the window stays full; within a switch, by block and position, stable."""
    by_sw: dict[int, list] = {}
    for c in changes:
        by_sw.setdefault(c.switch, []).append(c)
    queues = [sorted(q, key=lambda c: (c.block, getattr(c, "position", 0))) for q in by_sw.values()]
    out, i = [], 0
    while any(i < len(q) for q in queues):
        out.extend(q[i] for q in queues if i < len(q))
        i += 1
    return out


def write_lft_blocks(transport: Transport, changes: list[BlockChange]):
    """SubnSet every changed block; the GetResp of a Set carries what the switch now
    holds, which is our read-back. Returns (written, [problems])."""
    order = interleave(changes)
    reqs = [request(c.path, Method.SET, AttrID.LINEAR_FORWARDING_TABLE, fw.lft_modifier(c.block),
                    LinearForwardingTable.cls(ports=list(c.new))) for c in order]
    written, problems = [], []
    for c, r in zip(order, transport.execute(reqs)):
        if not r.ok:
            problems.append(f"{c.name} LFT block {c.block}: {r.error}")
            continue
        back = bytes(r.value().ports)
        if back != c.new:
            bad = [c.block * fw.LFT_BLOCK_SIZE + i for i in range(fw.LFT_BLOCK_SIZE) if back[i] != c.new[i]]
            problems.append(f"{c.name} LFT block {c.block}: read back differs at LIDs {bad[:8]}")
        written.append(c)
    return written, problems


# ===================================================================================
# MulticastForwardingTable: (block, position) units
# ===================================================================================
@dataclasses.dataclass
class MftChange:
    switch: int
    name: str
    path: object  # DR path tuple, or a Target
    block: int
    position: int
    old: list[int] | None  # the 32 PortMasks as read (None: not read)
    new: list[int]

    def changed_mlids(self) -> list[tuple[int, set[int] | None, set[int]]]:
        """(mlid, old ports, new ports) for the entries that differ, ports of this position."""
        out = []
        for i in range(fw.MFT_BLOCK_SIZE):
            o = None if self.old is None else self.old[i]
            if o != self.new[i]:
                out.append((fw.mft_mlid(self.block, i), None if o is None else mask_ports(o, self.position),
                            mask_ports(self.new[i], self.position)))
        return out

    def describe(self) -> str:
        parts = []
        for mlid, o, n in self.changed_mlids():
            fmt = (lambda ps: "{" + ",".join(map(str, sorted(ps))) + "}")
            parts.append(f"mlid 0x{mlid:04x}: ports {'?' if o is None else fmt(o)} -> {fmt(n)}")
        return f"{self.name} block {self.block} position {self.position}: " + "; ".join(parts)


def mask_ports(mask: int, position: int) -> set[int]:
    base = position * fw.MFT_PORTS_PER_POSITION
    return {base + b for b in range(fw.MFT_PORTS_PER_POSITION) if mask >> b & 1}


def mft_units(entries: dict[int, frozenset[int]], blocks, positions: int) -> dict[tuple[int, int], list[int]]:
    """{mlid: ports} as the full content of every (block, position) in blocks x positions:
    MLIDs not in `entries` are empty (so a diff clears stale entries there)."""
    units = {(b, p): [0] * fw.MFT_BLOCK_SIZE for b in blocks for p in range(positions)}
    for mlid, ports in entries.items():
        b, i = fw.mft_block(mlid)
        for port in ports:
            pos, bit = fw.mft_position(port)
            if (b, pos) not in units:
                raise ValueError(f"MLID 0x{mlid:04x} port {port}: block {b} position {pos} is outside the "
                                 f"planned units")
            units[(b, pos)][i] |= 1 << bit
    return units


def read_mft_units(transport: Transport, wanted: list[tuple[int, tuple[int, ...], int, int]]):
    """Read (switch, path, block, position); returns {(switch, block, position): [32 masks]}
    for those that answered, and errors."""
    reqs = [request(path, Method.GET, AttrID.MULTICAST_FORWARDING_TABLE, fw.mft_modifier(b, p))
            for _sw, path, b, p in wanted]
    got, errors = {}, []
    for (sw, path, b, p), r in zip(wanted, transport.execute(reqs)):
        if r.ok:
            got[(sw, b, p)] = list(r.value().port_masks)
        else:
            errors.append(f"{where_str(path)}: MFT block {b} position {p}: {r.error}")
    return got, errors


def diff_mft(switch: int, name: str, path, desired: dict[tuple[int, int], list[int]],
             current: dict[tuple[int, int, int], list[int]]) -> list[MftChange]:
    out = []
    for (b, p), new in sorted(desired.items()):
        old = current.get((switch, b, p))
        if old != new:
            out.append(MftChange(switch, name, tuple(path), b, p, old, list(new)))
    return out


def write_mft_units(transport: Transport, changes: list[MftChange]):
    """SubnSet every changed (block, position); the GetResp is the read-back."""
    order = interleave(changes)
    reqs = [request(c.path, Method.SET, AttrID.MULTICAST_FORWARDING_TABLE, fw.mft_modifier(c.block, c.position),
                    MulticastForwardingTable.cls(port_masks=list(c.new))) for c in order]
    written, problems = [], []
    for c, r in zip(order, transport.execute(reqs)):
        if not r.ok:
            problems.append(f"{c.name} MFT block {c.block} position {c.position}: Set failed: {r.error}")
            continue
        back = list(r.value().port_masks)
        if back != c.new:
            bad = [fw.mft_mlid(c.block, i) for i in range(fw.MFT_BLOCK_SIZE) if back[i] != c.new[i]]
            problems.append(f"{c.name} MFT block {c.block} position {c.position}: read back differs at MLIDs "
                            + ", ".join(f"0x{m:04x}" for m in bad[:8]))
        written.append(c)
    return written, problems


# ===================================================================================
# RandomForwardingTable: blocks of 16 packed entries
# ===================================================================================
def rft_pack(base_lid: int, lmc: int, port: int) -> int:
    """One valid entry as the 32-bit value RandomForwardingTable.entries holds (the
    layout is mad.attributes.RandomForwardingEntry's, never restated here)."""
    fw.rft_lid_range(base_lid, lmc)  # checks the LMC
    e = RandomForwardingEntry.cls(base_lid=base_lid, valid=1, lmc=lmc, port=port)
    return int.from_bytes(RandomForwardingEntry.encode(e), "big")


def rft_unpack(packed: int) -> tuple[int, int, int] | None:
    """(base_lid, lmc, port) of a valid entry, None for an invalid one."""
    e = RandomForwardingEntry.decode(packed.to_bytes(4, "big"))
    return (e.base_lid, e.lmc, e.port) if e.valid else None


def rft_norm(packed: int) -> int:
    """Invalid entries compare equal whatever else they hold; reserved bits ignored."""
    e = rft_unpack(packed)
    return 0 if e is None else rft_pack(*e)


@dataclasses.dataclass
class RftChange:
    switch: int
    name: str
    path: object  # DR path tuple, or a Target
    block: int
    old: list[int] | None  # 16 packed entries as read
    new: list[int]
    phase: int = 2  # 1: a clearing write that must go before every phase-2 write

    def describe(self) -> str:
        parts = []
        for i in range(fw.RFT_BLOCK_SIZE):
            o = None if self.old is None else rft_norm(self.old[i])
            n = rft_norm(self.new[i])
            if o != n:
                parts.append(f"entry {self.block * fw.RFT_BLOCK_SIZE + i}: {_entry_str(o)} -> {_entry_str(n)}")
        what = " (clear first)" if self.phase == 1 else ""
        return f"{self.name} block {self.block}{what}: " + "; ".join(parts)


def _entry_str(packed: int | None) -> str:
    if packed is None:
        return "?"
    e = rft_unpack(packed)
    if e is None:
        return "invalid"
    base, lmc, port = e
    return f"lid {base}/lmc {lmc} port {port}"


def read_rft_blocks(transport: Transport, wanted: list[tuple[int, tuple[int, ...], int]]):
    reqs = [request(path, Method.GET, AttrID.RANDOM_FORWARDING_TABLE, fw.rft_modifier(b)) for _sw, path, b in wanted]
    got, errors = {}, []
    for (sw, path, b), r in zip(wanted, transport.execute(reqs)):
        if r.ok:
            got[(sw, b)] = list(r.value().entries)
        else:
            errors.append(f"{where_str(path)}: RFT block {b}: {r.error}")
    return got, errors


def write_rft_blocks(transport: Transport, changes: list[RftChange]):
    """Phase-1 (clearing) writes of every switch first, then the rest; read-back checked."""
    written, problems = [], []
    for phase in (1, 2):
        order = interleave([c for c in changes if c.phase == phase])
        reqs = [request(c.path, Method.SET, AttrID.RANDOM_FORWARDING_TABLE, fw.rft_modifier(c.block),
                        RandomForwardingTable.cls(entries=list(c.new))) for c in order]
        for c, r in zip(order, transport.execute(reqs)):
            if not r.ok:
                problems.append(f"{c.name} RFT block {c.block}: Set failed: {r.error}")
                continue
            back = [rft_norm(e) for e in r.value().entries]
            if back != [rft_norm(e) for e in c.new]:
                bad = [c.block * fw.RFT_BLOCK_SIZE + i for i in range(fw.RFT_BLOCK_SIZE)
                       if back[i] != rft_norm(c.new[i])]
                problems.append(f"{c.name} RFT block {c.block}: read back differs at entries {bad[:8]}")
            written.append(c)
    return written, problems
