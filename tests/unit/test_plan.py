"""Plans from a desired state (issue 16 items 1, 3, 4; issue 11 item 11): one code path
for the API and the CLI, groups not mentioned are kept, planned tables are checked before
the first Set, and the JSON plan is a list of records. All on the in-process simulator;
the CLI runs in-process over the same fabric (`Context.session` patched)."""
import json

import pytest

from smagent import api, routing, verify
from smagent.sweep import desired
from smagent.sweep import planjson
from smagent.errors import EXIT_BAD_INPUT, EXIT_DEFECTS, EXIT_SAFETY, BadInput, SafetyRefusal
from smagent.sweep import PlanDefects
from smagent.transport.sim import SimTransport


def sets(t) -> int:
    return sum(v for k, v in t.stats.by_kind.items() if k.startswith("SubnSet("))


@pytest.fixture
def fabric():
    """A swept default fabric (2 spines, 4 leaves, 8 hosts): (transport, session)."""
    t = SimTransport()
    s = api.Session(t)
    assert s.sweep().problems == []
    return t, s


@pytest.fixture
def on(monkeypatch):
    """Make the CLI run on a given transport: on(t)."""
    def use(t):
        monkeypatch.setattr("smagent.cli.Context.session", lambda self: api.Session(t))
    return use


def node(s, name):
    return next(n for n in s.discover().nodes.values() if n.description == name)


def loop_entry(s):
    """A static LFT entry that sends H5's LID from the spine L1 uses back down to L1."""
    h5, l1 = node(s, "H5"), node(s, "L1")
    lid = h5.lid(1)
    out = s.lft_show("L1").table[lid]
    spine, back = s.topology.links[(l1.guid, out)]
    return {"switch": s.topology.nodes[spine].description, "lid": lid, "port": back}, lid


# -- item 1: one code path ---------------------------------------------------------------------
def test_sweep_honours_the_desired_states_files_before_any_smp():
    t = SimTransport()
    s = api.Session(t)
    ds = desired.parse({"lmc": 3, "routing": "file:/nonexistent/routes.dump", "lid_file": "/nonexistent/guid2lid"})
    for call in (lambda: s.sweep(dry_run=True, desired=ds), lambda: s.plan(ds), lambda: s.apply(ds)):
        with pytest.raises(BadInput) as e:
            call()
        assert "/nonexistent/routes.dump" in str(e.value)
    assert t.stats.sent == 0, "refused before the first SMP"


def test_desired_keys_win_over_defaults_and_a_contradicting_keyword_is_bad_input(fabric):
    _t, s = fabric
    assert s.sweep(dry_run=True, desired={"lmc": 2}).lid_plan.lmc == 2
    assert s.plan({"lmc": 2}).lid_plan.lmc == 2
    assert s.plan({"lmc": 2}, lmc=2).lid_plan.lmc == 2  # the same value twice is no conflict
    assert s.plan({"routing": "updn"}, lmc=1).lid_plan.lmc == 1  # a key the state does not set
    with pytest.raises(BadInput, match=r"lmc=1 contradicts lmc 2 in the desired state"):
        s.plan({"lmc": 2}, lmc=1)
    with pytest.raises(BadInput, match=r"routing='minhop' contradicts routing 'updn'"):
        s.sweep(dry_run=True, desired={"routing": "updn"}, routing="minhop")
    with pytest.raises(BadInput, match="expected a file path, a mapping or a DesiredState"):
        s.plan(42)


