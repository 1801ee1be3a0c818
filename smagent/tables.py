"""Forwarding tables as data: desired state, what a switch holds now, the difference in blocks."""
from __future__ import annotations

import dataclasses

from mad import forwarding as fw
from mad.attributes import AttrID, LinearForwardingTable
from mad.header import Method
from mad import smp as smpcodec
from smagent.transport.base import Request, Transport


@dataclasses.dataclass
class BlockChange:
    switch: int  # node GUID
    name: str  # node description, for people
    path: tuple[int, ...]
    block: int
    old: bytes | None  # None: not read (above the switch's LinearFDBTop, so unknown)
    new: bytes

    def changed_lids(self) -> list[tuple[int, int | None, int]]:
        base = self.block * fw.LFT_BLOCK_SIZE
        return [(base + i, None if self.old is None else self.old[i], self.new[i])
                for i in range(fw.LFT_BLOCK_SIZE) if self.old is None or self.old[i] != self.new[i]]


def desired_lft(routes: dict[int, int], top: int) -> bytearray:
    """LID -> port mapping as a table covering LIDs 0..top (whole blocks), 0xFF elsewhere."""
    table = bytearray([fw.LFT_NO_PORT]) * (fw.lft_blocks_for(top) * fw.LFT_BLOCK_SIZE)
    for lid, port in routes.items():
        if lid <= top:
            table[lid] = port
    return table


def read_lft_blocks(transport: Transport, wanted: list[tuple[int, tuple[int, ...], int]]):
    """Read (switch, path, block) triples, interleaved across switches so the window
    stays full; returns {(switch, block): bytes} for those that answered, and errors."""
    reqs = [Request(smpcodec.dr(Method.GET, AttrID.LINEAR_FORWARDING_TABLE, path, fw.lft_modifier(b)))
            for _sw, path, b in wanted]
    got, errors = {}, []
    for (sw, _path, b), r in zip(wanted, transport.execute(reqs)):
        if r.ok:
            got[(sw, b)] = bytes(r.value().ports)
        else:
            errors.append(str(r.error))
    return got, errors


def interleave(changes: list[BlockChange]) -> list[BlockChange]:
    """Order block writes round-robin over switches: block 0 of every switch, then 1..."""
    by_sw: dict[int, list[BlockChange]] = {}
    for c in changes:
        by_sw.setdefault(c.switch, []).append(c)
    out = []
    queues = [sorted(v, key=lambda c: c.block) for v in by_sw.values()]
    i = 0
    while any(i < len(q) for q in queues):
        out.extend(q[i] for q in queues if i < len(q))
        i += 1
    return out


def write_lft_blocks(transport: Transport, changes: list[BlockChange]):
    """SubnSet every changed block; the GetResp of a Set carries what the switch now
    holds, which is our read-back. Returns (written, [problems])."""
    order = interleave(changes)
    reqs = [Request(smpcodec.dr(Method.SET, AttrID.LINEAR_FORWARDING_TABLE, c.path, fw.lft_modifier(c.block),
                                LinearForwardingTable.cls(ports=list(c.new)))) for c in order]
    written, problems = [], []
    for c, r in zip(order, transport.execute(reqs)):
        if not r.ok:
            problems.append(f"{c.name} LFT block {c.block}: {r.error}")
            continue
        back = bytes(r.value().ports)
        if back != c.new:
            bad = [c.block * 64 + i for i in range(64) if back[i] != c.new[i]]
            problems.append(f"{c.name} LFT block {c.block}: read back differs at LIDs {bad[:8]}")
        written.append(c)
    return written, problems
