"""Replay a recorded session: a transport that answers SMPs from a capture.

A fixture is any capture `smagent.transport.pcap.read_capture` reads: the ERF files `--record`
writes, and ibdump's ERF type 21 (or pcap/pcapng link type 247). The capture is indexed
once, when the transport opens:

* each request (SubnGet/SubnSet) is paired with its response by the low 32 bits of the
  TID (the kernel and umad2sim rewrite the high half) and by direction (a response has
  ``method & 0x80``); a request that no response follows was undelivered (umad status
  110) and replays as undelivered, so timeouts and the retries they cause reproduce;
* exchanges are keyed by (management class, method, AttributeID, AttributeModifier,
  where): for directed route "where" is the DR path (and the DrSLID/DrDLID ends), for a
  LID-routed SMP the LRH destination LID;
* a key that occurs several times (a Get before and after a change, a retried timeout)
  is answered in recorded order, then the last answer keeps being given;
* a Get the recording never made as such, to a DR path it never used, is answered by
  place (`Places`): the capture's NodeInfo answers say which node (and for a CA which
  port) every recorded path reached and how nodes are cabled, so any path resolves to a
  node, and the last answer recorded there for that attribute and modifier is given (a
  switch's NodeInfo with the LocalPortNum of the port the new path enters by). This is
  what lets one `smagent snapshot` (smagent/verify/recording.py: every table, once) answer the
  Gets of any plan, whichever paths and order it uses.

`_send` looks the request up and queues the recorded response with the TID rewritten to
the request's. A request the recording cannot answer is handed back undelivered while the
batch it belongs to runs, and the batch then raises one `ReplayMiss` naming every read
missing from it (``missing``), so a snapshot's gaps are listed at once; a SubnSet raises
`ReplayRefusesSet` (a recording cannot take writes: use ``--dry-run``). Both are
`TransportError`s (exit 3 at the CLI); an unreadable or malformed fixture raises
`CaptureError` (a ValueError: exit 2) naming the file and the record: the whole file is
read and checked when the transport opens, so a truncated recording is refused before
the first request (a cut at a record boundary cannot be told from a shorter session:
`Session.start_recording` gives a file its name only once it is complete).

A recording that holds no SubnGet(SMInfo) to DR path 0 was made by a session that was
the SM on its own port (the simulator's attached SM, `smagent run`): such a session
never asks its own SMInfo, so the replay owns that port too (`owns_sm_port`), and a
sweep replayed from it does not take the recorder's own SM for another one.
"""
from __future__ import annotations

import dataclasses
import os

from mad import smp as smpcodec
from mad.smp import AnySmp
from mad.attributes import ATTRIBUTE_NAMES, AttrID, NodeInfo, NodeType
from mad.errors import MadError
from mad.forwarding import PERMISSIVE_LID
from mad.header import METHOD_OFFSET, MGMT_CLASS_OFFSET, TID_SLICE, MadHeader, Method, MgmtClass, method_name, response_method
from smagent.transport.pcap import CaptureError, read_capture
from smagent.transport.base import TransportError
from smagent.transport.immediate import ImmediateTransport

_SM_CLASSES = (MgmtClass.SUBN_LID_ROUTED, MgmtClass.SUBN_DIRECTED_ROUTE)
_REQUEST_METHODS = (Method.GET, Method.SET)


class ReplayMiss(TransportError):
    """The recording holds no answer for requests the agent sent. ``missing``: every such
    request of the batch, as an operator reads it ("SubnGet(NodeInfo, modifier 0x0) to DR
    path 0,1"); ``request``/``key``: the first one and its exchange key; ``fixture``: the
    recording."""

    def __init__(self, message: str, *, request: str = "", key: tuple | None = None, fixture: str = "",
                 missing: list[str] | None = None):
        super().__init__(message)
        self.request, self.key, self.fixture = request, key, fixture
        self.missing = missing if missing is not None else [request]


class ReplayRefusesSet(TransportError):
    """A SubnSet reached a replay transport: a recording cannot take writes."""


def exchange_key(smp: AnySmp, dlid: int) -> tuple:
    """The key of a request (a decoded SMP): (mgmt_class, method, attribute_id, modifier,
    where).

    ``where`` is ("DR", path, dr_slid, dr_dlid) for directed route (path as
    infiniband-diags writes it: 0, then one exit port per hop) and ("LID", dlid) for a
    LID-routed SMP (``dlid`` is the LRH destination)."""
    where: tuple[object, ...]
    if smp.directed:
        where = ("DR", smp.path, smp.dr_slid, smp.dr_dlid)
    else:
        where = ("LID", dlid)
    return (smp.mgmt_class, smp.method, smp.attribute_id, smp.attribute_modifier, where)


def describe_key(key: tuple) -> str:
    """A request key the way an operator reads it."""
    _cls, method, attr, mod, where = key
    name = ATTRIBUTE_NAMES.get(attr, f"attribute {attr:#06x}")
    if where[0] == "DR":
        _, path, dr_slid, dr_dlid = where
        to = "DR path " + ",".join(map(str, path))
        if (dr_slid, dr_dlid) != (PERMISSIVE_LID, PERMISSIVE_LID):
            to += f" (DrSLID {dr_slid}, DrDLID {dr_dlid})"
    else:
        to = f"LID {where[1]}"
    return f"{method_name(method)}({name}, modifier {mod:#x}) to {to}"


