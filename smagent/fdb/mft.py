"""MulticastForwardingTable: the unit one SMP carries is (block of 32 MLIDs, PortMask
position of 16 ports) (docs/PITFALLS.md). Units from {mlid: ports}, reads,
diffs, the raw writes (`apply` adds backup and journal), and the `mft set` plan.
Groups and their spanning trees are `smagent.planning.multicast`."""
from __future__ import annotations

import dataclasses
from typing import ClassVar, Sequence

from mad import forwarding as fw
from mad.attributes import AttrID, MulticastForwardingTable
from smagent.fdb.switch import TableFailure, Where, failed_units_lines, interleave, read_units, set_units
from smagent.transport.base import Transport


def _ports_str(ports) -> str:
    return "{" + ",".join(map(str, sorted(ports))) + "}"


@dataclasses.dataclass
class MftChange:
    """One (block, position) of a switch's MFT: its 32 PortMasks as read and as wanted."""
    TABLE: ClassVar[str] = "mft"  # what `fdb.journal.table_of` names it
    switch: int
    name: str
    path: Where  # DR path tuple, or a Target
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
                out.append((fw.mft_mlid(self.block, i), None if o is None else fw.mask_ports(o, self.position),
                            fw.mask_ports(self.new[i], self.position)))
        return out

    def describe(self) -> str:
        """The sweep's plan line: port sets per MLID."""
        parts = [f"mlid 0x{mlid:04x}: ports {'?' if o is None else _ports_str(o)} -> {_ports_str(n)}"
                 for mlid, o, n in self.changed_mlids()]
        return f"{self.name} block {self.block} position {self.position}: " + "; ".join(parts)

    def lines(self) -> list[str]:
        """`mft set`'s plan lines: the ports of each changed MLID in this position, as the
        sweep's plan shows them (`describe`; `mft show` keeps ibroute's PortMask words)."""
        return [f"{self.name} MFT block {self.block} position {self.position}: "
                f"mlid 0x{mlid:04x}: ports {'?' if o is None else _ports_str(o)} -> {_ports_str(n)}"
                for mlid, o, n in self.changed_mlids()]


def mft_entries_json(c: MftChange) -> list[dict]:
    """The per-entry plan records of one (block, position) Set: one ``MFT`` record per
    MLID whose ports there change (old: null when not read; ports as sorted lists)."""
    guid = f"0x{c.switch:016x}"
    return [_entry_json(c.name, guid, c.block, c.position, i, None if c.old is None else c.old[i], c.new[i])
            for i in range(fw.MFT_BLOCK_SIZE) if c.old is None or c.old[i] != c.new[i]]


def _entry_json(name: str, guid: str, block: int, position: int, i: int, old: int | None, new: int) -> dict:
    return {"switch": name, "guid": guid, "table": "MFT", "block": block, "position": position,
            "mlid": f"0x{fw.mft_mlid(block, i):04x}",
            "old": None if old is None else sorted(fw.mask_ports(old, position)),
            "new": sorted(fw.mask_ports(new, position))}


def mft_block_json(c: MftChange) -> dict:
    """One (block, position) Set as one compact plan record (README, "The JSON of a plan"):
    ``mlids`` the block's 32 MLIDs ("0xc000-0xc01f"), ``changed`` those whose ports there
    change, ``old`` (null: not read) and ``new`` the 32 PortMask words (bit b of word i:
    port 16·position + b of MLID 0xC000 + 32·block + i) without their trailing zero words."""
    return {"switch": c.name, "guid": f"0x{c.switch:016x}", "table": "MFTBlock", "block": c.block,
            "position": c.position, "mlids": f"0x{fw.mft_mlid(c.block, 0):04x}-0x{fw.mft_mlid(c.block, 0) + 31:04x}",
            "changed": fw.MFT_BLOCK_SIZE if c.old is None else sum(o != n for o, n in zip(c.old, c.new)),
            "old": None if c.old is None else _trimmed(c.old), "new": _trimmed(c.new)}


