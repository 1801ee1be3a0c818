"""Packet forwarding through the simulated switches, and the data-plane trace.

The forwarding decisions follow the seed text (switch port 0, LFT, RFT, MFT and their
discard rules) and IBA 18.2.4; LID-routed SMPs use the same code with `smp=True`:

* unicast at a switch: the switch's own LID (port 0) or the permissive LID of an SMP
  goes to its management port; otherwise the LFT (discard above LinearFDBTop, above
  LinearFDBCap, on 0xFF, on a port that does not exist; port 0 = the management port)
  or the RFT (first Valid entry whose BaseLID/LMC range holds the DLID; no match: out
  DefaultPort, except that a packet that came in on DefaultPort is discarded);
* multicast at a switch: the MFT entry's port mask minus the ingress port; an all-zero
  entry, or an MLID above the table (MulticastFDBCap, MulticastFDBTop when set), uses
  DefaultMulticastPrimaryPort, or DefaultMulticastNotPrimaryPort for packets that came
  in on the primary port; a default port that does not exist discards;
* links: data needs both ends ACTIVE; SMPs (VL15) cross links in INIT, ARMED or
  ACTIVE. A CA accepts a unicast DLID within its LID range base..base+2^LMC-1.
* link configuration (a data packet given as `Packet`: SL, size, P_Key): on every hop
  the packet must fit the NeighborMTU of both ends, its SL must map (the sending
  port's SLtoVLMappingTable: a CA port's, or the switch's for this input/output pair)
  to a data VL both ends run (below OperationalVLs; VL15 is dropped), and the port
  that receives it at the end must hold its P_Key: same base, and at least one of the
  two a full member (IBA 10.9.3); a switch port with PartitionEnforcementInbound
  (Outbound) set drops a packet entering (leaving) it whose P_Key base its own P_Key
  table lacks (IBA 10.9.4).
"""
from __future__ import annotations

import collections
import dataclasses
from typing import Any

from mad.codes import DATA_VLS, VL15
from mad.codes import MTUS as MTU_BYTES
from mad.forwarding import (
    LFT_NO_PORT, MULTICAST_LID_MAX, MULTICAST_LID_MIN, PERMISSIVE_LID, PKEY_FULL_MEMBER, rft_decode,
)
from mad.attributes import PortState
from smagent.sim.nodes import ACTIVE, DOWN, Dropped, Looped

MAX_HOPS = 64  # no route in a subnet is longer; more means a forwarding loop


@dataclasses.dataclass(slots=True)
class Trace:
    """Where a packet went.

    `hops`: (node, in_port, out_port) in order; in_port None at the source, out_port None
    where the packet was accepted or dropped, 0 for a switch's management port.
    `outcome`: 'delivered', 'dropped' or 'loop'. `dest`: (node, port) for unicast, a
    frozenset of them for multicast. `reason`/`where`: why and where (node, port) the
    packet (for multicast: the first branch) was discarded; `drops` lists every
    discarded multicast branch as (reason, where).
    """
    outcome: str
    hops: list
    dest: object = None
    reason: str | None = None
    where: tuple | None = None
    drops: list = dataclasses.field(default_factory=list)

    @property
    def delivered(self) -> bool:
        return self.outcome == "delivered"

    @property
    def path(self) -> list[str]:
        return [h[0] for h in self.hops]


@dataclasses.dataclass(frozen=True, slots=True)
class Packet:
    """A data packet's link-level facts: service level, size in bytes (payload the MTU
    bounds), P_Key (None: the sending port's P_Key at index 0)."""
    sl: int = 0
    size: int = 256
    pkey: int | None = None


