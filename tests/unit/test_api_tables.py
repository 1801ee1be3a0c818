"""The table operations on `smagent.api.Session` (issue 10, issue 16 items 2, 5, 7, 11):
lft/mft/rft show|set, lft dump|load|backup|restore, plan/apply of a desired state, bulk
reads, the master-SM refusal of table writes (issue 11 item 1), and typed errors."""
import json
import pathlib

import pytest

import smagent
from fabrics import chassis_fabric
from mad import forwarding as fw
from mad.attributes import SMState
from smagent import api
from smagent.sweep import PlanDefects, desired
from smagent.errors import SafetyRefusal, SmagentError
from smagent.transport.sim import SimTransport

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def swept():
    """A session on the bundled simulator topology after a sweep."""
    with smagent.connect("sim") as s:
        assert s.sweep().problems == []
        yield s


def _sets(s) -> int:
    return sum(v for k, v in s.stats["by_kind"].items() if k.startswith("SubnSet"))


def test_lft_show_set_and_bulk_read(swept):
    s = swept
    t = s.lft_show("L1")
    assert isinstance(t, api.LftTable) and t.switch.name == "L1" and t.top > 0
    lid, port = 2, t.table[2]
    new = 1 if port != 1 else 2
    plan = s.lft_set("L1", lid, new, dry_run=True)
    assert isinstance(plan, api.WriteResult) and plan.dry_run
    assert plan.plan == [f"L1 LFT block 0: lid {lid}: {port} -> {new}"] and plan.sets_sent == {"switchinfo": 0,
                                                                                                 "lft_blocks": 0}
    assert s.lft_show("L1").table[lid] == port  # a dry run sends no Set
    with pytest.raises(PlanDefects, match="the edit would break the fabric"):  # LID 2 sent astray
        s.lft_set("L1", lid, new)
    assert s.lft_show("L1").table[lid] == port
    done = s.lft_set("L1", lid, new, allow_defects=True)
    assert done.ok and done.sets_sent == {"switchinfo": 0, "lft_blocks": 1} and done.changes[0]["new"] == new
    assert s.lft_show("L1").table[lid] == new
    # every switch's LFT in one windowed batch equals the one-switch reads
    topo = s.discover()
    calls = []
    execute = s.transport.execute
    s.transport.execute = lambda reqs: calls.append(len(reqs)) or execute(reqs)
    tables = s.read_lfts(topo)
    s.transport.execute = execute
    assert len(calls) == 1 and calls[0] == sum(len(v) // fw.LFT_BLOCK_SIZE for v in tables.values())
    assert s.read_lfts() == tables  # a fresh discovery reads the same
    for n in topo.switches():
        one = s.lft_show(f"{n.guid:#018x}")
        assert tables[n.guid] == one.table


def test_dump_load_backup_restore(swept, tmp_path):
    s = swept
    saved = s.lft_backup()
    assert saved.startswith("# smagent lft backup") and "Unicast lids" in saved
    dump = s.lft_dump()
    assert "(Channel Adapter portguid 0x" in dump  # destinations resolved on the LIDs the sweep gave
    assert s.lft_load(dump).plan == []  # the fabric holds its own dump (text given directly)
    edited = tmp_path / "edited.dump"
    t = s.lft_show("L1")
    old = t.table[2]
    new = 1 if old != 1 else 2
    edited.write_text(dump.replace(f"0x0002 {old:03d} ", f"0x0002 {new:03d} ", 1))
    r = s.lft_load(str(edited), allow_defects=True)
    assert r.ok and r.sets_sent["lft_blocks"] == 1 and s.lft_show("L1").table[2] != old
    backup_file = tmp_path / "saved.dump"
    backup_file.write_text(saved)
    assert s.lft_restore(backup_file, dry_run=True).planned["lft_blocks"] == 1
    assert s.lft_restore(backup_file).ok
    assert s.lft_show("L1").table[2] == old and s.lft_restore(backup_file).plan == []
    with pytest.raises(smagent.BadInput, match="not a line"):
        s.lft_load("garbage\nmore garbage\n")


def test_mft_set_show_and_bulk_read(swept):
    s = swept
    before = s.mft_show("L1").groups()
    assert 0xC000 in before  # the sweep's IPoIB group
    r = s.mft_set("L1", 0xC00A, [1, 2])
    assert r.ok and r.sets_sent["mft_blocks"] >= 1
    assert s.mft_show("L1").groups()[0xC00A] == [1, 2]
    mfts = s.read_mfts()
    guid = s.lft_show("L1").switch.guid
    assert mfts[guid] == s.mft_show("L1").groups() and mfts[guid][0xC00A] == [1, 2]
    b, i = fw.mft_block(0xC00A)
    assert fw.mask_ports(s.read_mft_masks()[guid][(b, 0)][i], 0) == {1, 2}
    with pytest.raises(smagent.BadInput, match="not a multicast LID"):
        s.mft_set("L1", 0x10, [1])


def test_read_portinfos(swept):
    s = swept
    pis = s.read_portinfos()
    for n in s.topology.cas():
        for p in n.lid_ports():
            assert pis[(n.guid, p)].lid == s.query("portinfo", ",".join(map(str, n.port_paths[p])), port=p).lid
    sw = s.topology.switches()[0]
    assert set(range(sw.num_ports + 1)) <= {p for g, p in pis if g == sw.guid}


def test_rft_show_and_set():
    s = api.Session(SimTransport(chassis_fabric()))
    assert s.sweep().problems == []
    t = s.rft_show("C")
    assert isinstance(t, api.RftTable) and t.entries and all(isinstance(e, api.RftEntry) for e in t.entries)
    e = next(e for e in t.entries if e.port not in (0, 8))
    r = s.rft_set("C", e.base_lid, 0, lmc=e.lmc, allow_defects=True)
    assert r.ok and r.sets_sent["rft_blocks"] >= 1
    assert any(x.base_lid == e.base_lid and x.port == 0 for x in s.rft_show("C").entries)
    with pytest.raises(smagent.BadInput, match="aligned"):
        s.rft_set("C", 3, 1, lmc=2)


def test_plan_and_apply_take_a_path_or_a_desired_state(tmp_path):
    path = ROOT / "examples" / "desired.yaml"
    with smagent.connect("sim") as s:
        p = s.plan(str(path))  # a path string: not a TypeError
        assert p.dry_run and p.sets_planned > 0
        assert s.plan(desired.load(path)).plan_lines() == p.plan_lines()
        a = s.apply(path)
        assert isinstance(a, api.ApplyResult) and a.ok and a.left_after_apply == []
        assert s.lft_show("L1").table[2] == 6  # the static route of the file
        with pytest.raises(desired.DesiredStateError):
            s.plan(str(tmp_path / "missing.yaml"))


# -- issue 11 item 1: table writes refused while another SM is MASTER --------------------------
def _other_sm(s, state):
    """An SM on H2 port 1 that every switch names as its MasterSMLID."""
    sim = s.transport.sim
    sim.attach_sm(("H2", 1), guid=0x1234, priority=7, state=state)
    lid = sim.node("H2").pi[1].lid
    for n in sim.switches():
        n.pi[0].master_sm_lid = lid
    return lid


@pytest.mark.parametrize("write", [
    lambda s, **kw: s.lft_set("L1", 2, 6, allow_defects=True, **kw),
    lambda s, **kw: s.mft_set("L1", 0xC00B, [1], allow_defects=True, **kw),
    lambda s, **kw: s.lft_load(str(s.test_backup), allow_defects=True, **kw),
    lambda s, **kw: s.lft_restore(s.test_backup, **kw),
], ids=["lft_set", "mft_set", "lft_load", "lft_restore"])
def test_table_write_refused_while_another_sm_is_master(swept, tmp_path, write):
    s = swept
    backup = tmp_path / "b.dump"
    backup.write_text(s.lft_backup())
    port = 4 if s.lft_show("L1").table[2] != 4 else 5
    assert s.lft_set("L1", 2, port, allow_defects=True).sets_sent["lft_blocks"] == 1  # so the backup differs
    s.test_backup = backup
    lid = _other_sm(s, SMState.MASTER)
    before = _sets(s)
    with pytest.raises(SafetyRefusal, match="0x0000000000001234") as ei:
        write(s)
    assert ei.value.exit_code == 4 and ei.value.guid == 0x1234 and ei.value.lid == lid
    assert _sets(s) == before  # refused before the first Set
    dry = write(s, dry_run=True)
    assert any("MASTER" in n for n in dry.notes) and _sets(s) == before
    forced = write(s, force=True)
    assert forced.ok and _sets(s) > before and any("MASTER" in n for n in forced.notes)


def test_a_standby_sm_is_a_note(swept):
    s = swept
    _other_sm(s, SMState.STANDBY)
    r = s.lft_set("L1", 2, 4 if s.lft_show("L1").table[2] != 4 else 5, allow_defects=True)
    assert r.ok and r.sets_sent["lft_blocks"] == 1 and any("STANDBY, not MASTER" in n for n in r.notes)


def test_cli_refuses_with_exit_4_and_force_writes(cli, monkeypatch):
    s = smagent.connect("sim")
    assert s.sweep().problems == []
    _other_sm(s, SMState.MASTER)
    monkeypatch.setattr("smagent.cli.Context.session", lambda self: s)
    port = 4 if s.lft_show("L1").table[2] != 4 else 5
    r = cli("lft", "set", "L1", "2", str(port), "--json")
    assert r.exit_code == 4 and "a subnet manager is MASTER" in r.stderr and "--force" in r.stderr, r.output
    assert r.json()["sm"]["guid"] == "0x0000000000001234"
    r = cli("lft", "set", "L1", "2", str(port), "--force", "--allow-defects")
    assert r.exit_code == 1 and "warning: a subnet manager is MASTER" in r.stderr, r.output
    assert s.lft_show("L1").table[2] == port
    r = cli("rft", "set", "L1", "2", "1")
    assert r.exit_code == 2 and "no random forwarding table" in r.stderr


# -- issue 16 items 5 and 11: typed errors -------------------------------------------------------
def test_errors_a_caller_can_cause_are_typed(tmp_path):
    with smagent.connect("sim") as s:
        assert s.query("nodedesc", 0).node_string  # an int target is a LID (0: the local DR path)
        s.sweep()
        lid = s.query("portinfo", (0,), port=1).lid
        assert s.query("nodedesc", lid).node_string == s.query("nodedesc", "0").node_string
        with pytest.raises(smagent.BadInput, match="target"):
            s.query("nodedesc", 2.5)
        with pytest.raises(smagent.BadInput, match="bogus_option") as ei:
            s.sweep(dry_run=True, bogus_option=1)
        assert ei.value.exit_code == 2
    assert issubclass(desired.DesiredStateError, SmagentError)
    with pytest.raises(smagent.BadInput, match="closed") as ei:
        s.query("nodeinfo", "0")
    assert isinstance(ei.value, api.SessionClosed)
    for call in (s.discover, lambda: s.lft_show("L1"), lambda: s.sweep(dry_run=True), lambda: s.stats):
        with pytest.raises(api.SessionClosed):
            call()


def test_replay_miss_names_the_request(tmp_path):
    from smagent.transport.replay import ReplayMiss
    rec = tmp_path / "rec.erf"
    with smagent.connect("sim", record=str(rec)) as s:
        s.query("nodeinfo", "0")
    with smagent.connect("replay", fixture=str(rec)) as s:
        with pytest.raises(ReplayMiss) as ei:
            s.query("nodedesc", "0")
    assert isinstance(ei.value, smagent.FabricFailure) and ei.value.exit_code == 3
    assert ei.value.request == "SubnGet(NodeDescription, modifier 0x0) to DR path 0"
    assert ei.value.fixture == str(rec)


def test_json_error_of_a_replay_miss_is_unchanged(replay, tmp_path):
    rec = tmp_path / "rec.erf"
    with smagent.connect("sim", record=str(rec)) as s:
        s.query("nodeinfo", "0")
    r = replay(str(rec), "query", "nodedesc", "0", "--json")
    assert r.exit_code == 3 and set(json.loads(r.stdout)) == {"error", "exit_code", "type", "changed"}


def test_table_writes_take_numbers_as_text_and_refuse_the_rest_as_bad_input(swept):
    """Numbers given as text (as a script reading a file has them) are the CLI's syntax;
    anything else is BadInput naming the argument, never a TypeError, and nothing is sent."""
    s = swept
    assert s.lft_set("L1", "2", "1", dry_run=True).plan == s.lft_set("L1", 2, 1, dry_run=True).plan
    assert s.mft_set("L1", "0xC00A", ["1", 2], dry_run=True).plan == s.mft_set("L1", 0xC00A, [1, 2],
                                                                                 dry_run=True).plan
    before = _sets(s)
    for call, what in [(lambda: s.lft_set("L1", "two", 5, dry_run=True), "lid 'two'"),
                       (lambda: s.lft_set("L1", 2, None), "port None"),
                       (lambda: s.mft_set("L1", 0xC00A, 1), "ports 1"),
                       (lambda: s.mft_set("L1", 0xC00A, ["x"]), "port 'x'"),
                       (lambda: s.rft_set("L1", 2.5, 1, dry_run=True), "lid 2.5")]:
        with pytest.raises(smagent.BadInput, match=what):
            call()
    assert _sets(s) == before


def test_sweep_keeps_its_backup_and_guid2lid_in_the_sessions_state_dir(tmp_path):
    """A session's state_dir is where every write keeps what it overwrote, the sweep's as
    much as lft_set's; ``state_dir=None`` on the call still turns it off."""
    with smagent.connect("sim", state_dir=tmp_path / "state") as s:
        assert s.sweep().problems == []
        backups = sorted((tmp_path / "state" / "backups").glob("*-before-*.json"))
        assert backups and (tmp_path / "state" / "guid2lid").is_file()
        assert s.lft_set("L1", 2, 1, allow_defects=True).backup_file is not None
    with smagent.connect("sim", state_dir=tmp_path / "other") as s:
        assert s.sweep(state_dir=None).problems == []
        assert not (tmp_path / "other").exists()


def test_a_desired_state_built_in_code_needs_no_source(swept):
    """`DesiredState(routing="updn")` is a desired state as a script writes it: planned
    like the file's; a contradicting keyword or an unknown engine is BadInput."""
    ds = desired.DesiredState(routing="updn")
    assert any("updn roots" in n for n in swept.plan(ds).notes)
    with pytest.raises(smagent.BadInput, match="contradicts routing 'updn' in the desired state"):
        swept.plan(ds, routing="minhop")
    with pytest.raises(smagent.BadInput, match="unknown routing engine 'bogus'"):
        swept.plan(desired.DesiredState(routing="bogus"))
