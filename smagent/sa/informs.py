"""Event subscriptions and Reports (IBA 13.4.8.3, 15.2.5.12): sans-I/O.

A host subscribes with InformInfo Set (Subscribe 1; 0 unsubscribes): which notices
(IsGeneric, Type, TrapNumber or DeviceID, ProducerType or VendorID, 0xFFFF/0xFFFFFF: any)
about which ports (GID, or a LID range; LIDRangeBegin 0xFFFF: every port), to be sent to
its QPN at the LID it asked from. The SA keeps one subscription per (subscriber LID,
InformInfo); InformInfoRecords show them (SubscriberGID, Enum).

`notify(notice)` gives a Report (SubnAdmReport of the Notice and IssuerGID) for every
subscription it matches; a Report not answered by ReportResp within `REPORT_TIMEOUT_S` is
sent again, `REPORT_RETRIES` times, and then the subscription is dropped (a subscriber that
does not answer is gone; its host subscribes again when its port comes back: the SM sets
ClientReregister). A subscriber's port leaving the subnet drops its subscriptions too
(`forget_lids`).

The notices the SM produces itself (IBA 14.2.5.1, SM as producer, type Subnet Management):
64 GID in service, 65 GID out of service, 66 multicast group created, 67 deleted; their
DataDetails carry the GID at byte 6 (`sm_notice`)."""
from __future__ import annotations

import dataclasses
from typing import Callable

from mad.attributes import NoticeType
from mad.header import GSI_QKEY, Method
from mad.sa import SaStatus, request
from mad.sa_records import InformInfo, InformInfoRecord, SaNotice
from smagent.sa.pathrecords import PathQueryError
from smagent.transport.address import Address

REPORT_TIMEOUT_S = 1.0
REPORT_RETRIES = 3
ANY16, ANY24 = 0xFFFF, 0xFFFFFF
PRODUCER_SM = 4  # ProducerType of a class manager (the SM)
GID_IN, GID_OUT, MCG_CREATED, MCG_DELETED = 64, 65, 66, 67
SECURITY_TRAPS = range(256, 260)  # bad M_Key, P_Key, Q_Key, switch P_Key

Reply = tuple[bytes, Address]


class InformError(PathQueryError):
    """A subscription refused: ``status`` is the SA status to send."""


def sm_notice(trap: int, gid: int, sm_lid: int, sm_gid: int) -> SaNotice:
    """A notice of the SM's own (64..67) about ``gid`` (a port GID or an MGID)."""
    details = bytes(6) + gid.to_bytes(16, "big")
    return SaNotice(is_generic=1, type=int(NoticeType.SUBNET_MANAGEMENT), producer_type_or_vendor_id=PRODUCER_SM,
                    trap_number_or_device_id=trap, issuer_lid=sm_lid, data_details=details.ljust(54, b"\0"),
                    issuer_gid=sm_gid)


def _subject_gid(n: SaNotice) -> int | None:
    if n.is_generic and n.trap_number_or_device_id in (GID_IN, GID_OUT, MCG_CREATED, MCG_DELETED):
        return int.from_bytes(bytes(n.data_details)[6:22], "big")
    return None


@dataclasses.dataclass
class Subscription:
    lid: int  # the subscriber's LID: Reports go there, to info.qpn
    subscriber_gid: int
    info: InformInfo
    enum: int
    # where the Set came from (its P_Key index, SL, GRH): Reports go the same way, to
    # info.qpn; None: the LID alone (P_Key index 0, SL 0, no GRH)
    via: Address | None = None

    def matches(self, n: SaNotice, lid_of_gid) -> bool:
        i = self.info
        if i.is_generic != n.is_generic:
            return False
        if i.trap_number_or_device_id not in (ANY16, n.trap_number_or_device_id):
            return False
        if i.is_generic and i.type not in (ANY16, n.type):
            return False
        if i.producer_type_or_vendor_id not in (ANY24, n.producer_type_or_vendor_id):
            return False
        subject = _subject_gid(n)
        if i.gid:  # one port: the notice's subject (64..67) or its issuer
            return i.gid in (subject, n.issuer_gid)
        if i.lid_range_begin == ANY16:
            return True
        lid = lid_of_gid(subject) if subject else n.issuer_lid
        return bool(lid) and i.lid_range_begin <= lid <= max(i.lid_range_end, i.lid_range_begin)


@dataclasses.dataclass
class _Pending:
    raw: bytes
    to: Address
    sub: Subscription
    due: float
    tries: int = 0


