"""Replay transport: dry runs against recorded fixtures (no ibsim needed).

The committed fixtures were recorded live on ibsim by scripts/make_fixtures.py, which
also stored what each command printed then (fixtures/*.expected.json). Replaying the
same commands must print the same (timings aside). The unit tests build small captures
with CaptureWriter to pin down the index rules: pairing by TID, keys, repeated keys in
recorded order, undelivered requests replaying as timeouts, misses, refused Sets and
malformed fixtures.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixture_text import digest, normalize
from mad import smp as smpcodec
from mad.attributes import AttrID, NodeDescription
from mad.forwarding import PERMISSIVE_LID
from mad.header import Method
from smagent.transport.pcap import CaptureError, CaptureWriter, read_capture
from smagent.transport import open_transport
from smagent.transport.base import Request, SmpTimeout, TransportError
from smagent.transport.replay import ReplayMiss, ReplayRefusesSet, ReplayTransport

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"

EXPECTED = sorted(FIXTURES.glob("*.expected.json"))
BIG_LFT_SHOWS = 3  # ft2-648 has 54 switches: replay a few `lft show`s of each state, not all


def _cases():
    for exp in EXPECTED:
        doc = json.loads(exp.read_text())
        shows = 0
        for c in doc["commands"]:
            if doc["fabric"] == "ft2-648" and c["args"][:2] == ["lft", "show"]:
                shows += 1
                if shows > BIG_LFT_SHOWS:
                    continue
            yield pytest.param(FIXTURES / doc["capture"], c, id=f"{exp.name[:-14]}:{' '.join(c['args'])}")


def test_fixtures_are_there():
    names = {p.name for p in FIXTURES.iterdir()}
    for fab in ("two-switch", "ft2-648", "torus-4x4"):
        for f in (f"{fab}.net", f"{fab}-fresh.erf", f"{fab}-swept.erf", f"{fab}-fresh.expected.json",
                  f"{fab}-swept.expected.json"):
            assert f in names
    total = sum(p.stat().st_size for p in FIXTURES.iterdir())
    assert total < 20 * 1024 * 1024, f"fixtures/ holds {total} bytes"


@pytest.mark.parametrize("fixture, case", list(_cases()))
def test_replay_prints_what_the_live_session_printed(replay, fixture, case):
    r = replay(fixture, *case["args"])
    assert r.exit_code == case["rc"], r.output
    out = normalize(case["args"], r.stdout)
    if "stdout" in case:
        assert out == case["stdout"]
    assert digest(out) == case["stdout_sha256"]
    assert r.stderr == case["stderr"]


@pytest.mark.parametrize("fab", ["two-switch", "torus-4x4", "ft2-648"])
def test_fresh_dry_run_plan(replay, fab):
    """The plan of the recorded fresh fabric: every Set a sweep would send, none sent (the
    torus recorded with dfsssp: minhop's credit loops are refused there; the others with minhop)."""
    routing = ["--routing", "dfsssp" if fab.startswith("torus") else "minhop"]
    r = replay(FIXTURES / f"{fab}-fresh.erf", "sweep", *routing, "--dry-run", "--json")
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert s["dry_run"] and s["problems"] == [] and s["unreachable"] == []
    assert s["plan"] and s["sets"]["lft_blocks"] > 0 and s["sets"]["portinfo"] >= s["lids"]
    assert len(s["plan"]) >= s["sets"]["portinfo"] + s["sets"]["lft_blocks"]
    assert s["retries"] == 0 and s["timeouts"] == 0
    # after the real sweep the same dry run has nothing left to do
    r = replay(FIXTURES / f"{fab}-swept.erf", "sweep", *routing, "--dry-run", "--json")
    assert r.exit_code == 0, r.output
    s2 = json.loads(r.stdout)
    assert s2["plan"] == [] and not any(s2["sets"].values()), s2["sets"]
    assert (s2["nodes"], s2["links"], s2["lids"]) == (s["nodes"], s["links"], s["lids"])


# -- refusals and misses at the CLI ---------------------------------------------------------------
def test_unmatched_request_exit_3_names_it(replay):
    fx = FIXTURES / "two-switch-fresh.erf"
    r = replay(fx, "query", "nodeinfo", "0,1,7,7")
    assert r.exit_code == 3
    assert r.stdout == ""
    assert "SubnGet(NodeInfo, modifier 0x0) to DR path 0,1,7,7" in r.stderr
    assert "not in the recording" in r.stderr and str(fx) in r.stderr
    r = replay(fx, "query", "portinfo", "99", "--port", "3")
    assert r.exit_code == 3
    assert "SubnGet(PortInfo, modifier 0x3) to LID 99" in r.stderr


@pytest.mark.parametrize("args", [["sweep"], ["lft", "set", "0,1", "5", "3"], ["mft", "set", "0,1", "0xc000", "1"]],
                         ids=" ".join)
def test_set_refused_with_dry_run_hint(replay, args, tmp_path):
    """A recording asked to write says so before the first Get (issue 11 item 11): bad
    input, exit 2, and the session's own recording holds no SMP at all."""
    cap = tmp_path / "again.erf"
    r = replay(FIXTURES / "two-switch-fresh.erf", *args, record=cap)
    assert r.exit_code == 2, r.output
    assert r.stdout == ""  # no plan, no summary: nothing else
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: a recording ("), r.stderr
    assert "cannot take writes" in lines[0] and "--dry-run" in lines[0]
    assert not cap.exists() or list(read_capture(cap)) == []


def test_dry_run_of_a_write_command_replays(replay, tmp_path):
    r = replay(FIXTURES / "two-switch-fresh.erf", "lft", "set", "0,1", "5", "3", "--dry-run")
    assert r.exit_code == 0, r.output
    assert "LinearForwardingTable" in r.stdout or "SwitchInfo" in r.stdout


def test_recorded_timeout_replays_as_timeout(replay):
    r = replay(FIXTURES / "two-switch-fresh.erf", "query", "rft", "0,1")
    assert r.exit_code == 3
    assert "SubnGet(RandomForwardingTable, modifier 0x0) to DR 0,1: no response after 4 tries" in r.stderr
    r = replay(FIXTURES / "two-switch-fresh.erf", "--retries", "0", "query", "rft", "0,1")
    assert r.exit_code == 3 and "no response after 1 tries" in r.stderr


def _corrupt(tmp_path, name, mutate):
    data = bytearray((FIXTURES / "two-switch-fresh.erf").read_bytes())
    mutate(data)
    p = tmp_path / name
    p.write_bytes(bytes(data))
    return p


def _rlen(data, off=0):
    return int.from_bytes(data[off + 10:off + 12], "big")


@pytest.mark.parametrize("how, expect", [
    ("truncated", "record 4 (offset"),
    ("erf-type", "record 3 (offset"),
    ("bad-mad", "record 2: malformed SMP"),
    ("empty", "no SMP requests recorded"),
    ("missing", "No such file"),
])
def test_corrupt_fixture_exit_2_names_file_and_record(replay, tmp_path, how, expect):
    r0 = _rlen((FIXTURES / "two-switch-fresh.erf").read_bytes())
    if how == "truncated":
        p = _corrupt(tmp_path, "t.erf", lambda d: d.__delitem__(slice(3 * r0 + 100, None)))
    elif how == "erf-type":
        p = _corrupt(tmp_path, "t.erf", lambda d: d.__setitem__(2 * r0 + 8, 2))
    elif how == "bad-mad":
        # record 2's MAD: base version 7 (the MAD starts after the 16-byte ERF header and 28 of headers)
        p = _corrupt(tmp_path, "t.erf", lambda d: d.__setitem__(r0 + 16 + 28, 7))
    elif how == "empty":
        p = tmp_path / "t.erf"
        p.write_bytes(b"")
    else:
        p = tmp_path / "absent.erf"
    r = replay(p, "discover")
    assert r.exit_code == 2, r.output
    assert r.stdout == ""
    assert str(p) in r.stderr and expect in r.stderr, r.stderr


def test_corrupt_fixture_raises_capture_error(tmp_path):
    p = tmp_path / "junk.erf"
    p.write_bytes(b"\0" * 40)
    with pytest.raises(CaptureError, match=r"junk\.erf: record 1"):
        ReplayTransport(p)
    with pytest.raises(ValueError):  # CaptureError is a ValueError: the CLI's exit 2
        open_transport("replay", fixture=str(p))
    with pytest.raises(ValueError, match="--fixture"):
        open_transport("replay")


# -- the index rules, on hand-made captures ----------------------------------------------------
def _get_desc(path=(0,)):
    return Request(smpcodec.dr(Method.GET, AttrID.NODE_DESCRIPTION, path))


def _answer(req, text):
    return smpcodec.encode(smpcodec.response_to(req.smp, value=NodeDescription(node_string=text)))


def _capture(path, exchanges):
    """exchanges: [(Request, response bytes | None)] -> an ERF file as --record writes it."""
    with CaptureWriter(path) as w:
        for req, resp in exchanges:
            w.write(smpcodec.encode(req.smp), inbound=False, dlid=req.dlid)
            if resp is not None:
                w.write(resp, inbound=True, dlid=req.dlid)
    return path


def _desc(t, req):
    return t.query(req).attribute().node_string


def test_repeated_keys_answered_in_recorded_order_then_the_last(tmp_path):
    a, b, c = _get_desc(), _get_desc(), _get_desc()
    fx = _capture(tmp_path / "r.erf", [(a, _answer(a, "before")), (b, _answer(b, "after")), (c, _answer(c, "last"))])
    t = ReplayTransport(fx)
    got = [_desc(t, _get_desc()) for _ in range(5)]
    assert got == ["before", "after", "last", "last", "last"]


def test_keys_are_per_path_and_per_lid(tmp_path):
    a, b = _get_desc((0,)), _get_desc((0, 1))
    lr = Request(smpcodec.lid_routed(Method.GET, AttrID.NODE_DESCRIPTION), dlid=5)
    fx = _capture(tmp_path / "k.erf", [(a, _answer(a, "local")), (b, _answer(b, "switch")),
                                       (lr, _answer(lr, "lid five"))])
    t = ReplayTransport(fx)
    assert _desc(t, _get_desc((0, 1))) == "switch"
    assert _desc(t, _get_desc((0,))) == "local"
    assert _desc(t, Request(smpcodec.lid_routed(Method.GET, AttrID.NODE_DESCRIPTION), dlid=5)) == "lid five"
    with pytest.raises(ReplayMiss, match=r"SubnGet\(NodeDescription, modifier 0x0\) to LID 6"):
        t.query(Request(smpcodec.lid_routed(Method.GET, AttrID.NODE_DESCRIPTION), dlid=6))
    with pytest.raises(ReplayMiss, match=r"to DR path 0,2"):
        t.query(_get_desc((0, 2)))
    with pytest.raises(ReplayMiss, match=r"SubnGet\(NodeInfo, modifier 0x0\) to DR path 0,1"):
        t.query(Request(smpcodec.dr(Method.GET, AttrID.NODE_INFO, (0, 1))))
    # a miss is a TransportError: the CLI's exit 3
    assert issubclass(ReplayMiss, TransportError) and issubclass(ReplayRefusesSet, TransportError)


def test_response_carries_the_new_requests_tid(tmp_path):
    a = _get_desc()
    fx = _capture(tmp_path / "tid.erf", [(a, _answer(a, "x"))])
    t = ReplayTransport(fx)
    req = _get_desc()
    assert req.smp.transaction_id != a.smp.transaction_id
    resp = t.query(req)
    assert resp.transaction_id == req.smp.transaction_id and resp.is_response


def test_undelivered_requests_replay_as_timeouts(tmp_path):
    # recorded: two tries undelivered, the third answered (a retried timeout)
    a, b, c = _get_desc(), _get_desc(), _get_desc()
    fx = _capture(tmp_path / "to.erf", [(a, None), (b, None), (c, _answer(c, "third time"))])
    t = ReplayTransport(fx, retries=3)
    assert _desc(t, _get_desc()) == "third time"
    assert (t.stats.sent, t.stats.timeouts, t.stats.retries) == (3, 2, 2)
    # a key recorded only undelivered stays undelivered, however often it is retried
    d = _get_desc((0, 1))
    fx = _capture(tmp_path / "to2.erf", [(d, None)])
    t = ReplayTransport(fx, retries=2)
    with pytest.raises(SmpTimeout, match=r"to DR 0,1: no response after 3 tries"):
        t.query(_get_desc((0, 1)))
    assert t.stats.timeouts == 3


def test_set_refused_at_the_transport(tmp_path):
    a = _get_desc()
    t = ReplayTransport(_capture(tmp_path / "s.erf", [(a, _answer(a, "x"))]))
    setreq = Request(smpcodec.dr(Method.SET, AttrID.NODE_DESCRIPTION, (0,), value=NodeDescription(node_string="y")))
    with pytest.raises(ReplayRefusesSet, match="cannot take writes.*--dry-run"):
        t.execute([setreq])
    assert t.stats.sent == 0


def test_a_recorded_set_is_indexed_but_still_refused(tmp_path):
    s = Request(smpcodec.dr(Method.SET, AttrID.NODE_DESCRIPTION, (0,), value=NodeDescription(node_string="y")))
    a = _get_desc()
    fx = _capture(tmp_path / "s2.erf", [(s, _answer(s, "y")), (a, _answer(a, "y"))])
    t = ReplayTransport(fx)
    assert _desc(t, _get_desc()) == "y"
    with pytest.raises(ReplayRefusesSet):
        t.query(Request(smpcodec.dr(Method.SET, AttrID.NODE_DESCRIPTION, (0,),
                                    value=NodeDescription(node_string="y"))))


def test_ibdump_style_capture_with_other_classes_and_orphans(tmp_path):
    """ibdump sees every MAD on the port: GMPs (SA, class 0x03) and answers to requests
    sent before it started. Those are skipped; the SMP exchanges are replayed."""
    a = _get_desc()
    gmp = bytearray(smpcodec.encode(a.smp))
    gmp[1] = 0x03  # SubnAdm: not an SMP
    orphan = _get_desc((0, 3))
    p = tmp_path / "ibdump.erf"
    with CaptureWriter(p) as w:
        w.write(bytes(gmp), inbound=False, dlid=1, slid=2)
        w.write(_answer(orphan, "orphan"), inbound=True, dlid=PERMISSIVE_LID)
        w.write(smpcodec.encode(a.smp), inbound=False, dlid=PERMISSIVE_LID)
        w.write(_answer(a, "ok"), inbound=True, dlid=PERMISSIVE_LID)
    t = ReplayTransport(p)
    assert t.index.requests == 1 and t.index.orphans == 1
    assert _desc(t, _get_desc()) == "ok"
    with pytest.raises(ReplayMiss):
        t.query(_get_desc((0, 3)))


def test_a_tid_reused_before_an_answer_marks_the_first_undelivered(tmp_path):
    """Concatenated sessions can reuse a TID: the earlier, unanswered request stays
    undelivered and the answer goes to the later one."""
    a = _get_desc((0, 1))
    b = Request(smpcodec.dr(Method.GET, AttrID.NODE_DESCRIPTION, (0, 2), tid=a.smp.transaction_id))
    fx = _capture(tmp_path / "reuse.erf", [(a, None), (b, _answer(b, "two"))])
    t = ReplayTransport(fx, retries=0)
    assert _desc(t, _get_desc((0, 2))) == "two"
    with pytest.raises(SmpTimeout):
        t.query(_get_desc((0, 1)))


def test_replay_session_can_be_recorded_again(replay, tmp_path):
    """--record on a replay writes the same exchanges: a replay of the replay agrees."""
    cap = tmp_path / "again.erf"
    r = replay(FIXTURES / "two-switch-fresh.erf", "discover", record=cap)
    assert r.exit_code == 0
    r2 = replay(cap, "discover")
    assert r2.exit_code == 0 and r2.stdout == r.stdout
