"""The live transport: MADs through rdma-core's libibumad (and so through ibsim's umad2sim
preload in the tests: never os.open, see docs/PITFALLS.md). SMPs on QP0 always; GMPs of
the classes asked for (`AgentClass`: SA, PerfMgt, ...) on QP1."""
from __future__ import annotations

import dataclasses
import errno
import logging
import os
import time
from typing import Mapping

from mad.header import ATTRIBUTE_ID_SLICE, CLASS_VERSIONS, MGMT_CLASS_OFFSET, SMP_CLASSES, Method, MgmtClass
from smagent.errors import BadInput
from smagent.transport.address import Address
from smagent.transport.base import Incoming, SendRefused, Transport, TransportError, one_thread
from smagent.transport.retry import BACKOFF_CAP
from smagent.transport.umad_lib import UmadError, UmadIOError, UmadPort

log = logging.getLogger("smagent.transport")


@dataclasses.dataclass(frozen=True)
class AgentClass:
    """One management class to register: the request ``methods`` this process serves
    (unsolicited MADs of other methods are not delivered; responses to our own requests
    always are), its ``class_version`` (`mad.header.CLASS_VERSIONS` if None), its
    ``rmpp_version`` (0: RMPP in user space, the only choice under umad2sim), and for a
    vendor class its ``oui``; ``optional``: a class another process on the port may serve
    already (its methods then registered there): skipped if it cannot be registered."""
    mgmt_class: int
    methods: tuple[int, ...] = ()
    class_version: int | None = None
    rmpp_version: int = 0
    oui: int | None = None
    optional: bool = False


# An SA (class 0x03) serving queries: RMPP done by smagent (mad.rmpp), so rmpp_version 0
SA_SERVER = AgentClass(MgmtClass.SUBN_ADM, (Method.GET, Method.SET, Method.GET_TABLE, Method.GET_TRACE_TABLE,
                                            Method.GET_MULTI, Method.DELETE))
# An SA client (`smagent sa`): asks the SA, serves nothing; its RMPP in user space too
SA_CLIENT = AgentClass(MgmtClass.SUBN_ADM)
# A performance manager: asks class 0x04 agents, serves nothing
PERF_CLIENT = AgentClass(MgmtClass.PERF_MGT)
# What a running SM registers only to refuse (`smagent.sm.unserved`), unless a server of
# them runs on the port: the vendor classes of range 1 (0x09-0x0F: vendstat's 0x0A, ...) and
# the OpenIB ones of range 2 (OUI 0x001405: ibping's 0x32, ibsysstat's 0x33)
UNSERVED_CLASSES = (tuple(AgentClass(c, (Method.GET, Method.SET), class_version=1, optional=True) for c in range(0x09, 0x10))
                    + tuple(AgentClass(c, (Method.GET, Method.SET), class_version=1, oui=0x001405, optional=True)
                            for c in (0x32, 0x33)))
_SM_METHODS = (Method.GET, Method.SET, Method.TRAP)


def under_umad2sim(env: Mapping[str, str] | None = None) -> bool:
    """Whether ibsim's umad2sim carries our MADs: it works only as an LD_PRELOAD library,
    so LD_PRELOAD names it (libumad2sim.so)."""
    env = os.environ if env is None else env
    return "umad2sim" in env.get("LD_PRELOAD", "")


def sm_classes(env: Mapping[str, str] | None = None) -> list[AgentClass]:
    """The GMP classes a running SM registers: the SA; and under umad2sim only, the vendor
    classes it would otherwise crash on (`UNSERVED_CLASSES`, `smagent.sm.unserved`). The
    kernel answers a request of a class nobody registered itself, and registering them
    there would take them from `ibping -S` / `ibsysstat -S` on the SM's host."""
    return [SA_SERVER, *(UNSERVED_CLASSES if under_umad2sim(env) else ())]
# The kernel's timeout for a request, in our deadlines: as far as the retry policy may
# lengthen a timeout (`retry.BACKOFF_CAP`), so an answer that late is still delivered
KERNEL_GRACE = BACKOFF_CAP


