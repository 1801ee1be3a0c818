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

from mad.errors import MadError
from smagent.errors import BadInput, FabricFailure, SafetyRefusal, SmagentError, after_sets
from smagent.transport import DEFAULT_RETRIES, DEFAULT_TIMEOUT_MS, DEFAULT_WINDOW, open_transport

__all__ = ["connect", "check_query", "Session", "SmagentError", "BadInput", "FabricFailure", "SafetyRefusal"]


class Session:
    """One open transport and what has been learnt through it."""

    def __init__(self, transport):
        self.transport = transport
        self.topology = None

    # -- context manager ---------------------------------------------------------------
    def close(self) -> None:
        self.transport.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def stats(self) -> dict:
        """SMPs sent/received, retries, timeouts, per attribute and method."""
        return self.transport.stats.snapshot()

    # -- operations ------------------------------------------------------------------
    def discover(self):
        """Directed-route discovery. Returns a `smagent.discovery.Topology`."""
        from smagent import discovery
        self.topology = discovery.discover(self.transport)
        return self.topology

    def query(self, attribute: str, target: str, *, port=None, block=None, position=None,
              ext_speeds=False, in_port=None):
        """Read one attribute (nodeinfo, nodedesc, portinfo, switchinfo, sminfo, lft, rft,
        mft, pkeys, sl2vl, vlarb) from a LID, a DR path, a node GUID or a node description.
        Returns the decoded attribute (a dataclass with the IBA snake_case names)."""
        return self.query_reply(attribute, target, port=port, block=block, position=position,
                                ext_speeds=ext_speeds, in_port=in_port)[1].attribute()

    def query_reply(self, attribute: str, target: str, *, port=None, block=None, position=None,
                    ext_speeds=False, in_port=None):
        """`query`, returning ``(Target, response SMP)``: the resolved target and the whole
        answer (attribute name, modifier). Every argument is checked before the first SMP
        (a GUID or description is then found by discovery: Gets only)."""
        from smagent import targets
        kw = dict(port=port, block=block, position=position, ext_speeds=ext_speeds, in_port=in_port)
        tgt = check_query(attribute, target, **kw)
        if tgt is None:
            tgt = targets.resolve_target(target, self.transport, topology=self.topology)
        return tgt, self.transport.query(_query_request(attribute, tgt, **kw))

    def sweep(self, *, dry_run: bool = False, lmc: int = 0, lid_file=None, routing: str = "minhop",
              force: bool = False, **more):
        """Discover, assign LIDs, route, program and activate (or, with ``dry_run``, plan
        only). Returns a `smagent.sweep.SweepResult` (`.summary()`, `.plan_lines()`)."""
        from smagent import sweep as sweepmod
        if not 0 <= lmc <= 7:
            raise BadInput(f"--lmc {lmc}: the LMC is 0..7")
        opts = sweepmod.SweepOptions(lmc=lmc, lid_file=lid_file, routing=routing, dry_run=dry_run,
                                     force=force, **more)
        before = dict(self.transport.stats.by_kind)
        try:
            result = sweepmod.sweep(self.transport, opts)
        except (BadInput, FabricFailure) as e:  # once Sets went out, the error says which
            err = after_sets(e, self.transport.stats.sets_sent(since=before))
            if err is e:
                raise
            raise err from e
        self.topology = result.topology
        return result

    def plan(self, **kw):
        """The plan of a sweep: every Get, no Set (same as ``sweep(dry_run=True)``)."""
        return self.sweep(dry_run=True, **kw)

    def verify(self, *, mcast: bool = True, examples: int = 5):
        """Trace every source to every destination on the tables the switches hold.
        Returns a `smagent.verify.Report` (``.ok``, ``.defects``, ``.as_json()``)."""
        from smagent import verify as verifymod
        return verifymod.verify(self.transport, mcast=mcast, examples=examples)


def _query_request(attribute, tgt, **kw):
    from smagent import targets
    try:  # the codec's limits (block, port, hop count) are the caller's input here
        return targets.build_query(attribute, tgt, **kw)
    except MadError as e:
        raise BadInput(str(e)) from None


def check_query(attribute: str, target: str, *, port=None, block=None, position=None, ext_speeds=False,
                in_port=None):
    """Check a query's arguments with no fabric at hand (BadInput for the first problem).
    Returns the Target, or None when it is a GUID or a description (found by discovery)."""
    from smagent import targets
    if attribute not in targets.QUERY_ATTRIBUTES:
        raise BadInput(f"unknown attribute {attribute!r}: one of {', '.join(sorted(targets.QUERY_ATTRIBUTES))}")
    kw = dict(port=port, block=block, position=position, ext_speeds=ext_speeds, in_port=in_port)
    try:
        tgt = targets.parse_target(target)
    except targets.NeedsDiscovery:
        _query_request(attribute, targets.Target(path=(0,)), **kw)  # the rest, checked now
        return None
    except MadError as e:
        raise BadInput(str(e)) from None
    _query_request(attribute, tgt, **kw)
    return tgt


def connect(transport: str = "sim", *, topology=None, fixture=None, ca=None, port=None, record=None,
            window: int = DEFAULT_WINDOW, timeout_ms: int = DEFAULT_TIMEOUT_MS, retries: int = DEFAULT_RETRIES,
            m_key: int = 0, m_key_file=None) -> Session:
    """Open a session. ``transport``: "sim" (in-process simulator; ``topology`` a net file,
    default the bundled one), "umad" (live, ``ca``/``port``), or "replay" (``fixture``).
    ``m_key``: the M_Key for every SMP; ``m_key_file``: keys per node GUID (format in
    `smagent.mkeys`; a bad file raises BadInput naming file:line)."""
    t = open_transport(transport, ca=ca, port=port, topology=topology, fixture=fixture, record=record,
                       window=window, timeout_ms=timeout_ms, retries=retries, m_key=m_key, m_key_file=m_key_file)
    return Session(t)
