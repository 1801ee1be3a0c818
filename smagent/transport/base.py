"""One small transport interface: a batch of SMP requests in, their replies out.

The base class owns everything that is the same for every fabric: the window of
outstanding SMPs, matching replies by the low 32 bits of the TID, per-request
timeouts, retries of timeouts and busy replies, counting, and recording. A backend
only moves bytes: `_send(raw, dlid)` and `_recv(timeout_s)`.
"""
from __future__ import annotations

import collections
import dataclasses
import time
from typing import Callable, Iterable, Sequence

from mad import smp as smpcodec
from mad.errors import MadError
from mad.forwarding import PERMISSIVE_LID
from mad.header import method_name

UMAD_STATUS_TIMEOUT = 110  # ETIMEDOUT: umad (and umad2sim, at once) hands back an undelivered send

DEFAULT_WINDOW = 8
DEFAULT_TIMEOUT_MS = 200
DEFAULT_RETRIES = 3


class TransportError(RuntimeError):
    """A fabric or transport failure (exit status 3 at the CLI)."""


class SmpTimeout(TransportError):
    pass


class SmpStatusError(TransportError):
    """The SMA answered with a non-zero status."""

    def __init__(self, message: str, response):
        super().__init__(message)
        self.response = response


@dataclasses.dataclass(slots=True)
class Request:
    """One SMP to send. ``dlid`` is the LRH destination: a LID for LID-routed SMPs, the
    permissive LID for directed route."""
    smp: object
    dlid: int = PERMISSIVE_LID

    def describe(self) -> str:
        s = self.smp
        where = s.target() if s.directed else f"LID {self.dlid}"
        return f"{s.method_name}({s.attribute_name}, modifier {s.attribute_modifier:#x}) to {where}"


@dataclasses.dataclass(slots=True)
class Reply:
    request: Request
    response: object | None = None  # decoded SMP
    error: TransportError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def value(self):
        """The decoded attribute of the response, or raise the error."""
        if self.error is not None:
            raise self.error
        return self.response.attribute()


@dataclasses.dataclass
class Stats:
    sent: int = 0
    received: int = 0
    retries: int = 0
    timeouts: int = 0
    busy: int = 0
    errors: int = 0
    by_kind: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    def count(self, smp) -> None:
        self.by_kind[f"{method_name(smp.method)}({smp.attribute_name})"] += 1

    def snapshot(self) -> dict:
        d = dataclasses.asdict(self)
        d["by_kind"] = dict(sorted(self.by_kind.items()))
        return d


class Transport:
    """Base of every transport. Subclasses implement `_send` and `_recv`."""

    name = "base"

    def __init__(self, *, window: int = DEFAULT_WINDOW, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                 retries: int = DEFAULT_RETRIES, recorder=None, m_key: int = 0):
        if window < 1:
            raise ValueError("window must be at least 1")
        if timeout_ms < 1:
            raise ValueError("timeout must be at least 1 ms")
        if retries < 0:
            raise ValueError("retries must be 0 or more")
        self.window, self.timeout_ms, self.retries = window, timeout_ms, retries
        self.recorder = recorder
        self.m_key = m_key
        self.stats = Stats()
        self.on_send: Callable[[object], None] | None = None  # hook for tests and dry runs

    # -- backend hooks --------------------------------------------------------------
    def _send(self, raw: bytes, dlid: int) -> None:
        raise NotImplementedError

    def _recv(self, timeout_s: float) -> list[tuple[bytes, int]]:
        """Wait up to ``timeout_s`` and return whatever arrived: (256 MAD bytes, umad
        status) pairs. Status 110 hands back an undelivered request."""
        raise NotImplementedError

    def close(self) -> None:
        if self.recorder is not None:
            self.recorder.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- the interface ----------------------------------------------------------------
    def execute(self, requests: Sequence[Request] | Iterable[Request], *, check: bool = False) -> list[Reply]:
        """Send every request, keeping up to ``window`` in flight; return one Reply per
        request, in order. With ``check`` the first failure is raised instead."""
        reqs = list(requests)
        replies = [Reply(r) for r in reqs]
        pending = collections.deque(range(len(reqs)))
        inflight: dict[int, list] = {}  # tid32 -> [index, deadline, attempts]
        timeout_s = self.timeout_ms / 1000.0
        stats = self.stats
        while pending or inflight:
            while pending and len(inflight) < self.window:
                i = pending.popleft()
                self._post(reqs[i], inflight, i, 0, timeout_s)
            now = time.monotonic()
            wait = max(0.0, min(v[1] for v in inflight.values()) - now)
            for raw, status in self._recv(wait):
                tid32 = int.from_bytes(raw[12:16], "big")
                slot = inflight.get(tid32)
                if slot is None:
                    continue  # a late answer to something already retried or given up
                i, _deadline, attempts = slot
                if status == UMAD_STATUS_TIMEOUT:
                    del inflight[tid32]
                    self._timed_out(reqs[i], replies[i], inflight, i, attempts, timeout_s, pending)
                    continue
                try:
                    resp = smpcodec.decode(raw)
                except MadError as e:
                    del inflight[tid32]
                    stats.errors += 1
                    replies[i].error = TransportError(f"{reqs[i].describe()}: malformed response: {e}")
                    continue
                if not resp.is_response:
                    continue  # our own request looped back by a permissive route: ignore
                del inflight[tid32]
                stats.received += 1
                if self.recorder is not None:
                    self.recorder.write(raw, inbound=True, dlid=reqs[i].dlid)
                st = resp.status_info
                if st.busy and attempts < self.retries:
                    stats.busy += 1
                    stats.retries += 1
                    self._post(reqs[i], inflight, i, attempts + 1, timeout_s)
                    continue
                replies[i].response = resp
                if not st.ok:
                    stats.errors += 1
                    replies[i].error = SmpStatusError(
                        f"{reqs[i].describe()}: status {resp.status_word:#06x} ({st.describe()})", resp)
            now = time.monotonic()
            for tid32, (i, deadline, attempts) in list(inflight.items()):
                if deadline <= now:
                    del inflight[tid32]
                    self._timed_out(reqs[i], replies[i], inflight, i, attempts, timeout_s, pending)
        if check:
            for r in replies:
                if r.error is not None:
                    raise r.error
        return replies

    def query(self, request: Request):
        """One request; returns the decoded response SMP or raises."""
        (reply,) = self.execute([request], check=True)
        return reply.response

    # -- internals ----------------------------------------------------------------------
    def _post(self, req: Request, inflight: dict, i: int, attempts: int, timeout_s: float) -> None:
        s = req.smp
        if attempts:
            # a fresh TID per retry, so a late answer to the old one is not mistaken
            s.transaction_id = smpcodec.next_tid()
        if self.m_key and not s.m_key:
            s.m_key = self.m_key
        raw = smpcodec.encode(s)
        if self.on_send is not None:
            self.on_send(s)
        self._send(raw, req.dlid)
        self.stats.sent += 1
        self.stats.count(s)
        if self.recorder is not None:
            self.recorder.write(raw, inbound=False, dlid=req.dlid)
        inflight[s.transaction_id & 0xFFFFFFFF] = [i, time.monotonic() + timeout_s, attempts]

    def _timed_out(self, req, reply, inflight, i, attempts, timeout_s, pending) -> None:
        self.stats.timeouts += 1
        if attempts < self.retries:
            self.stats.retries += 1
            self._post(req, inflight, i, attempts + 1, timeout_s)
        else:
            reply.error = SmpTimeout(f"{req.describe()}: no response after {attempts + 1} tries "
                                     f"({self.timeout_ms} ms each)")
