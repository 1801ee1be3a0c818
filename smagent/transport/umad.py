"""The live transport: SMPs on QP0 through rdma-core's libibumad (and so through ibsim's
umad2sim preload in the tests: never os.open, see docs/PITFALLS.md)."""
from __future__ import annotations

from mad.header import MGMT_CLASS_OFFSET, Method, MgmtClass
from smagent.transport.base import Transport
from smagent.transport.umad_lib import UmadPort


class UmadTransport(Transport):
    name = "umad"

    def __init__(self, *, ca: str | None = None, port: int | None = None, lib_path: str | None = None,
                 serve: bool = False, **kw):
        """``serve``: run as an SM. The agents also receive requests (another SM's
        SubnGet/SubnSet(SMInfo), switches' SubnTrap) and the port gets IsSM through its
        issm device. Off for one-shot commands: a method registration is exclusive per
        port, and would fail while another SM runs there."""
        super().__init__(**kw)
        self.port = UmadPort(ca, port, lib_path)
        methods = (Method.GET, Method.SET, Method.TRAP) if serve else ()
        try:
            self._agents = {
                MgmtClass.SUBN_DIRECTED_ROUTE: self.port.register(MgmtClass.SUBN_DIRECTED_ROUTE, methods=methods),
                MgmtClass.SUBN_LID_ROUTED: self.port.register(MgmtClass.SUBN_LID_ROUTED, methods=methods),
            }
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
        # The kernel times the request out (status 110) and we retry ourselves, so
        # umad's own retries stay 0: the counts then mean what they say.
        self.port.send(self._agents[raw[MGMT_CLASS_OFFSET]], raw, dlid, self.send_timeout_ms, 0)

    def _send_unsolicited(self, raw: bytes, dlid: int) -> None:
        # timeout 0: "not solicited" (umad_send(3)), nothing comes back for it
        self.port.send(self._agents[raw[MGMT_CLASS_OFFSET]], raw, dlid, 0, 0)

    def _recv(self, timeout_s: float) -> list[tuple[bytes, int, int]]:
        port = self.port
        got = port.recv(int(timeout_s * 1000 + 0.999))
        if got is None:
            return []
        out = [(*got, port.last_slid)]
        while (more := port.recv(0)) is not None:  # drain what is already queued
            out.append((*more, port.last_slid))
        return out

    def close(self) -> None:
        self.port.close()
        super().close()
