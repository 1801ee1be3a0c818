"""One small transport interface: a batch of SMP requests in, their replies out.

The base class owns everything that is the same for every fabric: the window of
outstanding SMPs, matching replies by the low 32 bits of the TID, per-request
timeouts, retries of timeouts and busy replies, counting, and recording. A backend
only moves bytes: `_send(raw, dlid)` and `_recv(timeout_s)`.

Serving (a long-running SM): MADs that are requests, not responses (another SM's
SubnGet/SubnSet(SMInfo), a switch's SubnTrap), go to `on_request(raw, slid)` when one is
installed, whether they arrive while a batch is in flight or during `poll`; without a
handler they are ignored, as before. `respond(raw, dlid)` sends a MAD that expects no
answer (GetResp, TrapRepress, a Trap of our own): it never enters the window.

M_Keys: every SMP that carries none (0) gets its key from `Transport.keys`, a
`smagent.mkeys.KeyChain`: by DR path for directed route, by DLID for LID-routed. When
keys differ per node, a PortInfo response through a path whose node is known maps that
port's LIDs to the node's key, so LID-routed SMPs (and the LIDs a sweep assigns) find
it. Keys are secrets: no message here shows one (`Request.describe` names the method,
attribute, modifier and destination only).
"""
from __future__ import annotations

import collections
import dataclasses
import logging
import time
from typing import Callable, Iterable, Sequence, TypeVar, overload

from mad import smp as smpcodec
from mad.smp import AnySmp
from mad.errors import MadError
from mad.attributes import AttrID, Attribute, PortInfo
from mad.forwarding import PERMISSIVE_LID
from mad.header import METHOD_OFFSET, RESPONSE_BIT, STATUS_ERROR_BITS, Method, Status, method_name, tid32_of
from smagent.errors import BadInput, FabricFailure
from smagent.mkeys import KeyChain
from smagent.transport.retry import RetryPolicy, distance_class

A = TypeVar("A", bound=Attribute)

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

# What a timeout may mean besides a lost packet: said when a Set or TrapRepress times out
MKEY_HINT = ("if the node is M_Key-protected, the key was refused "
             "(protected SMAs drop SMPs with a wrong M_Key)")
_PORT_INFO = int(AttrID.PORT_INFO)
_WRITES = frozenset({int(Method.SET), int(Method.TRAP_REPRESS)})
log = logging.getLogger("smagent.transport")
_POLICY_BATCH = 32  # answers handed to the retry policy at a time


def _decode_error(raw: bytes) -> str:
    """Why the codec refuses ``raw`` as an SMP."""
    try:
        smpcodec.decode(raw)
    except MadError as e:
        return str(e)
    return "not an SMP"


class TransportError(FabricFailure):
    """A fabric or transport failure (exit status 3 at the CLI). ``request``: the SMP
    that failed as an operator reads it ("SubnGet(NodeInfo, modifier 0x0) to DR 0,1"),
    empty when the failure is not one request's."""

    def __init__(self, message: str = "", changed: list[str] | None = None, *, request: str = ""):
        super().__init__(message, changed)
        self.request = request


class SmpTimeout(TransportError):
    """No response after every try (``request`` names it)."""


class SmpStatusError(TransportError):
    """The SMA answered with a non-zero status; ``response``: its decoded SMP."""

    def __init__(self, message: str, response: AnySmp, *, request: str = ""):
        super().__init__(message, request=request)
        self.response = response


