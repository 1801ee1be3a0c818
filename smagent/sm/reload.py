"""SIGHUP's desired state: re-read and checked against the fabric before it replaces the
one in force, so that a bad reload never stops the routing (the daemon keeps the old one
and says why)."""
from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING

from mad.attributes import SMState
from smagent.sweep import desired
from smagent.discovery import Topology
from smagent.errors import BadInput

if TYPE_CHECKING:
    from smagent.sm.duties import Duties

log = logging.getLogger("smagent.sm")


class DoesNotFit(BadInput):
    """The file is good, but names what the fabric as last discovered does not have."""


def reread(path: str, given: dict, topo: Topology | None, *, multicast: bool) -> dict:
    """The sweep settings of the desired state at ``path``; BadInput for a bad file or one
    contradicting the command line (``given``), `DoesNotFit` for one that cannot be
    resolved against ``topo`` (a switch it names is not there)."""
    settings = desired.sweep_settings(desired.load(path), **given)
    ds = settings.get("desired")
    if ds is None or topo is None:
        return settings
    try:
        resolved = desired.resolve(ds, topo)
        if ds.multicast and multicast:
            desired.group_spec(ds, resolved, topo)
    except BadInput as e:
        raise DoesNotFit(str(e)) from None
    return settings


def candidate(path: str, opts, topo: Topology | None):
    """The daemon's sweep settings (``opts``: its DaemonOptions) with the desired state at
    ``path``; BadInput says why not."""
    try:
        settings = reread(path, opts.given, topo, multicast=opts.sweep.multicast)
    except DoesNotFit as e:
        raise DoesNotFit(f"it does not fit the fabric: {e}") from None
    return dataclasses.replace(opts.sweep, **settings)


def sighup(duties: Duties) -> None:
    """SIGHUP in the daemon (its master ``duties``): the desired-state file re-read, then
    (as MASTER) swept with at once, before it is put in force: refused (a bad file, one
    that does not fit, or a plan the check refuses) the previous one stays, and
    `Config.last_reload` says why."""
    s = duties.shared
    f = s.opts.desired_file
    if not f:
        log.info("SIGHUP: no desired-state file; sweeping again")
        if s.sm.state == SMState.MASTER:
            duties.sweep("SIGHUP")
        return
    try:
        new = candidate(f, s.opts, s.topo)
    except BadInput as e:  # a bad file, one contradicting the command line, or not fitting the fabric
        return _refused(duties.config, f, str(e))
    if s.sm.state != SMState.MASTER:  # not ours to route: the first sweep as MASTER checks it (and falls back)
        s.opts.sweep = new
        duties.config.reloaded(f, None)
        log.info("SIGHUP: desired state re-read from %s", f)
        return
    before, refusals = duties.last_sweep, s.counters.plan_refusals
    in_force = duties.sweep("SIGHUP", opts=new) is new  # planned and checked before it is in force
    if not in_force:
        if s.counters.plan_refusals > refusals:  # refused before any Set: the fabric is routed as it was
            duties.last_sweep = before
        return _refused(duties.config, f, (s.last_error or {}).get("error", "the sweep with it failed"))
    s.opts.sweep = new
    duties.config.reloaded(f, None)
    duties.config.succeeded(new, new)
    log.info("SIGHUP: desired state re-read from %s and in force", f)


def _refused(config: Config, f: str, err: str) -> None:
    config.reloaded(f, err)
    log.error("SIGHUP: %s not reloaded, the previous desired state stays: %s", f, err)


class Config:
    """The sweep settings in force (the daemon's `opts.sweep`), the last ones a sweep
    succeeded with (`good`), and what the last SIGHUP did. A desired state is in force
    only once a sweep with it succeeded (a MASTER sweeps with it at once; its plan check
    refuses what it would break, and then the old one stays). When a later physical
    change makes the one in force refused, the sweep is done with `good` instead
    (`fell_back`): no desired state may stop the repair of a physical fault."""

    def __init__(self) -> None:
        self.good = None  # SweepOptions of the last successful sweep
        self.fell_back = False  # the last sweep routed with `good`, the one in force refused
        self.last_reload: dict | None = None  # {"file", "ok", "error", "time"}
        self.reloads_refused = 0

    def can_fall_back(self, used) -> bool:
        return self.good is not None and used is not self.good

    def fallback(self, in_force):
        """The last good settings, with the multicast joins and leaves and the alias GUIDs
        the SA has answered since (kept in the settings in force, `SaService.follow`)."""
        return dataclasses.replace(self.good, mcast_joined=in_force.mcast_joined,
                                   mcast_released=in_force.mcast_released, alias_guids=in_force.alias_guids)

    def succeeded(self, used, in_force) -> None:
        self.good = used
        self.fell_back = used is not in_force

    def reloaded(self, path: str, error: str | None) -> None:
        self.reloads_refused += error is not None
        self.last_reload = {"file": path, "ok": error is None, "error": error, "time": time.time()}

    def status(self) -> dict:
        return {"fell_back": self.fell_back, "reload": self.last_reload, "reloads_refused": self.reloads_refused}
