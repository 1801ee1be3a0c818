"""The other SMs the daemon knows, and the few SMPs that find and ask them.

`OtherSms` is the table (never ourselves: our own trap 144 or SMInfo is not another SM)
with the count of consecutive unanswered Gets per SM: one lost Get does not make a MASTER
vanish from the status, `MISSES_TO_DROP` in a row do. The functions ask the fabric:
`ask_all` (every port with IsSM), `sm_at_lid` (the SM behind one LID, after a PortInfo Get
says IsSM), `census` (PortInfo of every CA port: costly, rate-limited by the caller)."""
from __future__ import annotations

import logging

from mad import smp as smpcodec
from mad.attributes import CAP_IS_SM, AttrID, PortInfo, SMInfo
from mad.forwarding import PERMISSIVE_LID, portinfo_modifier
from mad.header import Method
from smagent import discovery
from smagent import sweep as sweepmod
from smagent.sm.statemachine import Peer
from smagent.transport.base import Reply, Request, Transport

log = logging.getLogger("smagent.sm")

MISSES_TO_DROP = 3  # consecutive unanswered SMInfo Gets (light sweeps, refreshes) before an SM is dropped


def sminfo_get(path) -> Request:
    return Request(smpcodec.dr(Method.GET, AttrID.SM_INFO, path))


class OtherSms:
    def __init__(self, own_guid: int | None = None):
        self.own_guid = own_guid  # set once `start` knows it
        self.peers: dict[int, Peer] = {}
        self.misses: dict[int, int] = {}
        # SMs under another SM_Key: not peers (never handed over to nor polled), but listed:
        # two masters with different keys on one subnet is a misconfiguration to show
        self.others: dict[int, Peer] = {}

    def __bool__(self) -> bool:
        return bool(self.peers)

    def values(self) -> list[Peer]:
        return list(self.peers.values())

    def get(self, guid: int) -> Peer | None:
        return self.peers.get(guid)

    def replace(self, peers: list[Peer], strangers: list[Peer] | tuple = ()) -> list[Peer]:
        """After asking every IsSM port: exactly these (less ourselves), and these SMs
        under another SM_Key."""
        self.peers = {p.guid: p for p in peers if p.guid != self.own_guid}
        self.misses = {g: 0 for g in self.peers}
        self.others = {p.guid: p for p in strangers if p.guid != self.own_guid}
        return self.values()

    def stranger(self, peer: Peer) -> None:
        """An SM under another SM_Key, found on its own (an SM that announced itself)."""
        if peer.guid != self.own_guid:
            self.others[peer.guid] = peer

    def strangers(self) -> list[Peer]:
        return list(self.others.values())

    def add(self, peer: Peer) -> bool:
        """Add or update one; False (nothing done) if it is ourselves."""
        if peer.guid == self.own_guid:
            return False
        self.peers[peer.guid] = peer
        self.misses[peer.guid] = 0
        return True

    def update(self, peers: list[Peer], replies: list[Reply], what: str) -> None:
        """The answers to one SMInfo Get per SM in `peers`: state refreshed, or one more
        miss; dropped at `MISSES_TO_DROP` misses in a row."""
        for p, r in zip(peers, replies):
            if p.guid not in self.peers:
                continue
            if r.ok:
                s = r.value(SMInfo)
                p.state, p.priority, p.act_count = s.sm_state, s.priority, s.act_count
                self.misses[p.guid] = 0
                continue
            self.misses[p.guid] = self.misses.get(p.guid, 0) + 1
            if self.misses[p.guid] >= MISSES_TO_DROP:
                log.info("%s: %s did not answer %d SMInfo Gets in a row: dropped", what, p.describe(),
                         self.misses[p.guid])
                del self.peers[p.guid], self.misses[p.guid]
            else:
                log.info("%s: %s did not answer (%d of %d misses before it is dropped)", what, p.describe(),
                         self.misses[p.guid], MISSES_TO_DROP)


