"""MultiPathRecord (IBA 15.2.5.17): SubnAdmGetMulti asks for the paths between SGIDCount
source GIDs and DGIDCount destination GIDs at once (the request itself comes as an RMPP
transfer when its GIDs outgrow one MAD); the answer, SubnAdmGetMultiResp, is a table of
PathRecords (AttributeID PathRecord), as OpenSM gives it:

* SGIDCount and DGIDCount are required components (else ERR_REQ_INSUFFICIENT_COMPONENTS),
  and each must be at least 1, with that many GIDs after the record (else ERR_REQ_INVALID);
  a GID of no port of the subnet is ERR_REQ_INVALID_GID;
* the pairs are taken source by source, destination by destination, each pair's paths as
  a PathRecord query by SGID and DGID with the MultiPathRecord's other components
  (MTU, rate, packet lifetime with their selectors; SL, P_Key, ... equal: `paths.query`);
  with LMC a pair has first one path per LID offset (Preference 0), then one for every
  other pairing of the two ports' LIDs, source LID by source LID (Preference 2: they
  overlap the first ones), as OpenSM orders them;
* NumbPath (when given) bounds the whole answer, else `MAX_PATHS`; the first found are
  given. Each PathRecord says Reversible with NumbPath 0.

* two sources, two destinations and NumbPath 2 ask for an APM pair: OpenSM's choice of one
  path per diagonal pair of ports (`_apm`).

Not done: IndependenceSelector (disjoint paths): every path we know follows the one LFT
route, so none is independent of another beyond the LID offsets LMC gives."""
from __future__ import annotations

from mad.sa import SaStatus
from mad.sa_records import MultiPathRecord, PathRecord
from smagent.model.order import opensm_key
from smagent.sa import pathrecords as paths
from smagent.sa.records import Records

MAX_PATHS = 127  # NumbPath is 7 bits: without it, at most this many paths
APM_PORTS = 2  # two sources, two destinations, NumbPath 2: OpenSM's APM answer (`_apm`)
GID_OFFSET = 24  # the GIDs follow the record's fixed part
GID_SIZE = 16
# the components a MultiPathRecord shares with a PathRecord query, by name
_SHARED = ("raw_traffic", "flow_label", "hop_limit", "tclass", "p_key", "qos_class", "sl", "mtu_selector", "mtu",
           "rate_selector", "rate", "packet_life_time_selector", "packet_life_time")
_SERVICE_ID = ("service_id_msb", "service_id_lsb")  # one PathRecord field, two components of either


def gids_of(data: bytes, count: int) -> list[int]:
    """The ``count`` GIDs after the record's fixed part (a reassembled request may hold
    more than one MAD's 11)."""
    if len(data) < GID_OFFSET + count * GID_SIZE:
        raise paths.PathQueryError(SaStatus.ERR_REQ_INVALID, f"{count} GIDs announced, "
                                   f"{max(0, len(data) - GID_OFFSET) // GID_SIZE} sent")
    return [int.from_bytes(data[GID_OFFSET + i * GID_SIZE:GID_OFFSET + (i + 1) * GID_SIZE], "big")
            for i in range(count)]


def query(recs: Records, data: bytes, mask: int, requester_lid: int) -> list[PathRecord]:
    """The PathRecords a MultiPathRecord (``data``: the record and its GIDs) selects."""
    MultiPathRecord.check_mask(mask)
    if not mask & MultiPathRecord.mask("sgid_count") or not mask & MultiPathRecord.mask("dgid_count"):
        raise paths.PathQueryError(SaStatus.ERR_REQ_INSUFFICIENT_COMPONENTS, "SGIDCount and DGIDCount are needed")
    q = MultiPathRecord.decode(data[:MultiPathRecord.LAYOUT.size].ljust(MultiPathRecord.LAYOUT.size, b"\0"))
    if not q.sgid_count or not q.dgid_count:
        raise paths.PathQueryError(SaStatus.ERR_REQ_INVALID, "no source or no destination GID")
    gids = gids_of(data, q.sgid_count + q.dgid_count)
    for gid in gids:  # every GID checked, also those past the paths NumbPath allows
        hit = recs.subnet.port_of_guid(gid & (1 << 64) - 1)
        if hit is None or recs.gid(*hit) != gid:
            raise paths.PathQueryError(SaStatus.ERR_REQ_INVALID_GID, f"GID {gid:#034x} is no port of the subnet")
    shared = [n for n in _SHARED + _SERVICE_ID if mask & MultiPathRecord.mask(n)]
    pr_mask = PathRecord.mask("sgid", "dgid", *shared)
    base = PathRecord(service_id=q.service_id_msb << 56 | q.service_id_lsb, **{n: getattr(q, n) for n in _SHARED})
    if q.sgid_count == q.dgid_count == APM_PORTS and q.num_path & 0x7F == APM_PORTS:
        return _apm(recs, base, pr_mask, gids, requester_lid)
    limit = q.num_path & 0x7F if mask & MultiPathRecord.mask("num_path") else MAX_PATHS
    out: list[PathRecord] = []
    for sgid in gids[:q.sgid_count]:
        for dgid in gids[q.sgid_count:]:
            for pr in paths.query(recs, base.replace(sgid=sgid, dgid=dgid), pr_mask, requester_lid):
                if len(out) >= limit:
                    return out
                out.append(pr.replace(num_path=0))
    return out


def _apm(recs: Records, base: PathRecord, pr_mask: int, gids: list[int], requester_lid: int) -> list[PathRecord]:
    """OpenSM's answer to two sources, two destinations and NumbPath 2 (a primary and an
    alternate path for APM): the sources and the destinations each in port GUID order (as
    OpenSM orders them);
    from a hash of the first ones' base LIDs, an LID offset for the first source's paths and
    the next for the second's; of the two diagonals, (S0-D0, S1-D1) unless the other's
    shorter path is shorter (hops), each path the first found from those offsets on."""
    s = recs.subnet
    ends = []
    for gid in gids:
        hit = s.port_of_guid(gid & (1 << 64) - 1)
        assert hit is not None  # the caller checked every GID
        node, port = hit
        ends.append((gid & (1 << 64) - 1, node, port, paths.lids_of(recs, node, port)))
    s0, s1 = sorted(ends[:2], key=lambda e: opensm_key(e[0]))  # as OpenSM compares GUIDs
    d0, d1 = sorted(ends[2:], key=lambda e: opensm_key(e[0]))
    a, b = sorted((s0[3][0], d0[3][0]))
    offset = ((a >> s.lmc) << 4 | b >> s.lmc) % 103
    mask = pr_mask & ~PathRecord.mask("sgid", "dgid") | PathRecord.mask("slid", "dlid")

    def pair(src, dst, offs):
        slids, dlids = src[3], dst[3]
        i, j = offs % len(slids), offs % len(dlids)
        for _ in range(min(len(slids), len(dlids))):
            found = paths.query(recs, base.replace(slid=slids[i], dlid=dlids[j]), mask, requester_lid)
            if found:
                hops = s.route((src[1].guid, src[2]), dlids[j])
                return found[0].replace(num_path=0), len(hops or ())
            i, j = (i + 1) % len(slids), (j + 1) % len(dlids)
        return None

    diag_a = [p for p in (pair(s0, d0, offset), pair(s1, d1, offset + 1)) if p]
    diag_b = [p for p in (pair(s0, d1, offset), pair(s1, d0, offset + 1)) if p]
    least = lambda d: min((h for _p, h in d), default=0)  # noqa: E731 (0: none found, as OpenSM counts)
    return [p for p, _h in (diag_a if least(diag_a) <= least(diag_b) else diag_b)]
