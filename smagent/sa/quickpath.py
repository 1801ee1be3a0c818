"""A PathRecord Get of the form hosts send, answered from the request's bytes.

A host asks for the path to one port: SubnAdmGet(PathRecord) naming both ends, by GID
(RDMA CM, ibacm) or by LID (saquery), perhaps with a P_Key, an SL, a ServiceID, NumbPath
and components that select nothing. The general path (`SaAgent._answer`) decodes the
whole MAD and record, checks the mask, walks `paths.each_path`'s generators and builds
the answer generically: about 40 us of Python on top of the 7 that `paths.path_record`
and the record's encoding take, paid for every pair asked once. Here the few fields that
matter are read in place; every decision is still `paths.path_record`'s (the LFTs, MTU,
rate, P_Key, SL) and `visible`'s (partitions).

Only the plain case is taken: both ends named, each a port with one LID (LMC 0) named by
its GID or that LID, no MTU, rate or packet-lifetime selection, NumbPath not 0. Anything
else (None from `path_get`) goes the general way, which answers it, errors included."""
from __future__ import annotations

from mad.sa import SA_HEADER, SaStatus
from mad.sa_records import PathRecord
from smagent.sa import paths, visible
from smagent.sa.records import Records

_AT = SA_HEADER.stop  # where the record starts in the MAD


def _field(name: str) -> slice:
    s = PathRecord.LAYOUT.byte_slice(name)
    return slice(_AT + s.start, _AT + s.stop)


_SGID, _DGID, _SLID, _DLID, _SERVICE_ID, _P_KEY = (_field(n) for n in ("sgid", "dgid", "slid", "dlid", "service_id",
                                                                        "p_key"))
_NUM_PATH_AT = _AT + PathRecord.LAYOUT.byte_slice("tclass").stop  # Reversible (1 bit), NumbPath (7)
_SL_AT = _P_KEY.stop + 1  # QoSClass (12 bits), SL (4)
_MASK = slice(SA_HEADER.stop - 8, SA_HEADER.stop)  # ComponentMask: the SA header's last 8 bytes
_M = {f: PathRecord.mask(f) for f in ("sgid", "dgid", "slid", "dlid", "p_key", "sl", "service_id", "num_path")}
# compared with a selector (`paths._selected`): the general path's
_SELECTING = PathRecord.mask("mtu_selector", "mtu", "rate_selector", "rate", "packet_life_time_selector",
                             "packet_life_time")
_ALL = (1 << len(PathRecord.COMPONENTS)) - 1
_STRIDE = PathRecord.STRIDE // 8
_NO_RECORDS = SaStatus.ERR_NO_RECORDS.word


def path_get(recs: Records, raw: bytes, requester_lid: int) -> tuple[int, bytes, int] | None:
    """(status, data, AttributeOffset) answering ``raw``, a SubnAdmGet(PathRecord) to a
    unicast DGID or DLID (the caller has checked method, attribute and class version),
    as `SaAgent._answer` would; None when the query is not of the plain form."""
    mask = int.from_bytes(raw[_MASK], "big")
    if mask & _SELECTING or mask & ~_ALL:
        return None
    src = _end(recs, raw, mask, _M["sgid"], _SGID, _M["slid"], _SLID)
    dst = _end(recs, raw, mask, _M["dgid"], _DGID, _M["dlid"], _DLID)
    if src is None or dst is None:
        return None
    if mask & _M["num_path"] and not raw[_NUM_PATH_AT] & 0x7F:
        return None  # NumbPath 0: no path (the general path says so)
    service = _M["service_id"]
    pr = paths.path_record(recs, src[0], src[1], dst[0], dst[1],
                           int.from_bytes(raw[_P_KEY], "big") if mask & _M["p_key"] else None,
                           int.from_bytes(raw[_SERVICE_ID], "big") if mask & service == service else None,
                           raw[_SL_AT] & 0xF if mask & _M["sl"] else None)
    if pr is None or not visible.Viewer(recs.subnet, requester_lid).shown([pr]):
        return _NO_RECORDS, b"", 0
    return 0, pr.encode(), _STRIDE


def _end(recs: Records, raw: bytes, mask: int, gid_bit: int, gid_at: slice, lid_bit: int, lid_at: slice):
    """((node, port), its LID) of one end the query names, if it names it plainly."""
    s = recs.subnet
    named = None  # the LID the query names the end by
    if mask & gid_bit:
        gid = int.from_bytes(raw[gid_at], "big")
        hit = s.port_of_guid(gid & (1 << 64) - 1)
        if hit is None or recs.gid(*hit) != gid:
            return None  # no such port: ERR_REQ_INVALID_GID, the general path's to give
    elif mask & lid_bit:
        named = int.from_bytes(raw[lid_at], "big")
        hit = s.port_of_lid(named)
        if hit is None:
            return None
    else:
        return None  # every port: the general path's walk
    lids = paths.lids_of(recs, *hit)
    if len(lids) != 1 or named not in (None, lids[0]):
        return None  # LMC, or a LID past the base: the general path's pairings
    return hit, lids[0]
