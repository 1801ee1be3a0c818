"""The apply journal: which table units an apply was about to write, which came back.

``begin(changes)`` records every unit about to be written (LFT blocks, MFT (block,
position) units, RFT blocks, and the link phase's per-port tables: SL2VL, VLArb and
P_Key, with ``block`` their AttributeModifier, ``port`` the CA port their path leads to
(0 on a switch) and, for a switch's SL2VL pairs written unread with a representative,
``also`` their modifiers; each with its table, node GUID (key ``switch``), old and new
content),
``written_many(changes)`` those confirmed by their GetResp (one record per table and one
write per chunk of Sets: ``{"event": "written", "table": T, "units": [[switch, block],
...]}``, an MFT unit with its position and a link table's with its port as a third
item; a journal of format /1 has one record per unit, and is still read), ``done()``
the end. The file is JSON lines, each write flushed, so a crash of smagent leaves a
readable prefix. The begin record and ``done`` are fsynced; a chunk's "written" record
may wait for the fsync of its phase (``sync=False``, then `sync`): a machine that loses
it in a power cut holds an apply whose begin record names every unit, so the next sweep
sees those units as unconfirmed, never as confirmed and not written.
`Journal.pending(path)` returns the interrupted apply (a `PendingApply`) or None.

A finished journal costs nothing to check: ``done()`` moves it into ``journals/`` next to
it (keeping the newest `paths.state_keep()`), so the next sweep finds no file; a journal
left in place with its ``done`` record (a crash before the move, an older smagent) is
recognised from its first and last bytes without reading the rest. A journal that a new
``begin`` finds unfinished is moved there too (``-interrupted``), not overwritten.

A sweep re-plans from what the switches hold, so an interrupted apply needs no replay:
the journal says that it happened and which units were in flight, and the backup taken
before it (`smagent.fdb.backup`) lets an operator roll back.

A journal that is not one (torn by a full disk, garbled) never blocks a sweep: `pending`
reports it and sets it aside (``journals/apply-*-unreadable.journal``). The begin record
is written atomically (`smagent.config.atomicfile`), so a full disk at the start of an apply
leaves no journal rather than a torn one.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from typing import Any, TextIO
from pathlib import Path

from smagent.config import atomicfile, files as paths
from smagent.errors import BadInput
from smagent.fdb.porttables import TABLES as LINK_TABLES

JOURNAL_FORMAT = "smagent-apply-journal/2"  # /2: "written" records list their units
JOURNALS_DIR = paths.StateDir.JOURNALS  # finished (and superseded) journals, next to the live one
_BEGIN_PREFIX = b'{"event":"begin"'  # how `_record` writes a begin record (keys in order)
_TAIL = 256  # bytes read from the end: more than a done record with its newline
log = logging.getLogger(__name__)


class JournalError(BadInput):
    """A journal file that cannot be read (bad input: exit 2)."""


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


TABLES = ("lft", "mft", "rft") + LINK_TABLES  # every "table" a journal may name


def table_of(c) -> str:
    """Which table a change object writes: lft, mft, rft (the class's ``TABLE``: a
    journal lists 337k of them on a large fabric), or a link table (its kind)."""
    table = getattr(type(c), "TABLE", None)
    return table if table is not None else c.kind


def _unit_item(table: str, switch: int, block: int, position=None, port=None) -> list:
    """A confirmed unit in a "written" record: [switch, block], an MFT unit's position
    or a link table's port third (`_written_keys` reads it back)."""
    item: list = [f"0x{switch:016x}", block]
    if table == "mft":
        item.append(position)
    elif table in LINK_TABLES:
        item.append(port or 0)
    return item


def _key(table: str, switch: int, block: int, position=None, port=None) -> tuple:
    """A unit's identity: MFT units have a position; link tables a port (a CA's ports
    share its GUID and their modifiers)."""
    return (table, switch, block, position if table == "mft" else (port or 0) if table in LINK_TABLES else None)


def _content_json(v):
    if v is None:
        return None
    return v.hex() if isinstance(v, (bytes, bytearray)) else list(v)


def path_json(where):
    """A DR path tuple, or a Target's path (None for a LID target: found by GUID later)."""
    if where.__class__ is tuple:  # the usual case, without getattr's miss
        return list(where)
    path = getattr(where, "path", where)
    return None if path is None else list(path)


