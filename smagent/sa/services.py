"""Service registrations (IBA 15.2.5.14, ServiceRecord): sans-I/O.

A host registers a service with ServiceRecord Set; a registration is named by its
ServiceID, ServiceGID and ServiceP_Key (all three in the mask, else
ERR_REQ_INSUFFICIENT_COMPONENTS) and a Set with the same three replaces it. ServiceGID
must be a port of the subnet (ERR_REQ_INVALID_GID). ServiceLease is in seconds;
0xFFFFFFFF never expires; a lease that ran out removes the registration (checked whenever
the registrations are looked at, with the clock the caller passes). Get and GetTable match
the mask's components; Delete removes the registrations the mask names (none:
ERR_NO_RECORDS)."""
from __future__ import annotations

import dataclasses
import math

from mad.sa import SaStatus, matcher
from mad.sa_records import ServiceRecord
from smagent.sa.paths import PathQueryError
from smagent.sa.records import Records

INFINITE_LEASE = 0xFFFFFFFF
KEY = ("service_id", "service_gid", "service_p_key")


class ServiceError(PathQueryError):
    """A registration refused: ``status`` is the SA status to send."""


@dataclasses.dataclass
class _Registered:
    record: ServiceRecord
    expires: float


class Services:
    def __init__(self) -> None:
        self.registered: dict[tuple[int, int, int], _Registered] = {}

    def _expire(self, now: float) -> None:
        for k in [k for k, r in self.registered.items() if r.expires <= now]:
            del self.registered[k]

    def register(self, recs: Records, q: ServiceRecord, mask: int, now: float) -> ServiceRecord:
        if not all(mask & ServiceRecord.mask(n) for n in KEY):
            raise ServiceError(SaStatus.ERR_REQ_INSUFFICIENT_COMPONENTS,
                               "a registration names ServiceID, ServiceGID and ServiceP_Key")
        hit = recs.subnet.port_of_guid(q.service_gid & (1 << 64) - 1)
        if hit is None or recs.gid(*hit) != q.service_gid:
            raise ServiceError(SaStatus.ERR_REQ_INVALID_GID, f"ServiceGID {q.service_gid:#034x} is no port")
        self._expire(now)
        lease = q.service_lease if mask & ServiceRecord.mask("service_lease") else INFINITE_LEASE
        rec = q.replace(service_lease=lease)
        self.registered[tuple(getattr(q, k) for k in KEY)] = _Registered(
            rec, math.inf if lease == INFINITE_LEASE else now + lease)
        return rec

    def find(self, q: ServiceRecord, mask: int, now: float) -> list[ServiceRecord]:
        self._expire(now)
        test = matcher(q, mask)
        return [r.record for _k, r in sorted(self.registered.items()) if test(r.record)]

    def delete(self, q: ServiceRecord, mask: int, now: float) -> list[ServiceRecord]:
        found = self.find(q, mask, now)
        if not found:
            raise ServiceError(SaStatus.ERR_NO_RECORDS, "no such registration")
        for r in found:
            del self.registered[tuple(getattr(r, k) for k in KEY)]
        return found
