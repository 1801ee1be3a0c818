"""RMPP (mad.rmpp): the header byte for byte, the sender's segments and window, the
receiver's reassembly and its refusals, and sender <-> receiver end to end through a
channel that loses, duplicates and reorders (hypothesis)."""
from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mad.errors import MadFieldError, MadLengthError
from mad.header import MAD_SIZE
from mad.rmpp import (
    NO_RESP_TIME, RMPP_OFFSET, SEGMENT_SPACE, RmppFlags, RmppHeader, RmppReceiver, RmppSender, RmppState,
    RmppStatus, RmppType, rmpp_of, with_rmpp,
)

# a GetTableResp's common header: SA class 3, version 2, TID 0x42, NodeRecord
HEAD = bytes([1, 3, 2, 0x92]) + bytes(4) + (0x42).to_bytes(8, "big") + (0x11).to_bytes(2, "big") + bytes(6)
CLASS_HDR = bytes(range(100, 120))  # 20 bytes, like the SA header
SEG = SEGMENT_SPACE - len(CLASS_HDR)  # 200 bytes of data per segment


def sender(data: bytes, **kw) -> RmppSender:
    kw.setdefault("timeout", 1.0)
    return RmppSender(HEAD, CLASS_HDR, data, **kw)


def receiver(**kw) -> RmppReceiver:
    kw.setdefault("class_header_size", len(CLASS_HDR))
    return RmppReceiver(**kw)


def hdr(mad: bytes) -> RmppHeader:
    return rmpp_of(mad)


def ack_for(mad: bytes, seg: int, nwl: int, **changes) -> bytes:
    """An ACK as a receiver would send it for ``mad``'s transfer."""
    h = RmppHeader(rmpp_version=1, rmpp_type=RmppType.ACK, rmpp_flags=RmppFlags.ACTIVE, segment_number=seg,
                   payload_length=nwl)
    return with_rmpp(mad, h.replace(**changes) if changes else h)


# -- the header ----------------------------------------------------------------------------------
def test_header_bytes():
    h = RmppHeader(rmpp_version=1, rmpp_type=RmppType.DATA, r_resp_time=0x1F,
                   rmpp_flags=RmppFlags.ACTIVE | RmppFlags.FIRST, rmpp_status=0, segment_number=0x01020304,
                   payload_length=0x0A0B0C0D)
    assert h.encode() == bytes([1, 1, 0xFB, 0]) + bytes([1, 2, 3, 4]) + bytes([0x0A, 0x0B, 0x0C, 0x0D])
    assert RmppHeader.LAYOUT.size == 12 and RMPP_OFFSET == 24 and SEGMENT_SPACE == 220
    assert RmppHeader.decode(h.encode()) == h
    assert h.active and h.new_window_last == 0x0A0B0C0D


def test_rmpp_of_and_with_rmpp_need_a_whole_mad():
    mad = bytes(MAD_SIZE)
    h = RmppHeader(rmpp_version=1, rmpp_type=RmppType.ABORT, rmpp_status=RmppStatus.TOO_MANY_RETRIES)
    out = with_rmpp(mad, h)
    assert out[24:36] == h.encode() and out[:24] == mad[:24] and out[36:] == mad[36:]
    assert rmpp_of(out) == h
    with pytest.raises(MadLengthError):
        rmpp_of(bytes(100))
    with pytest.raises(MadLengthError):
        with_rmpp(bytes(255), h)


