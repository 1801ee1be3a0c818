"""`smagent trace SRC DST` on the in-process simulator (issue 39 item 7): ibtracert's text
from the LFTs, one LFT block read a switch, no SA; where a route stops and why; targets
as everywhere. tests/live/test_trace_live.py compares the text with ibtracert itself."""
import pytest

import smagent

H1_H3 = [
    'From ca {0x0000000000100000} portnum 1 lid 1-1 "H1"',
    '[1] -> switch port {0x0000000000200000}[1] lid 3-3 "L1"',
    '[5] -> switch port {0x0000000000200004}[1] lid 5-5 "S1"',
    '[2] -> switch port {0x0000000000200001}[5] lid 7-7 "L2"',
    '[1] -> ca port {0x0000000000100006}[1] lid 10-10 "H3"',
    'To ca {0x0000000000100005} portnum 1 lid 10-10 "H3"',
]


@pytest.fixture
def swept(monkeypatch):
    s = smagent.connect("sim")
    assert s.sweep(routing="minhop").problems == []  # the hops below are minhop's
    monkeypatch.setattr("smagent.cli.Context.session", lambda self: s)
    return s


def test_trace_hop_by_hop(cli, swept):
    r = cli("trace", "H1", "H3")
    assert r.exit_code == 0 and r.stdout.splitlines() == H1_H3, r.output
    assert cli("trace", "1", "10").stdout == r.stdout  # by LID
    assert cli("trace", "0", "0x0000000000100005").stdout == r.stdout  # DR path, node GUID
    simple = cli("trace", "-n", "H1", "H3").stdout.splitlines()
    assert simple[0] == "From {0x0000000000100000}[1]" and simple[-1] == "To {0x0000000000100005}[1]"
    assert simple[1] == "[1] -> {0x0000000000200000}[1]"
    to_switch = cli("trace", "H1", "L4").stdout.splitlines()
    assert to_switch[-1] == 'To switch {0x0000000000200003} portnum 0 lid 9-9 "L4"'
    doc = cli("trace", "L1", "H8", "--json").json()
    assert doc["delivered"] and doc["source"]["port"] == 0 and doc["error"] is None
    assert [(h["out_port"], h["description"], h["port"]) for h in doc["hops"]] == [(5, "S1", 1), (4, "L4", 5),
                                                                                  (2, "H8", 1)]
    before = swept.stats["sent"]
    swept.trace("H1", "H3")
    assert swept.stats["sent"] - before == swept.discover().smps + 3  # discovery, then one LFT Get a switch


def test_a_cut_route_says_where_and_why(cli, swept):
    swept.lft_set("L2", 10, 2, allow_defects=True)  # L2 port 2: H4, not H3
    r = cli("trace", "H1", "H3")
    assert r.exit_code == 1 and r.stdout.splitlines()[-1] == '[2] -> ca port {0x0000000000100008}[1] lid 11-11 "H4"'
    assert "error: LID 10 reached 'H4' port 1, which does not own it (misdelivered)" in r.stderr
    swept.lft_set("L1", 10, 3, allow_defects=True)  # L1 port 3: no cable
    r = cli("trace", "H1", "H3")
    assert r.exit_code == 1 and r.stdout.splitlines() == H1_H3[:2], r.output
    assert "error: 'L1' sends LID 10 out of port 3, which has no link" in r.stderr
    swept.lft_set("L1", 10, 255, allow_defects=True)
    assert "'L1' drops LID 10: LFT entry 255 (no route)" in cli("trace", "H1", "H3").stderr


def test_a_loop_is_named(swept):
    swept.lft_set("S1", 10, 3, allow_defects=True)  # down to L3, which sends it up to S1 again
    t = swept.trace("H1", "H3")
    assert not t.delivered and t.error == "loop: the route to LID 10 comes back to 'S1'"
    assert [e.description for _o, e in t.hops] == ["L1", "S1", "L3", "S1"]


@pytest.mark.parametrize("args, needle", [(["H1", "0xc000"], "out of range"), (["H1", "nosuch"], "nosuch"),
                                          (["0,9", "H3"], "port 9"), (["H1", "99"], "no port holds LID 99")])
def test_bad_targets_exit_2(cli, swept, args, needle):
    r = cli("trace", *args)
    assert r.exit_code == 2 and needle in r.output, r.output
