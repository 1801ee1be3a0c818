"""Verify the forwarding tables a fabric actually holds: trace every source to every LID.

Two halves. `collect` reads what the switches hold (discovery, then every LFT block up
to LinearFDBTop, the whole RFT of a switch without an LFT and, optionally, the MFT) into
a `Snapshot`; `check` is pure and runs the forwarding rules over it, so tests hand-build
snapshots. The simulator's data plane (`smagent.sim.dataplane`) implements the same rules
on its own: it is the independent witness the differential test compares against.

Forwarding rules (seed 000, IBA 18.2.4). A switch first looks whether the DLID is its own
(port 0's LID; a range of 2^LMC with enhanced port 0): then the packet is for its
management port, whatever the tables say (the seed: the receiving port checks the DLID
for the management port before any table lookup; ibsim and the simulator do the same).
Otherwise the unicast table decides:

* LFT (LinearFDBCap > 0): discard when the DLID is above LinearFDBTop or at or above
  LinearFDBCap, or when the entry is 255 or names a port the switch does not have.
* RFT (LinearFDBCap 0, RandomFDBCap > 0): the first Valid entry whose range holds the
  DLID (BaseLID with its low LMC bits cleared, 2^LMC LIDs) gives the exit port. No match:
  a packet that came in on DefaultPort is discarded; any other goes out DefaultPort,
  and is discarded if DefaultPort does not exist. So the outcome at an RFT switch also
  depends on whether the packet entered on DefaultPort.
* neither table: discard.

Port 0 delivers to the switch itself (right only if the DLID is the switch's). Any other
port sends the packet over its link, which must exist and be ACTIVE at both ends (data
needs ACTIVE ports); a channel adapter port accepts DLIDs base .. base + 2^LMC - 1 (base
with its low LMC bits cleared), anything else reaching it is misdelivered.

Sources are every ACTIVE CA port with a LID on an ACTIVE switch port and every switch
with a LID (its port 0); destinations are every LID assigned (all 2^LMC of a CA port). A packet's
route depends only on where it is (switch, and for an RFT switch whether it entered on
DefaultPort) and its DLID, so outcomes are computed once per (place, DLID) and shared by
every source entering there: O(switches x LIDs), not O(pairs x hops).

Defect classes (`Report.defects`: class -> {"count", "examples": [dict, ...], ...}; each
example a dict of fields, `Report.texts` the same examples as readable lines):

``unreached``      what discovery or the table reads could not reach (a silent node, a
                   switch whose tables did not answer): verified around, listed here
``unreachable``    (source, DLID) pairs whose packets are not delivered, by cause
``dead_end``       where packets are discarded: switch, DLID, cause (see CAUSES)
``loop``           DLIDs whose route revisits a switch, with the cycle of switches
``misdelivered``   routes that end at a port that does not own the DLID
``cdg_cycle``      a cycle in the channel dependency graph: credit-loop deadlock risk.
                   Channels are (switch, out port) links between switches; a route
                   through s -> t -> u makes channel (s,p) depend on (t,q). A cycle
                   counts only if its channels share a VL: each path's SL
                   (`Snapshot.path_sl`, SL 0 when not known) through each hop's SL2VL
                   table (`verify.cdg`); the example then names the VL. The graph is
                   built from the routes of data traffic: everything CA ports send.
                   A switch's own port 0 sends management packets (SMPs ride VL15,
                   which has no flow control and cannot deadlock); its routes are still
                   traced for reachability above. One cycle is reported explicitly.
``inactive_port``  linked ports that are not ACTIVE
``no_lid``         linked CA ports or switches without a LID
``duplicate_lid``  LIDs claimed by more than one port
``own_lid_not_port0`` a switch's own LID (each of its 2^LMC) whose LFT entry is not port
                   0 (another port, 255, or above LinearFDBTop). The seed delivers it to
                   the management port anyway (so no pair is lost above), but ibsim and
                   switches that look the DLID up in the LFT send the switch's own
                   LID-routed SMPs elsewhere (docs/PITFALLS.md, "Own-LID entries")
``rft_overlap``    valid RFT entries that match the same DLID and name different ports
                   (which wins is not specified; the check follows the first)
``imbalance``      only with ``max_imbalance``: the switch-to-switch link loaded most
                   above the ideal of its level group (`verify.balance`), when that ratio
                   exceeds the limit (updn on a damaged tree: 7.7 times)
``mcast``          multicast groups (MLIDs with a port set on any switch): every member
                   (a CA port or switch port 0 the MFT entries point at) sending must
                   reach every other member exactly once: members missed, members
                   reached twice, loops in the tree, branches into unlinked or inactive
                   ports or into a switch without an entry for the group.

Link checks (when the snapshot holds the ports' PortInfo: `collect` always reads it;
hand-built snapshots without it skip them):

``link_mtu_mismatch``  links whose two ends hold different NeighborMTU
``link_vl_mismatch``   links whose two ends hold different OperationalVLs
``sl_unmapped``        hops on a data path (a CA port sending, or a switch's (input,
                       output) port pair some (source, DLID) route takes) whose SL2VL
                       table maps an SL to VL15 or to a VL at or above the data VLs the
                       link runs (the smaller OperationalVLs of its two ends): a packet on
                       that SL is dropped there. Computed per hop, like routes per
                       (switch, DLID): the hops of every route, each checked once.
``no_default_partition`` end ports (linked CA ports, switch port 0 of a switch with a
                       LID) whose P_Key block 0 lacks the default partition 0xFFFF (full
                       member); at reset ports hold 0x7FFF, and two limited members
                       cannot talk. Not checked when partitions are given: then
``partition_leak``     pairs of CA ports the P_Key tables (and the enforcing switch ports
                       next to them) let talk without a shared partition, or only as two
                       limited members, and
``partition_blocked``  pairs the partitions allow but the tables block (`verify.partitions`).
``partition_enforcement_off``  with partitions, a switch port facing an end port that could
                       enforce them and does not (`verify.isolation`).

Warnings (listed in `Report.warnings`, the exit code and `Report.ok` ignore them: a
configured cap (`links.LinkOptions.max_mtu` / `max_vls`) or a cable that trained at a
lower rate keeps traffic flowing, only slower):

``degraded_link``          active width or speed below what both ends support
                           (`mad.codes.degraded`, iblinkinfo's "Could be")
``link_below_capability``  NeighborMTU or OperationalVLs agreeing on both ends but
                           below the smaller MTUCap / VLCap of the two

Modules: `model` (Snapshot, a view of the subnet model: `Snapshot.of`; Report, the shared net), `collect` (the only I/O: reads),
`unicast` (routes, LIDs, the walk), `links` (link checks), `cdg` (credit loops), `mcast`
(multicast trees), `partitions` (P_Key tables against the partitions); this package's `check` runs them all, `verify` reads and checks.
"""
from __future__ import annotations