def unit_dict(c) -> dict:
    """A change (or a dict already in journal form) as its journal record."""
    table = getattr(type(c), "TABLE", None)  # the forwarding-table changes (most units) say it
    if table is None:
        if hasattr(c, "journal_record"):  # smagent.fdb.porttables.TableChange: its tables have their own JSON
            return c.journal_record()
        d = dict(c)  # a record already in journal form
        if not isinstance(d["switch"], str):
            d["switch"] = f"0x{d['switch']:016x}"
        for k in ("old", "new"):
            d[k] = _content_json(d.get(k))
        return d
    d = {"table": table, "switch": f"0x{c.switch:016x}", "name": c.name, "path": path_json(c.path),
         "block": c.block, "old": _content_json(c.old), "new": _content_json(c.new)}
    if table == "mft":
        d["position"] = c.position
    return d


@dataclasses.dataclass
class PendingApply:
    """An apply that began and never reached ``done``."""
    path: Path
    started: str
    plan: list[dict]  # unit records, switch as int
    confirmed: set  # {(table, switch, block, position)}
    backup: str | None = None  # the file saved before it (smagent.fdb.backup), if the journal names one

    @property
    def written(self) -> set:
        """The LFT blocks confirmed: {(switch, block)}."""
        return {(s, b) for t, s, b, _p in self.confirmed if t == "lft"}

    @property
    def remaining(self) -> list[dict]:
        return [u for u in self.plan
                if _key(u.get("table", "lft"), u["switch"], u["block"], u.get("position"), u.get("port"))
                not in self.confirmed]


class Journal:
    """JSON-lines journal of one apply at a time (a new ``begin`` starts afresh).
    ``keep``: how many journals ``journals/`` keeps (default `paths.state_keep()`)."""

    def __init__(self, path, keep: int | None = None):
        self.path = Path(path)
        self.keep = keep
        self._f: TextIO | None = None

    @property
    def archive(self) -> Path:
        return self.path.parent / JOURNALS_DIR

    def begin(self, plan, backup=None) -> None:
        """``plan``: change objects (or dicts with switch, block, new[, table, position, old, name, path]);
        ``backup``: the file `save_before_apply` wrote for this apply (so retention spares it)."""
        self.close()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():  # an apply that never reached done: keep its record
            self._rotate("-interrupted")
        units = [unit_dict(c) for c in plan]
        rec = {"event": "begin", "format": JOURNAL_FORMAT, "time": _now()}
        if backup is not None:
            rec["backup"] = str(backup)
        # the begin record is the whole file so far: written atomically, a full disk
        # leaves no journal rather than a torn one
        atomicfile.write_text(self.path, _lines(dict(rec, blocks=units)))
        self._f = open(self.path, "a", encoding="utf-8")

    def written(self, switch: int, block: int, table: str = "lft", position: int | None = None,
                port: int | None = None) -> None:
        self._need()
        self._record({"event": "written", "table": table, "units": [_unit_item(table, switch, block, position, port)]})

    def written_many(self, units, *, sync: bool = True) -> None:
        """Record many confirmed writes with one write: change objects, or (switch, block)
        pairs of LFT blocks. A batch of Sets comes back together, and an fsync (and a
        record) per unit would cost more than the Sets: one record per table. Without
        ``sync`` the record is flushed, not fsynced (the caller calls `sync` at the end
        of its phase: one fsync for the 330 chunks of an 11,664-host fabric's LFTs)."""
        self._need()
        by_table: dict[str, list] = {}
        for u in units:
            if isinstance(u, tuple):
                by_table.setdefault("lft", []).append(_unit_item("lft", *u))
                continue
            table = table_of(u)
            by_table.setdefault(table, []).append(
                _unit_item(table, u.switch, u.block, getattr(u, "position", None), getattr(u, "port", None)))
        self._record(*({"event": "written", "table": t, "units": items} for t, items in by_table.items()),
                     sync=sync)

    def sync(self) -> None:
        """Make every record written so far durable (after ``written_many(sync=False)``)."""
        f = self._f
        if f is None:
            raise RuntimeError("journal: begin() first")
        os.fsync(f.fileno())

    def done(self) -> None:
        """Record the end and move the journal into ``journals/``: a finished apply leaves
        nothing for the next sweep to read. Should the move fail, the ``done`` record is
        on disk and `pending` still sees the apply finished."""
        self._need()
        self._record({"event": "done", "time": _now()})
        self.close()
        self._rotate("")

    def _rotate(self, suffix: str) -> None:
        try:
            self.archive.mkdir(exist_ok=True)
            os.replace(self.path, self.archive / f"apply-{paths.stamp()}{suffix}.journal")
        except FileNotFoundError:
            return
        keep = self.keep if self.keep is not None else paths.state_keep()
        paths.keep_newest(self.archive, "apply-*.journal", keep)

    def close(self) -> None:
        f, self._f = self._f, None  # closed even if the close fails (a full disk)
        if f is not None:
            f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _need(self):
        if self._f is None:
            raise RuntimeError("journal: begin() first")

    def _record(self, *objs, sync: bool = True) -> None:
        if not objs:
            return
        f = self._f
        if f is None:
            raise RuntimeError("journal: begin() first")
        f.write(_lines(*objs))
        f.flush()
        if sync:
            os.fsync(f.fileno())

    @staticmethod
    def pending(path, *, set_aside: bool = True) -> PendingApply | None:
        """The interrupted apply recorded at ``path``, or None (no file, or it ended with
        ``done``). A torn last line (a crash mid-write) is ignored. A finished journal is
        told by its first and last bytes; only an unfinished one is read whole.

        A journal that cannot be read or is not one (truncated by a full disk, garbled)
        is a `JournalError`; with ``set_aside`` (what a sweep wants: such a file must
        never stop routing) it is logged as a warning, moved into ``journals/`` as
        ``apply-<stamp>-unreadable.journal`` for an operator, and None returned."""
        path = Path(path)
        try:
            paths.check_state_file(path, "apply journal")  # a device or a FIFO is never opened to read
            if _finished(path):
                return None
            return _read_records(path, paths.read_state_text(path, "apply journal").splitlines())
        except FileNotFoundError:
            return None
        except BadInput as e:
            err = JournalError(str(e))
        except (OSError, UnicodeDecodeError) as e:
            err = JournalError(f"{path}: {e}")
        except JournalError as e:
            err = e
        if not set_aside:
            raise err
        _set_aside(path, err)
        return None


