"""A session records on demand (issue 16 item 8): start/stop recording on a simulator
session, replay that file offline and get the same plan; the file is whole or absent,
and a truncated one is refused when read."""
import os

import pytest

import smagent
from smagent.sweep import desired
from smagent.transport.pcap import CaptureError, read_capture

# a pending change: a static route that differs from what minhop programs, and a new group
WANT = {"lft": [{"switch": "0,1", "lid": 3, "port": 2}],
        "multicast": [{"mlid": 0xC001, "members": ["all"]}]}


def _swept_recording(tmp_path, name="plan.erf"):
    path = tmp_path / name
    ds = desired.parse(WANT)
    with smagent.connect("sim") as f:
        f.sweep()
        sent_before = f.stats["sent"]
        with f.recording(path):
            assert os.path.exists(f"{path}.partial") and not path.exists()  # named only when whole
            plan = f.plan(ds)
        recorded = f.stats["sent"] - sent_before
    return path, plan, recorded


def test_recorded_plan_replays_to_the_same_plan(tmp_path):
    path, plan, recorded = _swept_recording(tmp_path)
    assert path.exists() and not os.path.exists(f"{path}.partial")
    lines = plan.plan_lines()
    assert any("LinearForwardingTable" in x for x in lines) and any("mlid 0xc001" in x for x in lines)
    # only what was sent while recording: each request and its answer
    assert sum(1 for _ in read_capture(path)) == 2 * recorded
    with smagent.connect("replay", fixture=path) as offline:
        again = offline.plan(desired.parse(WANT))
        assert again.plan_lines() == lines
        assert offline.stats["by_kind"].get("SubnSet(LinearForwardingTable)", 0) == 0


def test_start_and_stop_by_hand_and_refusals(tmp_path):
    with smagent.connect("sim", record=tmp_path / "all.erf") as f:
        with pytest.raises(smagent.BadInput, match="records already"):
            f.start_recording(tmp_path / "x.erf")
    with smagent.connect("sim") as f:
        with pytest.raises(smagent.BadInput, match="not recording"):
            f.stop_recording()
        with pytest.raises(smagent.BadInput, match="does not exist"):
            f.start_recording(tmp_path / "no" / "such" / "dir.erf")
        f.start_recording(tmp_path / "q.erf")
        f.query("nodeinfo", "0")
        assert f.stop_recording() == str(tmp_path / "q.erf")
        f.query("nodeinfo", "0,1")  # not recorded any more
    assert [r.mad[1] for r in read_capture(tmp_path / "q.erf")] == [0x81, 0x81]  # one Get, one GetResp
    with smagent.connect("replay", fixture=tmp_path / "q.erf") as offline:
        assert offline.query("nodeinfo", "0").node_guid
        with pytest.raises(smagent.FabricFailure) as ei:
            offline.query("nodeinfo", "0,1")
        assert "NodeInfo" in ei.value.request


def test_closing_the_session_finishes_the_recording(tmp_path):
    f = smagent.connect("sim")
    f.start_recording(tmp_path / "c.erf")
    f.discover()
    f.close()
    assert (tmp_path / "c.erf").exists() and not (tmp_path / "c.erf.partial").exists()
    assert len(list(read_capture(tmp_path / "c.erf"))) > 10


def test_a_truncated_recording_is_refused_whole(tmp_path):
    path, _plan, _n = _swept_recording(tmp_path)
    data = path.read_bytes()
    cut = tmp_path / "cut.erf"
    cut.write_bytes(data[:len(data) - 100])  # the last record loses its tail
    with pytest.raises(CaptureError, match=r"cut\.erf: record \d+ \(offset \d+\): truncated") as ei:
        smagent.connect("replay", fixture=cut)
    assert ei.value.exit_code == 2

