"""The link tables phase (SL2VL, VLArb, P_Key through `smagent.linkconf`): read and planned;
written with the forwarding tables (`smagent.sweep.write`)."""
from __future__ import annotations

from smagent import linkconf as links
from smagent.sweep.state import SweepState


def read_links(s: SweepState) -> None:
    if not s.link_opts:
        return
    with s.phase("link_read"):
        only = s.source.link_nodes(s.r.port_changes)
        s.r.link_changes, problems, notes = links.plan_tables(s.transport, s.topo, s.link_opts, s.op_vls, only,
                                                              s.links_failed,
                                                              s.r.link_tables if s.opts.keep_link_tables else None)
        s.r.problems += problems
        s.r.notes += notes
