"""The table operations the CLI and the API share: show, set, load, dump, backup and
restore of LFT, MFT and RFT, each checked before the first SMP that could change a switch,
planned from what the switches hold, refused while another SM is MASTER (unless
``force``), and written through the one apply path (`smagent.fdb.apply`).

`smagent.api.Session` exposes these as methods; the click commands format their results.

Every write but a restore takes ``check``: a callable (plan, dry_run, rft_tables) -> a
result with ``defects``, given by the caller (`smagent.api.Session` passes the plan check
of `smagent.sweep.plancheck`, which this layer may not import). It runs once the plan is
known, before the first Set, and refuses by raising; a restore puts back what a backup
holds and is not checked (an undo must not be blocked by the state it undoes).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from mad import forwarding as fw
from smagent.config import files as paths
from smagent.discovery import smcheck
from smagent.errors import BadInput
from smagent.fdb import apply as fdbapply
from smagent.fdb import backup, lft as linear
from smagent.model import lftdump as text
from smagent.fdb import mft as mfttab
from smagent.fdb import rft
from smagent.fdb import tops as fdbtops
from smagent.fdb.switch import SwitchFacts, TableBadInput, read_switch
from smagent.discovery.smcheck import OtherMasterSM
from smagent.discovery.targets import Target


# the name table writes raised before the one master-SM check (`smagent.discovery.smcheck`) existed
MasterSMRefusal = OtherMasterSM


# -- results ------------------------------------------------------------------------------
@dataclasses.dataclass
class LftTable:
    """One switch's LFT as read: ``table[lid]`` is the exit port of LIDs 0..``top``."""
    switch: SwitchFacts
    target: Target
    top: int
    table: bytes

    def routes(self, dump_all: bool = False) -> dict[int, int]:
        """{lid: port}: the valid entries (a port the switch has), or every one."""
        return {lid: self.table[lid] for lid in range(self.top + 1)
                if dump_all or self.table[lid] <= self.switch.num_ports}

    def __repr__(self) -> str:  # counts, not the table (up to 48K entries)
        return (f"<LftTable {_switch_name(self.switch)}: LIDs 0..{self.top}, "
                f"{len(self.routes())} routed>")


@dataclasses.dataclass
class MftTable:
    """One switch's MFT as read: MLIDs ``first``..``last``; ``masks[(block, position)]``."""
    switch: SwitchFacts
    target: Target
    first: int
    last: int
    positions: int
    masks: dict

    def groups(self) -> dict[int, list[int]]:
        """{mlid: ports} of every MLID with any port set."""
        out = {}
        for mlid in range(self.first, self.last + 1):
            ports = mfttab.mft_ports(self.masks, mlid, self.positions)
            if ports:
                out[mlid] = ports
        return out

    def __repr__(self) -> str:  # counts, not the masks
        return (f"<MftTable {_switch_name(self.switch)}: MLIDs {self.first:#x}..{self.last:#x}, "
                f"{len(self.groups())} with ports>")


@dataclasses.dataclass(frozen=True)
class RftEntry:
    """A valid RFT entry: LIDs ``lids`` (first, last) leave by ``port``."""
    entry: int
    base_lid: int
    lmc: int
    lids: tuple[int, int]
    port: int


@dataclasses.dataclass
class RftTable:
    """One switch's RFT as read (its SwitchInfo has RandomFDBCap, LIDsPerPort, DefaultPort)."""
    switch: SwitchFacts
    target: Target
    entries: list[RftEntry]

    def __repr__(self) -> str:
        return f"<RftTable {_switch_name(self.switch)}: {len(self.entries)} valid entries>"


def _switch_name(f: SwitchFacts) -> str:
    return f"{f.name!r} GUID {f.guid:#018x}"


