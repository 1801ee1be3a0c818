"""The scripting face of smagent: a session on one fabric, typed results, typed errors.

    import smagent
    with smagent.connect(transport="sim") as fabric:
        topo = fabric.discover()
        plan = fabric.sweep(dry_run=True)      # every Get, no Set
        print(plan.sets_planned, plan.plan_lines()[:3])
        fabric.sweep()                         # bring it up
        print(fabric.query("portinfo", "0,1", port=1).lid)
        with fabric.recording("plan.erf"):     # these Gets, for an offline dry run:
            fabric.plan("desired.yaml")        # connect("replay", fixture="plan.erf")

Errors raised by a session are subclasses of `SmagentError` (`smagent.errors`), each
carrying its exit code: `BadInput` (the caller's input was refused and nothing was sent;
the CLI exits 2), `FabricFailure` (the fabric or the transport failed; exit 3; ``changed``
lists the Sets already sent), `SafetyRefusal` (another SM is MASTER, or the planned tables
would break the fabric: `smagent.sweep.PlanDefects`; exit 4). Any other
exception is a bug. The CLI is a thin layer over this module. The session logs to the
``smagent`` loggers (see `smagent`) and never prints.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import TYPE_CHECKING, Any, Iterator, Sequence, TypeVar

from mad import codes
from mad import forwarding as fw
from mad.attributes import Attribute, PortInfo, PortState
from mad.errors import MadError
from smagent.config import drainfile, files
from smagent.errors import BadInput, FabricFailure, SafetyRefusal, SmagentError, after_sets
from smagent.fdb import ops
from smagent.fdb.ops import LftTable, MftTable, RftEntry, RftTable, WriteResult
from smagent.discovery.targets import target_text
from smagent.transport import DEFAULT_RETRIES, DEFAULT_TIMEOUT_MS, DEFAULT_WINDOW, Transport, open_transport
from smagent.transport.base import SmpStatusError

if TYPE_CHECKING:
    from mad.smp import AnySmp
    from smagent.sweep.desired import DesiredState
    from smagent.discovery import Topology
    from smagent.sweep import SweepResult
    from smagent.discovery.targets import Target
    from smagent.transport.base import Request
    from smagent.verify import Report

# a switch or node as the session methods take it: a LID, a DR path (tuple or "0,1,3"),
# a node GUID or a node description
TargetArg = int | str | Sequence[int]
PathArg = str | os.PathLike[str]
A = TypeVar("A", bound=Attribute)

__all__ = ["connect", "check_query", "Session", "SessionClosed", "ApplyResult", "LftTable", "MftTable", "RftEntry",
           "RftTable", "WriteResult", "SmagentError", "BadInput", "FabricFailure", "SafetyRefusal"]


class SessionClosed(BadInput):
    """A call on a session after `Session.close` (nothing was sent)."""


@dataclasses.dataclass(repr=False)
class ApplyResult:
    """What `Session.apply` did: ``result`` the sweep that wrote the desired state, ``left``
    the fresh plan afterwards (a `SweepResult`; ``left.plan_lines()``, ``left.plan_changes()``:
    empty when the fabric holds the desired state)."""
    result: SweepResult
    left: SweepResult

    @property
    def left_after_apply(self) -> list[str]:
        """Deprecated (the README named it): ``left.plan_lines()``."""
        return self.left.plan_lines()

    @property
    def ok(self) -> bool:
        """No write problem, nothing unreachable, nothing left to change."""
        return not (self.result.problems or self.result.topology.unreachable or self.left.sets_planned)

    def __repr__(self) -> str:
        return (f"<ApplyResult: {self.result.sets_planned} Sets sent, {len(self.result.problems)} problems, "
                f"{self.left.sets_planned} left to change{', ok' if self.ok else ''}>")


class Session:
    """One open transport and what has been learnt through it. ``state_dir``: where table
    writes save what they overwrite and keep their journal (None: no backups)."""

    def __init__(self, transport: Transport, *, state_dir: PathArg | None = None):
        self.transport = transport
        self.topology: Topology | None = None
        self.state_dir = state_dir
        self.closed = False

    def __repr__(self) -> str:  # what the session reaches and what it learnt, not its contents
        t = self.transport
        where = getattr(t, "description", None) or t.name
        topo = "" if self.topology is None else (f", discovered {len(self.topology.switches())} switches and "
                                                 f"{len(self.topology.cas())} CAs")
        state = f", state in {self.state_dir}" if self.state_dir else ""
        return f"<Session {where}{topo}{state}{', closed' if self.closed else ''}>"

    # -- context manager ---------------------------------------------------------------
    def close(self) -> None:
        """Close the transport; every later call raises `SessionClosed`."""
        if not self.closed:
            self.closed = True
            self.transport.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self) -> Transport:
        if self.closed:
            raise SessionClosed("this session is closed: open a new one with smagent.connect()")
        return self.transport

    @property
    def stats(self) -> dict[str, Any]:
        """SMPs sent/received, retries, timeouts, per attribute and method."""
        return self._open().stats.snapshot()

    # -- recording ---------------------------------------------------------------------
    def start_recording(self, path: PathArg) -> None:
        """Record every SMP sent and received from now on to ``path`` (ERF; ``.pcap``:
        pcap with link type 252), e.g. the Gets of a plan, for a later offline dry run
        (``connect("replay", fixture=path)``). The file is written as ``PATH.partial``
        and gets its name at `stop_recording`, so a file at ``path`` is a whole
        recording. BadInput if this session records already (``connect(record=...)``
        or an earlier start) or ``path`` cannot be written."""
        from smagent.config import files as paths
        from smagent.transport.pcap import CaptureWriter
        t = self._open()
        if t.recorder is not None:
            raise BadInput(f"this session records already, to {t.recorder.path}: stop that first")
        paths.check_output(path, "recording")
        t.recorder = CaptureWriter(path, atomic=True)

    def stop_recording(self) -> str:
        """Stop recording and close the file; returns its path. BadInput if not recording."""
        t = self._open()
        rec, t.recorder = t.recorder, None
        if rec is None:
            raise BadInput("this session is not recording: start_recording(path) first")
        rec.close()
        return rec.path

    @contextlib.contextmanager
    def recording(self, path: PathArg) -> Iterator[None]:
        """``with session.recording(path): ...``: `start_recording`, then `stop_recording`
        when the block ends (also on an error: what was exchanged is recorded)."""
        self.start_recording(path)
        try:
            yield
        finally:
            if not self.closed:
                self.stop_recording()

    # -- operations ------------------------------------------------------------------
    def snapshot(self, path: PathArg, *, mft_blocks: int | None = None) -> Any:
        """Record to ``path`` one discovery and one Get of every table any plan could read
        (`smagent.verify.recording`): a replay of it (``connect("replay", fixture=path)``) answers
        the Gets of any plan offline. ``mft_blocks``: MFT blocks read at least (from MLID
        0xC000; more up to each switch's MulticastFDBTop). Returns a
        `smagent.verify.recording.SnapshotResult` (``.summary()``, ``.failed``)."""
        from smagent.verify import recording as snapmod
        t = self._open()
        blocks = snapmod.MFT_BLOCKS_DEFAULT if mft_blocks is None else _mft_blocks(mft_blocks)
        with self.recording(path):
            result = snapmod.take(t, os.fspath(path), mft_blocks=blocks)
        self.topology = result.topology
        return result

    def diff(self, baseline: PathArg, *, mft_blocks: int | None = None) -> Any:
        """Compare the fabric (or the snapshot this session replays) with ``baseline``: a
        snapshot (`snapshot`) or the JSON of a plan (`plan --json` of a desired state).
        Returns a `smagent.verify.drift.Diff`: ``.records`` (every difference, by table, with
        ``baseline`` and ``now``), ``.ok`` (none), ``.lines()``, ``.as_json()``. Gets only."""
        from smagent.verify import drift as diffmod
        from smagent.verify import recording as snapmod
        t = self._open()
        blocks = snapmod.MFT_BLOCKS_DEFAULT if mft_blocks is None else _mft_blocks(mft_blocks)
        return diffmod.diff(t, baseline, mft_blocks=blocks)

    def whatif(self, fail: Sequence[str], *, routing: str | None = None, **more: Any) -> Any:
        """What losing ``fail`` (each a node as the CLI names targets, or ``NODE[PORT]`` for
        the cable on that port) would do under ``routing`` (default: the sweep's engine):
        host pairs lost, rerouted, the hottest link before and after, credit loops. Two
        plans, no Set, and no SMP at all: only on a snapshot (the replay transport) or the
        simulator. Returns a `smagent.verify.whatif.WhatIf` (``.lines()``, ``.as_json()``)."""
        from smagent import sweep as sweepmod
        from smagent.model.subnet import Subnet
        from smagent.sweep import plancheck
        from smagent.verify import whatif
        t = self._open()
        if t.name not in ("sim", "replay"):
            raise BadInput("whatif sends no SMP: give it a snapshot (--from FILE, recorded by `smagent snapshot "
                           "FILE`) or the simulator")
        if not fail:
            raise BadInput("whatif: name what fails (--fail NODE or --fail NODE[PORT])")
        more.setdefault("multicast", False)  # unicast only: a cut fabric has no one tree for a group
        healthy = self.sweep(dry_run=True, routing=routing, state_dir=None, force=True, **more)
        failures = [_failure(text, healthy.topology) for text in fail]
        after_topo = whatif.without(plancheck.planned_topology(healthy), failures)
        lfts = plancheck.planned_lfts(healthy)
        extra: dict[str, Any] = {"routing": routing} if routing else {}
        opts = sweepmod.SweepOptions(dry_run=True, force=True, known=Subnet.build(after_topo, lfts),
                                     **extra, **more)
        failed = sweepmod.sweep(t, opts)
        w = whatif.compare(plancheck.snapshot(healthy, planned=True), plancheck.snapshot(failed, planned=True),
                           failures)
        chosen = healthy.summary().get("routing")  # the engine a sweep names (auto: the one it chose)
        w.engine = (chosen.get("engine") if isinstance(chosen, dict) else chosen) or routing or str(opts.routing)
        return w

    def drain(self, targets: Sequence[str], *, routing: str | None = None, dry_run: bool = False,
              force: bool = False, **more: Any) -> Any:
        """Route every pair around ``targets`` (nodes as the CLI names them, or ``NODE[PORT]``
        for a cable) with ``routing`` (default: the sweep's engine), write the new tables in
        an order that breaks no pair in flight, read back every switch cabled into them and
        prove that no entry leads into them. A drain that would cut off other hosts is refused
        (SafetyRefusal) before any Set. Returns a `smagent.sweep.drain.DrainResult`
        (``.safe``, ``.entries_left``, ``.lines()``). With a state directory the drain is recorded
        there (`smagent.config.drainfile`): later sweeps, and an SM started later, keep routing
        around it until it is undrained."""
        from smagent import sweep as sweepmod
        from smagent.model.subnet import Subnet
        from smagent.sweep import drain as drainmod, plancheck
        from smagent.verify import whatif
        if not targets:
            raise BadInput("drain: name what to drain (NODE or NODE[PORT])")
        now = self.sweep(dry_run=True, routing=routing, force=force, **more)
        drained = [_failure(text, now.topology, what="drain") for text in targets]
        drainmod.refuse_own_port(now.topology, drained)
        after = whatif.without(now.topology, drained)
        extra: dict[str, Any] = {"routing": routing} if routing else {}

        def plan(**kw: Any) -> Any:
            opts = sweepmod.SweepOptions(dry_run=True, force=force, known=Subnet.build(
                after, now.lft_current, now.mft_current), **extra, **{**more, **kw})
            return opts, sweepmod.sweep(self.transport, opts)

        _o, unicast = plan(multicast=False)  # who would be cut off, before multicast trees are asked for
        w = whatif.compare(plancheck.snapshot(now, planned=False), plancheck.snapshot(unicast, planned=True),
                           drained)
        drainmod.refuse_cutting_off(w)
        if dry_run:
            return drainmod.DrainResult(drained, 0, w.rerouted, [], dry_run=True)
        opts, _planned = plan()
        done = sweepmod.sweep(self.transport, dataclasses.replace(opts, dry_run=False, state_dir=self.state_dir))
        if done.problems:
            raise FabricFailure("drain: " + "; ".join(done.problems[:5]),
                                [f"{done.lft_written} LFT block Sets, {len(done.mft_changes)} MFT units planned"])
        left = drainmod.prove(self.transport, now.topology, drained)
        kept = self.state_dir is not None
        if kept:  # later sweeps (one-shot or a daemon started later) keep it drained until `smagent undrain`
            known = drainfile.load(self.state_dir)
            drainfile.save(self.state_dir, known + [drainfile.Entry(d.guid, d.name, d.port) for d in drained
                                                    if (d.guid, d.port) not in {(e.guid, e.port) for e in known}])
        return drainmod.DrainResult(drained, done.lft_written + len(done.mft_changes), w.rerouted, left, kept=kept)

    def discover(self) -> Topology:
        """Directed-route discovery. Returns a `smagent.discovery.Topology`."""
        from smagent import discovery
        self.topology = discovery.discover(self._open())
        return self.topology

    def query(self, attribute: str, target: TargetArg, *, port: int | None = None, block: int | None = None,
              position: int | None = None, ext_speeds: bool = False, in_port: int | None = None) -> Attribute:
        """Read one attribute (nodeinfo, nodedesc, portinfo, switchinfo, sminfo, lft, rft,
        mft, pkeys, sl2vl, vlarb) from a LID (an int or text), a DR path (a tuple or
        "0,1,3"), a node GUID or a node description. Returns the decoded attribute: an
        instance of its class in `mad.attributes` (`NodeInfo`, `PortInfo`, ...), a dataclass
        with the IBA snake_case names; a PortInfo's ``port_state`` is a `PortState`."""
        return _decoded(self.query_reply(attribute, target, port=port, block=block, position=position,
                                         ext_speeds=ext_speeds, in_port=in_port)[1].attribute())

    def query_reply(self, attribute: str, target: TargetArg, *, port: int | None = None, block: int | None = None,
                    position: int | None = None, ext_speeds: bool = False,
                    in_port: int | None = None) -> tuple[Target, AnySmp]:
        """`query`, returning ``(Target, response SMP)``: the resolved target and the whole
        answer (attribute name, modifier). Every argument is checked before the first SMP
        (a GUID or description is then found by discovery: Gets only)."""
        from smagent.discovery import targets
        t = self._open()
        kw: dict[str, Any] = dict(port=port, block=block, position=position, ext_speeds=ext_speeds, in_port=in_port)
        tgt = check_query(attribute, target, **kw)
        if tgt is None:
            tgt = targets.resolve_target(target_text(target), t, topology=self.topology)
        try:
            return tgt, t.query(_query_request(attribute, tgt, **kw))
        except SmpStatusError as e:  # the node may say why: its type, its port count
            why = _node_refuses(t, tgt, attribute, port, in_port)
            if why:
                raise BadInput(why) from e
            raise

    def sweep(self, *, dry_run: bool = False, lmc: int | None = None, lid_file: PathArg | None = None,
              routing: str | None = None, force: bool = False, desired: Any = None, **more: Any) -> SweepResult:
        """Discover, assign LIDs, route, program and activate (or, with ``dry_run``, plan
        only). ``desired``: a desired state (a YAML/JSON path, a mapping, or a
        `smagent.sweep.desired.DesiredState`); its ``routing``, ``lmc`` and ``lid_file`` are used
        (see `sweep_options` for how they meet the keywords). The session's ``state_dir``
        holds the sweep's backups, journal and guid2lid unless ``state_dir=`` says
        otherwise (None: none of them). Further keywords are
        `smagent.sweep.SweepOptions` fields (an unknown one is BadInput). Every file is
        read and checked before the first SMP. Returns a `smagent.sweep.SweepResult`
        (`.summary()`, `.plan_lines()`, `.plan_changes()`); a plan whose tables would break
        the fabric is refused (`smagent.sweep.PlanDefects`) unless ``allow_defects=True``."""
        from smagent.planning import lidassign as lids
        from smagent import sweep as sweepmod
        t = self._open()
        more.setdefault("state_dir", None if self.state_dir is None else str(self.state_dir))  # as the table writes
        if more["state_dir"] is not None and "drained" not in more:  # what `smagent drain` keeps out, daemon or not
            files.check_state_dir(more["state_dir"])  # a bad --state-dir named as such, before its files
            more["drained"] = tuple(drainfile.load(more["state_dir"]))
        opts = sweepmod.SweepOptions(**sweep_options(desired, lmc=lmc, lid_file=lid_file, routing=routing, more=more),
                                     dry_run=dry_run, force=force)
        if opts.lid_file:  # a dry run refuses what the real run would: it predicts that run
            _check_lid_file(opts)
            lids.load_guid2lid(opts.lid_file, strict=True)  # and read whole: a bad line refuses the sweep
        before = dict(t.stats.by_kind)
        try:
            result = sweepmod.sweep(t, opts)
        except (BadInput, FabricFailure) as e:  # once Sets went out, the error says which
            err = after_sets(e, t.stats.sets_sent(since=before))
            if err is e:
                raise
            raise err from e
        self.topology = result.topology
        return result

    def plan(self, desired: Any = None, *, force: bool = False, **kw: Any) -> SweepResult:
        """The plan of a sweep: every Get, no Set: ``sweep(dry_run=True, desired=desired, **kw)``.
        ``desired``: a desired-state path, mapping or `smagent.sweep.desired.DesiredState`."""
        return self.sweep(dry_run=True, force=force, desired=desired, **kw)

    def apply(self, desired: Any, *, force: bool = False, state_dir: PathArg | None = None,
              **kw: Any) -> ApplyResult:
        """Make the fabric hold a desired state (as for `plan`), then plan again:
        ``left`` (that plan) must have nothing to change. Another MASTER SM: SafetyRefusal unless ``force``;
        planned tables that would break the fabric: PlanDefects unless ``allow_defects``."""
        from smagent.sweep import desired as desiredmod
        ds = desiredmod.coerce(desired)  # read once: the re-plan sees the same state
        kw["state_dir"] = state_dir if state_dir is not None else self.state_dir
        r = self.sweep(desired=ds, force=force, **kw)
        kw.pop("progress", None)
        left = self.sweep(desired=ds, force=force, dry_run=True, **kw)  # the same LID file as the write
        return ApplyResult(r, left)

    def verify(self, *, mcast: bool = True, examples: int = 5, partitions: Any = None,
               path_sls: PathArg | None = None, qos_policy: Any = None, state_dir: PathArg | None = None,
               max_imbalance: float | None = None) -> Report:
        """Trace every source to every destination on the tables the switches hold.
        ``partitions``: a partitions.conf path or a `smagent.config.partitions.PartitionConfig`
        the P_Key tables are checked against (`smagent.verify.isolation`).
        ``path_sls``: the SL file a dfsssp sweep left (default: `<state dir>/path_sls` of
        ``state_dir`` or the session's state directory, when there is one): credit loops are then counted
        per VL with the SL of each path (else every path on SL 0).
        ``qos_policy``: a QoS policy path or `smagent.config.qospolicy.QosPolicy`: its SLs by target
        port (and default) over those. ``max_imbalance``: a switch-to-switch link carrying more
        than this many times the ideal load of its tree level is the defect ``imbalance``.
        Returns a `smagent.verify.Report` (``.ok``, ``.defects``, ``.as_json()``)."""
        from smagent.planning import pathsl
        from smagent import verify as verifymod
        if partitions is not None and not hasattr(partitions, "partitions"):
            from smagent.config import partitions as partmod
            partitions = partmod.load(partitions)  # before any SMP
        state_dir = state_dir if state_dir is not None else self.state_dir
        if path_sls is None and state_dir is not None:
            from smagent.config import files as paths
            left = paths.StateDir(state_dir).path_sls
            if left.exists():  # a dfsssp sweep's SLs (a sweep without any removes the file)
                path_sls = left
        sls = pathsl.load(path_sls) if path_sls is not None else None  # before the first SMP
        if qos_policy is not None and not hasattr(qos_policy, "rules"):
            from smagent.config import qospolicy
            qos_policy = qospolicy.load(qos_policy)  # before any SMP
        if max_imbalance is not None and not max_imbalance > 0:
            raise BadInput(f"max_imbalance {max_imbalance!r}: not a ratio above 0 (e.g. 2 for twice the ideal)")
        return verifymod.verify(self._open(), mcast=mcast, examples=examples, partitions=partitions, path_sl=sls,
                                qos_policy=qos_policy, max_imbalance=max_imbalance)

    def trace(self, src: TargetArg, dst: TargetArg) -> Any:
        """The route from SRC to DST hop by hop, read from the switches' LFTs by directed
        route (one LFT block a switch on the way), without the SA: what ``ibtracert`` prints.
        A node named for SRC is traced from its first port with a LID; DST a LID, or a node's
        (first port's) base LID. Returns a `smagent.verify.trace.Trace` (``.delivered``,
        ``.hops``, ``.error``, ``.lines()``, ``.as_json()``); a malformed or unknown target
        is BadInput."""
        from smagent.verify import trace as tracemod
        t = self._open()
        for end in (src, dst):
            check_query("nodedesc", end)  # a malformed target: refused before the first SMP
        try:
            return tracemod.trace(t, target_text(src), target_text(dst), topology=self.discover())
        except MadError as e:
            raise BadInput(str(e)) from None

    # -- forwarding tables (smagent.fdb.ops) -----------------------------------------------
    def target(self, switch: TargetArg) -> Target:
        """A switch argument as a `smagent.discovery.targets.Target`: a LID, a DR path, a node GUID
        or a node description (those two through discovery: Gets only)."""
        from smagent.discovery import targets
        t = self._open()
        text = target_text(switch)
        try:
            return targets.parse_target(text)
        except targets.NeedsDiscovery:
            return targets.resolve_target(text, t, topology=self.topology)
        except MadError as e:
            raise BadInput(str(e)) from None

    def lft_show(self, switch: TargetArg) -> ops.LftTable:
        """One switch's LFT (LIDs 0..LinearFDBTop), as ``ibroute -n`` reads it."""
        return ops.lft_show(self._open(), self.target(switch))

    def lft_set(self, switch: TargetArg, lid: int | str, port: int | str, *, dry_run: bool = False,
                force: bool = False, allow_defects: bool = False) -> ops.WriteResult:
        """Route LID out of PORT on SWITCH (255: no route); LinearFDBTop is raised if needed.
        Refused (SafetyRefusal) while another SM is MASTER, unless ``force``, and (PlanDefects,
        a SafetyRefusal) when the edit would break the fabric, unless ``allow_defects``: see
        `edit_check`. ``.backup_file``: where what it overwrote was saved."""
        lid, port = _number(lid, "lid"), _number(port, "port")
        ops.check_lft_args(lid, port)
        return ops.lft_set(self._open(), self.target(switch), lid, port, dry_run=dry_run, force=force,
                           state_dir=self.state_dir, check=self.edit_check(allow_defects))

    def edit_check(self, allow_defects: bool = False) -> ops.Check:
        """The check every table edit runs before its first Set (`smagent.sweep.plancheck.check_edit`):
        the fabric's tables read as `verify` reads them (LFTs, RFTs; MFTs for an MFT edit),
        then the edit's Sets applied to them in memory. What the edit would break (a black
        hole, a loop, a switch's own LID off port 0, pairs that are delivered today and would
        not be, a credit loop, a multicast tree it damages) raises PlanDefects, unless
        ``allow_defects`` or a dry run (which reports it: `WriteResult.plan_defects`)."""
        def run(plan: Any, dry_run: bool, rft_tables: dict) -> Any:
            from smagent import verify as verifymod
            from smagent.sweep import PlanDefects
            from smagent.sweep import plancheck
            cur = verifymod.collect(self._open(), mcast=bool(plan.mft), links=False)
            pc = plancheck.check_edit(cur, plan, rft_tables)
            if pc.defects and not dry_run and not allow_defects:
                raise PlanDefects("the edit would break the fabric; nothing was sent (allow_defects / "
                                  "--allow-defects writes it anyway):\n  " + "\n  ".join(pc.lines()), pc.defects)
            return pc
        return run

    def _fresh(self, topology: Topology | None) -> Topology:
        """The topology to read on: the one given, else a fresh discovery (a sweep changes
        LIDs and LinearFDBTop, so an older topology would read the wrong blocks)."""
        self._open()
        return topology if topology is not None else self.discover()

    def read_lfts(self, topology: Topology | None = None) -> dict[int, bytes]:
        """Every switch's LFT (LIDs 0..LinearFDBTop), all blocks in one windowed batch:
        {switch GUID: table bytes}. On ``topology`` (a `discover()` result: a monitor
        reuses it), else on a fresh discovery."""
        from smagent.fdb import lft as linear
        from smagent.model import lftdump as text
        return linear.read_all(self.transport, text.dump_order(self._fresh(topology)))

    def lft_dump(self, dump_all: bool = False, *, topology: Topology | None = None) -> str:
        """Every switch's LFT as ``dump_lfts`` prints it (what `lft_load` and OpenSM's
        ``-R file -U`` read), ``dump_all``: also LIDs without a valid port. On ``topology``,
        else on a fresh discovery."""
        from smagent.model import lftdump as text
        topo = self._fresh(topology)
        return "\n".join(text.format_lft_dump(topo, self.read_lfts(topo), dump_all=dump_all)) + "\n"

    def lft_load(self, path_or_text: str, *, dry_run: bool = False, force: bool = False,
                 allow_defects: bool = False) -> ops.WriteResult:
        """Load a dump (a file path, or the text itself) and write the blocks that differ.
        Each section is its switch's whole table; every problem is BadInput, nothing sent;
        what the tables would break: PlanDefects unless ``allow_defects`` (`edit_check`)."""
        return ops.lft_load(self._open(), path_or_text, dry_run=dry_run, force=force, state_dir=self.state_dir,
                            discover=lambda _t: self.discover(), check=self.edit_check(allow_defects))

    def lft_backup(self) -> str:
        """Every switch's LFT in the ``lft dump`` format (restore it with `lft_restore`)."""
        from smagent.fdb import backup
        text, self.topology = backup.backup_lfts(self._open())
        return text

    def lft_restore(self, path: PathArg, *, dry_run: bool = False, force: bool = False) -> ops.WriteResult:
        """Write back a dump or a block backup saved before an apply (forwarding table
        blocks, SwitchInfo fields, SL2VL/VLArb/P_Key tables): only what differs."""
        return ops.lft_restore(self._open(), str(path), dry_run=dry_run, force=force, state_dir=self.state_dir,
                               discover=lambda _t: self.discover())

    def mft_show(self, switch: TargetArg) -> ops.MftTable:
        """One switch's MFT (``.groups()``: {mlid: ports})."""
        return ops.mft_show(self._open(), self.target(switch))

    def mft_set(self, switch: TargetArg, mlid: int | str, ports: Sequence[int | str] | None, *, dry_run: bool = False,
                force: bool = False, allow_defects: bool = False) -> ops.WriteResult:
        """Make PORTS the whole port set of MLID on SWITCH (no ports: remove the MLID);
        what the group's tree would lose: PlanDefects unless ``allow_defects`` (`edit_check`)."""
        mlid, ports = _number(mlid, "mlid"), _numbers(ports, "ports")
        ops.check_mft_args(mlid, ports)
        return ops.mft_set(self._open(), self.target(switch), mlid, ports, dry_run=dry_run, force=force,
                           state_dir=self.state_dir, check=self.edit_check(allow_defects))

    def read_mfts(self, topology: Topology | None = None) -> dict[int, dict[int, list[int]]]:
        """Every switch's MFT up to MulticastFDBTop, one windowed batch: {switch GUID:
        {mlid: sorted ports}} for every MLID with any port (as `MftTable.groups`). The
        PortMasks as read: `read_mft_masks`. On ``topology``, else on a fresh discovery."""
        from smagent.fdb import mft as mfttab
        topo = self._fresh(topology)
        positions = {n.guid: fw.mft_positions_for(n.num_ports) for n in topo.switches()}
        out: dict[int, dict[int, list[int]]] = {}
        for g, units in self.read_mft_masks(topo).items():
            mlids = sorted({fw.MULTICAST_LID_MIN + b * fw.MFT_BLOCK_SIZE + i for (b, _p) in units
                            for i in range(fw.MFT_BLOCK_SIZE)} - {fw.MULTICAST_LID_MAX + 1})
            groups = {m: mfttab.mft_ports(units, m, positions[g]) for m in mlids}
            out[g] = {m: ports for m, ports in groups.items() if ports}
        return out

    def read_mft_masks(self, topology: Topology | None = None) -> dict[int, dict[tuple[int, int], list[int]]]:
        """`read_mfts` as read from the switches: {switch GUID: {(block, position): [32
        PortMasks]}} (MLID 0xC000 + 32 * block + i, ports 16 * position + bit)."""
        from smagent.fdb import mft as mfttab
        from smagent.fdb.switch import TableFailure
        sws = [(n, n.switch_info) for n in self._fresh(topology).switches() if n.switch_info is not None]
        t = self.transport
        wanted = [(n.guid, n.path, b, p) for n, si in sws
                  for b in mfttab.mft_blocks_to_read(si.multicast_fdb_cap, si.multicast_fdb_top)
                  for p in range(fw.mft_positions_for(n.num_ports))]
        got, errors = mfttab.read_mft_units(t, wanted)
        if errors:
            raise TableFailure("reading MFTs: " + "; ".join(errors[:5]))
        out: dict[int, dict[tuple[int, int], list[int]]] = {n.guid: {} for n, _si in sws}
        for (g, b, p), masks in got.items():
            out[g][(b, p)] = masks
        return out

    def read_portinfos(self, topology: Topology | None = None) -> dict[tuple[int, int], PortInfo]:
        """PortInfo of every port of every node (a switch: 0..NumPorts), one windowed batch:
        {(node GUID, port): PortInfo} (``port_state`` a `PortState`). Ports that do not
        answer are left out. On ``topology``, else on a fresh discovery."""
        from mad import smp as smpcodec
        from mad.attributes import AttrID
        from mad.header import Method
        from smagent.transport.base import Request
        topo = self._fresh(topology)
        t = self.transport
        keys: list[tuple[int, int]] = []
        reqs: list[Request] = []
        for n in topo.nodes.values():
            ports = range(n.num_ports + 1) if n.is_switch else sorted(n.port_paths)
            for p in ports:
                path = n.path if n.is_switch else n.port_paths[p]
                keys.append((n.guid, p))
                reqs.append(Request(smpcodec.dr(Method.GET, AttrID.PORT_INFO, path, fw.portinfo_modifier(p))))
        return {k: _decoded(r.value(PortInfo)) for k, r in zip(keys, t.execute(reqs)) if r.ok}

    def rft_show(self, switch: TargetArg) -> ops.RftTable:
        """One switch's valid RFT entries (BadInput for a switch without an RFT)."""
        return ops.rft_show(self._open(), self.target(switch))

    def rft_set(self, switch: TargetArg, lid: int | str, port: int | str, *, lmc: int | str = 0, dry_run: bool = False,
                force: bool = False, allow_defects: bool = False) -> ops.WriteResult:
        """LIDs LID..LID+2^LMC-1 out of PORT on SWITCH's RFT (255 removes them); what that
        would break: PlanDefects unless ``allow_defects`` (`edit_check`)."""
        lid, port, lmc = _number(lid, "lid"), _number(port, "port"), _number(lmc, "lmc")
        ops.check_rft_args(lid, port, lmc)
        return ops.rft_set(self._open(), self.target(switch), lid, port, lmc=lmc, dry_run=dry_run, force=force,
                           state_dir=self.state_dir, check=self.edit_check(allow_defects))

    # -- port counters (Performance Management: a transport opened with PERF_CLIENT) ----
    def counters(self, target: TargetArg | None = None, *, port: int | None = None, extended: bool = False,
                 reset: bool = False) -> Any:
        """One port's counters as perfquery reads them (`smagent.perf.PortCounterRead`);
        ``target`` None: the local port; ``reset``: cleared after the read (-r)."""
        from smagent import perf
        t = self._open()
        perf.check_transport(t)
        lid, port = perf.locate(t, None if target is None else str(target), port, topology=self.topology)
        return perf.read_port(t, lid, port, extended=extended, reset=reset)

    def health(self, thresholds: dict[str, int] | None = None, *, every_port: bool = False) -> Any:
        """Discover, then read every linked port's counters (`smagent.perf.Health`: the
        ports over ``thresholds``, ibqueryerrors' defaults when None)."""
        from smagent import perf
        t = self._open()
        perf.check_transport(t)
        return perf.sweep(t, self.discover(), thresholds, every_port=every_port)


def _check_lid_file(opts: Any) -> None:
    """The LID file of a sweep, dry or not, must be writable where it is named (the sweep
    writes it); BadInput lists that and a bad routing spec or file together (the sweep
    itself checks the routing first)."""
    from smagent.config import files as paths
    from smagent import routing
    try:
        paths.check_output(opts.lid_file, "--lid-file")
    except BadInput as e:
        try:
            routing.preload(opts.routing)
        except BadInput as r:
            raise BadInput(problems=r.problems + e.problems) from None
        raise


def _number(value: Any, what: str) -> int:
    """A table write's number: an int, or its text as the CLI takes it (decimal or 0x hex);
    anything else is BadInput (nothing sent), never a TypeError from deeper down."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip(), 0)
        except ValueError:
            pass
    raise BadInput(f"{what} {value!r} is not a number (an int, or text: decimal or 0x hex)")


def _numbers(values: Any, what: str) -> list[int]:
    """A list of ports as `_number` takes each (None: no ports; a lone int or text is
    refused: a list was meant)."""
    if values is None:
        return []
    if isinstance(values, (str, bytes, int)) or not isinstance(values, (list, tuple, set, frozenset, range)):
        raise BadInput(f"{what} {values!r}: a list of port numbers, e.g. [1, 2] (empty: remove the MLID)")
    return [_number(v, what[:-1] if what.endswith("s") else what) for v in values]


SWITCH_ONLY = {"switchinfo", "lft", "rft", "mft"}  # attributes only a switch's SMA has
PORT_ATTRIBUTES = {"portinfo", "pkeys", "sl2vl", "vlarb"}  # addressed per port (``port``)


def _node_refuses(t: Transport, tgt: Target, attribute: str, port: int | None, in_port: int | None) -> str | None:
    """Why the node at ``tgt`` refused a query, when its NodeInfo shows the caller asked
    for something it does not have (a switch attribute of a CA, a port beyond its
    NumPorts): the message of a BadInput; None when the refusal is the node's own."""
    from mad.attributes import AttrID, NodeInfo, NodeType
    from mad.header import Method
    try:
        ni = t.query(tgt.request(Method.GET, AttrID.NODE_INFO)).attribute()
    except SmagentError:
        return None
    if not isinstance(ni, NodeInfo):
        return None
    is_switch = ni.node_type == NodeType.SWITCH
    kinds: dict[int, str] = {NodeType.SWITCH: "a switch", NodeType.CA: "a channel adapter", NodeType.ROUTER: "a router"}
    kind = kinds.get(ni.node_type, f"a node of type {ni.node_type}")
    if attribute in SWITCH_ONLY and not is_switch:
        return f"{attribute}: {tgt.describe()} is {kind} (GUID {ni.node_guid:#018x}); only switches have it"
    ports = "0.." if is_switch else "1.."
    for name, value in (("port", port), ("in-port", in_port)):
        if attribute in PORT_ATTRIBUTES and value is not None and value > ni.num_ports:
            return (f"{attribute}: {name} {value}: {tgt.describe()} is {kind} with {ni.num_ports} ports "
                    f"({ports}{ni.num_ports})")
    return None


def _decoded(value: A) -> A:
    """The attribute as the API returns it: a PortInfo's coded fields as enums
    (`mad.codes.FIELD_ENUMS`: ``port_state`` a `PortState`, MTUs `Mtu`, VLs `Vls`, widths
    `LinkWidth`, speeds `LinkSpeed`; IntEnums: ``== 4`` still holds; a reserved value stays
    an int)."""
    if isinstance(value, PortInfo):
        for field in codes.FIELD_ENUMS:
            setattr(value, field, codes.as_enum(field, getattr(value, field)))
    return value


def sweep_options(desired: Any = None, *, lmc: int | None = None, lid_file: PathArg | None = None,
                  routing: str | None = None, more: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `smagent.sweep.SweepOptions` fields of a sweep, plan or apply (the CLI's plan
    and apply call the session, so this is their path too): ``desired`` as
    `smagent.sweep.desired.coerce` takes it, its settings as `smagent.sweep.desired.sweep_settings`
    rules (its keys win over the defaults; a contradicting keyword is BadInput), and
    ``more``, where an unknown keyword is BadInput."""
    from smagent.sweep import desired as desiredmod
    from smagent import sweep as sweepmod
    out = dict(more or {})
    fields = {f.name for f in dataclasses.fields(sweepmod.SweepOptions)}
    unknown = sorted(set(out) - (fields - {"dry_run", "force", "desired"}))
    if unknown:
        raise BadInput(f"sweep() got unknown keyword(s) {', '.join(unknown)}: the options are "
                       f"{', '.join(sorted(fields))}")
    if isinstance(out.get("partitions"), (str, os.PathLike)):  # a partitions.conf path: read before any SMP
        from smagent.config import partitions
        out["partitions"] = partitions.load(out["partitions"])
    if isinstance(out.get("qos_policy"), (str, os.PathLike)):  # a QoS policy path: read before any SMP
        from smagent.config import qospolicy
        out["qos_policy"] = qospolicy.load(out["qos_policy"])
    out.update(desiredmod.sweep_settings(desiredmod.coerce(desired), lmc=lmc, lid_file=lid_file, routing=routing))
    problem = fw.lmc_problem(out["lmc"], "lmc")
    if problem:
        raise BadInput(problem)
    return out


def _query_request(attribute: str, tgt: Target, **kw: Any) -> Request:
    from smagent.discovery import targets
    try:  # the codec's limits (block, port, hop count) are the caller's input here
        return targets.build_query(attribute, tgt, **kw)
    except MadError as e:
        raise BadInput(str(e)) from None


def check_query(attribute: str, target: TargetArg, *, port: int | None = None, block: int | None = None,
                position: int | None = None, ext_speeds: bool = False, in_port: int | None = None) -> Target | None:
    """Check a query's arguments with no fabric at hand (BadInput for the first problem).
    Returns the Target, or None when it is a GUID or a description (found by discovery)."""
    from smagent.discovery import targets
    if attribute not in targets.QUERY_ATTRIBUTES:
        raise BadInput(f"unknown attribute {attribute!r}: one of {', '.join(sorted(targets.QUERY_ATTRIBUTES))}")
    kw = dict(port=port, block=block, position=position, ext_speeds=ext_speeds, in_port=in_port)
    try:
        tgt = targets.parse_target(target_text(target))
    except targets.NeedsDiscovery:
        _query_request(attribute, targets.Target(path=(0,)), **kw)  # the rest, checked now
        return None
    except MadError as e:
        raise BadInput(str(e)) from None
    _query_request(attribute, tgt, **kw)
    return tgt


def _mft_blocks(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= fw.MFT_BLOCKS:
        raise BadInput(f"mft_blocks: {n!r}: expected a number of MFT blocks, 1..{fw.MFT_BLOCKS}")
    return n


def _failure(text: str, topology: Topology, what: str = "--fail") -> Any:
    """``NODE`` or ``NODE[PORT]`` (a cable by one of its ends) -> a `whatif.Failure`."""
    from smagent.sweep import drain as drainmod
    return drainmod.target(text, topology, what)


def connect(transport: str = "sim", *, topology: PathArg | None = None, fixture: PathArg | None = None,
            ca: str | None = None, port: int | None = None, record: PathArg | None = None,
            window: int = DEFAULT_WINDOW, timeout_ms: int = DEFAULT_TIMEOUT_MS, retries: int = DEFAULT_RETRIES,
            m_key: int = 0, m_key_file: PathArg | None = None, state_dir: PathArg | None = None,
            classes: Sequence[Any] = (), node_name_map: Any = None) -> Session:
    """Open a session. ``transport``: "sim" (in-process simulator; ``topology`` a net file,
    default the bundled one), "umad" (live, ``ca``/``port``), or "replay" (``fixture``).
    ``m_key``: the M_Key for every SMP; ``m_key_file``: keys per node GUID (format in
    `smagent.config.mkeys`; a bad file raises BadInput naming file:line). ``state_dir``: where
    table writes save what they overwrite and journal (None: no backups). ``classes``: GMP
    classes umad registers besides SMPs (`smagent.transport.umad.PERF_CLIENT` for counters)."""
    t = open_transport(transport, ca=ca, port=port, topology=topology, fixture=fixture, record=record,
                       window=window, timeout_ms=timeout_ms, retries=retries, m_key=m_key, m_key_file=m_key_file,
                       classes=list(classes) if transport == "umad" else (), node_name_map=node_name_map)
    return Session(t, state_dir=state_dir)