# -- the sender ------------------------------------------------------------------------------------
def test_segments_lengths_and_flags():
    data = bytes(i % 251 for i in range(2 * SEG + 37))
    s = sender(data)
    assert s.count == 3
    segs = [s.segment(n) for n in (1, 2, 3)]
    for n, mad in enumerate(segs, 1):
        assert len(mad) == MAD_SIZE and mad[:24] == HEAD and mad[36:56] == CLASS_HDR
        assert mad[56:56 + SEG][:len(data[(n - 1) * SEG:n * SEG])] == data[(n - 1) * SEG:n * SEG]
        h = hdr(mad)
        assert (h.rmpp_version, h.rmpp_type, h.segment_number, h.r_resp_time) == (1, RmppType.DATA, n, NO_RESP_TIME)
    flags = [hdr(m).rmpp_flags for m in segs]
    assert flags == [RmppFlags.ACTIVE | RmppFlags.FIRST, RmppFlags.ACTIVE, RmppFlags.ACTIVE | RmppFlags.LAST]
    # first: the whole transfer, the class header counted in every segment; last: its own bytes
    assert [hdr(m).payload_length for m in segs] == [3 * 20 + len(data), 0, 20 + 37]
    assert segs[2][56 + 37:] == bytes(SEG - 37)
    with pytest.raises(MadFieldError):
        s.segment(4)


def test_single_and_empty_transfers_are_one_segment():
    for data, length in ((b"x" * 10, 30), (b"", 20), (b"y" * SEG, 220)):
        s = sender(data)
        (mad,) = s.start(0.0)
        h = hdr(mad)
        assert s.count == 1 and h.rmpp_flags == RmppFlags.ACTIVE | RmppFlags.FIRST | RmppFlags.LAST
        assert h.payload_length == length


def test_window_from_acks():
    s = sender(bytes(10 * SEG))
    first = s.start(0.0)
    assert [hdr(m).segment_number for m in first] == [1]  # no window before the first ACK
    out = s.on_mad(ack_for(first[0], 1, 4), 0.5)
    assert [hdr(m).segment_number for m in out] == [2, 3, 4]
    assert s.on_mad(ack_for(first[0], 2, 4), 0.6) == []  # progress, window already sent
    out = s.on_mad(ack_for(first[0], 4, 8), 0.7)
    assert [hdr(m).segment_number for m in out] == [5, 6, 7, 8]
    assert s.on_mad(ack_for(first[0], 3, 6), 0.8) == []  # stale ACK: ignored
    assert s.last_ack == 4 and s.window_last == 8
    out = s.on_mad(ack_for(first[0], 8, 100), 0.9)
    assert [hdr(m).segment_number for m in out] == [9, 10]  # the window is capped at the last segment
    assert s.on_mad(ack_for(first[0], 10, 10), 1.0) == [] and s.state is RmppState.DONE
    assert s.deadline is None and s.on_timeout(99.0) == []


def test_a_payload_fed_as_it_is_made_goes_as_its_segments_fill():
    data = bytes(range(256)) * 10  # 2,560 bytes: 13 segments
    s = sender(b"", complete=False)
    rx = receiver(window=4)
    assert s.start(0.0) == [] and s.deadline is None  # nothing to send yet, nothing to time out
    out = s.feed(data[:SEG], 0.1)
    assert out == []  # a whole segment's data, but it might be the last: held
    out = s.feed(data[SEG:SEG + 1], 0.2)
    assert [hdr(m).segment_number for m in out] == [1] and hdr(out[0]).payload_length == 0  # length not known
    got = []
    pending, fed, now = out, SEG + 1, 0.3
    while not rx.finished:
        for m in pending:
            for ack in rx.on_mad(m, now):
                got += s.on_mad(ack, now)
        pending, got = got, []
        if not pending and fed < len(data):
            more = data[fed:fed + 300]
            fed += len(more)
            pending = s.feed(more, now, done=fed == len(data))
        now += 0.1
    assert rx.state is RmppState.DONE and rx.data == data and s.state is RmppState.DONE
    assert s.count == 13 and hdr(s.segment(13)).rmpp_flags & RmppFlags.LAST


