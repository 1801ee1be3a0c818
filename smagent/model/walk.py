"""The walk of the LFTs: where a packet for a DLID goes, switch to switch, and why it stops.

The rule, stated once here and used by every walker of the code (the subnet model's
`Subnet.route` and so the SA's PathRecords and TraceRecords, `verify`'s unicast check and
its numpy walk through `verify.unicast._step`, a live `smagent trace`, `whatif`):

- a port that owns the DLID takes it (a switch at port 0, whichever port it entered on);
- a switch forwards out of its LFT entry for the DLID (`lft_exit`): a DLID above
  LinearFDBTop or at or above LinearFDBCap, an entry of 255 (or none), a port the switch
  lacks and port 0 of a switch that does not own the DLID all stop the packet there;
- a CA port sends out of itself when it is the source, and a CA port reached that does
  not own the DLID stops it (misdelivered);
- the exit port must be cabled (unlinked: stop); a switch passed twice is a loop.

`walk` follows that rule over lookups the caller hands it (the model's tables, a verify
snapshot's, an LFT block read live), so a walker never owns a second loop; verify's bulk
walk (every DLID from every place, memoised, `verify.unicast`) decides each switch's step
with `lft_exit` too.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Union

from mad.forwarding import LFT_NO_PORT

# why a walk stops (the names are verify's dead-end causes, `verify.model.CAUSES`)
DELIVERED = "delivered"
ABOVE_TOP = "above_top"  # DLID above LinearFDBTop
ABOVE_CAP = "above_cap"  # DLID at or above LinearFDBCap
NO_ROUTE = "no_route"  # LFT entry 255, or no entry known
NO_SUCH_PORT = "no_such_port"  # the entry names a port the switch lacks
PORT_ZERO = "port_zero"  # the entry is port 0 at a switch that does not own the DLID
UNLINKED = "unlinked_port"  # the exit port has no cable
MISDELIVERED = "misdelivered"  # a CA port reached that does not own the DLID
LOOP = "loop"  # a switch passed twice
TOO_LONG = "too_long"  # more hops than `MAX_HOPS` (a loop the caller could not see)

MAX_HOPS = 64  # a DR path's limit; a longer walk is a loop anyway


def lft_exit(table: bytes, dlid: int, num_ports: int, top: int | None = None, cap: int | None = None
             ) -> Union[int, str]:
    """What one LFT switch that does not own ``dlid`` does with it: the exit port (1 ..
    ``num_ports``), or why it stops there. ``top``/``cap``: LinearFDBTop/Cap where known
    (None: the table alone decides; an entry past its end is no route)."""
    if top is not None or cap is not None:
        why = lft_bounds(dlid, top, cap)
        if why:
            return why
    port = table[dlid] if dlid < len(table) else LFT_NO_PORT
    return port if 0 < port <= num_ports else lft_entry(port, num_ports)  # the usual case without a call


def lft_bounds(dlid: int, top: int | None, cap: int | None) -> str | None:
    """Why a switch drops ``dlid`` before reading its entry (above LinearFDBTop, at or above
    LinearFDBCap), or None: `lft_exit`'s first half, for a walker that reads entries live."""
    if top is not None and dlid > top:
        return ABOVE_TOP
    if cap is not None and dlid >= cap:
        return ABOVE_CAP
    return None


def lft_entry(port: int, num_ports: int) -> Union[int, str]:
    """What an LFT entry means at a switch that does not own the DLID: the exit port, or
    why the packet stops (`lft_exit`'s second half)."""
    if port == LFT_NO_PORT:
        return NO_ROUTE
    if port > num_ports:
        return NO_SUCH_PORT
    if port == 0:
        return PORT_ZERO
    return port


Exit = Union[int, str, tuple]  # a port, or why the switch stops it (a cause, or (cause, detail))


@dataclasses.dataclass
class Walk:
    """A walk's ``hops``: ((node, exit port), (node, port entered)) per cable crossed;
    ``stop``: why it ended (`DELIVERED` or a cause above, or what ``exit_of`` said);
    ``at``: (node, port) where it ended; ``detail``: what ``exit_of`` gave with its cause."""
    hops: list[tuple[tuple[int, int], tuple[int, int]]]
    stop: str
    at: tuple[int, int]
    detail: object = None

    @property
    def delivered(self) -> bool:
        return self.stop == DELIVERED


def walk(src: tuple[int, int], dlid: int, *, is_switch: Callable[[int], bool],
         owns: Callable[[int, int], bool], exit_of: Callable[[int, int], Exit],
         link_of: Callable[[tuple[int, int]], tuple[int, int] | None], max_hops: int = MAX_HOPS) -> Walk:
    """Follow ``dlid`` from port ``src`` (node GUID, port; a switch's port 0) by the rule
    of the module docstring. ``owns(node, port)``: whether that port takes ``dlid`` (a
    switch's: any of its ports); ``exit_of(switch, dlid)``: the switch's exit port or why
    it stops (`lft_exit`'s answer, or the caller's own cause, alone or with a detail);
    ``link_of((node, port))``: the far end of the cable, None when unlinked."""
    node, port = src
    hops: list[tuple[tuple[int, int], tuple[int, int]]] = []
    seen: set[int] = set()
    for _ in range(max_hops):
        if owns(node, port):
            return Walk(hops, DELIVERED, (node, port))
        if is_switch(node):
            if node in seen:
                return Walk(hops, LOOP, (node, port))
            seen.add(node)
            out = exit_of(node, dlid)
            if out.__class__ is not int:
                cause, detail = out if out.__class__ is tuple else (out, None)
                return Walk(hops, cause, (node, port), detail)
        elif hops:
            return Walk(hops, MISDELIVERED, (node, port))
        else:
            out = port  # a CA sends out of the port it sends from
        here = (node, out)
        peer = link_of(here)
        if peer is None:
            return Walk(hops, UNLINKED, here)
        hops.append((here, peer))
        node, port = peer
    return Walk(hops, TOO_LONG, (node, port))
