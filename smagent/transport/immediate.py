"""Transports that answer inside `_send` (the simulator, a replayed recording): the
answers wait in a queue until the base class asks for them."""
from __future__ import annotations

import time
from typing import Any

from smagent.transport.address import Address
from smagent.transport.base import UMAD_STATUS_TIMEOUT, Transport

Item = tuple[bytes, int] | tuple[bytes, int, "int | Address"]


class ImmediateTransport(Transport):
    """Subclasses implement `_answer(raw, dlid) -> response bytes | None` for SMPs, and
    may implement `_answer_to(raw, address)` for GMPs; None hands the request back
    undelivered (umad status 110), as umad2sim does."""

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        # (MAD, umad status) or (MAD, status, source LID or Address): see Transport._recv
        self._queue: list[Item] = []

    def _answer(self, raw: bytes, dlid: int) -> bytes | None:
        raise NotImplementedError

    def _answer_to(self, raw: bytes, addr: Address) -> bytes | None:
        Transport._send_to(self, raw, addr)  # carries SMPs only: says so
        return None

    def _send(self, raw: bytes, dlid: int) -> None:
        resp = self._answer(raw, dlid)
        self._queue.append((raw, UMAD_STATUS_TIMEOUT) if resp is None else (resp, 0))

    def _send_to(self, raw: bytes, addr: Address) -> None:
        resp = self._answer_to(raw, addr)
        self._queue.append((raw, UMAD_STATUS_TIMEOUT) if resp is None else (resp, 0))

    def _recv(self, timeout_s: float) -> list[Item]:
        if not self._queue:
            # every send is answered at once, so an empty queue means nothing is coming:
            # wait out the caller's deadline instead of spinning
            if timeout_s > 0:
                time.sleep(timeout_s)
            return []
        q, self._queue = self._queue, []
        return q
