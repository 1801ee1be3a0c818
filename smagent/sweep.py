"""Bring a fabric up: discover -> assign LIDs -> route -> program LFTs -> activate -> verify.

Every change is planned before anything is sent: a dry run stops after the plan. The
GetResp of each Set carries the attribute as the node now holds it, and that is the
read-back we check (no second Get per block).
"""
from __future__ import annotations

import dataclasses
import time

from mad import forwarding as fw
from mad import smp as smpcodec
from mad.attributes import CAP_IS_SM, AttrID, PortState, SMState, SwitchInfo
from mad.forwarding import portinfo_modifier
from mad.header import Method
from smagent import discovery, lids, routing, tables
from smagent.transport.base import Request, Transport

LIFE_TIME_VALUE = 18  # what OpenSM programs (packet lifetime 2^18 * 4.096 us)


class SweepError(RuntimeError):
    """The sweep could not finish; the message says what and where."""


class OtherMasterSM(SweepError):
    pass


@dataclasses.dataclass
class SweepOptions:
    lmc: int = 0
    lid_file: str | None = None
    routing: str = "minhop"
    dry_run: bool = False
    force: bool = False


@dataclasses.dataclass
class PortChange:
    guid: int
    name: str
    port: int
    path: tuple[int, ...]
    current: object  # PortInfo as read
    lid: int | None  # new base LID (None: not a LID-carrying port)
    arm: bool

    def describe(self, master_lid: int, lmc: int) -> str:
        parts = []
        if self.lid is not None:
            if self.current.lid != self.lid:
                parts.append(f"lid {self.current.lid} -> {self.lid}")
            if self.current.lmc != lmc:
                parts.append(f"lmc {self.current.lmc} -> {lmc}")
            if self.current.master_sm_lid != master_lid:
                parts.append(f"master_sm_lid {self.current.master_sm_lid} -> {master_lid}")
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
                + sum(1 for c in self.port_changes if c.arm))

    def plan_lines(self) -> list[str]:
        master = self.lid_plan.master_lid
        out = [f"SubnSet(PortInfo) {c.describe(master, self.lid_plan.lmc)}" for c in self.port_changes]
        for name, _path, old, new in self.switch_changes:
            diffs = [f"{k} {getattr(old, k)} -> {getattr(new, k)}" for k in ("linear_fdb_top", "life_time_value", "port_state_change")
                     if getattr(old, k) != getattr(new, k)]
            out.append(f"SubnSet(SwitchInfo) {name}: " + ", ".join(diffs))
        for c in tables.interleave(self.lft_changes):
            ch = c.changed_lids()
            shown = ", ".join(f"{lid}: {'?' if o is None else o} -> {n}" for lid, o, n in ch[:4])
            more = f" (+{len(ch) - 4} more)" if len(ch) > 4 else ""
            out.append(f"SubnSet(LinearForwardingTable) {c.name} block {c.block}: {shown}{more}")
        return out

    def summary(self) -> dict:
        topo = self.topology
        return {
            "dry_run": self.dry_run,
            "nodes": len(topo.nodes), "switches": len(topo.switches()), "cas": len(topo.cas()),
            "links": topo.num_links(), "lids": len(self.lid_plan.lids), "lmc": self.lid_plan.lmc,
            "linear_fdb_top": self.lid_plan.top,
            "sets": {"portinfo": len(self.port_changes) + (0 if self.dry_run else self.activations),
                     "switchinfo": len(self.switch_changes), "lft_blocks": len(self.lft_changes)},
            "phases": self.phases, "smps_sent": self.stats.get("sent", 0),
            "retries": self.stats.get("retries", 0), "timeouts": self.stats.get("timeouts", 0),
            "unreachable": topo.unreachable, "problems": self.problems, "notes": self.notes,
            "seconds": round(self.seconds, 3),
        }


class _Phase:
    def __init__(self, result: SweepResult, transport: Transport, name: str):
        self.r, self.t, self.name = result, transport, name

    def __enter__(self):
        self.t0, self.s0 = time.monotonic(), self.t.stats.sent
        return self

    def __exit__(self, *exc):
        self.r.phases[self.name] = {"smps": self.t.stats.sent - self.s0,
                                    "seconds": round(time.monotonic() - self.t0, 4)}


