"""The order of a reroute's LFT Sets, so that no pair routable before and after is
black-holed or loops while the Sets go out (issue 40 item 2).

Toward one destination the new routes form a tree. Writing a switch's new entry only once
the next switch on its new path holds its own new entry (the destination's side first,
outwards) keeps every intermediate state sound: a packet follows old entries, which still
work, until it meets a switch already updated, and from there new entries only, each of
which leads on over switches already final to the destination. So each changed entry gets
a level, 0 where its new next hop is final already (an end port, or a switch whose entry
does not change), else one more than the next switch's; stage L writes every entry of level
L (an entry that routes nothing today at once: no working path crosses it). An LFT Set carries a block of 64 LIDs, whose entries may need different stages: such a
block is written once per level it holds, each time with the entries due so far and the
others as they were (a few more Sets, and no order conflict between destinations of one
block). A change whose new routes loop has no such order: its entries get the last stage,
and `loops` names them (the check of planned tables refuses such plans before this).

MFT Sets go in two stages (`mft_staged`): first every port a tree loses (each mask as old
AND new), then every port it gains. Every intermediate state is then a part of the old trees
or a part of the new ones, never a mix that closes a circle (a drain re-roots a tree: the
old leaves still send up to the old root while the new root already sends down to them, and
copies go round for ever); members may miss copies between the stages, which multicast
tolerates and a storm is not. `mcast_loops` measures it.

`broken_steps` measures any order: after every single Set, the (source switch, destination
LID) pairs that both the old and the new tables deliver and the tables as they stand do not,
weighted by the hosts on the source switch (`bench/update_order.py`).

Pure: tables are bytes, the fabric a map of (switch, port) to the switch beyond it.
"""
from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping, Sequence

import numpy as np

B = 64  # LIDs per LFT block (IBA 14.2.5.10)
NO_PORT = 0xFF


@dataclasses.dataclass(frozen=True)
class Change:
    """One LFT block to change: ``old`` as the switch holds it (None: not read), ``new``."""
    switch: int
    block: int
    old: bytes | None
    new: bytes


@dataclasses.dataclass(frozen=True)
class Write:
    """One Set of a staged reroute: change ``index`` of the input, with ``content``."""
    index: int
    content: bytes
    final: bool  # the change's last write (content == new)


@dataclasses.dataclass
class Order:
    stages: list[list[Write]]
    loops: list[tuple[int, int]]  # (switch, LID) entries whose new routes loop

    @property
    def writes(self) -> list[Write]:
        return [w for stage in self.stages for w in stage]


def _changed(c: Change) -> list[int]:
    return [k for k in range(B) if c.old is None or c.old[k] != c.new[k]]


def levels(changes: Sequence[Change], peer: Mapping[tuple[int, int], int]) -> tuple[list[dict[int, int]], list]:
    """Per change, {entry index in the block: level}; and the (switch, LID) entries on a loop."""
    at = {(c.switch, c.block): i for i, c in enumerate(changes)}
    changed = [set(_changed(c)) for c in changes]
    out: list[dict[int, int]] = [{} for _ in changes]
    loops: list[tuple[int, int]] = []
    for i, c in enumerate(changes):
        for k in changed[i]:
            if k in out[i]:
                continue
            base: int | None
            chain, j = [], i  # follow the new next hops while their entries change
            while True:
                chain.append(j)
                n = peer.get((changes[j].switch, changes[j].new[k]))
                nxt = at.get((n, c.block)) if n is not None else None
                if nxt is None or k not in changed[nxt] or k in out[nxt]:
                    base = out[nxt][k] + 1 if nxt is not None and k in out[nxt] else 0
                    break
                if nxt in chain:  # the new routes loop: no safe order for this LID
                    loops += [(changes[m].switch, c.block * B + k) for m in chain[chain.index(nxt):]]
                    base = None
                    break
                j = nxt
            for depth, m in enumerate(reversed(chain)):
                out[m][k] = -1 if base is None else base + depth
    last = max((lv for d in out for lv in d.values()), default=0) + 1
    for d in out:
        for k, lv in d.items():
            if lv < 0:
                d[k] = last
    return out, loops


