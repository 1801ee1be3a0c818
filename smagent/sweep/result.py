"""What a sweep found, planned and did (`SweepResult`, one `PortChange` per PortInfo Set):
the JSON summary, the plan as text and as records; `PlanDefects`, the refusal of a plan
that would break the fabric."""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Iterator

from mad import codes
from mad.attributes import PortInfo, PortState
from smagent import discovery, linkconf as links
from smagent.planning import lidassign as lids, multicast
from smagent.fdb import plan as fdbplan
from smagent.fdb import lft as linear, tops
from smagent.fdb import mft as mfttab
from smagent.fdb import rft
from smagent.fdb.switch import interleave
from smagent.errors import SafetyRefusal
from smagent.model.subnet import InterningTables, LftBlocks, Subnet
from smagent.sweep import planjson


class PlanDefects(SafetyRefusal):
    """The planned tables would break the fabric (`smagent.sweep.plancheck`): refused before
    the first Set (``allow_defects`` / --allow-defects overrides). ``defects``: class ->
    {"count", "examples", ...}, as `SweepResult.plan_defects`."""

    def __init__(self, message: str, defects: dict):
        super().__init__(message)
        self.defects = defects

    def details(self) -> dict:
        return {"defects": self.defects}


@dataclasses.dataclass
class PortChange:
    """One PortInfo Set of a sweep: LID, LMC, MasterSMLID and link fields, and whether
    the port goes INIT -> ARMED -> ACTIVE."""
    guid: int
    name: str
    port: int
    path: tuple[int, ...]
    current: PortInfo  # as read
    lid: int | None  # new base LID (None: not a LID-carrying port)
    arm: bool
    link: dict = dataclasses.field(default_factory=dict)  # link fields every Set to it carries (links.py)
    link_diff: dict = dataclasses.field(default_factory=dict)  # {field: (old, new)} of those that change
    # (PortInfo read, (LID, master, LMC), bytes) of the last Set built for this port (`portinfo_set`)
    encoded: tuple | None = dataclasses.field(default=None, repr=False, compare=False)

    def describe(self, master_lid: int, lmc: int) -> str:
        parts = []
        if self.lid is not None:
            if self.current.lid != self.lid:
                parts.append(f"lid {self.current.lid} -> {self.lid}")
            if self.current.lmc != lmc:
                parts.append(f"lmc {self.current.lmc} -> {lmc}")
            if self.current.master_sm_lid != master_lid:
                parts.append(f"master_sm_lid {self.current.master_sm_lid} -> {master_lid}")
        parts += links.describe_diff(self.link_diff)
        if self.arm:
            state = functools.partial(codes.value_text, "port_state")
            via = "" if self.current.port_state == PortState.ARMED else f" -> {state(PortState.ARMED)}"
            parts.append(f"port_state {state(self.current.port_state)}{via} -> {state(PortState.ACTIVE)}")
        return f"{self.name} port {self.port}: " + ", ".join(parts)

    def to_json(self, master_lid: int, lmc: int) -> list[dict]:
        """One plan record per PortInfo field the Set changes (as `describe`; numbers as
        the attribute holds them; port_state: the state reached, ACTIVE, via ARMED)."""
        pi, new = self.current, dict[str, Any]()
        if self.lid is not None:
            new.update(lid=self.lid, lmc=lmc, master_sm_lid=master_lid)
        new.update({k: n for k, (_o, n) in self.link_diff.items()})
        if self.arm:
            new["port_state"] = int(PortState.ACTIVE)
        rec = {"node": self.name, "guid": f"0x{self.guid:016x}", "port": self.port, "table": "PortInfo"}
        return [{**rec, "field": k, **({"old": links.HIDDEN, "new": links.HIDDEN} if k in links.SECRET_FIELDS
                                        else {"old": getattr(pi, k), "new": v, **planjson.value_names(k, getattr(pi, k), v)})}
                for k, v in new.items() if getattr(pi, k) != v]


