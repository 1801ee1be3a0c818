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

Not done: IndependenceSelector (disjoint paths, and OpenSM's APM pair of two sources and
two destinations): every path we know follows the one LFT route, so none is independent
of another beyond the LID offsets LMC gives."""
from __future__ import annotations

from mad.sa import SaStatus
from mad.sa_records import MultiPathRecord, PathRecord
from smagent.sa import paths
from smagent.sa.records import Records

MAX_PATHS = 127  # NumbPath is 7 bits: without it, at most this many paths
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
    limit = q.num_path & 0x7F if mask & MultiPathRecord.mask("num_path") else MAX_PATHS
    out: list[PathRecord] = []
    for sgid in gids[:q.sgid_count]:
        for dgid in gids[q.sgid_count:]:
            for pr in paths.query(recs, base.replace(sgid=sgid, dgid=dgid), pr_mask, requester_lid):
                if len(out) >= limit:
                    return out
                out.append(pr.replace(num_path=0))
    return out
