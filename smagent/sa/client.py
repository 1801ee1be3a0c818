"""Asking an SA (any: ours, OpenSM's) through a transport: Get and GetTable of SA records,
a GetTableResp longer than one MAD reassembled by `mad.rmpp.RmppReceiver` (its ACKs sent
back to the SA's QP1). What `smagent sa` and the Python API use, so the project tests its
own multi-MAD answers end to end."""
from __future__ import annotations

import time
from typing import TypeVar

from mad import sa
from mad.errors import MadError
from mad.gmp import CLASS_PORT_INFO, ClassPortInfo, build
from mad.header import Method, MgmtClass, tid32_of
from mad.rmpp import RMPP_VERSION, RmppReceiver, RmppSender, RmppType, rmpp_of
from mad.sa import MULTIPATH_GIDS, SaRecord, SaStatus
from mad.sa_records import MultiPathRecord, PathRecord, TraceRecord
from mad.smp import next_tid
from smagent.errors import BadInput, FabricFailure
from smagent.transport.address import Address
from smagent.transport.base import Request, SmpStatusError, Transport

R = TypeVar("R", bound=SaRecord)
SEGMENT_TIMEOUT_S = 2.0  # the longest wait for the next segment of a table


class SaError(FabricFailure):
    """The SA answered with an error status (``status``: the whole status word)."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class SaClient:
    """Queries to the SA at ``address`` (QP1 of the master SM's port: its LID is the
    MasterSMLID of our port, `sa_address`)."""

    def __init__(self, transport: Transport, address: Address, max_table: int = 1 << 20):
        self.t, self.address = transport, address
        self.max_table = max_table  # the largest table accepted (bytes; larger: RMPP STOP)

    def _ask(self, raw: bytes) -> bytes:
        (reply,) = self.t.execute([Request.gmp(raw, self.address)])
        # the transport sees the common status bits (4:0); the SA's own codes are bits 15:8
        sa_coded = reply.error is None and reply.raw and int.from_bytes(reply.raw[4:6], "big") & 0xFF00
        if (isinstance(reply.error, SmpStatusError) or sa_coded) and reply.raw:
            word = int.from_bytes(reply.raw[4:6], "big")
            code = sa.sa_status(word)
            what = code.text if isinstance(code, SaStatus) and code else f"status {word:#06x}"
            raise SaError(f"the SA at LID {self.address.lid} answered: {what}", word)
        if reply.error is not None:
            raise FabricFailure(f"no answer from the SA at LID {self.address.lid}: {reply.error}")
        assert reply.raw is not None
        return reply.raw

    def class_port_info(self) -> ClassPortInfo:
        raw = self._ask(build(MgmtClass.SUBN_ADM, Method.GET, CLASS_PORT_INFO, tid=next_tid()))
        return ClassPortInfo.decode(raw[sa.SaMad.LAYOUT.byte_slice("data").start:])

    def get(self, query: R, mask: int = 0) -> R:
        """The one record a Get finds (SaError: none, or several)."""
        raw = self._ask(sa.request(Method.GET, query, component_mask=mask, transaction_id=next_tid()).encode())
        return sa.SaMad.decode(raw).record(type(query))

    def set(self, record: R, mask: int) -> R:
        """A Set (a multicast join, a registration): the record the SA answers with."""
        raw = self._ask(sa.request(Method.SET, record, component_mask=mask, transaction_id=next_tid()).encode())
        return sa.SaMad.decode(raw).record(type(record))

    def delete(self, record: R, mask: int) -> R:
        """A Delete (a multicast leave): the record as the SA deleted it."""
        raw = self._ask(sa.request(Method.DELETE, record, component_mask=mask, transaction_id=next_tid()).encode())
        return sa.SaMad.decode(raw).record(type(record))

    def table(self, query: R, mask: int = 0) -> list[R]:
        """Every record a GetTable finds, reassembled from its RMPP segments."""
        raw = self._ask(sa.request(Method.GET_TABLE, query, component_mask=mask, transaction_id=next_tid()).encode())
        return self._records(raw, type(query))

    def multi_paths(self, query: MultiPathRecord, gids: list[int], mask: int) -> list[PathRecord]:
        """SubnAdmGetMulti (IBA 15.2.5.17): the PathRecords between the SGIDCount source
        GIDs and the DGIDCount destination GIDs of ``gids`` (sources first), the request
        sent as one RMPP segment (at most `MULTIPATH_GIDS` GIDs), the answer reassembled."""
        if len(gids) > MULTIPATH_GIDS:
            raise BadInput(f"{len(gids)} GIDs: one request segment carries at most {MULTIPATH_GIDS}")
        padded = list(gids) + [0] * (MULTIPATH_GIDS - len(gids))
        raw = sa.request(Method.GET_MULTI, query.replace(sdgids=padded), component_mask=mask,
                         transaction_id=next_tid()).encode()
        size = MultiPathRecord.LAYOUT.size - 16 * (MULTIPATH_GIDS - len(gids))  # the record and its GIDs
        (segment,) = RmppSender(raw[:24], raw[sa.SA_HEADER], raw[sa.SA_HEADER.stop:sa.SA_HEADER.stop + size],
                                timeout=SEGMENT_TIMEOUT_S).start(time.monotonic())
        return self._records(self._ask(segment), PathRecord)  # the SA's ACK of our segment may come first

    def trace(self, query: PathRecord, mask: int) -> list[TraceRecord]:
        """SubnAdmGetTraceTable (IBA 15.2.5, TraceRecord): one TraceRecord per node the path
        PathRecord ``query`` names crosses, source first, the table reassembled."""
        m = sa.request(Method.GET_TRACE_TABLE, query, component_mask=mask, transaction_id=next_tid())
        m.attribute_id = TraceRecord.ATTR_ID  # the records asked for; the data is the path
        return self._records(self._ask(m.encode()), TraceRecord)

    def _records(self, raw: bytes, kind: type[R]) -> list[R]:
        """The records of an answer whose first MAD is ``raw``: one MAD, or an RMPP
        transfer whose further segments are received and ACKed here."""
        head = rmpp_of(raw)
        if not head.active or head.rmpp_version != RMPP_VERSION:
            return _whole(raw, kind)
        rx = RmppReceiver(class_header_size=sa.SA_HEADER_SIZE, max_size=self.max_table)
        if head.rmpp_type == RmppType.DATA:
            self._acks(rx.on_mad(raw, time.monotonic()))
        tid = tid32_of(raw)
        while not rx.finished:
            got = self.t.receive(tid, SEGMENT_TIMEOUT_S)
            if not got:
                raise FabricFailure(f"the SA at LID {self.address.lid} stopped sending its table after "
                                    f"segment {rx.expected - 1}")
            for mad in got:
                hdr = rmpp_of(mad)
                if hdr.rmpp_type == RmppType.DATA or not hdr.active:  # not our own ACKs looped back
                    self._acks(rx.on_mad(mad, time.monotonic()))
        if rx.data is None:
            raise FabricFailure(f"the SA's table transfer ended: {rx.reason}")
        first = sa.SaMad.decode(rx.first)  # type: ignore[arg-type]
        if first.status:
            code = sa.sa_status(first.status)
            raise SaError(f"the SA at LID {self.address.lid} answered: "
                          f"{code.text if isinstance(code, SaStatus) else hex(first.status)}", first.status)
        try:
            return sa.decode_table(rx.data, kind, first.attribute_offset)
        except MadError as e:  # the SA's fault, not ours: OpenSM's GetMultiResp under umad2sim is one
            raise FabricFailure(f"the SA at LID {self.address.lid} sent a table that does not decode: {e}") from None

    def _acks(self, mads: list[bytes]) -> None:
        for m in mads:
            self.t.respond(m, self.address)


def _whole(raw: bytes, kind: type[R]) -> list[R]:
    """The records of an answer that came as one MAD without RMPP: an SA that leaves RMPP
    to the kernel (OpenSM), seen where nothing reassembles it (ibsim's umad2sim). As many
    whole records as the data area holds; trailing all-zero ones are padding, not records
    (no record has LID 0)."""
    mad = sa.SaMad.decode(raw)
    stride = mad.attribute_offset * 8
    if stride < kind.LAYOUT.size:  # type: ignore[attr-defined]
        return []
    data = mad.data[:len(mad.data) - len(mad.data) % stride]
    while data and not any(data[-stride:]):
        data = data[:-stride]
    return sa.decode_table(data, kind, mad.attribute_offset)


def sa_address(transport: Transport) -> Address:
    """QP1 of the master SM's port, as our port knows it (PortInfo.MasterSMLID)."""
    local = getattr(transport, "local_port", None)
    if local is None:
        raise FabricFailure(f"the {transport.name} transport carries no SA queries: use --transport umad")
    info = local()
    if not info.sm_lid:
        raise FabricFailure("our port knows no SM (MasterSMLID 0): is a subnet manager running?")
    return Address.gsi(info.sm_lid, sl=info.sm_sl)
