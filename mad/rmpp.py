"""RMPP, the Reliable Multi-Packet Transaction Protocol (IBA 13.6): its header and a
sans-I/O sender and receiver.

The header sits right after the common MAD header in every class that may carry RMPP
(Subnet Administration among them, `mad.sa`). A transfer cuts a payload into segments;
each segment's MAD is the common header, the RMPP header, the class's own header (SA:
SM_Key, AttributeOffset, ComponentMask: copied into every segment) and a slice of the
data.

`RmppSender` and `RmppReceiver` are pure state machines: a transport feeds them the MADs
it receives (`on_mad`) and the time when their `deadline` passes (`on_timeout`), and
sends the MADs they return. Nothing here reads a clock or a socket, so any transport,
and the tests, can drive them.

Facts used (IBA 13.6.2, 13.6.3; the Linux kernel's RMPP agent behaves the same way):

* segments are numbered from 1; the first carries First, the last carries Last;
* PayloadLength: in the first segment, the whole transfer: the class header counted
  once per segment plus the data; in the last segment, the class header plus the data
  of that segment; 0 in the others;
* the sender sends only segment 1 until an ACK gives it a window (NewWindowLast: the
  last segment it may send); an ACK carries the last segment received in order;
* an ACK, STOP or ABORT answering a segment copies the segment's headers and flips the
  method's response bit;
* ABORT and STOP carry an `RmppStatus`; STOP only "resources exhausted".
"""
from __future__ import annotations

import enum
import math

from construct import BitsInteger

from mad.errors import MadFieldError, MadLengthError
from mad.header import HEADER_SIZE, MAD_SIZE, METHOD_OFFSET, RESPONSE_BIT
from mad.layout import LayoutValue, layout

B = BitsInteger

RMPP_VERSION = 1
NO_RESP_TIME = 0x1F  # RRespTime: no time value given


class RmppType(enum.IntEnum):
    NONE = 0  # not an RMPP packet (Active is clear)
    DATA = 1
    ACK = 2
    STOP = 3
    ABORT = 4


class RmppFlags(enum.IntFlag):
    ACTIVE = 1
    FIRST = 2
    LAST = 4


class RmppStatus(enum.IntEnum):
    """RMPPStatus (IBA 13.6.2.1): 0 in DATA and ACK, 1 in STOP, 118..127 in ABORT."""
    NORMAL = 0
    RESOURCES_EXHAUSTED = 1
    TOTAL_TIME_TOO_LONG = 118
    INCONSISTENT_LAST_AND_PAYLOAD_LENGTH = 119
    INCONSISTENT_FIRST_AND_SEGMENT_NUMBER = 120
    BAD_RMPP_TYPE = 121
    NEW_WINDOW_LAST_TOO_SMALL = 122
    SEGMENT_NUMBER_TOO_BIG = 123
    ILLEGAL_STATUS = 124
    UNSUPPORTED_VERSION = 125
    TOO_MANY_RETRIES = 126
    UNSPECIFIED = 127


# The 12 bytes after the common MAD header. Data1/Data2 mean SegmentNumber and
# PayloadLength in DATA, SegmentNumber and NewWindowLast in ACK; STOP and ABORT leave
# them 0 (reserved).
RMPP_HEADER = [
    "rmpp_version" / B(8), "rmpp_type" / B(8), "r_resp_time" / B(5), "rmpp_flags" / B(3),
    "rmpp_status" / B(8), "segment_number" / B(32), "payload_length" / B(32),
]


@layout(*RMPP_HEADER)
class RmppHeader(LayoutValue):
    """The RMPP header (IBA 13.6.2.1). In an ACK, ``payload_length`` holds NewWindowLast."""
    rmpp_version: int = 0
    rmpp_type: int = 0
    r_resp_time: int = 0
    rmpp_flags: int = 0
    rmpp_status: int = 0
    segment_number: int = 0
    payload_length: int = 0

    @property
    def new_window_last(self) -> int:
        return self.payload_length

    @property
    def active(self) -> bool:
        return bool(self.rmpp_flags & RmppFlags.ACTIVE)


