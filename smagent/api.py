"""The scripting face of smagent: a session on one fabric, typed results, typed errors.

    import smagent
    with smagent.connect(transport="sim") as fabric:
        topo = fabric.discover()
        plan = fabric.sweep(dry_run=True)      # every Get, no Set
        print(plan.sets_planned, plan.plan_lines()[:3])
        fabric.sweep()                         # bring it up
        print(fabric.query("portinfo", "0,1", port=1).lid)

Errors raised by a session are subclasses of `SmagentError` (`smagent.errors`), each
carrying its exit code: `BadInput` (the caller's input was refused and nothing was sent;
the CLI exits 2), `FabricFailure` (the fabric or the transport failed; exit 3; ``changed``
lists the Sets already sent), `SafetyRefusal` (another SM is MASTER; exit 4). Any other
exception is a bug. The CLI is a thin layer over this module.
"""
from __future__ import annotations

import dataclasses

from mad import forwarding as fw
from mad.errors import MadError
from smagent.errors import BadInput, FabricFailure, SafetyRefusal, SmagentError, after_sets
from smagent.fdb import ops
from smagent.fdb.ops import LftTable, MftTable, RftEntry, RftTable, WriteResult
from smagent.transport import DEFAULT_RETRIES, DEFAULT_TIMEOUT_MS, DEFAULT_WINDOW, open_transport

__all__ = ["connect", "check_query", "Session", "SessionClosed", "ApplyResult", "LftTable", "MftTable", "RftEntry",
           "RftTable", "WriteResult", "SmagentError", "BadInput", "FabricFailure", "SafetyRefusal"]


class SessionClosed(BadInput):
    """A call on a session after `Session.close` (nothing was sent)."""


@dataclasses.dataclass
class ApplyResult:
    """What `Session.apply` did: ``result`` the sweep that wrote the desired state,
    ``left_after_apply`` the plan lines of a fresh plan afterwards (empty: it holds)."""
    result: object  # smagent.sweep.SweepResult
    left_after_apply: list[str]

    @property
    def ok(self) -> bool:
        """No write problem, nothing unreachable, nothing left to change."""
        return not (self.result.problems or self.result.topology.unreachable or self.left_after_apply)