class Informs:
    """The subscriptions and the Reports in flight."""

    def __init__(self) -> None:
        self.subs: list[Subscription] = []
        self.pending: dict[int, _Pending] = {}  # TID (32 bits) -> Report awaiting its ReportResp
        self._enum = 0
        self._tid = 0x5A000000
        self.sent = self.dropped = 0

    # -- InformInfo Set and InformInfoRecord -------------------------------------------
    def subscribe(self, info: InformInfo, lid: int, subscriber_gid: int, source_qpn: int,
                  via: Address | None = None) -> InformInfo:
        """Subscribe (or unsubscribe) the port at ``lid``: the InformInfo to answer with,
        the request's. As OpenSM: Reports go to the QP the Set came from (``source_qpn``),
        which the subscription keeps as its QPN whatever the request's says (0 included),
        so an unsubscribe names that QPN; the newest subscription comes first."""
        if info.subscribe not in (0, 1):
            raise InformError(SaStatus.ERR_REQ_INVALID, "Subscribe is 0 or 1")
        kept = info.replace(qpn=source_qpn, subscribe=1)
        same = [s for s in self.subs if s.lid == lid and _key(s.info) == _key(kept)]
        if info.subscribe:
            if not same:
                self._enum += 1
                self.subs.insert(0, Subscription(lid, subscriber_gid, kept, self._enum, via))
        elif not same or info.qpn != source_qpn:  # sent from the QP kept, naming it (as OpenSM)
            raise InformError(SaStatus.ERR_REQ_INVALID, "no such subscription")
        else:
            self.subs = [s for s in self.subs if s not in same]
        return info

    def records(self) -> list[InformInfoRecord]:
        return [InformInfoRecord(subscriber_gid=s.subscriber_gid, enum=s.enum,
                                 **{k: getattr(s.info, k) for k in _INFO_FIELDS}) for s in self.subs]

    def forget_lids(self, lids: set[int]) -> None:
        """Subscribers whose ports left the subnet: their subscriptions go."""
        self.subs = [s for s in self.subs if s.lid not in lids]

    # -- Reports -------------------------------------------------------------------------
    def notify(self, notice: SaNotice, now: float, lid_of_gid=lambda gid: 0,
               permitted: Callable[[Subscription, SaNotice], bool] | None = None) -> list[Reply]:
        """Reports of ``notice`` to the subscriptions it matches and ``permitted`` lets hear
        it (partitions, `smagent.sa.visible`). One refused for a notice about a port (not a
        group's) is dropped unless it asked for every port (IBA o13-17.1.2, as OpenSM)."""
        out = []
        for s in list(self.subs):
            if s.matches(notice, lid_of_gid):
                if permitted is not None and not permitted(s, notice):
                    trap = notice.trap_number_or_device_id if notice.is_generic else None
                    if s.info.lid_range_begin != ANY16 and trap not in (MCG_CREATED, MCG_DELETED):
                        self.subs.remove(s)
                        self.dropped += 1
                    continue
                self._tid += 1
                raw = request(Method.REPORT, notice, transaction_id=self._tid).encode()
                to = (Address(lid=s.lid, qpn=s.info.qpn, qkey=GSI_QKEY) if s.via is None else
                      dataclasses.replace(s.via, qpn=s.info.qpn, qkey=GSI_QKEY, path_bits=0))
                self.pending[self._tid] = _Pending(raw, to, s, now + REPORT_TIMEOUT_S)
                self.sent += 1
                out.append((raw, to))
        return out

    def on_report_resp(self, tid: int) -> None:
        """A ReportResp came: by its TID's low 32 bits, the Report's own (the kernel, and
        umad2sim, put the sending agent's id in the upper half)."""
        self.pending.pop(tid & 0xFFFFFFFF, None)

    @property
    def deadline(self) -> float | None:
        return min((p.due for p in self.pending.values()), default=None)

    def on_timeout(self, now: float) -> list[Reply]:
        out = []
        for tid, p in list(self.pending.items()):
            if p.due > now:
                continue
            if p.tries >= REPORT_RETRIES:
                del self.pending[tid]
                if p.sub in self.subs:
                    self.subs.remove(p.sub)
                    self.dropped += 1
                continue
            p.tries += 1
            p.due = now + REPORT_TIMEOUT_S
            out.append((p.raw, p.to))
        return out


_INFO_FIELDS = tuple(n for n in InformInfo.LAYOUT.names)  # type: ignore[attr-defined]


def _key(i: InformInfo) -> tuple:
    """What makes two InformInfos of one subscriber the same subscription (all but
    Subscribe; the QPN and RespTimeValue too, as OpenSM)."""
    return tuple(getattr(i, k) for k in _INFO_FIELDS if k != "subscribe")
