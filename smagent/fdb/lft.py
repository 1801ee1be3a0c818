"""LinearForwardingTable: blocks of 64 LIDs. The desired image of a switch, reads,
diffs, the raw block writes (`apply` adds the backup and journal around them), and the
plans of `lft load` (a whole dump) and `lft set` (one entry)."""
from __future__ import annotations

import dataclasses
import functools
import operator
import re
from typing import ClassVar, Sequence

from mad import forwarding as fw
from mad.attributes import AttrID
from smagent.fdb import tops as topsmod
from smagent.fdb.switch import TableFailure, Where, failed_units_lines, interleave, read_units, set_units
from smagent.transport.base import Transport
from smagent.model.lftdump import LftSection

B = fw.LFT_BLOCK_SIZE


@dataclasses.dataclass
class BlockChange:
    """One LFT block Set: the 64 ports as read (``old``) and as written (``new``)."""
    TABLE: ClassVar[str] = "lft"  # what `fdb.journal.table_of` names it
    switch: int  # node GUID
    name: str  # node description, for people
    path: Where  # DR path tuple, or a Target
    block: int
    old: bytes | None  # None: not read (above the switch's LinearFDBTop, so unknown)
    new: bytes

    def changed_count(self) -> int:
        """How many of the block's LIDs the Set changes (``len(changed_lids())``, counted in C:
        a large plan's summary counts 200,000 blocks)."""
        return B if self.old is None else sum(map(operator.ne, self.old, self.new))

    def changed_lids(self) -> list[tuple[int, int | None, int]]:
        base = self.block * B
        return [(base + i, None if self.old is None else self.old[i], self.new[i])
                for i in range(B) if self.old is None or self.old[i] != self.new[i]]


def desired_lft(routes, top: int) -> bytearray:
    """A switch's `routing.RouteTable` as a table covering LIDs 0..top (whole blocks),
    0xFF elsewhere."""
    table = bytearray([fw.LFT_NO_PORT]) * (fw.lft_blocks_for(top) * B)
    n = min(top + 1, len(routes.ports))
    table[:n] = routes.ports[:n]
    return table


def lft_read_top(si) -> int:
    """The highest LID worth reading from a switch with SwitchInfo ``si``: LinearFDBTop,
    within the table (LinearFDBCap) and the unicast range; -1 for a switch without an LFT
    (LinearFDBCap 0: an LFT Get fails there, docs/PITFALLS.md)."""
    if not si.linear_fdb_cap:
        return -1
    return min(si.linear_fdb_top, fw.UNICAST_LID_MAX, si.linear_fdb_cap - 1)


