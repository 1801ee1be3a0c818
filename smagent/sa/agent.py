"""The Subnet Administrator as a sans-I/O object: MADs in, MADs out.

`SaAgent.handle(incoming, now)` answers one class-0x03 MAD (an `Incoming`: bytes and the
address it came from) with a list of (bytes, address) to send; `deadline` says when
`on_timeout(now)` must be called for RMPP retransmissions. Nothing here reads a clock or
a socket: the daemon drives it, and the tests call it directly.

Served: Get and GetTable of ClassPortInfo (Get only), NodeRecord, PortInfoRecord,
SwitchInfoRecord, LinkRecord, SMInfoRecord, PathRecord, LinearForwardingTableRecord,
MulticastForwardingTableRecord, GUIDInfoRecord (Set and Delete too: alias GUIDs,
`smagent.sa.aliases`), P_KeyTableRecord (only with our SM_Key),
SLtoVLMappingTableRecord and VLArbitrationTableRecord, and GetMulti of MultiPathRecord
(`multipath`: the request reassembled from its RMPP segments, the answer a table of
PathRecords) and GetTraceTable of TraceRecord (`trace`: the hops of a PathRecord's path),
from the `Subnet` snapshot
published last (`publish`); MCMemberRecord Set (join), Delete (leave), Get and GetTable
from the groups (`smagent.sa.groups`): the answer goes at once, and the owner sees
``groups.version`` move and has the MFTs follow. InformInfo Set subscribes and
unsubscribes, InformInfoRecord Get/GetTable lists the subscriptions (`smagent.sa.informs`);
`notify` and `sm_notice` give the Reports of a notice (a group created or deleted here,
traps 66/67; GIDs in and out of service and forwarded traps from the owner), whose
ReportResps come back through `handle` and whose retries `on_timeout` sends. ServiceRecord
Set registers (with its lease), Delete unregisters, Get/GetTable find (`smagent.sa.services`).
Under partitions a requester is answered only about the ports it shares a partition with
(`smagent.sa.visible`, OpenSM's rule). Everything else gets the IBA status that says so (never
silence: a client would wait for ever): an unknown method 0x0008, a known method of an
attribute not served 0x000C, a bad class version 0x0004 (IBA 13.4.7); a mask with bits past
the record's components ERR_REQ_INVALID; a Get matching no record ERR_NO_RECORDS, several
ERR_TOO_MANY_RECORDS (IBA 15.2.1.2). A STANDBY SA (``master`` False) answers every request
"method/attribute not supported": it serves nothing (the SMInfo it owes other SMs is an
SMP, answered by the daemon itself).

`answer_fast(raw, source, clock)` is the flood's path: a PathRecord Get answered before
is answered again from the whole response MAD encoded then, only its TID patched in (the
transport calls it with the MAD's bytes and the packed ib_mad_addr it came from, before
any object is made for the request); anything else, or a first time, returns None or goes
through `handle`.

A GetTableResp longer than one MAD goes out through a `mad.rmpp.RmppSender`, one per
(requester LID, TID): the requester's ACKs (class 0x03 MADs with RMPP type ACK) are routed
back to it. A table that fits one MAD is sent as a single RMPP segment (First and Last) and
needs no ACK. Segment 1 is never sent again before its ACK (`RmppSender`'s ``resend_first``):
a requester whose MAD layer does RMPP ACKs it at once, or sends its request again, which
starts the answer again; one that does not (saquery under ibsim's umad2sim) has read it and
gone, and under ibsim whatever followed would reach the next process in its client slot
(ibsim routes a response by the TID's top 16 bits, the slot), which crashes or takes it
for its own answer.

A PathRecord GetTable of every pair is not worked out inside `handle` (seconds on a large
fabric): it waits in `pending` and `work` advances it a chunk at a time, between the owner's
other work (`smagent.sa.pending`), its segments sent as its records come (segment 1 with
PayloadLength 0: the length is not known yet).
"""
from __future__ import annotations

import collections
import logging
from typing import Any, Callable, Iterable, Sequence

from mad.attributes import SMInfo
from mad.errors import MadError
from mad.gmp import CLASS_PORT_INFO, ClassPortInfo
from mad.header import GSI_QKEY, GSI_QP, MAD_SIZE, InvalidField, Method, response_method
from mad.rmpp import (NO_RESP_TIME, RMPP_HEADER_SIZE, RMPP_OFFSET, RmppFlags, RmppReceiver, RmppSender, RmppState,
                      RmppType, rmpp_of)
from mad.sa import (SA_CLASS, SA_CLASS_VERSION, SA_DATA_SIZE, SA_HEADER, SA_HEADER_SIZE, SaAttrID, SaMad, SaRecord,
                    SaStatus, encode_table, matcher)
from mad.sa_records import (GUIDInfoRecord, InformInfoRecord, LinkRecord, NodeRecord, PathRecord, PortInfoRecord,
                            record_class)
from smagent.sa import aliases as aliasesmod, multipath, pathrecords as paths, quickpath, trace, visible
from smagent.sa import pending as pendingmod
from smagent.sa import services as servicesmod
from smagent.sa import informs as informsmod
from smagent.sa.groups import McastGroups
from smagent.sa.services import Services
from smagent.sa.records import CompactRecords, Records
from smagent.model.subnet import Subnet
from smagent.transport.address import Address, Incoming, lid_of, way_back

log = logging.getLogger("smagent.sa")

