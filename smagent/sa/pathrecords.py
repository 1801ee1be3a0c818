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

from typing import Iterator

from mad import codes
from mad.forwarding import PKEY_DEFAULT
from mad.sa import SaStatus
from mad.sa_records import PathRecord
from smagent.config.qospolicy import Membership, covers
from smagent.model.order import opensm_key
from smagent.sa.records import Records
from smagent.model.topology import DNode

PACKET_LIFE_TIME = 18  # OpenSM's default (subnet_timeout 18: 4.096 us x 2^18, about 1 s)
EXACTLY, GREATER, LESS, LARGEST = 2, 0, 1, 3
# components decided by the endpoints or compared with selectors, not for equality;
# NumbPath is a limit (every path we give is one), Reversible asks for what all ours are


class PathQueryError(Exception):
    """The query cannot be answered: ``status`` is the SA status to send."""

    def __init__(self, status: SaStatus, why: str):
        super().__init__(why)
        self.status = status


def path_record(recs: Records, src: tuple[DNode, int], slid: int, dst: tuple[DNode, int], dlid: int,
                p_key: int | None = None, service_id: int | None = None, sl: int | None = None,
                qos_class: int | None = None) -> PathRecord | None:
    """The PathRecord from port ``src`` (as SLID) to ``dlid``, or None if the LFTs do not
    deliver it or the two ports share no partition (``p_key``: that one only); its
    P_Key, SL, MTU, rate and packet lifetime are `path_terms`'."""
    terms = path_terms(recs, src, dst, dlid, p_key, service_id, sl, qos_class)
    return None if terms is None else record_of(recs.gid(*dst), recs.gid(*src), dlid, slid, terms)


def record_of(dgid: int, sgid: int, dlid: int, slid: int, terms: tuple[int, int, int, int, int]) -> PathRecord:
    """The PathRecord of a path with these ends and `path_terms`: hop limit 0 (no router),
    reversible, MTU, rate and packet lifetime 'exactly'."""
    p_key, sl, mtu, rate, life = terms
    return PathRecord(dgid=dgid, sgid=sgid, dlid=dlid, slid=slid, hop_limit=0, reversible=1, p_key=p_key, sl=sl,
                      mtu_selector=EXACTLY, mtu=mtu, rate_selector=EXACTLY, rate=rate,
                      packet_life_time_selector=EXACTLY, packet_life_time=life)


def path_terms(recs: Records, src: tuple[DNode, int], dst: tuple[DNode, int], dlid: int, p_key: int | None = None,
               service_id: int | None = None, sl: int | None = None,
               qos_class: int | None = None) -> tuple[int, int, int, int, int] | None:
    """(P_Key, SL, MTU, Rate, PacketLifeTime) of the path from port ``src`` to ``dlid``
    (port ``dst``), or None if the LFTs do not deliver it or the two ports share no
    partition (``p_key``: that one only, and it is the answer's). With a QoS policy, the
    level of the query's rule (`Subnet.qos_rule`, by ``service_id``, ``p_key`` and
    ``qos_class`` as the query names them) caps MTU and rate, sets the packet lifetime,
    and with P_Keys limits the P_Key (`_level_pkey`), as OpenSM's pr_rcv_get_path_parms.
    The SL: `Subnet.request_sl`; ``sl`` asked for, where the SM does not decide it
    (`Subnet.sl_fixed`), as OpenSM answers, unless an SL2VL table on the way drops it."""
    s = recs.subnet
    (sn, sp), (dn, dp) = src, dst
    ends = [(sn.guid, sp if not sn.is_switch else 0), (dn.guid, dp if not dn.is_switch else 0)]
    rule = s.qos_rule(sn.port_guid(sp), dn.port_guid(dp), service_id, p_key, qos_class)
    level = s.qos_level(rule)
    if level is not None and level.pkeys:
        pkey = _level_pkey(s, ends, level.pkeys, p_key)
    else:
        pkey = s.path_pkey(ends[0], ends[1], p_key)
    if pkey is None:
        return None
    got = _mtu_rate(recs, sn, sp, dlid, ends)
    if got is None:
        return None
    mtu, rate = got
    if level is not None:
        if level.mtu_limit is not None and mtu > level.mtu_limit:
            mtu = level.mtu_limit
        if level.rate_limit is not None and codes.rate_gbps(rate) > codes.rate_gbps(level.rate_limit):
            rate = level.rate_limit
    chosen = s.request_sl((sn.guid, sp), dn.port_guid(dp), dlid, service_id, p_key, pkey, rule)
    if sl is not None and sl != chosen and s.sl_fixed():
        return None
    sl = chosen if sl is None else sl
    if sl in s._sls_to_vl15 and s.sl_dropped(s.route((sn.guid, sp), dlid) or [], sl):
        return None
    if (sn.guid, sp) == (dn.guid, dp):
        life = 0  # a loopback's (IBA 1.2 table 205)
    else:
        life = level.packet_life if level is not None and level.packet_life is not None else PACKET_LIFE_TIME
    return pkey if p_key is None else p_key, sl, mtu, rate, life