def check_hop(node, in_port: int, out: int, peer, pkt: Packet) -> None:
    """Dropped unless `pkt` fits the link out of `node` port `out` (entered on `in_port`;
    a CA's own port for the sender): MTU and the SL's VL on both ends."""
    other, oport = peer
    mtu = min(MTU_BYTES.get(node.pi[out].neighbor_mtu, 0), MTU_BYTES.get(other.pi[oport].neighbor_mtu, 0))
    if pkt.size > mtu:
        raise Dropped(f"{pkt.size}-byte packet exceeds the link MTU of {mtu} bytes (NeighborMTU)", (node.name, out))
    key = (in_port, out) if node.is_switch else (0, out)
    vl = node.sl2vl.get(key, node.sl2vl_default)[pkt.sl]
    if vl == VL15:
        raise Dropped(f"SL {pkt.sl} maps to VL15 (SL2VL), a data packet there is dropped", (node.name, out))
    vls = min(DATA_VLS.get(node.pi[out].operational_vls, 0), DATA_VLS.get(other.pi[oport].operational_vls, 0))
    if vl >= vls:
        raise Dropped(f"SL {pkt.sl} maps to VL{vl}, but the link runs {vls} data VL{'s' if vls != 1 else ''} "
                      f"(OperationalVLs)", (node.name, out))


def pkey_matches(a: int, b: int) -> bool:
    """IBA 10.9.3: same 15-bit base (not 0), and at least one of the two a full member."""
    base = a & ~PKEY_FULL_MEMBER
    return bool(base) and base == b & ~PKEY_FULL_MEMBER and bool((a | b) & PKEY_FULL_MEMBER)


def check_pkey(node, port: int, pkey: int) -> None:
    if not any(pkey_matches(pkey, k) for k in node.pkeys[port]):
        raise Dropped(f"P_Key {pkey:#06x} is not in the receiving port's P_Key table", (node.name, port))


def check_switch_pkey(node, port: int, pkey: int, direction: str) -> None:
    """Switch partition enforcement (IBA 10.9.4) on ``port`` when its PortInfo asks for it
    in ``direction`` ("inbound"/"outbound"): the P_Key's 15-bit base must be in the
    port's table (membership is the end ports' matter)."""
    if not getattr(node.pi[port], f"partition_enforcement_{direction}"):
        return
    base = pkey & ~PKEY_FULL_MEMBER
    if not base or not any(k & ~PKEY_FULL_MEMBER == base for k in node.pkeys[port] if k):
        raise Dropped(f"P_Key {pkey:#06x} is not in the switch port's P_Key table ({direction} enforcement)",
                      (node.name, port))


# -- single decisions ------------------------------------------------------------------
def cross(node, out: int, smp: bool):
    """The (node, port) a packet sent out of `node` port `out` arrives on, or Dropped."""
    peer = node.peers[out]
    if peer is None:
        raise Dropped(f"exit port {out} has no link", (node.name, out))
    other, oport = peer
    if smp:
        if node.state[out] == DOWN or other.state[oport] == DOWN:
            raise Dropped(f"link on port {out} is down", (node.name, out))
    else:
        if node.state[out] != ACTIVE:
            raise Dropped(f"exit port {out} is {PortState(node.state[out]).name}, data needs ACTIVE",
                          (node.name, out))
        if other.state[oport] != ACTIVE:
            raise Dropped(f"port {oport} is {PortState(other.state[oport]).name}, data needs ACTIVE",
                          (other.name, oport))
    return peer


def rft_lookup(sw, dlid: int) -> int | None:
    """The exit port of the first Valid RFT entry matching `dlid` (map rebuilt after Sets)."""
    m = sw.rft_map
    if m is None:
        m = {}
        for packed in sw.rft:
            if not packed:
                continue
            e = rft_decode(packed)
            if not e.valid:
                continue
            first = e.base_lid & ~((1 << e.lmc) - 1)
            for lid in range(first, first + (1 << e.lmc)):
                m.setdefault(lid, e.port)
        sw.rft_map = m
    return m.get(dlid)