RMPP_OFFSET = HEADER_SIZE
RMPP_HEADER_SIZE = RmppHeader.LAYOUT.size
# what each segment carries after the RMPP header: the class header and the data
SEGMENT_SPACE = MAD_SIZE - RMPP_OFFSET - RMPP_HEADER_SIZE


def rmpp_of(mad: bytes | bytearray | memoryview) -> RmppHeader:
    """The RMPP header of a MAD."""
    if len(mad) != MAD_SIZE:
        raise MadLengthError(f"RMPP: a MAD is exactly {MAD_SIZE} bytes, got {len(mad)}")
    return RmppHeader.decode(mad, RMPP_OFFSET)


def with_rmpp(mad: bytes | bytearray, header: RmppHeader) -> bytes:
    """``mad`` with its RMPP header replaced."""
    if len(mad) != MAD_SIZE:
        raise MadLengthError(f"RMPP: a MAD is exactly {MAD_SIZE} bytes, got {len(mad)}")
    return bytes(mad[:RMPP_OFFSET]) + header.encode() + bytes(mad[RMPP_OFFSET + RMPP_HEADER_SIZE:])


class RmppState(enum.Enum):
    ACTIVE = "active"
    DONE = "done"
    STOPPED = "stopped"  # the peer sent STOP, or we did
    ABORTED = "aborted"  # the peer sent ABORT, or we did


class _Machine:
    """What sender and receiver share: the state, why it ended, the class header size."""

    def __init__(self, class_header_size: int, resp_time: int):
        if not isinstance(class_header_size, int) or not 0 <= class_header_size < SEGMENT_SPACE:
            raise MadFieldError("class_header_size", class_header_size, f"0..{SEGMENT_SPACE - 1}")
        if not isinstance(resp_time, int) or not 0 <= resp_time <= 0x1F:
            raise MadFieldError("resp_time", resp_time, "0..31")
        self.class_header_size = class_header_size
        self.resp_time = resp_time
        self.seg_data = SEGMENT_SPACE - class_header_size  # data bytes per segment
        self.state = RmppState.ACTIVE
        self.status = RmppStatus.NORMAL  # why it stopped or aborted
        self.reason = ""  # the same, in words
        self.deadline: float | None = None  # call on_timeout when this time has passed

    @property
    def finished(self) -> bool:
        return self.state is not RmppState.ACTIVE

    def _reply(self, segment: bytes | bytearray, kind: RmppType, status: int = 0, seg: int = 0,
               nwl: int = 0, flip: bool = True) -> bytes:
        head = bytearray(segment[:RMPP_OFFSET])
        if flip:
            head[METHOD_OFFSET] ^= RESPONSE_BIT
        hdr = RmppHeader(rmpp_version=RMPP_VERSION, rmpp_type=kind, r_resp_time=self.resp_time,
                         rmpp_flags=RmppFlags.ACTIVE, rmpp_status=status, segment_number=seg,
                         payload_length=nwl)
        start = RMPP_OFFSET + RMPP_HEADER_SIZE
        cls_hdr = bytes(segment[start:start + self.class_header_size])
        return (bytes(head) + hdr.encode() + cls_hdr).ljust(MAD_SIZE, b"\0")

    def _end(self, state: RmppState, status: int, reason: str) -> None:
        self.state = state
        self.status = RmppStatus(status) if status in RmppStatus._value2member_map_ else RmppStatus.UNSPECIFIED
        self.reason = reason
        self.deadline = None

    def _fail(self, segment: bytes | bytearray, status: RmppStatus, reason: str, flip: bool = True) -> list[bytes]:
        """End the transfer ourselves: an ABORT (or STOP for exhausted resources) to the peer."""
        kind = RmppType.STOP if status is RmppStatus.RESOURCES_EXHAUSTED else RmppType.ABORT
        self._end(RmppState.STOPPED if kind is RmppType.STOP else RmppState.ABORTED, status, reason)
        return [self._reply(segment, kind, status, flip=flip)]

    def _peer_ended(self, hdr: RmppHeader) -> list[bytes]:
        kind = "STOP" if hdr.rmpp_type == RmppType.STOP else "ABORT"
        self._end(RmppState.STOPPED if kind == "STOP" else RmppState.ABORTED, hdr.rmpp_status,
                  f"the peer sent {kind} (status {hdr.rmpp_status})")
        return []

    def _check_common(self, mad: bytes | bytearray, hdr: RmppHeader, flip: bool) -> list[bytes] | None:
        """The checks every received RMPP packet passes; an answer ending the transfer if not."""
        if hdr.rmpp_version != RMPP_VERSION:
            return self._fail(mad, RmppStatus.UNSUPPORTED_VERSION, f"RMPPVersion {hdr.rmpp_version}", flip)
        if hdr.rmpp_type in (RmppType.STOP, RmppType.ABORT):
            return self._peer_ended(hdr)
        if hdr.rmpp_status != RmppStatus.NORMAL:
            return self._fail(mad, RmppStatus.ILLEGAL_STATUS,
                              f"RMPPStatus {hdr.rmpp_status} in a packet of RMPPType {hdr.rmpp_type}", flip)
        return None


