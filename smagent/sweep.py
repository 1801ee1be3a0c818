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
import os
import time

from mad import codes
from mad import forwarding as fw
from mad import smp as smpcodec
from mad.attributes import CAP_IS_SM, AttrID, PortState, SMState
from mad.forwarding import portinfo_modifier
from mad.header import Method
from smagent import discovery, lids, links, multicast, paths, routing
from smagent.fdb import apply as fdbapply
from smagent.fdb import linear, tops
from smagent.fdb import multicast as mfttab
from smagent.fdb import random as rft
from smagent.fdb.switch import interleave
from smagent.errors import FabricFailure, SafetyRefusal
from smagent.transport.base import Request, Transport

JOURNAL_CHUNK = 256  # LFT blocks written between two journal records
LIFE_TIME_VALUE = 18  # what OpenSM programs (packet lifetime 2^18 * 4.096 us)
CAP_IS_MCAST_FDB_TOP = 1 << 30  # PortInfo.CapabilityMask: IsMulticastFDBTopSupported
MFT_TOP_NONE = fw.MULTICAST_LID_MIN - 1  # MulticastFDBTop with no valid entry (OpenSM's value)
GUID2LID = "guid2lid"  # the LID file in the state directory (OpenSM's name and format)


class SweepError(FabricFailure):
    """The sweep could not finish; the message says what and where."""


class OtherMasterSM(SafetyRefusal):
    """Another subnet manager is MASTER: refused before the first Set (--force overrides)."""


@dataclasses.dataclass
class SweepOptions:
    lmc: int = 0
    lid_file: str | None = None
    routing: str = "minhop"
    dry_run: bool = False
    force: bool = False
    # multicast: a group file path, a parsed multicast.GroupSpec, or None for the default
    # group (0xC000, every CA port); multicast=False leaves every MFT alone
    mcast_groups: object = None
    multicast: bool = True
    # where LFT blocks are saved before they are overwritten, the apply journal lives
    # (smagent.fdb.backup, smagent.fdb.journal) and, without lid_file, the LIDs are kept
    # (<state_dir>/guid2lid); None: none of these (the in-process simulator's default)
    state_dir: str | None = None
    progress: object = None  # callable(phase name) when a phase starts: the CLI's status line
    desired: object = None  # a desired.DesiredState: static LFT entries, groups, SwitchInfo settings
    links: object = None  # links.LinkOptions (None: OpenSM's defaults); False: configure no link
    # MFT entries of MLIDs outside the configured groups: kept and reported (False), or
    # removed (True; also desired state `multicast_prune: true`)
    prune_multicast: bool = False
    # a KnownState (what an earlier sweep left): plan against it with no discovery and no
    # table reads; the running SM's repairs, after it updated the topology itself
    known: object = None


@dataclasses.dataclass
class KnownState:
    """What the switches hold as far as our own sweeps know: the topology (PortInfo and
    SwitchInfo as the last Sets answered), LFT blocks {(switch, block): bytes} and MFT
    units {(switch, block, position): masks}. A block missing is unknown (it is written)."""
    topology: object
    lft: dict
    mft: dict


@dataclasses.dataclass
class PortChange:
    guid: int
    name: str
    port: int
    path: tuple[int, ...]
    current: object  # PortInfo as read
    lid: int | None  # new base LID (None: not a LID-carrying port)
    arm: bool
    link: dict = dataclasses.field(default_factory=dict)  # link fields every Set to it carries (links.py)
    link_diff: dict = dataclasses.field(default_factory=dict)  # {field: (old, new)} of those that change

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
            parts.append(f"port_state {PortState(self.current.port_state).name} -> ARMED -> ACTIVE")
        return f"{self.name} port {self.port}: " + ", ".join(parts)