def test_api_and_cli_plan_the_same_for_one_file(fabric, on, cli, tmp_path):
    t, s = fabric
    entry, _lid = loop_entry(s)
    h5 = node(s, "H5")
    spine = entry["switch"]
    # a valid static route: H5's LID out of the spine's port to L3 (where it goes anyway
    # on one spine, a change on the other), an LMC, another engine and a group
    l3_port = next(p for (g, p), (peer, _q) in s.topology.links.items()
                   if s.topology.nodes[g].description == spine and s.topology.nodes[peer].description == "L3")
    f = tmp_path / "want.json"
    f.write_text(json.dumps({"routing": "updn", "lmc": 1, "lft": [{"switch": spine, "lid": h5.lid(1), "port": l3_port}],
                             "multicast": [{"mlid": "0xC001", "members": ["H2", "H7"]}]}))
    ours = s.plan(f)
    assert ours.lid_plan.lmc == 1 and ours.plan_changes()
    on(t)
    r = cli("plan", f, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["plan"] == json.loads(json.dumps(ours.plan_changes()))
    # the CLI's missing file: exit 2, named, nothing sent
    f.write_text(json.dumps({"routing": "file:/nonexistent/routes.dump"}))
    before = t.stats.sent
    for cmd in ("plan", "apply"):
        r = cli(cmd, f)
        assert r.exit_code == EXIT_BAD_INPUT and "/nonexistent/routes.dump" in r.stderr, r.output
    assert t.stats.sent == before


# -- item 3: groups a desired state does not mention are kept ----------------------------------
def test_a_group_not_mentioned_is_kept_unless_pruning(fabric, on, cli, tmp_path):
    t, s = fabric
    switches = [n for n in t.sim if n.is_switch]
    held = {n.name: n.mft[0] for n in switches}
    assert sum(1 for m in held.values() if m) >= 5, "the sweep programmed 0xC000 (IPoIB broadcast)"
    want = {"multicast": [{"mlid": 0xC001, "members": ["H2", "H7"]}]}
    r = s.plan(want)
    assert r.multicast_kept.keys() == {"0xc000"}
    assert not any(c.get("mlid") == "0xc000" for c in r.plan_changes(detail=True))
    assert any(c.get("mlid") == "0xc001" for c in r.plan_changes(detail=True))
    assert any("kept MLID 0xc000" in n and "multicast_prune: true" in n for n in r.notes), r.notes
    f = tmp_path / "want.json"
    f.write_text(json.dumps(want))
    on(t)
    r = cli("apply", f)
    assert r.exit_code == 0, r.output
    assert "warning: multicast groups not in the desired state are kept: 0xc000" in r.stderr
    assert {n.name: n.mft[0] for n in switches} == held, "0xC000 kept on every switch as it was"
    assert any(n.mft[1] for n in switches)
    f.write_text(json.dumps({**want, "multicast_prune": True}))
    assert cli("apply", f).exit_code == 0
    assert not any(n.mft[0] for n in switches) and any(n.mft[1] for n in switches)


# -- item 4: planned tables checked before the first Set ----------------------------------------
def test_a_static_loop_is_refused_before_the_first_set(fabric):
    t, s = fabric
    entry, lid = loop_entry(s)
    want = {"lft": [entry]}
    dry = s.plan(want)
    assert dry.plan_defects["loop"]["count"] == 1
    assert dry.plan_defects["loop"]["examples"][0]["lid"] == lid
    unreachable = dry.plan_defects["unreachable"]
    assert unreachable["count"] > 0 and set(unreachable["by_cause"]) == {"loop"}
    assert all(e["before"] == "delivered" and e["lid"] == lid for e in unreachable["examples"])
    before = sets(t)
    with pytest.raises(PlanDefects) as e:
        s.apply(want)
    assert isinstance(e.value, SafetyRefusal) and e.value.exit_code == EXIT_SAFETY
    assert "loops through" in str(e.value) and e.value.defects == dry.plan_defects
    assert sets(t) == before, "not one Set"
    # forced, the same checker on the live tables finds what the plan check predicted
    a = s.apply(want, allow_defects=True)
    assert a.result.plan_defects == dry.plan_defects and a.left_after_apply == []
    live = s.verify(mcast=False)
    assert live.summary["pairs_unreachable"] == unreachable["count"]
    assert live.defects["loop"]["examples"] == dry.plan_defects["loop"]["examples"]
    # and undoing it (the routes of a plain sweep) is a plan that breaks nothing
    assert s.plan({}).plan_defects == {}


def test_a_black_hole_is_refused_and_a_valid_detour_is_not(fabric):
    t, s = fabric
    entry, lid = loop_entry(s)
    hole = s.plan({"lft": [dict(entry, port=255)]})
    assert set(hole.plan_defects) == {"unreachable"}
    assert set(hole.plan_defects["unreachable"]["by_cause"]) == {"no_route"}
    # L1 sending H5's LID up to the other spine is a detour, not a defect
    spine, l1 = node(s, entry["switch"]), node(s, "L1")
    other = next(p for p in range(1, l1.num_ports + 1) if (l1.guid, p) in s.topology.links
                 and s.topology.nodes[s.topology.links[(l1.guid, p)][0]].is_switch
                 and s.topology.links[(l1.guid, p)][0] != spine.guid)
    ok = s.plan({"lft": [{"switch": "L1", "lid": lid, "port": other}]})
    assert ok.plan_defects == {} and [c["table"] for c in ok.plan_changes(detail=True)] == ["LFT"]


def test_a_fresh_fabric_is_not_refused_and_a_dry_run_costs_no_set():
    t = SimTransport()
    s = api.Session(t)
    r = s.plan()
    assert r.plan_check is not None and r.plan_defects == {} and r.plan_check.report.summary["pairs_unreachable"] == 0
    assert sets(t) == 0 and r.phases["plan_check"]["smps"] == 0
    assert s.sweep().problems == []
    assert verify.check(verify.collect(t), 5).ok


def test_a_route_into_a_linkless_port_is_refused_on_a_fresh_fabric(on, cli, tmp_path):
    """On a FRESH fabric today's tables hold nothing to compare with, yet a static route
    into a port with no link (L1 port 3), or into a port L1 lacks, is a black hole: the
    plan check refuses it absolutely (exit 4, not one Set), --allow-defects writes it."""
    t = SimTransport()
    s = api.Session(t)
    h1_2 = 2  # H1 port 2's LID on the bundled fabric, fresh (discovery order)
    dry = s.plan({"lft": [{"switch": "L1", "lid": h1_2, "port": 3}]})
    assert dry.plan_defects["black_hole"]["examples"] == [{"switch": "L1", "lid": h1_2, "port": 3,
                                                           "cause": "unlinked_port"}]
    assert dry.plan_defects["black_hole"]["count"] == 1 and "unreachable" not in dry.plan_defects
    assert node(s, "H1").lid(2) == 0, "fresh: no LIDs yet"
    f = tmp_path / "hole.yaml"
    f.write_text(f"lft:\n  - {{switch: L1, lid: {h1_2}, port: 3}}\n")
    on(t)
    r = cli("apply", f, "--json")
    assert r.exit_code == EXIT_SAFETY, r.output
    assert json.loads(r.stdout)["defects"]["black_hole"]["count"] == 1
    assert t.stats.sent and sets(t) == 0, "refused before the first Set"
    r = cli("apply", f)
    assert r.exit_code == EXIT_SAFETY and "L1 LID 2 -> port 3: the exit port has no link" in r.stderr, r.output
    assert sets(t) == 0
    # a port the switch lacks (8 ports; 255 would be "no route"): the desired state's own check
    with pytest.raises(desired.DesiredStateError, match="port 200 does not exist"):
        s.plan({"lft": [{"switch": "L1", "lid": h1_2, "port": 200}]})
    r = cli("apply", f, "--allow-defects")
    assert r.exit_code == EXIT_DEFECTS and sets(t) > 0, r.output
    assert s.lft_show("L1").table[h1_2] == 3
    assert verify.check(verify.collect(t)).defects["dead_end"]["examples"][0]["cause"] == "unlinked_port"


def test_a_switchs_own_lid_out_of_another_port_is_refused_and_verify_reports_it(fabric, on, cli, tmp_path):
    """L1's own LID out of an uplink passes the relative check (the seed delivers it to
    port 0 first, no pair is lost) but ibsim and LFT-lookup switches send L1's LID-routed
    SMPs to the spine: refused (exit 4) unless --allow-defects, and `verify` then reports
    it (own_lid_not_port0) on the tables written."""
    t, s = fabric
    l1 = node(s, "L1")
    own = l1.lid(0)
    want = {"lft": [{"switch": "L1", "lid": own, "port": 5}]}
    dry = s.plan(want)
    assert set(dry.plan_defects) == {"own_lid_not_port0"}, dry.plan_defects
    assert dry.plan_defects["own_lid_not_port0"]["examples"] == [{"switch": "L1", "lid": own, "port": 5}]
    before = sets(t)
    with pytest.raises(PlanDefects, match="own_lid_not_port0: 1 switch LID would not point at port 0"):
        s.apply(want)
    assert sets(t) == before
    assert verify.check(verify.collect(t)).ok
    f = tmp_path / "own.json"
    f.write_text(json.dumps(want))
    on(t)
    assert cli("apply", f).exit_code == EXIT_SAFETY and sets(t) == before
    r = cli("apply", f, "--allow-defects")
    assert r.exit_code == EXIT_DEFECTS and sets(t) > before, r.output
    r = cli("verify", "--json")
    assert r.exit_code == EXIT_DEFECTS, r.output
    doc = json.loads(r.stdout)
    assert doc["defects"] == {"own_lid_not_port0": {"count": 1, "examples": [{"switch": "L1", "lid": own, "port": 5}]}}
    assert "L1 LID %d (its own): its LFT entry is port 5, not port 0" % own in cli("verify").stdout
    assert s.plan({}).plan_defects == {}, "a plain sweep's plan puts it back"


def test_cli_plan_reports_and_apply_refuses(fabric, on, cli, tmp_path):
    t, s = fabric
    entry, _lid = loop_entry(s)
    f = tmp_path / "loop.yaml"
    f.write_text(f"lft:\n  - {{switch: {entry['switch']}, lid: {entry['lid']}, port: {entry['port']}}}\n")
    on(t)
    r = cli("plan", f)
    assert r.exit_code == EXIT_DEFECTS, r.output
    assert "SubnSet(LinearForwardingTable)" in r.stdout  # the text plan keeps its prose
    assert "warning: planned tables: loop: LID" in r.stderr
    doc = json.loads(cli("plan", f, "--json").stdout)
    assert doc["plan_defects"]["loop"]["count"] == 1
    before = sets(t)
    r = cli("apply", f, "--json")
    assert r.exit_code == EXIT_SAFETY
    err = json.loads(r.stdout)
    assert err["exit_code"] == EXIT_SAFETY and err["defects"]["loop"]["count"] == 1, err
    assert sets(t) == before
    r = cli("apply", f, "--allow-defects")
    assert r.exit_code == EXIT_DEFECTS and sets(t) > before, r.output


# -- issue 11 item 11: the JSON plan is records --------------------------------------------------
def test_plan_json_is_records_and_the_compact_ones_expand_to_them(cli):
    compact = cli("--transport", "sim", "sweep", "--dry-run", "--json")
    r = cli("--transport", "sim", "sweep", "--dry-run", "--json", "--detail")
    assert r.exit_code == 0 and compact.exit_code == 0, r.output
    tables = {c["table"] for c in compact.json()["plan"]}
    assert tables == {"PortInfoSet", "SwitchInfo", "LFTBlock", "MFTBlock", "SL2VLGroup", "VLArbGroup", "P_KeyGroup"}, tables
    doc = json.loads(r.stdout)
    plan = doc["plan"]
    assert planjson.canonical(e for c in compact.json()["plan"] for e in planjson.expand(c)) == planjson.canonical(plan)
    assert all(isinstance(c, dict) and c["guid"].startswith("0x") for c in plan)
    assert {c["table"] for c in plan} == {"PortInfo", "SwitchInfo", "LFT", "MFT", "SL2VL", "VLArb", "P_Key"}, \
        {c["table"] for c in plan}
    lft = [c for c in plan if c["table"] == "LFT"]
    assert {(c["switch"], c["block"]) for c in lft} and all(isinstance(c["lid"], int) and c["new"] != 255 or
                                                             c["old"] != c["new"] for c in lft)
    per_port = {(c["node"], c["port"]) for c in plan if c["table"] == "PortInfo" and c["field"] == "lid"}
    assert len(per_port) == doc["lids"]
    assert {c["field"] for c in plan if c["table"] == "SwitchInfo"} >= {"linear_fdb_top", "life_time_value"}
    mft = [c for c in plan if c["table"] == "MFT"]
    assert {c["mlid"] for c in mft} == {"0xc000"} and all(c["new"] for c in mft)


def test_plan_changes_match_the_sets(fabric):
    t, s = fabric
    entry, lid = loop_entry(s)
    l3_port = next(p for (g, p), (peer, _q) in s.topology.links.items()
                   if s.topology.nodes[g].description == entry["switch"]
                   and s.topology.nodes[peer].description == "L3")
    r = s.plan({"lft": [dict(entry, port=l3_port)], "switches": {entry["switch"]: {"life_time_value": 9}}})
    old = s.lft_show(entry["switch"]).table[lid]
    assert r.plan_changes(detail=True) == [
        {"switch": entry["switch"], "guid": f"0x{node(s, entry['switch']).guid:016x}", "table": "SwitchInfo",
         "field": "life_time_value", "old": 18, "new": 9, "action": "update"},
    ] + ([{"switch": entry["switch"], "guid": f"0x{node(s, entry['switch']).guid:016x}", "table": "LFT",
           "block": lid // 64, "lid": lid, "old": old, "new": l3_port, "action": "update"}] if old != l3_port else [])


def test_run_reads_a_desired_state_by_the_same_rule(cli, tmp_path):
    """`smagent run --desired` resolves the file's settings as plan/apply do: a command-line
    option that contradicts the file is refused before anything starts."""
    f = tmp_path / "d.yaml"
    f.write_text("lmc: 1\nrouting: updn\n")
    r = cli("run", "--desired", f, "--lmc", "2", "--state-dir", tmp_path / "s")
    assert r.exit_code == EXIT_BAD_INPUT and "lmc=2 contradicts lmc 1 in the desired state" in r.output, r.output
    r = cli("run", "--desired", f, "--routing", "minhop", "--state-dir", tmp_path / "s")
    assert r.exit_code == EXIT_BAD_INPUT and "routing='minhop' contradicts routing 'updn'" in r.output, r.output
    settings = desired.sweep_settings(desired.load(f), lmc=None, lid_file="g2l", routing="updn")
    assert settings == {"desired": settings["desired"], "lmc": 1, "lid_file": "g2l",
                        "routing": routing.parse_spec("updn")}


def test_updn_roots_of_a_desired_state_are_used(fabric):
    """`root:` was read and then ignored; now updn takes those roots (names or GUIDs). With
    one root, up/down routes between leaves all turn at it: L1 reaches H5 through it."""
    _t, s = fabric
    lid, l1 = node(s, "H5").lid(1), node(s, "L1")
    now = s.lft_show("L1").table[lid]

    def l1_spine(plan):
        new = [c["new"] for c in plan.plan_changes(detail=True) if c["table"] == "LFT" and c["switch"] == "L1" and c["lid"] == lid]
        port = new[0] if new else now
        return s.topology.nodes[s.topology.links[(l1.guid, port)][0]].description

    for root in ("S1", "S2"):
        assert l1_spine(s.plan({"routing": "updn", "root": [root]})) == root
    assert l1_spine(s.plan({"routing": "updn", "root": [f"{node(s, 'S2').guid:#018x}"]})) == "S2"
    with pytest.raises(desired.DesiredStateError, match="roots are for routing: updn"):
        s.plan({"root": ["S1"]})
    with pytest.raises(desired.DesiredStateError, match=r"root\[1\]: 'H1' is a channel adapter"):
        s.plan({"routing": "updn", "root": ["H1"]})