def test_a_sender_told_not_to_resend_segment_1_waits_for_its_ack_silently():
    s = sender(bytes(5 * SEG), timeout=2.0, retries=2, resend_first=False)
    first = s.start(10.0)
    assert s.on_timeout(12.0) == [] and s.on_timeout(14.0) == []  # nothing again, still waiting
    out = s.on_mad(ack_for(first[0], 1, 3), 15.0)  # a late ACK: the transfer goes on
    assert [hdr(m).segment_number for m in out] == [2, 3]
    assert [hdr(m).segment_number for m in s.on_timeout(17.0)] == [2, 3]  # ACKed once: resent as usual
    quiet = sender(bytes(5 * SEG), timeout=2.0, retries=2, resend_first=False)
    quiet.start(0.0)
    assert [quiet.on_timeout(t) for t in (2.0, 4.0, 6.0)] == [[], [], []]  # no ABORT either
    assert quiet.state is RmppState.ABORTED and quiet.status is RmppStatus.TOO_MANY_RETRIES and quiet.deadline is None


def test_timeout_resends_the_unacknowledged_window_then_aborts():
    s = sender(bytes(5 * SEG), timeout=2.0, retries=2)
    first = s.start(10.0)
    s.on_mad(ack_for(first[0], 1, 3), 10.5)
    assert s.deadline == 12.5
    assert s.on_timeout(12.0) == []  # too early
    again = s.on_timeout(12.5)
    assert [hdr(m).segment_number for m in again] == [2, 3]
    assert [hdr(m).segment_number for m in s.on_timeout(14.5)] == [2, 3]
    (abort,) = s.on_timeout(16.5)
    h = hdr(abort)
    assert (h.rmpp_type, h.rmpp_status) == (RmppType.ABORT, RmppStatus.TOO_MANY_RETRIES)
    assert abort[3] == 0x92  # the sender's own ABORT keeps the DATA's method
    assert s.state is RmppState.ABORTED and s.status is RmppStatus.TOO_MANY_RETRIES
    assert "retries" in s.reason


def test_progress_restores_the_retries():
    s = sender(bytes(5 * SEG), timeout=1.0, retries=1)
    first = s.start(0.0)
    s.on_timeout(1.0)
    assert s.tries_left == 0
    s.on_mad(ack_for(first[0], 1, 2), 1.5)
    assert s.tries_left == 1 and s.deadline == 2.5


def test_total_time_limit():
    s = sender(bytes(3 * SEG), timeout=1.0, retries=100, total_timeout=2.5)
    s.start(0.0)
    s.on_timeout(1.0)
    s.on_timeout(2.0)
    (abort,) = s.on_timeout(3.0)
    assert hdr(abort).rmpp_status == RmppStatus.TOTAL_TIME_TOO_LONG and s.state is RmppState.ABORTED


@pytest.mark.parametrize("changes,status", [
    ({"segment_number": 2}, RmppStatus.SEGMENT_NUMBER_TOO_BIG),  # only segment 1 was sent
    ({"payload_length": 0}, RmppStatus.NEW_WINDOW_LAST_TOO_SMALL),
    ({"rmpp_type": RmppType.DATA}, RmppStatus.BAD_RMPP_TYPE),
    ({"rmpp_version": 2}, RmppStatus.UNSUPPORTED_VERSION),
    ({"rmpp_status": 5}, RmppStatus.ILLEGAL_STATUS),
])
def test_sender_aborts_on_bad_acks(changes, status):
    s = sender(bytes(3 * SEG))
    first = s.start(0.0)
    (abort,) = s.on_mad(ack_for(first[0], 1, 3, **changes), 0.1)
    assert hdr(abort).rmpp_type == RmppType.ABORT and hdr(abort).rmpp_status == status
    assert s.state is RmppState.ABORTED and s.status is status
    assert s.on_mad(ack_for(first[0], 1, 3), 0.2) == []  # over


@pytest.mark.parametrize("kind,state", [(RmppType.STOP, RmppState.STOPPED), (RmppType.ABORT, RmppState.ABORTED)])
def test_the_receiver_ends_the_transfer(kind, state):
    s = sender(bytes(3 * SEG))
    first = s.start(0.0)
    status = RmppStatus.RESOURCES_EXHAUSTED if kind == RmppType.STOP else RmppStatus.BAD_RMPP_TYPE
    end = ack_for(first[0], 0, 0, rmpp_type=kind, rmpp_status=status)
    assert s.on_mad(end, 0.1) == []  # nothing answers a STOP or an ABORT
    assert s.state is state and s.status is status and s.deadline is None


