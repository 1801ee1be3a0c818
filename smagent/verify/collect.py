"""The only I/O of verify: discover the fabric and read what the switches hold (LFT
blocks by `fdb.lft.lft_blocks_to_read`, whole RFTs of RFT-only switches, MFTs, and the
SL2VL and P_Key tables the link checks need) into a `Snapshot`, or (`collect_switches`) only
a few switches' of a known topology; what it read is a subnet model (`Subnet.build`), the
snapshot a view of it (`Snapshot.of`)."""
from __future__ import annotations

import dataclasses
import time

from mad import forwarding as fw
from mad.attributes import AttrID, P_KeyTable, SLtoVLMappingTable
from smagent.fdb import lft as linear, mft as multicast
from smagent.fdb.rft import read_rft_blocks
from smagent.fdb.switch import per_switch, read_units
from smagent.transport.base import Transport
from smagent.verify.linkconf import data_hops
from smagent.model.subnet import Subnet
from smagent.verify.model import Snapshot


def collect(transport: Transport, *, mcast: bool = True, links: bool = True, partitions=None,
            qos_policy=None) -> Snapshot:
    """Discover the fabric and read every switch's tables (DR-routed Gets, batched);
    with ``links`` also the SL2VL and P_Key tables the link checks need. ``partitions``
    (a `smagent.config.partitions.PartitionConfig`): resolved on the fabric for the partition
    check, and the P_Key tables of enforcing switch ports facing end ports read too.
    ``qos_policy``: with a `smagent.config.qospolicy.QosPolicy`, `Snapshot.lid_ports` is filled
    (the port behind every LID: what the policy's target rules name).

    What does not answer (a silent node, a switch whose tables cannot be read) does not
    stop the reading: it is listed in `Snapshot.unreached` and the rest is verified."""
    from smagent import discovery
    t0 = time.monotonic()
    sent0 = transport.stats.sent
    topo = discovery.discover(transport)
    unreached = [dict(u) for u in topo.unreached]
    unread: set = set()  # switches whose unicast tables did not answer
    mft_unread: set = set()

    def failed(what: str, errors: list[tuple[int, str]], into: set):
        _failed(topo, unreached, what, errors, into)

    switches = [n for n in topo.switches() if n.switch_info is not None]
    unread.update(n.guid for n in topo.switches() if n.switch_info is None)  # discovery listed it
    lfts, errors = _read_lfts(transport, switches)
    failed("LFT", errors, unread)
    rfts, errors = _read_rfts(transport, switches)
    failed("RFT", errors, unread)
    mfts: dict = {}
    if mcast:
        mfts, errors = _read_mfts(transport, switches)
        failed("MFT", errors, mft_unread)
    snap = Snapshot.of(Subnet.build(topo, lfts, mfts), rfts, mcast=mcast, unread=unread, mft_unread=mft_unread,
                       unreached=unreached)
    if partitions is not None:
        from smagent.config import partitions as partmod
        snap.partition_rules = partmod.resolve(partitions, topo).ports
    if links:
        _read_link_tables(transport, topo, snap)
    if qos_policy is not None:
        from smagent.planning import qoslayers
        snap.lid_ports = qoslayers.dlid_ports(topo)
        from smagent.config import qospolicy as qosmod
        snap.qos_members = qosmod.topology_membership(qos_policy, topo, partitions)
    snap.smps, snap.seconds = transport.stats.sent - sent0, time.monotonic() - t0
    return snap


def collect_switches(transport: Transport, topo, ports: dict[int, set[int]]) -> Snapshot:
    """A `Snapshot` of ``topo`` as discovered before (no discovery) in which only the
    switches of ``ports`` ({GUID: ports}) are read again: each its SwitchInfo (the tops it
    holds now), its LFT blocks (`lft_blocks_to_read`) and the MFT units of the positions
    that hold those ports (its MFT groups name no other position's ports); every other
    switch is unread. What a claim about those switches' exits needs (a drain's proof,
    `smagent.sweep.drain.prove`), at their cost alone; failures as `collect` lists them."""
    t0 = time.monotonic()
    sent0 = transport.stats.sent
    unreached: list[dict] = []
    unread = {n.guid for n in topo.switches() if n.guid not in ports}
    mft_unread = set(unread)
    wanted = [(g, topo.nodes[g].path) for g in sorted(ports)]
    infos, missed = read_units(transport, wanted, AttrID.SWITCH_INFO, lambda: 0, lambda v: v, lambda: "SwitchInfo")
    _failed(topo, unreached, "SwitchInfo", _first_errors(missed, [g for g, _p in wanted if (g,) not in infos]),
            unread)
    fresh = {g: dataclasses.replace(topo.nodes[g], switch_info=infos[(g,)]) for g, _p in wanted if (g,) in infos}
    view = dataclasses.replace(topo, nodes={**topo.nodes, **fresh})
    lfts, errors = _read_lfts(transport, list(fresh.values()))
    _failed(topo, unreached, "LFT", errors, unread)
    mfts, errors = _read_mfts(transport, list(fresh.values()), {g: ports[g] for g in fresh})
    _failed(topo, unreached, "MFT", errors, mft_unread)
    snap = Snapshot.of(Subnet.build(view, lfts, mfts), unread=unread, mft_unread=mft_unread, unreached=unreached)
    snap.smps, snap.seconds = transport.stats.sent - sent0, time.monotonic() - t0
    return snap


