"""Manual table edits run the sweep's plan check (issue 39 item 3): `lft set`, `lft load`,
`mft set` and `rft set` refuse, exit 4 before the first Set, what would break the fabric
unless --allow-defects; a dry run reports it (exit 1); the backup's path is printed.
On the in-process simulator's default fabric (L1's ports 3, 4 and 8 have no cable)."""
import pytest

import smagent
from smagent.sweep import PlanDefects


@pytest.fixture
def swept():
    s = smagent.connect("sim")
    assert s.sweep().problems == []
    return s


def _sets(s) -> int:
    return sum(v for k, v in s.stats["by_kind"].items() if k.startswith("SubnSet"))


@pytest.fixture
def on_cli(swept, monkeypatch):
    monkeypatch.setattr("smagent.cli.Context.session", lambda self: swept)
    return swept


def test_lft_set_into_a_port_without_a_cable_is_refused(cli, on_cli):
    s = on_cli
    before = _sets(s)
    r = cli("lft", "set", "L1", "9", "3")  # the issue's own example
    assert r.exit_code == 4, r.output
    assert "black_hole: L1 LID 9 -> port 3: the exit port has no link" in r.stderr
    assert "unreachable" in r.stderr and "--allow-defects" in r.stderr
    assert _sets(s) == before and s.lft_show("L1").table[9] == 6
    dry = cli("lft", "set", "L1", "9", "3", "--dry-run")
    assert dry.exit_code == 1 and dry.stdout.strip() == "L1 LFT block 0: lid 9: 6 -> 3"
    assert "warning: planned tables: black_hole: L1 LID 9 -> port 3" in dry.stderr and _sets(s) == before
    doc = cli("lft", "set", "L1", "9", "3", "--dry-run", "--json").json()
    assert doc["plan_defects"]["black_hole"]["count"] == 1 and doc["sets"] == {"switchinfo": 0, "lft_blocks": 0}
    written = cli("lft", "set", "L1", "9", "3", "--allow-defects")
    assert written.exit_code == 1 and s.lft_show("L1").table[9] == 3  # written, the hole reported


def test_a_harmless_edit_passes_and_an_old_hole_elsewhere_is_not_its_fault(swept):
    s = swept
    hole = s.lft_set("L2", 0x30, 4, allow_defects=True)  # a hole already there (L2 port 4: no cable)
    assert hole.plan_defects["black_hole"]["examples"][0]["switch"] == "L2" and s.lft_show("L2").table[0x30] == 4
    r = s.lft_set("L1", 10, 6)  # H3 by way of S2 instead of S1: still delivered
    assert r.ok and r.plan_check is not None and r.plan_defects == {} and s.lft_show("L1").table[10] == 6


def test_own_lid_off_port_0_and_lft_load_are_checked(swept, tmp_path):
    s = swept
    with pytest.raises(PlanDefects) as ei:
        s.lft_set("L1", 3, 5)  # L1's own LID
    assert ei.value.exit_code == 4 and ei.value.defects["own_lid_not_port0"]["examples"] == [
        {"switch": "L1", "lid": 3, "port": 5}]
    dump = s.lft_dump()
    bad = tmp_path / "bad.dump"
    bad.write_text(dump.replace("0x0009 006 ", "0x0009 008 ", 1))  # L1: LID 9 into port 8, no cable
    assert "0x0009 008 " in bad.read_text()
    with pytest.raises(PlanDefects, match="black_hole"):
        s.lft_load(str(bad))
    assert s.lft_load(str(bad), dry_run=True).plan_defects["black_hole"]["count"] == 1


def test_mft_set_that_cuts_members_off_is_refused(swept):
    s = swept
    before = s.mft_show("L1").groups()[0xC000]
    with pytest.raises(PlanDefects, match="mcast"):
        s.mft_set("L1", 0xC000, [1])  # L1 stops passing the IPoIB group on
    assert s.mft_show("L1").groups()[0xC000] == before
    with pytest.raises(PlanDefects, match="forwards to port 8, which is not linked"):
        s.mft_set("L1", 0xC000, [*before, 8])
    assert s.mft_set("L1", 0xC000, before).plan == []  # no change, nothing to check


def test_the_backup_path_is_printed(cli, monkeypatch, tmp_path):
    s = smagent.connect("sim", state_dir=tmp_path / "state")
    assert s.sweep().problems == []
    monkeypatch.setattr("smagent.cli.Context.session", lambda self: s)
    r = cli("lft", "set", "L1", "10", "6")
    assert r.exit_code == 0, r.output
    line = next(x for x in r.stdout.splitlines() if x.startswith("# tables overwritten were saved to "))
    path = line.split(" saved to ")[1].split(" ")[0]
    assert path.startswith(str(tmp_path / "state" / "backups")) and (tmp_path / "state").exists()
    doc = cli("lft", "set", "L1", "10", "5", "--json").json()
    assert doc["backup"].startswith(str(tmp_path / "state" / "backups")) and doc["plan_defects"] == {}