def test_caller_abort_and_bad_arguments():
    s = sender(bytes(3 * SEG))
    s.start(0.0)
    (abort,) = s.abort()
    assert hdr(abort).rmpp_status == RmppStatus.UNSPECIFIED and s.abort() == []
    with pytest.raises(MadFieldError):
        s.start(1.0)
    with pytest.raises(MadLengthError):
        RmppSender(HEAD[:20], CLASS_HDR, b"", timeout=1.0)
    for bad in ({"timeout": 0}, {"timeout": 1.0, "retries": -1}, {"timeout": 1.0, "resp_time": 32}):
        with pytest.raises(MadFieldError):
            RmppSender(HEAD, CLASS_HDR, b"", **bad)
    with pytest.raises(MadFieldError):
        RmppSender(HEAD, bytes(SEGMENT_SPACE), b"", timeout=1.0)


# -- the receiver ----------------------------------------------------------------------------------
def test_receiver_reassembles_and_acks_each_window():
    data = bytes(random.Random(1).randbytes(7 * SEG - 13))
    s, r = sender(data), receiver(window=3)
    segs = [s.segment(n) for n in range(1, s.count + 1)]
    acks = [r.on_mad(m, 0.0) for m in segs]
    # ACKs at the end of each window: 1 (the initial window), 4, 7 (the last)
    assert [(i + 1, [(hdr(a).segment_number, hdr(a).new_window_last) for a in out])
            for i, out in enumerate(acks) if out] == [(1, [(1, 4)]), (4, [(4, 7)]), (7, [(7, 7)])]
    assert r.state is RmppState.DONE and r.data == data and r.first == segs[0]
    ack = acks[0][0]
    assert ack[3] == 0x12 and ack[:3] == HEAD[:3] and ack[4:24] == HEAD[4:24]  # R bit flipped, TID kept
    assert ack[36:56] == CLASS_HDR and hdr(ack).rmpp_flags == RmppFlags.ACTIVE
    # the final ACK may be lost: duplicates get it again
    (again,) = r.on_mad(segs[6], 5.0)
    assert (hdr(again).segment_number, hdr(again).new_window_last) == (7, 7)


def test_receiver_drops_out_of_order_and_reacks_duplicates():
    s, r = sender(bytes(5 * SEG)), receiver(window=4)
    seg = [None] + [s.segment(n) for n in range(1, 6)]
    assert r.on_mad(seg[2], 0.0) == []  # ahead of segment 1: dropped
    (a1,) = r.on_mad(seg[1], 0.0)
    assert (hdr(a1).segment_number, hdr(a1).new_window_last) == (1, 5)
    assert r.on_mad(seg[3], 0.0) == []  # segment 2 missing: dropped
    (dup,) = r.on_mad(seg[1], 0.0)
    assert (hdr(dup).segment_number, hdr(dup).new_window_last) == (1, 5)
    for n in (2, 3, 4):
        assert r.on_mad(seg[n], 0.0) == []
    (last,) = r.on_mad(seg[5], 0.0)
    assert hdr(last).segment_number == 5 and r.data == bytes(5 * SEG)


def _rmpp(mad: bytes, **changes) -> bytes:
    return with_rmpp(mad, hdr(mad).replace(**changes))


