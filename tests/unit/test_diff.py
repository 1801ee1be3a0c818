"""`smagent diff BASELINE` / `Session.diff`: an LFT entry, an MFT member and a PortInfo field
changed behind the agent's back are each found (and nothing else); an untouched fabric has
no difference, against a snapshot or against the JSON of a plan it holds."""
from __future__ import annotations

import json

import smagent
from mad.attributes import AttrID
from mad.header import Method
from smagent.transport.base import Request


def change_portinfo(session, switch: str, port: int, **fields) -> None:
    """A PortInfo Set nobody planned (as another tool would send)."""
    node = next(n for n in session.discover().nodes.values() if n.description == switch)
    pi = session.query("portinfo", switch, port=port)
    nochange = dict(port_state=0, port_physical_state=0, link_down_default_state=0, link_width_enabled=0,
                    link_speed_enabled=0)  # 0: no change (IBA 14.2.5.6)
    req = Request.dr(Method.SET, AttrID.PORT_INFO, node.path, port,
                     pi.LAYOUT.replace(pi, **nochange, **fields).encode())
    session.transport.execute([req], check=True)


def test_diff_finds_what_changed_behind_its_back(tmp_path):
    base = tmp_path / "base.erf"
    with smagent.connect("sim") as s:
        s.sweep()
        s.snapshot(base)
        assert s.diff(base).records == []  # untouched
        old = s.read_lfts()
        l1 = next(n for n in s.topology.nodes.values() if n.description == "L1")
        was = old[l1.guid][2]
        s.lft_set("L1", 2, 6 if was != 6 else 5)
        s.mft_set("L1", 0xC005, [1, 2])
        hoq = s.query("portinfo", "L1", port=1).hoq_life
        change_portinfo(s, "L1", 1, hoq_life=(hoq + 1) % 20)
        d = s.diff(base)
    assert not d.ok and d.by_table() == {"PortInfo": 1, "LFT": 1, "MFT": 1}, d.records
    pi, lft, mft = d.records
    assert (pi["node"] if "node" in pi else pi["switch"]) == "L1" and pi["port"] == 1 and pi["field"] == "hoq_life"
    assert (pi["baseline"], pi["now"]) == (hoq, (hoq + 1) % 20)
    assert lft == {"table": "LFT", "switch": "L1", "guid": f"0x{l1.guid:016x}", "lid": 2, "baseline": was,
                   "now": 6 if was != 6 else 5}
    assert mft["mlid"] == "0xc005" and mft["baseline"] == [] and mft["now"] == [1, 2]
    assert d.lines()[1] == f"LFT L1 lid 2: {was} -> {lft['now']}"
    assert "3 differences" in repr(d)


def test_diff_against_a_plan_json(cli, tmp_path):
    """A plan's JSON as the baseline: before the apply every planned record differs, after it none."""
    desired = tmp_path / "d.yaml"
    desired.write_text("multicast:\n  - {mlid: 0xC001, members: [H1, H2]}\nlft:\n  - {switch: L1, lid: 2, port: 6}\n")
    with smagent.connect("sim") as s:
        s.sweep()
        plan = s.plan(str(desired))
        doc = {"plan": plan.plan_changes()}
        (tmp_path / "plan.json").write_text(json.dumps(doc))
        before = s.diff(tmp_path / "plan.json")
        assert len(before.records) == len(doc["plan"]) and before.by_table().keys() == {"LFT", "MFT"}
        assert all(set(r) >= {"table", "guid", "baseline", "now"} and "action" not in r for r in before.records)
        s.apply(str(desired))
        assert s.diff(tmp_path / "plan.json").records == []


def test_diff_command(cli, tmp_path):
    snap = tmp_path / "s.erf"
    assert cli("snapshot", snap).exit_code == 0
    # a fresh simulator each run: the same fabric, untouched
    r = cli("diff", snap, "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout) == {"baseline": str(snap), "differences": 0, "by_table": {}, "records": []}
    # the snapshot of a swept fabric against a fresh one: LIDs, LFTs, ... differ (exit 1)
    swept = tmp_path / "swept.erf"
    with smagent.connect("sim") as s:
        s.sweep()
        s.snapshot(swept)
    r = cli("--transport", "replay", "--fixture", swept, "diff", snap)
    assert r.exit_code == 1 and "PortInfo" in r.stdout and "LFT" in r.stdout, r.stderr
    assert "differences from" in r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert cli("diff", bad).exit_code == 2
    bad.write_text('{"plan": 5}')
    r = cli("diff", bad)
    assert r.exit_code == 2 and "plan --json" in r.stderr
    assert cli("diff", tmp_path / "absent.erf").exit_code == 2


def test_plan_detailed_exitcode_changes_pending_and_actions(cli, tmp_path):
    """plan --detailed-exitcode: 2 while changes are pending, 0 once applied; every plan
    record carries an action."""
    desired = tmp_path / "d.yaml"
    desired.write_text("multicast:\n  - {mlid: 0xC001, members: [H1, H2]}\n")
    state = tmp_path / "state"
    # the in-process simulator starts fresh for each command: the plan of a fresh fabric
    r = cli("plan", desired, "--json", "--detailed-exitcode", "--detail")
    assert r.exit_code == 2, r.stderr
    doc = json.loads(r.stdout)
    assert doc["changes_pending"] is True and doc["plan"]
    assert {rec["action"] for rec in doc["plan"]} <= {"create", "update", "delete"}
    lft = [rec for rec in doc["plan"] if rec["table"] == "LFT"]
    assert lft and all(rec["action"] == ("create" if rec["old"] == 255 else "update") for rec in lft)
    assert all(rec["action"] == "create" for rec in doc["plan"] if rec["table"] == "MFT")
    assert all(rec["action"] == "update" for rec in doc["plan"] if rec["table"] == "PortInfo")
    assert cli("plan", desired, "--json").exit_code == 0  # without the flag: 0 as before
    with smagent.connect("sim", state_dir=state) as s:
        s.apply(str(desired))
        left = s.plan(str(desired))
        assert not left.changes_pending and left.summary()["changes_pending"] is False
        assert "changes_pending" not in s.sweep().summary()  # only plans say it
        s.snapshot(tmp_path / "applied.erf")
    r = cli("--transport", "replay", "--fixture", tmp_path / "applied.erf", "plan", desired, "--detailed-exitcode")
    assert r.exit_code == 0, r.stderr


def test_plan_detailed_exitcode_errors_exit_1(cli, tmp_path):
    """Terraform's codes under --detailed-exitcode: an error is 1, never 2 (which means changes
    pending): a bad desired state, a missing file, a usage error; the JSON error says 1 too."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("routing: nosuchengine\n")
    r = cli("plan", bad, "--detailed-exitcode")
    assert r.exit_code == 1 and "nosuchengine" in r.stderr, (r.exit_code, r.stderr)
    r = cli("plan", bad, "--detailed-exitcode", "--json")
    assert r.exit_code == 1 and json.loads(r.stdout)["exit_code"] == 1
    assert cli("plan", tmp_path / "absent.yaml", "--detailed-exitcode").exit_code == 1
    assert cli("plan", bad, "--detailed-exitcode", "--no-such-option").exit_code == 1
    assert cli("plan", bad).exit_code == 2  # without the flag: bad input is 2, as documented