@dataclasses.dataclass
class WriteResult:
    """What a table write planned and did. ``plan``: the plan as the CLI prints it;
    ``changes``: one record per changed entry; ``planned``: Sets by kind; ``problems``:
    what went wrong writing (empty: every read-back matched); ``notes``: warnings;
    ``backup_file``: where what was overwritten was saved (None without a state dir)."""
    dry_run: bool
    plan: list[str]
    changes: list[dict]
    planned: dict[str, int]
    problems: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    backup_file: str | None = None
    unreachable: list[str] = dataclasses.field(default_factory=list)  # what discovery could not reach
    plan_check: Any = None  # the ``check``'s result (`smagent.sweep.plancheck.PlanCheck`); None: not checked

    @property
    def plan_defects(self) -> dict:
        """What the check found the edit would break: class -> {"count", "examples"} (empty: nothing)."""
        return dict(self.plan_check.defects) if self.plan_check is not None else {}

    def plan_defect_lines(self) -> list[str]:
        return self.plan_check.lines() if self.plan_check is not None and self.plan_check.defects else []

    @property
    def sets_sent(self) -> dict[str, int]:
        """Sets sent by kind (all 0 for a dry run)."""
        return {k: (0 if self.dry_run else v) for k, v in self.planned.items()}

    @property
    def ok(self) -> bool:
        return not self.problems


# -- the master-SM check (`smagent.discovery.smcheck`) --------------------------------------------------
def _check_one_switch(transport, sr, *, force, dry_run) -> list[str]:
    """The SM the switch's MasterSMLID names, and one on our own port (OpenSM on this HCA)."""
    pi = sr.port0
    if pi is None or not pi.master_sm_lid:
        return []
    own = smcheck.local_portinfo(transport, sr.local_info)
    return smcheck.check_master_sm(transport, {pi.master_sm_lid}, own, force=force, dry_run=dry_run)


def _check_topology(transport, topo, guids, *, force, dry_run) -> list[str]:
    """The MasterSMLIDs of the switches ``guids`` (port 0 as discovered), and our own port."""
    lids = set()
    for g in guids:
        n = topo.nodes.get(g)
        pi = n.ports.get(0) if n is not None else None
        if pi is not None:
            lids.add(pi.master_sm_lid)
    me = topo.nodes.get(topo.local[0])
    own = me.ports.get(0 if me.is_switch else topo.local[1]) if me is not None else None
    return smcheck.check_master_sm(transport, lids, own, force=force, dry_run=dry_run)


def _plan_switches(plan: fdbapply.Plan) -> set[int]:
    return {c.switch for c in plan.tops + plan.lft + plan.rft + plan.mft + plan.links}


Check = Callable[[fdbapply.Plan, bool, dict], Any]  # see the module docstring


def _write(transport, plan: fdbapply.Plan, *, dry_run, state_dir, topology, notes, planned,
           changes=None, check: Check | None = None, rft_tables=None) -> WriteResult:
    pc = check(plan, dry_run, rft_tables or {}) if check is not None and plan else None
    res = WriteResult(dry_run, plan.lines(), plan.to_json() if changes is None else changes, planned, notes=notes,
                      plan_check=pc)
    if not dry_run and plan:
        a = fdbapply.apply(transport, plan, state_dir=state_dir, topology=topology)
        res.problems, res.backup_file = a.problems, a.backup_file
    return res


# -- LFT ----------------------------------------------------------------------------------------
def lft_show(transport, target: Target) -> LftTable:
    f = read_switch(transport, target).facts
    if not f.lft_cap:
        raise TableBadInput(f"{f.name} ({target.describe()}) has no linear forwarding table "
                            f"(LinearFDBCap 0; RandomFDBCap {f.switch_info.random_fdb_cap}): see `smagent rft show`")
    top = linear.lft_read_top(f.switch_info)
    blocks = linear.read_lft(transport, target, list(linear.lft_blocks_to_read(f.switch_info)))
    return LftTable(f, target, top, b"".join(blocks[b] for b in sorted(blocks)))


def check_lft_args(lid: int, port: int) -> None:
    pre = []
    if not 1 <= lid <= fw.UNICAST_LID_MAX:
        pre.append(f"LID 0x{lid:x} ({lid}) is not a unicast LID (1..0xbfff)")
    if not 0 <= port <= fw.LFT_NO_PORT:
        pre.append(f"port {port} is not a port (0..254, or 255 for none)")
    if pre:
        raise BadInput(problems=pre)


def lft_set(transport, target: Target, lid: int, port: int, *, dry_run=False, force=False,
            state_dir=None, check: Check | None = None) -> WriteResult:
    """LID -> PORT on one switch (255: no route); LinearFDBTop raised when needed."""
    check_lft_args(lid, port)
    transport.check_writable(dry_run)
    sr = read_switch(transport, target, for_set=True)
    problems = linear.check_lft_entry(sr.facts, lid, port)
    if problems:
        raise BadInput(problems=problems)
    changes, tops = linear.plan_set(transport, sr.facts, lid, port)
    plan = fdbapply.Plan(tops=tops, lft=changes)
    notes = _check_one_switch(transport, sr, force=force, dry_run=dry_run) if plan else []
    return _write(transport, plan, dry_run=dry_run, state_dir=state_dir, topology=None, notes=notes,
                  planned={"switchinfo": len(tops), "lft_blocks": len(changes)}, check=check)