import time

from smagent.transport.base import Transport
from smagent.verify.cdg import _check_cdg, find_cycle, vl_deps
from smagent.verify.collect import collect, rft_entries
from smagent.verify.linkconf import _check_links, data_hops
from smagent.verify.mft import _check_mcast, group_defects
from smagent.verify.isolation import _check_partition_rules
from smagent.verify.model import (CAUSES, EXAMPLES, WARNINGS, CaPortState, Report, Snapshot, SwitchState, _Defects,
                                  _Net, mft_groups, snapshot_from_routes)
from smagent.verify.unicast import (PlaceOutcomes, _check_lids_and_sources, _check_own_lids, _check_ports,
                                    _check_rft_overlaps, _check_unicast, _check_unreached, black_hole_entries,
                                    _place_sources, outcomes, own_lid_entry, place_outcomes)

__all__ = ["CAUSES", "EXAMPLES", "WARNINGS", "CaPortState", "PlaceOutcomes", "Report", "Snapshot", "SwitchState",
           "black_hole_entries", "check", "collect", "data_hops", "find_cycle", "group_defects", "mft_groups", "outcomes",
           "own_lid_entry", "place_outcomes", "rft_entries", "snapshot_from_routes", "verify", "vl_deps"]


def check(snap: Snapshot, examples: int = EXAMPLES, *, keep_outcomes: bool = False) -> Report:
    """Every check of the package docstring on a snapshot. ``keep_outcomes``: the unicast
    outcomes per place go to `Report.outcomes` (a `PlaceOutcomes`)."""
    t0 = time.monotonic()
    D = _Defects(examples)
    net = _Net.of(snap)
    _check_unreached(snap, D)
    _check_lids_and_sources(net, D)
    _check_ports(net, D)
    _check_own_lids(net, D)
    _check_rft_overlaps(net, D)
    keep = PlaceOutcomes(_place_sources(net), {}, {}) if keep_outcomes else None
    uni = _check_unicast(net, D, keep)
    _check_cdg(net, uni["deps"], D)
    groups = _check_mcast(net, D) if snap.mcast_read else None
    hops = _check_links(net, D)
    partition_pairs = _check_partition_rules(net, D)
    deps = uni["deps"]
    chans = set(deps)
    for v in deps.values():
        chans.update(v)
    summary = {
        "switches": len(net.st), "ca_ports": sum(1 for k in snap.ca_ports if k in snap.links),
        "sources": sum(len(v) for v in net.sources.values()), "lids": len(net.owner),
        "pairs": uni["pairs"], "pairs_unreachable": uni["bad"],
        "channels": len(chans), "dependencies": sum(len(v) for v in deps.values()), "mcast_groups": groups,
        "unreached": len(snap.unreached), "links_checked": bool(snap.port_info),
        "tables_checked": snap.tables_read, "data_hops": hops, "partition_pairs": partition_pairs,
        "smps": snap.smps, "read_seconds": round(snap.seconds, 3), "check_seconds": round(time.monotonic() - t0, 3),
    }
    defects = {k: v for k, v in D.d.items() if k not in WARNINGS}
    return Report(summary, defects, D.texts, warnings={k: v for k, v in D.d.items() if k in WARNINGS},
                  outcomes=keep)


