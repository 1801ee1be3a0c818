"""Unicast routes of a fabric of LFT switches, for many DLIDs at once (numpy), for `verify`.

`verify` decides what one switch does with one DLID in one place (`verify.unicast._step`), and
follows those decisions DLID by DLID: O(switches x LIDs) steps of Python, a minute on
the 11,664-host tree. On a fabric whose switches all hold linear tables (no RFT), almost
every decision is "forward out of port e to the switch behind it", and which switch that
is depends only on (switch, LFT entry). This module follows those forwards for a chunk
of DLIDs and every starting switch at once, as array lookups, and leaves every other
decision to verify (the rules stay in one place): where a walk stops, verify's ``stop``
says how (delivered, a dead end, a misdelivery), once per (stopping switch, DLID).

A walk still moving after S hops (S switches) is a loop: its DLID goes back to verify's
own walk (``fallback``), which names the cycle. Channel dependencies (for the credit-loop
check) are collected the same way: along the walks from the switches where CA ports send.
`verify.check`'s results are the same either way; tests compare the two walks.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np

CHUNK = 1024  # DLIDs per batch: S x CHUNK arrays (1,620 switches: a few MB each)


def _ends(nxt, cols):
    """Where the walk from every switch stops, per DLID column: the next-switch map with
    stops as fixed points, composed with itself (pointer doubling) until nothing moves,
    at most log2(S) + 2 times. A loop never settles: its walks end anywhere on it (the
    caller finds them by a forward left at the end)."""
    S = nxt.shape[0]
    here = np.arange(S, dtype=np.int64)[:, None]
    jump = np.where(nxt >= 0, nxt, here)
    for _ in range(max(S, 2).bit_length() + 2):
        twice = jump[jump, cols]
        if np.array_equal(twice, jump):
            break
        jump = twice
    return jump


class Walker:
    """The forwards of every LFT switch: ``lft`` holds each switch's entry per DLID (255
    where verify's fast rule does not apply: `verify.model._Net._fast_hops`), ``to`` the switch
    behind each (switch, port) (-1: none); a chunk's next-switch array comes from both."""

    def __init__(self, net: Any):
        self.net = net
        S = len(net.st)
        self.S = S
        self.dlids = sorted(net.owner)
        top = max(self.dlids) + 1 if self.dlids else 1
        self.lft = np.full((S, top), 255, np.uint8)  # LFT entries; 255 where the fast path does not apply
        self.to = np.full((S, 256), -1, np.int32)  # (switch, port) -> the switch behind it
        for i, fast in enumerate(net.fast):
            own, stop, cap, lft, hops = fast
            n = min(top, stop + 1, cap, len(lft))
            if n > 0:
                self.lft[i, :n] = np.frombuffer(lft, np.uint8, n)
            for lid in own:
                if lid < top:
                    self.lft[i, lid] = 255
            for p, h in enumerate(hops):
                if h is not None:
                    self.to[i, p] = h[1] >> 1
        self.to[:, 255] = -1

    @classmethod
    def of(cls, net: Any) -> "Walker | None":
        """A walker for ``net``, or None when some switch is not a read LFT switch (RFT
        switches have two places each: verify walks those)."""
        if not net.st or not net.owner or any(f is None for f in net.fast):
            return None
        return cls(net)

    def failing(self, stop: Callable, fallback: Callable, sending: list[int], deps: dict | None
                ) -> Iterator[tuple[int, Any, dict]]:
        """(DLID, its owner, {source place: outcome} where it is not delivered) for every
        DLID in order: what `verify.unicast._resolve` gives at the places sources enter.
        ``stop(switch, dlid)``: the outcome of a walk that stops at that switch (None:
        delivered). With ``deps`` the channel dependencies of the routes from ``sending``
        (switch indices) are added, the first (lowest) DLID kept per dependency.
        ``fallback(dlid, deps)`` is verify's own walk, for DLIDs that loop."""
        src_rows = np.array(sorted(p >> 1 for p in self.net.sources), np.int64)
        found: list = []  # (keys, first DLIDs) of the dependencies, chunk by chunk
        for k in range(0, len(self.dlids), CHUNK):
            yield from self._chunk(self.dlids[k:k + CHUNK], stop, fallback, src_rows, sending,
                                   found if deps is not None else None, deps)
        if deps is not None and found:
            _merge(deps, np.concatenate([f[0] for f in found]), np.concatenate([f[1] for f in found]))

    def _chunk(self, dl: list[int], stop, fallback, src_rows, sending, found, deps):
        net = self.net
        d = np.array(dl, np.int64)
        cols = np.arange(len(dl))
        port = self.lft[:, d]  # S x C
        nxt = np.take_along_axis(self.to, port.astype(np.int64), axis=1)  # S x C: next switch or -1
        pos = _ends(nxt, cols)
        looping = set(np.nonzero((nxt[pos, cols] >= 0).any(axis=0))[0].tolist())
        # how each walk ends: ``stop`` at (stopping switch, DLID), once per distinct pair
        ends = pos[src_rows] if len(src_rows) else np.zeros((0, len(dl)), np.int64)
        if found is not None:
            found.append(self._deps(nxt, port, d, sending, looping))
        lo = ends.min(axis=0).tolist() if len(src_rows) else [0] * len(dl)
        hi = ends.max(axis=0).tolist() if len(src_rows) else [0] * len(dl)
        rows = src_rows.tolist()
        for c, dlid in enumerate(dl):
            own = net.owner[dlid]
            if c in looping:
                yield dlid, own, fallback(dlid, deps)
                continue
            # usually every walk ends at one switch (the destination's): one ``stop``
            stops = [lo[c]] if lo[c] == hi[c] else np.unique(ends[:, c]).tolist()
            res = {}
            for t in stops:
                o = stop(t, dlid)
                if o is not None:
                    res[t] = o
            if not res:
                yield dlid, own, {}
            elif len(stops) == 1:
                o = res[stops[0]]
                yield dlid, own, {2 * r: o for r in rows}
            else:
                col = ends[:, c]
                hit = np.nonzero(np.isin(col, list(res)))[0].tolist()
                yield dlid, own, {2 * rows[k]: res[int(col[k])] for k in hit}

    def _deps(self, nxt, port, d, sending: list[int], looping: set):
        """Channel dependencies along the walks from ``sending``: (switch, exit port) ->
        (next switch, its exit port), where both forward, as (keys, DLIDs) arrays (a key:
        the two channels, `_merge` splits it); looping DLIDs are left to the fallback (it
        adds theirs)."""
        S, C = nxt.shape
        cols = np.arange(C)
        hot = np.zeros((S, C), bool)
        cur = np.repeat(np.array(sorted(sending), np.int64)[:, None], C, axis=1)
        alive = np.ones(cur.shape, bool)
        for _ in range(S + 1):
            rows, cs = cur[alive], np.broadcast_to(cols, cur.shape)[alive]
            fresh = ~hot[rows, cs]
            if not fresh.any():
                break
            hot[rows, cs] = True
            step_to = nxt[cur, cols]
            alive &= step_to >= 0
            cur = np.where(alive, step_to, cur)
        for c in looping:
            hot[:, c] = False
        i, c = np.nonzero(hot & (nxt >= 0))
        j = nxt[i, c]
        both = nxt[j, c] >= 0
        i, c, j = i[both], c[both], j[both]
        a = (i << 8) | port[i, c]
        b = (j << 8) | port[j, c]
        return _first((a << 24) | b, d[c])


def _first(key, dlid):
    """Each key once, with its lowest DLID."""
    order = np.lexsort((dlid, key))
    key, dlid = key[order], dlid[order]
    keep = np.ones(len(key), bool)
    keep[1:] = key[1:] != key[:-1]
    return key[keep], dlid[keep]


def _merge(deps: dict, key, dlid) -> None:
    """Add the (keys, DLIDs) of `Walker._deps` to ``deps`` ({channel: {channel: first
    DLID}}, as `verify.unicast._add_deps` builds it), keeping the lowest DLID of each."""
    key, dlid = _first(key, dlid)
    a = key >> 24
    cuts = np.nonzero(a[1:] != a[:-1])[0] + 1
    starts = [0, *cuts.tolist()]
    ends = [*cuts.tolist(), len(a)]
    bs, ds, heads = (key & 0xFFFFFF).tolist(), dlid.tolist(), a[starts].tolist() if len(a) else []
    for head, lo, hi in zip(heads, starts, ends):
        new = dict(zip(bs[lo:hi], ds[lo:hi]))
        have = deps.get(head)
        if have is None:
            deps[head] = new
            continue
        for b, x in new.items():  # a looping DLID's walk (the fallback) added some already
            if b not in have or have[b] > x:
                have[b] = x