def _due(c: Change, k: int, level: int) -> int:
    """The stage entry ``k`` of ``c`` is written in: its level, but at once where the switch
    routes nothing there now (no old path crosses it, so no pair that works can break on it;
    the entries upstream still wait for its level): a bring-up is one stage."""
    return 0 if c.old is None or c.old[k] == NO_PORT else level


def _whole_blocks(changes: Sequence[Change], peer: Mapping[tuple[int, int], int],
                  lv: list[dict[int, int]]) -> list[int] | None:
    """A stage per change that writes each block once, where one exists: the changes
    ordered by the changes their entries wait for (a block after every block one of its
    entries' next hops is in); None where those waits go round in a circle."""
    at = {(c.switch, c.block): i for i, c in enumerate(changes)}
    waits: list[set[int]] = [set() for _ in changes]
    for i, c in enumerate(changes):
        for k in lv[i]:
            if _due(c, k, 1) == 0:
                continue  # written at once whatever comes before it
            n = peer.get((c.switch, c.new[k]))
            j = at.get((n, c.block)) if n is not None else None
            if j is not None and j != i and k in lv[j]:
                waits[i].add(j)
    stage: list[int | None] = [None] * len(changes)
    done: dict[int, int] = {}  # the stages worked out so far
    state = [0] * len(changes)  # 0 new, 1 on the stack, 2 done
    for root in range(len(changes)):
        stack = [(root, iter(waits[root]))]
        state[root] = 1
        while stack:
            i, it = stack[-1]
            j = next(it, None)
            if j is None:
                stack.pop()
                state[i] = 2
                done[i] = 1 + max((done[w] for w in waits[i]), default=-1)
                stage[i] = done[i]
            elif state[j] == 1:
                return None
            elif state[j] == 0:
                state[j] = 1
                stack.append((j, iter(waits[j])))
    return [s for s in stage if s is not None]


def _bring_up_without_loops(changes: Sequence[Change], peer: Mapping[tuple[int, int], int]) -> bool:
    """Whether ``changes`` are one stage with no loop, worked out on arrays: every changed
    entry routes nothing now (`_due` 0: no wait between blocks), and the new next hops of
    changed entries reach an unchanged entry or an end within `_SHORT_CHAINS` hops (no
    circle). False says only that `levels` must decide (a reroute, a long chain, a loop).
    A bring-up of 11,664 hosts is 336,960 blocks: through `levels` the first sweep took
    25 s more CPU and 0.6 GB more peak (`bench/first_sweep_split.py`, `daemon_memory.py`)."""
    if not changes:
        return False
    switches = {g: x for x, g in enumerate(sorted({c.switch for c in changes} | {g for g, _p in peer}))}
    beyond = np.full((len(switches) + 1, 256), len(switches), dtype=np.int32)  # last row: no switch there
    for (g, port), g2 in peer.items():
        if g2 in switches and 0 <= port < 256:
            beyond[switches[g], port] = switches[g2]
    by_block: dict[int, list[Change]] = {}
    for c in changes:  # a chain of next hops stays in its block
        by_block.setdefault(c.block, []).append(c)
    return all(_block_without_waits(block, switches, beyond) for block in by_block.values())


