"""The link tables phase (SL2VL, VLArb, P_Key through `smagent.linkconf`, and the
GUIDInfo blocks of alias GUIDs, `smagent.linkconf.guids`): read and planned; written with
the forwarding tables (`smagent.sweep.write`)."""
from __future__ import annotations

from smagent import linkconf as links
from smagent.linkconf import guids
from smagent.sweep.state import SweepState


def read_links(s: SweepState) -> None:
    if not s.link_opts and not s.opts.alias_guids:
        return
    with s.phase("link_read"):
        only = s.source.link_nodes(s.r.port_changes)
        if s.link_opts:
            s.r.link_changes, problems, notes = links.plan_tables(s.transport, s.topo, s.link_opts, s.op_vls, only,
                                                                  s.links_failed, s.r.link_tables
                                                                  if s.opts.keep_link_tables else None)
            s.r.problems += problems
            s.r.notes += notes
        if s.opts.alias_guids:
            changes, problems, refused = guids.plan(s.transport, s.topo, s.opts.alias_guids, only, s.links_failed)
            s.r.link_changes += changes
            s.r.problems += problems
            note_refused(s, refused)


def note_refused(s: SweepState, refused: set[tuple[int, int]]) -> None:
    """Ports that refuse GUIDInfo: one note, their port GUIDs in the result."""
    if refused:
        s.r.guids_refused |= {s.topo.nodes[g].port_guids[p] for g, p in refused}
        s.r.notes.append(guids.note(s.topo, refused))