UNSUPPORTED_METHOD = InvalidField.METHOD_NOT_SUPPORTED << 2  # 0x0008
UNSUPPORTED_ATTRIBUTE = InvalidField.METHOD_ATTRIBUTE_NOT_SUPPORTED << 2  # 0x000C
BAD_VERSION = InvalidField.BAD_VERSION << 2  # 0x0004
KNOWN_METHODS = (Method.GET, Method.SET, Method.GET_TABLE, Method.GET_TRACE_TABLE, Method.GET_MULTI, Method.DELETE)
RMPP_TIMEOUT_S = 0.5  # an ACK not back in this time: the window is sent again
RMPP_RETRIES = 4
REQUEST_KEPT_S = 10.0  # a GetMulti request's reassembly: abandoned, or kept after it (its duplicates ACKed), this long
RESP_TIME_VALUE = 16  # ClassPortInfo.RespTimeValue: 4.096 us x 2^16, about 270 ms (OpenSM's)
# an every-pair table kept for the next asker only up to this size (9 MB on 375 nodes, per
# requester LID: 250 hosts asking would hold 2 GB; working one out again costs seconds of slices)
TABLE_KEPT_BYTES = 1 << 20
PATH_ANSWERS_KEPT = 1 << 15  # cached PathRecord answers (about 500 bytes each); more: start again
_PATH_QUERY_END = SA_HEADER.stop + record_class(SaAttrID.PATH_RECORD).LAYOUT.size  # what a PathRecord query says
_PATH_QUERY = slice(SA_HEADER.start, _PATH_QUERY_END)
_GET = int(Method.GET)  # a plain int: compared and hashed per request
_PATH_DGID = SA_HEADER.stop + 8  # the first byte of a PathRecord's DGID (0xFF: multicast)
_DGID_BIT = PathRecord.mask("dgid")  # in the ComponentMask's last byte
_PATH_ATTR = SaAttrID.PATH_RECORD.to_bytes(2, "big")
_AOFFSET = SA_HEADER.start + 8  # AttributeOffset, after the SM_Key
# the SM_Key of every response: 0 (IBA C15-0.1.5), never an echo of the requester's, which
# a cached answer would hand to the next requester
_NO_SM_KEY = bytes(8)
_PATH_ATTR_ID = int(SaAttrID.PATH_RECORD)
_RMPP_FLAGS_AT = RMPP_OFFSET + 2  # RRespTime (5 bits) and RMPPFlags (3 bits)
# the LIDs a query may name by any LID of a port's LMC range (`SaAgent._at_base_lids`)
_IIR_SELECT = InformInfoRecord.mask("subscriber_gid", "enum")  # OpenSM's InformInfoRecord keys
_BASE_LID_FIELDS = {NodeRecord: ("lid",), PortInfoRecord: ("endport_lid", "lid"), GUIDInfoRecord: ("lid",),
                    LinkRecord: ("from_lid", "to_lid")}
_PATH_STRIDE = PathRecord.STRIDE // 8
_NO_RESOURCES = SaStatus.ERR_NO_RESOURCES.word  # too many tables of one requester pending (`_table_later`)
_RMPP_ACTIVE = int(RmppFlags.ACTIVE)  # a plain int: an IntFlag's & costs microseconds
# ClassPortInfo.CapabilityMask and CapabilityMask2 (IBA 15.2.5, Table 184 and its 1.2.1+
# additions; OpenSM's OSM_CAP*): exactly what this SA implements. Not claimed: IsNotice (no
# Get/Set of Notice), IsSubnetOptionalRecords (no RandomForwardingTableRecord nor
# ServiceAssociationRecord), IsReinit, IsReversePathPKeyMember, IsFullPortInfoRecord (the
# PortInfoRecord Options byte is not honoured)
CAP_UD_MULTICAST = 1 << 9  # MCMemberRecord joins and leaves (while multicast is on)
CAP_MULTIPATH = 1 << 10  # GetMulti(MultiPathRecord)
CAP_PORT_INFO_CAPMASK_MATCH = 1 << 13  # PortInfoRecord CapabilityMask matched bit by bit (modifier bit 31)
CAP_MASK = CAP_MULTIPATH | CAP_PORT_INFO_CAPMASK_MATCH
CAP2_QOS = 1 << 1  # PathRecord SLs from a QoS policy (by ServiceID, P_Key): only with one
CAP2_MCAST_TOP = 1 << 3  # IsMulticastFDBTopSupported: SwitchInfoRecords carry MulticastFDBTop
CAP2_ALIAS_GUIDS = 1 << 5  # GUIDInfoRecord Set/Delete (`smagent.sa.aliases`)
CAP2_EXTENDED_SPEEDS = 1 << 7  # LinkSpeedExt in PortInfoRecords; FDR/EDR rates in PathRecords
CAP2_MULTICAST_SERVICE_RECS = 1 << 8  # ServiceRecords with a multicast ServiceGID
CAP2_PORT_INFO_CAPMASK2_MATCH = 1 << 10  # PortInfoRecord CapabilityMask2 matched bit by bit (modifier bit 31)
CAP2_SEND_ONLY_FULL_MEMBER = 1 << 12  # JoinState 0x8 (`smagent.sa.groups`): the kernel's IPoIB looks for it
CAP2_LINK_WIDTH_2X = 1 << 13  # 2x widths in PortInfoRecords and PathRecord rates
CAP2_LINK_SPEED_HDR = 1 << 15  # HDR rates
CAP_MASK2 = (CAP2_MCAST_TOP | CAP2_ALIAS_GUIDS | CAP2_EXTENDED_SPEEDS | CAP2_MULTICAST_SERVICE_RECS
             | CAP2_PORT_INFO_CAPMASK2_MATCH | CAP2_SEND_ONLY_FULL_MEMBER | CAP2_LINK_WIDTH_2X | CAP2_LINK_SPEED_HDR)
ENHANCED_MATCH = 1 << 31  # a PortInfoRecord query's AttributeModifier: CapabilityMask(2) bit by bit

Reply = tuple[bytes, Address]