def ask_all(t: Transport, topo: discovery.Topology) -> list[Peer]:
    """SMInfo of every port with IsSM (`sweep.find_sms`)."""
    peers = []
    for n, p, pi, r in sweepmod.find_sms(t, topo):
        if not r.ok:
            log.info("%s port %d has IsSM but SMInfo did not answer: %s", n.description, p, r.error)
            continue
        s = r.value(SMInfo)
        peers.append(Peer(s.guid, s.priority, s.sm_state, s.act_count, n.path_to_port(p), pi.lid, n.description,
                          s.sm_key))
    return peers


def port_at_lid(topo: discovery.Topology | None, lid: int) -> tuple[discovery.DNode, int] | None:
    for n in (topo.nodes.values() if topo else ()):
        for p in n.lid_ports():
            if n.lid(p) == lid:
                return n, p
    return None


def sm_at(t: Transport, n: discovery.DNode, p: int, lid: int) -> Peer | None:
    """The SM on port `p` of `n`: a PortInfo Get first (is IsSM set?), then its SMInfo;
    None if the port has no SM or does not answer."""
    path = n.path_to_port(p)
    r = t.execute([Request(smpcodec.dr(Method.GET, AttrID.PORT_INFO, path, portinfo_modifier(p)))])[0]
    if not r.ok:
        return None
    pi = r.value(PortInfo)
    if not pi.capability_mask & CAP_IS_SM:
        return None
    r = t.execute([sminfo_get(path)])[0]
    if not r.ok:
        return None
    s = r.value(SMInfo)
    return Peer(s.guid, s.priority, s.sm_state, s.act_count, path, lid, n.description, s.sm_key)


def census(t: Transport, topo: discovery.Topology) -> tuple[int, discovery.Topology]:
    """PortInfo of every CA port but ours (IsSM may have appeared without a trap): how many
    Gets that took, and a fork of ``topo`` with what they read (``topo`` is the daemon's
    subnet model's, never changed)."""
    topo = topo.fork()
    reqs, where = [], []
    for n in topo.cas():
        for p, path in n.port_paths.items():
            if (n.guid, p) != topo.local:
                reqs.append(Request(smpcodec.dr(Method.GET, AttrID.PORT_INFO, path, p)))
                where.append((n, p))
    for (n, p), r in zip(where, t.execute(reqs)):
        if r.ok:
            n.ports[p] = r.value(PortInfo)
    return len(reqs), topo


def from_topology(topo: discovery.Topology | None, remote: SMInfo) -> Peer | None:
    """The SM that sent `remote`, placed by its port GUID in the topology."""
    found = topo.by_guid(remote.guid) if topo else None
    if not found:
        return None
    n, p = found
    if p is None:
        return None
    return Peer(remote.guid, remote.priority, remote.sm_state, remote.act_count, n.path_to_port(p),
                n.lid(p), n.description)


def sender_guid(topo: discovery.Topology | None, req, slid: int) -> int | None:
    """The GUID of the port a request came from, as the fabric carried it (not as its
    SMInfo claims): by its SLID, or by following a directed route's ReturnPath back
    from our port. None if the topology we know cannot tell."""
    if topo is None:
        return None
    if not req.directed:
        for n in topo.nodes.values():
            for p in n.lid_ports():
                pi = n.ports.get(p)
                if pi is not None and pi.lid and pi.lid <= slid < pi.lid + (1 << pi.lmc):
                    return n.guid if n.is_switch else n.port_guids.get(p)
        return None
    if req.dr_slid != PERMISSIVE_LID:
        return None  # a LID-routed part first: its origin is not in the ReturnPath
    at: tuple[int, int] | None = topo.local
    for hop in range(req.hop_count, 0, -1):  # out of each node by the port it came in on
        at = topo.neighbor(at[0], req.return_path[hop]) if at else None
    if at is None:
        return None
    n = topo.nodes[at[0]]
    return n.guid if n.is_switch else n.port_guids.get(at[1])
