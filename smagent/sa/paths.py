"""PathRecords (IBA 15.2.5.16) from the routes the SM programmed: the LFTs a packet
follows from its source port to its DLID decide the links, and the path's MTU and rate
are the smallest over them. The other fields are OpenSM's defaults for a subnet without
QoS: SL 0, the default partition's P_Key, hop limit 0 (no router), reversible, the
subnet's packet lifetime; MTU, rate and packet lifetime carry the "exactly" selector.

A query selects its endpoints by SGID or SLID and DGID or DLID (every port for an end it
does not name, as OpenSM); MTU, rate and packet lifetime are compared with their selectors
(greater than, less than, exactly, largest available), P_Key and SL as `path_record` says,
NumbPath limits the paths of a pair; the other components select nothing (`query`)."""
from __future__ import annotations

from mad import codes
from mad.sa import SaStatus
from mad.sa_records import PathRecord
from smagent.sa.records import Records
from smagent.subnet import Node

PACKET_LIFE_TIME = 18  # OpenSM's default (subnet_timeout 18: 4.096 us x 2^18, about 1 s)
EXACTLY, GREATER, LESS, LARGEST = 2, 0, 1, 3
# components decided by the endpoints or compared with selectors, not for equality;
# NumbPath is a limit (every path we give is one), Reversible asks for what all ours are


class PathQueryError(Exception):
    """The query cannot be answered: ``status`` is the SA status to send."""

    def __init__(self, status: SaStatus, why: str):
        super().__init__(why)
        self.status = status


def port_mtu(node: Node, port: int) -> int:
    """The MTU a port carries: its MTUCap, and on a link the NeighborMTU the SM set (a
    switch's port 0 has no link: its NeighborMTU means nothing)."""
    pi = node.ports.get(port)
    if pi is None:
        return 0
    if node.is_switch and port == 0 or not pi.neighbor_mtu:
        return pi.mtu_cap
    return min(pi.mtu_cap, pi.neighbor_mtu)


def path_record(recs: Records, src: tuple[Node, int], slid: int, dst: tuple[Node, int], dlid: int,
                p_key: int | None = None, service_id: int | None = None, sl: int | None = None) -> PathRecord | None:
    """The PathRecord from port ``src`` (as SLID) to ``dlid``, or None if the LFTs do not
    deliver it or the two ports share no partition (``p_key``: that one only). The SL:
    `Subnet.request_sl` (the QoS policy by ``service_id`` and ``p_key`` as the query
    names them, else the path's); ``sl`` asked for, where the SM does not decide it
    (`Subnet.sl_fixed`), as OpenSM answers, unless an SL2VL table on the way drops it."""
    s = recs.subnet
    (sn, sp), (dn, dp) = src, dst
    pkey = s.path_pkey((sn.guid, 0 if sn.is_switch else sp), (dn.guid, 0 if dn.is_switch else dp), p_key)
    if pkey is None:
        return None
    hops = s.route((sn.guid, sp), dlid)
    if hops is None:
        return None
    ends = [(sn, sp if not sn.is_switch else 0), (dn, dp if not dn.is_switch else 0)]
    crossed = [(s.nodes[g], p) for a, b in hops for g, p in (a, b)]
    mtu = min(port_mtu(n, p) for n, p in ends + crossed)
    rates = [codes.rate_code(n.ports[p]) for n, p in crossed if p in n.ports] or \
            [codes.rate_code(n.ports[p]) for n, p in ends if p in n.ports]
    rate = min(rates, key=codes.rate_gbps) if rates else 0
    chosen = s.request_sl((sn.guid, sp), dn.port_guid(dp), dlid, service_id, p_key, pkey)
    if sl is not None and sl != chosen and s.sl_fixed(dn.port_guid(dp), service_id, p_key):
        return None
    sl = chosen if sl is None else sl
    if s.sl_dropped(hops, sl):
        return None
    return PathRecord(dgid=recs.gid(dn, dp), sgid=recs.gid(sn, sp), dlid=dlid, slid=slid,
                      hop_limit=0, reversible=1, p_key=pkey if p_key is None else p_key, sl=sl,
                      mtu_selector=EXACTLY, mtu=mtu, rate_selector=EXACTLY, rate=rate,
                      packet_life_time_selector=EXACTLY,
                      packet_life_time=0 if (sn.guid, sp) == (dn.guid, dp) else PACKET_LIFE_TIME)  # loopback: 0


def lids_of(recs: Records, node: Node, port: int) -> tuple[int, ...]:
    """The LIDs of a port: a switch's one, a CA port's 2^LMC from its base."""
    base = recs.subnet.base_lid(node, port)
    pi = node.ports.get(port)
    if not base or node.is_switch or pi is None:
        return (base,) if base else ()
    return tuple(range(base, base + (1 << pi.lmc)))


