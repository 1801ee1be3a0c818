"""Where a sweep's planning reads the fabric from: a `TableSource`.

`LiveTables` discovers the fabric, asks the other SMs and reads the tables (a sweep, a
plan); `KnownTables` answers from the subnet model an earlier sweep left
(`model.subnet.Subnet`; the running SM's repairs, after they patched a fork of it): no
discovery, no SM check, no table read, and no plan check, so that it reacts at once; the
sweep plans on a fork of its topology, so the model it was handed stays as it was. The
phases ask the source and never which one it is.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Protocol

from smagent import discovery
from smagent.discovery import smcheck
from smagent.fdb import lft as linear
from smagent.fdb import mft as mfttab
from smagent.fdb.switch import failed_units_lines
from smagent.model.subnet import LftBlocks
from smagent.transport.base import Transport

if TYPE_CHECKING:
    from smagent.model.subnet import Subnet
    from smagent.sweep.options import SweepOptions
    from smagent.sweep.result import PortChange


class TableSource(Protocol):
    checks_plan: bool  # whether the planned tables are checked before the first Set (smagent.sweep.plancheck)

    def topology(self, transport: Transport) -> discovery.Topology:
        """The fabric to plan on."""

    def other_sms(self, transport: Transport, topo: discovery.Topology, *, force: bool) -> list[str]:
        """Notes on the other SMs; OtherMasterSM while one is MASTER (unless ``force``)."""

    def lft_tables(self, transport: Transport, wanted: list) -> tuple[LftBlocks, list[str]]:
        """The LFT blocks of ``wanted`` [(switch, path, how many blocks from block 0)], as
        whole tables, and the errors of those missing, in the order of their blocks."""

    def mft_units(self, transport: Transport, wanted: list) -> tuple[dict, list[str]]:
        """MFT units {(switch, block, position): masks} of ``wanted`` [(switch, path,
        block, position)], and the errors of those missing, in their order."""

    def link_nodes(self, port_changes: list[PortChange]) -> set[int] | None:
        """GUIDs of the nodes whose link tables are read (None: every node)."""


class LiveTables:
    """The fabric as it answers now; ``discovered``: a walk the caller just made of it
    (`SweepOptions.discovered`), handed out once instead of walking again."""
    checks_plan = True

    def __init__(self, discovered: discovery.Topology | None = None):
        self.discovered = discovered

    def topology(self, transport: Transport) -> discovery.Topology:
        topo, self.discovered = self.discovered, None
        return topo if topo is not None else discovery.discover(transport)

    def other_sms(self, transport: Transport, topo: discovery.Topology, *, force: bool) -> list[str]:
        return smcheck.check_other_sms(transport, topo, force=force)

    def lft_tables(self, transport: Transport, wanted: list) -> tuple[LftBlocks, list[str]]:
        got, errors = linear.read_lft_blocks(transport, lft_units(wanted))
        return LftBlocks.of(got), errors

    def mft_units(self, transport: Transport, wanted: list) -> tuple[dict, list[str]]:
        return mfttab.read_mft_units(transport, wanted)

    def link_nodes(self, port_changes: list[PortChange]) -> set[int] | None:
        return None


class KnownTables:
    """What our own earlier sweeps left (the subnet model): a unit it does not hold is
    unknown, hence written."""
    checks_plan = False

    def __init__(self, known: Subnet):
        self.known = known

    def topology(self, transport: Transport) -> discovery.Topology:
        return self.known.fork().topology  # the sweep changes what it plans on; the model stays

    def other_sms(self, transport: Transport, topo: discovery.Topology, *, force: bool) -> list[str]:
        return []  # a repair: the running SM knows the other SMs

    def lft_tables(self, transport: Transport, wanted: list) -> tuple[LftBlocks, list[str]]:
        # the model's own tables, each cut to the blocks wanted only where it is longer
        return self.known.lft_blocks.cut({g: n for g, _p, n in wanted}), []

    def mft_units(self, transport: Transport, wanted: list) -> tuple[dict, list[str]]:
        known = self.known.mft
        return {(g, b, p): list(known[(g, b, p)]) for g, _path, b, p in wanted if (g, b, p) in known}, []

    def link_nodes(self, port_changes: list[PortChange]) -> set[int] | None:
        # the tables of the nodes whose ports come up again, and of those whose tables got no answer
        return {c.guid for c in port_changes if c.arm} | self.known.link_tables_unknown


def table_source(opts: SweepOptions) -> TableSource:
    return LiveTables(opts.discovered) if opts.known is None else KnownTables(opts.known)


def lft_units(wanted: list) -> list[tuple]:
    """(switch, path, block) of every block of ``wanted`` [(switch, path, how many blocks)]."""
    return [(g, p, b) for g, p, n in wanted for b in range(n)]


def read_failures(topo: discovery.Topology, wanted: list, current: Mapping, errors: list[str],
                  unit: str) -> list[tuple]:
    """The errors of a table read, one line per switch (a switch that stopped answering is
    one report, not one per block), with the units it covers: [(line, {(switch, *unit)})].
    ``errors`` come in the order of the units of ``wanted`` missing from ``current``."""
    if not errors:
        return []  # nothing missing (a repair's known tables): no pass over every unit
    by: dict = {}
    for w, e in zip([w for w in wanted if (w[0], *w[2:]) not in current], errors):
        by.setdefault(w[0], []).append((w, e))
    name = topo.nodes
    return [(failed_units_lines([(name[g].description, " position ".join(map(str, w[2:])), e, e)
                                 for w, e in items], unit)[0], {(g, *w[2:]) for w, _e in items})
            for g, items in by.items()]
