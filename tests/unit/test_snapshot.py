"""`smagent snapshot` on the in-process simulator: one snapshot answers, offline, the plans
of desired states it was not taken for (the replay answers by place, `replay.Places`), and a
replay that lacks reads names every missing read of the batch in one ReplayMiss."""
from __future__ import annotations

import json

import pytest

import smagent
from smagent.sweep import desired
from smagent.transport.replay import ReplayMiss

PROPOSALS = {
    "fresh": None,
    "routes": {"routing": "updn"},
    "static": {"lft": [{"switch": "L1", "lid": 2, "port": 6}]},
    "groups": {"multicast": [{"mlid": 0xC000, "members": ["all"]}, {"mlid": 0xC001, "members": ["H2", "H3"]}]},
    "caps": {"links": {"max_mtu": 2048, "max_vls": 2}},
    "qos": {"links": {"qos": True}},
    "partitions": {"partitions": [{"name": "p", "pkey": 0x8001, "members": ["ALL_CAS"]}]},
}


def plans(session) -> dict:
    out = {}
    for name, doc in PROPOSALS.items():
        try:
            out[name] = session.plan(desired.parse(doc, name) if doc else None).plan_changes()
        except smagent.SmagentError as e:
            out[name] = (type(e).__name__, str(e))
    return out


@pytest.mark.parametrize("swept", [False, True])
def test_one_snapshot_plans_every_proposal_as_live(tmp_path, swept):
    snap = tmp_path / "fabric.erf"
    with smagent.connect("sim") as live:
        if swept:
            live.sweep()
        r = live.snapshot(snap)
        assert r.failed == [] and r.reads["LinearForwardingTable"] and r.reads["P_KeyTable"]
        assert "reads" in repr(r) and len(repr(r)) < 200
        want = plans(live)
    assert any(want.values())
    with smagent.connect("replay", fixture=snap) as offline:
        got = plans(offline)
        assert not any(k.startswith("SubnSet") for k in offline.stats["by_kind"])
    assert got == want


def test_a_replay_names_every_missing_read_at_once(tmp_path):
    rec = tmp_path / "query.erf"
    with smagent.connect("sim") as f, f.recording(rec):
        f.discover()  # the topology only: no PortInfo of the switches' other ports, no tables
    with smagent.connect("replay", fixture=rec) as offline:
        offline.discover()
        with pytest.raises(ReplayMiss) as e:
            offline.transport.execute([offline_request(a) for a in (0x19, 0x1B)])
    assert len(e.value.missing) == 2 and e.value.request == e.value.missing[0]
    assert all(m in str(e.value) for m in e.value.missing) and "(2 requests): not in the recording" in str(e.value)
    assert "smagent snapshot" in str(e.value)


def test_a_long_miss_names_ten_and_counts_the_rest(tmp_path):
    rec = tmp_path / "query.erf"
    with smagent.connect("sim") as f, f.recording(rec):
        f.discover()
    with smagent.connect("replay", fixture=rec) as offline:
        offline.discover()
        from mad.header import Method
        from smagent.transport.base import Request
        with pytest.raises(ReplayMiss) as e:
            offline.transport.execute([Request.dr(Method.GET, 0x19, (0, 1), b) for b in range(25)])
    assert len(e.value.missing) == 25 and "; and 15 more (25 requests): not in the recording" in str(e.value)
    assert str(e.value).count("SubnGet(") == 10


def offline_request(attr: int):
    from mad.header import Method
    from smagent.transport.base import Request
    return Request.dr(Method.GET, attr, (0, 1))


def test_snapshot_command(cli, tmp_path):
    snap = tmp_path / "s.erf"
    r = cli("snapshot", snap, "--json")
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["file"] == str(snap) and s["nodes"] == 14 and s["failed"] == 0 and snap.exists()
    r = cli("--transport", "replay", "--fixture", snap, "plan", "--json",
            str(__import__("pathlib").Path(__file__).resolve().parents[2] / "examples" / "desired.yaml"))
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["plan"]
    assert cli("snapshot", tmp_path / "no" / "dir" / "s.erf").exit_code == 2
    assert cli("snapshot", snap, "--mft-blocks", 0).exit_code == 2