@dataclasses.dataclass
class SweepResult:
    topology: object
    lid_plan: object
    port_changes: list = dataclasses.field(default_factory=list)
    switch_changes: list = dataclasses.field(default_factory=list)  # (name, path, old, new)
    lft_changes: list = dataclasses.field(default_factory=list)
    mft_changes: list = dataclasses.field(default_factory=list)
    rft_changes: list = dataclasses.field(default_factory=list)
    link_changes: list = dataclasses.field(default_factory=list)  # links.TableChange: SL2VL, VLArb, P_Key
    multicast: object = None  # multicast.MulticastPlan
    multicast_kept: dict = dataclasses.field(default_factory=dict)  # "0xMLID" -> switches, not pruned
    rft_plans: list = dataclasses.field(default_factory=list)
    missing: dict = dataclasses.field(default_factory=dict)  # port GUID -> (lo, hi) from the LID file, not found
    backup_file: str | None = None
    lft_current: dict = dataclasses.field(default_factory=dict)  # what the plan diffed against
    mft_current: dict = dataclasses.field(default_factory=dict)
    known: KnownState | None = None  # after an apply: the state it left, for the next repair
    lft_written: int = 0
    progress: object = None
    activations: int = 0
    phases: dict = dataclasses.field(default_factory=dict)
    problems: list = dataclasses.field(default_factory=list)
    notes: list = dataclasses.field(default_factory=list)
    dry_run: bool = False
    seconds: float = 0.0
    stats: dict = dataclasses.field(default_factory=dict)

    @property
    def sets_planned(self) -> int:
        return (len(self.port_changes) + len(self.switch_changes) + len(self.lft_changes)
                + len(self.mft_changes) + len(self.rft_changes) + len(self.link_changes) + sum(1 for c in self.port_changes if c.arm))

    def plan_lines(self) -> list[str]:
        master = self.lid_plan.master_lid
        out = [f"SubnSet(PortInfo) {c.describe(master, self.lid_plan.lmc)}" for c in self.port_changes]
        for c in self.switch_changes:
            out.append(f"SubnSet(SwitchInfo) {c.name}: " + ", ".join(c.diffs()))
        for c in interleave(self.lft_changes):
            ch = c.changed_lids()
            shown = ", ".join(f"{lid}: {'?' if o is None else o} -> {n}" for lid, o, n in ch[:4])
            more = f" (+{len(ch) - 4} more)" if len(ch) > 4 else ""
            out.append(f"SubnSet(LinearForwardingTable) {c.name} block {c.block}: {shown}{more}")
        for c in interleave(self.rft_changes):
            out.append(f"SubnSet(RandomForwardingTable) {c.describe()}")
        for c in interleave(self.mft_changes):
            out.append(f"SubnSet(MulticastForwardingTable) {c.describe()}")
        out += [c.describe() for c in self.link_changes]
        return out

    def summary(self) -> dict:
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
            "rft": [{"switch": p.name, "entries": len(p.entries),
                     "default_port": p.default_port, "lids_to_default_port": p.omitted} for p in self.rft_plans],
            "phases": self.phases, "smps_sent": self.stats.get("sent", 0),
            "retries": self.stats.get("retries", 0), "timeouts": self.stats.get("timeouts", 0),
            "unreachable": topo.unreachable, "problems": self.problems, "notes": self.notes,
            "missing": {f"{g:#018x}": lo for g, (lo, _hi) in sorted(self.missing.items())},
            "backup": self.backup_file,
            "seconds": round(self.seconds, 3),
        }

    def _multicast_summary(self) -> list[dict]:
        if self.multicast is None:
            return []
        names = {n.guid: n.description for n in self.topology.nodes.values()}
        return [{"mlid": f"0x{t.group.mlid:04x}", "members": len(t.members), "root": names.get(t.root),
                 "switches": len(t.ports)} for t in self.multicast.trees]


