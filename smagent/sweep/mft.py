"""Multicast: a spanning tree per group (`smagent.planning.multicast`: the configured ones and those
hosts joined through the SA), the MFT units that could hold its entries (or stale ones)
read from the table source and diffed."""
from __future__ import annotations

from mad import forwarding as fw
from smagent.planning import multicast
from smagent.fdb import mft as mfttab
from smagent.sweep.state import SweepState
from smagent.sweep.tables import read_failures


CAP_IS_MCAST_FDB_TOP = 1 << 30  # PortInfo.CapabilityMask: IsMulticastFDBTopSupported


MFT_TOP_NONE = fw.MULTICAST_LID_MIN - 1  # MulticastFDBTop with no valid entry (OpenSM's value)


def read_mfts(s: SweepState) -> None:
    """A tree per group, then every (block, position) that could hold one of the groups'
    entries or a stale one below them is read: blocks 0 .. the highest group block
    (MLIDs are handed out from 0xC000 up, so that is where stale entries live), and, on
    a switch with MulticastFDBTop, every block up to its current top (what it forwards).
    Entries in higher blocks of a switch without MulticastFDBTop are neither read nor
    touched."""
    topo, r = s.topo, s.r
    if s.opts.multicast:
        s.mplan = r.multicast = multicast.plan(topo, s.spec)
        r.notes += s.mplan.notes
        add_joined(s)
    mplan = s.mplan
    with s.phase("mft_read"):
        units, wanted = {}, []
        group_blocks = {fw.mft_block(m)[0] for m in (mplan.mlids() if mplan else [])}
        group_blocks |= {fw.mft_block(m)[0] for m in (s.opts.mcast_released if mplan else ())}
        for n in (topo.switches() if mplan and (mplan.trees or mplan.defaults or s.opts.mcast_released) else []):
            si = n.switch_info
            if mplan is None or si is None or not si.multicast_fdb_cap:
                continue
            entries = mplan.desired.get(n.guid, {})
            top_ok = bool(n.ports.get(0) and n.ports[0].capability_mask & CAP_IS_MCAST_FDB_TOP)
            last = max(group_blocks, default=-1)
            if top_ok and si.multicast_fdb_top >= fw.MULTICAST_LID_MIN:
                last = max(last, fw.mft_block(min(si.multicast_fdb_top, fw.MULTICAST_LID_MAX))[0])
            last = min(last, fw.mft_blocks_for(si.multicast_fdb_cap) - 1)
            units[n.guid] = mfttab.mft_units(entries, range(last + 1), fw.mft_positions_for(n.num_ports))
            wanted += [(n.guid, n.path, b, p) for b, p in sorted(units[n.guid])]
            if top_ok:
                s.mft_top[n.guid] = max(entries, default=MFT_TOP_NONE)
        current, errors = s.source.mft_units(s.transport, wanted)
        r.mft_current = current
        s.unread += [(f"MFT read: {line}", keys) for line, keys in read_failures(s.topo, wanted, current, errors,
                                                                                   "MFT block")]
        diff_mfts(s, units, current)


def add_joined(s: SweepState) -> None:
    """The groups hosts joined (`SweepOptions.mcast_joined`) join the plan, each planned
    alone: one that cannot be programmed (its members cut apart) is a note, never a failed
    sweep, since hosts, not the operator, made it."""
    assert s.mplan is not None
    taken = set(s.mplan.mlids())
    for g in s.opts.mcast_joined:
        if g.mlid in taken:
            continue
        try:
            more = multicast.plan(s.topo, multicast.GroupSpec([g], source="SA"))
        except multicast.GroupFileError as e:
            s.r.notes.append(f"multicast: joined group not programmed: {e}")
            continue
        s.mplan.trees += more.trees
        for sw, entries in more.desired.items():
            s.mplan.desired.setdefault(sw, {}).update(entries)


def diff_mfts(s: SweepState, units: dict, current: dict) -> None:
    """MFT changes; entries of MLIDs outside the groups are kept (and reported) unless pruning."""
    r, opts = s.r, s.opts
    prune = opts.prune_multicast or bool(opts.desired is not None and opts.desired.multicast_prune)
    foreign: dict[int, list[str]] = {}  # MLID -> switches holding it
    group_mlids = set(s.mplan.mlids()) | set(opts.mcast_released) if s.mplan else set()
    for g, desired_units in units.items():
        n = s.topo.nodes[g]
        if not prune:
            kept = mfttab.keep_unconfigured(desired_units, current, g, group_mlids)
            for mlid in kept:
                foreign.setdefault(mlid, []).append(n.description)
            if kept and g in s.mft_top:  # MulticastFDBTop must not cut them off
                s.mft_top[g] = max(s.mft_top[g], max(kept))
        r.mft_changes += mfttab.diff_mft(g, n.description, n.path, desired_units, current)
    r.multicast_kept = {f"0x{m:04x}": sw for m, sw in sorted(foreign.items())}
    how = "multicast_prune: true in the desired state" if opts.desired is not None else "--prune-multicast"
    for m, sw in sorted(foreign.items()):
        r.notes.append(f"multicast: kept MLID 0x{m:04x} on {', '.join(sw[:4])}{' ...' if len(sw) > 4 else ''}: "
                       f"not in the configured groups ({how} removes it)")
