"""One small transport interface: a batch of MAD requests in, their replies out.

The base class owns everything that is the same for every MAD class and every fabric:
the window of outstanding requests, matching replies by the low 32 bits of the TID,
per-request timeouts, retries of timeouts and busy replies, counting, and recording. It
reads only the common MAD header (mad.header). What SMPs need besides (M_Keys, the key
chain) is the SMP layer, `smagent.transport.smp_layer`; a GMP (SA, PerfMgt, any class on
QP1) is a `Request.gmp` with its full address (`smagent.transport.address.Address`). A
backend only moves bytes: `_send(raw, dlid)` (an SMP, QP0), `_send_to(raw, address)`
(any MAD, addressed) and `_recv(timeout_s)`.

Serving (a long-running SM, an SA): MADs that are requests, not responses (another SM's
SubnGet/SubnSet(SMInfo), a switch's SubnTrap, an SA query), go to `on_request` as an
`Incoming` (the bytes and the address they came from) when a handler is installed,
whether they arrive while a batch is in flight or during `poll`; without a handler they
are ignored. `respond(raw, to)` sends a MAD that expects no answer (GetResp, TrapRepress,
a Trap of our own) to a LID (an SMP) or an `Address` (`incoming.address.reply()`): it
never enters the window. A server whose answers are ready before the request is looked at
(the SA's cached PathRecords) sets `answer_at_once`: it sees each request's bytes and the
source as the backend reports it (umad: the packed ib_mad_addr) first, and what it returns
is sent at once, no `Incoming` made.

Keys are secrets: no message here shows one (`Request.describe` names the method,
attribute, modifier and destination only).
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import logging
import threading
import time
from typing import Any, Callable, Iterable, Sequence, TypeVar, overload

from mad import gmp
from mad import smp as smpcodec
from mad.smp import AnySmp
from mad.errors import MadError
from mad.attributes import Attribute
from mad.forwarding import PERMISSIVE_LID
from mad.header import (
    ATTRIBUTE_ID_SLICE, BASE_VERSION, MAD_SIZE, METHOD_OFFSET, RESPONSE_BIT, SMP_CLASSES, STATUS_ERROR_BITS,
    MadHeader, Method, Status, method_name, status_word_of, tid32_of,
)
from mad.layout import LayoutValue
from smagent.errors import BadInput, FabricFailure
from smagent.config import nodenames
from smagent.config.mkeys import KeyChain
from smagent.transport import smp_layer
from smagent.transport.address import Address, Incoming, lid_of
from smagent.transport.retry import RetryPolicy, distance_class

_REPORT_RESP = int(Method.REPORT_RESP)  # the one response `_serve` hands to a handler

A = TypeVar("A", bound=Attribute)
V = TypeVar("V", bound=LayoutValue)

UMAD_STATUS_TIMEOUT = 110  # ETIMEDOUT: umad (and umad2sim, at once) hands back an undelivered send

# The window: at most DEFAULT_WINDOW SMPs in flight (--window). A transport starts with
# START_WINDOW and doubles it after each window's worth of answered SMPs, up to the cap;
# a timeout or a busy answer halves it, not below START_WINDOW (AIMD, as TCP does, with a
# floor): a fabric that answers everything (ibsim, a healthy subnet) gets the whole cap,
# a struggling one the 8 that was the fixed default. Lower: --window (OpenSM keeps 4).
# (Below 8, a lossy fabric's sweep waits out its timeouts one by one: 10 % loss, 32
# hosts, twice the wall time for the same SMPs.)
DEFAULT_WINDOW = 32
START_WINDOW = 8
DEFAULT_TIMEOUT_MS = 200
BETWEEN_ROUNDS_S = 0.05  # how often `Transport.between_rounds` runs while a batch is in flight
DEFAULT_RETRIES = 3

MKEY_HINT = smp_layer.MKEY_HINT
log = logging.getLogger("smagent.transport")
_POLICY_BATCH = 32  # answers handed to the retry policy at a time
HANDED, ANSWERED = 1, 2  # what `Transport._serve` did with a request


def _malformed(req: "Request", raw: bytes) -> str:
    """Why ``raw`` is no answer to ``req`` (not a whole MAD of the request's class)."""
    if req.addr is None:
        return smp_layer.decode_error(raw)
    try:
        gmp.check(raw)
    except MadError as e:
        return str(e)
    return f"management class {raw[1]:#04x}, not the request's {req.raw[1]:#04x}"  # type: ignore[index]


class TransportError(FabricFailure):
    """A fabric or transport failure (exit status 3 at the CLI). ``request``: the SMP
    that failed as an operator reads it ("SubnGet(NodeInfo, modifier 0x0) to DR 0,1"),
    empty when the failure is not one request's."""

    def __init__(self, message: str = "", changed: list[str] | None = None, *, request: str = ""):
        super().__init__(message, changed)
        self.request = request


class SmpTimeout(TransportError):
    """No response after every try (``request`` names it); any MAD class."""


class SendRefused(TransportError):
    """The local stack refused to send this one request (the kernel's EINVAL: a directed
    route that does not leave by the local port, ...): that request fails, the batch goes on."""


class SmpStatusError(TransportError):
    """The agent answered with a non-zero status; ``response``: its decoded SMP, or for
    a GMP its common header (`mad.header.MadHeader`); ``raw``: the response's bytes."""

    def __init__(self, message: str, response: AnySmp | MadHeader, *, request: str = "", raw: bytes = b""):
        super().__init__(message, request=request)
        self.response, self.raw = response, raw


class Request:
    """One MAD to send. For an SMP, ``dlid`` is the LRH destination (a LID for LID-routed
    SMPs, the permissive LID for directed route) and ``addr`` is None (QP0). A GMP
    (`Request.gmp`) has its whole ``addr``: LID, remote QP, Q_Key, P_Key index, SL, GRH.

    An SMP is built from its fields (``Request(smp)``), or already encoded (`Request.dr`:
    what the sweep's bulk phases send); then ``raw`` is the truth, ``path`` its DR path,
    and `smp` decodes it when first asked."""
    __slots__ = ("_smp", "raw", "dlid", "path", "addr")

    def __init__(self, smp: AnySmp | None = None, dlid: int = PERMISSIVE_LID, *, raw: bytes | None = None,
                 path: tuple[int, ...] | None = None, addr: Address | None = None):
        if (smp is None) == (raw is None):
            raise TypeError("Request: an SMP or its bytes, one of them")
        self._smp, self.raw, self.dlid, self.path, self.addr = smp, raw, dlid, path, addr

    @classmethod
    def gmp(cls, raw: bytes, addr: Address) -> Request:
        """A GMP (any class but 0x01/0x81; `mad.gmp.build`) to ``addr`` (`Address.gsi(lid)`
        for a class agent on QP1). Checked here: a bad one never reaches the window."""
        try:
            gmp.check(raw)
        except MadError as e:
            raise BadInput(f"not a GMP request: {e}") from None
        if raw[METHOD_OFFSET] & RESPONSE_BIT:
            raise BadInput(f"not a GMP request: {gmp.describe(raw)} is a response")
        return cls(raw=bytes(raw), dlid=addr.lid, addr=addr)

    @classmethod
    def dr(cls, method: int, attr_id: int, path: tuple[int, ...], modifier: int = 0,
           value: Attribute | bytes | None = None) -> Request:
        """A directed-route request, encoded at once (`mad.smp.dr_raw`)."""
        if path.__class__ is not tuple:  # "0,1,3" or a list: the checked tuple is the key
            path = smpcodec.parse_path(path)
        return cls(raw=smpcodec.dr_raw(method, attr_id, path, modifier, value), path=path)

    @property
    def smp(self) -> AnySmp:
        """The SMP decoded (a GMP has none: MadError)."""
        s = self._smp
        if s is None:
            assert self.raw is not None
            s = self._smp = smpcodec.decode(self.raw)
        return s

    def describe(self) -> str:
        """Method, attribute, modifier and destination: never the M_Key."""
        if self.addr is not None:
            assert self.raw is not None
            return f"{gmp.describe(self.raw)} to {self.addr.describe()}"
        s = self.smp
        where = s.target() if s.directed else f"LID {self.dlid}"
        return f"{s.method_name}({s.attribute_name}, modifier {s.attribute_modifier:#x}) to {where}"

    def __repr__(self) -> str:  # not the SMP's fields: they hold its M_Key
        return f"Request({self.describe()})"


@dataclasses.dataclass(slots=True)
class Reply:
    request: Request
    raw: bytes | None = None  # the response MAD as it arrived (checked: size, version, the request's class)
    error: TransportError | None = None
    _response: AnySmp | None = None  # `raw` decoded, on first use

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def data(self) -> bytes:
        """The response's data area as it arrived (raise the error if there is none): an
        SMP's 64 bytes, for attributes whose bytes are their value (LFT blocks); a GMP's
        from its class's data offset (`mad.gmp.data_of`)."""
        if self.error is not None:
            raise self.error
        assert self.raw is not None  # a Reply without error holds its response
        if self.request.addr is not None:
            return gmp.data_of(self.raw)
        return self.raw[smpcodec.DATA_SLICE]

    @property
    def response(self) -> AnySmp | None:
        """The decoded response SMP (None if there is none, or for a GMP: `raw`, `gmp`).
        Decoded when first asked: most callers only want the attribute (`value`)."""
        if self._response is None and self.raw is not None and self.request.addr is None:
            self._response = smpcodec.decode(self.raw)
        return self._response

    def gmp(self, kind: type[V]) -> V:
        """A GMP response's data decoded as ``kind`` (`mad.gmp.ClassPortInfo`,
        `mad.perfmgt.PortCounters`, ...), or raise the error."""
        if self.error is not None:
            raise self.error
        assert self.raw is not None
        try:
            return gmp.value_of(self.raw, kind)
        except MadError as e:
            raise TransportError(f"{self.request.describe()}: malformed response: {e}",
                                 request=self.request.describe()) from None

    def __repr__(self) -> str:  # not the SMPs' fields: they hold the M_Key
        return f"Reply({self.request.describe()}: {'ok' if self.error is None else self.error})"

    @overload
    def value(self) -> Attribute: ...
    @overload
    def value(self, kind: type[A]) -> A: ...

    def value(self, kind: type[Attribute] = Attribute) -> Attribute:
        """The decoded attribute of the response (``kind``: the class expected), or raise
        the error."""
        if self.error is not None:
            raise self.error
        assert self.raw is not None  # a Reply without error holds its response
        try:
            if self._response is None:
                return smpcodec.attribute_of(self.raw, kind)
            return self._response.attribute(kind)
        except MadError as e:  # the fabric's answer, not the caller's input
            raise TransportError(f"{self.request.describe()}: malformed response: {e}",
                                 request=self.request.describe()) from None


@dataclasses.dataclass
class Stats:
    sent: int = 0
    received: int = 0
    retries: int = 0
    timeouts: int = 0
    busy: int = 0
    errors: int = 0
    late: int = 0  # answers that came after their request was retried or given up
    # MADs sent by (class, method, AttributeID): counted as numbers on the hot path, named in `by_kind`
    kinds: collections.Counter = dataclasses.field(default_factory=collections.Counter, repr=False)

    def count(self, raw: bytes) -> None:
        """One MAD sent, counted from its bytes."""
        self.kinds[(raw[1], raw[3], raw[ATTRIBUTE_ID_SLICE])] += 1

    @property
    def by_kind(self) -> collections.Counter:
        """MADs sent per kind, named as "SubnGet(PortInfo)", "PerfGet(PortCounters)" (a
        fresh Counter each time)."""
        out: collections.Counter = collections.Counter()
        for (c, m, a), v in self.kinds.items():
            a = int.from_bytes(a, "big")
            attr = smpcodec.attribute_name(a) if c in SMP_CLASSES else gmp.attribute_name(c, a)
            out[f"{method_name(m, c)}({attr})"] += v
        return out

    def sets_sent(self, since: dict | None = None) -> list[str]:
        """What has been sent that may have changed a node, one line per attribute
        (retries counted), since ``since`` (an earlier copy of `by_kind`) or ever: the
        summary a failure after the first Set carries."""
        since = since or {}
        return [f"{k}: {v - since.get(k, 0)} SMPs sent" for k, v in sorted(self.by_kind.items())
                if k.startswith("SubnSet(") and v > since.get(k, 0)]

    def snapshot(self) -> dict:
        d = dataclasses.asdict(self)
        del d["kinds"]
        d["by_kind"] = dict(sorted(self.by_kind.items()))
        return d


def one_thread(fn):
    """A transport entry point: holds the transport's `lock` (re-entrant) throughout, so
    the daemon's thread and the serving thread (`smagent.sm.serving`) never use the port
    at once (a `UmadPort` reuses one buffer each way)."""
    @functools.wraps(fn)
    def call(self, *args, **kw):
        with self.lock:
            return fn(self, *args, **kw)
    return call


class Transport:
    """Base of every transport. Subclasses implement `_send` and `_recv`."""

    name = "base"
    # True when this transport is itself the SM on its local port (it answers SMInfo
    # there: the in-process simulator's attached SM, umad with the issm device open).
    # Otherwise an IsSM on the local port is another SM (OpenSM on the same HCA port),
    # and the sweep asks it like any other.
    owns_sm_port = False
    # Why this transport cannot take writes (a recording), or None: a write is refused
    # with it before the first SMP (`check_writable`), not at the first Set
    read_only_reason: str | None = None

    def describe(self) -> str:
        """What this transport reaches, for a start line ("umad mlx5_0 port 1", ...)."""
        return self.name

    def check_writable(self, dry_run: bool) -> None:
        """BadInput before any SMP when a write (not a dry run) asks a read-only transport."""
        if not dry_run and self.read_only_reason:
            raise BadInput(self.read_only_reason)

    def __init__(self, *, window: int = DEFAULT_WINDOW, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                 retries: int = DEFAULT_RETRIES, recorder=None, m_key: int = 0, keys: KeyChain | None = None):
        if window < 1:
            raise BadInput("window must be at least 1")
        if timeout_ms < 1:
            raise BadInput("timeout must be at least 1 ms")
        if retries < 0:
            raise BadInput("retries must be 0 or more")
        self.window, self.timeout_ms, self.retries = window, timeout_ms, retries
        self.lock = threading.RLock()  # held by every entry point (`one_thread`)
        self._cwnd, self._clean = min(window, START_WINDOW), 0  # the current window (see DEFAULT_WINDOW)
        # retries and timeouts that follow the loss observed (smagent.transport.retry)
        self.policy = RetryPolicy()
        self.send_timeout_ms = timeout_ms  # the wait of the SMP being sent (umad hands it to the kernel)
        self.recorder = recorder
        # the M_Key of every SMP that carries none; `m_key` is its default
        self.keys = keys if keys is not None else KeyChain()
        if m_key:
            self.keys.default = m_key
        self.stats = Stats()
        self.names = nodenames.NONE  # what to call each node (--node-name-map): discovery names nodes by it
        self.on_send: Callable[[Request], None] | None = None  # each request as it is sent: tests, progress
        self.on_request: Callable[[Incoming], None] | None = None  # unsolicited requests (see module doc)
        # (request bytes, source as `_recv` gives it) -> [(answer, destination)] sent at once,
        # or None: then `on_request` (see module doc)
        self.answer_at_once: Callable[[bytes, Any], Sequence[tuple[bytes, Any]] | None] | None = None
        # called about every BETWEEN_ROUNDS_S while a batch is in flight: a daemon serves its
        # control socket there, and may raise to abandon the batch (SIGTERM)
        self.between_rounds: Callable[[], None] | None = None
        self._replies: list[Reply] = []  # the batch `execute` runs
        self._between_at = 0.0

    @property
    def m_key(self) -> int:
        """The default M_Key (``--mkey``): for SMPs the key chain knows nothing better for."""
        return self.keys.default

    @m_key.setter
    def m_key(self, key: int) -> None:
        self.keys.default = key

    # -- backend hooks --------------------------------------------------------------
    def _send(self, raw: bytes, dlid: int) -> None:
        """Send an SMP on QP0 to ``dlid``."""
        raise NotImplementedError

    def _send_to(self, raw: bytes, addr: Address) -> None:
        """Send any MAD to a full address (a GMP: QP1, its Q_Key, ...)."""
        raise TransportError(f"the {self.name} transport carries SMPs only, not {gmp.describe(raw)}",
                             request=gmp.describe(raw))

    def _recv(self, timeout_s: float) -> list[tuple]:
        """Wait up to ``timeout_s`` and return whatever arrived: (256 MAD bytes, umad
        status) pairs, or (bytes, status, source) triples, the source being a packed
        ib_mad_addr, an `Address` or a LID (`Incoming.of`). Status 110 hands back an
        undelivered request."""
        raise NotImplementedError

    def _send_unsolicited(self, raw: bytes, to: int | Address | bytes, wait_ms: int = 0) -> None:
        """Send a MAD no batch waits for; ``to``: a LID (an SMP), an `Address`, or a packed
        ib_mad_addr. ``wait_ms`` > 0: a request whose response comes back through
        `on_request` (a Report's ReportResp): the umad backend hands the kernel that
        timeout, without which the kernel drops the response; 0: sent untimed."""
        if to.__class__ is bytes:
            self._send_to(raw, Address.unpack(to))  # type: ignore[arg-type]
        elif isinstance(to, Address):
            self._send_to(raw, to)
        else:
            self._send(raw, to)  # type: ignore[arg-type]

    # -- serving ----------------------------------------------------------------------
    def _serve(self, item) -> int:
        """Serve an incoming request: 0 if it is none, `HANDED` if given to `on_request`,
        `ANSWERED` if `answer_at_once` answered it."""
        raw, status = item[0], item[1]
        if (self.on_request is None or status != 0 or len(raw) <= METHOD_OFFSET
                or raw[METHOD_OFFSET] & RESPONSE_BIT and raw[METHOD_OFFSET] != _REPORT_RESP):
            return 0  # a ReportResp goes to the handler: it answers a Report `respond` sent
        source = item[2] if len(item) > 2 else None
        fast = self.answer_at_once
        if fast is not None:
            answers = fast(raw, source)
            if answers is not None:
                for answer, to in answers:
                    self.respond(answer, to)  # type: ignore[arg-type]
                return ANSWERED
        self.on_request(Incoming.of(raw, source))
        return HANDED

    @one_thread
    def poll(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for unsolicited requests and hand each to
        `on_request`; stray responses are dropped. Returns how many were handed over:
        those `answer_at_once` answered do not end the wait (a flood of them is served
        here, without a return to the caller's loop for each)."""
        n = 0
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            for item in self._recv(max(0.0, deadline - time.monotonic())):
                n += self._serve(item) == HANDED
            if n or time.monotonic() >= deadline:
                return n

    @one_thread
    def serve_queued(self) -> int:
        """Serve what has already arrived, without waiting: requests as `poll` does; a
        response, which no batch waits for now, counts as a late answer (as `execute`
        counts one, for the retry policy). Returns how many requests were handed over."""
        n = 0
        for item in self._recv(0.0):
            done = self._serve(item)
            n += done == HANDED
            raw = item[0]
            if not done and item[1] != UMAD_STATUS_TIMEOUT and len(raw) > METHOD_OFFSET \
                    and raw[METHOD_OFFSET] & RESPONSE_BIT:
                self.stats.late += 1
                self.policy.late_answer()
        return n

    @one_thread
    def receive(self, tid32: int, timeout_s: float) -> list[bytes]:
        """Wait up to ``timeout_s`` for responses carrying TID ``tid32`` (the low 32 bits)
        that no batch waits for: the further RMPP segments of a GMP answer whose first
        segment `execute` returned. Requests that arrive meanwhile go to `on_request`;
        other responses are dropped. Short MADs come back padded to a whole MAD."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            got = [item[0].ljust(MAD_SIZE, b"\0") for item in self._recv(max(0.0, deadline - time.monotonic()))
                   if not self._serve(item) and item[1] == 0 and len(item[0]) > METHOD_OFFSET
                   and tid32_of(item[0].ljust(MAD_SIZE, b"\0")) == tid32]
            if got or time.monotonic() >= deadline:
                self.stats.received += len(got)
                return got

    def respond(self, raw: bytes, to: int | Address | bytes, *, wait_ms: int = 0) -> None:
        """Send a response (or TrapRepress, or a Trap of ours): no reply is awaited; or,
        with ``wait_ms``, a Report, whose ReportResp `on_request` gets (see `_send_unsolicited`).
        ``to``: a LID for an SMP (QP0), or the whole address (a GMP's answer goes to
        ``incoming.address.reply()``: the sender's QP with its Q_Key, its GRH), as an
        `Address` or packed (ib_mad_addr, `Address.pack`)."""
        self._send_unsolicited(raw, to, wait_ms)
        self.stats.sent += 1
        self.stats.count(raw)
        if self.recorder is not None:
            self.recorder.write(raw, inbound=False, dlid=to.lid if isinstance(to, Address) else
                                lid_of(to) if to.__class__ is bytes else to)  # type: ignore[arg-type]

    def close(self) -> None:
        if self.recorder is not None:
            self.recorder.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- the interface ----------------------------------------------------------------
    @one_thread
    def execute(self, requests: Sequence[Request] | Iterable[Request], *, check: bool = False,
                retries: int | None = None) -> list[Reply]:
        """Send every request, keeping up to ``window`` in flight; return one Reply per
        request, in order. With ``check`` the first failure is raised instead.
        ``retries`` overrides the transport's for this batch (0: one try each); without
        it the transport's `policy` raises the configured retries as loss is observed."""
        reqs = list(requests)
        adapt = retries is None and self.retries > 0
        retries = self.retries if retries is None else retries
        replies = self._replies = [Reply(r) for r in reqs]  # `_post` fails one whose send is refused
        pending = collections.deque(range(len(reqs)))
        inflight: dict[int, list] = {}  # tid32 -> [index, deadline, attempts]
        lost = [0] * len(reqs) if adapt else None  # tries of each request that were lost
        answered: list = []  # (distance class, tries lost) handed to the policy in small batches
        # tid32 of a try given up on -> its request: the kernel still holds that send
        # (`UmadTransport` gives it longer than our deadline), so a slow node's answer to
        # it still comes, and answers the request if that is still in flight
        retired: dict[int, int] = {}
        stats = self.stats
        while pending or inflight:
            room = min(self._cwnd, self.window) - len(inflight)  # posting does not move the window
            while pending and room > 0:
                room -= 1
                i = pending.popleft()
                self._post(reqs[i], inflight, i, 0, retries)
            if not inflight:
                continue  # every send of this round refused (`SendRefused`): post the next
            now = time.monotonic()
            wait = max(0.0, min(v[1] for v in inflight.values()) - now)
            for item in self._recv(wait):
                if self._serve(item):
                    continue
                raw, status = item[0], item[1]
                tid32 = tid32_of(raw)
                slot = inflight.get(tid32)
                if slot is None:
                    if status == UMAD_STATUS_TIMEOUT:
                        retired.pop(tid32, None)
                        continue
                    stats.late += 1  # a late answer to something retried or given up
                    self.policy.late_answer()
                    current = _still_asked(retired.pop(tid32, None), inflight)
                    if current is None:
                        continue
                    tid32 = current
                    slot = inflight[tid32]  # slow, not lost: it answers the request
                    if lost is not None:
                        lost[slot[0]] -= 1
                i, _deadline, attempts = slot
                if status == UMAD_STATUS_TIMEOUT:
                    del inflight[tid32]
                    retired[tid32] = i
                    self._timed_out(reqs[i], replies[i], inflight, i, attempts, retries, lost)
                    continue
                if len(raw) < MAD_SIZE and reqs[i].addr is not None:
                    raw = raw.ljust(MAD_SIZE, b"\0")  # a last RMPP segment, written as long as its payload
                # checked and matched on the bytes; decoded only when a caller asks (Reply)
                if len(raw) != MAD_SIZE or raw[0] != BASE_VERSION or raw[1] != reqs[i].raw[1]:  # type: ignore[index]
                    del inflight[tid32]
                    stats.errors += 1
                    replies[i].error = TransportError(f"{reqs[i].describe()}: malformed response: "
                                                      f"{_malformed(reqs[i], raw)}", request=reqs[i].describe())
                    continue
                if not raw[METHOD_OFFSET] & RESPONSE_BIT:
                    continue  # our own request looped back by a permissive route: ignore
                del inflight[tid32]
                stats.received += 1
                if lost is not None:
                    answered.append((distance_class(reqs[i].raw), lost[i]))
                    if len(answered) >= _POLICY_BATCH:
                        self.policy.answered_many(answered, retries)
                        answered = []
                if self.recorder is not None:
                    self.recorder.write(raw, inbound=True, dlid=reqs[i].dlid)
                self._answered(reqs[i], replies[i], raw, inflight, i, attempts, retries)
            now = time.monotonic()
            for tid32, (i, deadline, attempts) in list(inflight.items()):
                if deadline <= now:
                    del inflight[tid32]
                    retired[tid32] = i
                    self._timed_out(reqs[i], replies[i], inflight, i, attempts, retries, lost)
            if self.between_rounds is not None and now >= self._between_at:  # across batches: short ones too
                self._between_at = now + BETWEEN_ROUNDS_S
                self.between_rounds()
        if answered:
            self.policy.answered_many(answered, retries)
        self._replies = []  # the caller holds them now: kept here they would outlive its use
        if check:
            for r in replies:
                if r.error is not None:
                    raise r.error
        return replies

    def query(self, request: Request) -> AnySmp:
        """One SMP; returns the decoded response SMP or raises. A node that does not
        answer, at a path or LID whose key is not known yet, is asked once more with each
        other key the key chain holds (as discovery does); the key that answers is learnt.
        (A GMP: `execute`, then `Reply.gmp`.)"""
        given = bool(request.smp.m_key)  # a key the caller chose is not second-guessed
        (reply,) = self.execute([request])
        if isinstance(reply.error, SmpTimeout) and not given:
            s = request.smp
            for key in smp_layer.key_probes(self.keys, request):
                probe = Request(dataclasses.replace(s, m_key=key, transaction_id=smpcodec.next_tid()), request.dlid)
                (alt,) = self.execute([probe], retries=0)
                if alt.response is not None and alt.error is None:
                    smp_layer.learn(self.keys, request, key)
                    return alt.response
        if reply.error is not None:
            raise reply.error
        assert reply.response is not None  # a Reply without error holds its response
        return reply.response

    # -- internals ----------------------------------------------------------------------
    def _answered(self, req: Request, reply: Reply, raw: bytes, inflight: dict, i: int, attempts: int,
                  retries: int) -> None:
        """A response matched to its request: its status read from the bytes, busy
        retried, an error kept; the window widens after a whole window answered."""
        status = status_word_of(raw)  # error bits are the low ones in every class (D is bit 15)
        if not status & STATUS_ERROR_BITS:
            reply.raw = raw
            self._clean += 1
            if self._clean >= self._cwnd:  # a whole window answered: widen
                self._cwnd, self._clean = min(2 * self._cwnd, self.window), 0
            if self.keys.per_node and req.addr is None:
                smp_layer.answered(self.keys, req, raw)
            return
        if req.addr is None:
            status = smpcodec.status_of(raw)  # a directed-route SMP's 15 bits below D
        st = Status.from_word(status)
        if st.busy:
            self._narrow()
            if attempts < retries:
                self.stats.busy += 1
                self.stats.retries += 1
                log.debug("%s: busy, retry %d of %d", req.describe(), attempts + 1, retries)
                self._post(req, inflight, i, attempts + 1, retries)
                return
        reply.raw = raw
        resp: AnySmp | MadHeader | None = reply.response if req.addr is None else MadHeader.decode(raw)
        assert resp is not None
        self.stats.errors += 1
        reply.error = SmpStatusError(f"{req.describe()}: status {status_word_of(raw):#06x} ({st.describe()})",
                                     resp, request=req.describe(), raw=raw)

    def _narrow(self) -> None:
        """A timeout or a busy answer: halve the window, not below the start (DEFAULT_WINDOW)."""
        floor = min(START_WINDOW, self.window)
        self._cwnd, self._clean = max(floor, min(self._cwnd, self.window) // 2), 0

    def _post(self, req: Request, inflight: dict, i: int, attempts: int, retries: int) -> None:
        addr = req.addr
        if addr is None:
            raw = smp_layer.prepare(self.keys, req, attempts)
        else:  # a GMP: only a fresh TID per retry
            raw = req.raw  # type: ignore[assignment]
            if attempts:
                raw = req.raw = smpcodec.with_tid(raw, smpcodec.next_tid())
        if self.on_send is not None:
            self.on_send(req)  # its `smp` decodes a request built as bytes: only if asked
        # the configured tries wait the configured timeout; adaptive ones back off
        self.send_timeout_ms = timeout_ms = self.policy.timeout_ms(attempts, retries, self.timeout_ms)
        try:
            if addr is None:
                self._send(raw, req.dlid)
            else:
                self._send_to(raw, addr)
        except SendRefused as e:
            self.stats.errors += 1
            self._replies[i].error = SendRefused(f"{req.describe()}: {e}", request=req.describe())
            return
        stats = self.stats
        stats.sent += 1
        stats.count(raw)
        if self.recorder is not None:
            self.recorder.write(raw, inbound=False, dlid=req.dlid)
        inflight[tid32_of(raw)] = [i, time.monotonic() + timeout_ms / 1000.0, attempts]

    def _timed_out(self, req, reply, inflight, i, attempts, retries, lost) -> None:
        self.stats.timeouts += 1
        self._narrow()
        allowed = retries
        if lost is not None:  # adaptive: as many as the loss seen so far calls for
            lost[i] += 1
            allowed = self.policy.retries(distance_class(req.raw), retries)
        if attempts < allowed:
            self.stats.retries += 1
            log.debug("%s: timed out, retry %d of %d", req.describe(), attempts + 1, allowed)
            self._post(req, inflight, i, attempts + 1, retries)
        else:
            # a Get may die of a lost link as often as of a key: a write's timeout says so
            hint = smp_layer.timeout_hint(req) if req.addr is None else ""
            reply.error = SmpTimeout(f"{req.describe()}: no response after {attempts + 1} tries "
                                     f"({self.timeout_ms} ms each{', then longer' if attempts > retries else ''})"
                                     f"{hint}", request=req.describe())
            log.warning("%s", reply.error)


def _still_asked(i: int | None, inflight: dict) -> int | None:
    """The tid32 of the try in flight of request ``i`` (None: none, or ``i`` is None)."""
    if i is None:
        return None
    return next((t for t, v in inflight.items() if v[0] == i), None)
