"""Transports: how SMPs reach a fabric. `open_transport` picks one by name."""
from __future__ import annotations

from smagent.transport.base import (
    DEFAULT_RETRIES, DEFAULT_TIMEOUT_MS, DEFAULT_WINDOW, Reply, Request, SmpStatusError, SmpTimeout,
    Transport, TransportError,
)

KINDS = ("sim", "umad", "replay")


def open_transport(kind: str = "sim", *, ca=None, port=None, topology=None, fixture=None, record=None,
                   window: int = DEFAULT_WINDOW, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                   retries: int = DEFAULT_RETRIES, m_key: int = 0, local=None) -> Transport:
    """Open a transport by name. Import lazily: `sim` needs no libibumad, `umad` no topology."""
    recorder = None
    if record:
        from smagent.pcap import CaptureWriter
        recorder = CaptureWriter(record)
    common = dict(window=window, timeout_ms=timeout_ms, retries=retries, recorder=recorder, m_key=m_key)
    if kind == "umad":
        from smagent.transport.umad import UmadTransport
        return UmadTransport(ca=ca, port=port, **common)
    if kind == "sim":
        from smagent.transport.sim import SimTransport
        return SimTransport(topology=topology, local=local, **common)
    if kind == "replay":
        from smagent.transport.replay import ReplayTransport
        if not fixture:
            raise ValueError("--transport replay needs --fixture FILE")
        return ReplayTransport(fixture, **common)
    raise ValueError(f"unknown transport {kind!r}: choose one of {', '.join(KINDS)}")


__all__ = ["open_transport", "Transport", "Request", "Reply", "TransportError", "SmpTimeout",
           "SmpStatusError", "KINDS"]