class SaAgent:
    """Answers SA requests from the last published `Subnet`. ``sm_key``: our SM_Key (a
    query carrying it sees M_Keys and SM_Keys); ``master``: only a MASTER SM's SA serves;
    ``sms``: the SMs as they are now, (LID, SMInfo) each, ours first (they change without a
    sweep: polls, handovers); the snapshot's when not given."""

    def __init__(self, sm_key: int = 0, *, master: bool = True,
                 sms: Callable[[], Sequence[tuple[int, SMInfo]]] | None = None):
        self.sm_key = sm_key
        self.master = master
        self.sms_source = sms
        self.subnet: Subnet | None = None
        self._records: Records | None = None
        self._quick: quickpath.QuickPaths | None = None  # the snapshot's plain PathRecord Gets
        self.senders: dict[tuple[int, int], tuple[RmppSender, Address]] = {}
        self.pending = pendingmod.Pending()  # tables being worked out (`work`), by (LID, TID)
        # GetMulti requests (RMPP) being reassembled, or just answered, by (LID, TID): the
        # receiver, where its ACKs go, when it is dropped
        self.receivers: dict[tuple[int, int], tuple[RmppReceiver, Address, float]] = {}
        self.groups = McastGroups()  # multicast groups made by joins (the owner may pre-create some)
        self.informs = informsmod.Informs()  # event subscriptions, Reports awaiting ReportResp
        self.services = Services()  # ServiceRecords registered (with their leases)
        self.aliases = aliasesmod.AliasGuids()  # alias GUIDs hosts registered (GUIDInfoRecord Set)
        self.multicast = True  # the owner programs the joined groups' MFTs (IsUDMulticastSupported)
        self._reports: list[Reply] = []  # Reports a request caused (a group created), sent with its answer
        self._now = 0.0
        # PathRecord answers of this snapshot, encoded once: (method, the request past its
        # RMPP header, requester LID) -> (status, data, offset); a host asks the same again
        self._path_answers: dict[tuple[int, bytes, int], tuple[int, bytes, int]] = {}
        # whole answers to PathRecord Gets (`answer_fast`): the request's bytes that decide
        # the answer (all but TID, RMPP header and the junk after the record) and the packed
        # source -> (answer before the TID, answer after it, packed reply address, its
        # `requests` key: counted without building one per answer)
        self._fast: dict[bytes, tuple[bytes, bytes, bytes, tuple[int, int, int]]] = {}
        self._replies: dict[bytes, bytes] = {}  # way back -> packed reply address (`_reply_to`)
        self.answered = 0  # requests answered (any status)
        self.requests: collections.Counter = collections.Counter()  # (AttributeID, method, status) -> answered

    def publish(self, subnet: Subnet) -> None:
        """Answer from ``subnet`` from now on (a whole snapshot replaces the last one)."""
        self.aliases.keep_only(lambda guid: subnet.port_of_guid(guid) is not None)  # gone ports lose theirs
        self.subnet, self._records = subnet, Records(subnet, self.aliases.port_of)
        self._quick = quickpath.QuickPaths(self._records)
        self._path_answers.clear()
        self._fast.clear()

    # -- I/O-free entry points -------------------------------------------------------
    @property
    def deadline(self) -> float | None:
        times = [s.deadline for s, _a in self.senders.values() if s.deadline is not None]
        times += [until for _r, _a, until in self.receivers.values()]
        if self.informs.deadline is not None:
            times.append(self.informs.deadline)
        return min(times) if times else None

    @property
    def working(self) -> bool:
        """Whether tables are being worked out (`work` has something to do)."""
        return bool(self.pending)

    def work(self, now: float, more: Callable[[], bool]) -> list[Reply]:
        """Work out the pending tables a chunk at a time while ``more()`` says so (at least
        one chunk); the segments that may go meanwhile (a table's are sent as its records
        come, within the window its requester's ACKs give)."""
        out: list[Reply] = []

        def feed(job: pendingmod.TableJob, chunk: bytes, done: bool) -> None:
            sender, addr = job.sender, job.addr
            out.extend((_trim(m), addr) for m in sender.feed(chunk, now, done))
            if done:
                self.answered += 1
                self.requests[(_PATH_ATTR_ID, int(Method.GET_TABLE), 0)] += 1
                if job.source is self._quick and len(sender.data) <= TABLE_KEPT_BYTES:
                    self._keep_path_answer(job.key, (0, bytes(sender.data), _PATH_STRIDE))

        self.pending.work(more, feed)
        return out

    def on_timeout(self, now: float) -> list[Reply]:
        out: list[Reply] = self.informs.on_timeout(now)
        for key, (rx, addr, until) in list(self.receivers.items()):
            if now >= until:
                out += [(m, addr) for m in rx.on_timeout(now)]  # an ABORT if it never finished
                del self.receivers[key]
        for key, (sender, addr) in list(self.senders.items()):
            out += [(_trim(m), addr) for m in sender.on_timeout(now)]
            if sender.finished:
                del self.senders[key]
        return out

    def handle(self, incoming: Incoming, now: float) -> list[Reply]:
        """The MADs answering one class-0x03 MAD."""
        raw = incoming.raw
        if len(raw) < 24 or raw[1] != SA_CLASS:
            return []  # not an SA MAD: not ours to answer
        if len(raw) < 256:  # a client that wrote a short MAD (umad2sim carries what is written)
            raw = raw.ljust(256, b"\0")
            incoming = Incoming(raw, incoming.address)
        try:
            hdr = rmpp_of(raw)
        except MadError:
            return []
        tid = int.from_bytes(raw[8:16], "big")
        if hdr.active and hdr.rmpp_type in (RmppType.ACK, RmppType.STOP, RmppType.ABORT):
            return self._to_sender(incoming, tid, now)
        if raw[3] == Method.GET_MULTI:
            return self._get_multi(incoming, tid, now)
        if raw[3] & 0x80:
            if raw[3] == Method.REPORT_RESP:
                self.informs.on_report_resp(tid)
            return []  # a response: nothing to answer
        self._now = now
        if raw[3] == Method.GET_TABLE and raw[16:18] == _PATH_ATTR and self._quick is not None and self.master:
            queued = self._table_later(incoming, tid, now)
            if queued is not None:
                return queued
        aliases = self.aliases.version
        status, data, offset = self._cached_answer(incoming)
        if self.aliases.version != aliases:  # a GID now names a port, or no longer: answers kept are stale
            self._path_answers.clear()
            self._fast.clear()
        self.answered += 1
        self.requests[(int.from_bytes(raw[16:18], "big"), raw[3], status)] += 1
        reports, self._reports = self._reports, []
        return self._respond(incoming, status, data, offset, now) + reports

    def answer_fast(self, raw: bytes, source, clock: Callable[[], float]) -> list[tuple[bytes, bytes]] | None:
        """The answer to a PathRecord Get as whole MADs with their packed reply address,
        from the request's bytes and ``source`` (the packed ib_mad_addr it came with; any
        other form: None). Answered before: the answer then, with this request's TID.
        Else, if it is a PathRecord Get, through `handle`, and kept. None: not for this
        path (the caller hands the MAD to `handle` as an `Incoming`), nor while ``master``
        is False (the owner sets it before `handle`)."""
        if source.__class__ is not bytes or len(raw) != MAD_SIZE or raw[1] != SA_CLASS \
                or raw[_RMPP_FLAGS_AT] & _RMPP_ACTIVE or not self.master:
            return None
        back = way_back(source)
        key = raw[:8] + raw[16:24] + raw[_PATH_QUERY] + back
        hit = self._fast.get(key)
        if hit is not None:
            self.answered += 1
            self.requests[hit[3]] += 1  # as `handle` counts: (AttributeID, method, the answer's status)
            return [(hit[0] + raw[8:16] + hit[1], hit[2])]
        if raw[3] != _GET or raw[16:18] != _PATH_ATTR or self._quick is None or _to_group(raw):
            return None
        quick = self._quick.path_get(raw, lid_of(source)) if raw[2] == SA_CLASS_VERSION else None
        if quick is not None:  # as `handle` would answer and count it, without its layers
            status, data, offset = quick
            self.answered += 1
            self.requests[(_PATH_ATTR_ID, _GET, status)] += 1
            packed = [(_single(raw, status, data, offset), self._reply_to(source, back))]
        else:
            packed = [(m, a.pack()) for m, a in self.handle(Incoming(raw, Address.unpack(source)), clock())]
        if len(packed) == 1 and len(packed[0][0]) == MAD_SIZE:  # one MAD, as a Get's answer is
            if len(self._fast) >= PATH_ANSWERS_KEPT:
                self._fast.clear()
            m, a = packed[0]
            self._fast[key] = (m[:8], m[16:], a, (_PATH_ATTR_ID, raw[3], int.from_bytes(m[4:6], "big")))
        return packed

    def _reply_to(self, source: bytes, back: bytes) -> bytes:
        """The packed address answering a request from the packed ``source`` (whose
        `way_back` is ``back``): worked out once for each way back, a host asks again and
        again."""
        hit = self._replies.get(back)
        if hit is None:
            if len(self._replies) >= PATH_ANSWERS_KEPT:
                self._replies.clear()
            hit = self._replies[back] = Address.unpack(source).reply().pack()
        return hit

    def notify(self, notice, now: float) -> list[Reply]:
        """Reports of ``notice`` (an `SaNotice`) to every subscription it matches (under
        partitions, whose subscriber may hear of its source: `visible.Viewer.hears`)."""
        if not self.master:
            return []
        subnet = self.subnet
        if subnet is None or subnet.pkeys is None:
            return self.informs.notify(notice, now, self._lid_of_gid)

        def group_pkey(mgid: int) -> int | None:
            g = self.groups.groups.get(mgid)
            return g.p_key if g is not None else None

        return self.informs.notify(notice, now, self._lid_of_gid,
                                   lambda sub, n: visible.Viewer(subnet, sub.lid).hears(n, group_pkey))

    def sm_notice(self, trap: int, gid: int, now: float) -> list[Reply]:
        """Reports of one of the SM's own notices (64..67) about ``gid``."""
        if self.subnet is None:
            return []
        hit = self.subnet.port_of_lid(self.subnet.sm_lid)
        sm_gid = self._recs.gid(*hit) if hit is not None else 0
        return self.notify(informsmod.sm_notice(trap, gid, self.subnet.sm_lid, sm_gid), now)

    # -- answering -------------------------------------------------------------------
    def _to_sender(self, incoming: Incoming, tid: int, now: float) -> list[Reply]:
        key = (incoming.address.lid, tid)
        entry = self.senders.get(key)
        if entry is None:
            return []
        sender, addr = entry
        out = [(_trim(m), addr) for m in sender.on_mad(incoming.raw, now)]
        if sender.finished:
            del self.senders[key]
        return out

    def _table_later(self, incoming: Incoming, tid: int, now: float) -> list[Reply] | None:
        """A PathRecord GetTable of every pair (`QuickPaths.table`) made a `TableJob` that
        `work` advances; None: answered the usual way (another form, or kept from before).
        A requester with `pending.PER_REQUESTER` tables pending or in flight already is
        answered ERR_NO_RESOURCES (as OpenSM answers a request it has no memory for); a
        request already pending (sent again) is answered once."""
        raw, lid = incoming.raw, incoming.address.lid
        key = (raw[3], raw[SA_HEADER.start:_PATH_QUERY_END], lid)
        if raw[2] != SA_CLASS_VERSION or _to_group(raw) or key in self._path_answers:
            return None
        if self.pending.holds(lid, tid):
            return []
        assert self._quick is not None
        chunks = self._quick.table(raw, lid)
        if chunks is None:
            return None
        # tables of this requester still worked out or being ACKed (one never ACKed costs nothing
        # more: saquery under umad2sim leaves one behind each time)
        in_flight = sum(1 for (l, t), (snd, _a) in self.senders.items()
                        if l == lid and t != tid and (self.pending.holds(l, t) or snd.last_ack))
        if in_flight >= pendingmod.PER_REQUESTER:
            self.answered += 1
            self.requests[(_PATH_ATTR_ID, raw[3], _NO_RESOURCES)] += 1
            return self._respond(incoming, _NO_RESOURCES, b"", 0, now)
        first = self._respond(incoming, 0, b"", _PATH_STRIDE, now, complete=False)
        sender, addr = self.senders[(lid, tid)]
        self.pending.add(lid, tid, pendingmod.TableJob(chunks, key, self._quick, sender, addr))
        return first

    def _get_multi(self, incoming: Incoming, tid: int, now: float) -> list[Reply]:
        """SubnAdmGetMulti: the request is an RMPP transfer (one segment when its GIDs fit
        one MAD); its windows are ACKed, and once it is whole it is answered with a table of
        PathRecords (`multipath`). The answer stands for the ACK of the last segment: a
        requester reading its answer with one receive would otherwise take the ACK for it
        and drop the answer behind it (ours did); one that still waits for that ACK sends
        the segment again, and a duplicate after the end gets the ACK."""
        key = (incoming.address.lid, tid)
        addr = incoming.address.reply()
        if key not in self.receivers:
            rx = RmppReceiver(class_header_size=SA_HEADER_SIZE, total_timeout=REQUEST_KEPT_S)
            self.receivers[key] = (rx, addr, now + REQUEST_KEPT_S)
        rx = self.receivers[key][0]
        done = rx.state is RmppState.DONE
        out = [(m, addr) for m in rx.on_mad(incoming.raw, now)]
        if done or rx.state is not RmppState.DONE:
            if rx.finished and rx.state is not RmppState.DONE:
                del self.receivers[key]  # aborted: the ABORT or STOP is in `out`
            return out
        assert rx.first is not None and rx.data is not None  # DONE
        whole = Incoming(rx.first[:SA_HEADER.stop] + rx.data, incoming.address)
        self._now = now
        status, data, offset = self._multi_answer(whole)
        self.answered += 1
        return self._respond(whole, status, data, offset, now)

    def _multi_answer(self, incoming: Incoming) -> tuple[int, bytes, int]:
        raw = incoming.raw
        if raw[2] != SA_CLASS_VERSION:
            return BAD_VERSION, b"", 0
        if int.from_bytes(raw[16:18], "big") != SaAttrID.MULTI_PATH_RECORD or not self.master or self.subnet is None:
            return UNSUPPORTED_ATTRIBUTE, b"", 0
        mask = int.from_bytes(raw[SA_HEADER.start + 12:SA_HEADER.stop], "big")
        try:
            found = self._shown(incoming, multipath.query(self._recs, raw[SA_HEADER.stop:], mask,
                                                          incoming.address.lid))
        except paths.PathQueryError as e:
            return e.status.word, b"", 0
        except MadError:
            return SaStatus.ERR_REQ_INVALID.word, b"", 0
        if not found:
            return 0, b"", PathRecord.STRIDE // 8
        offset, data = encode_table(found)
        return 0, data, offset

    def _cached_answer(self, incoming: Incoming) -> tuple[int, bytes, int]:
        raw = incoming.raw
        if int.from_bytes(raw[16:18], "big") != SaAttrID.PATH_RECORD or raw[3] not in (Method.GET, Method.GET_TABLE) \
                or not self.master or self.subnet is None:
            return self._answer(incoming)
        # the SA header and the PathRecord only: under umad2sim a MAD's last 32 bytes are junk
        # (docs/PITFALLS.md), which made every request a cache miss
        if _to_group(raw):
            return self._answer(incoming)  # the groups change between snapshots: never kept
        key = (raw[3], raw[SA_HEADER.start:_PATH_QUERY_END], incoming.address.lid)
        hit = self._path_answers.get(key)
        if hit is None:
            hit = self._answer(incoming)
            self._keep_path_answer(key, hit)
        return hit

    def _keep_path_answer(self, key: tuple, answer: tuple[int, bytes, int]) -> None:
        if len(self._path_answers) >= PATH_ANSWERS_KEPT:
            self._path_answers.clear()
        self._path_answers[key] = answer

    def _answer(self, incoming: Incoming) -> tuple[int, bytes, int]:
        """(status, data, AttributeOffset) of the answer to a request."""
        raw = incoming.raw
        method, attr = raw[3], int.from_bytes(raw[16:18], "big")
        if raw[2] != SA_CLASS_VERSION:
            return BAD_VERSION, b"", 0
        if method not in KNOWN_METHODS:
            return UNSUPPORTED_METHOD, b"", 0
        if method == Method.GET_TRACE_TABLE and attr == SaAttrID.TRACE_RECORD and self.master \
                and self.subnet is not None:
            return trace.answer(self._recs, raw, incoming.address.lid)  # a PathRecord in, TraceRecords out
        served = _SERVED.get(attr)
        if attr == SaAttrID.MC_MEMBER_RECORD and method in (Method.SET, Method.DELETE):
            served = SaAgent._join if method == Method.SET else SaAgent._leave
            method = Method.GET  # answered as a Get is: the one record
        elif attr == SaAttrID.INFORM_INFO and method == Method.SET:
            served, method = SaAgent._subscribe, Method.GET
        elif attr == SaAttrID.GUID_INFO_RECORD and method in (Method.SET, Method.DELETE):
            served, method = (SaAgent._set_aliases if method == Method.SET else SaAgent._delete_aliases), Method.GET
        elif attr == SaAttrID.SERVICE_RECORD and method in (Method.SET, Method.DELETE):
            served = SaAgent._register if method == Method.SET else SaAgent._unregister
            method = Method.GET  # the one registration of the request's RID
        if not self.master or self.subnet is None or served is None or method not in (Method.GET, Method.GET_TABLE):
            return UNSUPPORTED_ATTRIBUTE, b"", 0
        if attr == CLASS_PORT_INFO:
            if method != Method.GET:
                return UNSUPPORTED_ATTRIBUTE, b"", 0
            return 0, self.class_port_info().encode(), 0
        if attr == SaAttrID.PATH_RECORD and method == Method.GET and not _to_group(raw):
            quick = self._quick.path_get(raw, incoming.address.lid) if self._quick is not None else None
            if quick is not None:
                return quick
        mad = SaMad.decode(raw)
        kind = record_class(attr)
        try:
            kind.check_mask(mad.component_mask)
            query = self._at_base_lids(kind.decode(mad.data), mad.component_mask)
            found = served(self, query, mad, incoming)
        except paths.PathQueryError as e:
            return e.status.word, b"", 0
        except MadError:
            return SaStatus.ERR_REQ_INVALID.word, b"", 0
        if method == Method.GET:
            if not found:
                return SaStatus.ERR_NO_RECORDS.word, b"", 0
            if len(found) > 1:
                return SaStatus.ERR_TOO_MANY_RECORDS.word, b"", 0
            return 0, found[0].encode(), found[0].STRIDE // 8
        if not found:
            return 0, b"", kind.STRIDE // 8  # a GetTable with nothing: success, no records
        offset, data = encode_table(found)
        return 0, data, offset

    def _respond(self, incoming: Incoming, status: int, data: bytes, offset: int, now: float,
                 complete: bool = True) -> list[Reply]:
        """The answer's first MADs; a table's RMPP sender kept (``complete`` False: its data
        still to come, through `RmppSender.feed`)."""
        req = incoming.raw
        addr = incoming.address.reply()
        head = bytearray(req[:24])
        # GetTraceTable is answered with GetTableResp (IBA 15.2.2)
        head[3] = (Method.GET_TABLE_RESP if req[3] == Method.GET_TRACE_TABLE else
                   response_method(req[3]) if req[3] in KNOWN_METHODS else req[3] | 0x80)
        head[4:6] = status.to_bytes(2, "big")
        if req[3] == Method.GET_MULTI:  # PathRecords answer a MultiPathRecord (IBA 15.2.5.17)
            head[16:18] = int(SaAttrID.PATH_RECORD).to_bytes(2, "big")
        if head[3] not in (Method.GET_TABLE_RESP, Method.GET_MULTI_RESP) or status:
            return [(_single(req, status, data, offset, head), addr)]
        class_header = bytearray(req[SA_HEADER])
        class_header[0:8] = _NO_SM_KEY  # never the requester's (C15-0.1.5), as OpenSM
        class_header[8:10] = offset.to_bytes(2, "big")
        # segment 1 is not sent again unACKed: a requester without RMPP (saquery under umad2sim)
        # has gone, and ibsim would hand it to the next process in its client slot
        sender = RmppSender(bytes(head), bytes(class_header), data, timeout=RMPP_TIMEOUT_S, retries=RMPP_RETRIES,
                            resp_time=NO_RESP_TIME, resend_first=False, complete=complete)
        first = sender.start(now)
        if sender.count != 1:  # several segments, or not known yet
            self.senders[(incoming.address.lid, int.from_bytes(req[8:16], "big"))] = (sender, addr)
        return [(_trim(m), addr) for m in first]

    def class_port_info(self) -> ClassPortInfo:
        # no redirection: requests stay on our QP1 (with the GSI Q_Key), as traps would
        qos = self.subnet is not None and getattr(self.subnet, "qos_policy", None) is not None
        return ClassPortInfo(base_version=1, class_version=SA_CLASS_VERSION,
                             capability_mask=CAP_MASK | (CAP_UD_MULTICAST if self.multicast else 0),
                             capability_mask2=CAP_MASK2 | (CAP2_QOS if qos else 0), resp_time_value=RESP_TIME_VALUE,
                             redirect_qp=GSI_QP, redirect_q_key=GSI_QKEY, trap_q_key=GSI_QKEY)

    # -- the records -------------------------------------------------------------------
    def _reveal(self, mad: SaMad) -> bool:
        return bool(self.sm_key) and mad.sm_key == self.sm_key

    def _at_base_lids(self, query: SaRecord, mask: int) -> SaRecord:
        """The query with each LID it names of a port as that port's base LID, which its
        records carry: OpenSM finds a port by any LID of its LMC range."""
        change = {}
        for field in _BASE_LID_FIELDS.get(type(query), ()):
            lid = getattr(query, field)
            if mask & query.mask(field) and lid:
                hit = self._recs.subnet.port_of_lid(lid)
                base = self._recs.subnet.base_lid(*hit) if hit is not None else lid
                if base != lid:
                    change[field] = base
        return query.replace(**change) if change else query

    def _scan(self, records: Iterable, query: SaRecord, mask: int,
              adjust: Callable[[Any], Any] | None = None) -> list:
        """The records matching ``query`` (``adjust``: what changes a record before it is
        matched)."""
        test = matcher(query, mask)
        if isinstance(records, CompactRecords):
            records = records.select(query, mask)  # built only for the LID and keys asked
        if adjust is not None:
            records = map(adjust, records)
        return [r for r in records if test(r)]

    def _nodes(self, q, mad, inc):
        return self._shown(inc, self._scan(self._recs.nodes, q, mad.component_mask))

    def _port_infos(self, q, mad, inc):
        # CapabilityMask and CapabilityMask2 select the ports having every bit the query sets
        # when its AttributeModifier's bit 31 says so (saquery -s asks IsSM so), else compare
        # equal, as OpenSM matches them (IBA 1.2 errata); the other components compare equal
        mask, caps = mad.component_mask, PortInfoRecord.mask("capability_mask", "capability_mask2")
        bitwise = bool(mad.attribute_modifier & ENHANCED_MATCH)
        found = self._scan(self._recs.port_infos(self._reveal(mad)), q, mask & ~caps if bitwise else mask)
        for field in ("capability_mask", "capability_mask2"):
            want = getattr(q, field)
            if bitwise and mask & PortInfoRecord.mask(field):
                found = [r for r in found if getattr(r, field) & want == want]
        return self._shown(inc, found)

    def _switches(self, q, mad, inc):
        return self._shown(inc, self._scan(self._recs.switches, q, mad.component_mask))

    def _links(self, q, mad, inc):
        return self._shown(inc, self._scan(self._recs.links, q, mad.component_mask))

    def _sms(self, q, mad, inc):
        sms = self.sms_source() if self.sms_source is not None else self._recs.subnet.sms
        return self._shown(inc, self._scan(self._recs.sms(sms, self._reveal(mad)), q, mad.component_mask))

    def _lfts(self, q, mad, inc):
        return self._shown(inc, self._scan(self._recs.lfts, q, mad.component_mask))

    def _mfts(self, q, mad, inc):
        return self._shown(inc, self._scan(self._recs.mfts, q, mad.component_mask))

    def _guid_infos(self, q, mad, inc):
        recs, aliases = self._recs, self.aliases
        adjust: Callable[[Any], Any] | None = None
        if aliases.tables:  # the blocks holding aliases as they are now
            ports = {recs.subnet.base_lid(*hit): hit[0].port_guid(hit[1]) for hit in
                     (recs.subnet.port_of_guid(g) for g in aliases.tables) if hit is not None}
            adjust = lambda r: (r.replace(guids=aliases.block(ports[r.lid], r.block_num))  # noqa: E731
                                if r.lid in ports else r)
        return self._shown(inc, self._scan(recs.guid_infos, q, mad.component_mask, adjust))

    def _set_aliases(self, q, mad, inc):
        return [self.aliases.set(self._alias_port(q, inc), q, mad.component_mask)]

    def _delete_aliases(self, q, mad, inc):
        return [self.aliases.delete(self._alias_port(q, inc), q, mad.component_mask, self.groups.has_member)]

    def _alias_port(self, q, inc) -> Subnet:
        """The snapshot a GUIDInfoRecord Set or Delete changes, its port one the requester
        shares a partition with (else, as no such port, ERR_NO_RECORDS: OpenSM drops it)."""
        viewer = visible.Viewer(self._recs.subnet, inc.address.lid)
        if q.lid and not viewer.sees(viewer.port(q.lid)):
            raise paths.PathQueryError(SaStatus.ERR_NO_RECORDS, f"no port of LID {q.lid} the requester may see")
        return self._recs.subnet

    def _members(self, q, mad, inc):
        sub, requester = self._recs.subnet, self._recs.subnet.port_of_lid(inc.address.lid)
        if requester is None or sub.pkeys is None:
            return self.groups.query(q, mad.component_mask, trusted=self._reveal(mad))
        port = (requester[0].guid, requester[1])
        return self.groups.query(q, mad.component_mask, trusted=self._reveal(mad),
                                 visible=lambda p_key: sub.holds_pkey(port, p_key))

    def _join(self, q, mad, _inc):
        before = set(self.groups.groups)
        rec = self.groups.join(self._recs, q, mad.component_mask)
        if rec.mgid not in before:
            self._reports += self.sm_notice(informsmod.MCG_CREATED, rec.mgid, self._now)
        return [rec]

    def _leave(self, q, mad, _inc):
        rec = self.groups.leave(q, mad.component_mask)
        if rec.mgid not in self.groups.groups:
            self._reports += self.sm_notice(informsmod.MCG_DELETED, rec.mgid, self._now)
        return [rec]

    def _register(self, q, mad, inc):
        self._check_service_pkey(q, mad, inc)
        return servicesmod.reveal([self.services.register(q, mad.component_mask, self._now)], self._reveal(mad))

    def _unregister(self, q, mad, inc):
        self._check_service_pkey(q, mad, inc)
        return servicesmod.reveal([self.services.delete(q, self._now)], self._reveal(mad))

    def _check_service_pkey(self, q, mad, inc) -> None:
        if not visible.Viewer(self._recs.subnet, inc.address.lid).may_register(q, mad.component_mask):
            raise paths.PathQueryError(SaStatus.ERR_REQ_INVALID, "not a member of the ServiceP_Key's partition")

    def _services(self, q, mad, inc):
        # a valid ServiceP_Key hides it from non-members, partitions or not (as OpenSM)
        viewer = visible.Viewer(self._recs.subnet, inc.address.lid)
        found = [r for r in self.services.find(q, mad.component_mask, self._now) if viewer.service(r)]
        return servicesmod.reveal(found, self._reveal(mad))

    def _subscribe(self, q, mad, inc):
        lid = inc.address.lid
        hit = self.subnet.port_of_lid(lid) if self.subnet is not None else None
        if hit is None:
            raise paths.PathQueryError(SaStatus.ERR_REQ_INVALID, "a subscriber at a LID no port has")
        # security traps (256..259) only to a trusted requester (C15-0.2-1.16, as OpenSM)
        if q.subscribe and q.is_generic and q.trap_number_or_device_id in informsmod.SECURITY_TRAPS \
                and not self._reveal(mad):
            raise paths.PathQueryError(SaStatus.ERR_REQ_INVALID, "security traps need the SM_Key")
        if q.subscribe and not visible.Viewer(self._recs.subnet, lid).may_subscribe(q):
            raise paths.PathQueryError(SaStatus.ERR_REQ_INVALID, "no such trap source, or none shares a partition")
        return [self.informs.subscribe(q, lid, self._recs.gid(*hit), inc.address.qpn, via=inc.address)]

    def _inform_records(self, q, mad, inc):
        # only SubscriberGID and Enum select; the QPN only to a trusted requester (C15-0.2-1.16)
        found = self._scan(self.informs.records(), q, mad.component_mask & _IIR_SELECT)
        return [r if self._reveal(mad) else r.replace(qpn=0) for r in self._shown(inc, found)]

    def _pkey_tables(self, q, mad, inc):
        # P_Keys say who may talk to whom: only to a requester with our SM_Key (IBA 15.4.1),
        # as OpenSM answers; ERR_REQ_INVALID to the others
        if not self._reveal(mad):
            raise paths.PathQueryError(SaStatus.ERR_REQ_INVALID, "P_KeyTableRecord without the SM_Key")
        return self._shown(inc, self._scan(self._recs.pkey_tables, q, mad.component_mask))

    def _sl2vl_tables(self, q, mad, inc):
        return self._shown(inc, self._scan(self._recs.sl2vl_tables, q, mad.component_mask))

    def _vlarb_tables(self, q, mad, inc):
        return self._shown(inc, self._scan(self._recs.vlarb_tables, q, mad.component_mask))

    def _lid_of_gid(self, gid: int) -> int:
        hit = self.subnet.port_of_guid(gid & (1 << 64) - 1) if self.subnet is not None else None
        return self.subnet.base_lid(*hit) if hit is not None and self.subnet is not None else 0

    def _paths(self, q, mad, inc):
        if mad.component_mask & PathRecord.mask("dgid") and q.dgid >> 120 == 0xFF:  # to a multicast group
            return self._shown(inc, self.groups.path(self._recs, q, mad.component_mask, mad.method == Method.GET))
        is_get = mad.method == Method.GET  # a Get is NumbPath 1 (IBA 1.2 erratum), whatever NumbPath says
        mask = mad.component_mask & ~PathRecord.mask("num_path") if is_get else mad.component_mask
        found = paths.each_path(self._recs, q, mask, inc.address.lid)
        if is_get:  # as OpenSM: the first the requester may see
            viewer = visible.Viewer(self._recs.subnet, inc.address.lid)
            return next(([pr] for pr in found if viewer.shown([pr])), [])
        return self._shown(inc, list(found))

    def _shown(self, inc: Incoming, records: list) -> list:
        """The records the requester may see under partitions (`visible`)."""
        return visible.Viewer(self._recs.subnet, inc.address.lid).shown(records)

    @property
    def _recs(self) -> Records:
        assert self._records is not None  # _answer checked a snapshot is published
        return self._records


