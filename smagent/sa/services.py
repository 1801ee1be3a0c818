"""Service registrations (IBA 15.2.5.14, ServiceRecord): sans-I/O, answered as OpenSM
3.3's SA answers them.

A registration is named by its RID: the ServiceID, ServiceGID and ServiceP_Key the record
carries, whatever the component mask says. A Set needs ServiceID and ServiceGID in the mask
(else ERR_REQ_INVALID); one with the RID of a registration replaces it in place; without
ServiceLease in the mask the lease is for ever (0xFFFFFFFF), and without ServiceP_Key the
answer shows the default P_Key 0xFFFF while the registration keeps the P_Key it was sent
(0, an invalid one, from most clients: such a registration is shown to every requester and
deleted by that RID). Whether the requester (and the ServiceGID's port) may use the
ServiceP_Key is `visible.Viewer.may_register`'s. ServiceLease is in seconds; a lease that
ran out removes the registration (checked whenever the registrations are looked at, with
the clock the caller passes). Get and GetTable match every component but ServiceLease,
newest registration first; Delete removes the one registration of the request's RID (none:
ERR_NO_RECORDS) and answers it. ServiceKey is shown only to a trusted requester (`reveal`)."""
from __future__ import annotations

import dataclasses
import math

from mad.forwarding import PKEY_DEFAULT
from mad.sa import SaStatus, matcher
from mad.sa_records import ServiceRecord
from smagent.sa.pathrecords import PathQueryError

INFINITE_LEASE = 0xFFFFFFFF
SET_NEEDS = ("service_id", "service_gid")
NOT_MATCHED = ServiceRecord.mask("service_lease")  # a lease selects nothing


class ServiceError(PathQueryError):
    """A registration refused: ``status`` is the SA status to send."""


@dataclasses.dataclass
class _Registered:
    record: ServiceRecord
    expires: float


def rid(r: ServiceRecord) -> tuple[int, int, int]:
    return r.service_id, r.service_gid, r.service_p_key


def reveal(records: list[ServiceRecord], trusted: bool) -> list[ServiceRecord]:
    """The records as a requester sees them: ServiceKey 0 unless ``trusted`` (IBA 15.2.5.14)."""
    return records if trusted else [r.replace(service_key=0) if r.service_key else r for r in records]


class Services:
    def __init__(self) -> None:
        self.registered: dict[tuple[int, int, int], _Registered] = {}  # in order of first registration

    def _expire(self, now: float) -> None:
        for k in [k for k, r in self.registered.items() if r.expires <= now]:
            del self.registered[k]

    def register(self, q: ServiceRecord, mask: int, now: float) -> ServiceRecord:
        """Register (or re-register) ``q``: the record to answer with."""
        if not all(mask & ServiceRecord.mask(n) for n in SET_NEEDS):
            raise ServiceError(SaStatus.ERR_REQ_INVALID, "a registration names ServiceID and ServiceGID")
        self._expire(now)
        lease = q.service_lease if mask & ServiceRecord.mask("service_lease") else INFINITE_LEASE
        rec = q.replace(service_lease=lease)
        self.registered[rid(rec)] = _Registered(rec, math.inf if lease == INFINITE_LEASE else now + lease)
        if not mask & ServiceRecord.mask("service_p_key"):
            return rec.replace(service_p_key=PKEY_DEFAULT)
        return rec

    def find(self, q: ServiceRecord, mask: int, now: float) -> list[ServiceRecord]:
        self._expire(now)
        test = matcher(q, mask & ~NOT_MATCHED)
        return [r.record for r in reversed(self.registered.values()) if test(r.record)]

    def delete(self, q: ServiceRecord, now: float) -> ServiceRecord:
        self._expire(now)
        gone = self.registered.pop(rid(q), None)
        if gone is None:
            raise ServiceError(SaStatus.ERR_NO_RECORDS, "no registration of this ServiceID, ServiceGID and P_Key")
        return gone.record