@dataclasses.dataclass(slots=True)
class _Exchange:
    record: int  # 1-based number of the request among the capture's MADs
    response: bytes | None = None  # None: undelivered (no response followed)


class ReplayIndex:
    """The exchanges of one capture, by key, in recorded order."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self.exchanges: dict[tuple, list[_Exchange]] = {}
        self.requests = self.responses = self.orphans = 0
        pending: dict[int, _Exchange] = {}
        for n, rec in enumerate(read_capture(self.path), 1):
            raw = rec.mad
            if len(raw) <= MGMT_CLASS_OFFSET or raw[MGMT_CLASS_OFFSET] not in _SM_CLASSES:
                continue  # a GMP (SA, PerfMgt, ...) in an ibdump capture: not ours to replay
            try:
                smp = smpcodec.decode(raw)
            except MadError as e:
                raise CaptureError(f"{self.path}: record {n}: malformed SMP: {e}") from None
            if smp.directed and smp.hop_count > smpcodec.MAX_HOPS:
                raise CaptureError(f"{self.path}: record {n}: malformed SMP: hop count {smp.hop_count} "
                                   f"(at most {smpcodec.MAX_HOPS})")
            tid32 = smp.tid32
            if smp.method & 0x80:
                ex = pending.pop(tid32, None)
                if ex is None:
                    self.orphans += 1  # an answer to a request the capture does not hold
                    continue
                ex.response = bytes(raw)
                self.responses += 1
            elif smp.method in _REQUEST_METHODS:
                # A request whose TID is still pending supersedes it: the earlier one was
                # never answered (only possible when sessions are concatenated).
                ex = _Exchange(n)
                pending[tid32] = ex
                self.exchanges.setdefault(exchange_key(smp, rec.dlid), []).append(ex)
                self.requests += 1
            # Traps, TrapRepress and other methods: not requests an SM agent replays
        if not self.requests:
            raise CaptureError(f"{self.path}: no SMP requests recorded: nothing to replay")
        self._cursor: dict[tuple, int] = {}

    def next_answer(self, key: tuple) -> _Exchange | None:
        """The next recorded exchange for ``key`` (the last one once all are used)."""
        seq = self.exchanges.get(key)
        if not seq:
            return None
        i = self._cursor.get(key, 0)
        if i < len(seq) - 1:
            self._cursor[key] = i + 1
        return seq[i]

    def __len__(self) -> int:
        return self.requests


MISSES_SHOWN = 10  # requests a ReplayMiss message names (`missing` holds them all)
_DR_ENDS = (PERMISSIVE_LID, PERMISSIVE_LID)
_LOCAL_PORT = NodeInfo.LAYOUT.byte_slice("local_port_num")
_STATUS = MadHeader.LAYOUT.byte_slice("status")  # a directed-route SMP's D bit included


class Places:
    """Where a capture's directed-route Gets went, by node rather than by path.

    Every NodeInfo answered at a purely directed path P says which node P reaches and by
    which of its ports; P's parent path, one hop shorter, says which node and port lead
    there: so the recorded answers give the cabling (both ways), and any DR path resolves
    to a place: (node GUID, None) for a switch, (node GUID, port entered) for a CA (whose
    NodeInfo, PortInfo 0 and P_Keys are its port's)."""

    def __init__(self, exchanges: dict[tuple, list[_Exchange]]):
        seen: dict[tuple[int, ...], tuple[int, int, bool]] = {}  # path -> (guid, port entered, switch)
        for key, seq in exchanges.items():
            _cls, method, attr, _mod, where = key
            if attr != AttrID.NODE_INFO or method != Method.GET or where[0] != "DR" or tuple(where[2:]) != _DR_ENDS:
                continue
            for ex in seq:
                if ex.response is not None and not smpcodec.status_of(ex.response):
                    ni = smpcodec.attribute_of(ex.response, NodeInfo)
                    seen[where[1]] = (ni.node_guid, ni.local_port_num, ni.node_type == NodeType.SWITCH)
        self.root = seen.get((0,))
        self.links: dict[tuple[int, int], tuple[int, int, bool]] = {}
        for path, node in seen.items():
            up = seen.get(path[:-1]) if len(path) > 1 else None
            if up is not None:
                self.links[(up[0], path[-1])] = node
                self.links[(node[0], node[1])] = (up[0], path[-1], up[2])
        # (place, attribute, modifier) -> the last Get answer recorded there
        self.answers: dict[tuple, bytes] = {}
        last: dict[tuple, int] = {}
        for key, seq in exchanges.items():
            _cls, method, attr, mod, where = key
            if method != Method.GET or where[0] != "DR" or tuple(where[2:]) != _DR_ENDS:
                continue
            at = self.resolve(where[1])
            if at is None:
                continue
            for ex in seq:
                k = (self.place(at), attr, mod)
                if ex.response is not None and ex.record > last.get(k, 0):
                    last[k], self.answers[k] = ex.record, ex.response

    @staticmethod
    def place(node: tuple[int, int, bool]) -> tuple[int, int | None]:
        return (node[0], None if node[2] else node[1])

    def resolve(self, path: tuple[int, ...]) -> tuple[int, int, bool] | None:
        """(node GUID, port entered, is a switch) that a DR path reaches, or None."""
        node: tuple[int, int, bool] | None = self.root
        if not path or path[0] != 0:
            return None
        for hop in path[1:]:
            if node is None:
                return None
            node = self.links.get((node[0], hop))
        return node

    def answer(self, smp: AnySmp, raw: bytes) -> bytes | None:
        """The response a Get of the recorded fabric gets at its place, or None."""
        if not smp.directed or smp.method != Method.GET or (smp.dr_slid, smp.dr_dlid) != _DR_ENDS:
            return None
        node = self.resolve(tuple(smp.path))
        got = None if node is None else self.answers.get((self.place(node), smp.attribute_id,
                                                           smp.attribute_modifier))
        if got is None or node is None:
            return None
        resp = bytearray(raw)  # the request's paths, TID and M_Key; the recorded status and data
        resp[METHOD_OFFSET] = response_method(Method.GET)
        resp[_STATUS] = got[_STATUS]
        resp[smpcodec.DATA_SLICE] = got[smpcodec.DATA_SLICE]
        if smp.attribute_id == AttrID.NODE_INFO and node[2]:  # a switch tells the port a Get came in by
            resp[smpcodec.DATA_SLICE.start + _LOCAL_PORT.start] = node[1]
        return bytes(resp)


class ReplayTransport(ImmediateTransport):
    """Answers SMPs from a recorded capture (see the module docstring)."""

    name = "replay"

    def __init__(self, fixture: str | os.PathLike, **kw):
        super().__init__(**kw)
        try:
            self.index = ReplayIndex(fixture)
        except BaseException:
            if self.recorder is not None:
                self.recorder.close()
            raise
        self.fixture = self.index.path
        # A session that owned its SM port (the simulator's attached SM, `smagent run`)
        # never asks that port's SMInfo; one that did not, asks it whenever the port has
        # IsSM. So a recording without that Get replays as the owner did (see find_sms).
        own = (MgmtClass.SUBN_DIRECTED_ROUTE, Method.GET, AttrID.SM_INFO, 0,
               ("DR", (0,), PERMISSIVE_LID, PERMISSIVE_LID))
        self.owns_sm_port = own not in self.index.exchanges
        self._places: Places | None = None  # built on the first request not recorded as such
        self._missed: dict[str, tuple] = {}  # the batch's requests the recording cannot answer
        self.read_only_reason = (f"a recording ({self.fixture}) cannot take writes; use --dry-run to see the "
                                 f"plan without sending any Set")

    def describe(self) -> str:
        return f"replay of {self.fixture} ({self.index.requests} recorded requests)"

    def execute(self, requests, **kw):  # type: ignore[override]
        """As `Transport.execute`; a batch with requests the recording cannot answer
        raises one `ReplayMiss` naming them all."""
        self._missed = {}
        try:
            replies = super().execute(requests, **kw)
        except TransportError:
            if not self._missed:
                raise
        if self._missed:
            raise self._miss()
        return replies

    def _miss(self) -> ReplayMiss:
        missing = list(self._missed)
        first = missing[0]
        shown = "; ".join(missing[:MISSES_SHOWN]) + (f"; and {len(missing) - MISSES_SHOWN} more"
                                                    if len(missing) > MISSES_SHOWN else "")
        what = first if len(missing) == 1 else f"{shown} ({len(missing)} requests)"
        return ReplayMiss(f"{what}: not in the recording {self.fixture} ({self.index.requests} recorded requests): "
                          f"was it recorded on this fabric, with the same commands and options "
                          f"(`smagent snapshot` records every table any plan reads)?",
                          request=first, key=self._missed[first], fixture=str(self.fixture), missing=missing)

    def _answer(self, raw: bytes, dlid: int) -> bytes | None:
        smp = smpcodec.decode(raw)
        key = exchange_key(smp, dlid)
        if smp.method == Method.SET:
            raise ReplayRefusesSet(
                f"{describe_key(key)}: refused: a recording ({self.fixture}) cannot take writes; "
                f"use --dry-run to see the plan without sending any Set", request=describe_key(key))
        ex = self.index.next_answer(key)
        if ex is None:
            if self._places is None:
                self._places = Places(self.index.exchanges)
            got = self._places.answer(smp, raw)
            if got is None:
                self._missed.setdefault(describe_key(key), key)  # undelivered; the batch names it
            return got
        if ex.response is None:
            return None  # undelivered then: undelivered now
        resp = bytearray(ex.response)
        resp[TID_SLICE] = raw[TID_SLICE]  # the request's TID
        return bytes(resp)


__all__ = ["ReplayTransport", "ReplayIndex", "Places", "ReplayMiss", "ReplayRefusesSet", "exchange_key", "describe_key"]
