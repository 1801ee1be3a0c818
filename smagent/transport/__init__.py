"""Transports: how MADs (SMPs, and GMPs of any class) reach a fabric. `open_transport`
picks one by name."""
from __future__ import annotations

from smagent.errors import BadInput
from smagent.transport.address import Address, Grh, Incoming
from smagent.transport.base import (
    DEFAULT_RETRIES, DEFAULT_TIMEOUT_MS, DEFAULT_WINDOW, Reply, Request, SendRefused, SmpStatusError, SmpTimeout,
    Transport, TransportError,
)

KINDS = ("sim", "umad", "replay")
# said when no --transport was given and no CA was found (`default_kind`)
SIM_DEFAULT_NOTE = ("note: no InfiniBand CA found (libibumad lists none): working on the built-in simulator's "
                    "made-up fabric; --transport umad for a real one, --transport sim (or SMAGENT_TRANSPORT=sim) "
                    "to choose the simulator and drop this note")


def default_kind(lib_path: str | None = None) -> str:
    """The transport without --transport: "umad" where libibumad lists a CA it can open
    (as OpenSM and infiniband-diags take the first HCA), else "sim" (a fresh machine:
    no libibumad, no ib_umad, no device). Under ibsim's umad2sim preload the simulated
    CA counts as one."""
    from smagent.transport.umad_lib import UmadError, list_ports
    try:
        return "umad" if list_ports(lib_path) else "sim"
    except UmadError:
        return "sim"


def open_transport(kind: str = "sim", *, ca=None, port=None, topology=None, fixture=None, record=None,
                   window: int = DEFAULT_WINDOW, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                   retries: int = DEFAULT_RETRIES, m_key: int = 0, m_key_file=None, keys=None,
                   local=None, serve: bool = False, classes=(), node_name_map=None) -> Transport:
    """Open a transport by name. Import lazily: `sim` needs no libibumad, `umad` no topology.

    M_Keys: ``m_key`` (``--mkey``) for every SMP, ``m_key_file`` (``--mkey-file``, see
    `smagent.config.mkeys`) per node, or a ready `smagent.config.mkeys.KeyChain` as ``keys``. The file
    is read (and checked) before anything is opened; its errors are ValueErrors.
    ``classes``: GMP classes umad registers besides the SMP ones (`umad.AgentClass`).
    ``node_name_map``: a node-name map file (`smagent.config.nodenames`) or a ready
    `NodeNames`, read and checked before anything is opened: what nodes are called."""
    from smagent.config import mkeys, nodenames
    names = (nodenames.load(node_name_map) if node_name_map is not None and not isinstance(
        node_name_map, nodenames.NodeNames) else node_name_map or nodenames.NONE)
    if keys is None:
        keys = mkeys.keychain(m_key, m_key_file)
    elif m_key:
        keys.default = m_key
    recorder = None
    if record:
        from smagent.transport.pcap import CaptureWriter
        recorder = CaptureWriter(record)
    t: Transport
    if kind == "umad":
        from smagent.transport.umad import UmadTransport
        t = UmadTransport(ca=ca, port=port, serve=serve, window=window, timeout_ms=timeout_ms, retries=retries,
                          recorder=recorder, classes=classes)
    elif kind == "sim":
        from smagent.transport.sim import SimTransport
        sim = SimTransport(topology=topology, local=local, window=window, timeout_ms=timeout_ms, retries=retries,
                           recorder=recorder)
        if serve:
            sim.serve()
        t = sim
    elif kind == "replay":
        from smagent.transport.replay import ReplayTransport
        if not fixture:
            raise BadInput("--transport replay needs --fixture FILE")
        t = ReplayTransport(fixture, window=window, timeout_ms=timeout_ms, retries=retries, recorder=recorder)
    else:
        raise BadInput(f"unknown transport {kind!r}: choose one of {', '.join(KINDS)}")
    t.keys = keys
    t.names = names
    return t


__all__ = ["open_transport", "Transport", "Request", "Reply", "TransportError", "SendRefused", "SmpTimeout",
           "SmpStatusError", "KINDS", "Address", "Grh", "Incoming"]