def _dr(method, attr, path, mod=0, value=None) -> Request:
    return Request(smpcodec.dr(method, attr, path, mod, value))


def check_other_sms(transport: Transport, topo, *, force: bool) -> list[str]:
    """Find ports with IsSM and ask their SMInfo; refuse while another is MASTER."""
    notes, reqs, who = [], [], []
    for n in topo.nodes.values():
        for p in n.lid_ports():
            pi = n.ports.get(p)
            if pi is None or not pi.capability_mask & CAP_IS_SM or (n.guid, p) == topo.local or \
                    (n.is_switch and topo.local[0] == n.guid):
                continue
            reqs.append(_dr(Method.GET, AttrID.SM_INFO, n.path_to_port(p)))
            who.append((n, p, pi))
    for (n, p, pi), r in zip(who, transport.execute(reqs)):
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


def plan(transport: Transport, opts: SweepOptions, result: SweepResult | None = None) -> SweepResult:
    """Every Get a sweep needs, and the plan of Sets; sends no Set."""
    t0 = time.monotonic()
    with _Phase(result or SweepResult(None, None), transport, "discover") as ph:
        topo = discovery.discover(transport)
    r = ph.r
    r.topology = topo
    if not topo.switches():
        raise SweepError("no switch found from the local port: nothing to route")
    with _Phase(r, transport, "sm_check"):
        r.notes += check_other_sms(transport, topo, force=opts.force)

    # LIDs, under the smallest LinearFDBCap (LIDs 0..cap-1 are in the table)
    caps = [n.switch_info.linear_fdb_cap for n in topo.switches() if n.switch_info and n.switch_info.linear_fdb_cap]
    limit = min(caps) - 1 if caps else fw.UNICAST_LID_MAX
    ports = []
    for n in sorted(topo.nodes.values(), key=lambda n: (len(n.path), n.path)):
        for p in n.lid_ports():
            pg = n.port_guids.get(p, n.guid)
            ports.append((pg, n.is_switch, n.ports[p].lid if p in n.ports else 0))
    persisted = lids.load_guid2lid(opts.lid_file) if opts.lid_file else {}
    plan_ = lids.assign(ports, lmc=opts.lmc, limit=limit, persisted=persisted)
    lg, lp = topo.local
    local_node = topo.nodes[lg]
    plan_.master_lid = plan_.lids[local_node.port_guids.get(0 if local_node.is_switch else lp, lg)]
    r.lid_plan = plan_
    r.notes += plan_.notes

    with _Phase(r, transport, "route"):
        rin = routing.RoutingInput.build(topo, plan_)
        routes = routing.route(opts.routing, rin)
        unrouted = [(g, lid) for g in rin.switches for lid in rin.lid_homes if lid not in routes[g]]
        if unrouted:
            names = sorted({topo.nodes[g].description for g, _ in unrouted})
            r.problems.append(f"{len(unrouted)} (switch, LID) pairs have no route: the switch graph is split "
                              f"(switches without a path to some LIDs: {', '.join(names[:5])})")

    # ports: LID/LMC/MasterSMLID and INIT -> ARMED
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
            if lid_differs or arm:
                r.port_changes.append(PortChange(n.guid, n.description, p, n.path_to_port(p), pi, lid, arm))

    # SwitchInfo: LinearFDBTop, LifeTimeValue, and clear PortStateChange
    for n in topo.switches():
        si = n.switch_info
        if si is None:
            continue
        new = dataclasses.replace(si, linear_fdb_top=plan_.top, life_time_value=LIFE_TIME_VALUE,
                                  port_state_change=si.port_state_change)
        if (si.linear_fdb_top, si.life_time_value, si.port_state_change) != (plan_.top, LIFE_TIME_VALUE, 0):
            r.switch_changes.append((n.description, n.path, si, new))

    # LFTs: read what is live (blocks up to the current LinearFDBTop; above it the switch
    # forwards nothing, so those blocks are written without reading), diff by block
    with _Phase(r, transport, "lft_read"):
        wanted, desired = [], {}
        for n in topo.switches():
            if not n.switch_info or not n.switch_info.linear_fdb_cap:
                continue
            desired[n.guid] = tables.desired_lft(routes.get(n.guid, {}), plan_.top)
            cur_top = n.switch_info.linear_fdb_top
            for b in range(len(desired[n.guid]) // fw.LFT_BLOCK_SIZE):
                if b * fw.LFT_BLOCK_SIZE <= cur_top:
                    wanted.append((n.guid, n.path, b))
        current, errors = tables.read_lft_blocks(transport, wanted)
        r.problems += errors
        for g, table in desired.items():
            n = topo.nodes[g]
            for b in range(len(table) // fw.LFT_BLOCK_SIZE):
                new = bytes(table[b * 64:(b + 1) * 64])
                old = current.get((g, b))
                if old != new:
                    r.lft_changes.append(tables.BlockChange(g, n.description, n.path, b, old, new))
    r.seconds = time.monotonic() - t0
    return r


def _portinfo_set(c: PortChange, state: int, master_lid: int, lmc: int) -> Request:
    pi = c.current
    fields = dict(port_state=state, port_physical_state=0, link_down_default_state=0,
                  link_width_enabled=0, link_speed_enabled=0)  # 0 = no change for these
    if c.lid is not None:
        fields.update(lid=c.lid, lmc=lmc, master_sm_lid=master_lid)
    return _dr(Method.SET, AttrID.PORT_INFO, c.path, portinfo_modifier(c.port), pi.LAYOUT.replace(pi, **fields))


def sweep(transport: Transport, opts: SweepOptions) -> SweepResult:
    t0 = time.monotonic()
    r = plan(transport, opts)
    r.dry_run = opts.dry_run
    if opts.dry_run:
        r.stats = transport.stats.snapshot()
        r.seconds = time.monotonic() - t0
        return r
    lp = r.lid_plan
    is_switch = {n.guid: n.is_switch for n in r.topology.nodes.values()}

    def lmc_for(c):
        return 0 if is_switch[c.guid] else lp.lmc

    with _Phase(r, transport, "lids_arm"):
        reqs = [_portinfo_set(c, PortState.ARMED if c.arm else PortState.NO_CHANGE, lp.master_lid, lmc_for(c))
                for c in r.port_changes]
        for c, rep in zip(r.port_changes, transport.execute(reqs)):
            if not rep.ok:
                r.problems.append(f"{c.name} port {c.port}: PortInfo Set failed: {rep.error}")
                continue
            back = rep.value()
            if c.lid is not None and back.lid != c.lid:
                r.problems.append(f"{c.name} port {c.port}: LID reads back {back.lid}, expected {c.lid}")
    with _Phase(r, transport, "switchinfo"):
        reqs = [_dr(Method.SET, AttrID.SWITCH_INFO, path, 0, new) for _n, path, _o, new in r.switch_changes]
        for (name, _p, _o, new), rep in zip(r.switch_changes, transport.execute(reqs)):
            if not rep.ok:
                r.problems.append(f"{name}: SwitchInfo Set failed: {rep.error}")
            elif rep.value().linear_fdb_top != new.linear_fdb_top:
                r.problems.append(f"{name}: LinearFDBTop reads back {rep.value().linear_fdb_top}, expected {new.linear_fdb_top}")
    with _Phase(r, transport, "lft_write"):
        _written, problems = tables.write_lft_blocks(transport, r.lft_changes)
        r.problems += problems
    with _Phase(r, transport, "activate"):
        arming = [c for c in r.port_changes if c.arm]
        # the same LID fields again: a Set writes the whole attribute
        reqs = [_portinfo_set(c, PortState.ACTIVE, lp.master_lid, lmc_for(c)) for c in arming]
        for c, rep in zip(arming, transport.execute(reqs)):
            if not rep.ok:
                r.problems.append(f"{c.name} port {c.port}: Set ACTIVE failed: {rep.error}")
            elif rep.value().port_state != PortState.ACTIVE:
                r.problems.append(f"{c.name} port {c.port}: port state reads back "
                                  f"{PortState(rep.value().port_state).name}, not ACTIVE")
        r.activations = len(arming)
    if opts.lid_file:
        sw_ports = {n.port_guids.get(0, n.guid) for n in r.topology.switches()}
        table = {g: (lid, lid + (0 if g in sw_ports else (1 << lp.lmc) - 1)) for g, lid in lp.lids.items()}
        lids.save_guid2lid(opts.lid_file, table)
    r.stats = transport.stats.snapshot()
    r.seconds = time.monotonic() - t0
    return r