class _Phase:
    def __init__(self, result: SweepResult, transport: Transport, name: str):
        self.r, self.t, self.name = result, transport, name

    def __enter__(self):
        self.t0, self.s0 = time.monotonic(), self.t.stats.sent
        if self.r.progress is not None:
            self.r.progress(self.name)
        return self

    def __exit__(self, *exc):
        self.r.phases[self.name] = {"smps": self.t.stats.sent - self.s0,
                                    "seconds": round(time.monotonic() - self.t0, 4)}


def _dr(method, attr, path, mod=0, value=None) -> Request:
    return Request(smpcodec.dr(method, attr, path, mod, value))


def find_sms(transport: Transport, topo) -> list[tuple]:
    """Every other port with IsSM, asked for its SMInfo: (node, port, PortInfo, Reply).
    The local port is skipped only when the transport itself is the SM there
    (`Transport.owns_sm_port`): else its IsSM is another SM on the same port (OpenSM on
    this HCA: ibsim and the kernel hand it the SMInfo Get to DR path 0)."""
    reqs, who = [], []
    own = getattr(transport, "owns_sm_port", False)
    for n in topo.nodes.values():
        for p in n.lid_ports():
            pi = n.ports.get(p)
            if pi is None or not pi.capability_mask & CAP_IS_SM:
                continue
            if own and ((n.guid, p) == topo.local or (n.is_switch and topo.local[0] == n.guid)):
                continue
            reqs.append(_dr(Method.GET, AttrID.SM_INFO, n.path_to_port(p)))
            who.append((n, p, pi))
    return [(n, p, pi, r) for (n, p, pi), r in zip(who, transport.execute(reqs))]


def check_other_sms(transport: Transport, topo, *, force: bool) -> list[str]:
    """Find ports with IsSM and ask their SMInfo (`find_sms`); refuse while another is MASTER."""
    notes = []
    for n, p, pi, r in find_sms(transport, topo):
        if not r.ok:
            notes.append(f"{n.description} port {p} has IsSM but SMInfo did not answer: {r.error}")
            continue
        sm = r.value()
        state = SMState(sm.sm_state).name if sm.sm_state in SMState._value2member_map_ else str(sm.sm_state)
        desc = (f"{n.description} port {p}: SM GUID {sm.guid:#018x}, LID {pi.lid}, priority {sm.priority}, "
                f"state {state}")
        if sm.sm_state == SMState.MASTER:
            if not force:
                raise OtherMasterSM(f"another subnet manager is MASTER: {desc}. It would undo our changes on "
                                    f"its next sweep; stop it, or pass --force")
            notes.append(f"--force: proceeding although another SM is MASTER ({desc})")
        else:
            notes.append(f"other SM present: {desc}")
    return notes


def _no_switch_reason(topo) -> str:
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
    spec: object = None  # multicast.GroupSpec, or None for the default group
    persisted: dict = dataclasses.field(default_factory=dict)  # LID file: port GUID -> (lo, hi)
    engine_input: object = None  # routing.preload's output
    resolved: object = None  # desired.Resolved: the desired state against this fabric
    rin: object = None  # routing.RoutingInput
    routes: object = None  # switch GUID -> routing.RouteTable
    link_opts: object = None  # links.LinkOptions, or None: configure no link
    op_vls: dict = dataclasses.field(default_factory=dict)  # (guid, port) -> OperationalVLs wanted
    mplan: object = None  # multicast.MulticastPlan
    default_port: dict = dataclasses.field(default_factory=dict)  # RFT switch GUID -> DefaultPort
    mft_top: dict = dataclasses.field(default_factory=dict)  # switch GUID -> MulticastFDBTop
    applied: object = None  # the fdb.apply.Apply of the write phase

    @property
    def topo(self):
        return self.r.topology

    def phase(self, name: str) -> "_Phase":
        return _Phase(self.r, self.transport, name)


def plan(transport: Transport, opts: SweepOptions) -> SweepResult:
    """Every Get a sweep needs, and the plan of Sets; sends no Set."""
    s = _prepare(transport, opts)
    _plan(s)
    return s.r


