"""guid2lid files that are damaged, and LIDs of ports that are away (pure: no fabric).

A bad line is skipped with a problem naming it (OpenSM does the same); a LID claimed by
two GUIDs is given to neither; a file the user names for a one-shot sweep is refused
whole (`strict`); a save replaces the file atomically and keeps a damaged one aside; a
LID the file gives an absent port is reserved for it (OpenSM's rule)."""
import os

import pytest

import smagent
from smagent.planning import lidassign as lids

A, B, C = 0x0002C90000000001, 0x0002C90000000002, 0x0002C90000000003


def test_bad_lines_are_skipped_and_named(tmp_path):
    f = tmp_path / "guid2lid"
    f.write_text(f"0x{A:016x} 0x0001 0x0001\n\ngarbage !!!\n0x{B:016x} 0x0000 0x0000\n0x{C:016x} 0x0003 0x0003\n")
    t = lids.load_guid2lid(f)
    assert dict(t) == {A: (1, 1), C: (3, 3)}
    assert len(t.problems) == 2
    assert t.problems[0].startswith(f"{f}:3: not a guid2lid record") and "skipped" in t.problems[0]
    assert t.problems[1].startswith(f"{f}:4: LID range 0x0-0x0")
    # the problems become notes of the LID plan (a sweep prints them)
    plan = lids.assign([(A, False, 0), (C, False, 0)], persisted=t)
    assert plan.lids == {A: 1, C: 3}
    assert plan.notes[:2] == t.problems


def test_strict_refuses_with_every_problem(tmp_path):
    f = tmp_path / "g2l"
    f.write_text("garbage !!!\nmore garbage\n")
    with pytest.raises(lids.LidFileError) as e:
        lids.load_guid2lid(f, strict=True)
    assert f"{f}:1: not a guid2lid record" in str(e.value) and f"{f}:2:" in str(e.value)
    assert e.value.exit_code == 2


def test_a_lid_claimed_twice_goes_to_neither():
    # a truncated line ("0x0012" cut to "0x001") must not hand LID 1 to two ports
    t = lids.parse_guid2lid(f"0x{A:016x} 0x0001 0x0001\n0x{B:016x} 0x001 0x001\n0x{C:016x} 0x0004 0x0007\n", "f")
    assert dict(t) == {C: (4, 7)}
    assert any("LID 0x1 is claimed by ports" in p for p in t.problems), t.problems
    # neither port gets LID 1 from the file; the one that holds LID 1 keeps it, the other
    # gets a free one: no duplicate
    plan = lids.assign([(A, False, 0), (B, False, 1), (C, False, 0)], persisted=t)
    assert plan.lids[B] == 1 and plan.lids[A] not in (1, 4, 5, 6, 7)
    assert len(set(plan.lids.values())) == 3


def test_a_guid_listed_twice_with_different_lids_is_dropped():
    t = lids.parse_guid2lid(f"0x{A:016x} 0x0001 0x0001\n0x{A:016x} 0x0002 0x0002\n0x{B:016x} 0x3 0x3\n"
                            f"0x{B:016x} 0x3 0x3\n", "f")
    assert dict(t) == {B: (3, 3)}
    assert len(t.problems) == 1 and "listed twice" in t.problems[0]


def test_absent_ports_keep_their_lids_reserved():
    # A is away; B comes back holding nothing and would take the lowest free LID: A's
    persisted = {A: (1, 1), C: (2, 2)}
    plan = lids.assign([(B, False, 0), (C, False, 2)], persisted=persisted)
    assert plan.lids == {B: 3, C: 2}
    assert plan.top == 3
    # a port holding an absent port's LID gives it up as well
    plan = lids.assign([(B, False, 1), (C, False, 2)], persisted=persisted)
    assert plan.lids[B] not in (1, 2)
    # with LMC: the whole range stays reserved
    plan = lids.assign([(B, False, 0)], lmc=2, persisted={A: (4, 7)})
    assert plan.lids[B] == 8


def test_sweep_never_saves_a_duplicate_lid(tmp_path):
    """The file names an absent port at LID 1; the sweep keeps it and gives every present
    port another LID: no LID twice in the file it saves."""
    ghost = 0x00DEAD0000000001
    f = tmp_path / "guid2lid"
    f.write_text(f"0x{ghost:016x} 0x0001 0x0001\n")
    with smagent.connect("sim") as fabric:
        r = fabric.sweep(lid_file=str(f))
        assert r.problems == []
        assert 1 not in r.lid_plan.lids.values()
    saved = lids.load_guid2lid(f)
    assert saved[ghost] == (1, 1) and saved.problems == []
    owned = [lid for lo, hi in saved.values() for lid in range(lo, hi + 1)]
    assert len(owned) == len(set(owned))


def test_save_is_atomic_and_keeps_a_damaged_file(tmp_path):
    f = tmp_path / "guid2lid"
    f.write_text(f"0x{A:016x} 0x0001 0x0001\ngarbage !!!\n")
    lids.save_guid2lid(f, {A: (1, 1), B: (2, 2)})
    assert f.read_text() == f"0x{A:016x} 0x0001 0x0001\n\n0x{B:016x} 0x0002 0x0002\n\n"
    kept = [p for p in os.listdir(tmp_path) if p.startswith("guid2lid.bad-")]
    assert len(kept) == 1 and "garbage !!!" in (tmp_path / kept[0]).read_text()
    # a clean file is replaced without a copy, and no temporary file is left
    lids.save_guid2lid(f, {A: (1, 1)})
    assert sorted(os.listdir(tmp_path)) == sorted(["guid2lid", kept[0]])


def test_a_failed_save_leaves_the_old_file(tmp_path, monkeypatch):
    f = tmp_path / "guid2lid"
    f.write_text(f"0x{A:016x} 0x0001 0x0001\n")
    real_fsync = os.fsync

    def full(fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError):
        lids.save_guid2lid(f, {B: (2, 2)})
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert f.read_text() == f"0x{A:016x} 0x0001 0x0001\n"
    assert os.listdir(tmp_path) == ["guid2lid"]


def test_a_lid_claimed_by_three_ports_names_each():
    t = lids.parse_guid2lid(f"0x{A:016x} 0x1 0x1\n0x{B:016x} 0x1 0x1\n0x{C:016x} 0x1 0x1\n", "f")
    assert dict(t) == {}
    assert len(t.problems) == 2 and f"{B:#018x}" in t.problems[0] and f"{C:#018x}" in t.problems[1]


@pytest.mark.parametrize("lo, hi", [(1, 0xBFFF), (1, 3), (3, 4), (4, 6), (0x100, 0x1FF)])
def test_a_range_no_lmc_gives_is_skipped(lo, hi):
    """A garbled line claiming LIDs 1..0xBFFF must not take every LID from the file's
    other ports: a range is 2^LMC LIDs (LMC 0..7), aligned."""
    t = lids.parse_guid2lid(f"0x{A:016x} {lo:#x} {hi:#x}\n0x{B:016x} 0x8 0x8\n", "f")
    assert dict(t) == {B: (8, 8)}
    assert len(t.problems) == 1 and "not an aligned range of 2^LMC LIDs" in t.problems[0]
    assert lids.parse_guid2lid(f"0x{A:016x} 0x80 0xff\n", "f").problems == []  # LMC 7