def unicast_port(sw, in_port: int, dlid: int, smp: bool) -> int:
    """Exit port at switch `sw` for a unicast `dlid` that came in on `in_port` (0 = the
    management port), or Dropped with the seed's discard rule."""
    if dlid == PERMISSIVE_LID:
        if smp:
            return 0  # a permissive-LID SMP is for the first SMA that gets it
        raise Dropped("permissive DLID on a data packet", (sw.name, in_port))
    lo, hi = sw.lid_range(0)
    if lo <= dlid <= hi:
        return 0
    lft = sw.lft
    if lft is not None:
        si = sw.si
        if dlid > si.linear_fdb_top:
            raise Dropped(f"DLID {dlid} above LinearFDBTop {si.linear_fdb_top}", (sw.name, in_port))
        if dlid >= len(lft):
            raise Dropped(f"DLID {dlid} above LinearFDBCap {len(lft)}", (sw.name, in_port))
        port = lft[dlid]
        if port == LFT_NO_PORT:
            raise Dropped(f"LFT entry for DLID {dlid} is 0xFF (no port)", (sw.name, in_port))
        if port > sw.num_ports:
            raise Dropped(f"LFT sends DLID {dlid} to port {port}, which does not exist", (sw.name, in_port))
        return port
    if sw.rft is not None:
        port = rft_lookup(sw, dlid)
        if port is None:
            default = sw.si.default_port
            if in_port == default:
                raise Dropped(f"DLID {dlid} matches no RFT entry and came in on DefaultPort {default}",
                              (sw.name, in_port))
            port = default
            if port > sw.num_ports:
                raise Dropped(f"DefaultPort {port} does not exist", (sw.name, in_port))
        elif port > sw.num_ports:
            raise Dropped(f"RFT sends DLID {dlid} to port {port}, which does not exist", (sw.name, in_port))
        return port
    raise Dropped("switch has no unicast forwarding table", (sw.name, in_port))


def multicast_ports(sw, in_port: int, mlid: int) -> list[int]:
    """Exit ports at switch `sw` for multicast `mlid` that came in on `in_port`."""
    mft = sw.mft
    si = sw.si
    mask = 0
    idx = mlid - MULTICAST_LID_MIN
    top = si.multicast_fdb_top  # 0: the switch does not bound the table below its cap
    if mft is not None and idx < len(mft) and (top == 0 or mlid <= top):
        mask = mft[idx]
    if mask:
        mask &= ~(1 << in_port)  # never back out the ingress port
        mask &= (1 << (sw.num_ports + 1)) - 1  # mask bits of ports that do not exist
        return [p for p in range(sw.num_ports + 1) if mask >> p & 1]
    primary = si.default_multicast_primary_port
    port = si.default_multicast_not_primary_port if in_port == primary else primary
    if port > sw.num_ports:
        which = "NotPrimary" if in_port == primary else "Primary"
        raise Dropped(f"DefaultMulticast{which}Port {port} does not exist", (sw.name, in_port))
    return [] if port == in_port else [port]


def ca_accepts(ca, port: int, dlid: int, smp: bool) -> bool:
    if dlid == PERMISSIVE_LID:
        return smp
    lo, hi = ca.lid_range(port)
    return lo <= dlid <= hi


# -- whole routes ------------------------------------------------------------------------
def send_unicast(node, port: int, dlid: int, smp: bool, hops: list, pkt: Packet | None = None):
    """Follow a unicast packet that `node` sends from `port` (a switch: port 0) to its end.
    Returns (node, in_port) of the port that accepts it; appends to `hops`; Dropped or
    Looped otherwise. With `pkt` (data only) the link configuration is enforced too."""
    if node.is_switch:
        return _walk(node, 0, dlid, smp, hops, first=True, pkt=pkt)
    if ca_accepts(node, port, dlid, smp) and dlid != PERMISSIVE_LID:
        hops.append((node.name, None, None))  # loopback inside the CA
        return node, port
    nxt, nin = cross(node, port, smp)
    if pkt is not None:
        try:
            check_hop(node, port, port, (nxt, nin), pkt)
        except Dropped:
            hops.append((node.name, None, None))
            raise
    hops.append((node.name, None, port))
    return _walk(nxt, nin, dlid, smp, hops, pkt=pkt)