def _block_without_waits(changes: list[Change], switches: dict[int, int], beyond: np.ndarray) -> bool:
    """`_bring_up_without_loops` for the changes of one block."""
    new = np.frombuffer(b"".join(c.new for c in changes), dtype=np.uint8).reshape(len(changes), B)
    changed = np.ones(new.shape, dtype=bool)
    read = [i for i, c in enumerate(changes) if c.old is not None]
    if read:
        old = np.frombuffer(b"".join(bytes(changes[i].old) for i in read),  # type: ignore[arg-type]
                            dtype=np.uint8).reshape(len(read), B)
        if ((old != new[read]) & (old != NO_PORT)).any():
            return False  # an entry in use changes: the stages of `levels`
        changed[read] = old != new[read]
    at = np.full(len(switches) + 1, -1, dtype=np.int32)  # switch -> its change in this block
    sw = np.array([switches[c.switch] for c in changes], dtype=np.int32)
    at[sw] = np.arange(len(changes), dtype=np.int32)
    nxt = at[beyond[sw[:, None], new]]  # the next switch's change of the entry, or -1
    col = np.arange(B)[None, :]
    goes_on = changed & (nxt >= 0)
    goes_on &= changed[np.where(goes_on, nxt, 0), col]  # its entry changes too: it waits
    nxt = np.where(goes_on, nxt, 0)
    level = np.zeros(new.shape, dtype=np.int32)
    for _ in range(_SHORT_CHAINS):  # levels settle within a chain's length; on a loop never
        after = np.where(goes_on, level[nxt, col] + 1, 0)
        if np.array_equal(after, level):
            return True
        level = after
    return False


_SHORT_CHAINS = 64  # hops a chain of waits may take before `levels` is asked instead


def staged(changes: Sequence[Change], peer: Mapping[tuple[int, int], int]) -> Order:
    """The Sets of ``changes`` in stages (see the module's docstring): every Set of a stage
    may go out at once; a stage starts when the one before is confirmed. Each block is
    written once where an order of whole blocks exists, else per entry level."""
    if _bring_up_without_loops(changes, peer):  # what `levels` would find, without its cost
        return Order([[Write(i, bytes(c.new), True) for i, c in enumerate(changes)]], [])
    lv, loops = levels(changes, peer)
    whole = None if loops else _whole_blocks(changes, peer, lv)
    if whole is not None:
        stages: dict[int, list[Write]] = {}
        for i, c in enumerate(changes):
            stages.setdefault(whole[i], []).append(Write(i, bytes(c.new), True))
        return Order([stages[m] for m in sorted(stages)], loops)
    by_stage: dict[int, list[Write]] = {}
    for i, c in enumerate(changes):
        due = {k: _due(c, k, level) for k, level in lv[i].items()}
        marks = sorted(set(due.values())) or [0]
        for m in marks:
            content = bytes(c.new[k] if due.get(k, -1) <= m else c.old[k] for k in range(B))  # type: ignore[index]
            by_stage.setdefault(m, []).append(Write(i, content, m == marks[-1]))
    return Order([by_stage[m] for m in sorted(by_stage)], loops)


@dataclasses.dataclass(frozen=True)
class MaskChange:
    """One MFT unit to change (32 PortMasks of one block and position): ``old`` as the switch
    holds it (None: not read), ``new``."""
    old: Sequence[int] | None
    new: Sequence[int]


@dataclasses.dataclass(frozen=True)
class MaskWrite:
    index: int
    masks: tuple[int, ...]
    final: bool


def mft_staged(changes: Sequence[MaskChange]) -> list[list[MaskWrite]]:
    """Stage 0 prunes (old AND new where a unit loses ports), stage 1 grows (new where it
    gains them, or was not read); a unit that only loses is done in stage 0, one that only
    gains in stage 1: a Set more only where a unit does both."""
    prune: list[MaskWrite] = []
    grow: list[MaskWrite] = []
    for i, c in enumerate(changes):
        new = tuple(c.new)
        if c.old is None:
            grow.append(MaskWrite(i, new, True))
            continue
        kept = tuple(o & n for o, n in zip(c.old, new))
        if kept == new:
            prune.append(MaskWrite(i, new, True))
        elif kept == tuple(c.old):
            grow.append(MaskWrite(i, new, True))
        else:
            prune.append(MaskWrite(i, kept, False))
            grow.append(MaskWrite(i, new, True))
    return [stage for stage in (prune, grow) if stage]