@dataclasses.dataclass
class SweepResult:
    """What a sweep (or its dry run, the plan) found, planned and did.

    ``topology``: what discovery found; ``lid_plan``: the LIDs, LMC, LinearFDBTop and the
    SM's LID; the planned Sets by attribute (``port_changes``, ``switch_changes``,
    ``lft_changes``, ``rft_changes``, ``mft_changes``, ``link_changes``); ``multicast``:
    the groups' spanning trees (None when multicast was left alone). ``problems``: what
    failed (empty: everything read back as written); ``notes``: what was decided on the
    way; ``phases``: SMPs and seconds per phase; ``stats``: the transport's counters.
    `summary` is the JSON the CLI prints, `plan_lines` the plan as text."""
    topology: discovery.Topology
    lid_plan: lids.LidPlan
    port_changes: list[PortChange] = dataclasses.field(default_factory=list)
    switch_changes: list[tops.SwitchInfoChange] = dataclasses.field(default_factory=list)
    lft_changes: list[linear.BlockChange] = dataclasses.field(default_factory=list)
    mft_changes: list[mfttab.MftChange] = dataclasses.field(default_factory=list)
    rft_changes: list[rft.RftChange] = dataclasses.field(default_factory=list)
    link_changes: list[links.TableChange] = dataclasses.field(default_factory=list)  # SL2VL, VLArb, P_Key, GUIDInfo
    # port GUIDs of the ports that refused GUIDInfo (alias GUIDs: `smagent.linkconf.guids`)
    guids_refused: set[int] = dataclasses.field(default_factory=set)
    # every per-port table unit read or confirmed written: (kind, node GUID, CA port or 0,
    # AttributeModifier) -> the table (the SA's P_Key, SL2VL and VLArb records); equal
    # tables held as one object
    link_tables: dict[tuple[str, int, int, int], Any] = dataclasses.field(default_factory=InterningTables)
    multicast: multicast.MulticastPlan | None = None
    multicast_kept: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # "0xMLID" -> switches, not pruned
    rft_plans: list[rft.RftPlan] = dataclasses.field(default_factory=list)
    # port GUID -> (lo, hi) from the LID file, not found
    missing: dict[int, tuple[int, int]] = dataclasses.field(default_factory=dict)
    backup_file: str | None = None
    # what the plan diffed against
    lft_current: LftBlocks = dataclasses.field(default_factory=lambda: LftBlocks({}))  # whole tables, as read or known
    mft_current: dict[tuple[int, int, int], list[int]] = dataclasses.field(default_factory=dict)
    rft_current: dict[tuple[int, int], Any] = dataclasses.field(default_factory=dict)  # {(switch, block): 16 packed entries}
    plan_check: Any = None  # plancheck.PlanCheck: the planned tables, checked before the first Set
    known: Subnet | None = None  # after an apply: the subnet model it left, for the next repair
    lft_written: int = 0
    progress: Callable[[str], object] | None = None
    activations: int = 0
    phases: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    problems: list[str] = dataclasses.field(default_factory=list)
    # the SL of each path, when the engine layers paths over VLs (dfsssp: `Routes.sls`,
    # {source switch GUID: SL by DLID}); None: every path on SL 0
    path_sls: dict[int, bytes] | None = None
    notes: list[str] = dataclasses.field(default_factory=list)
    # the engine that routed and, for auto, why it was chosen: {"engine", "reason"}
    routing: dict[str, object] | None = None  # engine, reason; moved: entries a patch moved (`routing.patch`)
    dry_run: bool = False
    seconds: float = 0.0
    stats: dict[str, Any] = dataclasses.field(default_factory=dict)
    passes: int = 1  # write passes: the first, then repairs over what did not finish
    repairs: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # per repair pass: what it redid
    retry_policy: dict[str, Any] = dataclasses.field(default_factory=dict)  # the transport's loss estimate

    @property
    def sets_planned(self) -> int:
        return (len(self.port_changes) + len(self.switch_changes) + len(self.lft_changes)
                + len(self.mft_changes) + len(self.rft_changes) + len(self.link_changes) + sum(1 for c in self.port_changes if c.arm))

    def plan_lines(self) -> list[str]:
        master = self.lid_plan.master_lid
        out = [f"SubnSet(PortInfo) {c.describe(master, self.lid_plan.lmc)}" for c in self.port_changes]
        for sc in self.switch_changes:
            out.append(f"SubnSet(SwitchInfo) {sc.name}: " + ", ".join(sc.diffs()))
        for lc in interleave(self.lft_changes):
            ch = lc.changed_lids()
            shown = ", ".join(f"{lid}: {'?' if o is None else o} -> {n}" for lid, o, n in ch[:4])
            more = f" (+{len(ch) - 4} more)" if len(ch) > 4 else ""
            out.append(f"SubnSet(LinearForwardingTable) {lc.name} block {lc.block}: {shown}{more}")
        for rc in interleave(self.rft_changes):
            out.append(f"SubnSet(RandomForwardingTable) {rc.describe()}")
        for mc in interleave(self.mft_changes):
            out.append(f"SubnSet(MulticastForwardingTable) {mc.describe()}")
        out += [c.describe() for c in self.link_changes]
        return out

    def plan_changes(self, detail: bool = False) -> list[dict[str, Any]]:
        """The plan as records (what ``--json`` prints as "plan"; the README's "The JSON of
        a plan"), `plan_records` as a list."""
        return list(self.plan_records(detail))

    def plan_records(self, detail: bool = False, lids: tuple[int, int] | None = None) -> Iterator[dict[str, Any]]:
        """The plan's records one at a time (``--plan-file`` streams them): PortInfo fields,
        then the tables' records as the table commands give them (SwitchInfo, RFT, MFT;
        LFT: one ``LFTBlock`` record per block, or with ``detail`` one ``LFT`` record per
        entry), then the per-port link tables (SL2VL, VLArb, P_Key). Without ``detail``
        PortInfo fields come by port and link tables by group (`smagent.sweep.planjson`);
        ``lids`` (first, last): the LFT entries of those LIDs only, one record each. Every
        record carries its `plan_action`."""
        for rec in self._records(detail, lids):
            yield planjson.decorate(rec)

    def _records(self, detail: bool, lids: tuple[int, int] | None) -> Iterator[dict[str, Any]]:
        ports = (d for c in self.port_changes for d in c.to_json(self.lid_plan.master_lid, self.lid_plan.lmc))
        fdb = fdbplan.Plan(self.switch_changes, self.lft_changes, self.rft_changes, self.mft_changes)
        tables = fdb.records(detail, lids)
        if detail:
            yield from ports
            yield from tables
            yield from (p.to_json() for lc in self.link_changes for p in lc.pairs())
        else:
            yield from planjson.compact(ports)
            yield from tables
            yield from planjson.link_change_groups(self.link_changes)

    @property
    def ok(self) -> bool:
        """No problem, nothing unreachable, and no defect in the planned tables."""
        return not (self.problems or self.topology.unreachable or self.plan_defects)

    def __repr__(self) -> str:  # the fields hold whole tables: counts only
        what = "plan" if self.dry_run else "sweep"
        return (f"<SweepResult {what}: {len(self.topology.nodes)} nodes, {self.sets_planned} Sets "
                f"{'planned' if self.dry_run else 'sent'}, {len(self.problems)} problems, "
                f"{len(self.topology.unreachable)} unreachable{', ok' if self.ok else ''}>")

    @property
    def changes_pending(self) -> bool:
        """Whether the plan has any Set to send (`plan --detailed-exitcode`: exit 2)."""
        return self.sets_planned > 0

    @property
    def plan_defects(self) -> dict[str, Any]:
        """What the planned tables would break (`smagent.sweep.plancheck`): class -> {"count",
        "examples", ...}; empty when nothing, or when the check did not run."""
        return self.plan_check.defects if self.plan_check is not None else {}

    def plan_defect_lines(self) -> list[str]:
        return self.plan_check.lines() if self.plan_check is not None else []

    def summary(self) -> dict[str, Any]:
        topo = self.topology
        return {
            "dry_run": self.dry_run,
            **({"changes_pending": self.changes_pending} if self.dry_run else {}),
            "nodes": len(topo.nodes), "switches": len(topo.switches()), "cas": len(topo.cas()),
            "links": topo.num_links(), "lids": len(self.lid_plan.lids), "lmc": self.lid_plan.lmc,
            "linear_fdb_top": self.lid_plan.top, "routing": self.routing,
            "sets": {"portinfo": len(self.port_changes) + (0 if self.dry_run else self.activations),
                     "switchinfo": len(self.switch_changes), "lft_blocks": len(self.lft_changes),
                     "mft_blocks": len(self.mft_changes), "rft_blocks": len(self.rft_changes),
                     **{k: sum(1 for c in self.link_changes if c.kind == k) for k in ("sl2vl", "vlarb", "pkeys", "guids")}},
            "multicast": self._multicast_summary(),
            # only when something was kept, so the summary of a fabric without foreign MLIDs is unchanged
            **({"multicast_kept": self.multicast_kept} if self.multicast_kept else {}),
            **({"plan_defects": self.plan_defects} if self.plan_defects else {}),
            # the planned tables' most overloaded link against its ideal (`verify.balance`)
            **({"hottest_link": self.plan_check.worst} if self.plan_check is not None and self.plan_check.worst
               else {}),
            "rft": [{"switch": p.name, "entries": len(p.entries),
                     "default_port": p.default_port, "lids_to_default_port": p.omitted} for p in self.rft_plans],
            "phases": self.phases, "smps_sent": self.stats.get("sent", 0),
            "retries": self.stats.get("retries", 0), "timeouts": self.stats.get("timeouts", 0),
            # convergence: passes of discovery and of the writes, SMPs lost (every try that
            # got no answer), and what each repair pass redid
            "passes": self.passes, "discovery_passes": topo.passes,
            "losses": self.stats.get("timeouts", 0), "repairs": self.repairs,
            "loss_estimate": self.retry_policy.get("loss_estimate", 0.0),
            "highest_retries": self.retry_policy.get("highest_retries", 0),
            "unreachable": topo.unreachable, "problems": self.problems, "notes": self.notes,
            "missing": {f"{g:#018x}": lo for g, (lo, _hi) in sorted(self.missing.items())},
            "backup": self.backup_file,
            "seconds": round(self.seconds, 3),
        }

    def _multicast_summary(self) -> list[dict[str, Any]]:
        if self.multicast is None:
            return []
        names = {n.guid: n.description for n in self.topology.nodes.values()}
        return [{"mlid": f"0x{t.group.mlid:04x}", "members": len(t.members), "root": names.get(t.root),
                 "switches": len(t.ports)} for t in self.multicast.trees]
