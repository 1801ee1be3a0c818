"""Back up and restore forwarding tables; a journal for applies that may be interrupted.

Three pieces, all reusing `smagent.tableops` (formats, plans) and
`smagent.tables` (block reads and writes):

* `backup_lfts(transport)` -> the text of every switch's LFT in the ``lft dump`` /
  dump_lfts format (a file `lft load`, `restore_lfts` and OpenSM's ``-R file -U`` read).
  `restore_lfts(transport, text)` plans against the live switches and writes only the
  blocks that differ (``dry_run`` plans only).

* `save_before_apply(transport, topology, changes, directory)`: before a sweep or a
  load overwrites LFT blocks, save what those blocks hold now (one JSON file per apply,
  blocks as hex) so that `restore_blocks(transport, file)` (``smagent lft restore FILE``)
  puts them back exactly. Blocks the plan did not read (``old`` None: above the switch's
  LinearFDBTop) are read first.

* `Journal(path)`: ``begin(plan)`` records every block about to be written,
  ``written(switch, block)`` each one confirmed by its GetResp, ``done()`` the end; the
  file is JSON lines, flushed and fsynced per record, so a crash leaves a readable
  prefix. `Journal.pending(path)` returns the interrupted apply (a `PendingApply`: the
  plan, what was written, what was not) or None.

How the sweep should use them (the wiring lives in the sweep; this module only offers it):

    from smagent import backup
    journal = backup.Journal(state_dir / "apply.journal")
    if (p := backup.Journal.pending(journal.path)) is not None:
        notes.append(f"previous apply was interrupted: {len(p.remaining)} of "
                     f"{len(p.plan)} blocks unconfirmed; this sweep re-plans from the live tables")
    if not dry_run and r.lft_changes:
        backup.save_before_apply(transport, topo, r.lft_changes, state_dir / "backups")
        journal.begin(r.lft_changes)
        written, problems = tables.write_lft_blocks(transport, r.lft_changes)
        for c in written:
            journal.written(c.switch, c.block)
        if not problems:
            journal.done()        # a failed apply stays pending: the next sweep reports it

A sweep re-plans from what the switches hold, so an interrupted apply needs no replay:
the journal's job is to say that it happened and which blocks were in flight, and the
saved blocks let an operator roll back (``smagent lft restore FILE``). For a finer
journal, call ``written`` per reply (e.g. from a `tables.write_lft_blocks` variant
with a callback) instead of after the batch.
"""
from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path

from mad import forwarding as fw
from smagent import tables
from smagent.errors import BadInput, FabricFailure

BACKUP_FORMAT = "smagent-lft-blocks/1"
JOURNAL_FORMAT = "smagent-apply-journal/1"


class BackupError(BadInput):
    """A backup or journal file that cannot be used (bad input: exit 2)."""


class RestoreFailed(FabricFailure):
    """Writing a backup back failed on the fabric (exit 3)."""