def _level_pkey(s, ends: list, allowed: tuple, p_key: int | None) -> int | None:
    """The P_Key of a path whose QoS level names P_Keys (15-bit ``allowed`` ranges): the
    one asked if the level has it and the ports share it; else the lowest of the level's
    the two share (OpenSM walks its sorted ranges up), as OpenSM gives it: its 15 bits, no
    membership bit; None: no path."""
    if p_key is not None:
        return s.path_pkey(ends[0], ends[1], p_key) if covers(allowed, p_key & 0x7FFF) else None
    held = [PKEY_DEFAULT] if s.pkeys is None else s.pkeys.get(ends[0], ())
    for pk in sorted({k & 0x7FFF for k in held if covers(allowed, k & 0x7FFF)}):
        if s.path_pkey(ends[0], ends[1], pk) is not None:
            return pk
    return None


def source_class(recs: Records, node: DNode, port: int) -> tuple:
    """What `path_terms` reads of its source port, but which port it is: ports of one
    class get the same P_Key, SL, MTU and rate to every DLID but their own (a loopback),
    unless an SL2VL table on the way sends the SL to VL15 (`Subnet.sl_dropped` then reads
    the source's own table). A CA port cabled to a switch: that switch (its LFTs, its path
    summaries, its row of `Subnet.path_sls`), the MTU and rate of both ends of its link,
    its P_Keys, and with a QoS policy matching by source, the rules whose source groups hold
    it; any other port is a class of its own."""
    s = recs.subnet
    if not node.is_switch:
        peer = s.links.get((node.guid, port))
        if peer is not None and s.nodes[peer[0]].is_switch:
            caps = recs.port_caps
            policy = s.qos_policy
            members = s.qos_members or Membership()
            sources = () if policy is None or not policy.by_source else tuple(
                i for i, r in enumerate(policy.rules) if r.sources and members.contains(r.sources, node.port_guid(port)))
            return (peer[0], caps.get((node.guid, port)), caps.get(peer),
                    None if s.pkeys is None else s.pkeys.get((node.guid, port)), sources)
    return (node.guid, port)


def _mtu_rate(recs: Records, sn: DNode, sp: int, dlid: int, ends: list) -> tuple[int, int] | None:
    """(MTU, Rate code) of the path from port (``sn``, ``sp``) to ``dlid``: the smallest
    MTU over its ``ends`` and every port the LFTs take it through, the slowest rate over
    those ports (the ends' without any); None if the LFTs do not deliver it. From a CA
    port cabled to a switch: its link, then what the switch's path summary says
    (`Records.downstream`); from a switch: its own summary; anything else walked
    (`walked_mtu_rate`)."""
    caps = recs.port_caps
    if sn.is_switch:  # its own summary: every pair's table asks every switch for every LID
        down = recs.downstream(sn.guid, dlid)
        if down is None:
            return None
        if down[1] != float("inf") and all(k in caps for k in ends):
            return min([down[0]] + [caps[k][0] for k in ends]), down[2]
        return walked_mtu_rate(recs, sn, sp, dlid, ends)  # its own LID, or ports not read: as walked
    peer = recs.subnet.links.get((sn.guid, sp))
    if peer is None or not recs.subnet.nodes[peer[0]].is_switch or recs.subnet.lids.get(dlid) == (sn.guid, sp):
        return walked_mtu_rate(recs, sn, sp, dlid, ends)
    down = recs.downstream(peer[0], dlid)
    if down is None:
        return None
    link = [caps[k] for k in ((sn.guid, sp), peer) if k in caps]
    if not link and down[1] == float("inf"):  # no port on the way known: the ends' rate
        return walked_mtu_rate(recs, sn, sp, dlid, ends)
    slow = min(link, key=lambda c: c[2]) if link else None
    rate = down[2] if slow is None or down[1] <= slow[2] else slow[1]
    return min([down[0]] + [c[0] for c in link] + [caps[k][0] if k in caps else 0 for k in ends]), rate


def walked_mtu_rate(recs: Records, sn: DNode, sp: int, dlid: int, ends: list) -> tuple[int, int] | None:
    """`_mtu_rate` by walking the LFTs from the port itself."""
    hops = recs.subnet.route((sn.guid, sp), dlid)
    if hops is None:
        return None
    caps = recs.port_caps
    crossed = [gp for a, b in hops for gp in (a, b)]
    mtu = min(caps[k][0] if k in caps else 0 for k in ends + crossed)
    rated = [caps[k] for k in crossed if k in caps] or [caps[k] for k in ends if k in caps]
    return mtu, min(rated, key=lambda c: c[2])[1] if rated else 0


def lids_of(recs: Records, node: DNode, port: int) -> tuple[int, ...]:
    """The LIDs of a port: a switch's one, a CA port's 2^LMC from its base."""
    base = recs.subnet.base_lid(node, port)
    pi = node.ports.get(port)
    if not base or node.is_switch or pi is None:
        return (base,) if base else ()
    return tuple(range(base, base + (1 << pi.lmc)))


