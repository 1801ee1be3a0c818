"""A PathRecord Get of the form hosts send, answered from the request's bytes.

A host asks for the path to one port: SubnAdmGet(PathRecord) naming both ends, by GID
(RDMA CM, ibacm) or by LID (saquery), perhaps with a P_Key, an SL, a ServiceID, NumbPath
and components that select nothing. The general path (`SaAgent._answer`) decodes the
whole MAD and record, checks the mask, walks `paths.each_path`'s generators and builds
the answer generically. Here the few fields that matter are read in place, and every
decision is still `paths.path_terms`' (the LFTs, MTU, rate, P_Key, SL) and `visible`'s
(partitions), made once for each class of source ports (`paths.source_class`: the hosts
of a leaf with alike links and P_Keys) and destination: a flood of pairs each asked once
(a job's start: every rank resolves every other) mostly finds its terms decided, and
their bytes encoded once (`paths.record_of`), the ends' GIDs and LIDs put in.

Only the plain case is taken: both ends named, each a port with one LID (LMC 0) named by
its GID or that LID, no MTU, rate or packet-lifetime selection, NumbPath not 0, no QoS
class where a QoS policy rule matches by one. Anything
else (None from `path_get`) goes the general way, which answers it, errors included."""
from __future__ import annotations

from typing import Any, Iterator

from mad.sa import SA_HEADER, SaStatus
from mad.sa_records import PathRecord
from smagent.sa import pathrecords as paths, visible
from smagent.sa.records import Records

_AT = SA_HEADER.stop  # where the record starts in the MAD


def _field(name: str) -> slice:
    s = PathRecord.LAYOUT.byte_slice(name)
    return slice(_AT + s.start, _AT + s.stop)


_SGID, _DGID, _SLID, _DLID, _SERVICE_ID, _P_KEY = (_field(n) for n in ("sgid", "dgid", "slid", "dlid", "service_id",
                                                                        "p_key"))
_SL_AT = _P_KEY.stop + 1  # QoSClass (12 bits), SL (4)
_NUM_PATH_AT = _AT + PathRecord.LAYOUT.byte_slice("tclass").stop  # Reversible (1 bit), NumbPath (7)
_M_NUM_PATH = PathRecord.mask("num_path")
_M_QOS_CLASS = PathRecord.mask("qos_class")
_MASK = slice(SA_HEADER.stop - 8, SA_HEADER.stop)  # ComponentMask: the SA header's last 8 bytes
_M_SGID, _M_DGID, _M_SLID, _M_DLID, _M_P_KEY, _M_SL, _M_SERVICE_ID = (
    PathRecord.mask(f) for f in ("sgid", "dgid", "slid", "dlid", "p_key", "sl", "service_id"))
# compared with a selector (`paths._selected`): the general path's
_SELECTING = PathRecord.mask("mtu_selector", "mtu", "rate_selector", "rate", "packet_life_time_selector",
                             "packet_life_time")
_ALL = (1 << len(PathRecord.COMPONENTS)) - 1
_ASKING = _M_P_KEY | _M_SERVICE_ID | _M_SL  # components that change the answer's terms
_STRIDE = PathRecord.STRIDE // 8
_NO_RECORDS = SaStatus.ERR_NO_RECORDS.word
# an answer's record: what its terms (`paths.path_terms`) decide, around its ends' GIDs and LIDs
_R_ENDS = [PathRecord.LAYOUT.byte_slice(n) for n in ("dgid", "sgid", "dlid", "slid")]  # side by side, in this order
assert all(a.stop == b.start for a, b in zip(_R_ENDS, _R_ENDS[1:]))
_R_DGID, _R_SLID = _R_ENDS[0], _R_ENDS[-1]
ENDS_KEPT = 1 << 16  # ports looked up by LID or GID (a GID of no port is kept too); more: start again
CHUNK_COST, DECIDE_COST = 512, 16  # a chunk of an every-pair table (`QuickPaths._walk`): ~1 ms of work
RECORDS_KEPT = 1 << 18  # (class, DLID, P_Key, ServiceID, SL) decided (~150 bytes each: ~40 MB at most); more: start again
_UNKNOWN = object()
_ENDS = _M_SGID | _M_DGID | _M_SLID | _M_DLID
_NOTHING_ASKED = (None, None, None)