def _single(req: bytes, status: int, data: bytes, offset: int, head: bytes | bytearray | None = None) -> bytes:
    """The one MAD answering ``req`` (a Get's GetResp; ``head``: another MAD header): the
    request's SA header with ``offset`` as its AttributeOffset, ``data`` padded."""
    if head is None:
        head = req[:3] + _GET_RESP + status.to_bytes(2, "big") + req[6:24]
    return b"".join((head, _NO_RMPP, _NO_SM_KEY, offset.to_bytes(2, "big"),
                     req[_AOFFSET + 2:SA_HEADER.stop], data[:SA_DATA_SIZE].ljust(SA_DATA_SIZE, b"\0")))


_GET_RESP = bytes([Method.GET_RESP])
_NO_RMPP = bytes(RMPP_HEADER_SIZE)


def _to_group(raw: bytes) -> bool:
    """Whether a PathRecord query names a multicast DGID (answered from the groups)."""
    return raw[_PATH_DGID] == 0xFF and bool(raw[SA_HEADER.stop - 1] & _DGID_BIT)


def _trim(mad: bytes) -> bytes:
    """The last DATA segment of a transfer ends where its payload does: a receiver that
    counts records by the bytes it got (saquery under umad2sim, which carries what is
    written and reassembles nothing) sees no empty records; the kernel pads it to a whole
    MAD on a real HCA."""
    hdr = rmpp_of(mad)
    if hdr.rmpp_type != RmppType.DATA or not hdr.rmpp_flags & RmppFlags.LAST:
        return mad
    return mad[:RMPP_OFFSET + RMPP_HEADER_SIZE + hdr.payload_length]


