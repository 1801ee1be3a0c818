"""Bring a fabric up, as named phases over one `SweepState` (see `sweep()` and `_plan()`):

    discover -> SM check -> desired state -> LIDs -> route -> ports -> read links, LFTs,
    RFTs, MFTs (and diff) -> SwitchInfo plan || arm ports -> write SwitchInfo, LFT, RFT,
    MFT -> write link tables -> activate -> save LIDs

Every change is planned before anything is sent: a dry run stops after the plan. The
GetResp of each Set carries the attribute as the node now holds it, and that is the
read-back we check (no second Get per block). The sweep does not trace paths: `smagent
verify` (`smagent.verify`) does, from the tables the switches hold.

Unicast: a switch with a LinearForwardingTable gets LFT blocks; one with LinearFDBCap 0
and RandomFDBCap > 0 gets RFT entries and maybe a DefaultPort (`smagent.fdb.random`).
Multicast: every group (`smagent.multicast`: a group file, or the IPoIB broadcast group
0xC000 with every CA port) gets a spanning tree and MFT entries, diffed and written by
(block, position).

SwitchInfo fields a sweep writes, and why (everything else is echoed as read):

* LinearFDBTop: the highest LID assigned (switches with an LFT only).
* LifeTimeValue: 18, as OpenSM; PortStateChange: cleared when set (`smagent.fdb.tops`).
* DefaultPort: RFT switches only, when `smagent.fdb.random` picks one (else as read).
* MulticastFDBTop: only on a switch that says it implements it, i.e. port 0's
  PortInfo.CapabilityMask has IsMulticastFDBTopSupported (bit 30, IBA 1.2.1+), as
  OpenSM does (``use_mfttop``); then the highest MLID programmed on that switch, or
  0xBFFF (no entry) when none. Other switches may treat the field as reserved: ibsim
  (no IsMulticastFDBTopSupported) reports 0 and ignores a Set of it (the GetResp still
  says 0, checked on ibsim 0.10); our simulator honours a non-zero top. Writing it
  where it is not supported could only hide entries or fail the read-back.
* DefaultMulticastPrimaryPort / NotPrimaryPort: as read, unless the group file has a
  ``default-multicast`` line for the switch (see `smagent.multicast`).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import time
from typing import TYPE_CHECKING, Any, Callable, Literal

from mad import codes
from mad import forwarding as fw
from mad.attributes import CAP_IS_SM, AttrID, PortInfo, PortState, SMInfo, SMState, SwitchInfo
from mad.forwarding import portinfo_modifier
from mad.header import Method
from smagent import discovery, lids, links, multicast, paths, routing
from smagent.fdb import apply as fdbapply
from smagent.fdb import plan as fdbplan
from smagent.fdb import linear, tops
from smagent.fdb import multicast as mfttab
from smagent.fdb import random as rft
from smagent.fdb.switch import failed_units_lines, interleave
from smagent.errors import FabricFailure, SafetyRefusal
from smagent.smcheck import OtherMasterSM, check_other_sms, find_sms  # noqa: F401 - public names here too
from smagent.transport.base import Reply, Request, Transport

if TYPE_CHECKING:
    from smagent.desired import DesiredState, Resolved

JOURNAL_CHUNK = fdbapply.JOURNAL_CHUNK  # LFT blocks between two journal records (tests lower it)
REPAIR_PASSES = 4  # passes after the first over what did not finish, on a lossy fabric
LIFE_TIME_VALUE = 18  # what OpenSM programs (packet lifetime 2^18 * 4.096 us)
CAP_IS_MCAST_FDB_TOP = 1 << 30  # PortInfo.CapabilityMask: IsMulticastFDBTopSupported
MFT_TOP_NONE = fw.MULTICAST_LID_MIN - 1  # MulticastFDBTop with no valid entry (OpenSM's value)
GUID2LID = "guid2lid"  # the LID file in the state directory (OpenSM's name and format)
log = logging.getLogger("smagent.sweep")


class SweepError(FabricFailure):
    """The sweep could not finish; the message says what and where."""


class PlanDefects(SafetyRefusal):
    """The planned tables would break the fabric (`smagent.plancheck`): refused before
    the first Set (``allow_defects`` / --allow-defects overrides). ``defects``: class ->
    {"count", "examples", ...}, as `SweepResult.plan_defects`."""

    def __init__(self, message: str, defects: dict):
        super().__init__(message)
        self.defects = defects

    def details(self) -> dict:
        return {"defects": self.defects}


@dataclasses.dataclass
class SweepOptions:
    lmc: int = 0
    lid_file: str | None = None
    routing: str | routing.RoutingSpec = "minhop"  # parsed by routing.parse_spec (a RoutingSpec as it is)
    dry_run: bool = False
    force: bool = False
    # multicast: a group file path, a parsed multicast.GroupSpec, or None for the default
    # group (0xC000, every CA port); multicast=False leaves every MFT alone
    mcast_groups: str | os.PathLike[str] | multicast.GroupSpec | None = None
    multicast: bool = True
    # where LFT blocks are saved before they are overwritten, the apply journal lives
    # (smagent.fdb.backup, smagent.fdb.journal) and, without lid_file, the LIDs are kept
    # (<state_dir>/guid2lid); None: none of these (the in-process simulator's default)
    state_dir: str | None = None
    progress: Callable[[str], object] | None = None  # called with the phase name when a phase starts: the CLI's status line
    desired: DesiredState | None = None  # static LFT entries, groups, SwitchInfo settings
    links: links.LinkOptions | Literal[False] | None = None  # None: OpenSM's defaults; False: configure no link
    # MFT entries of MLIDs outside the configured groups: kept and reported (False), or
    # removed (True; also desired state `multicast_prune: true`)
    prune_multicast: bool = False
    # a KnownState (what an earlier sweep left): plan against it with no discovery and no
    # table reads; the running SM's repairs, after it updated the topology itself
    known: KnownState | None = None
    # write even if the planned tables break pairs the current tables deliver, or loop
    # (smagent.plancheck); a dry run only reports them
    allow_defects: bool = False
    # passes after the first over what did not finish (Sets lost, ports not ACTIVE), made
    # only while the transport observes loss (`smagent.transport.retry`); 0: none
    repair_passes: int = REPAIR_PASSES


@dataclasses.dataclass
class KnownState:
    """What the switches hold as far as our own sweeps know: the topology (PortInfo and
    SwitchInfo as the last Sets answered), LFT blocks {(switch, block): bytes} and MFT
    units {(switch, block, position): masks}. A block missing is unknown (it is written).
    ``links``: GUIDs of nodes whose SL2VL/VLArb/P_Key tables are unknown (read again)."""
    topology: discovery.Topology
    lft: dict[tuple[int, int], bytes]
    mft: dict[tuple[int, int, int], list[int]]
    links: set[int] = dataclasses.field(default_factory=set)


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
    # (PortInfo read, (LID, master, LMC), bytes) of the last Set built for this port (`_portinfo_set`)
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
            via = "" if self.current.port_state == PortState.ARMED else " -> ARMED"
            parts.append(f"port_state {PortState(self.current.port_state).name}{via} -> ACTIVE")
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
        return [{**rec, "field": k, "old": getattr(pi, k), "new": v} for k, v in new.items() if getattr(pi, k) != v]


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
    link_changes: list[links.TableChange] = dataclasses.field(default_factory=list)  # SL2VL, VLArb, P_Key
    multicast: multicast.MulticastPlan | None = None
    multicast_kept: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # "0xMLID" -> switches, not pruned
    rft_plans: list[rft.RftPlan] = dataclasses.field(default_factory=list)
    # port GUID -> (lo, hi) from the LID file, not found
    missing: dict[int, tuple[int, int]] = dataclasses.field(default_factory=dict)
    backup_file: str | None = None
    # what the plan diffed against
    lft_current: dict[tuple[int, int], bytes] = dataclasses.field(default_factory=dict)
    mft_current: dict[tuple[int, int, int], list[int]] = dataclasses.field(default_factory=dict)
    rft_current: dict[tuple[int, int], Any] = dataclasses.field(default_factory=dict)  # {(switch, block): 16 packed entries}
    plan_check: Any = None  # plancheck.PlanCheck: the planned tables, checked before the first Set
    known: KnownState | None = None  # after an apply: the state it left, for the next repair
    lft_written: int = 0
    progress: Callable[[str], object] | None = None
    activations: int = 0
    phases: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    problems: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
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

    def plan_changes(self) -> list[dict[str, Any]]:
        """The plan as records, one per changed field or entry (what ``--json`` prints as
        "plan"; the README's "The JSON of a plan"): PortInfo fields, then the tables'
        records as the table commands give them (SwitchInfo, LFT, RFT, MFT), then the
        per-port link tables (SL2VL, VLArb, P_Key)."""
        out = [d for c in self.port_changes for d in c.to_json(self.lid_plan.master_lid, self.lid_plan.lmc)]
        out += fdbplan.Plan(self.switch_changes, self.lft_changes, self.rft_changes, self.mft_changes).to_json()
        out += [c.to_json() for c in self.link_changes]
        return out

    @property
    def plan_defects(self) -> dict[str, Any]:
        """What the planned tables would break (`smagent.plancheck`): class -> {"count",
        "examples", ...}; empty when nothing, or when the check did not run."""
        return self.plan_check.defects if self.plan_check is not None else {}

    def plan_defect_lines(self) -> list[str]:
        return self.plan_check.lines() if self.plan_check is not None else []

    def summary(self) -> dict[str, Any]:
        topo = self.topology
        return {
            "dry_run": self.dry_run,
            "nodes": len(topo.nodes), "switches": len(topo.switches()), "cas": len(topo.cas()),
            "links": topo.num_links(), "lids": len(self.lid_plan.lids), "lmc": self.lid_plan.lmc,
            "linear_fdb_top": self.lid_plan.top,
            "sets": {"portinfo": len(self.port_changes) + (0 if self.dry_run else self.activations),
                     "switchinfo": len(self.switch_changes), "lft_blocks": len(self.lft_changes),
                     "mft_blocks": len(self.mft_changes), "rft_blocks": len(self.rft_changes),
                     **{k: sum(1 for c in self.link_changes if c.kind == k) for k in ("sl2vl", "vlarb", "pkeys")}},
            "multicast": self._multicast_summary(),
            # only when something was kept, so the summary of a fabric without foreign MLIDs is unchanged
            **({"multicast_kept": self.multicast_kept} if self.multicast_kept else {}),
            **({"plan_defects": self.plan_defects} if self.plan_defects else {}),
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


class _Phase:
    def __init__(self, result: SweepResult, transport: Transport, name: str):
        self.r, self.t, self.name = result, transport, name

    def __enter__(self):
        self.t0, self.c0, self.s0 = time.monotonic(), time.process_time(), self.t.stats.sent
        log.debug("phase %s", self.name)
        if self.r.progress is not None:
            self.r.progress(self.name)
        return self

    def __exit__(self, *exc):
        done = self.r.phases[self.name] = {"smps": self.t.stats.sent - self.s0,
                                           "seconds": round(time.monotonic() - self.t0, 4),
                                           "cpu_seconds": round(time.process_time() - self.c0, 4)}
        log.info("phase %s: %d SMPs, %.3f s%s", self.name, done["smps"], done["seconds"],
                 "" if exc[0] is None else f" (failed: {exc[0].__name__})")


def _dr(method: int, attr: int, path: tuple[int, ...], mod: int = 0, value: Any = None) -> Request:
    return Request.dr(method, attr, path, mod, value)


def _no_switch_reason(topo: discovery.Topology) -> str:
    """Why discovery found no switch: most often the local port has no link."""
    g, p = topo.local
    n = topo.nodes[g]
    pi = n.ports.get(p)
    where = f"the local port ({n.description or hex(g)} port {p})"
    if pi is not None and pi.port_state == PortState.DOWN:
        phys = codes.PHYS_STATES.get(pi.port_physical_state, str(pi.port_physical_state))
        return f"{where} is down (physical state {phys}): check its cable and the switch port it plugs into"
    return f"no switch found from {where}: nothing to route"



@dataclasses.dataclass
class SweepState:
    """What the phases of one sweep share. Inputs read before any SMP (the group spec,
    the LID file, the routing input), then what each phase hands the next; ``r`` is the
    result the caller gets."""
    transport: Transport
    opts: SweepOptions
    r: SweepResult
    t0: float
    lid_file: str | None = None  # --lid-file, else <state_dir>/guid2lid, else None
    spec: multicast.GroupSpec | None = None  # None for the default group
    persisted: dict[int, tuple[int, int]] = dataclasses.field(default_factory=dict)  # LID file: port GUID -> (lo, hi)
    engine_input: object = None  # routing.preload's output
    route_spec: routing.RoutingSpec = routing.DEFAULT  # opts.routing, parsed
    resolved: Resolved | None = None  # the desired state against this fabric
    rin: routing.RoutingInput | None = None
    routes: routing.Routes | None = None  # switch GUID -> routing.RouteTable
    link_opts: links.LinkOptions | None = None  # None: configure no link
    op_vls: dict[tuple[int, int], int] = dataclasses.field(default_factory=dict)  # (guid, port) -> OperationalVLs wanted
    mplan: multicast.MulticastPlan | None = None
    default_port: dict[int, int] = dataclasses.field(default_factory=dict)  # RFT switch GUID -> DefaultPort
    mft_top: dict[int, int] = dataclasses.field(default_factory=dict)  # switch GUID -> MulticastFDBTop
    applied: fdbapply.Apply | None = None  # the write phase's
    # what this pass could not finish: (guid, port) whose ARMED (or LID) Set failed, the
    # PortChanges not ACTIVE, GUIDs whose link tables failed
    arm_failed: set[tuple[int, int]] = dataclasses.field(default_factory=set)
    not_active: list[PortChange] = dataclasses.field(default_factory=list)
    links_failed: set[int] = dataclasses.field(default_factory=set)
    unread: list[tuple[str, Any]] = dataclasses.field(default_factory=list)  # (problem line, units) of failed table reads

    @property
    def topo(self) -> discovery.Topology:
        return self.r.topology

    # what the route and multicast phases leave for the later ones
    @property
    def routing_input(self) -> routing.RoutingInput:
        assert self.rin is not None, "the route phase runs first"
        return self.rin

    @property
    def routed(self) -> routing.Routes:
        assert self.routes is not None, "the route phase runs first"
        return self.routes

    def phase(self, name: str) -> "_Phase":
        return _Phase(self.r, self.transport, name)


def plan(transport: Transport, opts: SweepOptions) -> SweepResult:
    """Every Get a sweep needs, and the plan of Sets; sends no Set."""
    s = _prepare(transport, opts)
    _plan(s)
    _unread_are_problems(s)
    return s.r


def sweep(transport: Transport, opts: SweepOptions) -> SweepResult:
    """The whole pipeline: plan (discover .. read tables), then write, activate, keep LIDs."""
    s = _prepare(transport, opts)
    _plan(s)
    s.r.dry_run = opts.dry_run
    if opts.dry_run:
        _unread_are_problems(s)
    else:
        try:
            _note_interrupted_apply(s)
            _write_pass(s)
            _repair(s)
            _save_lids(s)
        except OSError as e:  # a backup, the journal or the LID file, after Sets began
            raise FabricFailure(f"writing {e.filename or 'a file'}: {e.strerror or e}",
                                changed=transport.stats.sets_sent()) from e
    s.r.stats = transport.stats.snapshot()
    s.r.retry_policy = transport.policy.snapshot()
    s.r.seconds = time.monotonic() - s.t0
    r = s.r
    log.info("%s: %d Sets planned, %d SMPs sent (retries %d, timeouts %d), %.3f s",
             "plan" if opts.dry_run else "sweep", r.sets_planned, r.stats.get("sent", 0),
             r.stats.get("retries", 0), r.stats.get("timeouts", 0), r.seconds)
    for p in r.problems:
        log.warning("problem: %s", p)
    return r


def _write_pass(s: SweepState) -> None:
    """The Sets of one pass, in the safe order: LIDs and ARMED, tables, link tables, ACTIVE."""
    _arm_ports(s)
    _write_tables(s)
    _settle_unread(s)
    _write_links(s)
    s.r.known = _known_after(s.r, s.applied)
    s.r.known.links = set(s.links_failed)
    _activate(s)


def _unfinished(s: SweepState) -> dict:
    """What the last pass left undone, counted: {} when everything was confirmed."""
    ap = s.applied
    assert ap is not None  # _write_pass ran
    tables = (len(ap.plan.tops) - len(ap.written["tops"]) + sum(
        len(getattr(ap.plan, k)) - len(ap.written[k]) for k in ("lft", "rft", "mft")))
    left = {"ports_not_armed": len(s.arm_failed), "ports_not_active": len(s.not_active),
            "table_units": tables, "link_tables": len(s.links_failed)}
    return {k: v for k, v in left.items() if v}


def _repair(s: SweepState) -> None:
    """Passes over what did not finish, planned against what the earlier passes confirmed
    (`KnownState`: no discovery, no table reads; unconfirmed blocks are written again,
    ports not ARMED are armed, ports ARMED are activated), while the transport sees loss:
    on a fabric that loses nothing a failure is not one a retry fixes."""
    r, t = s.r, s.transport
    left = _unfinished(s)
    while left and r.passes <= s.opts.repair_passes and t.policy.lossy():
        r.passes += 1
        t0, sent0 = time.monotonic(), t.stats.sent
        name = f"repair_{r.passes}"
        cb = s.opts.progress
        progress = (lambda phase, name=name, cb=cb: cb(f"{name}: {phase}")) if cb is not None else None
        blank = SweepResult(None, None, progress=progress)  # type: ignore[arg-type]  # _plan fills them in
        sub = SweepState(t, dataclasses.replace(s.opts, known=r.known), blank,
                         t0, lid_file=s.lid_file, spec=s.spec, persisted=s.persisted, engine_input=s.engine_input,
                         route_spec=s.route_spec)
        _plan(sub)
        _write_pass(sub)
        q = sub.r
        r.known, r.problems = q.known, q.problems  # the last pass holds what is still wrong
        r.activations += q.activations
        r.lft_written += q.lft_written
        r.notes += [n for n in q.notes if n not in r.notes]
        r.phases[name] = {"smps": t.stats.sent - sent0, "seconds": round(time.monotonic() - t0, 4)}
        r.repairs.append({"pass": r.passes, "left_before": left, "sets": q.sets_planned,
                          "smps": t.stats.sent - sent0})
        left = _unfinished(sub)
    if left and r.passes > 1:
        r.problems.append(f"after {r.passes} passes still not done: "
                          + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in left.items()))


def _plan(s: SweepState) -> None:
    """The phases up to the plan: only Gets."""
    _discover(s)
    _check_sms(s)
    _resolve_desired(s)
    _assign_lids(s)
    _route(s)
    _plan_ports(s)
    _read_links(s)
    _read_lfts(s)
    _read_rfts(s)
    _read_mfts(s)
    _plan_switchinfo(s)
    _check_planned_tables(s)
    s.r.seconds = time.monotonic() - s.t0


# -- planning phases -------------------------------------------------------------------------

def _prepare(transport: Transport, opts: SweepOptions) -> SweepState:
    """Read and check every input file before any SMP: the group file, the LID file, the
    routing spec, and whatever a sweep writes after its Sets (refused now, not half-way)."""
    transport.check_writable(opts.dry_run)  # a recording: refused before the first Get
    # empty until discovery and the LID phase fill them
    empty = SweepResult(discovery.Topology({}, {}, (0, 0)), lids.LidPlan({}, 0, 0, []), progress=opts.progress)
    s = SweepState(transport, opts, empty, time.monotonic())
    groups = opts.mcast_groups
    if opts.multicast and isinstance(groups, (str, os.PathLike)):
        s.spec = multicast.load_groups(groups)
    elif not isinstance(groups, (str, os.PathLike)):
        s.spec = groups
    # LIDs survive port resets and restarts: kept in the state directory unless a file is named
    s.lid_file = opts.lid_file or (os.path.join(opts.state_dir, GUID2LID) if opts.state_dir else None)
    s.persisted = lids.load_guid2lid(s.lid_file) if s.lid_file else {}
    s.route_spec = routing.parse_spec(opts.routing)
    s.engine_input = routing.preload(s.route_spec)
    if not opts.dry_run:
        if opts.lid_file:
            paths.check_output(opts.lid_file, "--lid-file")
        if opts.state_dir:
            paths.check_state_dir(opts.state_dir)
    return s


def _discover(s: SweepState) -> None:
    known = s.opts.known
    with s.phase("discover"):
        s.r.topology = known.topology if known is not None else discovery.discover(s.transport)
    if not s.topo.switches():
        raise SweepError(_no_switch_reason(s.topo))


def _check_sms(s: SweepState) -> None:
    with s.phase("sm_check"):
        if s.opts.known is None:  # a repair: the running SM knows the other SMs
            s.r.notes += check_other_sms(s.transport, s.topo, force=s.opts.force)


def _resolve_desired(s: SweepState) -> None:
    """Names -> GUIDs against what was found; every problem at once, before any Set."""
    if s.opts.desired is None:
        return
    from smagent import desired
    s.resolved = desired.resolve(s.opts.desired, s.topo)
    if s.opts.desired.multicast and s.opts.multicast:
        s.spec = desired.group_spec(s.opts.desired, s.resolved, s.topo)


def _assign_lids(s: SweepState) -> None:
    """LIDs under the smallest LinearFDBCap (LIDs 0..cap-1 are in the table)."""
    topo, r = s.topo, s.r
    caps = [n.switch_info.linear_fdb_cap for n in topo.switches() if n.switch_info and n.switch_info.linear_fdb_cap]
    limit = min(caps) - 1 if caps else fw.UNICAST_LID_MAX
    ports = []
    for n in sorted(topo.nodes.values(), key=lambda n: (len(n.path), n.path)):
        for p in n.lid_ports():
            pg = n.port_guids.get(p, n.guid)
            ports.append((pg, n.is_switch, n.ports[p].lid if p in n.ports else 0))
    plan_ = lids.assign(ports, lmc=s.opts.lmc, limit=limit, persisted=s.persisted)
    # ports the LID file knows that this sweep did not find keep their LIDs reserved
    found = {g for g, _sw, _cur in ports}
    r.missing = {g: rng for g, rng in s.persisted.items() if g not in found}
    for g, (lo, _hi) in sorted(r.missing.items(), key=lambda kv: kv[1]):
        r.notes.append(f"port {g:#018x} (LID {lo} in {s.lid_file}) was not found; its LID stays reserved")
    lg, lp = topo.local
    local_node = topo.nodes[lg]
    plan_.master_lid = plan_.lids[local_node.port_guids.get(0 if local_node.is_switch else lp, lg)]
    r.lid_plan = plan_
    r.notes += plan_.notes


def _route(s: SweepState) -> None:
    topo, r, plan_ = s.topo, s.r, s.r.lid_plan
    with s.phase("route"):
        s.rin = routing_input(topo, plan_)
        spec = s.route_spec
        if s.resolved is not None and s.resolved.roots:  # desired state `root:` (routing updn)
            spec = spec.with_roots(s.resolved.roots)
        routes = s.routes = routing.route(spec, s.rin, s.engine_input)
        r.notes += routes.notes
        static = s.resolved.static_lft if s.resolved is not None else {}
        for g, entries in static.items():  # static entries override routing
            routes[g] = routes[g].updated(entries)
            plan_.top = max(plan_.top, max(entries))
        # a static entry (even 255) is the admin's choice, not a missing route
        homes = sorted(s.rin.lid_homes)
        unrouted = [(g, lid) for g in s.rin.switches for lid in routes[g].missing(homes)
                    if lid not in static.get(g, ())]
        if unrouted:
            names = sorted({topo.nodes[g].description for g, _ in unrouted})
            cause = ("the routing file has no entry for them" if spec.engine == "file"
                     else "the switch graph is split")
            r.problems.append(f"{len(unrouted)} (switch, LID) pairs have no route: {cause} "
                              f"(switches missing routes: {', '.join(names[:5])})")


def routing_input(topo: discovery.Topology, plan: lids.LidPlan) -> routing.RoutingInput:
    """What the routing engines read: the switch graph and where every LID lives (port 0
    of a switch; the switch port a CA port hangs off, for each of its 2^LMC LIDs)."""
    switches = sorted(n.guid for n in topo.switches())
    sw = set(switches)
    adjacency: dict[int, list[tuple[int, int]]] = {g: [] for g in switches}
    lid_homes: dict[int, tuple[int, int]] = {}
    for (g, p), (g2, p2) in topo.links.items():
        if g in sw and g2 in sw and g != g2:
            adjacency[g].append((p, g2))
    for g in switches:
        adjacency[g].sort()
        pg = topo.nodes[g].port_guids.get(0, g)
        if pg in plan.lids:
            lid_homes[plan.lids[pg]] = (g, 0)
    for n in topo.cas():
        for p in n.lid_ports():
            ca_pg = n.port_guids.get(p)
            peer = topo.links.get((n.guid, p))
            if ca_pg is None or ca_pg not in plan.lids or peer is None or peer[0] not in sw:
                continue  # a CA-to-CA cable or an unassigned port: nothing to route to
            base = plan.lids[ca_pg]
            for lid in range(base, base + (1 << plan.lmc)):
                lid_homes[lid] = peer
    return routing.RoutingInput(switches, adjacency, lid_homes, {g: topo.nodes[g].num_ports for g in switches},
                                {g: topo.nodes[g].description for g in switches})


def _plan_ports(s: SweepState) -> None:
    """Ports: LID/LMC/MasterSMLID, link fields (smagent.links) and INIT -> ARMED."""
    topo, plan_, opts = s.topo, s.r.lid_plan, s.opts
    s.link_opts = None if opts.links is False else (
        opts.links or getattr(opts.desired, "links", None) or links.LinkOptions())
    for n in topo.nodes.values():
        for p in sorted(n.ports):
            pi = n.ports[p]
            carries_lid = p in n.lid_ports()
            linked = (n.guid, p) in topo.links or (n.is_switch and p == 0)
            if not linked or (not carries_lid and n.is_switch and p == 0):
                continue
            lid = plan_.lids[n.port_guids.get(p, n.guid)] if carries_lid else None
            want_lmc = 0 if n.is_switch else plan_.lmc
            lid_differs = lid is not None and (pi.lid != lid or pi.lmc != want_lmc or pi.master_sm_lid != plan_.master_lid)
            arm = pi.port_state in (PortState.INIT, PortState.ARMED)  # ARMED: left there earlier
            link = links.port_fields(topo, n, p, s.link_opts) if s.link_opts else {}
            s.op_vls[(n.guid, p)] = link.get("operational_vls", pi.operational_vls)
            link_diff = links.port_diff(pi, link)
            if lid_differs or arm or link_diff:
                s.r.port_changes.append(PortChange(n.guid, n.description, p, n.path_to_port(p), pi, lid, arm,
                                                   link, link_diff))


def _read_links(s: SweepState) -> None:
    if not s.link_opts:
        return
    with s.phase("link_read"):
        # a repair: the tables of the nodes whose ports come up again, and of those whose tables got no answer
        only = ({c.guid for c in s.r.port_changes if c.arm} | s.opts.known.links) if s.opts.known is not None else None
        s.r.link_changes, problems, notes = links.plan_tables(s.transport, s.topo, s.link_opts, s.op_vls, only,
                                                              s.links_failed)
        s.r.problems += problems
        s.r.notes += notes


def _read_lfts(s: SweepState) -> None:
    """Read what is live (blocks up to the current LinearFDBTop; above it the switch
    forwards nothing, so those blocks are written without reading), diff by block."""
    topo, r, top = s.topo, s.r, s.r.lid_plan.top
    kept_routes = 0
    with s.phase("lft_read"):
        wanted, desired = [], {}
        for n in topo.switches():
            if not n.switch_info or not n.switch_info.linear_fdb_cap:
                continue
            desired[n.guid] = linear.desired_lft(s.routed[n.guid], top)
            cur_top = n.switch_info.linear_fdb_top
            for b in range(len(desired[n.guid]) // fw.LFT_BLOCK_SIZE):
                if b * fw.LFT_BLOCK_SIZE <= cur_top:
                    wanted.append((n.guid, n.path, b))
        if s.opts.known is not None:
            known = s.opts.known.lft
            current, errors = {(g, b): known[(g, b)] for g, _p, b in wanted if (g, b) in known}, list[str]()
        else:
            current, errors = linear.read_lft_blocks(s.transport, wanted)
        s.unread += _read_failures(s, wanted, current, errors, "LFT block")  # see _settle_unread
        r.lft_current = current
        for g, table in desired.items():
            n = topo.nodes[g]
            for b in range(len(table) // fw.LFT_BLOCK_SIZE):
                new = bytes(table[b * fw.LFT_BLOCK_SIZE:(b + 1) * fw.LFT_BLOCK_SIZE])
                old = current.get((g, b))
                if topo.unreachable and old is not None:
                    new, kept = _keep_unreached_routes(s, b, old, new)
                    kept_routes += kept
                if old != new:
                    r.lft_changes.append(linear.BlockChange(g, n.description, n.path, b, old, new))
    if kept_routes:
        r.notes.append(f"discovery was incomplete: kept {kept_routes} existing routes to LIDs it did not reach")


def _read_failures(s: SweepState, wanted: list, current: dict, errors: list[str], unit: str) -> list[tuple]:
    """The errors of a table read, one line per switch (a switch that stopped answering is
    one report, not one per block), with the units it covers: [(line, {(switch, *unit)})].
    ``errors`` come in the order of the units of ``wanted`` missing from ``current``."""
    by: dict = {}
    for w, e in zip([w for w in wanted if (w[0], *w[2:]) not in current], errors):
        by.setdefault(w[0], []).append((w, e))
    name = s.topo.nodes
    return [(failed_units_lines([(name[g].description, " position ".join(map(str, w[2:])), e, e)
                                 for w, e in items], unit)[0], {(g, *w[2:]) for w, _e in items})
            for g, items in by.items()]


def _unread_are_problems(s: SweepState) -> None:
    """A plan with no write phase: the units that could not be read stay problems
    (nothing will write them, see `_settle_unread`)."""
    s.r.problems += [line for line, _keys in s.unread]


def _settle_unread(s: SweepState) -> None:
    """A unit that could not be read is written all the same (it cannot hold the plan):
    once its write is confirmed the switch holds the plan, and the failed read only cost
    the backup of that unit, a note; else it stays a problem."""
    assert s.applied is not None  # the write phase ran
    written = ({(c.switch, c.block) for c in s.applied.written["lft"]}
               | {(c.switch, c.block, c.position) for c in s.applied.written["mft"]})
    for line, keys in s.unread:
        if keys <= written:
            s.r.notes.append(f"{line} (written since and read back; not in the backup)")
        else:
            s.r.problems.append(line)
    s.unread = []


def _keep_unreached_routes(s: SweepState, block: int, old: bytes, new: bytes) -> tuple[bytes, int]:
    """Part of the fabric did not answer: keep the routes a block had to LIDs this sweep
    did not find, rather than cut off hosts that may be alive behind a flaky link."""
    base = block * fw.LFT_BLOCK_SIZE
    homes = s.routing_input.lid_homes
    kept = bytes(o if nw == fw.LFT_NO_PORT and o != fw.LFT_NO_PORT and base + i not in homes else nw
                 for i, (o, nw) in enumerate(zip(old, new)))
    return kept, sum(1 for x, y in zip(kept, new) if x != y)


def _read_rfts(s: SweepState) -> None:
    """Switches without an LFT that have a random table. Entries and DefaultPort are
    planned (and checked against LIDsPerPort / RandomFDBCap) before any read; the whole
    table is read, since a stale valid entry anywhere in it would still match."""
    topo, r = s.topo, s.r
    with s.phase("rft_read"):
        rft_switches = [(n, n.switch_info) for n in topo.switches() if n.switch_info
                        and not n.switch_info.linear_fdb_cap and n.switch_info.random_fdb_cap]
        plans = {}
        for n, si in rft_switches:
            sw_ports = {p for p in range(1, n.num_ports + 1)
                        if (n.guid, p) in topo.links and topo.nodes[topo.links[(n.guid, p)][0]].is_switch}
            try:
                plans[n.guid] = rft.plan_switch(n.guid, n.description, s.routed.get(n.guid, {}), sw_ports, si)
            except rft.RftError as e:
                raise SweepError(f"{e}; nothing was sent") from None
        wanted = [(n.guid, n.path, b) for n, si in rft_switches for b in range(rft.blocks_for(si.random_fdb_cap))]
        current, errors = rft.read_rft_blocks(s.transport, wanted)
        r.rft_current = current
        for n, si in rft_switches:
            nb = rft.blocks_for(si.random_fdb_cap)
            missing = [b for b in range(nb) if (n.guid, b) not in current]
            if missing:
                r.problems.append(f"{n.description}: RFT blocks {missing[:8]} could not be read; its RFT is not "
                                  f"programmed")
                continue
            table = [e for b in range(nb) for e in current[(n.guid, b)]]
            pl = plans[n.guid]
            r.rft_plans.append(pl)
            r.rft_changes += rft.changes(pl, n.path, table, si)
            if pl.default_port is not None:
                s.default_port[n.guid] = pl.default_port
        r.problems += [f"RFT read: {line}" for line, _keys in _read_failures(s, wanted, current, errors, "RFT block")]


def _read_mfts(s: SweepState) -> None:
    """A tree per group, then every (block, position) that could hold one of the groups'
    entries or a stale one below them is read: blocks 0 .. the highest group block
    (MLIDs are handed out from 0xC000 up, so that is where stale entries live), and, on
    a switch with MulticastFDBTop, every block up to its current top (what it forwards).
    Entries in higher blocks of a switch without MulticastFDBTop are neither read nor
    touched."""
    topo, r = s.topo, s.r
    if s.opts.multicast:
        s.mplan = r.multicast = multicast.plan(topo, s.spec)
        r.notes += s.mplan.notes
    mplan = s.mplan
    with s.phase("mft_read"):
        units, wanted = {}, []
        group_blocks = {fw.mft_block(m)[0] for m in (mplan.mlids() if mplan else [])}
        for n in (topo.switches() if mplan and (mplan.trees or mplan.defaults) else []):
            si = n.switch_info
            if mplan is None or si is None or not si.multicast_fdb_cap:
                continue
            entries = mplan.desired.get(n.guid, {})
            top_ok = bool(n.ports.get(0) and n.ports[0].capability_mask & CAP_IS_MCAST_FDB_TOP)
            last = max(group_blocks, default=-1)
            if top_ok and si.multicast_fdb_top >= fw.MULTICAST_LID_MIN:
                last = max(last, fw.mft_block(min(si.multicast_fdb_top, fw.MULTICAST_LID_MAX))[0])
            last = min(last, fw.mft_blocks_for(si.multicast_fdb_cap) - 1)
            units[n.guid] = mfttab.mft_units(entries, range(last + 1), fw.mft_positions_for(n.num_ports))
            wanted += [(n.guid, n.path, b, p) for b, p in sorted(units[n.guid])]
            if top_ok:
                s.mft_top[n.guid] = max(entries, default=MFT_TOP_NONE)
        if s.opts.known is not None:
            known = s.opts.known.mft
            current, errors = {(g, b, p): known[(g, b, p)] for g, _path, b, p in wanted if (g, b, p) in known}, list[str]()
        else:
            current, errors = mfttab.read_mft_units(s.transport, wanted)
        r.mft_current = current
        s.unread += [(f"MFT read: {line}", keys) for line, keys in _read_failures(s, wanted, current, errors,
                                                                                   "MFT block")]
        _diff_mfts(s, units, current)


def _diff_mfts(s: SweepState, units: dict, current: dict) -> None:
    """MFT changes; entries of MLIDs outside the groups are kept (and reported) unless pruning."""
    r, opts = s.r, s.opts
    prune = opts.prune_multicast or bool(opts.desired is not None and opts.desired.multicast_prune)
    foreign: dict[int, list[str]] = {}  # MLID -> switches holding it
    group_mlids = set(s.mplan.mlids()) if s.mplan else set()
    for g, desired_units in units.items():
        n = s.topo.nodes[g]
        if not prune:
            kept = mfttab.keep_unconfigured(desired_units, current, g, group_mlids)
            for mlid in kept:
                foreign.setdefault(mlid, []).append(n.description)
            if kept and g in s.mft_top:  # MulticastFDBTop must not cut them off
                s.mft_top[g] = max(s.mft_top[g], max(kept))
        r.mft_changes += mfttab.diff_mft(g, n.description, n.path, desired_units, current)
    r.multicast_kept = {f"0x{m:04x}": sw for m, sw in sorted(foreign.items())}
    how = "multicast_prune: true in the desired state" if opts.desired is not None else "--prune-multicast"
    for m, sw in sorted(foreign.items()):
        r.notes.append(f"multicast: kept MLID 0x{m:04x} on {', '.join(sw[:4])}{' ...' if len(sw) > 4 else ''}: "
                       f"not in the configured groups ({how} removes it)")


def _plan_switchinfo(s: SweepState) -> None:
    """LinearFDBTop, LifeTimeValue, DefaultPort (RFT), MulticastFDBTop (where supported),
    default multicast ports (group file only), desired-state settings, and clear
    PortStateChange: the sweep has just looked at the whole fabric, so a pending one is seen."""
    mplan = s.mplan
    for n in s.topo.switches():
        si = n.switch_info
        if si is None:
            continue
        want = {"life_time_value": LIFE_TIME_VALUE}
        if si.linear_fdb_cap:
            want["linear_fdb_top"] = s.r.lid_plan.top
        if n.guid in s.default_port:
            want["default_port"] = s.default_port[n.guid]
        if n.guid in s.mft_top:
            want["multicast_fdb_top"] = s.mft_top[n.guid]
        if mplan and n.guid in mplan.defaults:
            want["default_multicast_primary_port"], want["default_multicast_not_primary_port"] = mplan.defaults[n.guid]
        if s.resolved is not None:
            want.update(s.resolved.switch_settings.get(n.guid, {}))
        c = tops.change(n.guid, n.description, n.path, si, want, clear_port_state_change=True)
        if c is not None:
            s.r.switch_changes.append(c)


def _check_planned_tables(s: SweepState) -> None:
    """The tables the plan would leave, checked as `verify` checks live ones (smagent.plancheck).
    What they would break is refused here, before the first Set, unless allowed; a dry run
    reports it. A repair of the running SM (``known``) plans around a fault it just saw:
    not checked, so it reacts at once."""
    if s.opts.known is not None:
        return
    from smagent import plancheck
    with s.phase("plan_check"):
        pc = s.r.plan_check = plancheck.check(s.r)
    s.r.notes += pc.notes()
    if pc.defects and not s.opts.dry_run and not s.opts.allow_defects:
        raise PlanDefects("the planned tables would break the fabric; nothing was sent (allow_defects / "
                          "--allow-defects writes them anyway):\n  " + "\n  ".join(pc.lines()), pc.defects)


# -- writing phases --------------------------------------------------------------------------

def _portinfo_set(c: PortChange, state: int, master_lid: int, lmc: int) -> Request:
    pi = c.current
    key = (c.lid, master_lid, lmc)
    if c.encoded is not None and c.encoded[0] is pi and c.encoded[1] == key:
        # the Set built before (ARMED) but for its PortState (ACTIVE): patch its bytes
        data = pi.LAYOUT.patch(c.encoded[2], port_state=state)
    else:
        fields = dict(port_state=state, port_physical_state=0, link_down_default_state=0,
                      link_width_enabled=0, link_speed_enabled=0)  # 0 = no change for these
        if c.lid is not None:
            fields.update(lid=c.lid, lmc=lmc, master_sm_lid=master_lid)
        fields.update(c.link)
        data = pi.LAYOUT.replace(pi, **fields).encode()
        c.encoded = (pi, key, data)
    return _dr(Method.SET, AttrID.PORT_INFO, c.path, portinfo_modifier(c.port), data)


def _confirm_port_sets(transport, failed, want, master_lid, lmc_for, topo=None):
    """A PortInfo Set whose response was lost may have been applied, and its retry then
    asks for a state transition the port has already made (ARMED -> ARMED), which the SMA
    refuses. So a failed Set is re-read: if the port already holds what we wanted, it is
    done. What is read goes into ``topo`` (a repair pass plans on it). Returns the
    (change, error) pairs that really failed."""
    if not failed:
        return []
    reqs = [_dr(Method.GET, AttrID.PORT_INFO, c.path, portinfo_modifier(c.port)) for c, _e in failed]
    still = []
    for (c, err), rep in zip(failed, transport.execute(reqs)):
        if rep.ok:
            pi = rep.value()
            if topo is not None:
                topo.nodes[c.guid].ports[c.port] = pi
            want_state = want(c) if callable(want) else want
            lid_ok = c.lid is None or (pi.lid == c.lid and pi.lmc == lmc_for(c) and pi.master_sm_lid == master_lid)
            state_ok = want_state is None or pi.port_state == want_state or (
                want_state == PortState.ARMED and pi.port_state == PortState.ACTIVE)
            if lid_ok and state_ok:
                continue
            if pi.port_state == PortState.DOWN:
                err = "the port is DOWN now: its link went away during the sweep (the next sweep picks it up)"
        still.append((c, err))
    return still



def _known_after(r: SweepResult, ap) -> KnownState:
    """The state an apply left: the tables as planned against, the confirmed writes on
    top (a block written but not confirmed is unknown), SwitchInfo as read back."""
    lft = dict(r.lft_current)
    for c in r.lft_changes:
        lft.pop((c.switch, c.block), None)
    lft.update(((c.switch, c.block), bytes(c.new)) for c in ap.written["lft"])
    mft = dict(r.mft_current)
    for m in r.mft_changes:
        mft.pop((m.switch, m.block, m.position), None)
    mft.update(((m.switch, m.block, m.position), list(m.new)) for m in ap.written["mft"])
    for t, back in ap.written["tops"]:
        r.topology.nodes[t.switch].switch_info = back
    return KnownState(r.topology, lft, mft)


def _lmc_for(s: SweepState, c: PortChange) -> int:
    return 0 if s.topo.nodes[c.guid].is_switch else s.r.lid_plan.lmc


def _note_interrupted_apply(s: SweepState) -> None:
    if not s.opts.state_dir:
        return
    from smagent.fdb.journal import Journal
    pending = Journal.pending(os.path.join(s.opts.state_dir, "apply.journal"))
    if pending is not None:
        s.r.notes.append(f"the previous apply was interrupted with {len(pending.remaining)} of {len(pending.plan)} "
                         f"table blocks unconfirmed; this sweep re-plans from the live tables and finishes it")


def _needs_set(c: PortChange, master_lid: int, lmc: int) -> bool:
    """Does the arming phase send this port anything? Not a port already ARMED with its
    LID fields and link fields as wanted (a repair pass only activates it)."""
    if c.arm and c.current.port_state != PortState.ARMED:
        return True
    pi = c.current
    return bool(c.link_diff) or (c.lid is not None and (pi.lid != c.lid or pi.lmc != lmc
                                                        or pi.master_sm_lid != master_lid))


def _arm_ports(s: SweepState) -> None:
    """LIDs, LMC, MasterSMLID and link fields to every changed port; INIT ports to ARMED."""
    r, lp = s.r, s.r.lid_plan
    with s.phase("lids_arm"):
        todo = [c for c in r.port_changes if _needs_set(c, lp.master_lid, _lmc_for(s, c))]
        reqs = [_portinfo_set(c, PortState.ARMED if c.arm and c.current.port_state == PortState.INIT
                              else PortState.NO_CHANGE, lp.master_lid, _lmc_for(s, c)) for c in todo]
        failed = []
        for c, rep in zip(todo, s.transport.execute(reqs)):
            if not rep.ok:
                failed.append((c, rep.error))
                continue
            back = rep.value(PortInfo)
            r.topology.nodes[c.guid].ports[c.port] = back  # what the port holds now (a repair plans on it)
            if c.lid is not None and back.lid != c.lid:
                r.problems.append(f"{c.name} port {c.port}: LID reads back {back.lid}, expected {c.lid}")
        for c, err in _confirm_port_sets(s.transport, failed, lambda c: PortState.ARMED if c.arm else None,
                                         lp.master_lid, lambda c: _lmc_for(s, c), r.topology):
            r.problems.append(f"{c.name} port {c.port}: PortInfo Set failed: {err}")
            s.arm_failed.add((c.guid, c.port))


def _write_tables(s: SweepState) -> None:
    """SwitchInfo, LFT, RFT and MFT blocks through `smagent.fdb.apply`: what is about to
    be overwritten (the link tables of `_write_links` too) is saved first, and the apply
    is journalled as blocks come back."""
    r = s.r
    ap = fdbapply.Apply(s.transport, fdbapply.Plan(r.switch_changes, r.lft_changes, r.rft_changes, r.mft_changes,
                                                   r.link_changes),
                        state_dir=s.opts.state_dir, topology=r.topology, chunk=JOURNAL_CHUNK)
    with s.phase("switchinfo"):
        ap.start()
        r.backup_file = ap.backup_file
        r.problems += ap.switchinfo()
    with s.phase("lft_write"):
        r.problems += ap.lft()  # in chunks, journalled as each comes back
        r.lft_written = ap.lft_written
    with s.phase("rft_write"):
        r.problems += ap.rft()
    with s.phase("mft_write"):
        r.problems += ap.mft()
    s.applied = ap


def _write_links(s: SweepState) -> None:
    """SL2VL, VLArb and P_Key tables, before any port is ACTIVE: the last step of the
    apply `_write_tables` began (backed up and journalled with it)."""
    ap = s.applied
    assert ap is not None  # _write_tables began it
    with s.phase("link_write"):
        s.r.problems += ap.links(s.links_failed)
    ap.finish(ok=not s.r.problems)


def _activate(s: SweepState) -> None:
    """ARMED -> ACTIVE, each response read back."""
    r, lp, topo = s.r, s.r.lid_plan, s.r.topology
    with s.phase("activate"):
        arming = []
        for c in r.port_changes:
            if not c.arm:
                continue
            if (c.guid, c.port) in s.arm_failed:
                s.not_active.append(c)  # reported with its failed Set
                continue
            peer = topo.links.get((c.guid, c.port))
            if peer in s.arm_failed:  # ACTIVE needs the neighbour ARMED: it would be refused
                s.not_active.append(c)  # the neighbour's failed Set is the problem reported
                r.notes.append(f"{c.name} port {c.port}: not activated: its neighbour "
                               f"{topo.nodes[peer[0]].description} port {peer[1]} did not reach ARMED")
                continue
            arming.append(c)
        # the same LID fields again: a Set writes the whole attribute
        reqs = [_portinfo_set(c, PortState.ACTIVE, lp.master_lid, _lmc_for(s, c)) for c in arming]
        failed = []
        for c, rep in zip(arming, s.transport.execute(reqs)):
            if not rep.ok:
                failed.append((c, rep.error))
                continue
            back = topo.nodes[c.guid].ports[c.port] = rep.value(PortInfo)
            if back.port_state != PortState.ACTIVE:
                s.not_active.append(c)
                r.problems.append(f"{c.name} port {c.port}: port state reads back "
                                  f"{PortState(back.port_state).name}, not ACTIVE")
        for c, err in _confirm_port_sets(s.transport, failed, PortState.ACTIVE, lp.master_lid,
                                         lambda c: _lmc_for(s, c), topo):
            s.not_active.append(c)
            r.problems.append(f"{c.name} port {c.port}: Set ACTIVE failed: {err}")
        r.activations = len(arming)


def _save_lids(s: SweepState) -> None:
    """The LID file: every LID assigned, and those of ports not seen this time (kept for
    when they return)."""
    if not s.lid_file:
        return
    lp = s.r.lid_plan
    sw_ports = {n.port_guids.get(0, n.guid) for n in s.topo.switches()}
    table = {g: (lid, lid + (0 if g in sw_ports else (1 << lp.lmc) - 1)) for g, lid in lp.lids.items()}
    for g, rng in s.r.missing.items():
        table.setdefault(g, rng)
    os.makedirs(os.path.dirname(os.path.abspath(s.lid_file)), exist_ok=True)  # a new state directory
    lids.save_guid2lid(s.lid_file, table)
