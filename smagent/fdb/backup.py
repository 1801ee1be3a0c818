"""Backups of forwarding tables, and restoring them.

* `backup_lfts(transport)`: every switch's LFT as ``lft dump`` / dump_lfts text (a file
  `lft load`, `lft restore` and OpenSM's ``-R file -U`` read).
* `save_before_apply(...)`: before an apply (`smagent.fdb.apply`) overwrites anything, save
  what it overwrites into one JSON file per apply: LFT blocks (hex), MFT units and RFT
  blocks (lists of words), the SwitchInfo fields it changes (LinearFDBTop,
  MulticastFDBTop, DefaultPort, ...), and the link phase's per-port tables (section
  ``links`` of a node, CA or switch: SL2VL, VLArb and P_Key tables as the sweep read them
  before writing; a switch's SL2VL pairs written unread are listed, as ``also``, with the
  pair read in their place, and ``all_inputs`` where one Set wrote them all: a switch with
  OptimizedSLtoVLMappingProgramming). `load_backup` reads it back and `plan_restore_saved` plans
  putting exactly that back (``smagent lft restore FILE``); the unread pairs get the
  table of the pair read in their place, and the restore says so.

Retention: `prune` keeps the newest `paths.state_keep()` files ``lft-before-*.json`` of a
backup directory, and never the one an unfinished apply names (the apply's own, and the one
of an apply the journal says was interrupted).

What a restore cannot undo: PortInfo (the LIDs, LMC and MasterSMLID a sweep assigned, and
the link fields: GidPrefix, NeighborMTU, OperationalVLs, HOQLife, ...) is not a table and
is not saved; `CANNOT_UNDO` says so wherever a restore is planned.
"""
from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

from mad import forwarding as fw
from smagent.fdb import porttables as linktab
from smagent.config import atomicfile, files as paths
from smagent.fdb import lft as linear, tops
from smagent.fdb import mft
from smagent.fdb import rft
from smagent.model import lftdump as fmt
from smagent.fdb.journal import path_json
from smagent.fdb.plan import Plan
from smagent.fdb.switch import TableFailure
from smagent.errors import BadInput

if TYPE_CHECKING:
    from smagent.discovery import Topology
    from smagent.transport.base import Transport

BACKUP_FORMAT = "smagent-fdb-backup/2"  # /2: nodes may have a "links" section
BACKUP_GLOB = "lft-before-*.json"
# still restored: /1 (no links section), LFT blocks only
_OLD_FORMATS = {"smagent-fdb-backup/1", "smagent-lft-blocks/1"}
# what a node's entry may hold; anything else is a file from a newer smagent: refused whole
_NODE_KEYS = {"name", "path", "blocks", "switchinfo", "mft", "rft", "links"}
CANNOT_UNDO = ("a restore puts back forwarding tables, SwitchInfo and the SL2VL, VLArb and P_Key tables; it "
               "cannot undo the LIDs, LMC and MasterSMLID a sweep assigned nor the PortInfo link fields (MTU, "
               "VLs, HOQLife, GidPrefix: PortInfo is not saved): run a sweep with the old settings for those")


class BackupError(BadInput):
    """A backup file that cannot be used (bad input: exit 2)."""


class RestoreFailed(TableFailure):
    """Reading or writing tables for a backup or restore failed on the fabric (exit 3)."""


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


# -- whole-table backup in the lft dump format ------------------------------------------------
def backup_lfts(transport: Transport, topology: Topology | None = None) -> tuple[str, Topology]:
    """Every switch's LFT (LIDs 0..LinearFDBTop) as ``lft dump`` prints it.
    Returns (text, topology). Raises RestoreFailed if a block cannot be read."""
    from smagent import discovery
    topo = topology if topology is not None else discovery.discover(transport)
    sws = fmt.dump_order(topo)
    try:
        tables = linear.read_all(transport, sws)
    except TableFailure as e:
        raise RestoreFailed(str(e)) from None
    lines = [f"# smagent lft backup {_now()}: {len(tables)} switches"]  # those with an LFT
    return "\n".join(lines + fmt.format_lft_dump(topo, tables)) + "\n", topo


# -- what an apply overwrites -------------------------------------------------------------------
@dataclasses.dataclass
class Saved:
    """A backup's content as changes whose ``new`` is what was saved (``old`` None)."""
    lft: list = dataclasses.field(default_factory=list)
    tops: list = dataclasses.field(default_factory=list)  # (switch, name, path, {field: value})
    mft: list = dataclasses.field(default_factory=list)
    rft: list = dataclasses.field(default_factory=list)
    links: list = dataclasses.field(default_factory=list)  # links.TableChange (also: the unread pairs)