def parse_dump(path_or_text: str, what: str = "dump") -> tuple[str, str]:
    """(text, source) of a dump given as a file path or as the text itself (it holds a
    newline). BadInput for a file that cannot be read."""
    if "\n" in path_or_text:
        return path_or_text, "<text>"
    return paths.read_text(path_or_text, what, errors="replace"), path_or_text


def _parse(body: str, source: str):
    """The dump's sections; a dump that does not parse is refused whole before the first SMP."""
    try:
        return text.parse_lft_dump(body, source)
    except text.DumpError as e:
        raise BadInput(problems=e.problems) from None


def lft_load(transport, path_or_text: str, *, dry_run=False, force=False, state_dir=None,
             discover=None, check: Check | None = None) -> WriteResult:
    """Load a dump (each section a switch's whole table); write only blocks that differ."""
    body, source = parse_dump(path_or_text)
    transport.check_writable(dry_run)
    sections = _parse(body, source)
    topo = discover(transport)
    changes, tops, problems = linear.plan_dump(transport, topo, sections, source)
    if problems:
        raise BadInput(problems=problems)
    plan = fdbapply.Plan(tops=tops, lft=changes)
    notes = _check_topology(transport, topo, _plan_switches(plan), force=force, dry_run=dry_run) if plan else []
    res = _write(transport, plan, dry_run=dry_run, state_dir=state_dir, topology=topo, notes=notes,
                 planned={"switchinfo": len(tops), "lft_blocks": len(changes)}, check=check)
    res.unreachable = list(topo.unreachable)
    return res


def lft_restore(transport, path: str, *, dry_run=False, force=False, state_dir=None, discover=None) -> WriteResult:
    """Write back a dump or a backup saved before an apply (only what differs; link tables too)."""
    body = paths.read_text(path, "backup", errors="replace")
    transport.check_writable(dry_run)
    is_blocks = body.lstrip().startswith("{")
    if is_blocks:
        saved = backup.load_backup(path)
    else:
        _parse(body, path)
    topo = discover(transport)
    if is_blocks:
        plan, problems = backup.plan_restore_saved(transport, saved, topo)
    else:
        plan, problems = backup.plan_restore_text(transport, body, path, topo)
    if problems:
        raise BadInput(problems=problems)
    # a restore is not a full undo: say what it leaves as the sweep made it
    notes = _check_topology(transport, topo, _plan_switches(plan), force=force, dry_run=dry_run) if plan else []
    notes += [f"note: {backup.CANNOT_UNDO}"] + backup.restore_notes(plan) if is_blocks else []
    return _write(transport, plan, dry_run=dry_run, state_dir=state_dir, topology=topo, notes=notes,
                  planned=plan.sets())


# -- MFT --------------------------------------------------------------------------------------
def _read_mft(transport, target, *, for_set=False):
    sr = read_switch(transport, target, for_set=for_set)
    si = sr.facts.switch_info
    positions = fw.mft_positions_for(sr.facts.num_ports)
    masks = mfttab.read_mft(transport, target, mfttab.mft_blocks_to_read(si.multicast_fdb_cap,
                                                                          si.multicast_fdb_top), positions)
    return sr, positions, masks


def mft_show(transport, target: Target) -> MftTable:
    sr, positions, masks = _read_mft(transport, target)
    si = sr.facts.switch_info
    first, last = mfttab.mft_range(si.multicast_fdb_cap, si.multicast_fdb_top)
    return MftTable(sr.facts, target, first, last, positions, masks)


def check_mft_args(mlid: int, ports) -> list[int]:
    """The ports, sorted and unique; BadInput naming every problem (nothing sent)."""
    ports = sorted(set(ports or []))
    pre = []
    if not fw.MULTICAST_LID_MIN <= mlid <= fw.MULTICAST_LID_MAX:
        pre.append(f"MLID 0x{mlid:x} is not a multicast LID (0xc000..0xfffe)")
    pre += [f"port {p} is not a port (0..254)" for p in ports if not 0 <= p <= fw.MAX_PORT]
    if pre:
        raise BadInput(problems=pre)
    return ports