class Request:
    """One SMP to send. ``dlid`` is the LRH destination: a LID for LID-routed SMPs, the
    permissive LID for directed route.

    Built from an SMP (``Request(smp)``), or already encoded (`Request.dr`: what the
    sweep's bulk phases send); then ``raw`` is the truth, ``path`` its DR path, and
    `smp` decodes it when first asked."""
    __slots__ = ("_smp", "raw", "dlid", "path")

    def __init__(self, smp: AnySmp | None = None, dlid: int = PERMISSIVE_LID, *, raw: bytes | None = None,
                 path: tuple[int, ...] | None = None):
        if (smp is None) == (raw is None):
            raise TypeError("Request: an SMP or its bytes, one of them")
        self._smp, self.raw, self.dlid, self.path = smp, raw, dlid, path

    @classmethod
    def dr(cls, method: int, attr_id: int, path: tuple[int, ...], modifier: int = 0,
           value: Attribute | bytes | None = None) -> Request:
        """A directed-route request, encoded at once (`mad.smp.dr_raw`)."""
        if path.__class__ is not tuple:  # "0,1,3" or a list: the checked tuple is the key
            path = smpcodec.parse_path(path)
        return cls(raw=smpcodec.dr_raw(method, attr_id, path, modifier, value), path=path)

    @property
    def smp(self) -> AnySmp:
        s = self._smp
        if s is None:
            assert self.raw is not None
            s = self._smp = smpcodec.decode(self.raw)
        return s

    def describe(self) -> str:
        """Method, attribute, modifier and destination: never the M_Key."""
        s = self.smp
        where = s.target() if s.directed else f"LID {self.dlid}"
        return f"{s.method_name}({s.attribute_name}, modifier {s.attribute_modifier:#x}) to {where}"

    def __repr__(self) -> str:  # not the SMP's fields: they hold its M_Key
        return f"Request({self.describe()})"