class Session:
    """One open transport and what has been learnt through it. ``state_dir``: where table
    writes save what they overwrite and keep their journal (None: no backups)."""

    def __init__(self, transport, *, state_dir=None):
        self.transport = transport
        self.topology = None
        self.state_dir = state_dir
        self.closed = False

    # -- context manager ---------------------------------------------------------------
    def close(self) -> None:
        """Close the transport; every later call raises `SessionClosed`."""
        if not self.closed:
            self.closed = True
            self.transport.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _open(self):
        if self.closed:
            raise SessionClosed("this session is closed: open a new one with smagent.connect()")
        return self.transport

    @property
    def stats(self) -> dict:
        """SMPs sent/received, retries, timeouts, per attribute and method."""
        return self._open().stats.snapshot()

    # -- operations ------------------------------------------------------------------
    def discover(self):
        """Directed-route discovery. Returns a `smagent.discovery.Topology`."""
        from smagent import discovery
        self.topology = discovery.discover(self._open())
        return self.topology

    def query(self, attribute: str, target, *, port=None, block=None, position=None,
              ext_speeds=False, in_port=None):
        """Read one attribute (nodeinfo, nodedesc, portinfo, switchinfo, sminfo, lft, rft,
        mft, pkeys, sl2vl, vlarb) from a LID (an int or text), a DR path (a tuple or
        "0,1,3"), a node GUID or a node description. Returns the decoded attribute (a
        dataclass with the IBA snake_case names)."""
        return self.query_reply(attribute, target, port=port, block=block, position=position,
                                ext_speeds=ext_speeds, in_port=in_port)[1].attribute()

    def query_reply(self, attribute: str, target, *, port=None, block=None, position=None,
                    ext_speeds=False, in_port=None):
        """`query`, returning ``(Target, response SMP)``: the resolved target and the whole
        answer (attribute name, modifier). Every argument is checked before the first SMP
        (a GUID or description is then found by discovery: Gets only)."""
        from smagent import targets
        t = self._open()
        kw = dict(port=port, block=block, position=position, ext_speeds=ext_speeds, in_port=in_port)
        tgt = check_query(attribute, target, **kw)
        if tgt is None:
            tgt = targets.resolve_target(target_text(target), t, topology=self.topology)
        return tgt, t.query(_query_request(attribute, tgt, **kw))

    def sweep(self, *, dry_run: bool = False, lmc: int = 0, lid_file=None, routing: str = "minhop",
              force: bool = False, **more):
        """Discover, assign LIDs, route, program and activate (or, with ``dry_run``, plan
        only). Further keywords are `smagent.sweep.SweepOptions` fields (an unknown one is
        BadInput). Returns a `smagent.sweep.SweepResult` (`.summary()`, `.plan_lines()`)."""
        from smagent import sweep as sweepmod
        t = self._open()
        if not 0 <= lmc <= 7:
            raise BadInput(f"--lmc {lmc}: the LMC is 0..7")
        known = {f.name for f in dataclasses.fields(sweepmod.SweepOptions)}
        unknown = sorted(set(more) - known)
        if unknown:
            raise BadInput(f"sweep() got unknown keyword(s) {', '.join(unknown)}: the options are "
                           f"{', '.join(sorted(known))}")
        opts = sweepmod.SweepOptions(lmc=lmc, lid_file=lid_file, routing=routing, dry_run=dry_run,
                                     force=force, **more)
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

    def plan(self, desired=None, *, force: bool = False, **kw):
        """The plan of a sweep: every Get, no Set. ``desired``: a desired-state file (YAML
        or JSON path) or a parsed `smagent.desired.DesiredState`; its routing, LMC and LID
        file are used. Without it, ``sweep(dry_run=True, **kw)``."""
        if desired is None:
            return self.sweep(dry_run=True, force=force, **kw)
        return self.sweep(**_desired_options(desired), dry_run=True, force=force, **kw)

    def apply(self, desired, *, force: bool = False, state_dir=None) -> ApplyResult:
        """Make the fabric hold a desired state (a path or a DesiredState), then plan again:
        ``left_after_apply`` must be empty. Another MASTER SM: SafetyRefusal unless ``force``."""
        opts = dict(_desired_options(desired), force=force)
        r = self.sweep(**opts, state_dir=state_dir if state_dir is not None else self.state_dir)
        left = self.sweep(**opts, dry_run=True)
        return ApplyResult(r, left.plan_lines())

    def verify(self, *, mcast: bool = True, examples: int = 5):
        """Trace every source to every destination on the tables the switches hold.
        Returns a `smagent.verify.Report` (``.ok``, ``.defects``, ``.as_json()``)."""
        from smagent import verify as verifymod
        return verifymod.verify(self._open(), mcast=mcast, examples=examples)

    # -- forwarding tables (smagent.fdb.ops) -----------------------------------------------
    def target(self, switch):
        """A switch argument as a `smagent.targets.Target`: a LID, a DR path, a node GUID
        or a node description (those two through discovery: Gets only)."""
        from smagent import targets
        t = self._open()
        text = target_text(switch)
        try:
            return targets.parse_target(text)
        except targets.NeedsDiscovery:
            return targets.resolve_target(text, t, topology=self.topology)
        except MadError as e:
            raise BadInput(str(e)) from None

    def lft_show(self, switch) -> ops.LftTable:
        """One switch's LFT (LIDs 0..LinearFDBTop), as ``ibroute -n`` reads it."""
        return ops.lft_show(self._open(), self.target(switch))

    def lft_set(self, switch, lid: int, port: int, *, dry_run: bool = False, force: bool = False) -> ops.WriteResult:
        """Route LID out of PORT on SWITCH (255: no route); LinearFDBTop is raised if needed.
        Refused (SafetyRefusal) while another SM is MASTER, unless ``force``."""
        ops.check_lft_args(lid, port)
        return ops.lft_set(self._open(), self.target(switch), lid, port, dry_run=dry_run, force=force,
                           state_dir=self.state_dir)

    def _fresh(self, topology):
        """The topology to read on: the one given, else a fresh discovery (a sweep changes
        LIDs and LinearFDBTop, so an older topology would read the wrong blocks)."""
        self._open()
        return topology if topology is not None else self.discover()

    def read_lfts(self, topology=None) -> dict[int, bytes]:
        """Every switch's LFT (LIDs 0..LinearFDBTop), all blocks in one windowed batch:
        {switch GUID: table bytes}. On ``topology`` (a `discover()` result: a monitor
        reuses it), else on a fresh discovery."""
        from smagent.fdb import linear, text
        return linear.read_all(self.transport, text.dump_order(self._fresh(topology)))

    def lft_dump(self, dump_all: bool = False, *, topology=None) -> str:
        """Every switch's LFT as ``dump_lfts`` prints it (what `lft_load` and OpenSM's
        ``-R file -U`` read), ``dump_all``: also LIDs without a valid port. On ``topology``,
        else on a fresh discovery."""
        from smagent.fdb import text
        topo = self._fresh(topology)
        return "\n".join(text.format_lft_dump(topo, self.read_lfts(topo), dump_all=dump_all)) + "\n"

    def lft_load(self, path_or_text: str, *, dry_run: bool = False, force: bool = False) -> ops.WriteResult:
        """Load a dump (a file path, or the text itself) and write the blocks that differ.
        Each section is its switch's whole table; every problem is BadInput, nothing sent."""
        return ops.lft_load(self._open(), path_or_text, dry_run=dry_run, force=force, state_dir=self.state_dir,
                            discover=lambda _t: self.discover())

    def lft_backup(self) -> str:
        """Every switch's LFT in the ``lft dump`` format (restore it with `lft_restore`)."""
        from smagent.fdb import backup
        text, self.topology = backup.backup_lfts(self._open())
        return text

    def lft_restore(self, path, *, dry_run: bool = False, force: bool = False) -> ops.WriteResult:
        """Write back a dump or a block backup saved before an apply (forwarding table
        blocks, SwitchInfo fields, SL2VL/VLArb/P_Key tables): only what differs."""
        return ops.lft_restore(self._open(), str(path), dry_run=dry_run, force=force, state_dir=self.state_dir,
                               discover=lambda _t: self.discover())

    def mft_show(self, switch) -> ops.MftTable:
        """One switch's MFT (``.groups()``: {mlid: ports})."""
        return ops.mft_show(self._open(), self.target(switch))

    def mft_set(self, switch, mlid: int, ports, *, dry_run: bool = False, force: bool = False) -> ops.WriteResult:
        """Make PORTS the whole port set of MLID on SWITCH (no ports: remove the MLID)."""
        ops.check_mft_args(mlid, ports)
        return ops.mft_set(self._open(), self.target(switch), mlid, ports, dry_run=dry_run, force=force,
                           state_dir=self.state_dir)

    def read_mfts(self, topology=None) -> dict[int, dict[tuple[int, int], list[int]]]:
        """Every switch's MFT up to MulticastFDBTop, all units in one windowed batch:
        {switch GUID: {(block, position): [32 PortMasks]}}. On ``topology``, else on a
        fresh discovery."""
        from smagent.fdb import multicast as mfttab
        from smagent.fdb.switch import TableFailure
        sws = [n for n in self._fresh(topology).switches() if n.switch_info is not None]
        t = self.transport
        wanted = [(n.guid, n.path, b, p) for n in sws
                  for b in mfttab.mft_blocks_to_read(n.switch_info.multicast_fdb_cap, n.switch_info.multicast_fdb_top)
                  for p in range(fw.mft_positions_for(n.num_ports))]
        got, errors = mfttab.read_mft_units(t, wanted)
        if errors:
            raise TableFailure("reading MFTs: " + "; ".join(errors[:5]))
        out: dict = {n.guid: {} for n in sws}
        for (g, b, p), masks in got.items():
            out[g][(b, p)] = masks
        return out

    def read_portinfos(self, topology=None) -> dict[tuple[int, int], object]:
        """PortInfo of every port of every node (a switch: 0..NumPorts), one windowed batch:
        {(node GUID, port): PortInfo}. Ports that do not answer are left out. On
        ``topology``, else on a fresh discovery."""
        from mad import smp as smpcodec
        from mad.attributes import AttrID
        from mad.header import Method
        from smagent.transport.base import Request
        topo = self._fresh(topology)
        t = self.transport
        keys, reqs = [], []
        for n in topo.nodes.values():
            ports = range(n.num_ports + 1) if n.is_switch else sorted(n.port_paths)
            for p in ports:
                path = n.path if n.is_switch else n.port_paths[p]
                keys.append((n.guid, p))
                reqs.append(Request(smpcodec.dr(Method.GET, AttrID.PORT_INFO, path, fw.portinfo_modifier(p))))
        return {k: r.value() for k, r in zip(keys, t.execute(reqs)) if r.ok}

    def rft_show(self, switch) -> ops.RftTable:
        """One switch's valid RFT entries (BadInput for a switch without an RFT)."""
        return ops.rft_show(self._open(), self.target(switch))

    def rft_set(self, switch, lid: int, port: int, *, lmc: int = 0, dry_run: bool = False,
                force: bool = False) -> ops.WriteResult:
        """LIDs LID..LID+2^LMC-1 out of PORT on SWITCH's RFT (255 removes them)."""
        ops.check_rft_args(lid, port, lmc)
        return ops.rft_set(self._open(), self.target(switch), lid, port, lmc=lmc, dry_run=dry_run, force=force,
                           state_dir=self.state_dir)