def sweep(transport: Transport, opts: SweepOptions) -> SweepResult:
    """The whole pipeline: plan (discover .. read tables), then write, activate, keep LIDs."""
    s = _prepare(transport, opts)
    _plan(s)
    s.r.dry_run = opts.dry_run
    if not opts.dry_run:
        try:
            _note_interrupted_apply(s)
            _arm_ports(s)
            _write_tables(s)
            _write_links(s)
            s.r.known = _known_after(s.r, s.applied)
            _activate(s)
            _save_lids(s)
        except OSError as e:  # a backup, the journal or the LID file, after Sets began
            raise FabricFailure(f"writing {e.filename or 'a file'}: {e.strerror or e}",
                                changed=transport.stats.sets_sent()) from e
    s.r.stats = transport.stats.snapshot()
    s.r.seconds = time.monotonic() - s.t0
    return s.r


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
    s.r.seconds = time.monotonic() - s.t0


# -- planning phases -------------------------------------------------------------------------

def _prepare(transport: Transport, opts: SweepOptions) -> SweepState:
    """Read and check every input file before any SMP: the group file, the LID file, the
    routing spec, and whatever a sweep writes after its Sets (refused now, not half-way)."""
    transport.check_writable(opts.dry_run)  # a recording: refused before the first Get
    s = SweepState(transport, opts, SweepResult(None, None, progress=opts.progress), time.monotonic())
    s.spec = opts.mcast_groups
    if opts.multicast and (isinstance(s.spec, str) or hasattr(s.spec, "__fspath__")):
        s.spec = multicast.load_groups(s.spec)
    # LIDs survive port resets and restarts: kept in the state directory unless a file is named
    s.lid_file = opts.lid_file or (os.path.join(opts.state_dir, GUID2LID) if opts.state_dir else None)
    s.persisted = lids.load_guid2lid(s.lid_file) if s.lid_file else {}
    s.engine_input = routing.preload(opts.routing)
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
        s.rin = routing.RoutingInput.build(topo, plan_)
        routes = s.routes = routing.route(s.opts.routing, s.rin, s.engine_input)
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
            cause = ("the routing file has no entry for them" if s.opts.routing.startswith("file:")
                     else "the switch graph is split")
            r.problems.append(f"{len(unrouted)} (switch, LID) pairs have no route: {cause} "
                              f"(switches missing routes: {', '.join(names[:5])})")


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
            arm = pi.port_state == PortState.INIT
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
        # a repair: the tables of the nodes whose ports come up again
        only = {c.guid for c in s.r.port_changes if c.arm} if s.opts.known is not None else None
        s.r.link_changes, problems, notes = links.plan_tables(s.transport, s.topo, s.link_opts, s.op_vls, only)
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
            desired[n.guid] = linear.desired_lft(s.routes[n.guid], top)
            cur_top = n.switch_info.linear_fdb_top
            for b in range(len(desired[n.guid]) // fw.LFT_BLOCK_SIZE):
                if b * fw.LFT_BLOCK_SIZE <= cur_top:
                    wanted.append((n.guid, n.path, b))
        if s.opts.known is not None:
            known = s.opts.known.lft
            current, errors = {(g, b): known[(g, b)] for g, _p, b in wanted if (g, b) in known}, []
        else:
            current, errors = linear.read_lft_blocks(s.transport, wanted)
        r.problems += errors
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


def _keep_unreached_routes(s: SweepState, block: int, old: bytes, new: bytes) -> tuple[bytes, int]:
    """Part of the fabric did not answer: keep the routes a block had to LIDs this sweep
    did not find, rather than cut off hosts that may be alive behind a flaky link."""
    base = block * fw.LFT_BLOCK_SIZE
    kept = bytes(o if nw == fw.LFT_NO_PORT and o != fw.LFT_NO_PORT and base + i not in s.rin.lid_homes else nw
                 for i, (o, nw) in enumerate(zip(old, new)))
    return kept, sum(1 for x, y in zip(kept, new) if x != y)


def _read_rfts(s: SweepState) -> None:
    """Switches without an LFT that have a random table. Entries and DefaultPort are
    planned (and checked against LIDsPerPort / RandomFDBCap) before any read; the whole
    table is read, since a stale valid entry anywhere in it would still match."""
    topo, r = s.topo, s.r
    with s.phase("rft_read"):
        rft_switches = [n for n in topo.switches() if n.switch_info and not n.switch_info.linear_fdb_cap
                        and n.switch_info.random_fdb_cap]
        plans = {}
        for n in rft_switches:
            sw_ports = {p for p in range(1, n.num_ports + 1)
                        if (n.guid, p) in topo.links and topo.nodes[topo.links[(n.guid, p)][0]].is_switch}
            try:
                plans[n.guid] = rft.plan_switch(n.guid, n.description, s.routes.get(n.guid, {}), sw_ports,
                                                n.switch_info)
            except rft.RftError as e:
                raise SweepError(f"{e}; nothing was sent") from None
        wanted = [(n.guid, n.path, b) for n in rft_switches
                  for b in range(rft.blocks_for(n.switch_info.random_fdb_cap))]
        current, errors = rft.read_rft_blocks(s.transport, wanted)
        for n in rft_switches:
            nb = rft.blocks_for(n.switch_info.random_fdb_cap)
            missing = [b for b in range(nb) if (n.guid, b) not in current]
            if missing:
                r.problems.append(f"{n.description}: RFT blocks {missing[:8]} could not be read; its RFT is not "
                                  f"programmed")
                continue
            table = [e for b in range(nb) for e in current[(n.guid, b)]]
            pl = plans[n.guid]
            r.rft_plans.append(pl)
            r.rft_changes += rft.changes(pl, n.path, table, n.switch_info)
            if pl.default_port is not None:
                s.default_port[n.guid] = pl.default_port
        r.problems += [f"RFT read: {e}" for e in errors]


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
            if si is None or not si.multicast_fdb_cap:
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
            current, errors = {(g, b, p): known[(g, b, p)] for g, _path, b, p in wanted if (g, b, p) in known}, []
        else:
            current, errors = mfttab.read_mft_units(s.transport, wanted)
        r.mft_current = current
        r.problems += [f"MFT read: {e}" for e in errors]
        _diff_mfts(s, units, current)


def _diff_mfts(s: SweepState, units: dict, current: dict) -> None:
    """MFT changes; entries of MLIDs outside the groups are kept (and reported) unless pruning."""
    r, opts = s.r, s.opts
    prune = opts.prune_multicast or bool(opts.desired is not None and opts.desired.multicast_prune)
    foreign: dict[int, list[str]] = {}  # MLID -> switches holding it
    for g, desired_units in units.items():
        n = s.topo.nodes[g]
        if not prune:
            kept = mfttab.keep_unconfigured(desired_units, current, g, set(s.mplan.mlids()))
            for mlid in kept:
                foreign.setdefault(mlid, []).append(n.description)
            if kept and g in s.mft_top:  # MulticastFDBTop must not cut them off
                s.mft_top[g] = max(s.mft_top[g], max(kept))
        r.mft_changes += mfttab.diff_mft(g, n.description, n.path, desired_units, current)
    r.multicast_kept = {f"0x{m:04x}": sw for m, sw in sorted(foreign.items())}
    for m, sw in sorted(foreign.items()):
        r.notes.append(f"multicast: kept MLID 0x{m:04x} on {', '.join(sw[:4])}{' ...' if len(sw) > 4 else ''}: "
                       f"not in the configured groups (--prune-multicast removes it)")


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


# -- writing phases --------------------------------------------------------------------------

def _portinfo_set(c: PortChange, state: int, master_lid: int, lmc: int) -> Request:
    pi = c.current
    fields = dict(port_state=state, port_physical_state=0, link_down_default_state=0,
                  link_width_enabled=0, link_speed_enabled=0)  # 0 = no change for these
    if c.lid is not None:
        fields.update(lid=c.lid, lmc=lmc, master_sm_lid=master_lid)
    fields.update(c.link)
    return _dr(Method.SET, AttrID.PORT_INFO, c.path, portinfo_modifier(c.port), pi.LAYOUT.replace(pi, **fields))


def _confirm_port_sets(transport, failed, want, master_lid, lmc_for):
    """A PortInfo Set whose response was lost may have been applied, and its retry then
    asks for a state transition the port has already made (ARMED -> ARMED), which the SMA
    refuses. So a failed Set is re-read: if the port already holds what we wanted, it is
    done. Returns the (change, error) pairs that really failed."""
    if not failed:
        return []
    reqs = [_dr(Method.GET, AttrID.PORT_INFO, c.path, portinfo_modifier(c.port)) for c, _e in failed]
    still = []
    for (c, err), rep in zip(failed, transport.execute(reqs)):
        if rep.ok:
            pi = rep.value()
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
    for c in r.mft_changes:
        mft.pop((c.switch, c.block, c.position), None)
    mft.update(((c.switch, c.block, c.position), list(c.new)) for c in ap.written["mft"])
    for c, back in ap.written["tops"]:
        r.topology.nodes[c.switch].switch_info = back
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


def _arm_ports(s: SweepState) -> None:
    """LIDs, LMC, MasterSMLID and link fields to every changed port; INIT ports to ARMED."""
    r, lp = s.r, s.r.lid_plan
    with s.phase("lids_arm"):
        reqs = [_portinfo_set(c, PortState.ARMED if c.arm else PortState.NO_CHANGE, lp.master_lid, _lmc_for(s, c))
                for c in r.port_changes]
        failed = []
        for c, rep in zip(r.port_changes, s.transport.execute(reqs)):
            if not rep.ok:
                failed.append((c, rep.error))
                continue
            back = rep.value()
            r.topology.nodes[c.guid].ports[c.port] = back  # what the port holds now (a repair plans on it)
            if c.lid is not None and back.lid != c.lid:
                r.problems.append(f"{c.name} port {c.port}: LID reads back {back.lid}, expected {c.lid}")
        for c, err in _confirm_port_sets(s.transport, failed, lambda c: PortState.ARMED if c.arm else None,
                                         lp.master_lid, lambda c: _lmc_for(s, c)):
            r.problems.append(f"{c.name} port {c.port}: PortInfo Set failed: {err}")


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
    with s.phase("link_write"):
        s.r.problems += ap.links()
    ap.finish(ok=not s.r.problems)


def _activate(s: SweepState) -> None:
    """ARMED -> ACTIVE, each response read back."""
    r, lp = s.r, s.r.lid_plan
    with s.phase("activate"):
        arming = [c for c in r.port_changes if c.arm]
        # the same LID fields again: a Set writes the whole attribute
        reqs = [_portinfo_set(c, PortState.ACTIVE, lp.master_lid, _lmc_for(s, c)) for c in arming]
        failed = []
        for c, rep in zip(arming, s.transport.execute(reqs)):
            if rep.ok:
                r.topology.nodes[c.guid].ports[c.port] = rep.value()
            if not rep.ok:
                failed.append((c, rep.error))
            elif rep.value().port_state != PortState.ACTIVE:
                r.problems.append(f"{c.name} port {c.port}: port state reads back "
                                  f"{PortState(rep.value().port_state).name}, not ACTIVE")
        for c, err in _confirm_port_sets(s.transport, failed, PortState.ACTIVE, lp.master_lid,
                                         lambda c: _lmc_for(s, c)):
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