def mcast_loops(ports: Mapping[tuple[int, int], tuple[int, int]], masks: Mapping[int, Mapping[int, int]]) -> list[int]:
    """The MLIDs whose copies can go round for ever under ``masks`` (switch -> {MLID: port
    mask}): a circle of (switch, ingress port) states, a copy leaving by every port of the
    mask but the one it came in on. ``ports`` maps a switch port to the switch port beyond."""
    mlids = sorted({m for ms in masks.values() for m in ms})
    return [m for m in mlids if _circles(ports, {s: ms.get(m, 0) for s, ms in masks.items()})]


def _circles(ports: Mapping[tuple[int, int], tuple[int, int]], mask: Mapping[int, int]) -> bool:
    def nexts(state: tuple[int, int]) -> list[tuple[int, int]]:
        sw, inp = state
        m = mask.get(sw, 0) & ~(1 << inp)
        return [ports[(sw, p)] for p in range(m.bit_length()) if m >> p & 1 and (sw, p) in ports]

    colour: dict[tuple[int, int], int] = {}  # 1 on the path, 2 done
    for start in sorted(set(ports.values())):  # every circle enters its states over a cable
        if start in colour or not mask.get(start[0]):
            continue
        colour[start] = 1
        stack = [(start, iter(nexts(start)))]
        while stack:
            state, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                colour[state] = 2
                stack.pop()
            elif colour.get(nxt) == 1:
                return True
            elif nxt not in colour:
                colour[nxt] = 1
                stack.append((nxt, iter(nexts(nxt))))
    return False


# -- measuring an order ---------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Net:
    """What delivery needs: switch-to-switch links, where each LID lives (switch, port; port
    0 the switch itself), and the hosts behind each switch (the weight of its pairs)."""
    peer: Mapping[tuple[int, int], int]
    homes: Mapping[int, tuple[int, int]]
    hosts: Mapping[int, int]


def _delivers(net: Net, tables: Mapping[int, bytes | bytearray], src: int, lid: int) -> bool:
    home = net.homes[lid]
    sw, hops = src, 0
    while hops <= 64:
        t = tables.get(sw)
        port = t[lid] if t is not None and lid < len(t) else NO_PORT
        if (sw, port) == home:
            return True
        nxt = net.peer.get((sw, port))
        if nxt is None:
            return False  # no route, a dead port, or the wrong end port
        sw, hops = nxt, hops + 1
    return False  # a loop


def broken_steps(net: Net, before: Mapping[int, bytes], sets: Iterable[tuple[int, int, bytes]]) -> tuple[int, int]:
    """Apply ``sets`` ((switch, block, content)) one by one to ``before`` and count, after
    each, the (source switch, LID) pairs delivered before and after the whole change but not
    now, weighted by the source switch's hosts: (pair-steps broken, Sets)."""
    now = {s: bytearray(t) for s, t in before.items()}
    sets = list(sets)
    after = {s: bytearray(t) for s, t in before.items()}
    for sw, block, content in sets:
        after.setdefault(sw, bytearray(B * (block + 1)))
        _put(after[sw], block, content)
    sources = [s for s, n in net.hosts.items() if n]
    lids = sorted(net.homes)
    ok = {(s, lid) for s in sources for lid in lids
          if _delivers(net, before, s, lid) and _delivers(net, after, s, lid)}
    broken = 0
    for sw, block, content in sets:
        now.setdefault(sw, bytearray(B * (block + 1)))
        _put(now[sw], block, content)
        for lid in range(block * B, block * B + B):
            if lid in net.homes:
                broken += sum(net.hosts[s] for s in sources if (s, lid) in ok and not _delivers(net, now, s, lid))
    return broken, len(sets)


def _put(table: bytearray, block: int, content: bytes) -> None:
    if len(table) < B * (block + 1):
        table.extend(bytes([NO_PORT]) * (B * (block + 1) - len(table)))
    table[block * B:(block + 1) * B] = content


__all__ = ["Change", "Write", "Order", "Net", "levels", "staged", "broken_steps", "MaskChange", "MaskWrite",
           "mft_staged", "mcast_loops"]