def _desired_options(desired) -> dict:
    """The sweep options of a desired state: a file path (read and checked before any SMP)
    or a parsed DesiredState."""
    from smagent import desired as desiredmod
    ds = desired if isinstance(desired, desiredmod.DesiredState) else desiredmod.load(desired)
    return dict(lmc=ds.lmc, lid_file=ds.lid_file, routing=ds.routing, desired=ds)


def target_text(target) -> str:
    """A target as text: an int is a LID, a tuple or list of ints a DR path."""
    if isinstance(target, bool):
        raise BadInput(f"target {target!r}: a LID, a DR path, a node GUID or a node description")
    if isinstance(target, int):
        return str(target)
    if isinstance(target, (tuple, list)) and all(isinstance(x, int) for x in target):
        return ",".join(map(str, target))
    if isinstance(target, str):
        return target
    raise BadInput(f"target {target!r}: a LID, a DR path, a node GUID or a node description")


def _query_request(attribute, tgt, **kw):
    from smagent import targets
    try:  # the codec's limits (block, port, hop count) are the caller's input here
        return targets.build_query(attribute, tgt, **kw)
    except MadError as e:
        raise BadInput(str(e)) from None


def check_query(attribute: str, target, *, port=None, block=None, position=None, ext_speeds=False,
                in_port=None):
    """Check a query's arguments with no fabric at hand (BadInput for the first problem).
    Returns the Target, or None when it is a GUID or a description (found by discovery)."""
    from smagent import targets
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


def connect(transport: str = "sim", *, topology=None, fixture=None, ca=None, port=None, record=None,
            window: int = DEFAULT_WINDOW, timeout_ms: int = DEFAULT_TIMEOUT_MS, retries: int = DEFAULT_RETRIES,
            m_key: int = 0, m_key_file=None, state_dir=None) -> Session:
    """Open a session. ``transport``: "sim" (in-process simulator; ``topology`` a net file,
    default the bundled one), "umad" (live, ``ca``/``port``), or "replay" (``fixture``).
    ``m_key``: the M_Key for every SMP; ``m_key_file``: keys per node GUID (format in
    `smagent.mkeys`; a bad file raises BadInput naming file:line). ``state_dir``: where
    table writes save what they overwrite and journal (None: no backups)."""
    t = open_transport(transport, ca=ca, port=port, topology=topology, fixture=fixture, record=record,
                       window=window, timeout_ms=timeout_ms, retries=retries, m_key=m_key, m_key_file=m_key_file)
    return Session(t, state_dir=state_dir)