def _trimmed(masks: list[int]) -> list[int]:
    n = len(masks)
    while n and not masks[n - 1]:
        n -= 1
    return list(masks[:n])


def mft_block_entries(rec: dict) -> list[dict]:
    """The per-entry ``MFT`` records (`mft_entries_json`) of one ``MFTBlock`` record."""
    def words(masks):
        return None if masks is None else list(masks) + [0] * (fw.MFT_BLOCK_SIZE - len(masks))
    old, new = words(rec["old"]), words(rec["new"])
    assert new is not None
    return [_entry_json(rec["switch"], rec["guid"], rec["block"], rec["position"], i,
                        None if old is None else old[i], new[i])
            for i in range(fw.MFT_BLOCK_SIZE) if old is None or old[i] != new[i]]


def mft_units(entries: dict[int, frozenset[int]], blocks, positions: int) -> dict[tuple[int, int], list[int]]:
    """{mlid: ports} as the full content of every (block, position) in blocks x positions:
    MLIDs not in `entries` are empty (so a diff clears stale entries there)."""
    units = {(b, p): [0] * fw.MFT_BLOCK_SIZE for b in blocks for p in range(positions)}
    for mlid, ports in entries.items():
        b, i = fw.mft_block(mlid)
        masks = fw.ports_masks(ports, fw.MFT_POSITIONS)
        for pos, m in enumerate(masks):
            if not m:
                continue
            if (b, pos) not in units:
                raise ValueError(f"MLID 0x{mlid:04x} port {min(fw.mask_ports(m, pos))}: block {b} position {pos} "
                                 f"is outside the planned units")
            units[(b, pos)][i] |= m
    return units


def read_mft_units(transport: Transport, wanted: Sequence[tuple[int, Where, int, int]]
                   ) -> tuple[dict[tuple[int, int, int], list[int]], list[str]]:
    """Read (switch, path, block, position); returns {(switch, block, position): [32 masks]}
    for those that answered, and errors."""
    return read_units(transport, wanted, AttrID.MULTICAST_FORWARDING_TABLE, fw.mft_modifier,
                      lambda v: list(v.port_masks), lambda b, p: f"MFT block {b} position {p}")


def read_mft(transport, target, blocks, positions: int) -> dict[tuple[int, int], list[int]]:
    """Units of one switch; TableFailure on the first that does not answer."""
    got, errors = read_mft_units(transport, [(0, target, b, p) for b in blocks for p in range(positions)])
    if errors:
        raise TableFailure(errors[0])
    return {(b, p): masks for (_sw, b, p), masks in got.items()}


def diff_mft(switch: int, name: str, path, desired: dict[tuple[int, int], list[int]],
             current: dict[tuple[int, int, int], list[int]]) -> list[MftChange]:
    out = []
    for (b, p), new in sorted(desired.items()):
        old = current.get((switch, b, p))
        if old != new:
            out.append(MftChange(switch, name, path, b, p, old, list(new)))
    return out


def keep_unconfigured(desired: dict[tuple[int, int], list[int]], current: dict[tuple[int, int, int], list[int]],
                      switch: int, configured: set[int]) -> dict[int, list[int]]:
    """Copy into ``desired`` (this switch's units) the entries the switch holds now for
    MLIDs outside ``configured``: a sweep keeps multicast it was not told about (an admin's
    `mft set`, another tool's group). Returns {mlid: ports} of what was kept."""
    kept: dict[int, set[int]] = {}
    for (b, p), masks in desired.items():
        cur = current.get((switch, b, p)) or ()
        for i in [i for i, m in enumerate(cur) if m]:  # most entries are empty: no MLID worked out for them
            mlid = fw.mft_mlid(b, i)
            if mlid not in configured:
                masks[i] = cur[i]
                kept.setdefault(mlid, set()).update(fw.mask_ports(cur[i], p))
    return {mlid: sorted(ports) for mlid, ports in sorted(kept.items())}


