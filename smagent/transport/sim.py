"""The in-process simulator as a transport: SMPs go to a `SimFabric`, answers come back
at once, and a lost SMP is handed back with umad status 110 (ETIMEDOUT), exactly as
ibsim's umad2sim does, so the base class retries or reports a timeout."""
from __future__ import annotations

import os

from smagent.model.fabric import Fabric
from smagent.sim import SimFabric
from smagent.transport.address import Address
from smagent.transport.base import DEFAULT_RETRIES, DEFAULT_TIMEOUT_MS, DEFAULT_WINDOW
from smagent.transport.immediate import ImmediateTransport


def _parse_local(local, sim: SimFabric) -> tuple[str, int]:
    """None -> where ibsim puts its SM; "name", "name:port", or (name, port)."""
    if local is None:
        return sim.default_port()
    if isinstance(local, str):
        name, sep, port = local.rpartition(":")
        if sep and port.isdigit():
            return name, int(port)
        node = sim.node(local)
        return (local, 0) if node.is_switch else (local, 1)
    name, port = local
    return name, int(port)


class SimTransport(ImmediateTransport):
    """Transport into an in-process simulated fabric.

    `topology`: a SimFabric, a Fabric, a topology file path or text, or None for the
    bundled default. `local`: the (node, port) the SM sits on; it gets IsSM and answers
    SMInfo unless `attach_sm` is False (then `owns_sm_port` is False, and an SM attached
    there by a test is another SM). `.sim` is the SimFabric, for tests.
    """

    name = "sim"

    def __init__(self, topology=None, local=None, *, window: int = DEFAULT_WINDOW,
                 timeout_ms: int = DEFAULT_TIMEOUT_MS, retries: int = DEFAULT_RETRIES, recorder=None,
                 m_key: int = 0, attach_sm: bool = True, **sim_kw):
        super().__init__(window=window, timeout_ms=timeout_ms, retries=retries, recorder=recorder, m_key=m_key)
        if isinstance(topology, SimFabric):
            if sim_kw:
                raise TypeError("capability keywords apply when the transport builds the simulator")
            self.sim = topology
        elif isinstance(topology, Fabric):
            self.sim = SimFabric.from_fabric(topology, **sim_kw)
        elif topology is None or isinstance(topology, (str, os.PathLike)):
            self.sim = SimFabric.load(topology, **sim_kw)
        else:
            raise TypeError(f"topology: a SimFabric, Fabric, path or text, not {type(topology).__name__}")
        self.local = _parse_local(local, self.sim)
        self._ingress = self.sim.resolve(self.local)
        if attach_sm and not self._ingress[0].sm.get(self._ingress[0].lid_port(self._ingress[1])):
            self.sim.attach_sm(self.local)
        # the SM at the local port is this transport's (attached now, or by an earlier
        # transport on the same simulator that this one continues)
        self.owns_sm_port = attach_sm
        # what `respond` sent (GetResp, TrapRepress, Trap), with its LID or address
        self.outbox: list[tuple[bytes, int | Address | bytes]] = []

    def describe(self) -> str:
        node, port = self._ingress
        return f"sim: the built-in simulator's fabric ({len(list(self.sim))} nodes), from {node.name} port {port}"

    def serve(self) -> None:
        """Run as an SM: traps the simulated switches send to our LID reach `on_request`
        (through the receive queue, as umad would deliver them)."""
        self.sim.trap_sinks[(self._ingress[0].name, self._ingress[1])] = self.deliver

    def deliver(self, raw: bytes, source: int | Address = 0) -> None:
        """Queue an unsolicited MAD (a trap, another SM's request) for the next receive,
        from ``source``: a LID (QP0) or a whole address (a GMP from some QP)."""
        self._queue.append((raw, 0, source))

    def _send_unsolicited(self, raw: bytes, to: int | Address | bytes, wait_ms: int = 0) -> None:
        self.outbox.append((raw, to))

    @property
    def local_lid(self) -> int:
        node, port = self._ingress
        return node.pi[node.lid_port(port)].lid

    def _answer(self, raw: bytes, dlid: int) -> bytes | None:
        return self.sim.handle(raw, self._ingress, dlid)  # None: lost, umad hands the send back


__all__ = ["SimTransport"]
