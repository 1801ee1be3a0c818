"""A MASTER's work (`smagent.sm.daemon` composes it): sweeps, repairs, light sweeps, traps.

A full sweep first (`smagent.sweep`: plan, diff, write only what differs), then repairs
after traps (coalesced for `trap_settle` seconds) planned against the known state
(`smagent.sm.repair`), a light sweep every `sweep_interval` (one SwitchInfo Get per switch,
PortStateChange says if a port moved, plus one SMInfo Get per known SM: no Set when nothing
changed) followed by the audit's share (`smagent.sm.audit`), and PerfMgr's counter sweeps.
A failed or refused sweep is tried again soon, one with problems at once, then both every
sweep interval until clean, as `smagent.sm.policy` decides (`schedule_full`). Traps are
answered here (TrapRepress, inside the transport) and acted on in the loop. The other SMs
found by a sweep, and the SM behind a trap 144, are the mastership's (`smagent.sm.mastership`).
"""
from __future__ import annotations

import collections
import dataclasses
import logging
import time

from mad import smp as smpcodec
from mad.attributes import AttrID, SMState, SwitchInfo, TrapNumber
from mad.errors import MadError
from mad.header import Method
from smagent import discovery
from smagent import sweep as sweepmod
from smagent.errors import SmagentError
from smagent.model.subnet import Subnet
from smagent.sm import audit as auditmod, drained as drainedmod, events, peers as peersmod, policy, reload, repair
from smagent.sm import timers, traps
from smagent.sm.dispatch import SMP_CLASSES, Dispatcher, decoded, reply_lid
from smagent.sm.mastership import Mastership
from smagent.sm.perfmgr import PerfMgr
from smagent.sm.sa_service import SaService
from smagent.sm.serving import BusyServer
from smagent.sm.shared import Shared
from smagent.transport.address import Incoming
from smagent.transport.base import Request

log = logging.getLogger("smagent.sm")


