"""The scripting face of smagent: a session on one fabric, typed results, typed errors.

    import smagent
    with smagent.connect(transport="sim") as fabric:
        topo = fabric.discover()
        plan = fabric.sweep(dry_run=True)      # every Get, no Set
        print(plan.sets_planned, plan.plan_lines()[:3])
        fabric.sweep()                         # bring it up
        print(fabric.query("portinfo", "0,1", port=1).lid)

Errors raised by a session are subclasses of `SmagentError`: `BadInput` (the caller's
input was refused and nothing was sent; the CLI exits 2), `FabricFailure` (the fabric or
the transport failed; exit 3). The CLI is a thin layer over this module.
"""
from __future__ import annotations

from mad.errors import MadError
from smagent.transport import DEFAULT_RETRIES, DEFAULT_TIMEOUT_MS, DEFAULT_WINDOW, TransportError, open_transport


class SmagentError(Exception):
    """Base of the errors a session raises."""
    exit_code = 1


class BadInput(SmagentError, ValueError):
    """Input refused before anything was sent."""
    exit_code = 2


class FabricFailure(SmagentError, RuntimeError):
    """The fabric or the transport failed."""
    exit_code = 3


def _translate(fn, *a, **kw):
    from smagent.lids import LidError, LidFileError
    from smagent.sweep import SweepError
    try:
        return fn(*a, **kw)
    except SmagentError:
        raise
    except (TransportError, SweepError) as e:
        raise FabricFailure(str(e)) from e
    except (LidError, LidFileError, MadError, ValueError, OSError) as e:
        raise BadInput(str(e)) from e
    except RuntimeError as e:  # libibumad: missing, no device, permission
        raise FabricFailure(str(e)) from e


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
        self.topology = _translate(discovery.discover, self.transport)
        return self.topology

    def query(self, attribute: str, target: str, *, port=None, block=None, position=None,
              ext_speeds=False):
        """Read one attribute (nodeinfo, nodedesc, portinfo, switchinfo, sminfo, lft, rft,
        mft, pkeys, sl2vl) from a LID, a DR path, a node GUID or a node description.
        Returns the decoded attribute (a dataclass with the IBA snake_case names)."""
        from smagent import targets

        def run():
            try:
                tgt = targets.parse_target(target)
            except targets.NeedsDiscovery:
                tgt = targets.resolve_target(target, self.transport, topology=self.topology)
            req = targets.build_query(attribute, tgt, port=port, block=block, position=position,
                                      ext_speeds=ext_speeds)
            return self.transport.query(req).attribute()
        if attribute not in targets.QUERY_ATTRIBUTES:
            raise BadInput(f"unknown attribute {attribute!r}: one of {', '.join(sorted(targets.QUERY_ATTRIBUTES))}")
        return _translate(run)

    def sweep(self, *, dry_run: bool = False, lmc: int = 0, lid_file=None, routing: str = "minhop",
              force: bool = False, **more):
        """Discover, assign LIDs, route, program and activate (or, with ``dry_run``, plan
        only). Returns a `smagent.sweep.SweepResult` (`.summary()`, `.plan_lines()`)."""
        from smagent import sweep as sweepmod
        if not 0 <= lmc <= 7:
            raise BadInput(f"lmc {lmc}: the LMC is 0..7")
        opts = sweepmod.SweepOptions(lmc=lmc, lid_file=lid_file, routing=routing, dry_run=dry_run,
                                     force=force, **more)
        result = _translate(sweepmod.sweep, self.transport, opts)
        self.topology = result.topology
        return result

    def plan(self, **kw):
        """The plan of a sweep: every Get, no Set (same as ``sweep(dry_run=True)``)."""
        return self.sweep(dry_run=True, **kw)

    def verify(self):
        """Trace every source to every destination on the tables the switches hold."""
        from smagent import verify as verifymod
        return _translate(verifymod.verify, self.transport)


def connect(transport: str = "sim", *, topology=None, fixture=None, ca=None, port=None, record=None,
            window: int = DEFAULT_WINDOW, timeout_ms: int = DEFAULT_TIMEOUT_MS, retries: int = DEFAULT_RETRIES,
            m_key: int = 0, m_key_file=None) -> Session:
    """Open a session. ``transport``: "sim" (in-process simulator; ``topology`` a net file,
    default the bundled one), "umad" (live, ``ca``/``port``), or "replay" (``fixture``).
    ``m_key``: the M_Key for every SMP; ``m_key_file``: keys per node GUID (format in
    `smagent.mkeys`; a bad file raises BadInput naming file:line)."""
    t = _translate(open_transport, transport, ca=ca, port=port, topology=topology, fixture=fixture,
                   record=record, window=window, timeout_ms=timeout_ms, retries=retries, m_key=m_key,
                   m_key_file=m_key_file)
    return Session(t)
