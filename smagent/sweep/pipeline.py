"""The pipeline: `plan` (every Get, the plan of Sets) and `sweep` (the plan, then the
write passes, repairs while SMPs are lost, the LID file), the phases in their order
(`plan_phases`, `write_pass`)."""
from __future__ import annotations

import dataclasses
import logging
import os
import time

from smagent import discovery, routing
from smagent.planning import lidassign as lids, multicast
from smagent.config import files as paths
from smagent.errors import FabricFailure
from smagent.transport.base import Transport
from smagent.sweep.discover import check_sms, discover, resolve_desired
from smagent.sweep.lids import assign_lids, save_lids, save_path_sls
from smagent.sweep.linkconf import read_links
from smagent.sweep.mft import read_mfts
from smagent.sweep import protect
from smagent.sweep.options import SweepOptions
from smagent.sweep.ports import activate, arm_ports, plan_ports, settle
from smagent.sweep.result import PlanDefects, SweepResult
from smagent.sweep.route import route
from smagent.sweep.state import SweepState
from smagent.sweep.switchinfo import plan_switchinfo
from smagent.sweep.unicast import read_lfts, read_rfts
from smagent.sweep.write import known_after, note_interrupted_apply, settle_unread, write_links, write_tables

GUID2LID = paths.StateDir.GUID2LID  # the name callers knew (smagent.sweep.GUID2LID)
log = logging.getLogger("smagent.sweep")


def plan(transport: Transport, opts: SweepOptions) -> SweepResult:
    """Every Get a sweep needs, and the plan of Sets; sends no Set."""
    s = prepare(transport, opts)
    plan_phases(s)
    unread_are_problems(s)
    return s.r


def sweep(transport: Transport, opts: SweepOptions) -> SweepResult:
    """The whole pipeline: plan (discover .. read tables), then write, activate, keep LIDs."""
    s = prepare(transport, opts)
    plan_phases(s)
    s.r.dry_run = opts.dry_run
    if opts.dry_run:
        unread_are_problems(s)
    else:
        try:
            note_interrupted_apply(s)
            protect.save_keys(s)  # before the Sets that install them
            write_pass(s)
            repair(s)
            save_lids(s)
            save_path_sls(s)
        except OSError as e:  # a backup, the journal, the LID or SL file, after Sets began
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


def prepare(transport: Transport, opts: SweepOptions) -> SweepState:
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
    if opts.state_dir and not opts.dry_run:  # named as such before a file in it is read
        paths.check_state_dir(opts.state_dir)
    # LIDs survive port resets and restarts: kept in the state directory unless a file is named
    s.lid_file = opts.lid_file or (str(paths.StateDir(opts.state_dir).guid2lid) if opts.state_dir else None)
    s.persisted = lids.load_guid2lid(s.lid_file) if s.lid_file else {}
    protect.prepare_keys(s)
    s.route_spec = routing.parse_spec(opts.routing)
    s.engine_input = routing.preload(s.route_spec)
    if not opts.dry_run and opts.lid_file:
        paths.check_output(opts.lid_file, "--lid-file")
    return s


def plan_phases(s: SweepState) -> None:
    """The phases up to the plan: only Gets."""
    discover(s)
    check_sms(s)
    resolve_desired(s)
    assign_lids(s)
    route(s)
    plan_ports(s)
    read_links(s)
    read_lfts(s)
    read_rfts(s)
    read_mfts(s)
    plan_switchinfo(s)
    check_planned_tables(s)
    s.r.seconds = time.monotonic() - s.t0


def write_pass(s: SweepState) -> None:
    """The Sets of one pass, in the safe order: LIDs and ARMED, tables, link tables, ACTIVE."""
    arm_ports(s)
    write_tables(s)
    settle_unread(s)
    write_links(s)
    activate(s)
    s.r.known = known_after(s.r, s.applied, s.links_failed)  # the topology as activated: the model's from now on
    s.r.known = s.r.known.evolve(settled=settle(s))


def unfinished(s: SweepState) -> dict:
    """What the last pass left undone, counted: {} when everything was confirmed."""
    ap = s.applied
    assert ap is not None  # write_pass ran
    tables = (len(ap.plan.tops) - len(ap.written["tops"]) + sum(
        len(getattr(ap.plan, k)) - len(ap.written[k]) for k in ("lft", "rft", "mft")))
    left = {"ports_not_armed": len(s.arm_failed), "ports_not_active": len(s.not_active),
            "table_units": tables, "link_tables": len(s.links_failed)}
    return {k: v for k, v in left.items() if v}


def repair(s: SweepState) -> None:
    """Passes over what did not finish, planned against what the earlier passes confirmed
    (the subnet model they left, `SweepResult.known`: no discovery, no table reads; unconfirmed blocks are written again,
    ports not ARMED are armed, ports ARMED are activated), while the transport sees loss:
    on a fabric that loses nothing a failure is not one a retry fixes."""
    r, t = s.r, s.transport
    left = unfinished(s)
    while left and r.passes <= s.opts.repair_passes and t.policy.lossy():
        r.passes += 1
        t0, sent0 = time.monotonic(), t.stats.sent
        name = f"repair_{r.passes}"
        cb = s.opts.progress
        progress = (lambda phase, name=name, cb=cb: cb(f"{name}: {phase}")) if cb is not None else None
        blank = SweepResult(None, None, progress=progress)  # type: ignore[arg-type]  # plan_phases fills them in
        sub = SweepState(t, dataclasses.replace(s.opts, known=r.known), blank,
                         t0, lid_file=s.lid_file, spec=s.spec, persisted=s.persisted, engine_input=s.engine_input,
                         route_spec=s.route_spec)
        plan_phases(sub)
        write_pass(sub)
        q = sub.r
        r.known, r.problems = q.known, q.problems  # the last pass holds what is still wrong
        r.link_tables.update(q.link_tables)
        r.guids_refused |= q.guids_refused
        r.activations += q.activations
        r.lft_written += q.lft_written
        r.notes += [n for n in q.notes if n not in r.notes]
        r.phases[name] = {"smps": t.stats.sent - sent0, "seconds": round(time.monotonic() - t0, 4)}
        r.repairs.append({"pass": r.passes, "left_before": left, "sets": q.sets_planned,
                          "smps": t.stats.sent - sent0})
        left = unfinished(sub)
    if left and r.passes > 1:
        r.problems.append(f"after {r.passes} passes still not done: "
                          + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in left.items()))


def check_planned_tables(s: SweepState) -> None:
    """The tables the plan would leave, checked as `verify` checks live ones (smagent.sweep.plancheck).
    What they would break is refused here, before the first Set, unless allowed; a dry run
    reports it. A repair of the running SM (``known``) plans around a fault it just saw:
    not checked, so it reacts at once."""
    if not s.source.checks_plan:
        return
    from smagent.sweep import plancheck
    with s.phase("plan_check"):
        pc = s.r.plan_check = plancheck.check(s.r)
    s.r.notes += pc.notes()
    if pc.defects and not s.opts.dry_run and not s.opts.allow_defects:
        raise PlanDefects("the planned tables would break the fabric; nothing was sent (allow_defects / "
                          "--allow-defects writes them anyway):\n  " + "\n  ".join(pc.lines()), pc.defects)


def unread_are_problems(s: SweepState) -> None:
    """A plan with no write phase: the units that could not be read stay problems
    (nothing will write them, see `settle_unread`)."""
    s.r.problems += [line for line, _keys in s.unread]