@pytest.mark.parametrize("mutate,status", [
    (lambda s: _rmpp(s.segment(1), rmpp_flags=RmppFlags.ACTIVE), RmppStatus.INCONSISTENT_FIRST_AND_SEGMENT_NUMBER),
    (lambda s: _rmpp(s.segment(1), rmpp_version=3), RmppStatus.UNSUPPORTED_VERSION),
    (lambda s: _rmpp(s.segment(1), rmpp_status=7), RmppStatus.ILLEGAL_STATUS),
    (lambda s: _rmpp(s.segment(1), rmpp_type=RmppType.ACK), RmppStatus.BAD_RMPP_TYPE),
    (lambda s: _rmpp(s.segment(1), rmpp_type=0), RmppStatus.BAD_RMPP_TYPE),
])
def test_receiver_aborts_on_bad_segments(mutate, status):
    r = receiver()
    (abort,) = r.on_mad(mutate(sender(bytes(3 * SEG))), 0.0)
    assert hdr(abort).rmpp_type == RmppType.ABORT and hdr(abort).rmpp_status == status
    assert abort[3] == 0x12  # answers flip the R bit
    assert r.state is RmppState.ABORTED and r.status is status and r.data is None


def test_receiver_checks_lengths():
    s = sender(bytes(2 * SEG))
    # the last segment claims more than a segment holds
    r = receiver()
    r.on_mad(s.segment(1), 0.0)
    (abort,) = r.on_mad(_rmpp(s.segment(2), payload_length=SEGMENT_SPACE + 1), 0.0)
    assert hdr(abort).rmpp_status == RmppStatus.INCONSISTENT_LAST_AND_PAYLOAD_LENGTH
    # the first segment announced another total than the last one ends at
    r = receiver()
    r.on_mad(_rmpp(s.segment(1), payload_length=999), 0.0)
    (abort,) = r.on_mad(s.segment(2), 0.0)
    assert hdr(abort).rmpp_status == RmppStatus.INCONSISTENT_LAST_AND_PAYLOAD_LENGTH
    assert "999" in r.reason
    # a first segment without the total is fine
    r = receiver()
    r.on_mad(_rmpp(s.segment(1), payload_length=0), 0.0)
    r.on_mad(s.segment(2), 0.0)
    assert r.state is RmppState.DONE and r.data == bytes(2 * SEG)


def test_receiver_stops_what_it_cannot_hold():
    r = receiver(max_size=1000)
    (stop,) = r.on_mad(sender(bytes(6 * SEG)).segment(1), 0.0)
    assert hdr(stop).rmpp_type == RmppType.STOP and hdr(stop).rmpp_status == RmppStatus.RESOURCES_EXHAUSTED
    assert r.state is RmppState.STOPPED
    # a sender that did not announce the size is stopped once it sends too much
    s, r = sender(bytes(8 * SEG)), receiver(max_size=1000, window=10)
    outs = [r.on_mad(_rmpp(s.segment(1), payload_length=0), 0.0)] + [r.on_mad(s.segment(n), 0.0) for n in range(2, 8)]
    assert hdr(outs[-1][0]).rmpp_type == RmppType.STOP and r.state is RmppState.STOPPED


def test_receiver_ends_on_the_senders_abort_and_on_its_own_time_limit():
    s, r = sender(bytes(3 * SEG)), receiver(total_timeout=5.0)
    r.on_mad(s.segment(1), 1.0)
    assert r.deadline == 6.0 and r.on_timeout(5.0) == []
    (abort,) = r.on_timeout(6.0)
    assert hdr(abort).rmpp_status == RmppStatus.TOTAL_TIME_TOO_LONG and r.state is RmppState.ABORTED
    r = receiver()
    r.on_mad(s.segment(1), 0.0)
    assert r.on_mad(_rmpp(s.segment(1), rmpp_type=RmppType.ABORT, rmpp_status=RmppStatus.TOO_MANY_RETRIES), 0.0) == []
    assert r.state is RmppState.ABORTED and r.status is RmppStatus.TOO_MANY_RETRIES


def test_a_mad_without_rmpp_is_a_whole_message():
    mad = HEAD + bytes(12) + CLASS_HDR + b"single" + bytes(SEG - 6)
    r = receiver()
    assert r.on_mad(mad, 0.0) == [] and r.state is RmppState.DONE
    assert r.data == b"single" + bytes(SEG - 6) and r.first == mad