class Duties:
    def __init__(self, shared: Shared, mastership: Mastership, sa: SaService, busy: BusyServer):
        opts = shared.opts
        self.shared, self.mastership, self.sa = shared, mastership, sa
        self.busy = busy  # serves requests while a sweep computes
        self.perfmgr = PerfMgr(opts.perfmgr_interval) if opts.perfmgr_interval else None
        self.audit = auditmod.Audit(opts.audit_share)
        self.drained = drainedmod.Drained(opts.state_dir)  # BadInput (exit 2) on a damaged file
        self.config = reload.Config()  # the last good sweep settings, what SIGHUP did
        self._clean: Subnet | None = None  # the model a clean sweep left, until a repair consumes it
        self.last_sweep: dict | None = None  # the last sweep or repair, failed ones too
        self.repair_why: list[str] = []
        self.repair_switches: set[int] | None = set()  # GUIDs that reported; None: unknown, sweep all
        self._resweeps = 0  # full sweeps in a row after sweeps that ended with problems
        self._retries = 0  # sweeps tried again in a row after failed ones (RETRY_AFTER_FAILURE)

    @property
    def known(self) -> Subnet | None:
        """The subnet model the daemon holds when repairs may plan against it: a clean
        sweep left it and no repair has consumed it since (else None: a full sweep)."""
        return self._clean if self._clean is not None and self._clean is self.shared.subnet else None

    @known.setter
    def known(self, known: Subnet | None) -> None:
        """None: consumed (the sweep that follows sets it again); or the model held, again."""
        if known is not None and known is not self.shared.subnet:
            raise ValueError("only the subnet model the daemon holds can be planned against")
        self._clean = known

    def serve(self, dispatcher: Dispatcher) -> None:
        dispatcher.route(SMP_CLASSES, Method.TRAP, AttrID.NOTICE, self.on_trap_request)
        dispatcher.route(SMP_CLASSES, Method.TRAP_REPRESS, AttrID.NOTICE, lambda m: None)  # to a trap of ours

    # -- traps ---------------------------------------------------------------------
    def on_trap_request(self, m: Incoming) -> None:
        """A trap (inside the transport): TrapRepress at once, the trap queued for the loop."""
        req = decoded(m)
        if req is None:
            return
        s = self.shared
        s.traps_heard += 1  # something changed: a discovery walked before is not planned on (`take_discovery`)
        s.respond(traps.repress(req, s.t.keys, 0 if req.directed else m.slid), reply_lid(req, m.slid))
        try:
            s.events.append(events.TrapReceived(traps.parse(req)))
        except MadError as e:
            log.warning("trap with a malformed Notice from LID %d: %s", m.slid, e)

    def on_trap(self, trap: traps.Trap) -> None:
        s = self.shared
        c = s.counters
        c.traps += 1
        c.trap_numbers[trap.number] += 1
        if trap.generic and trap.number == TrapNumber.BAD_M_KEY:
            c.bad_m_keys += 1  # someone without the key tried a protected port: warned, never the key
            log.warning("trap: %s (TrapRepress sent)", trap.describe())
        else:
            log.info("trap: %s (TrapRepress sent)", trap.describe())
        master = s.sm.state == SMState.MASTER
        self.sa.forward_trap(trap)  # to the hosts that subscribed (InformInfo)
        decision = events.on_trap(trap, master, self._switch_at_lid(trap.issuer_lid) if master else None)
        if isinstance(decision, events.Repair):
            self.repair_why.append(decision.why)
            s.timers.arm_by(timers.REPAIR, s.clock() + s.opts.trap_settle)
            if decision.switch is not None and self.repair_switches is not None:
                self.repair_switches.add(decision.switch)
            elif not (trap.number == TrapNumber.LINK_STATE_CHANGE and self.known is not None):
                self.repair_switches = None
            # else a link change at a switch the known topology lacks (a lost one back): the
            # known switches it is cabled to report it too and the repair walks to it from
            # there; with no such report the set stays empty, and an empty set is a full sweep
        elif isinstance(decision, events.AskSm):
            with s.doing("asking an SM that announced itself"):
                self.mastership.check_sm_at_lid(decision.lid)

    def _switch_at_lid(self, lid: int) -> int | None:
        subnet = self.shared.subnet  # its map by LID worked out once per model, not once per trap
        return subnet.switch_at_lid(lid) if subnet is not None else None

    # -- repairs and sweeps ----------------------------------------------------------
    def repair_due(self) -> None:
        """The repair timer: the traps (or what else asked) since the last one, at once."""
        why, self.repair_why = events.why_of(self.repair_why), []
        switches, self.repair_switches = self.repair_switches, set()
        self.repair(f"repair after {why}", switches)

    def repair(self, why: str, switches: set[int] | None) -> None:
        """Patch the known state from the switches that reported, then plan against it
        (no rediscovery, no table reads); a full sweep when that cannot be done."""
        s = self.shared
        s.counters.repairs += 1
        known, self.known = self.known, None  # consumed: the sweep sets it again
        sent0 = s.t.stats.sent
        if known is not None and switches:
            s.activity = f"reading the switches that reported ({why})"
            try:
                patched, what = repair.update_all(s.t, known, switches)
            except SmagentError as e:
                patched, what = None, [str(e)]
            if patched is not None:
                patch = s.t.stats.sent - sent0
                log.info("repair: %s (%d SMPs to read the reporting switches)", "; ".join(what) or "no link changed",
                         patch)
                if self.sweep(why, known=patched, smps_before=sent0) is not None and self.last_sweep:
                    self.last_sweep["patch_smps"] = patch  # of its smps: the reads before the plan
                return
            log.info("repair: a full sweep instead (%s)", "; ".join(what))
        self.sweep(why, smps_before=sent0)

    def sweep(self, why: str, known: Subnet | None = None, smps_before: int | None = None,
              opts: sweepmod.SweepOptions | None = None) -> sweepmod.SweepOptions | None:
        """A sweep (a repair with ``known``) with ``opts`` (default: the settings in force);
        returns the settings it succeeded with (the last good ones when those in force were
        refused: `reload.Config`), None if it failed."""
        s = self.shared
        used = opts or s.opts.sweep
        fresh = s.take_discovery()  # taken in any case: a sweep after this one walks
        if known is not None:
            fresh = None
        elif fresh is not None:
            log.info("sweep (%s): planning on the discovery just made (%d nodes), not walking again", why,
                     len(fresh.nodes))
        st = s.t.stats
        sent0, kinds0 = st.sent if smps_before is None else smps_before, collections.Counter(st.by_kind)
        t0 = s.clock()
        s.activity = f"{'repair' if known is not None else 'sweep'} ({why})"
        log.info("%s: started", s.activity)
        try:
            with self.busy.serving():
                r = sweepmod.sweep(s.t, dataclasses.replace(used, known=known, discovered=fresh,
                                                            drained=self.drained.entries))
                snapshot = self.sa.snapshot(r)  # built while the last one still answers
        except SmagentError as e:  # a fabric failure, or a desired state the fabric does not match
            if isinstance(e, sweepmod.PlanDefects) and opts is None and self.config.can_fall_back(used):
                log.warning("%s: the settings in force were refused (%s); routing with the last good ones",
                            why, str(e).splitlines()[0])
                s.activity = None
                return self.sweep(why, known, sent0, opts=self.config.fallback(used))
            s.counters.sweeps_failed += 1
            s.counters.plan_refusals += isinstance(e, sweepmod.PlanDefects)
            self.last_sweep = {"why": why, "incremental": known is not None, "ok": False, "error": str(e),
                               "smps": st.sent - sent0, "seconds": round(s.clock() - t0, 3), "time": time.time()}
            s.failed(f"sweep ({why})", e)
            self._retry_after_failure()
            return None
        finally:
            s.activity = None
        self._retries = 0
        self.config.succeeded(used, s.opts.sweep)
        s.subnet = snapshot  # one model: the daemon's, and the one the SA answers from from now on
        self.sa.publish(r, snapshot)
        s.counters.client_reregisters += self.mastership.reregister(r.topology)
        clean = not r.problems and not r.topology.unreachable
        self._clean = snapshot if clean and r.known is not None else None
        s.counters.sweeps += 1
        kinds = collections.Counter(st.by_kind) - kinds0
        sets = sum(v for k, v in kinds.items() if k.startswith("SubnSet"))
        sm = r.summary()["sets"]
        self.last_sweep = {"why": why, "incremental": known is not None, "ok": True, "smps": st.sent - sent0,
                           "sets": sets, "lft_blocks": sm["lft_blocks"], "mft_blocks": sm["mft_blocks"],
                           "portinfo": sm["portinfo"], "seconds": round(s.clock() - t0, 3),
                           "problems": len(r.problems), "time": time.time()}
        moved = (r.routing or {}).get("moved")
        if moved is not None:  # a patch of the known routes (`smagent.routing.patch`), not a reroute
            self.last_sweep["routes_moved"] = moved
        log.info("%s (%s): %d nodes, %d SMPs (%d Sets: LFT blocks %d, MFT blocks %d, PortInfo %d), %.3f s; "
                 "routing: %s%s", "repair" if known is not None else "sweep", why, len(r.topology.nodes),
                 st.sent - sent0, sets, sm["lft_blocks"], sm["mft_blocks"], sm["portinfo"], s.clock() - t0,
                 r.routing and f"{r.routing['engine']} ({r.routing['reason']})",
                 f"; {len(r.problems)} problem(s): {r.problems[0]}" if r.problems else "")
        if sets:
            s.changed(f"{why}: {sets} Sets" + (f", {moved} route entries moved" if moved is not None else ""))
        self.arm_light()
        self._resweep_if_unclean(r, clean)
        if known is None:  # a repair changed links, not SMs: the light sweeps watch those
            with s.doing("asking the other SMs"):
                self.mastership.check_peers(self.mastership.ask_sms(r.topology))
        return used

    def _retry_after_failure(self) -> None:
        """A full sweep again soon (rediscovered: planned around what did not answer),
        a few times with backoff; then at the light sweeps' pace until one succeeds."""
        s = self.shared
        s.timers.arm(timers.LIGHT, policy.retry_light_due(s.clock(), s.opts.sweep_interval))
        d = policy.after_failure(self._retries, s.opts.sweep_interval)
        self._retries = d.count
        if d.gave_up_fast:
            log.warning("sweep: failed %d times in a row; trying at the light sweeps' pace", d.count)
        if d.fast:
            log.info("sweep: trying again in %.1f s (retry %d of %d)", d.delay, d.count,
                     len(policy.RETRY_AFTER_FAILURE))
        self.schedule_full(f"retry {d.count} after a failed sweep", d.delay)

    def schedule_full(self, why: str, delay: float | None) -> None:
        """A full sweep ``delay`` s from now (none if None): what failed or is unclean is not
        known well enough to patch, so everything is swept."""
        if delay is not None:
            self.repair_why.append(why)
            self.repair_switches = None
            self.shared.timers.arm_by(timers.REPAIR, self.shared.clock() + delay)

    def _resweep_if_unclean(self, r, clean: bool) -> None:
        """A sweep that left problems or unreachable nodes (routes may black-hole) is
        followed at once by a full sweep, not by the next light sweep."""
        d = policy.after_unclean(self._resweeps, clean, self.shared.opts.trap_settle, self.shared.opts.sweep_interval)
        self._resweeps = d.count
        if clean:
            return
        if d.gave_up_fast:
            log.warning("sweep: still %d problem(s) after %d full sweeps in a row; sweeping again at the "
                        "light sweeps' pace until clean", len(r.problems) + len(r.topology.unreachable),
                        policy.RESWEEPS_AFTER_PROBLEMS)
        self.schedule_full(f"the last sweep ended with {len(r.problems)} problem(s) and "
                           f"{len(r.topology.unreachable)} unreachable node(s)", d.delay)

    # -- light sweeps, counter sweeps ------------------------------------------------
    def arm_light(self) -> None:
        due = policy.light_due(self.shared.clock(), self.shared.opts.sweep_interval)
        if due is not None:
            self.shared.timers.arm(timers.LIGHT, due)
        else:
            self.shared.timers.cancel(timers.LIGHT)

    def light_sweep(self) -> None:
        """SwitchInfo of every switch (PortStateChange) and SMInfo of every known SM."""
        s = self.shared
        self.arm_light()
        switches: list[discovery.DNode] = s.topo.switches() if s.topo else []
        peers = s.peers.values()
        reqs = [Request(smpcodec.dr(Method.GET, AttrID.SWITCH_INFO, n.path)) for n in switches]
        reqs += [peersmod.sminfo_get(p.path) for p in peers]
        sent0 = s.t.stats.sent
        replies = s.t.execute(reqs)
        s.counters.light_sweeps += 1
        s.counters.light_sweep_gets = s.t.stats.sent - sent0
        moved = [n for n, r in zip(switches, replies) if not r.ok or r.value(SwitchInfo).port_state_change]
        unread = any(not r.ok for r in replies[:len(switches)])
        s.peers.update(peers, replies[len(switches):], "light sweep")
        log.info("light sweep: %d Gets, %s", s.counters.light_sweep_gets,
                 f"change at {', '.join(n.description for n in moved[:4])}{' ...' if len(moved) > 4 else ''}"
                 if moved else "no change")
        if moved:
            self.repair(f"light sweep found a change at {moved[0].description}",
                        None if unread else {n.guid for n in moved})
            return
        self.mastership.check_peers(s.peers.values())
        auditmod.step(self, self.audit.earn(s.counters.light_sweep_gets))

    def counter_sweep(self) -> None:
        """PerfMgr's timer: the next one armed, a counter sweep while MASTER."""
        s = self.shared
        if self.perfmgr is None:
            return
        s.timers.arm(timers.PERFMGR, s.clock() + self.perfmgr.interval)
        if s.topo is not None and s.sm.state == SMState.MASTER:
            with s.doing("counter sweep"):
                self.perfmgr.sweep(s.t, s.topo)