def _asked(raw: bytes, mask: int) -> tuple:
    """(P_Key, ServiceID, SL) a query names (None each it does not): they change the terms."""
    return (int.from_bytes(raw[_P_KEY], "big") if mask & _M_P_KEY else None,
            int.from_bytes(raw[_SERVICE_ID], "big") if mask & _M_SERVICE_ID == _M_SERVICE_ID else None,
            raw[_SL_AT] & 0xF if mask & _M_SL else None)


class QuickPaths:
    """The plain PathRecord Gets of one snapshot (`Records`): each end looked up once, as
    (node, port, LID, LID's 2 bytes, GID's 16 bytes, its source class), each answer's
    terms decided once per source class, DLID and the P_Key, ServiceID and SL asked, and
    the bytes of each distinct terms encoded once."""

    def __init__(self, recs: Records):
        self.recs = recs
        self._ends: dict[bytes, tuple | None] = {}  # the LID's 2 bytes or the GID's 16 -> end; None: not plain
        self._classes: dict[tuple, int] = {}  # `paths.source_class` -> a small number
        # -> the record's bytes before its DGID and after its SLID; None: no path
        self._decided: dict[tuple, tuple[bytes, bytes] | None] = {}
        self._encoded: dict[tuple, tuple[bytes, bytes]] = {}  # terms -> those bytes
        # an SL2VL table that drops an SL makes a path's fate the source's own: nothing shared
        # then (looked at on the first decision: on a large fabric it reads every table)
        self._shared: bool | None = None
        self._partitioned = recs.subnet.pkeys is not None  # then a requester sees only what it shares
        self._every: list[tuple] | bool | None = None  # `_every_end` (False: a port with several LIDs)
        policy = recs.subnet.qos_policy  # QoS classes a rule matches by: not in the cache's key
        self._by_class = policy is not None and policy.by_qos_class

    def path_get(self, raw: bytes, requester_lid: int) -> tuple[int, bytes, int] | None:
        """(status, data, AttributeOffset) answering ``raw``, a SubnAdmGet(PathRecord) to a
        unicast DGID or DLID (the caller has checked method, attribute and class version),
        as `SaAgent._answer` would; None when the query is not of the plain form."""
        mask = int.from_bytes(raw[_MASK], "big")
        if mask & _SELECTING or mask & ~_ALL or mask & _M_QOS_CLASS and self._by_class:
            return None
        ends = self._ends  # an end by its GID if the query gives one, else by its LID
        named: Any = raw[_SGID] if mask & _M_SGID else raw[_SLID] if mask & _M_SLID else None
        src: Any = ends.get(named, _UNKNOWN) if named is not None else None
        if src is _UNKNOWN:
            src = self._learn(named)
        named = raw[_DGID] if mask & _M_DGID else raw[_DLID] if mask & _M_DLID else None
        dst: Any = ends.get(named, _UNKNOWN) if named is not None else None
        if dst is _UNKNOWN:
            dst = self._learn(named)
        if src is None or dst is None:
            return None  # an end not named (every port), or not plainly: the general path's
        key = (src[5], dst[2]) + (_asked(raw, mask) if mask & _ASKING else _NOTHING_ASKED)
        record: Any = self._decided.get(key, _UNKNOWN) if src[2] != dst[2] else _UNKNOWN  # a loopback: its own
        if record is _UNKNOWN:
            record = self._decide(src, dst, key)
        if record is None or self._partitioned and not visible.Viewer(self.recs.subnet, requester_lid).path(
                src[2], dst[2]):
            return _NO_RECORDS, b"", 0
        return 0, b"".join((record[0], dst[4], src[4], dst[3], src[3], record[1])), _STRIDE

    def table(self, raw: bytes, requester_lid: int) -> Iterator[bytes] | None:
        """The records answering ``raw``, a SubnAdmGetTable(PathRecord) naming neither end
        (every pair, OpenSM's world walk: destination outermost, `paths.each_path`'s order),
        as encoded bytes, about a millisecond's work at a time (`_walk`; None: not the plain
        form, or a port with several LIDs: the general path's). Each pair costs a lookup of
        its terms by source class and DLID (`_decide` once per class), as a plain Get does."""
        mask = int.from_bytes(raw[_MASK], "big")
        if mask & (_SELECTING | _ENDS) or mask & ~_ALL or mask & _M_NUM_PATH and not raw[_NUM_PATH_AT] & 0x7F:
            return None
        if mask & _M_QOS_CLASS and self._by_class:
            return None
        ends = self._every_end()
        if ends is None:
            return None
        asked = _asked(raw, mask) if mask & _ASKING else _NOTHING_ASKED
        viewer = visible.Viewer(self.recs.subnet, requester_lid) if self._partitioned else None
        return self._walk(ends, asked, viewer)

    def _walk(self, ends: list[tuple], asked: tuple, viewer: visible.Viewer | None) -> Iterator[bytes]:
        """`table`'s records, a chunk at a time: a chunk ends after `CHUNK_COST` units of
        work (a pair whose terms are decided costs 1, one to decide `DECIDE_COST`: a
        destination's first chunks decide for every source class)."""
        decided, join = self._decided, b"".join
        out: list[bytes] = []
        cost = 0
        for dst in ends:
            dlid, dgid, dlid_b = dst[2], dst[4], dst[3]
            for src in ends:
                key = (src[5], dlid) + asked
                record: Any = decided.get(key, _UNKNOWN) if src[2] != dlid else _UNKNOWN
                if record is _UNKNOWN:
                    record = self._decide(src, dst, key)
                    cost += DECIDE_COST
                cost += 1
                if record is not None and (viewer is None or viewer.path(src[2], dlid)):
                    out.append(join((record[0], dgid, src[4], dlid_b, src[3], record[1])))
                if cost >= CHUNK_COST:
                    yield join(out)
                    out, cost = [], 0
        yield join(out)

    def _every_end(self) -> list[tuple] | None:
        """Every LID-carrying port as an end (`_learn`'s form) in OpenSM's order; None if a
        port has several LIDs (LMC: the general path pairs them)."""
        if self._every is None:
            recs = self.recs
            ends: list[tuple] = []
            for node, port, lids in paths.opensm_order(recs):
                if len(lids) != 1:
                    self._every = False
                    return None
                cls = self._classes.setdefault(paths.source_class(recs, node, port), len(self._classes))
                ends.append((node, port, lids[0], lids[0].to_bytes(2, "big"),
                             recs.gid(node, port).to_bytes(16, "big"), cls))
            self._every = ends
        return self._every if isinstance(self._every, list) else None

    def _decide(self, src: tuple, dst: tuple, key: tuple) -> tuple[bytes, bytes] | None:
        """`paths.path_terms` from ``src`` to ``dst`` as the bytes they make, kept for the
        source's class unless it is a loopback or nothing may be shared."""
        _cls, _dlid, p_key, service_id, sl = key
        terms = paths.path_terms(self.recs, (src[0], src[1]), (dst[0], dst[1]), dst[2], p_key, service_id, sl)
        record = None
        if terms is not None:
            record = self._encoded.get(terms)
            if record is None:
                enc = paths.record_of(0, 0, 0, 0, terms).encode()
                record = self._encoded[terms] = (enc[:_R_DGID.start], enc[_R_SLID.stop:])
        if self._shared is None:
            self._shared = not self.recs.subnet._sls_to_vl15
        if self._shared and src[2] != dst[2]:
            if len(self._decided) >= RECORDS_KEPT:
                self._decided.clear()
            self._decided[key] = record
        return record

    def _learn(self, named: bytes) -> tuple | None:
        """The end a query names by these bytes of it (16: a GID; 2: a LID), kept: None when
        not plainly (no such port, LMC, a LID past the base)."""
        recs = self.recs
        s = recs.subnet
        value = int.from_bytes(named, "big")
        if len(named) == 16:
            hit = s.port_of_guid(value & (1 << 64) - 1)
            if hit is not None and recs.gid(*hit) != value:
                hit = None  # no such port: no record, the general path's to give
        else:
            hit = s.port_of_lid(value)
        end = None
        if hit is not None:
            lids = paths.lids_of(recs, *hit)
            if len(lids) == 1 and (len(named) == 16 or value == lids[0]):
                cls = self._classes.setdefault(paths.source_class(recs, *hit), len(self._classes))
                end = (hit[0], hit[1], lids[0], lids[0].to_bytes(2, "big"), recs.gid(*hit).to_bytes(16, "big"), cls)
            # else LMC, or a LID past the base: the general path's pairings
        if len(self._ends) >= ENDS_KEPT:
            self._ends.clear()
        self._ends[named] = end
        return end
