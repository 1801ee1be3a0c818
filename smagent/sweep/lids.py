"""The LID phases: assign (kept LIDs first, from the LID file) and save the LID file."""
from __future__ import annotations

import os

from mad import forwarding as fw
from smagent.planning import lidassign as lids
from smagent.sweep.state import SweepState


def assign_lids(s: SweepState) -> None:
    """LIDs under the smallest LinearFDBCap (LIDs 0..cap-1 are in the table)."""
    topo, r = s.topo, s.r
    caps = [n.switch_info.linear_fdb_cap for n in topo.switches() if n.switch_info and n.switch_info.linear_fdb_cap]
    limit = min(caps) - 1 if caps else fw.UNICAST_LID_MAX
    ports = []
    for n in sorted(topo.nodes.values(), key=lambda n: (len(n.path), n.path)):
        for p in n.lid_ports():
            pg = n.port_guids.get(p, n.guid)
            ports.append((pg, n.is_switch, n.ports[p].lid if p in n.ports else 0))
    plan_ = lids.assign(ports, lmc=s.opts.lmc, limit=limit, persisted=s.persisted)
    # ports the LID file knows that this sweep did not find keep their LIDs reserved
    found = {g for g, _sw, _cur in ports}
    r.missing = {g: rng for g, rng in s.persisted.items() if g not in found}
    for g, (lo, _hi) in sorted(r.missing.items(), key=lambda kv: kv[1]):
        r.notes.append(f"port {g:#018x} (LID {lo} in {s.lid_file}) was not found; its LID stays reserved")
    lg, lp = topo.local
    local_node = topo.nodes[lg]
    plan_.master_lid = plan_.lids[local_node.port_guids.get(0 if local_node.is_switch else lp, lg)]
    r.lid_plan = plan_
    r.notes += plan_.notes


def save_path_sls(s: SweepState) -> None:
    """The SL of every path (dfsssp's layers), next to the LIDs: what `verify --path-sls`
    reads; an engine without SLs removes an older file."""
    if s.opts.state_dir:
        from smagent.planning import pathsl
        from smagent.config import files as paths
        pathsl.save(paths.StateDir(s.opts.state_dir).path_sls, s.r.path_sls)


def save_lids(s: SweepState) -> None:
    """The LID file: every LID assigned, and those of ports not seen this time (kept for
    when they return)."""
    if not s.lid_file:
        return
    lp = s.r.lid_plan
    sw_ports = {n.port_guids.get(0, n.guid) for n in s.topo.switches()}
    table = {g: (lid, lid + (0 if g in sw_ports else (1 << lp.lmc) - 1)) for g, lid in lp.lids.items()}
    for g, rng in s.r.missing.items():
        table.setdefault(g, rng)
    os.makedirs(os.path.dirname(os.path.abspath(s.lid_file)), exist_ok=True)  # a new state directory
    lids.save_guid2lid(s.lid_file, table)