def _failed(topo, unreached: list[dict], what: str, errors: list[tuple[int, str]], into: set) -> None:
    """Each (switch, error) into ``into`` and listed as `Snapshot.unreached` lists it."""
    for g, err in errors:
        n = topo.nodes[g]
        into.add(g)
        unreached.append({"where": f"{n.description} ({what})", "path": list(n.path), "node": n.description,
                          "guid": f"0x{g:016x}", "port": None, "error": err})


def _read_link_tables(transport: Transport, topo, snap: Snapshot) -> None:
    """The SL2VL tables of every hop data takes (`data_hops`) and the P_Key tables of every
    end port (with partitions every block up to PartitionCap, and of enforcing switch
    ports up to PartitionEnforcementCap; else block 0), one batch: one SMP per switch
    (input, output) pair on a route, per CA port that sends, per P_Key block. A port without IsSLMappingSupported (switches: port 0's
    bit) or without a P_Key table is not asked. A recording made without these reads
    (replay) leaves the checks out (`tables_read` False)."""
    from smagent.fdb.porttables import Want
    from smagent.linkconf.portinfo import CAP_SL_MAPPING
    from smagent.transport.replay import ReplayMiss
    sw_hops, ca_hops = data_hops(snap)
    wants, keys = [], []

    def want(kind, n, path, mod, key):
        wants.append(Want(kind, n.guid, n.description, path, mod, None))
        keys.append(key)

    for g, inp, out in sorted(sw_hops):
        n = topo.nodes[g]
        if 0 in n.ports and n.ports[0].capability_mask & CAP_SL_MAPPING:
            want("sl2vl", n, n.path, fw.sl2vl_modifier(inp, out), (g, inp, out))
    for g, p in sorted(ca_hops):
        n = topo.nodes[g]
        if n.ports[p].capability_mask & CAP_SL_MAPPING:
            want("sl2vl", n, n.port_paths[p], 0, (g, 0, p))
    every = snap.partition_rules is not None  # with partitions: every block, a stale key anywhere counts

    def blocks(cap: int) -> range:
        return range(max(1, -(-cap // fw.PKEY_BLOCK_SIZE)) if every else 1)

    tables: dict = {}  # (kind, key) -> {block: keys}
    for g, p in sorted(k for k in snap.ca_ports if k in snap.links):
        if topo.nodes[g].node_info.partition_cap:
            for b in blocks(topo.nodes[g].node_info.partition_cap):
                want("pkeys", topo.nodes[g], topo.nodes[g].port_paths[p], fw.pkey_modifier(b), ("pkeys", (g, p), b))
    for g, s in sorted(snap.switches.items()):
        if s.lid and topo.nodes[g].node_info.partition_cap:
            for b in blocks(topo.nodes[g].node_info.partition_cap):
                want("pkeys", topo.nodes[g], topo.nodes[g].path, fw.pkey_modifier(b, 0), ("pkeys", (g, 0), b))
    for g, p in _enforcing_ports(snap) if every else ():
        si = topo.nodes[g].switch_info
        for b in blocks(si.partition_enforcement_cap if si is not None else 0):
            want("pkeys", topo.nodes[g], topo.nodes[g].path, fw.pkey_modifier(b, p), ("enforce", (g, p), b))
    try:
        replies = transport.execute([w.get() for w in wants])
    except ReplayMiss:
        return
    failed = set()
    for w, key, rep in zip(wants, keys, replies):
        if not rep.ok:
            n = topo.nodes[w.guid]
            snap.unreached.append({"where": f"{n.description} ({rep.request.describe()})", "path": list(w.path),
                                   "node": n.description, "guid": f"0x{w.guid:016x}", "port": None,
                                   "error": rep.error})
            if w.kind == "pkeys":
                failed.add(key[:2])
        elif w.kind == "sl2vl":
            snap.sl2vl[key] = tuple(rep.value(SLtoVLMappingTable).sl_to_vl)
        else:
            tables.setdefault(key[:2], {})[key[2]] = rep.value(P_KeyTable).p_keys
    for (kind, port), got in tables.items():
        if (kind, port) not in failed:  # a table read in part is not judged
            whole = tuple(k for b in sorted(got) for k in got[b])
            (snap.enforce_pkeys if kind == "enforce" else snap.pkeys)[port] = whole
    snap.tables_read = True


def _enforcing_ports(snap: Snapshot) -> list:
    """Switch ports facing a CA port that enforce partitions (either direction)."""
    out = []
    for (g, p), (g2, _p2) in snap.links.items():
        pi = snap.port_info.get((g, p))
        if (g in snap.switches and g2 not in snap.switches and pi is not None
                and (pi.partition_enforcement_inbound or pi.partition_enforcement_outbound)):
            out.append((g, p))
    return sorted(out)


def _first_errors(errors: list[str], keys: list) -> list[tuple[int, str]]:
    """One error per switch: (GUID, its first error and how many more); `keys` are the
    switches of the failed reads, in the order of `errors`."""
    return [(g, es[0] + (f" (+{len(es) - 1} more)" if len(es) > 1 else ""))
            for g, es in per_switch(errors, keys).items()]


def _read_lfts(transport: Transport, switches) -> tuple[dict, list]:
    wanted = [(n.guid, n.path, b) for n in switches for b in linear.lft_blocks_to_read(n.switch_info)]
    got, errors = linear.read_lft_blocks(transport, wanted)
    return got, _first_errors(errors, [g for g, _p, b in wanted if (g, b) not in got])


def _read_rfts(transport: Transport, switches) -> tuple[dict, list]:
    """The whole RFT of every switch that forwards by one (LinearFDBCap 0, RandomFDBCap >
    0): a stale valid entry anywhere in it still matches. {GUID: [(base, lmc, port)]}."""
    rft = [n for n in switches if not n.switch_info.linear_fdb_cap and n.switch_info.random_fdb_cap]
    wanted = [(n.guid, n.path, b) for n in rft for b in range(_rft_blocks(n.switch_info))]
    got, errors = read_rft_blocks(transport, wanted)
    failed = _first_errors(errors, [g for g, _p, b in wanted if (g, b) not in got])
    out = {}
    for n in rft:
        nb = _rft_blocks(n.switch_info)
        if any((n.guid, b) not in got for b in range(nb)):
            continue
        out[n.guid] = rft_entries([e for b in range(nb) for e in got[(n.guid, b)]], n.switch_info.random_fdb_cap)
    return out, failed


def rft_entries(packed: list[int], cap: int) -> tuple:
    """A switch's RFT as `SwitchState.rft` holds it: the valid entries of its packed
    table (RandomFDBCap of them), in table order, as (base, lmc, port)."""
    return tuple(e for e in map(fw.rft_unpack, packed[:cap]) if e is not None)


def _rft_blocks(si) -> int:
    return fw.rft_block(si.random_fdb_cap - 1)[0] + 1  # the block of the last entry, and those before


def _read_mfts(transport: Transport, switches, only: dict[int, set[int]] | None = None) -> tuple[dict, list]:
    """Every MFT unit of ``switches`` (with ``only`` {GUID: ports}: the positions of those
    ports): {(GUID, block, position): masks}, and the errors."""
    wanted = []
    for n in switches:
        si = n.switch_info
        positions = (sorted({fw.mft_position(p)[0] for p in only[n.guid]}) if only is not None
                     else range(fw.mft_positions_for(n.num_ports)))
        if si.multicast_fdb_cap:
            wanted += [(n.guid, n.path, b, pos) for b in multicast.mft_blocks_to_read(si.multicast_fdb_cap, si.multicast_fdb_top)
                       for pos in positions]
    got, errors = multicast.read_mft_units(transport, wanted)
    failed = _first_errors(errors, [g for g, _p, b, pos in wanted if (g, b, pos) not in got])
    return got, failed