@dataclasses.dataclass(slots=True)
class Reply:
    request: Request
    raw: bytes | None = None  # the response MAD as it arrived (checked to be an SMP: size, version, class)
    error: TransportError | None = None
    _response: AnySmp | None = None  # `raw` decoded, on first use

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def data(self) -> bytes:
        """The response's 64-byte data area as it arrived (raise the error if there is
        none): for attributes whose bytes are their value (LFT blocks)."""
        if self.error is not None:
            raise self.error
        assert self.raw is not None  # a Reply without error holds its response
        return self.raw[smpcodec.DATA_SLICE]

    @property
    def response(self) -> AnySmp | None:
        """The decoded response SMP (None if there is none). Decoded when first asked:
        most callers only want the attribute (`value`)."""
        if self._response is None and self.raw is not None:
            self._response = smpcodec.decode(self.raw)
        return self._response

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
    # SMPs sent by (method, AttributeID): counted as numbers on the hot path, named in `by_kind`
    kinds: collections.Counter = dataclasses.field(default_factory=collections.Counter, repr=False)

    def count(self, raw: bytes) -> None:
        """One SMP sent, counted from its bytes."""
        self.kinds[(smpcodec.method_of(raw), smpcodec.attribute_id_of(raw))] += 1

    @property
    def by_kind(self) -> collections.Counter:
        """SMPs sent per kind, named as "SubnGet(PortInfo)" (a fresh Counter each time)."""
        out: collections.Counter = collections.Counter()
        for (m, a), v in self.kinds.items():
            out[f"{method_name(m)}({smpcodec.attribute_name(a)})"] += v
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
        self.on_send: Callable[[Request], None] | None = None  # each request as it is sent: tests, progress
        self.on_request: Callable[[bytes, int], None] | None = None  # unsolicited requests (see module doc)
        # called about every BETWEEN_ROUNDS_S while a batch is in flight: a daemon serves its
        # control socket there, and may raise to abandon the batch (SIGTERM)
        self.between_rounds: Callable[[], None] | None = None
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
        raise NotImplementedError

    def _recv(self, timeout_s: float) -> list[tuple]:
        """Wait up to ``timeout_s`` and return whatever arrived: (256 MAD bytes, umad
        status) pairs, or (bytes, status, source LID) triples. Status 110 hands back an
        undelivered request."""
        raise NotImplementedError

    def _send_unsolicited(self, raw: bytes, dlid: int) -> None:
        """Send a MAD that expects no response (the umad backend sends it untimed)."""
        self._send(raw, dlid)

    # -- serving ----------------------------------------------------------------------
    def _serve(self, item) -> bool:
        """Hand an incoming request to `on_request`; True if it was one."""
        raw, status = item[0], item[1]
        if (self.on_request is None or status != 0 or len(raw) <= METHOD_OFFSET
                or raw[METHOD_OFFSET] & RESPONSE_BIT):
            return False
        self.on_request(raw, item[2] if len(item) > 2 else 0)
        return True

    def poll(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for unsolicited requests and hand each to
        `on_request`; stray responses are dropped. Returns how many were handed over."""
        n = 0
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            for item in self._recv(max(0.0, deadline - time.monotonic())):
                n += self._serve(item)
            if n or time.monotonic() >= deadline:
                return n

    def respond(self, raw: bytes, dlid: int) -> None:
        """Send a response (or TrapRepress, or a Trap of ours): no reply is awaited."""
        self._send_unsolicited(raw, dlid)
        self.stats.sent += 1
        self.stats.count(raw)
        if self.recorder is not None:
            self.recorder.write(raw, inbound=False, dlid=dlid)

    def close(self) -> None:
        if self.recorder is not None:
            self.recorder.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- the interface ----------------------------------------------------------------
    def execute(self, requests: Sequence[Request] | Iterable[Request], *, check: bool = False,
                retries: int | None = None) -> list[Reply]:
        """Send every request, keeping up to ``window`` in flight; return one Reply per
        request, in order. With ``check`` the first failure is raised instead.
        ``retries`` overrides the transport's for this batch (0: one try each); without
        it the transport's `policy` raises the configured retries as loss is observed."""
        reqs = list(requests)
        adapt = retries is None and self.retries > 0
        retries = self.retries if retries is None else retries
        replies = [Reply(r) for r in reqs]
        pending = collections.deque(range(len(reqs)))
        inflight: dict[int, list] = {}  # tid32 -> [index, deadline, attempts]
        lost = [0] * len(reqs) if adapt else None  # tries of each request that were lost
        answered: list = []  # (distance class, tries lost) handed to the policy in small batches
        stats = self.stats
        while pending or inflight:
            room = min(self._cwnd, self.window) - len(inflight)  # posting does not move the window
            while pending and room > 0:
                room -= 1
                i = pending.popleft()
                self._post(reqs[i], inflight, i, 0, retries)
            now = time.monotonic()
            wait = max(0.0, min(v[1] for v in inflight.values()) - now)
            for item in self._recv(wait):
                if self._serve(item):
                    continue
                raw, status = item[0], item[1]
                tid32 = tid32_of(raw)
                slot = inflight.get(tid32)
                if slot is None:
                    if status != UMAD_STATUS_TIMEOUT:  # a late answer to something retried or given up
                        stats.late += 1
                        self.policy.late_answer()
                    continue
                i, _deadline, attempts = slot
                if status == UMAD_STATUS_TIMEOUT:
                    del inflight[tid32]
                    self._timed_out(reqs[i], replies[i], inflight, i, attempts, retries, lost)
                    continue
                # checked and matched on the bytes; decoded only when a caller asks (Reply)
                if not smpcodec.is_smp(raw):
                    del inflight[tid32]
                    stats.errors += 1
                    replies[i].error = TransportError(f"{reqs[i].describe()}: malformed response: "
                                                      f"{_decode_error(raw)}", request=reqs[i].describe())
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
                    self._timed_out(reqs[i], replies[i], inflight, i, attempts, retries, lost)
            if self.between_rounds is not None and now >= self._between_at:  # across batches: short ones too
                self._between_at = now + BETWEEN_ROUNDS_S
                self.between_rounds()
        if answered:
            self.policy.answered_many(answered, retries)
        if check:
            for r in replies:
                if r.error is not None:
                    raise r.error
        return replies

    def query(self, request: Request) -> AnySmp:
        """One request; returns the decoded response SMP or raises. A node that does not
        answer, at a path or LID whose key is not known yet, is asked once more with each
        other key the key chain holds (as discovery does); the key that answers is learnt."""
        given = bool(request.smp.m_key)  # a key the caller chose is not second-guessed
        (reply,) = self.execute([request])
        if isinstance(reply.error, SmpTimeout) and self.keys.per_node and not given:
            s = request.smp
            known = self.keys.path_known(s.path) if s.directed else self.keys.lid_known(request.dlid)
            tried = s.m_key
            for key in ([] if known else self.keys.candidates()):
                if key == tried:
                    continue
                probe = Request(dataclasses.replace(s, m_key=key, transaction_id=smpcodec.next_tid()), request.dlid)
                (alt,) = self.execute([probe], retries=0)
                if alt.response is not None and alt.error is None:
                    if s.directed:
                        self.keys.learn(path=s.path, key=key)
                    else:
                        self.keys.learn(lid=request.dlid, key=key)
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
        status = smpcodec.status_of(raw)
        if not status & STATUS_ERROR_BITS:
            reply.raw = raw
            self._clean += 1
            if self._clean >= self._cwnd:  # a whole window answered: widen
                self._cwnd, self._clean = min(2 * self._cwnd, self.window), 0
            if self.keys.per_node and req.smp.directed and smpcodec.attribute_id_of(raw) == _PORT_INFO:
                self._learn_lids(req, smpcodec.decode(raw))
            return
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
        resp = reply.response
        assert resp is not None
        self.stats.errors += 1
        reply.error = SmpStatusError(f"{req.describe()}: status {resp.status_word:#06x} ({st.describe()})", resp,
                                     request=req.describe())

    def _narrow(self) -> None:
        """A timeout or a busy answer: halve the window, not below the start (DEFAULT_WINDOW)."""
        floor = min(START_WINDOW, self.window)
        self._cwnd, self._clean = max(floor, min(self._cwnd, self.window) // 2), 0

    def _post(self, req: Request, inflight: dict, i: int, attempts: int, retries: int) -> None:
        raw = self._patched(req, attempts) if req._smp is None else self._encoded(req, attempts)
        if self.on_send is not None:
            self.on_send(req)  # its `smp` decodes a request built as bytes: only if asked
        # the configured tries wait the configured timeout; adaptive ones back off
        self.send_timeout_ms = timeout_ms = self.policy.timeout_ms(attempts, retries, self.timeout_ms)
        self._send(raw, req.dlid)
        stats = self.stats
        stats.sent += 1
        stats.count(raw)
        if self.recorder is not None:
            self.recorder.write(raw, inbound=False, dlid=req.dlid)
        inflight[tid32_of(raw)] = [i, time.monotonic() + timeout_ms / 1000.0, attempts]

    def _key_for(self, req: Request) -> int:
        keys = self.keys
        if not keys.per_node:
            return keys.default
        if req.path is not None:  # a directed-route request built as bytes
            return keys.for_path(req.path)
        s = req.smp
        return keys.for_path(s.path) if s.directed else keys.for_lid(req.dlid)

    def _encoded(self, req: Request, attempts: int) -> bytes:
        """A request built from an SMP: a fresh TID per retry (a late answer to the old
        one is not mistaken for it), the M_Key, encoded."""
        s = req.smp
        if attempts:
            s.transaction_id = smpcodec.next_tid()
        if not s.m_key:
            s.m_key = self._key_for(req)
        raw = req.raw = smpcodec.encode(s)
        return raw

    def _patched(self, req: Request, attempts: int) -> bytes:
        """The same for a request built as bytes: patched in place of re-encoded."""
        raw = req.raw
        assert raw is not None
        if attempts:
            raw = smpcodec.with_tid(raw, smpcodec.next_tid())
        if not smpcodec.m_key_of(raw):
            key = self._key_for(req)
            if key:
                raw = smpcodec.with_m_key(raw, key)
        req.raw, req._smp = raw, None
        return raw

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
            # a Get may die of a lost link as often as of a key; a refused write is the
            # classic M_Key symptom (levels 0 and 1 answer every Get), so say it there
            hint = f"; {MKEY_HINT}" if req.smp.method in _WRITES else ""
            reply.error = SmpTimeout(f"{req.describe()}: no response after {attempts + 1} tries "
                                     f"({self.timeout_ms} ms each{', then longer' if attempts > retries else ''})"
                                     f"{hint}", request=req.describe())
            log.warning("%s", reply.error)

    def _learn_lids(self, req: Request, resp: AnySmp) -> None:
        """A PortInfo answered through a path whose node's key is known: that port's
        LIDs take the same key (the LID a Set just assigned included)."""
        smp = req.smp
        keys = self.keys
        if not smp.directed or not keys.path_known(smp.path):
            return
        path = smp.path
        try:
            pi = resp.attribute(PortInfo)
        except MadError:
            return
        port = resp.attribute_modifier & 0xFF
        # modifier 0 (a switch's port 0, or the CA port we came in by) or the port we
        # came in by: a LID of the node at the end of the path
        if pi.lid and (port == 0 or port == pi.local_port_num):
            keys.learn(lid=pi.lid, lmc=pi.lmc, key=keys.for_path(path))