_SERVED: dict[int, Callable] = {
    CLASS_PORT_INFO: lambda *_a: [],
    SaAttrID.NODE_RECORD: SaAgent._nodes,
    SaAttrID.PORT_INFO_RECORD: SaAgent._port_infos,
    SaAttrID.SWITCH_INFO_RECORD: SaAgent._switches,
    SaAttrID.LINK_RECORD: SaAgent._links,
    SaAttrID.SM_INFO_RECORD: SaAgent._sms,
    SaAttrID.PATH_RECORD: SaAgent._paths,
    SaAttrID.LINEAR_FORWARDING_TABLE_RECORD: SaAgent._lfts,
    SaAttrID.MULTICAST_FORWARDING_TABLE_RECORD: SaAgent._mfts,
    SaAttrID.GUID_INFO_RECORD: SaAgent._guid_infos,
    SaAttrID.P_KEY_TABLE_RECORD: SaAgent._pkey_tables,
    SaAttrID.SL_TO_VL_MAPPING_TABLE_RECORD: SaAgent._sl2vl_tables,
    SaAttrID.VL_ARBITRATION_TABLE_RECORD: SaAgent._vlarb_tables,
    SaAttrID.MC_MEMBER_RECORD: SaAgent._members,
    SaAttrID.INFORM_INFO_RECORD: SaAgent._inform_records,
    SaAttrID.SERVICE_RECORD: SaAgent._services,
}