# ---------------------------------------------------------------------------------------
# whole-table backup in the lft dump format
# ---------------------------------------------------------------------------------------
def backup_lfts(transport, topology=None) -> tuple[str, object]:
    """Every switch's LFT (LIDs 0..LinearFDBTop) as ``lft dump`` prints it.
    Returns (text, topology). Raises RestoreFailed if a block cannot be read."""
    from smagent import discovery
    from smagent import tableops as tc
    topo = topology if topology is not None else discovery.discover(transport)
    sws = sorted((n for n in topo.switches() if n.switch_info is not None), key=lambda n: (len(n.path), n.path))
    wanted = [(n.guid, n.path, b) for n in sws
              for b in range(min(n.switch_info.linear_fdb_top, fw.UNICAST_LID_MAX) // fw.LFT_BLOCK_SIZE + 1)]
    got, errors = tables.read_lft_blocks(transport, wanted)
    if errors:
        raise RestoreFailed("reading LFTs: " + "; ".join(errors[:5]) +
                            (f" (+{len(errors) - 5} more)" if len(errors) > 5 else ""))
    index = tc.lid_index(topo)
    lines = [f"# smagent lft backup {time.strftime('%Y-%m-%dT%H:%M:%S%z')}: {len(sws)} switches"]
    for n in sws:
        top = min(n.switch_info.linear_fdb_top, fw.UNICAST_LID_MAX)
        table = b"".join(got[(n.guid, b)] for b in range(top // fw.LFT_BLOCK_SIZE + 1))
        lines += tc.format_lft(tc.dump_portid_str(n.path), n.guid, n.description, top, table, n.num_ports,
                               dest=tc.DestResolver(index))
    return "\n".join(lines) + "\n", topo


@dataclasses.dataclass
class RestorePlan:
    changes: list  # tables.BlockChange
    tops: list  # tableops.TopChange
    problems: list  # bad input found validating the file against the fabric

    def lines(self) -> list[str]:
        from smagent import tableops as tc
        return tc.lft_plan_lines(self.changes, self.tops)


def plan_restore_text(transport, text: str, source: str = "<backup>", topology=None) -> RestorePlan:
    """Plan writing a dump back (the ``lft load`` logic): raises BackupError (DumpError
    subclass problems) for a file that does not parse."""
    from smagent import discovery
    from smagent import tableops as tc
    try:
        sections = tc.parse_lft_dump(text, source)
    except tc.DumpError as e:
        raise BackupError("\n".join(e.problems)) from None
    topo = topology if topology is not None else discovery.discover(transport)
    facts = tc.facts_from_topology(topo)
    others = {n.guid: n.description for n in topo.nodes.values() if not n.is_switch}
    problems = tc.validate_sections(sections, facts, source, others)
    if problems:
        return RestorePlan([], [], problems)
    current, errors = tables.read_lft_blocks(transport, tc.load_blocks_to_read(sections, facts))
    if errors:
        raise RestoreFailed("reading LFTs: " + "; ".join(errors[:5]))
    changes, tops = tc.plan_load(sections, facts, current)
    return RestorePlan(changes, tops, [])


def apply_restore(transport, plan: RestorePlan, journal: "Journal | None" = None) -> list[str]:
    """Write a restore plan (SwitchInfo tops first, then the blocks); returns problems."""
    from smagent import tableops as tc
    problems = tc.apply_tops(transport, plan.tops)
    if journal is not None:
        journal.begin(plan.changes)
    written, p2 = tables.write_lft_blocks(transport, plan.changes)
    if journal is not None:
        for c in written:
            journal.written(c.switch, c.block)
        if not p2:
            journal.done()
    return problems + p2


# ---------------------------------------------------------------------------------------
# block-level save before an apply
# ---------------------------------------------------------------------------------------
def save_before_apply(transport, topology, changes, directory, *, read_above_top: bool = False) -> Path | None:
    """Save the current content of every LFT block ``changes`` (BlockChange list) is
    about to overwrite into a new JSON file under ``directory``; returns its path (None
    when there is nothing to save). Blocks with ``old`` None lie above the switch's
    LinearFDBTop (not in use); they are skipped unless ``read_above_top``, which reads
    them first. Raises RestoreFailed if a block cannot be read (better not to apply what
    cannot be undone)."""
    if not changes:
        return None
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if not read_above_top:
        # blocks above a switch's LinearFDBTop forward nothing: what they held is not a
        # table anyone used, and reading them all doubles the SMPs of a first sweep
        changes = [c for c in changes if c.old is not None]
        if not changes:
            return None
    unread = [(c.switch, c.path, c.block) for c in changes if c.old is None]
    got, errors = tables.read_lft_blocks(transport, unread) if unread else ({}, [])
    if errors:
        raise RestoreFailed("saving blocks before apply: " + "; ".join(errors[:5]))
    names = {}
    if topology is not None:
        names = {g: n.description for g, n in topology.nodes.items()}
    switches: dict[str, dict] = {}
    for c in changes:
        old = c.old if c.old is not None else got[(c.switch, c.block)]
        sw = switches.setdefault(f"0x{c.switch:016x}", {"name": c.name or names.get(c.switch, ""),
                                                       "path": list(c.path), "blocks": {}})
        sw["blocks"][str(c.block)] = bytes(old).hex()
    doc = {"format": BACKUP_FORMAT, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "switches": switches}
    path = directory / f"lft-before-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{time.monotonic_ns() % 10**6:06d}.json"
    _write_atomic(path, json.dumps(doc, indent=1) + "\n")
    return path


def load_block_backup(path) -> list[tables.BlockChange]:
    """The blocks of a `save_before_apply` file, as BlockChanges with ``new`` = saved
    content and ``old`` None (to be compared with the live table)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise BackupError(f"{path}: not a block backup: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != BACKUP_FORMAT:
        raise BackupError(f"{path}: not a block backup (format {BACKUP_FORMAT!r} expected)")
    out = []
    try:
        for guid, sw in doc["switches"].items():
            g = int(guid, 16)
            for b, hexdata in sw["blocks"].items():
                blk, data = int(b), bytes.fromhex(hexdata)
                if not 0 <= blk < fw.LFT_BLOCKS or len(data) != fw.LFT_BLOCK_SIZE:
                    raise ValueError(f"block {b}: {len(data)} bytes")
                out.append(tables.BlockChange(g, sw.get("name", ""), tuple(sw.get("path", ())), blk, None, data))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BackupError(f"{path}: malformed block backup: {e}") from None
    return out


def plan_restore_blocks(transport, saved: list[tables.BlockChange], topology=None) -> RestorePlan:
    """Compare saved blocks with the live switches (found by GUID, via discovery)."""
    from smagent import discovery
    topo = topology if topology is not None else discovery.discover(transport)
    problems, want = [], []
    for c in saved:
        n = topo.nodes.get(c.switch)
        if n is None or not n.is_switch:
            problems.append(f"switch GUID 0x{c.switch:016x} ({c.name}) is not a switch in this fabric")
            continue
        want.append(dataclasses.replace(c, path=n.path, name=n.description or c.name))
    if problems:
        return RestorePlan([], [], problems)
    current, errors = tables.read_lft_blocks(transport, [(c.switch, c.path, c.block) for c in want])
    if errors:
        raise RestoreFailed("reading LFTs: " + "; ".join(errors[:5]))
    changes = [dataclasses.replace(c, old=current[(c.switch, c.block)]) for c in want
               if current[(c.switch, c.block)] != c.new]
    return RestorePlan(changes, [], [])


# ---------------------------------------------------------------------------------------
# the journal
# ---------------------------------------------------------------------------------------
@dataclasses.dataclass
class PendingApply:
    """An apply that began and never reached ``done``."""
    path: Path
    started: str
    plan: list[dict]  # {"switch": guid, "name", "path", "block", "old", "new"}
    written: set  # {(switch guid, block)}

    @property
    def remaining(self) -> list[dict]:
        return [b for b in self.plan if (b["switch"], b["block"]) not in self.written]


class Journal:
    """JSON-lines journal of one apply at a time (a new ``begin`` starts afresh)."""

    def __init__(self, path):
        self.path = Path(path)
        self._f = None

    def begin(self, plan) -> None:
        """``plan``: BlockChanges (or dicts with switch, block, new[, old, name, path])."""
        self.close()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        blocks = [_block_dict(c) for c in plan]
        self._f = open(self.path, "w", encoding="utf-8")
        self._record({"event": "begin", "format": JOURNAL_FORMAT, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                      "blocks": blocks})

    def written(self, switch: int, block: int) -> None:
        self._need()
        self._record({"event": "written", "switch": f"0x{switch:016x}", "block": block})

    def written_many(self, blocks) -> None:
        """Record many confirmed (switch, block) writes with one fsync: a batch of Sets
        comes back together, and an fsync per block costs more than the Sets."""
        self._need()
        self._record(*({"event": "written", "switch": f"0x{sw:016x}", "block": b} for sw, b in blocks))

    def done(self) -> None:
        self._need()
        self._record({"event": "done", "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
        self.close()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _need(self):
        if self._f is None:
            raise RuntimeError("journal: begin() first")

    def _record(self, *objs) -> None:
        if not objs:
            return
        self._f.write("".join(json.dumps(o, separators=(",", ":")) + "\n" for o in objs))
        self._f.flush()
        os.fsync(self._f.fileno())

    @staticmethod
    def pending(path) -> PendingApply | None:
        """The interrupted apply recorded at ``path``, or None (no file, or it ended with
        ``done``). A torn last line (a crash mid-write) is ignored."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as e:
            raise BackupError(f"{path}: {e}") from None
        begin, written, done = None, set(), False
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                ev = rec["event"]
            except (ValueError, KeyError, TypeError):
                if n == len(text.splitlines()):
                    break  # torn tail
                raise BackupError(f"{path}:{n}: not a journal record") from None
            if ev == "begin":
                begin, written, done = rec, set(), False
            elif ev == "written":
                written.add((int(rec["switch"], 16), int(rec["block"])))
            elif ev == "done":
                done = True
        if begin is None:
            raise BackupError(f"{path}: no 'begin' record: not an apply journal")
        if done:
            return None
        plan = [dict(b, switch=int(b["switch"], 16)) for b in begin["blocks"]]
        return PendingApply(path, begin.get("time", ""), plan, written)


def _block_dict(c) -> dict:
    if isinstance(c, dict):
        d = dict(c)
        sw = d["switch"]
        d["switch"] = sw if isinstance(sw, str) else f"0x{sw:016x}"
        for k in ("old", "new"):
            if isinstance(d.get(k), (bytes, bytearray)):
                d[k] = bytes(d[k]).hex()
        return d
    return {"switch": f"0x{c.switch:016x}", "name": c.name, "path": list(c.path), "block": c.block,
            "old": None if c.old is None else bytes(c.old).hex(), "new": bytes(c.new).hex()}


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