def _endpoint(recs: Records, q: PathRecord, mask: int, gid_field: str,
              lid_field: str) -> list[tuple[DNode, int, tuple[int, ...]]] | None:
    """(node, port, its LIDs) the query names: by GID every LID of the port, by LID that
    one; None when it names none. A port's alias GID names it too. A GID or LID of no port
    names nothing: no record (a
    Get's ERR_NO_RECORDS), as OpenSM 3.3.23 answers (its pr_rcv_get_end_points finds
    ERR_REQ_INVALID_GID, and its caller answers with the empty list instead)."""
    s = recs.subnet
    if mask & _MASKS[gid_field]:
        hit = recs.port_of_gid(getattr(q, gid_field))  # its port GUID or an alias GUID of it
        return [] if hit is None else [(hit[0], hit[1], lids_of(recs, *hit))]
    if mask & _MASKS[lid_field]:
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


def opensm_order(recs: Records) -> list[tuple[DNode, int, tuple[int, ...]]]:
    """Every LID-carrying port in the order OpenSM walks them: its map of port GUIDs
    (`model.order.opensm_key`)."""
    s = recs.subnet
    ports = [(n, p, lids_of(recs, n, p)) for n in s.nodes.values() for p in n.lid_ports() if lids_of(recs, n, p)]
    return sorted(ports, key=lambda e: opensm_key(e[0].port_guid(e[1])))


_MASKS = {f: PathRecord.mask(f) for f in ("sgid", "dgid", "slid", "dlid")}  # components, worked out once
_M_PKEY, _M_SL, _M_SERVICE_ID, _M_NUM_PATH, _M_QOS_CLASS = (PathRecord.mask(f) for f in (
    "p_key", "sl", "service_id", "num_path", "qos_class"))


def lid_pairs(slids: tuple[int, ...], dlids: tuple[int, ...]):
    """(SLID, DLID, Preference) of two ports' LIDs (LMC), in OpenSM's order (its
    PathRecord and MultiPathRecord alike): paired by offset from the base, Preference 0,
    then every other pairing, source offset by source offset, Preference 2 (they overlap
    the first ones)."""
    yield from ((s, d, 0) for s, d in zip(slids, dlids))
    yield from ((s, d, 2) for i, s in enumerate(slids) for j, d in enumerate(dlids) if i != j)


def query(recs: Records, q: PathRecord, mask: int, requester_lid: int = 0) -> list[PathRecord]:
    """Every PathRecord a query selects (`each_path`)."""
    return list(each_path(recs, q, mask, requester_lid))


def each_path(recs: Records, q: PathRecord, mask: int, requester_lid: int = 0) -> Iterator[PathRecord]:
    """The PathRecords a query selects, as OpenSM answers, one by one (a Get takes the
    first the requester may see: no more are worked out): a source or destination not
    named is every port (in OpenSM's order, `opensm_order`; neither: destination by
    destination, every source to it). Between two ports with several LIDs (LMC), the LIDs
    are paired by their offset from the base (base to base, base+1 to base+1, ...), then
    every other pairing with Preference 2 (`lid_pairs`), at most NumbPath pairs when the
    query gives it (a Get takes the first: IBA 1.2's NumbPath 1). TClass, FlowLabel, HopLimit, QoSClass, ServiceID (but for
    the QoS policy's SL) and Preference select nothing (OpenSM compares none of them
    outside multicast), and the answer carries none of them."""
    srcs = _endpoint(recs, q, mask, "sgid", "slid")
    dsts = _endpoint(recs, q, mask, "dgid", "dlid")
    if srcs is None or dsts is None:
        every = opensm_order(recs)
        srcs, dsts = srcs if srcs is not None else every, dsts if dsts is not None else every
    pairs = ((a, b) for b in dsts for a in srcs)  # OpenSM's world walk: destination outermost
    wanted_pkey = q.p_key if mask & _M_PKEY else None
    wanted_sl = q.sl if mask & _M_SL else None
    qos_class = q.qos_class if mask & _M_QOS_CLASS else None
    # both halves, or it is not a service ID (OpenSM's rule)
    service_id = q.service_id if mask & _M_SERVICE_ID == _M_SERVICE_ID else None
    per_pair = q.num_path if mask & _M_NUM_PATH else None
    # an end named by an alias GID: the records carry that GID (as OpenSM's, by alias GUID)
    gids = {f: getattr(q, f) for f in ("sgid", "dgid") if mask & _MASKS[f]
            and recs.subnet.port_of_guid(getattr(q, f) & (1 << 64) - 1) is None}
    for (sn, sp, slids), (dn, dp, dlids) in pairs:
        found = 0
        for slid, dlid, preference in lid_pairs(slids, dlids):
            if per_pair is not None and found >= per_pair:
                break
            pr = path_record(recs, (sn, sp), slid, (dn, dp), dlid, wanted_pkey, service_id, wanted_sl, qos_class)
            if pr is None:
                continue
            if preference:
                pr = pr.replace(preference=preference)
            if gids:
                pr = pr.replace(**gids)
            if (_selected(mask, q, "mtu", pr.mtu) and _selected(mask, q, "rate", pr.rate, codes.rate_gbps)
                    and _selected(mask, q, "packet_life_time", pr.packet_life_time)):
                yield pr
                found += 1