def test_receiver_arguments():
    for bad in ({"class_header_size": -1}, {"class_header_size": 20, "window": 0}):
        with pytest.raises(MadFieldError):
            RmppReceiver(**bad)


# -- end to end through a bad channel ----------------------------------------------------------------
def _run(data: bytes, rng: random.Random, loss: float, dup: float, window: int) -> tuple[RmppSender, RmppReceiver, int]:
    """Sender and receiver joined by two channels that lose, duplicate and reorder; time
    advances only when nothing is in flight. Returns both machines and the steps taken."""
    s = RmppSender(HEAD, CLASS_HDR, data, timeout=1.0, retries=1000)
    r = RmppReceiver(class_header_size=len(CLASS_HDR), window=window)
    now = 0.0
    to_r: list[bytes] = list(s.start(now))
    to_s: list[bytes] = []
    steps = 0
    while not (s.finished and (r.finished or not to_r)) and steps < 20_000:
        steps += 1
        if not to_r and not to_s:
            now = max(now, s.deadline or now) + 0.001
            to_r += s.on_timeout(now)
            continue
        queue, peer = (to_r, r) if to_r and (not to_s or rng.random() < 0.5) else (to_s, s)
        mad = queue.pop(rng.randrange(len(queue)))  # any of those in flight: reordering
        if rng.random() < loss:
            continue
        if rng.random() < dup:
            queue.insert(rng.randrange(len(queue) + 1), mad)
        out = peer.on_mad(mad, now)
        (to_s if peer is r else to_r).extend(out)
    return s, r, steps


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(size=st.integers(0, 12 * SEG + 5), seed=st.integers(0, 2**32 - 1),
       loss=st.sampled_from([0.0, 0.1, 0.3]), dup=st.sampled_from([0.0, 0.2]), window=st.integers(1, 6))
def test_end_to_end_with_loss_duplicates_and_reordering(size, seed, loss, dup, window):
    rng = random.Random(seed)
    data = rng.randbytes(size)
    s, r, steps = _run(data, rng, loss, dup, window)
    assert steps < 20_000
    assert s.state is RmppState.DONE, s.reason
    # the sender is done only once the receiver acknowledged the last segment
    assert r.state is RmppState.DONE and r.data == data


def test_end_to_end_clean_channel_needs_no_retransmission():
    data = bytes(range(256)) * 20
    s, r, _ = _run(data, random.Random(0), 0.0, 0.0, 4)
    assert s.state is r.state is RmppState.DONE and r.data == data and s.tries_left == s.retries


@settings(max_examples=200, deadline=None)
@given(junk=st.lists(st.binary(min_size=MAD_SIZE, max_size=MAD_SIZE), min_size=1, max_size=8),
       flags=st.lists(st.integers(0, 255), min_size=8, max_size=8))
def test_junk_from_the_peer_never_raises(junk, flags):
    """Whatever a peer sends (a whole MAD of any bytes), both machines answer with MADs or
    nothing, and end only in a defined state."""
    s, r = sender(bytes(3 * SEG)), receiver()
    s.start(0.0)
    for i, mad in enumerate(junk):
        # often make it look like RMPP, so the checks past the Active flag run too
        kind = mad[25] if flags[i] & 4 else mad[25] % 5  # any RMPPType, or one IBA defines
        mad = mad[:24] + bytes([1, kind, flags[i] | 1]) + mad[27:] if flags[i] & 2 else mad
        for m in s.on_mad(mad, float(i)) + r.on_mad(mad, float(i)):
            assert len(m) == MAD_SIZE and hdr(m).rmpp_type in (RmppType.ACK, RmppType.STOP, RmppType.ABORT)
    for m in (s, r):
        assert m.state in RmppState and (m.state is not RmppState.DONE or m.status is RmppStatus.NORMAL)
    if r.state is RmppState.DONE:
        assert r.data is not None