def _walk(node, in_port, dlid, smp, hops, first=False, pkt=None):
    name = node.name
    for _ in range(MAX_HOPS):
        if not node.is_switch:
            if ca_accepts(node, in_port, dlid, smp):
                hops.append((name, in_port, None))
                if pkt is not None:
                    check_pkey(node, in_port, pkt.pkey)
                return node, in_port
            hops.append((name, in_port, None))
            raise Dropped(f"DLID {dlid} is not a LID of this port", (name, in_port))
        try:
            out = unicast_port(node, in_port, dlid, smp)
        except Dropped:
            hops.append((name, None if first else in_port, None))
            raise
        if out == 0:
            hops.append((name, None if first else in_port, 0))
            return node, in_port
        nxt = cross(node, out, smp)
        if pkt is not None:
            try:
                if not first:
                    check_switch_pkey(node, in_port, pkt.pkey, "inbound")
                check_switch_pkey(node, out, pkt.pkey, "outbound")
                check_hop(node, in_port, out, nxt, pkt)
            except Dropped:
                hops.append((name, None if first else in_port, None))
                raise
        hops.append((name, None if first else in_port, out))
        first = False
        node, in_port = nxt
        name = node.name
    raise Looped(f"more than {MAX_HOPS} hops: forwarding loop", (name, in_port))


def trace(sim, src, dlid: int, *, multicast: bool | None = None, smp: bool = False,
          packet: Packet | None = None) -> Trace:
    """Follow a packet from `src` = (node name, port) to `dlid` through the current tables.

    `multicast` defaults to whether `dlid` is a multicast LID. With `smp` the packet is
    a LID-routed SMP (VL15: non-ACTIVE links carry it, the permissive LID is allowed).
    With `packet` (unicast data) each hop's MTU and VLs and the receiver's P_Keys are
    checked as well.
    """
    name, port = src
    node = sim.node(name)
    if not node.port_exists(port) or (node.is_switch and port != 0):
        raise ValueError(f"{name!r} port {port}: a packet starts at a CA port or a switch's port 0")
    if multicast is None:
        multicast = MULTICAST_LID_MIN <= dlid <= MULTICAST_LID_MAX
    if multicast:
        return _trace_multicast(node, port, dlid)
    hops: list = []
    if packet is not None and not smp and packet.pkey is None:
        packet = dataclasses.replace(packet, pkey=node.pkeys[port][0] if node.pkeys[port] else 0)
    try:
        dest, dport = send_unicast(node, port, dlid, smp, hops, None if smp else packet)
    except Looped as d:
        return Trace("loop", hops, reason=d.reason, where=d.where)
    except Dropped as d:
        return Trace("dropped", hops, reason=d.reason, where=d.where)
    return Trace("delivered", hops, dest=(dest.name, dport if not dest.is_switch else 0))


def _trace_multicast(node, port, mlid) -> Trace:
    hops: list = []
    dests: set = set()
    drops: list = []
    seen: set = set()
    looped = False
    work: collections.deque[tuple[Any, int, bool]] = collections.deque()
    if node.is_switch:
        work.append((node, 0, True))
    else:
        try:
            nxt, nin = cross(node, port, False)
            hops.append((node.name, None, port))
            work.append((nxt, nin, False))
        except Dropped as d:
            drops.append((d.reason, d.where))
    while work:
        n, inp, origin = work.popleft()
        key = (n.index, inp)
        if key in seen:
            looped = True  # a copy came back through a port it already entered
            continue
        seen.add(key)
        shown_in = None if origin else inp
        if not n.is_switch:
            dests.add((n.name, inp))
            hops.append((n.name, inp, None))
            continue
        try:
            outs = multicast_ports(n, inp, mlid)
        except Dropped as d:
            drops.append((d.reason, d.where))
            hops.append((n.name, shown_in, None))
            continue
        for p in outs:
            if p == 0:
                dests.add((n.name, 0))
                hops.append((n.name, shown_in, 0))
                continue
            try:
                nxt, nin = cross(n, p, False)
            except Dropped as d:
                drops.append((d.reason, d.where))
                continue
            hops.append((n.name, shown_in, p))
            work.append((nxt, nin, False))
    first = drops[0] if drops else (None, None)
    if looped:
        return Trace("loop", hops, dest=frozenset(dests), reason="multicast copy re-entered a port: forwarding loop",
                     drops=drops)
    if dests:
        return Trace("delivered", hops, dest=frozenset(dests), drops=drops)
    return Trace("dropped", hops, dest=frozenset(), reason=first[0] or "no exit port", where=first[1], drops=drops)