class UmadTransport(Transport):
    name = "umad"

    def __init__(self, *, ca: str | None = None, port: int | None = None, lib_path: str | None = None,
                 serve: bool = False, classes: tuple[AgentClass, ...] | list[AgentClass] = (), **kw):
        """``serve``: run as an SM. The SMP agents also receive requests (another SM's
        SubnGet/SubnSet(SMInfo), switches' SubnTrap) and the port gets IsSM through its
        issm device. Off for one-shot commands: a method registration is exclusive per
        port, and would fail while another SM runs there. ``classes``: GMP classes to
        register besides (`SA_SERVER`, `PERF_CLIENT`); each may be registered once."""
        super().__init__(**kw)
        seen: set[int] = set()
        for c in classes:
            if c.mgmt_class in SMP_CLASSES or c.mgmt_class in seen:
                raise BadInput(f"management class {c.mgmt_class:#04x} asked twice (the SMP classes are always "
                               f"registered)")
            seen.add(c.mgmt_class)
        self.port = UmadPort(ca, port, lib_path)
        methods = _SM_METHODS if serve else ()
        wanted = [AgentClass(MgmtClass.SUBN_DIRECTED_ROUTE, methods), AgentClass(MgmtClass.SUBN_LID_ROUTED, methods),
                  *classes]
        try:
            self._agents = {}
            for c in wanted:
                try:
                    self._agents[int(c.mgmt_class)] = self.port.register(
                        c.mgmt_class, CLASS_VERSIONS.get(c.mgmt_class, 1) if c.class_version is None else c.class_version,
                        c.methods, rmpp_version=c.rmpp_version, oui=c.oui)
                except UmadError as e:
                    if not c.optional:
                        raise
                    log.warning("management class %#04x not registered (%s): its requests to this port go elsewhere",
                                c.mgmt_class, e)
            self.issm = self.port.open_issm() if serve else None
            self.owns_sm_port = self.issm is not None  # our IsSM: the SM check skips our own port
        except BaseException:
            self.port.close()
            raise

    def local_port(self):
        return self.port.local_port_info()

    def describe(self) -> str:
        return f"umad {self.port.ca} port {self.port.port}"

    def _send(self, raw: bytes, dlid: int) -> None:
        # We retry ourselves, so umad's own retries stay 0: the counts then mean what they
        # say. The kernel drops an answer that comes after the timeout it was given, so it
        # gets `KERNEL_GRACE` times our deadline: a slow node's answer still reaches
        # `execute`, which takes it (and the policy lengthens the timeout) instead of
        # reading the node as lossy or dead.
        try:
            self.port.send(self._agents[raw[MGMT_CLASS_OFFSET]], raw, dlid, self.send_timeout_ms * KERNEL_GRACE, 0)
        except UmadIOError as e:
            if e.errno != errno.EINVAL:
                raise
            local = self.port.port
            raise SendRefused(f"the kernel refused the send (EINVAL){_dr_hint(raw, local)}") from None

    def _agent(self, raw: bytes) -> int:
        agent = self._agents.get(raw[MGMT_CLASS_OFFSET])
        if agent is None:
            raise TransportError(f"no agent for management class {raw[MGMT_CLASS_OFFSET]:#04x} on "
                                 f"{self.describe()}: open the transport with that class (classes=...)")
        return agent

    def _send_to(self, raw: bytes, addr: Address) -> None:
        self.port.send(self._agent(raw), raw, addr.lid, self.send_timeout_ms * KERNEL_GRACE, 0, addr=addr.pack())

    def _send_unsolicited(self, raw: bytes, to: int | Address | bytes, wait_ms: int = 0) -> None:
        # timeout 0: "not solicited" (umad_send(3)), nothing comes back for it; a Report
        # waits ``wait_ms`` in the kernel, which delivers its ReportResp only so
        if to.__class__ is bytes:  # packed already (the SA's ready answers)
            if wait_ms:
                to = Address.unpack(to)  # type: ignore[arg-type]
            else:
                self.port.send_to(self._agent(raw), raw, to)  # type: ignore[arg-type]
                return
        if isinstance(to, Address):
            self.port.send(self._agent(raw), raw, to.lid, wait_ms, 0, addr=to.pack())
        else:
            self.port.send(self._agents[raw[MGMT_CLASS_OFFSET]], raw, to, 0, 0)  # type: ignore[arg-type]

    def _recv(self, timeout_s: float) -> list[tuple[bytes, int, bytes]]:
        port = self.port
        got = port.recv(int(timeout_s * 1000 + 0.999))
        if got is None:
            return []
        out = [(*got, port.last_addr)]  # the whole source address: a GMP's answer needs it
        out += port.recv_ready()  # and what is already queued, without waiting
        return out

    @one_thread
    def poll(self, timeout_s: float) -> int:
        """`Transport.poll`, with the requests `answer_at_once` answers served inside the
        port's receive loop (`UmadPort.answer_until`): a flood of cached SA answers costs
        no frame of this layer each; its answers' destinations must be packed ib_mad_addrs
        (what `SaAgent.answer_fast` gives). Recording, or nothing to answer at once: the
        base loop."""
        fast = self.answer_at_once
        if fast is None or self.on_request is None or self.recorder is not None:
            return super().poll(timeout_s)
        deadline = time.monotonic() + max(0.0, timeout_s)
        sent: list[bytes] = []
        try:
            while True:
                got = self.port.answer_until(fast, self._agents, deadline, sent)
                if got is None:
                    return 0
                raw, status, source, declined = got
                if not declined:
                    self._serve((raw, status, source))  # a response (dropped) or an odd status
                    continue
                self.on_request(Incoming.of(raw, source))  # a request the fast path does not answer
                return 1
        finally:
            self.stats.sent += len(sent)
            kinds = self.stats.kinds
            for m in sent:
                kinds[(m[1], m[3], m[ATTRIBUTE_ID_SLICE])] += 1  # as `Stats.count`, without its frame

    def close(self) -> None:
        self.port.close()
        super().close()


def _dr_hint(raw: bytes, local_port: int) -> str:
    """Why the kernel refuses a directed-route SMP (smi.h's send checks), or ""."""
    if raw[MGMT_CLASS_OFFSET] != MgmtClass.SUBN_DIRECTED_ROUTE or raw[4] & 0x80:
        return ""
    hop_ptr, hop_cnt = raw[6], raw[7]
    if hop_cnt >= 64:
        return f": a directed route has at most 63 hops, not {hop_cnt}"
    if hop_cnt and hop_ptr == 0 and raw[129] != local_port:
        return (f": a directed route leaves by the local port, so its first hop is {local_port} "
                f"(the port this transport opened), not {raw[129]}")
    return f": hop pointer {hop_ptr} with hop count {hop_cnt} is not a route the kernel sends"
