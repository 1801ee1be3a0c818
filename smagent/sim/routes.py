"""How an SMP gets from the requester to an SMA and its response back.

Directed route (IBA 14.2.2; Linux drivers/infiniband/core/smi.c states the same rules
compactly as __smi_handle_dr_smp_send/_recv):

* outgoing (D=0): the node where the directed part starts sets HopPointer 1 and sends
  out InitialPath[1] (C14-9:1); each node the SMP enters records the entry port in
  ReturnPath[HopPointer]; an intermediate node must be a switch, increments HopPointer
  and sends out InitialPath[HopPointer] (C14-9:2); at HopPointer == HopCount the SMP
  is for this node's SMA and HopPointer becomes HopCount+1 (C14-9:3/4);
* returning (D=1): the responder decrements HopPointer and sends out
  ReturnPath[HopPointer] (C14-13:1); each switch on the way does the same (C14-13:2);
  where HopPointer reaches 1 the directed part ends and HopPointer becomes 0 (C14-13:3).
* LID-routed ends: a non-permissive DrSLID means the requester reached the start of
  the directed part LID-routed (LRH DLID = that node's LID), and the response goes back
  from there to DrSLID through the tables. A non-permissive DrDLID means the last
  switch of the directed part sends the SMP on LID-routed to DrDLID; the responder
  answers to that switch's LID and the response resumes the directed part there.

ibsim differs: its responses keep HopPointer 0 throughout and put the requester's own
port in ReturnPath[0] (unused by IBA; the simulator leaves it as the request had it),
and it drops SMPs with a LID-routed part.

LID-routed SMPs (class 0x01) travel through the switches' tables from the requester's
port to the LRH DLID; the response travels back to the request's SLID the same way.
"""
from __future__ import annotations

from mad.forwarding import PERMISSIVE_LID
from mad.header import Method
from mad.smp import MAX_HOPS
from smagent.sim import sma
from smagent.sim.dataplane import cross, send_unicast
from smagent.sim.nodes import Dropped


def directed(sim, req, src, sport: int, dlid: int):
    """Carry a directed-route request from (src, sport) and its response back; returns the
    response SMP value as the requester receives it, or raises Dropped."""
    hc = req.hop_count
    if hc > MAX_HOPS:
        raise Dropped(f"HopCount {hc} above {MAX_HOPS}")
    if req.d:
        raise Dropped("the requester sent a returning (D=1) directed-route SMP")
    if req.hop_pointer:
        raise Dropped(f"a new directed-route SMP must have HopPointer 0, not {req.hop_pointer}")
    obs = sim.observer
    lid_first = req.dr_slid != PERMISSIVE_LID
    lid_last = req.dr_dlid != PERMISSIVE_LID

    # Where the directed part starts: here, or a LID-routed trip away (LRH DLID).
    if lid_first:
        if dlid == PERMISSIVE_LID:
            raise Dropped(f"DrSLID {req.dr_slid:#x} needs an LRH DLID naming where the directed part starts")
        start, sin = send_unicast(src, sport, dlid, True, [])
        if obs:
            obs("lid", start.name, sin, 0, 0)
    else:
        start, sin = src, sport

    # Outgoing directed part.
    ipath, rpath = req.initial_path, bytearray(req.return_path)
    node, in_port = start, sin
    if hc:
        out = ipath[1]
        if not start.is_switch and out != sin:
            raise Dropped(f"InitialPath[1]={out}: a CA sends only out its own port {sin}", (start.name, sin))
        if not 1 <= out <= start.num_ports:
            raise Dropped(f"InitialPath[1]={out} is not a port", (start.name, None))
        hp = 1  # C14-9:1
        while True:
            if obs:
                obs("out", node.name, out, hp, 0)
            node, in_port = cross(node, out, True)
            rpath[hp] = in_port
            if hp == hc:
                break
            if not node.is_switch:
                raise Dropped(f"InitialPath passes through CA {node.name!r} at hop {hp}", (node.name, in_port))
            hp += 1  # C14-9:2
            out = ipath[hp]
            if not 1 <= out <= node.num_ports:
                raise Dropped(f"InitialPath[{hp}]={out} is not a port of {node.name!r}", (node.name, in_port))

    # C14-9:3: end of the directed part; HopPointer becomes HopCount+1.
    end, end_in = node, in_port
    if lid_last:
        if not end.is_switch:
            raise Dropped("a LID-routed last part must leave from a switch", (end.name, end_in))
        end_lid = end.lid_range(0)[0]
        if not end_lid:
            raise Dropped("the switch ending the directed part has no LID to be answered at", (end.name, 0))
        node, in_port = send_unicast(end, 0, req.dr_dlid, True, [])
    if obs:
        obs("sma", node.name, in_port, hc + 1, 0)
    status, data = sma.process(sim, node, in_port, req)
    req.method, req.d, req.status, req.data = Method.GET_RESP, 1, status, data
    req.return_path = bytes(rpath)
    if lid_last:
        back, _ = send_unicast(node, 0 if node.is_switch else in_port, end_lid, True, [])
        if back is not end:
            raise Dropped(f"the response to LID {end_lid} reached {back.name!r}, not the end of the directed part")
        node = end

    # Returning directed part.
    if hc:
        hp = hc  # C14-13:1
        out = rpath[hp]
        while True:
            if obs:
                obs("out", node.name, out, hp, 1)
            node, in_port = cross(node, out, True)
            if hp == 1:
                break
            if not node.is_switch:
                raise Dropped(f"ReturnPath passes through CA {node.name!r}", (node.name, in_port))
            hp -= 1  # C14-13:2
            out = rpath[hp]
            if not 1 <= out <= node.num_ports:
                raise Dropped(f"ReturnPath[{hp}]={out} is not a port of {node.name!r}", (node.name, in_port))
        if node is not start or (not start.is_switch and in_port != sin):
            raise Dropped(f"the response reached {node.name!r} port {in_port}, not where the directed part began",
                          (node.name, in_port))
    req.hop_pointer = 0  # C14-13:3
    if lid_first:
        back, bport = send_unicast(start, 0 if start.is_switch else sin, req.dr_slid, True, [])
        _check_requester(back, bport, src, sport, f"DrSLID {req.dr_slid}")
    if obs:
        obs("deliver", src.name, sport, 0, 1)
    return req


def lid_routed(sim, req, src, sport: int, dlid: int, slid: int | None):
    """Carry a LID-routed request to the port owning `dlid` and the response back to
    `slid` (default: the requester port's LID; for a permissive DLID, the permissive LID)."""
    if slid is None:
        slid = PERMISSIVE_LID if dlid == PERMISSIVE_LID else src.lid_range(sport)[0]
    dest, din = send_unicast(src, sport, dlid, True, [])
    status, data = sma.process(sim, dest, din, req, slid)
    req.method, req.status, req.data = Method.GET_RESP, status, data
    if slid == 0:
        raise Dropped("the requester's port has no LID: the response cannot be routed back", (dest.name, din))
    if slid == PERMISSIVE_LID:
        # No LID to route to: the answer goes back out the port the request came in on
        # (the seed: "internally forwarded back to the port that originally received the
        # request") and the first SMI it reaches takes it.
        back, bport = (dest, din) if dest is src else cross(dest, din, True)
    else:
        back, bport = send_unicast(dest, 0 if dest.is_switch else din, slid, True, [])
    _check_requester(back, bport, src, sport, f"SLID {slid}")
    return req


def _check_requester(node, port, src, sport, what):
    if node is not src or (not src.is_switch and port != sport):
        raise Dropped(f"the response to {what} reached {node.name!r} port {port}, not the requester", (node.name, port))