def lft_blocks_to_read(si) -> range:
    """The LFT blocks worth reading from a switch with SwitchInfo ``si``: those holding
    LIDs 0 .. `lft_read_top`; none for a switch with LinearFDBCap 0. The one rule every
    reader of whole LFTs (verify, dump, backup, show) follows."""
    return range(lft_read_top(si) // B + 1)


def read_lft_blocks(transport: Transport, wanted: Sequence[tuple[int, Where, int]]
                    ) -> tuple[dict[tuple[int, int], bytes], list[str]]:
    """Read (switch, path, block) triples, interleaved across switches so the window
    stays full; returns {(switch, block): bytes} for those that answered, and errors."""
    return read_units(transport, wanted, AttrID.LINEAR_FORWARDING_TABLE, fw.lft_modifier,
                      lambda v: bytes(v.ports), lambda b: f"LFT block {b}")  # v: LinearForwardingTable


def read_lft(transport, target, blocks) -> dict[int, bytes]:
    """Blocks of one switch; TableFailure on the first that does not answer."""
    got, errors = read_lft_blocks(transport, [(0, target, b) for b in blocks])
    if errors:
        raise TableFailure(errors[0])
    return {b: got[(0, b)] for b in blocks}


def read_all(transport, switches) -> dict[int, bytes]:
    """LIDs 0..LinearFDBTop of every switch with an LFT (discovered nodes; `lft_blocks_to_read`):
    guid -> table bytes (whole blocks). A switch without an LFT (LinearFDBCap 0) is left out."""
    blocks = {n.guid: lft_blocks_to_read(n.switch_info) for n in switches}
    wanted = [(n.guid, n.path, b) for n in switches for b in blocks[n.guid]]
    got, errors = read_lft_blocks(transport, wanted)
    if errors:
        raise TableFailure("reading LFTs: " + "; ".join(errors[:5]) +
                           (f" (+{len(errors) - 5} more)" if len(errors) > 5 else ""))
    return {n.guid: b"".join(got[(n.guid, b)] for b in blocks[n.guid]) for n in switches if blocks[n.guid]}


def write_lft_blocks(transport, changes: list[BlockChange], *, ordered: bool = False):
    """SubnSet every changed block (``ordered``: already in `interleave` order); the
    GetResp of a Set carries what the switch now holds, which is our read-back. Returns
    (written, [problems]). No backup or journal: callers go through `smagent.fdb.apply`."""
    written, problems, failed = [], [], []
    # an LFT block's bytes are its 64 port entries (IBA 14.2.5.10): sent and read back as
    # they are (tests/unit/test_codec_props.py checks the layout says the same)
    for c, r in set_units(transport, changes if ordered else interleave(changes), AttrID.LINEAR_FORWARDING_TABLE,
                          lambda c: fw.lft_modifier(c.block), lambda c: bytes(c.new)):
        if not r.ok:
            failed.append((c.name, str(c.block), r.error))
            continue
        back = r.data
        if back != c.new:
            bad = [c.block * B + i for i in range(B) if back[i] != c.new[i]]
            problems.append(f"{c.name} LFT block {c.block}: read back differs at LIDs {bad[:8]}")
        written.append(c)
    return written, failed_units_lines(failed, "LFT block") + problems


# -- checks and plans of the lft commands ---------------------------------------------------
def check_lft_entry(f, lid: int, port: int) -> list[str]:
    """Problems with setting LID -> port on switch ``f`` (a SwitchFacts; empty: fine)."""
    out = []
    if f.lft_cap == 0:
        out.append(f"{f.name} has no LinearForwardingTable (LinearFDBCap 0)")
    elif lid != 0 and not 1 <= lid <= f.max_lid:
        out.append(f"LID 0x{lid:x} ({lid}) is beyond {f.name}'s LinearFDBCap {f.lft_cap} "
                   f"(LIDs 1..0x{f.max_lid:x})")
    if port != fw.LFT_NO_PORT and not 0 <= port <= f.num_ports:
        out.append(f"port {port} does not exist on {f.name}: ports 0..{f.num_ports}, or 255 for none")
    return out


def validate_sections(sections: list[LftSection], facts: dict, source="<dump>",
                      other_nodes: dict[int, str] | None = None) -> list[str]:
    """Every problem loading these sections into this fabric would have."""
    problems = []
    for s in sections:
        f = facts.get(s.guid)
        if f is None:
            what = (f"is {other_nodes[s.guid]!r}, not a switch" if other_nodes and s.guid in other_nodes
                    else "is not a switch in this fabric")
            problems.append(f"{source}:{s.line}: switch GUID 0x{s.guid:016x}"
                            f"{f' ({s.description})' if s.description else ''} {what}")
            continue
        for lid, (port, line) in sorted(s.entries.items()):
            problems += [f"{source}:{line}: {p}" for p in check_lft_entry(f, lid, port)]
    return problems


def section_span(s: LftSection, f) -> int:
    """The highest LID a load compares for this switch: the dump's range, its LIDs, and the
    switch's current LinearFDBTop (everything up to it is replaced), within the cap."""
    span = max([f.lft_top, s.top or 0, *s.entries])
    return min(span, f.max_lid)


def load_blocks_to_read(sections: list[LftSection], facts: dict) -> list[tuple[int, tuple, int]]:
    wanted = []
    for s in sections:
        f = facts[s.guid]
        for b in range(section_span(s, f) // B + 1):
            wanted.append((f.guid, f.path, b))
    return wanted


def plan_load(sections: list[LftSection], facts: dict, current: dict[tuple[int, int], bytes]):
    """Desired tables (each section is the switch's whole table, as OpenSM's file engine
    takes it: LIDs not listed forward nowhere) vs what the switches hold now.
    Returns ([BlockChange], [SwitchInfoChange])."""
    changes, tops = [], []
    for s in sections:
        f = facts[s.guid]
        span = section_span(s, f)
        nblocks = span // B + 1
        desired = bytearray([fw.LFT_NO_PORT]) * (nblocks * B)
        for lid, (port, _line) in s.entries.items():
            desired[lid] = port
        for b in range(nblocks):
            old = current[(f.guid, b)]
            new = bytes(desired[b * B:(b + 1) * B])
            # LIDs above the span (the tail of the last block) keep what the switch has
            lo_keep = span + 1 - b * B
            if 0 < lo_keep < B:
                new = new[:lo_keep] + old[lo_keep:]
            if new != old:
                changes.append(BlockChange(f.guid, f.name, f.path, b, old, new))
        t = topsmod.raise_top(f, lft_top=s.max_routed_lid())
        if t is not None:
            tops.append(t)
    return changes, tops


def plan_dump(transport, topo, sections: list[LftSection], source: str):
    """`lft load` and the restore of a dump: validate the sections against the fabric,
    read what the switches hold, plan. Returns (changes, tops, problems); with problems
    (bad input) nothing was planned."""
    from smagent.fdb.switch import facts_from_topology
    facts = facts_from_topology(topo)
    others = {n.guid: n.description for n in topo.nodes.values() if not n.is_switch}
    problems = validate_sections(sections, facts, source, others)
    if problems:
        return [], [], problems
    current, errors = read_lft_blocks(transport, load_blocks_to_read(sections, facts))
    if errors:
        raise TableFailure("reading LFTs: " + "; ".join(errors[:5]))
    changes, tops = plan_load(sections, facts, current)
    return changes, tops, []


def plan_set(transport, f, lid: int, port: int):
    """`lft set`: LID -> PORT on the switch of facts ``f`` (checked by `check_lft_entry`).
    Returns ([BlockChange], [SwitchInfoChange]): LinearFDBTop is raised to a routed LID."""
    block, i = fw.lft_block(lid)
    old = read_lft(transport, f.where(), [block])[block]
    new = bytearray(old)
    new[i] = port
    changes = [] if bytes(new) == old else [BlockChange(f.guid, f.name, f.where(), block, old, bytes(new))]
    top = topsmod.raise_top(f, lft_top=lid) if port != fw.LFT_NO_PORT else None
    return changes, [top] if top else []


def lft_plan_lines(changes, tops) -> list[str]:
    out = [line for t in tops for line in t.describe()]
    for c in interleave(changes):
        for lid, old, new in c.changed_lids():
            out.append(f"{c.name} LFT block {c.block}: lid {lid}: {'?' if old is None else old} -> {new}")
    return out


def lft_changes_json(changes, tops) -> list[dict]:
    out = [d for t in tops for d in t.to_json()]
    for c in interleave(changes):
        for lid, old, new in c.changed_lids():
            out.append({"switch": c.name, "guid": f"0x{c.switch:016x}", "table": "LFT", "block": c.block,
                        "lid": lid, "old": old, "new": new})
    return out


def pack_ports(ports: bytes | None) -> str | None:
    """A block's 64 ports as a plan record carries them: two hex digits per entry (LID
    64·block + i at position i), a run of four or more equal entries as ``XX{N}``
    ("ff{64}": 64 × 255), a run of four or more entries counting up by one from XX as
    ``XX{+N}`` ("13{+18}": ports 19 to 36, as a leaf switch spreads remote LIDs over its
    uplinks); None stays None (not read)."""
    if ports is None:
        return None
    if ports.count(ports[:1]) == len(ports) > 3:  # one value (a fresh switch's "ff{64}")
        return f"{ports[0]:02x}{{{len(ports)}}}"
    out, pos = [], 0
    for start, end, up in _runs(ports):
        start = max(start, pos)  # a run overlapping the one before: its rest is a run too
        if end - start < 4:
            continue
        out.append(ports[pos:start].hex())
        out.append(f"{ports[start]:02x}{{{'+' if up else ''}{end - start}}}")
        pos = end
    out.append(ports[pos:].hex())
    return "".join(out)


def _runs(ports: bytes) -> list[tuple[int, int, bool]]:
    """(start, end, counting up) of the runs of four or more equal entries, and of four or
    more counting up by one, by start; found in C (a block has few)."""
    runs = [(m.start(), m.end(), False) for m in _RUN.finditer(ports)]
    if len(ports) < 2:
        return runs
    # step i is "up" where ports[i + 1] == ports[i] + 1: those bytes of the XOR are zero
    steps = (int.from_bytes(ports[:-1].translate(_UP)) ^ int.from_bytes(ports[1:])).to_bytes(len(ports) - 1)
    for m in _UP_STEPS.finditer(steps):
        start, end = m.start(), m.end() + 1
        ff = ports.find(255, start, end - 1)  # 255, 0 is no step up (_UP wraps): split there
        runs += [(start, end, True)] if ff < 0 else [(start, ff + 1, True), (ff + 1, end, True)]
    return sorted(runs)


_RUN = re.compile(rb"(.)\1{3,}", re.DOTALL)
_UP = bytes((b + 1) & 0xFF for b in range(256))
_UP_STEPS = re.compile(rb"\x00{3,}")  # three steps up: four entries


def unpack_ports(text: str | None) -> bytes | None:
    """`pack_ports` undone (ValueError on anything else)."""
    if text is None:
        return None
    out = bytearray()
    pos = 0
    for m in _PACKED.finditer(text):
        if m.start() != pos:
            break
        first, n = int(m[1], 16), int(m[3]) if m[3] else 1
        if m[2]:
            if first + n > 256:
                break  # counts up past 255
            out += bytes(range(first, first + n))
        else:
            out += bytes([first]) * n
        pos = m.end()
    if pos != len(text):
        raise ValueError(f"not a packed LFT block: {text!r}")
    return bytes(out)


_PACKED = re.compile(r"([0-9a-f]{2})(?:\{(\+?)(\d+)\})?")


def lft_block_json(c: BlockChange) -> dict:
    """One LFT block Set as one plan record (README, "The JSON of a plan"): ``changed``
    entries, ``old`` and ``new`` packed (`pack_ports`)."""
    # bytes(x) is x itself for bytes; a bytearray becomes hashable, for the cache
    changed, old, new = _block_json(None if c.old is None else bytes(c.old), bytes(c.new))
    return {"switch": c.name, "guid": f"0x{c.switch:016x}", "table": "LFTBlock", "block": c.block,
            "changed": changed, "old": old, "new": new}


@functools.lru_cache(maxsize=8192)
def _block_json(old: bytes | None, new: bytes) -> tuple[int, str | None, str | None]:
    """(changed, old packed, new packed) of a block, once per distinct content: the
    11,664-host fabric's 337,000 blocks hold 1,207 distinct contents (switches of one
    level route alike)."""
    return (B if old is None else sum(map(operator.ne, old, new))), pack_ports(old), pack_ports(new)


def lft_block_entries(rec: dict) -> list[dict]:
    """The per-entry ``LFT`` records (`lft_changes_json`) of one ``LFTBlock`` record:
    what a script does to find every changed LFT entry of a compact plan."""
    old, new = unpack_ports(rec["old"]), unpack_ports(rec["new"])
    assert new is not None
    base = rec["block"] * B
    return [{"switch": rec["switch"], "guid": rec["guid"], "table": "LFT", "block": rec["block"], "lid": base + i,
             "old": None if old is None else old[i], "new": new[i]}
            for i in range(len(new)) if old is None or old[i] != new[i]]