def _endpoint(recs: Records, q: PathRecord, mask: int, gid_field: str,
              lid_field: str) -> list[tuple[Node, int, tuple[int, ...]]] | None:
    """(node, port, its LIDs) the query names: by GID every LID of the port, by LID that
    one; None when it names none."""
    s = recs.subnet
    if mask & PathRecord.mask(gid_field):
        gid = getattr(q, gid_field)
        hit = s.port_of_guid(gid & (1 << 64) - 1)
        if hit is None or recs.gid(*hit) != gid:
            raise PathQueryError(SaStatus.ERR_REQ_INVALID_GID, f"{gid_field} {gid:#034x} is no port of the subnet")
        return [(hit[0], hit[1], lids_of(recs, *hit))]
    if mask & PathRecord.mask(lid_field):
        lid = getattr(q, lid_field)
        hit = s.port_of_lid(lid)
        return [] if hit is None else [(hit[0], hit[1], (lid,))]
    return None


def _selected(mask: int, q: PathRecord, field: str, value: int, order=lambda v: v) -> bool:
    if not mask & PathRecord.mask(field):
        return True
    sel = getattr(q, f"{field}_selector") if mask & PathRecord.mask(f"{field}_selector") else EXACTLY
    want = getattr(q, field)
    if sel == GREATER:
        return order(value) > order(want)
    if sel == LESS:
        return order(value) < order(want)
    return sel == LARGEST or value == want


def _opensm_order(recs: Records) -> list[tuple[Node, int, tuple[int, ...]]]:
    """Every LID-carrying port in the order OpenSM walks them: its map of port GUIDs,
    keyed by the GUID's network-order bytes read as a little-endian number."""
    s = recs.subnet
    ports = [(n, p, lids_of(recs, n, p)) for n in s.nodes.values() for p in n.lid_ports() if lids_of(recs, n, p)]
    return sorted(ports, key=lambda e: int.from_bytes(e[0].port_guid(e[1]).to_bytes(8, "big"), "little"))


def lid_pairs(slids: tuple[int, ...], dlids: tuple[int, ...]):
    """(SLID, DLID, Preference) of two ports' LIDs (LMC), in OpenSM's order (its
    PathRecord and MultiPathRecord alike): paired by offset from the base, Preference 0,
    then every other pairing, source offset by source offset, Preference 2 (they overlap
    the first ones)."""
    yield from ((s, d, 0) for s, d in zip(slids, dlids))
    yield from ((s, d, 2) for i, s in enumerate(slids) for j, d in enumerate(dlids) if i != j)


def query(recs: Records, q: PathRecord, mask: int, requester_lid: int = 0) -> list[PathRecord]:
    """The PathRecords a query selects, as OpenSM answers: a source or destination not
    named is every port (in OpenSM's order, `_opensm_order`; neither: destination by
    destination, every source to it). Between two ports with several LIDs (LMC), the LIDs
    are paired by their offset from the base (base to base, base+1 to base+1, ...), then
    every other pairing with Preference 2 (`lid_pairs`), at most NumbPath pairs when the
    query gives it (a Get takes the first: IBA 1.2's NumbPath
    1, the caller's cut). TClass, FlowLabel, HopLimit, QoSClass, ServiceID (but for
    the QoS policy's SL) and Preference select nothing (OpenSM compares none of them
    outside multicast), and the answer carries none of them."""
    srcs = _endpoint(recs, q, mask, "sgid", "slid")
    dsts = _endpoint(recs, q, mask, "dgid", "dlid")
    if srcs is None or dsts is None:
        every = _opensm_order(recs)
        srcs, dsts = srcs if srcs is not None else every, dsts if dsts is not None else every
    pairs = ((a, b) for b in dsts for a in srcs)  # OpenSM's world walk: destination outermost
    wanted_pkey = q.p_key if mask & PathRecord.mask("p_key") else None
    wanted_sl = q.sl if mask & PathRecord.mask("sl") else None
    sid_mask = PathRecord.mask("service_id")  # both halves, or it is not a service ID (OpenSM's rule)
    service_id = q.service_id if mask & sid_mask == sid_mask else None
    per_pair = q.num_path if mask & PathRecord.mask("num_path") else None
    out: list[PathRecord] = []
    for (sn, sp, slids), (dn, dp, dlids) in pairs:
        found = 0
        for slid, dlid, preference in lid_pairs(slids, dlids):
            if per_pair is not None and found >= per_pair:
                break
            pr = path_record(recs, (sn, sp), slid, (dn, dp), dlid, wanted_pkey, service_id, wanted_sl)
            if pr is None:
                continue
            if preference:
                pr = pr.replace(preference=preference)
            if (_selected(mask, q, "mtu", pr.mtu) and _selected(mask, q, "rate", pr.rate, codes.rate_gbps)
                    and _selected(mask, q, "packet_life_time", pr.packet_life_time)):
                out.append(pr)
                found += 1
    return out
