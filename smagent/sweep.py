"""Bring a fabric up: discover -> assign LIDs -> route -> program LFTs/RFTs and MFTs ->
activate -> verify.

Every change is planned before anything is sent: a dry run stops after the plan. The
GetResp of each Set carries the attribute as the node now holds it, and that is the
read-back we check (no second Get per block).

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
    # where LFT blocks are saved before they are overwritten, and the apply journal
    # lives (smagent.fdb.backup, smagent.fdb.journal); None: no backups (the in-process simulator)
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
    """Every other port with IsSM, asked for its SMInfo: (node, port, PortInfo, Reply)."""
    reqs, who = [], []
    for n in topo.nodes.values():
        for p in n.lid_ports():
            pi = n.ports.get(p)
            if pi is None or not pi.capability_mask & CAP_IS_SM or (n.guid, p) == topo.local or \
                    (n.is_switch and topo.local[0] == n.guid):
                continue
            reqs.append(_dr(Method.GET, AttrID.SM_INFO, n.path_to_port(p)))
            who.append((n, p, pi))
    return [(n, p, pi, r) for (n, p, pi), r in zip(who, transport.execute(reqs))]


def check_other_sms(transport: Transport, topo, *, force: bool) -> list[str]:
    """Find ports with IsSM and ask their SMInfo; refuse while another is MASTER."""
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


def plan(transport: Transport, opts: SweepOptions, result: SweepResult | None = None) -> SweepResult:
    """Every Get a sweep needs, and the plan of Sets; sends no Set."""
    t0 = time.monotonic()
    spec = opts.mcast_groups  # a group file is read (and its syntax checked) before any SMP
    if opts.multicast and (isinstance(spec, str) or hasattr(spec, "__fspath__")):
        spec = multicast.load_groups(spec)
    persisted = lids.load_guid2lid(opts.lid_file) if opts.lid_file else {}  # likewise the LID file
    engine_input = routing.preload(opts.routing)  # and the routing spec (and its file)
    if not opts.dry_run:  # and whatever a sweep writes after its Sets: refused now, not half-way
        if opts.lid_file:
            paths.check_output(opts.lid_file, "--lid-file")
        if opts.state_dir:
            paths.check_state_dir(opts.state_dir)
    known = opts.known
    with _Phase(result or SweepResult(None, None, progress=opts.progress), transport, "discover") as ph:
        topo = known.topology if known is not None else discovery.discover(transport)
    r = ph.r
    r.topology = topo
    if not topo.switches():
        raise SweepError(_no_switch_reason(topo))
    with _Phase(r, transport, "sm_check"):
        if known is None:
            r.notes += check_other_sms(transport, topo, force=opts.force)
    resolved = None
    if opts.desired is not None:
        from smagent import desired as desiredmod
        # names -> GUIDs against what was found; every problem at once, before any Set
        resolved = desiredmod.resolve(opts.desired, topo)
        if opts.desired.multicast and opts.multicast:
            spec = multicast.GroupSpec(
                [multicast.Group(mlid, tuple(sorted(topo.nodes[g].port_guids[p] for g, p in members)),
                                 f"{opts.desired.source} multicast[{i}]")
                 for i, (mlid, members) in enumerate(sorted(resolved.groups.items()), 1)],
                source=opts.desired.source)

    # LIDs, under the smallest LinearFDBCap (LIDs 0..cap-1 are in the table)
    caps = [n.switch_info.linear_fdb_cap for n in topo.switches() if n.switch_info and n.switch_info.linear_fdb_cap]
    limit = min(caps) - 1 if caps else fw.UNICAST_LID_MAX
    ports = []
    for n in sorted(topo.nodes.values(), key=lambda n: (len(n.path), n.path)):
        for p in n.lid_ports():
            pg = n.port_guids.get(p, n.guid)
            ports.append((pg, n.is_switch, n.ports[p].lid if p in n.ports else 0))
    plan_ = lids.assign(ports, lmc=opts.lmc, limit=limit, persisted=persisted)
    # D: ports the LID file knows that this sweep did not find keep their LIDs reserved
    found = {g for g, _sw, _cur in ports}
    r.missing = {g: rng for g, rng in persisted.items() if g not in found}
    for g, (lo, _hi) in sorted(r.missing.items(), key=lambda kv: kv[1]):
        r.notes.append(f"port {g:#018x} (LID {lo} in {opts.lid_file}) was not found; its LID stays reserved")
    lg, lp = topo.local
    local_node = topo.nodes[lg]
    plan_.master_lid = plan_.lids[local_node.port_guids.get(0 if local_node.is_switch else lp, lg)]
    r.lid_plan = plan_
    r.notes += plan_.notes

    with _Phase(r, transport, "route"):
        rin = routing.RoutingInput.build(topo, plan_)
        routes = routing.route(opts.routing, rin, engine_input)
        r.notes += routes.notes
        static = resolved.static_lft if resolved is not None else {}
        for g, entries in static.items():  # static entries override routing
            routes[g] = routes[g].updated(entries)
            plan_.top = max(plan_.top, max(entries))
        # a static entry (even 255) is the admin's choice, not a missing route
        homes = sorted(rin.lid_homes)
        unrouted = [(g, lid) for g in rin.switches for lid in routes[g].missing(homes)
                    if lid not in static.get(g, ())]
        if unrouted:
            names = sorted({topo.nodes[g].description for g, _ in unrouted})
            cause = ("the routing file has no entry for them" if opts.routing.startswith("file:")
                     else "the switch graph is split")
            r.problems.append(f"{len(unrouted)} (switch, LID) pairs have no route: {cause} "
                              f"(switches missing routes: {', '.join(names[:5])})")

    # ports: LID/LMC/MasterSMLID, link fields (smagent.links) and INIT -> ARMED
    link_opts = None if opts.links is False else (
        opts.links or getattr(opts.desired, "links", None) or links.LinkOptions())
    op_vls = {}
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
            link = links.port_fields(topo, n, p, link_opts) if link_opts else {}
            op_vls[(n.guid, p)] = link.get("operational_vls", pi.operational_vls)
            link_diff = links.port_diff(pi, link)
            if lid_differs or arm or link_diff:
                r.port_changes.append(PortChange(n.guid, n.description, p, n.path_to_port(p), pi, lid, arm,
                                                 link, link_diff))
    if link_opts:
        with _Phase(r, transport, "link_read"):
            wants = links.table_wants(topo, link_opts, op_vls)
            if known is not None:  # a repair: the tables of the nodes whose ports come up again
                armed = {c.guid for c in r.port_changes if c.arm}
                wants = [w for w in wants if w.guid in armed]
            r.link_changes, problems = links.read_and_diff(transport, wants)
            r.problems += problems

    # LFTs: read what is live (blocks up to the current LinearFDBTop; above it the switch
    # forwards nothing, so those blocks are written without reading), diff by block
    kept_routes = 0
    with _Phase(r, transport, "lft_read"):
        wanted, desired = [], {}
        for n in topo.switches():
            if not n.switch_info or not n.switch_info.linear_fdb_cap:
                continue
            desired[n.guid] = linear.desired_lft(routes[n.guid], plan_.top)
            cur_top = n.switch_info.linear_fdb_top
            for b in range(len(desired[n.guid]) // fw.LFT_BLOCK_SIZE):
                if b * fw.LFT_BLOCK_SIZE <= cur_top:
                    wanted.append((n.guid, n.path, b))
        if known is not None:
            current, errors = {(g, b): known.lft[(g, b)] for g, _p, b in wanted if (g, b) in known.lft}, []
        else:
            current, errors = linear.read_lft_blocks(transport, wanted)
        r.problems += errors
        r.lft_current = current
        for g, table in desired.items():
            n = topo.nodes[g]
            for b in range(len(table) // fw.LFT_BLOCK_SIZE):
                new = bytes(table[b * fw.LFT_BLOCK_SIZE:(b + 1) * fw.LFT_BLOCK_SIZE])
                old = current.get((g, b))
                if topo.unreachable and old is not None:
                    # part of the fabric did not answer: keep the routes it had rather
                    # than cut off hosts that may be alive behind a flaky link
                    kept = bytes(o if nw == fw.LFT_NO_PORT and o != fw.LFT_NO_PORT and (b * fw.LFT_BLOCK_SIZE + i) not in rin.lid_homes
                                 else nw for i, (o, nw) in enumerate(zip(old, new)))
                    kept_routes += sum(1 for x, y in zip(kept, new) if x != y)
                    new = kept
                if old != new:
                    r.lft_changes.append(linear.BlockChange(g, n.description, n.path, b, old, new))

    if kept_routes:
        r.notes.append(f"discovery was incomplete: kept {kept_routes} existing routes to LIDs it did not reach")

    # RFTs: switches without an LFT that have a random table. Entries and DefaultPort are
    # planned (and checked against LIDsPerPort / RandomFDBCap) before any read; the whole
    # table is read, since a stale valid entry anywhere in it would still match.
    default_port: dict[int, int] = {}
    with _Phase(r, transport, "rft_read"):
        rft_switches = [n for n in topo.switches() if n.switch_info and not n.switch_info.linear_fdb_cap
                        and n.switch_info.random_fdb_cap]
        plans = {}
        for n in rft_switches:
            sw_ports = {p for p in range(1, n.num_ports + 1)
                        if (n.guid, p) in topo.links and topo.nodes[topo.links[(n.guid, p)][0]].is_switch}
            try:
                plans[n.guid] = rft.plan_switch(n.guid, n.description, routes.get(n.guid, {}), sw_ports,
                                                n.switch_info)
            except rft.RftError as e:
                raise SweepError(f"{e}; nothing was sent") from None
        wanted = [(n.guid, n.path, b) for n in rft_switches
                  for b in range(rft.blocks_for(n.switch_info.random_fdb_cap))]
        current, errors = rft.read_rft_blocks(transport, wanted)
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
                default_port[n.guid] = pl.default_port
        r.problems += [f"RFT read: {e}" for e in errors]

    # MFTs: a tree per group, then every (block, position) that could hold one of the
    # groups' entries or a stale one below them is read: blocks 0 .. the highest group
    # block (MLIDs are handed out from 0xC000 up, so that is where stale entries live),
    # and, on a switch with MulticastFDBTop, every block up to its current top (what it
    # forwards). Entries in higher blocks of a switch without MulticastFDBTop are neither
    # read nor touched.
    mft_top: dict[int, int] = {}
    mplan = None
    if opts.multicast:
        mplan = multicast.plan(topo, spec)
        r.multicast = mplan
        r.notes += mplan.notes
    with _Phase(r, transport, "mft_read"):
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
            blocks = range(last + 1)
            units[n.guid] = mfttab.mft_units(entries, blocks, fw.mft_positions_for(n.num_ports))
            wanted += [(n.guid, n.path, b, p) for b, p in sorted(units[n.guid])]
            if top_ok:
                mft_top[n.guid] = max(entries, default=MFT_TOP_NONE)
        if known is not None:
            current, errors = {(g, b, p): known.mft[(g, b, p)] for g, _path, b, p in wanted
                               if (g, b, p) in known.mft}, []
        else:
            current, errors = mfttab.read_mft_units(transport, wanted)
        r.mft_current = current
        r.problems += [f"MFT read: {e}" for e in errors]
        prune = opts.prune_multicast or bool(opts.desired is not None and opts.desired.multicast_prune)
        foreign: dict[int, list[str]] = {}  # MLIDs outside the groups, kept unless pruning
        for g, desired_units in units.items():
            n = topo.nodes[g]
            if not prune:
                kept = mfttab.keep_unconfigured(desired_units, current, g, set(mplan.mlids()))
                for mlid in kept:
                    foreign.setdefault(mlid, []).append(n.description)
                if kept and g in mft_top:  # MulticastFDBTop must not cut them off
                    mft_top[g] = max(mft_top[g], max(kept))
            r.mft_changes += mfttab.diff_mft(g, n.description, n.path, desired_units, current)
        r.multicast_kept = {f"0x{m:04x}": sw for m, sw in sorted(foreign.items())}
        for m, sw in sorted(foreign.items()):
            r.notes.append(f"multicast: kept MLID 0x{m:04x} on {', '.join(sw[:4])}{' ...' if len(sw) > 4 else ''}: "
                           f"not in the configured groups (--prune-multicast removes it)")

    # SwitchInfo: LinearFDBTop, LifeTimeValue, DefaultPort (RFT), MulticastFDBTop (where
    # supported), default multicast ports (group file only), and clear PortStateChange
    for n in topo.switches():
        si = n.switch_info
        if si is None:
            continue
        want = {"life_time_value": LIFE_TIME_VALUE}
        if si.linear_fdb_cap:
            want["linear_fdb_top"] = plan_.top
        if n.guid in default_port:
            want["default_port"] = default_port[n.guid]
        if n.guid in mft_top:
            want["multicast_fdb_top"] = mft_top[n.guid]
        if mplan and n.guid in mplan.defaults:
            want["default_multicast_primary_port"], want["default_multicast_not_primary_port"] = mplan.defaults[n.guid]
        if resolved is not None:
            want.update(resolved.switch_settings.get(n.guid, {}))
        # the sweep has just looked at the whole fabric: a pending PortStateChange is seen
        c = tops.change(n.guid, n.description, n.path, si, want, clear_port_state_change=True)
        if c is not None:
            r.switch_changes.append(c)
    r.seconds = time.monotonic() - t0
    return r


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


def sweep(transport: Transport, opts: SweepOptions) -> SweepResult:
    t0 = time.monotonic()
    r = plan(transport, opts)
    r.dry_run = opts.dry_run
    if not opts.dry_run:
        try:
            _apply(transport, opts, r)
        except OSError as e:  # a backup, the journal or the LID file, after Sets began
            raise FabricFailure(f"writing {e.filename or 'a file'}: {e.strerror or e}",
                                changed=transport.stats.sets_sent()) from e
    r.stats = transport.stats.snapshot()
    r.seconds = time.monotonic() - t0
    return r


def _apply(transport: Transport, opts: SweepOptions, r: SweepResult) -> None:
    """Send the planned Sets, phase by phase, checking each read-back."""
    lp = r.lid_plan
    is_switch = {n.guid: n.is_switch for n in r.topology.nodes.values()}
    if opts.state_dir:
        from pathlib import Path

        from smagent.fdb.journal import Journal
        pending = Journal.pending(Path(opts.state_dir) / "apply.journal")
        if pending is not None:
            r.notes.append(f"the previous apply was interrupted with {len(pending.remaining)} of {len(pending.plan)} "
                           f"table blocks unconfirmed; this sweep re-plans from the live tables and finishes it")

    def lmc_for(c):
        return 0 if is_switch[c.guid] else lp.lmc

    with _Phase(r, transport, "lids_arm"):
        reqs = [_portinfo_set(c, PortState.ARMED if c.arm else PortState.NO_CHANGE, lp.master_lid, lmc_for(c))
                for c in r.port_changes]
        failed = []
        for c, rep in zip(r.port_changes, transport.execute(reqs)):
            if not rep.ok:
                failed.append((c, rep.error))
                continue
            back = rep.value()
            r.topology.nodes[c.guid].ports[c.port] = back
            if c.lid is not None and back.lid != c.lid:
                r.problems.append(f"{c.name} port {c.port}: LID reads back {back.lid}, expected {c.lid}")
        for c, err in _confirm_port_sets(transport, failed, lambda c: PortState.ARMED if c.arm else None,
                                         lp.master_lid, lmc_for):
            r.problems.append(f"{c.name} port {c.port}: PortInfo Set failed: {err}")
    ap = fdbapply.Apply(transport, fdbapply.Plan(r.switch_changes, r.lft_changes, r.rft_changes, r.mft_changes),
                        state_dir=opts.state_dir, topology=r.topology, chunk=JOURNAL_CHUNK)
    with _Phase(r, transport, "switchinfo"):
        ap.start()  # nothing lost: what is about to be overwritten is saved, the apply journalled
        r.backup_file = ap.backup_file
        r.problems += ap.switchinfo()
    with _Phase(r, transport, "lft_write"):
        r.problems += ap.lft()  # in chunks, journalled as each comes back
        r.lft_written = ap.lft_written
    with _Phase(r, transport, "rft_write"):
        r.problems += ap.rft()
    with _Phase(r, transport, "mft_write"):
        r.problems += ap.mft()
    ap.finish(ok=not r.problems)
    with _Phase(r, transport, "link_write"):  # SL2VL, VLArb, P_Keys: before any port is ACTIVE
        r.problems += links.write(transport, r.link_changes)
    r.known = _known_after(r, ap)
    with _Phase(r, transport, "activate"):
        arming = [c for c in r.port_changes if c.arm]
        # the same LID fields again: a Set writes the whole attribute
        reqs = [_portinfo_set(c, PortState.ACTIVE, lp.master_lid, lmc_for(c)) for c in arming]
        failed = []
        for c, rep in zip(arming, transport.execute(reqs)):
            if rep.ok:
                r.topology.nodes[c.guid].ports[c.port] = rep.value()
            if not rep.ok:
                failed.append((c, rep.error))
            elif rep.value().port_state != PortState.ACTIVE:
                r.problems.append(f"{c.name} port {c.port}: port state reads back "
                                  f"{PortState(rep.value().port_state).name}, not ACTIVE")
        for c, err in _confirm_port_sets(transport, failed, PortState.ACTIVE, lp.master_lid, lmc_for):
            r.problems.append(f"{c.name} port {c.port}: Set ACTIVE failed: {err}")
        r.activations = len(arming)
    if opts.lid_file:
        sw_ports = {n.port_guids.get(0, n.guid) for n in r.topology.switches()}
        table = {g: (lid, lid + (0 if g in sw_ports else (1 << lp.lmc) - 1)) for g, lid in lp.lids.items()}
        for g, rng in r.missing.items():  # not seen this time: keep them for when they return
            table.setdefault(g, rng)
        lids.save_guid2lid(opts.lid_file, table)