class RmppSender(_Machine):
    """Sends one payload as DATA segments, within the window the receiver's ACKs give,
    retransmitting what is not acknowledged when ``deadline`` passes.

    ``head``: the 24-byte common MAD header of every segment (method, TID, attribute);
    ``class_header``: the class's header copied into every segment (SA: 20 bytes);
    ``data``: the payload. ``timeout``: seconds to wait for an ACK; ``retries``: how many
    times the unacknowledged window is sent again before the transfer is aborted;
    ``total_timeout``: the longest the whole transfer may take (None: no limit).
    ``resend_first`` False: segment 1 is never sent again while no ACK has come; the
    transfer waits as long as its retries would take for the first ACK, then ends without
    a word (no ABORT). A responder's choice: a requester's MAD layer sends its request
    again (same TID) when no whole answer came, which starts the answer again; one that
    never ACKs is gone or does no RMPP, and whatever we sent would reach whoever now has
    its address.

    ``complete`` False: the payload is still being produced; `feed` adds to it (and says
    when it is whole), and segments go out as their data is there and the window allows.
    Until the payload is whole a segment goes only once the data goes on past it (it might
    otherwise be the last), and segment 1 announces PayloadLength 0 when sent before it is
    whole (the length is not known yet: receivers take the last segment's).
    """

    def __init__(self, head: bytes, class_header: bytes, data: bytes, *, timeout: float, retries: int = 4,
                 total_timeout: float | None = None, resp_time: int = NO_RESP_TIME, resend_first: bool = True,
                 complete: bool = True):
        super().__init__(len(class_header), resp_time)
        if len(head) != RMPP_OFFSET:
            raise MadLengthError(f"RMPP sender: the common MAD header is {RMPP_OFFSET} bytes, got {len(head)}")
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise MadFieldError("timeout", timeout, "a positive number of seconds")
        if not isinstance(retries, int) or retries < 0:
            raise MadFieldError("retries", retries, "0 or more")
        self.head, self.class_header, self.data = bytes(head), bytes(class_header), bytearray(data)
        self.timeout, self.retries, self.total_timeout = timeout, retries, total_timeout
        self.complete = complete
        self.count = 0  # segments in all (known once complete)
        self._announced: int | None = None  # segment 1's PayloadLength, as first sent
        self._counted()
        self.last_ack = 0  # the last segment the receiver has in order
        self.window_last = 1  # the last segment we may send (1 until the first ACK)
        self.sent = 0  # the highest segment sent so far
        self.tries_left = retries
        self.resend_first = resend_first
        self.started: float | None = None

    def _template(self) -> bytes:
        """What an ABORT or STOP is made from: the headers every segment carries."""
        return (self.head + bytes(RMPP_HEADER_SIZE) + self.class_header).ljust(MAD_SIZE, b"\0")

    def _counted(self) -> None:
        # an empty payload still travels: one segment with no data
        self.count = max(1, math.ceil(len(self.data) / self.seg_data)) if self.complete else 0
        if max(self.count, len(self.data) // self.seg_data) > 0xFFFFFFFF:
            raise MadFieldError("data", len(self.data), "at most 2**32-1 segments")

    def _ready(self) -> int:
        """The segments that may go now (the window aside)."""
        return self.count if self.complete else max(0, len(self.data) - 1) // self.seg_data

    def segment(self, n: int) -> bytes:
        """Segment ``n`` (1-based) as a MAD."""
        if not 1 <= n <= self._ready():
            raise MadFieldError("segment_number", n, f"1..{self._ready()}")
        chunk = bytes(self.data[(n - 1) * self.seg_data:n * self.seg_data])
        last = self.complete and n == self.count
        flags = RmppFlags.ACTIVE | (RmppFlags.FIRST if n == 1 else 0) | (RmppFlags.LAST if last else 0)
        if n == 1:
            if self._announced is None:
                self._announced = self.count * self.class_header_size + len(self.data) if self.complete else 0
            length = self._announced
        elif last:
            length = self.class_header_size + len(chunk)
        else:
            length = 0
        hdr = RmppHeader(rmpp_version=RMPP_VERSION, rmpp_type=RmppType.DATA, r_resp_time=self.resp_time,
                         rmpp_flags=flags, segment_number=n, payload_length=length)
        return (self.head + hdr.encode() + self.class_header + chunk).ljust(MAD_SIZE, b"\0")

    def _send_window(self, first: int, now: float) -> list[bytes]:
        last = min(self.window_last, self._ready())
        out = [self.segment(n) for n in range(first, last + 1)]
        self.sent = max(self.sent, last)
        self.deadline = now + self.timeout if self.sent > self.last_ack else None  # else: waiting for data
        return out

    def feed(self, more: bytes, now: float, done: bool = False) -> list[bytes]:
        """More of a payload not yet whole (``done``: now it is); the segments that may go."""
        if self.complete:
            raise MadFieldError("feed", len(more), "a payload not yet complete")
        self.data += more
        self.complete = done
        self._counted()
        if self.finished or self.started is None or self.window_last <= self.sent:
            return []
        return self._send_window(self.sent + 1, now)

    def start(self, now: float) -> list[bytes]:
        """The first segments to send (before any ACK: segment 1 only)."""
        if self.started is not None:
            raise MadFieldError("start", now, "called once per transfer")
        self.started = now
        return self._send_window(1, now)

    def _too_long(self, now: float) -> bool:
        return (self.total_timeout is not None and self.started is not None
                and now - self.started > self.total_timeout)

    def on_mad(self, mad: bytes | bytearray, now: float) -> list[bytes]:
        """An ACK, STOP or ABORT from the receiver; the MADs to send in return."""
        if self.finished or self.started is None:
            return []
        hdr = rmpp_of(mad)
        if not hdr.active:
            return []  # not an RMPP packet: not ours to answer
        ended = self._check_common(mad, hdr, flip=False)
        if ended is not None:
            return ended
        if self._too_long(now):
            return self._fail(self._template(), RmppStatus.TOTAL_TIME_TOO_LONG, "the transfer took too long", False)
        if hdr.rmpp_type != RmppType.ACK:
            return self._fail(self._template(), RmppStatus.BAD_RMPP_TYPE,
                              f"a sender got RMPPType {hdr.rmpp_type}", False)
        seg, nwl = hdr.segment_number, hdr.new_window_last
        if seg > self.sent:
            return self._fail(self._template(), RmppStatus.SEGMENT_NUMBER_TOO_BIG,
                              f"ACK of segment {seg}, only {self.sent} sent", False)
        if nwl < seg:
            return self._fail(self._template(), RmppStatus.NEW_WINDOW_LAST_TOO_SMALL,
                              f"NewWindowLast {nwl} below the ACKed segment {seg}", False)
        if seg < self.last_ack:
            return []  # a stale ACK, overtaken by a later one
        progress = seg > self.last_ack
        self.last_ack = seg
        self.window_last = max(self.window_last, nwl)
        if self.complete and seg == self.count:
            self._end(RmppState.DONE, RmppStatus.NORMAL, "")
            return []
        if progress:
            self.tries_left = self.retries
        if self.window_last > self.sent:
            return self._send_window(self.sent + 1, now)
        if progress:
            self.deadline = now + self.timeout if self.sent > self.last_ack else None
        return []

    def on_timeout(self, now: float) -> list[bytes]:
        """Time has passed: resend what is not acknowledged, or give up."""
        if self.finished or self.deadline is None or now < self.deadline:
            return []
        if self._too_long(now):
            return self._fail(self._template(), RmppStatus.TOTAL_TIME_TOO_LONG, "the transfer took too long", False)
        silent = not self.resend_first and self.last_ack == 0
        if self.tries_left == 0:
            if silent:
                self._end(RmppState.ABORTED, RmppStatus.TOO_MANY_RETRIES, "segment 1 never ACKed: given up silently")
                return []
            return self._fail(self._template(), RmppStatus.TOO_MANY_RETRIES,
                              f"no ACK past segment {self.last_ack} after {self.retries} retries", False)
        self.tries_left -= 1
        if silent:
            self.deadline = now + self.timeout
            return []
        return self._send_window(self.last_ack + 1, now)

    def abort(self, status: RmppStatus = RmppStatus.UNSPECIFIED, reason: str = "aborted by the caller") -> list[bytes]:
        """End the transfer now: the ABORT to send (nothing once it has ended)."""
        if self.finished:
            return []
        return self._fail(self._template(), status, reason, False)


class RmppReceiver(_Machine):
    """Reassembles one transfer from DATA segments, ACKing with a window of ``window``
    segments; ``data`` is the payload once ``state`` is DONE, ``first`` the first
    segment's MAD (its headers describe the whole transfer).

    Out-of-order segments are dropped (the sender resends them); duplicates are answered
    with the current ACK, also after the end (the final ACK may have been lost). A
    transfer larger than ``max_size`` bytes is refused with STOP; ``total_timeout``: the
    longest the whole transfer may take (None: no limit). A MAD without the Active flag is
    a whole message in itself: DONE at once, its data the bytes after the class header.
    """

    def __init__(self, *, class_header_size: int, window: int = 32, max_size: int = 1 << 20,
                 total_timeout: float | None = None, resp_time: int = NO_RESP_TIME):
        super().__init__(class_header_size, resp_time)
        if not isinstance(window, int) or not 1 <= window <= 0xFFFF:
            raise MadFieldError("window", window, "1..65535 segments")
        self.window, self.max_size, self.total_timeout = window, max_size, total_timeout
        self.expected = 1  # the next segment in order
        self.window_last = 1  # the last segment the sender may send
        self.chunks: list[bytes] = []
        self.first: bytes | None = None
        self.data: bytes | None = None
        self.declared = 0  # the first segment's PayloadLength (0: not given)
        self._seen: bytes | None = None  # the first MAD received: the template of a late ABORT

    def _ack(self, mad: bytes | bytearray) -> bytes:
        return self._reply(mad, RmppType.ACK, seg=self.expected - 1, nwl=self.window_last)

    def on_mad(self, mad: bytes | bytearray, now: float) -> list[bytes]:
        """A segment (or STOP/ABORT) from the sender; the MADs to send in return."""
        hdr = rmpp_of(mad)
        if self._seen is None:
            self._seen = bytes(mad)
            if self.total_timeout is not None:
                self.deadline = now + self.total_timeout
        if self.state is RmppState.DONE:
            return [self._ack(mad)] if hdr.active and hdr.rmpp_type == RmppType.DATA else []
        if self.finished:
            return []
        if not hdr.active:
            start = RMPP_OFFSET + RMPP_HEADER_SIZE + self.class_header_size
            self.first, self.data = bytes(mad), bytes(mad[start:])
            self._end(RmppState.DONE, RmppStatus.NORMAL, "")
            return []
        ended = self._check_common(mad, hdr, flip=True)
        if ended is not None:
            return ended
        if hdr.rmpp_type != RmppType.DATA:
            return self._fail(mad, RmppStatus.BAD_RMPP_TYPE, f"a receiver got RMPPType {hdr.rmpp_type}")
        n = hdr.segment_number
        if n < self.expected:
            return [self._ack(mad)]  # a duplicate: tell the sender where we are
        if n > self.expected:
            return []  # out of order or beyond the window: dropped, the sender resends
        return self._accept(mad, hdr)

    def _accept(self, mad: bytes | bytearray, hdr: RmppHeader) -> list[bytes]:
        n, first = hdr.segment_number, bool(hdr.rmpp_flags & RmppFlags.FIRST)
        if first != (n == 1):
            return self._fail(mad, RmppStatus.INCONSISTENT_FIRST_AND_SEGMENT_NUMBER,
                              f"segment {n} {'with' if first else 'without'} the First flag")
        if n == 1:
            self.first, self.declared = bytes(mad), hdr.payload_length
            if self.declared > self.max_size:
                return self._fail(mad, RmppStatus.RESOURCES_EXHAUSTED,
                                  f"{self.declared} bytes announced, at most {self.max_size} accepted")
        start = RMPP_OFFSET + RMPP_HEADER_SIZE + self.class_header_size
        if (n - 1) * self.seg_data > self.max_size:
            return self._fail(mad, RmppStatus.RESOURCES_EXHAUSTED, f"more than {self.max_size} bytes sent")
        self.chunks.append(bytes(mad[start:MAD_SIZE]))
        self.expected = n + 1
        if hdr.rmpp_flags & RmppFlags.LAST:
            return self._finish(mad, hdr)
        if n >= self.window_last:
            self.window_last = n + self.window
            return [self._ack(mad)]
        return []

    def _finish(self, mad: bytes | bytearray, hdr: RmppHeader) -> list[bytes]:
        n, last_len = hdr.segment_number, hdr.payload_length
        if not self.class_header_size <= last_len <= SEGMENT_SPACE:
            return self._fail(mad, RmppStatus.INCONSISTENT_LAST_AND_PAYLOAD_LENGTH,
                              f"PayloadLength {last_len} in the last segment, "
                              f"{self.class_header_size}..{SEGMENT_SPACE} possible")
        size = (n - 1) * self.seg_data + last_len - self.class_header_size
        if self.declared and self.declared != n * self.class_header_size + size:
            return self._fail(mad, RmppStatus.INCONSISTENT_LAST_AND_PAYLOAD_LENGTH,
                              f"the first segment announced {self.declared} bytes, the last ends at "
                              f"{n * self.class_header_size + size}")
        self.data = b"".join(self.chunks)[:size]
        self.chunks = []
        self.window_last = n
        self._end(RmppState.DONE, RmppStatus.NORMAL, "")
        return [self._ack(mad)]

    def on_timeout(self, now: float) -> list[bytes]:
        """The whole transfer took longer than ``total_timeout``: ABORT it."""
        if self.finished or self.deadline is None or now < self.deadline or self._seen is None:
            return []
        return self._fail(self._seen, RmppStatus.TOTAL_TIME_TOO_LONG, "the transfer took too long")