def save_before_apply(transport, topology, changes, directory, *, switchinfo=(), mft_units=(), rft_blocks=(),
                      link_tables=(), read_above_top: bool = False) -> Path | None:
    """Save what an apply is about to overwrite into a new JSON file under ``directory``;
    returns its path (None when there is nothing to save). ``changes``: LFT BlockChanges;
    ``switchinfo``/``mft_units``/``rft_blocks``/``link_tables``: the other changes of the
    apply (link tables: those read before, with the unread pairs in ``also``). LFT blocks
    with ``old`` None lie above the switch's LinearFDBTop (not in use); they are skipped
    unless ``read_above_top``, which reads them first. Raises RestoreFailed if a block
    cannot be read (better not to apply what cannot be undone)."""
    if not read_above_top:
        # blocks above a switch's LinearFDBTop forward nothing: what they held is not a
        # table anyone used, and reading them all doubles the SMPs of a first sweep
        changes = [c for c in changes if c.old is not None]
    mft_units = [c for c in mft_units if c.old is not None]
    # PortStateChange is an event flag, not a setting: a Set that only clears it saves nothing
    switchinfo = [c for c in switchinfo if set(c.changed()) - {"port_state_change"}]
    link_tables = [c for c in link_tables if c.old is not None]
    if not (changes or switchinfo or mft_units or rft_blocks or link_tables):
        return None
    unread = [(c.switch, c.path, c.block) for c in changes if c.old is None]
    got, errors = linear.read_lft_blocks(transport, unread) if unread else ({}, [])
    if errors:
        raise RestoreFailed("saving blocks before apply: " + "; ".join(errors[:5]))
    names = {g: n.description for g, n in topology.nodes.items()} if topology is not None else {}
    switches: dict[str, dict] = {}

    def entry(c) -> dict:
        return switches.setdefault(f"0x{c.switch:016x}", {"name": c.name or names.get(c.switch, ""),
                                                          "path": path_json(c.path), "blocks": {}})
    for c in changes:
        old = c.old if c.old is not None else got[(c.switch, c.block)]
        entry(c)["blocks"][str(c.block)] = bytes(old).hex()
    for c in switchinfo:
        entry(c).setdefault("switchinfo", {}).update(
            {k: getattr(c.old, k) for k in c.changed() if k != "port_state_change"})
    for c in mft_units:
        entry(c).setdefault("mft", {})[f"{c.block},{c.position}"] = list(c.old)
    for c in rft_blocks:
        entry(c).setdefault("rft", {})[str(c.block)] = list(c.old)
    for c in link_tables:
        rec = {"table": c.kind, "port": c.port, "modifier": c.modifier, "path": path_json(c.path),
               "value": linktab.table_json(c.kind, c.old)}
        if c.also:
            rec["also"] = list(c.also)
        if c.all_inputs:
            rec["all_inputs"] = True  # written, and put back, by one Set for all input ports
        entry(c).setdefault("links", []).append(rec)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / BACKUP_GLOB.replace("*", paths.stamp())
    atomicfile.write_text(path, _backup_text(switches))
    return path


def _backup_text(switches: dict) -> str:
    """The backup document, one node a line: readable, and written by json's C encoder
    (an indented dump of a 648-host fat tree's link tables took seconds)."""
    head = json.dumps({"format": BACKUP_FORMAT, "created": _now()})[:-1]
    nodes = ",\n".join(f" {json.dumps(g)}: {json.dumps(sw, separators=(',', ':'))}" for g, sw in switches.items())
    return f'{head},\n"switches": {{\n{nodes}\n}}}}\n'


def prune(directory, keep: int | None = None, protect=()) -> list[Path]:
    """Delete all but the newest ``keep`` backups of ``directory`` (default
    `paths.state_keep()`), never one in ``protect``; returns what was deleted."""
    keep = keep if keep is not None else paths.state_keep()
    return paths.keep_newest(directory, BACKUP_GLOB, keep, protect)


