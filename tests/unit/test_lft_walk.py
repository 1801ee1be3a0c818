"""`smagent.model.walk`: the one rule of the LFT walk, each reason a walk stops."""
from __future__ import annotations

import pytest

from mad.forwarding import LFT_NO_PORT
from smagent.model import walk

# a[1] - S1[1]; S1[2] - S2[1]; S2[2] - b[1]; S2[3] - c[1]; S1[3] unlinked; S1, S2: 4 ports
A, B, C, S1, S2 = 0xA, 0xB, 0xC, 0x51, 0x52
CABLES = [((A, 1), (S1, 1)), ((S1, 2), (S2, 1)), ((S2, 2), (B, 1)), ((S2, 3), (C, 1))]
LINKS = {**dict(CABLES), **{b: a for a, b in CABLES}}
OWNER = {1: (A, 1), 2: (B, 1), 3: (C, 1), 4: (S1, 0), 5: (S2, 0)}


def table(**entries: int) -> bytes:
    t = bytearray([LFT_NO_PORT]) * 8
    for lid, port in entries.items():
        t[int(lid[1:])] = port
    return bytes(t)


def run(lfts: dict, dlid: int, src=(A, 1), top=None, cap=None, max_hops=walk.MAX_HOPS) -> walk.Walk:
    def owns(guid, port):
        return OWNER.get(dlid) is not None and OWNER[dlid][0] == guid and (guid in lfts or OWNER[dlid][1] == port)
    return walk.walk(src, dlid, is_switch=lfts.__contains__, owns=owns,
                     exit_of=lambda g, d: walk.lft_exit(lfts[g], d, 4, top, cap), link_of=LINKS.get,
                     max_hops=max_hops)


GOOD = {S1: table(L2=2, L3=2, L5=2), S2: table(L2=2, L3=3, L4=1, L1=1)}


def test_delivered_with_every_hop_and_exit_port():
    w = run(GOOD, 2)
    assert (w.stop, w.at) == (walk.DELIVERED, (B, 1)) and w.delivered
    assert w.hops == [((A, 1), (S1, 1)), ((S1, 2), (S2, 1)), ((S2, 2), (B, 1))]


def test_a_switch_takes_its_own_lid_at_whatever_port_it_entered():
    w = run(GOOD, 5)
    assert (w.stop, w.at, len(w.hops)) == (walk.DELIVERED, (S2, 1), 2)


def test_a_source_owning_the_dlid_crosses_nothing():
    assert run(GOOD, 1).hops == [] and run(GOOD, 1).delivered


@pytest.mark.parametrize("entry, stop", [(LFT_NO_PORT, walk.NO_ROUTE), (9, walk.NO_SUCH_PORT),
                                         (0, walk.PORT_ZERO), (3, walk.UNLINKED)])
def test_what_an_entry_of_the_first_switch_means(entry, stop):
    w = run({S1: table(L2=entry), S2: GOOD[S2]}, 2)
    assert (w.stop, w.at[0], w.hops) == (stop, S1, [((A, 1), (S1, 1))])
    if stop == walk.UNLINKED:
        assert w.at == (S1, 3)


def test_an_entry_past_the_table_is_no_route():
    assert walk.lft_exit(b"\x01\x02", 7, 4) == walk.NO_ROUTE
    assert walk.lft_exit(b"\x01\x02", 1, 4) == 2


def test_linear_fdb_top_and_cap_drop_before_the_entry_is_read():
    assert run(GOOD, 2, top=1).stop == walk.ABOVE_TOP
    assert run(GOOD, 2, top=7, cap=2).stop == walk.ABOVE_CAP
    assert run(GOOD, 2, top=2, cap=3).delivered


def test_a_ca_port_that_does_not_own_the_dlid_is_a_misdelivery():
    w = run({S1: GOOD[S1], S2: table(L2=3)}, 2)
    assert (w.stop, w.at, len(w.hops)) == (walk.MISDELIVERED, (C, 1), 3)


def test_a_switch_passed_twice_is_a_loop():
    w = run({S1: table(L2=2), S2: table(L2=1)}, 2)
    assert (w.stop, w.at) == (walk.LOOP, (S1, 2))
    assert [out for out, _ in w.hops] == [(A, 1), (S1, 2), (S2, 1)]


def test_more_hops_than_allowed_stops_the_walk():
    w = run(GOOD, 2, max_hops=2)
    assert w.stop == walk.TOO_LONG and len(w.hops) == 2


def test_the_callers_own_cause_and_detail_end_the_walk():
    w = walk.walk((A, 1), 2, is_switch=lambda g: g == S1, owns=lambda g, p: False,
                  exit_of=lambda g, d: ("unread", "no answer"), link_of=LINKS.get)
    assert (w.stop, w.detail, w.at) == ("unread", "no answer", (S1, 1))
