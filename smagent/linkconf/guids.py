"""Alias GUIDs into the ports' GUIDInfo blocks (IBA 14.2.5.5), as OpenSM's GUID manager
writes what its SA was asked (GUIDInfoRecord Set and Delete: `smagent.sa.aliases`).

`SweepOptions.alias_guids` (the running SM's SA hands it what it holds): port GUID ->
{block: its 8 GUIDs}, every block an alias was ever set in or deleted from. Each such
block is read and diffed like any table unit, and one that differs is written through
the one apply path (`smagent.fdb.apply`: backed up, journalled, read back). GUID 0 of
block 0 is the port GUID, read only: left as the port holds it (`Want.desired`).

A port that refuses the Get or the Set as unsupported (ibsim 0.10 answers only the Get;
a port without alias GUIDs may do the same) is no problem: its aliases stay the SA's
alone (PathRecords and GUIDInfoRecords answer by them all the same). Its port GUID is
reported (`SweepResult.guids_refused`, one note) so that the running SM stops asking
(`AliasGuids.refused`): noted once, never a reason to sweep again."""
from __future__ import annotations

from typing import Mapping, Sequence

from mad import forwarding as fw
from mad.attributes import GUIDInfo
from smagent.fdb.porttables import TableChange, Want, refuses, same_table
from smagent.transport.base import SmpTimeout

Aliases = Mapping[int, Mapping[int, Sequence[int]]]  # port GUID -> {block: 8 GUIDs}


def wants(topo, aliases: Aliases, only: set[int] | None = None) -> list[Want]:
    """A `Want` per block of ``aliases`` whose port is in ``topo`` (on a node of ``only``,
    None: any) and within its GUIDCap."""
    out = []
    for n in topo.nodes.values():
        if only is not None and n.guid not in only:
            continue
        for p, port_guid in sorted(n.port_guids.items()):
            blocks = aliases.get(port_guid)
            pi = n.ports.get(p)
            if not blocks or pi is None or (n.is_switch and p) or (not n.is_switch and p not in n.port_paths):
                continue
            path = n.path_to_port(p)
            out += [Want("guids", n.guid, n.description, path, fw.guid_modifier(b), tuple(blocks[b]), port=p)
                    for b in sorted(blocks) if b < fw.guid_blocks_for(pi.guid_cap)]
    return out


def plan(transport, topo, aliases: Aliases, only: set[int] | None = None, failed: set[int] | None = None
         ) -> tuple[list[TableChange], list[str], set[tuple[int, int]]]:
    """Read the blocks (one batch) and plan the Sets: (changes, problems, refused) where
    ``refused`` holds (node GUID, port) of the ports that do not answer the Get (then not
    a problem); ``failed`` collects the GUIDs of nodes a Get got no answer from."""
    ws = wants(topo, aliases, only)
    changes: list[TableChange] = []
    problems: list[str] = []
    refused: set[tuple[int, int]] = set()
    for w, rep in zip(ws, transport.execute([w.get() for w in ws])):
        if not rep.ok:
            if refuses("guids", rep.error):
                refused.add((w.guid, w.port))
                continue
            problems.append(f"{w.name}: {rep.request.describe()} failed ({rep.error}); not written")
            if failed is not None and isinstance(rep.error, SmpTimeout):
                failed.add(w.guid)
            continue
        cur = rep.value(GUIDInfo)
        new = w.desired(cur)
        if not same_table("guids", cur, new):
            changes.append(w.change(cur, new))
    return changes, problems, refused


def note(topo, refused: set[tuple[int, int]]) -> str:
    """The one note of the ports that refused."""
    (g, p), n = min(refused), len(refused)
    name = topo.nodes[g].description if g in topo.nodes else f"{g:#018x}"
    return (f"alias GUIDs: {n} port{'s' if n != 1 else ''} refuse{'' if n != 1 else 's'} SubnSet(GUIDInfo), e.g. "
            f"{name} port {p}: their alias GUIDs are the SA's alone (PathRecords and GUIDInfoRecords still "
            f"answer by them); not asked again")