def write_mft_units(transport, changes: list[MftChange]):
    """SubnSet every changed (block, position); the GetResp is the read-back."""
    written, problems, failed = [], [], []
    for c, r in set_units(transport, interleave(changes), AttrID.MULTICAST_FORWARDING_TABLE,
                          lambda c: fw.mft_modifier(c.block, c.position),
                          lambda c: MulticastForwardingTable(port_masks=list(c.new))):
        if not r.ok:
            failed.append((c.name, f"{c.block} position {c.position}", f"Set failed: {r.error}"))
            continue
        back = list(r.value(MulticastForwardingTable).port_masks)
        if back != c.new:
            bad = [fw.mft_mlid(c.block, i) for i in range(fw.MFT_BLOCK_SIZE) if back[i] != c.new[i]]
            problems.append(f"{c.name} MFT block {c.block} position {c.position}: read back differs at MLIDs "
                            + ", ".join(f"0x{m:04x}" for m in bad[:8]))
        written.append(c)
    return written, failed_units_lines(failed, "MFT block") + problems


# -- what ibroute -M shows, and the `mft set` command ----------------------------------------
def mft_range(cap: int, top: int) -> tuple[int, int]:
    """The MLIDs ibroute -M shows: 0xC000 .. 0xC000+cap-1, cut at MulticastFDBTop if set."""
    end = fw.MULTICAST_LID_MIN + cap - 1
    if top and top < end and top >= fw.MULTICAST_LID_MIN - 1:
        end = top
    return fw.MULTICAST_LID_MIN, min(end, fw.MULTICAST_LID_MAX)


def mft_blocks_to_read(cap: int, top: int) -> list[int]:
    start, end = mft_range(cap, top)
    if end < start:
        return []
    return list(range(0, (end - fw.MULTICAST_LID_MIN) // fw.MFT_BLOCK_SIZE + 1))


def mft_ports(masks, mlid: int, positions: int) -> list[int]:
    """The ports of ``mlid`` in units ``masks[(block, position)]``."""
    block, i = fw.mft_block(mlid)
    return fw.masks_ports([masks.get((block, p), [0] * fw.MFT_BLOCK_SIZE)[i] for p in range(positions)])


def check_mft_entry(f, mlid: int, ports) -> list[str]:
    out = []
    cap = f.switch_info.multicast_fdb_cap
    if cap == 0:
        out.append(f"{f.name} has no MulticastForwardingTable (MulticastFDBCap 0)")
    elif mlid > fw.MULTICAST_LID_MIN + cap - 1:
        out.append(f"MLID 0x{mlid:04x} is beyond {f.name}'s MulticastFDBCap {cap} "
                   f"(MLIDs 0xc000..0x{fw.MULTICAST_LID_MIN + cap - 1:04x})")
    for port in ports:
        if not 0 <= port <= f.num_ports:
            out.append(f"port {port} does not exist on {f.name}: ports 0..{f.num_ports}")
    return out


def plan_mft_set(f, mlid: int, ports, current: dict[tuple[int, int], list[int]]) -> list[MftChange]:
    """Replace MLID's port set; only positions whose mask changes are written (a position
    already zero and left without member ports is not)."""
    positions = fw.mft_positions_for(f.num_ports)
    block, i = fw.mft_block(mlid)
    want = fw.ports_masks(ports, positions)
    out = []
    for p in range(positions):
        old = list(current[(block, p)])
        if old[i] == want[p]:
            continue
        new = list(old)
        new[i] = want[p]
        out.append(MftChange(f.guid, f.name, f.where(), block, p, old, new))
    return out


def mft_changes_json(changes: list[MftChange], mlid: int) -> list[dict]:
    i = fw.mft_block(mlid)[1]
    return [{"switch": c.name, "guid": f"0x{c.switch:016x}", "table": "MFT", "block": c.block,
             "position": c.position, "mlid": f"0x{mlid:04x}", "old": None if c.old is None else c.old[i], "new": c.new[i]}
            for c in changes]
