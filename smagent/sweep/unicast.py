"""Unicast tables: LFT blocks and RFT entries, read from the table source and diffed
against the routes."""
from __future__ import annotations

import numpy as np

from mad import forwarding as fw
from smagent.fdb import lft as linear
from smagent.fdb import rft
from smagent.model.subnet import LftBlocks
from smagent.sweep.state import SweepError, SweepState
from smagent.sweep.tables import lft_units, read_failures

B = fw.LFT_BLOCK_SIZE


def read_lfts(s: SweepState) -> None:
    """Read what is live (blocks up to the current LinearFDBTop; above it the switch
    forwards nothing, so those blocks are written without reading), diff by block."""
    topo, r, top = s.topo, s.r, s.r.lid_plan.top
    kept_routes = 0
    with s.phase("lft_read"):
        blocks = fw.lft_blocks_for(top)  # the length of every planned table: LIDs 0..top
        switches = [n for n in topo.switches() if n.switch_info and n.switch_info.linear_fdb_cap]
        wanted = [(n.guid, n.path, min(blocks, len(linear.lft_blocks_to_read(n.switch_info)))) for n in switches]
        current, errors = s.source.lft_tables(s.transport, wanted)
        if errors:  # see settle_unread; the blocks listed only then (a repair's known tables miss none)
            s.unread += read_failures(s.topo, lft_units(wanted), current, errors, "LFT block")
        r.lft_current = current
        for n in switches:
            g = n.guid
            table = linear.desired_lft(s.routed[g], top)  # one at a time (all at once: 157 MB at 39,366 hosts)
            if table == current.whole(g):
                continue  # every block read and as planned (a repair's untouched switches): one compare
            for b in differing_blocks(table, current, g):
                new = bytes(table[b * B:(b + 1) * B])
                old = current.get((g, b))
                if topo.unreachable and old is not None:
                    new, kept = keep_unreached_routes(s, b, old, new)
                    kept_routes += kept
                if old != new:
                    r.lft_changes.append(linear.BlockChange(g, n.description, n.path, b, old, new))
    if kept_routes:
        r.notes.append(f"discovery was incomplete: kept {kept_routes} existing routes to LIDs it did not reach")


def differing_blocks(table: bytearray, current: LftBlocks, switch: int) -> list[int]:
    """The blocks of the planned ``table`` that ``current`` does not hold as planned
    (unknown, or differing), in order: found on arrays, not block by block (a repair
    changes a few blocks of a switch's hundreds)."""
    blocks = len(table) // B
    held = current.tables.get(switch, b"")
    both = min(blocks, len(held) // B)
    differ = (np.frombuffer(table, np.uint8, both * B) != np.frombuffer(held, np.uint8, both * B)).reshape(both, B)
    out = set(np.flatnonzero(differ.any(axis=1)).tolist())
    out.update(b for b in current.unknown_of(switch) if b < both)
    return sorted(out) + list(range(both, blocks))


def keep_unreached_routes(s: SweepState, block: int, old: bytes, new: bytes) -> tuple[bytes, int]:
    """Part of the fabric did not answer: keep the routes a block had to LIDs this sweep
    did not find, rather than cut off hosts that may be alive behind a flaky link."""
    base = block * fw.LFT_BLOCK_SIZE
    homes = s.routing_input.lid_homes
    kept = bytes(o if nw == fw.LFT_NO_PORT and o != fw.LFT_NO_PORT and base + i not in homes else nw
                 for i, (o, nw) in enumerate(zip(old, new)))
    return kept, sum(1 for x, y in zip(kept, new) if x != y)


def read_rfts(s: SweepState) -> None:
    """Switches without an LFT that have a random table. Entries and DefaultPort are
    planned (and checked against LIDsPerPort / RandomFDBCap) before any read; the whole
    table is read, since a stale valid entry anywhere in it would still match."""
    topo, r = s.topo, s.r
    with s.phase("rft_read"):
        rft_switches = [(n, n.switch_info) for n in topo.switches() if n.switch_info
                        and not n.switch_info.linear_fdb_cap and n.switch_info.random_fdb_cap]
        plans = {}
        for n, si in rft_switches:
            sw_ports = {p for p in range(1, n.num_ports + 1)
                        if (n.guid, p) in topo.links and topo.nodes[topo.links[(n.guid, p)][0]].is_switch}
            try:
                plans[n.guid] = rft.plan_switch(n.guid, n.description, s.routed.get(n.guid, {}), sw_ports, si)
            except rft.RftError as e:
                raise SweepError(f"{e}; nothing was sent") from None
        wanted = [(n.guid, n.path, b) for n, si in rft_switches for b in range(rft.blocks_for(si.random_fdb_cap))]
        current, errors = rft.read_rft_blocks(s.transport, wanted)
        r.rft_current = current
        for n, si in rft_switches:
            nb = rft.blocks_for(si.random_fdb_cap)
            missing = [b for b in range(nb) if (n.guid, b) not in current]
            if missing:
                r.problems.append(f"{n.description}: RFT blocks {missing[:8]} could not be read; its RFT is not "
                                  f"programmed")
                continue
            table = [e for b in range(nb) for e in current[(n.guid, b)]]
            pl = plans[n.guid]
            r.rft_plans.append(pl)
            r.rft_changes += rft.changes(pl, n.path, table, si)
            if pl.default_port is not None:
                s.default_port[n.guid] = pl.default_port
        r.problems += [f"RFT read: {line}" for line, _keys in read_failures(s.topo, wanted, current, errors, "RFT block")]