def verify(transport: Transport, *, mcast: bool = True, examples: int = EXAMPLES, balance: bool = True,
           partitions=None, path_sl: dict | None = None, qos_policy=None, max_imbalance: float | None = None) -> Report:
    """Read the tables (`collect`), check them (`check`) and, with ``balance``, add the
    link-load figures of `smagent.verify.balance`. ``partitions``: a
    `smagent.config.partitions.PartitionConfig` to check the P_Key tables against. ``path_sl``:
    the SL of each path (`Snapshot.path_sl`, e.g. a sweep's `SweepResult.path_sls`);
    None: SL 0. ``qos_policy`` (a `smagent.config.qospolicy.QosPolicy`): its SLs by target port
    (and its default, without ``path_sl``) over those (`smagent.planning.qoslayers.rows`).
    ``max_imbalance``: a link carrying more than this many times the ideal of its group
    (`balance`'s ``worst``) is the defect ``imbalance`` (needs ``balance``)."""
    snap = collect(transport, mcast=mcast, partitions=partitions, qos_policy=qos_policy)
    snap.path_sl = path_sl
    if qos_policy is not None:
        from smagent.planning import qoslayers
        snap.path_sl = qoslayers.rows(qos_policy, sorted(snap.switches), path_sl, snap.lid_ports or {},
                                      snap.qos_members)
    report = check(snap, examples)
    if balance:
        from smagent.verify import balance as balancemod
        report.balance = balancemod.compute(snap)
        bad = balancemod.imbalance_defect(report.balance, max_imbalance) if max_imbalance is not None else None
        if bad is not None:
            report.defects["imbalance"] = {"count": 1, "examples": [bad[0]]}
            report.texts["imbalance"] = [bad[1]]
    return report
