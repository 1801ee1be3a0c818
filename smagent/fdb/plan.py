"""The changes of one apply, by table: what `smagent.fdb.apply` writes and a restore
(`smagent.fdb.backup`) plans. Its own module so that both import it, not each other."""
from __future__ import annotations

import dataclasses
from typing import Iterator

from smagent.fdb import lft as linear, mft as multicast
from smagent.fdb.switch import interleave


@dataclasses.dataclass
class Plan:
    """The changes of one apply, by table."""
    tops: list = dataclasses.field(default_factory=list)  # tops.SwitchInfoChange
    lft: list = dataclasses.field(default_factory=list)  # linear.BlockChange
    rft: list = dataclasses.field(default_factory=list)  # random.RftChange
    mft: list = dataclasses.field(default_factory=list)  # multicast.MftChange
    links: list = dataclasses.field(default_factory=list)  # links.TableChange: SL2VL, VLArb, P_Key

    def __bool__(self) -> bool:
        return bool(self.tops or self.lft or self.rft or self.mft or self.links)

    def sets(self) -> dict:
        """Sets by kind (RFT and MFT only when there are some: the lft commands' keys)."""
        out = {"switchinfo": len(self.tops), "lft_blocks": len(self.lft)}
        out.update({k: len(v) for k, v in (("rft_blocks", self.rft), ("mft_blocks", self.mft)) if v})
        for c in self.links:
            out[c.kind] = out.get(c.kind, 0) + 1
        return out

    def lines(self) -> list[str]:
        """The plan as the table commands print it."""
        return (linear.lft_plan_lines(self.lft, self.tops)
                + [f"SubnSet(RandomForwardingTable) {c.describe()}" for c in interleave(self.rft)]
                + [line for c in interleave(self.mft) for line in c.lines()]
                + [c.describe() for c in self.links])

    def to_json(self) -> list[dict]:
        """One record per changed entry (SwitchInfo field, LID, MLID, RFT slot)."""
        return list(self.records(detail=True))

    def records(self, detail: bool = True, lids: tuple[int, int] | None = None) -> Iterator[dict]:
        """The records of `to_json`, one at a time; ``detail`` False: one ``LFTBlock``
        record per LFT block instead of one ``LFT`` record per entry, one ``MFTBlock``
        record per MFT (block, position) instead of one ``MFT`` record per MLID; ``lids``
        (first, last): only the LFT entries of those LIDs, one record each."""
        yield from (d for t in self.tops for d in t.to_json())
        for b in interleave(self.lft):
            if lids is not None:
                if lids[0] <= b.block * linear.B + linear.B - 1 and b.block * linear.B <= lids[1]:
                    yield from (d for d in linear.lft_changes_json([b], []) if lids[0] <= d["lid"] <= lids[1])
            elif detail:
                yield from linear.lft_changes_json([b], [])
            else:
                yield linear.lft_block_json(b)
        out: list[dict] = []
        for c in interleave(self.rft):
            out += [{"switch": c.name, "guid": f"0x{c.switch:016x}", "table": "RFT", "block": c.block, "entry": e,
                     "old": o, "new": n} for e, o, n in c.changed_entries()]
        for c in interleave(self.mft):
            if detail:
                out += multicast.mft_entries_json(c)
            else:
                out.append(multicast.mft_block_json(c))
        for c in self.links:
            rec = c.journal_record()
            table = {"pkeys": "P_KEY", "guids": "GUIDINFO"}.get(c.kind, c.kind.upper())
            out.append({"switch": c.name, "guid": rec["switch"], "table": table, "modifier": c.modifier,
                        "port": c.port, "old": rec["old"], "new": rec["new"]})
        yield from out