def load_backup(path) -> Saved:
    """A `save_before_apply` file; every problem is a BackupError naming the file."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise BackupError(f"{path}: not a block backup: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") not in {BACKUP_FORMAT, *_OLD_FORMATS}:
        raise BackupError(f"{path}: not a block backup (format {BACKUP_FORMAT!r} expected)")
    out = Saved()
    try:
        for guid, sw in doc["switches"].items():
            _load_switch(out, int(guid, 16), sw)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BackupError(f"{path}: malformed block backup: {e}") from None
    return out


def _load_switch(out: Saved, g: int, sw: dict) -> None:
    if set(sw) - _NODE_KEYS:
        raise ValueError(f"unknown sections {sorted(set(sw) - _NODE_KEYS)}")
    name, path = sw.get("name", ""), tuple(sw.get("path") or ())
    for b, hexdata in sw["blocks"].items():
        blk, data = int(b), bytes.fromhex(hexdata)
        if not 0 <= blk < fw.LFT_BLOCKS or len(data) != fw.LFT_BLOCK_SIZE:
            raise ValueError(f"LFT block {b}: {len(data)} bytes")
        out.lft.append(linear.BlockChange(g, name, path, blk, None, data))
    for unit, masks in sw.get("mft", {}).items():
        b, p = (int(x) for x in unit.split(","))
        fw.mft_modifier(b, p)  # checks both
        if len(masks) != fw.MFT_BLOCK_SIZE or not all(isinstance(m, int) and 0 <= m <= 0xFFFF for m in masks):
            raise ValueError(f"MFT unit {unit}: 32 masks of 16 bits expected")
        out.mft.append(mft.MftChange(g, name, path, b, p, None, list(masks)))
    for b, entries in sw.get("rft", {}).items():
        fw.rft_modifier(int(b))
        if len(entries) != fw.RFT_BLOCK_SIZE or not all(isinstance(e, int) and 0 <= e < 1 << 32 for e in entries):
            raise ValueError(f"RFT block {b}: 16 entries of 32 bits expected")
        out.rft.append(rft.RftChange(g, name, path, int(b), None, list(entries)))
    si = sw.get("switchinfo", {})
    bad = sorted(set(si) - set(tops.FIELDS) | {k for k, v in si.items() if not isinstance(v, int)})
    if bad:
        raise ValueError(f"SwitchInfo fields {bad}")
    if si:
        out.tops.append((g, name, path, dict(si)))
    for u in sw.get("links", ()):
        kind, port, modifier = u["table"], u["port"], u["modifier"]
        if kind not in linktab.TABLES or not isinstance(port, int) or not 0 <= port <= 254:
            raise ValueError(f"link table {kind!r} port {port!r}")
        linktab.check_modifier(kind, modifier)
        also = tuple(u.get("also", ()))
        for m in also:
            if kind != "sl2vl":
                raise ValueError(f"{kind}: 'also' is for SL2VL pairs")
            linktab.check_modifier(kind, m)
        all_inputs = u.get("all_inputs", False)
        if all_inputs is not False and (all_inputs is not True or kind != "sl2vl"):
            raise ValueError(f"{kind}: 'all_inputs' is true or absent, and for SL2VL pairs")
        out.links.append(linktab.TableChange(kind, g, name, tuple(u.get("path") or path), modifier, None,
                                             linktab.table_from_json(kind, u["value"]), port=port, also=also,
                                             all_inputs=all_inputs))


def load_block_backup(path) -> list:
    """The LFT blocks of a backup file (BlockChanges, ``new`` = saved, ``old`` None)."""
    return load_backup(path).lft


def plan_restore_saved(transport, saved: Saved, topology=None):
    """Compare a backup with the live switches (found by GUID, via discovery): returns
    (apply.Plan, problems); problems (a switch missing) mean nothing is planned."""
    from smagent import discovery
    topo = topology if topology is not None else discovery.discover(transport)
    problems = []
    for g, name in sorted({(c.switch, c.name) for c in saved.lft + saved.mft + saved.rft}
                          | {(t[0], t[1]) for t in saved.tops}):
        n = topo.nodes.get(g)
        if n is None or not n.is_switch:
            problems.append(f"switch GUID 0x{g:016x} ({name}) is not a switch in this fabric")
    link_want = _links_here(topo, saved.links, problems)
    if problems:
        return Plan(), problems

    def here(c):
        n = topo.nodes[c.switch]
        return dataclasses.replace(c, path=n.path, name=n.description or c.name)
    lft_want, mft_want, rft_want = [here(c) for c in saved.lft], [here(c) for c in saved.mft], [here(c) for c in saved.rft]
    cur_l, e1 = linear.read_lft_blocks(transport, [(c.switch, c.path, c.block) for c in lft_want])
    cur_m, e2 = mft.read_mft_units(transport, [(c.switch, c.path, c.block, c.position) for c in mft_want])
    cur_r, e3 = rft.read_rft_blocks(transport, [(c.switch, c.path, c.block) for c in rft_want])
    if e1 or e2 or e3:
        raise RestoreFailed("reading tables: " + "; ".join((e1 + e2 + e3)[:5]))
    plan = Plan()
    plan.lft = [dataclasses.replace(c, old=cur_l[(c.switch, c.block)]) for c in lft_want
                if cur_l[(c.switch, c.block)] != c.new]
    plan.mft = [dataclasses.replace(c, old=cur_m[(c.switch, c.block, c.position)]) for c in mft_want
                if cur_m[(c.switch, c.block, c.position)] != c.new]
    plan.rft = [dataclasses.replace(c, old=cur_r[(c.switch, c.block)]) for c in rft_want
                if [fw.rft_norm(x) for x in cur_r[(c.switch, c.block)]] != [fw.rft_norm(x) for x in c.new]]
    for g, _name, _path, fields in saved.tops:
        n = topo.nodes[g]
        if n.switch_info is None:  # discovery could not read it: nothing to echo the saved fields into
            raise RestoreFailed(f"{n.description or hex(g)}: SwitchInfo could not be read; its saved "
                                f"SwitchInfo fields cannot be restored")
        t = tops.change(g, n.description, n.path, n.switch_info, fields)
        if t is not None:
            plan.tops.append(t)
    plan.links = _plan_links(transport, link_want)
    return plan, []


def _links_here(topo, saved_links, problems) -> list:
    """The saved link tables addressed in this fabric (the node by GUID; a CA's port by
    number); what cannot be found goes to ``problems``."""
    out = []
    for c in saved_links:
        n = topo.nodes.get(c.guid)
        path = None if n is None else (n.path if n.is_switch else n.port_paths.get(c.port))
        if path is None:
            where = f"node GUID 0x{c.guid:016x} ({c.name})" + ("" if n is None else f" port {c.port}")
            problems.append(f"{where} is not in this fabric (its saved {c.kind} table cannot be put back)")
        else:
            out.append(dataclasses.replace(c, path=path, name=n.description or c.name))
    return out


def _plan_links(transport, wanted) -> list:
    """Read each saved link table's unit; where it differs, write the saved table back,
    and to the SL2VL pairs the sweep wrote unread with it (``also``) the same table."""
    reps = transport.execute([c.get() for c in wanted])
    failed = [f"{c.name}: {r.request.describe()}: {r.error}" for c, r in zip(wanted, reps) if not r.ok]
    if failed:
        raise RestoreFailed("reading tables: " + "; ".join(failed[:5]))
    out = []
    for c, r in zip(wanted, reps):
        if r.value() == c.new:  # the whole table: a restore puts back every P_Key, not only index 0
            continue
        out.append(dataclasses.replace(c, old=r.value()))
        if not c.all_inputs:  # an all-inputs Set puts them back with it
            out += [dataclasses.replace(c, modifier=m, old=None, also=(), same_as=c.modifier) for m in c.also]
    return out


def restore_notes(plan: Plan) -> list[str]:
    """What a restore of link tables assumes, said where it is planned."""
    unread = sum(1 for c in plan.links if c.same_as is not None) + sum(len(c.also) for c in plan.links
                                                                       if c.all_inputs)
    if not unread:
        return []
    return [f"note: {unread} SL2VL tables (a switch's other input ports of an output port) were not read before "
            f"the sweep wrote them; they get the table saved from the input port read in their place"]


def plan_restore_text(transport, text: str, source: str = "<backup>", topology=None):
    """Plan writing a dump back (what ``lft load`` does): returns (apply.Plan, problems).
    Raises BackupError for a file that does not parse."""
    from smagent import discovery
    try:
        sections = fmt.parse_lft_dump(text, source)
    except fmt.DumpError as e:
        raise BackupError("\n".join(e.problems)) from None
    topo = topology if topology is not None else discovery.discover(transport)
    try:
        changes, tops_, problems = linear.plan_dump(transport, topo, sections, source)
    except TableFailure as e:
        raise RestoreFailed(str(e)) from None
    return Plan(tops=tops_, lft=changes), problems