def _lines(*objs) -> str:
    return "".join(json.dumps(o, separators=(",", ":")) + "\n" for o in objs)


def _set_aside(path: Path, err: JournalError) -> None:
    """Move an unreadable journal out of the way, keeping it (see `Journal.pending`)."""
    target = path.parent / JOURNALS_DIR / f"apply-{paths.stamp()}-unreadable.journal"
    try:
        target.parent.mkdir(exist_ok=True)
        os.replace(path, target)
    except OSError as e:
        log.warning("%s; it could not be set aside (%s), the next apply replaces it", err, e.strerror or e)
        return
    log.warning("%s; set aside as %s (what that apply wrote is unknown: the sweep re-plans from the switches)",
                err, target)


def _finished(path: Path) -> bool:
    """The journal begins with a begin record and its last line is a whole done record
    (one apply per file: `begin` truncates, `done` is the last write). Anything else,
    a torn tail included, is left to the full read."""
    with open(path, "rb") as f:
        head = f.read(len(_BEGIN_PREFIX))
        if head != _BEGIN_PREFIX:
            return False
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - _TAIL))
        tail = f.read()
    if not tail.endswith(b"\n"):
        return False
    try:
        rec = json.loads(tail.rstrip(b"\n").rsplit(b"\n", 1)[-1])
    except ValueError:
        return False
    return isinstance(rec, dict) and rec.get("event") == "done"


def _written_keys(rec: dict) -> list[tuple]:
    """The units a "written" record confirms: a list of them (format /2) or one (/1)."""
    table = rec.get("table", "lft")
    if table not in TABLES:
        raise ValueError(table)  # a table this smagent does not know: not its journal
    if "units" not in rec:
        return [_key(table, int(rec["switch"], 16), int(rec["block"]), rec.get("position"), rec.get("port"))]
    third = table == "mft" or table in LINK_TABLES
    return [_key(table, int(u[0], 16), int(u[1]), u[2] if third else None, u[2] if third else None)
            for u in rec["units"]]


def _read_records(path: Path, lines: list[str]) -> PendingApply | None:
    confirmed: set[tuple[Any, ...]] = set()
    begin, done = None, False
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            ev = rec["event"]
            if ev == "written":
                keys = _written_keys(rec)
        except (ValueError, KeyError, TypeError, AttributeError):
            if n == len(lines):
                break  # torn tail
            raise JournalError(f"{path}:{n}: not a journal record") from None
        if ev == "begin":
            begin, confirmed, done = rec, set(), False
        elif ev == "written":
            confirmed.update(keys)
        elif ev == "done":
            done = True
    if begin is None:
        raise JournalError(f"{path}: no 'begin' record: not an apply journal")
    if done:
        return None
    try:
        plan = [dict(u, switch=int(u["switch"], 16)) for u in begin["blocks"]]
        if any(u.get("table", "lft") not in TABLES for u in plan):
            raise ValueError("unknown table")
    except (KeyError, TypeError, ValueError, AttributeError):
        raise JournalError(f"{path}: malformed 'begin' record") from None
    return PendingApply(path, begin.get("time", ""), plan, confirmed, begin.get("backup"))