def mft_set(transport, target: Target, mlid: int, ports, *, dry_run=False, force=False,
            state_dir=None, check: Check | None = None) -> WriteResult:
    """Make PORTS the whole port set of MLID on one switch (no ports: remove the MLID)."""
    ports = check_mft_args(mlid, ports)
    transport.check_writable(dry_run)
    sr = read_switch(transport, target, for_set=True)
    f = sr.facts
    problems = mfttab.check_mft_entry(f, mlid, ports)
    if problems:
        raise BadInput(problems=problems)
    current = mfttab.read_mft(transport, target, [fw.mft_block(mlid)[0]], fw.mft_positions_for(f.num_ports))
    top = fdbtops.raise_top(f, mft_top=mlid) if ports else None
    plan = fdbapply.Plan(tops=[top] if top else [], mft=mfttab.plan_mft_set(f, mlid, ports, current))
    notes = _check_one_switch(transport, sr, force=force, dry_run=dry_run) if plan.lines() else []
    return _write(transport, plan, dry_run=dry_run, state_dir=state_dir, topology=None, notes=notes,
                  planned={"switchinfo": len(plan.tops), "mft_blocks": len(plan.mft)},
                  changes=mfttab.mft_changes_json(plan.mft, mlid), check=check)


# -- RFT --------------------------------------------------------------------------------------
def _read_rft(transport, target, *, for_set=False):
    sr = read_switch(transport, target, for_set=for_set)
    si = sr.facts.switch_info
    if not si.random_fdb_cap:
        raise TableBadInput(f"{sr.facts.name} ({target.describe()}) has no random forwarding table "
                            f"(RandomFDBCap 0; LinearFDBCap {si.linear_fdb_cap})")
    return sr, rft.read_table(transport, target, si)


def rft_show(transport, target: Target) -> RftTable:
    sr, table = _read_rft(transport, target)
    rows = [RftEntry(i, b, lmc, (r.start, r.stop - 1), p)
            for i, (b, lmc, p) in rft.valid_entries(table) for r in [fw.rft_lid_range(b, lmc)]]
    return RftTable(sr.facts, target, rows)


def rft_set(transport, target: Target, lid: int, port: int, *, lmc=0, dry_run=False, force=False,
            state_dir=None, check: Check | None = None) -> WriteResult:
    """LID..LID+2^LMC-1 out of PORT on one switch's RFT (255: remove them)."""
    check_rft_args(lid, port, lmc)
    transport.check_writable(dry_run)
    sr, table = _read_rft(transport, target, for_set=True)
    f = sr.facts
    if port != fw.LFT_NO_PORT and port > f.num_ports:
        raise BadInput(problems=[f"port {port} does not exist on {f.name}: ports 0..{f.num_ports}, or 255 to remove"])
    changes, problems = rft.plan_set(f, target, table, lid, lmc, port)
    if problems:
        raise BadInput(problems=problems)
    plan = fdbapply.Plan(rft=changes)
    notes = _check_one_switch(transport, sr, force=force, dry_run=dry_run) if plan else []
    return _write(transport, plan, dry_run=dry_run, state_dir=state_dir, topology=None, notes=notes,
                  planned={"rft_blocks": len(changes)}, check=check,
                  rft_tables={f.guid: table[:f.switch_info.random_fdb_cap]})


def check_rft_args(lid: int, port: int, lmc: int) -> None:
    """BadInput naming every problem with an `rft set` (nothing sent)."""
    pre = []
    lmc_problem = fw.lmc_problem(lmc, "LMC")
    if lmc_problem:
        pre.append(lmc_problem)
    elif not 1 <= lid <= fw.UNICAST_LID_MAX:
        pre.append(f"LID 0x{lid:x} ({lid}) is not a unicast LID (1..0xbfff)")
    elif lid % (1 << lmc) or lid + (1 << lmc) - 1 > fw.UNICAST_LID_MAX:
        pre.append(f"LID 0x{lid:x} is not aligned to LMC {lmc} (a multiple of {1 << lmc} within the unicast range)")
    if not 0 <= port <= fw.LFT_NO_PORT:
        pre.append(f"port {port} is not a port (0..254, or 255 to remove)")
    if pre:
        raise BadInput(problems=pre)
