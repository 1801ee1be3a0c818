"""Backup/restore of LFTs (`smagent lft backup` / `lft restore`, smagent.fdb.backup) and the
apply journal. Journal and block-file tests are pure; the round trips run on ibsim."""
import json
import os
import re
import sys
from pathlib import Path

import pytest

from ibsim_harness import ibsim_available, skip_reason
from smagent.model import netfile, topogen
from smagent.fdb import backup, journal, lft as linear

live = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]


def _change(sw, block, old=b"\x01" * 64, new=b"\x02" * 64):
    return linear.BlockChange(sw, f"S{sw}", (0, 1), block, old, new)


# -- the journal ---------------------------------------------------------------------------
def test_journal_complete_apply_is_not_pending(tmp_path):
    j = journal.Journal(tmp_path / "apply.journal")
    plan = [_change(0x20, 0), _change(0x20, 1), _change(0x21, 0, old=None)]
    j.begin(plan)
    for c in plan:
        j.written(c.switch, c.block)
    j.done()
    assert journal.Journal.pending(j.path) is None


def test_journal_interrupted_apply_is_pending(tmp_path):
    j = journal.Journal(tmp_path / "apply.journal")
    plan = [_change(0x20, 0), _change(0x20, 1), _change(0x21, 0, old=None)]
    j.begin(plan)
    j.written(0x20, 0)
    j.close()  # the process dies here
    p = journal.Journal.pending(j.path)
    assert p is not None and len(p.plan) == 3
    assert p.written == {(0x20, 0)}
    assert [(b["switch"], b["block"]) for b in p.remaining] == [(0x20, 1), (0x21, 0)]
    assert p.plan[2]["old"] is None and p.plan[0]["new"] == "02" * 64


def test_journal_torn_tail_and_restart(tmp_path):
    path = tmp_path / "apply.journal"
    j = journal.Journal(path)
    j.begin([_change(0x20, 0)])
    j.close()
    with open(path, "a") as f:
        f.write('{"event":"writ')  # crash mid-record
    p = journal.Journal.pending(path)
    assert p is not None and p.written == set()
    j.begin([_change(0x30, 2)])  # a new apply starts afresh
    j.written(0x30, 2)
    j.done()
    assert journal.Journal.pending(path) is None


def test_journal_missing_and_garbage(tmp_path):
    assert journal.Journal.pending(tmp_path / "nope") is None
    bad = tmp_path / "bad"
    bad.write_text("hello\nworld\n")
    with pytest.raises(journal.JournalError):
        journal.Journal.pending(bad, set_aside=False)
    with pytest.raises(RuntimeError):
        journal.Journal(tmp_path / "j").written(1, 0)


def test_block_backup_file_round_trip(tmp_path):
    class T:  # no block needs reading: every change has its old content
        pass
    changes = [_change(0x20, 0, old=bytes(range(64))), _change(0x21, 3, old=b"\xff" * 64)]
    path = backup.save_before_apply(T(), None, changes, tmp_path / "b")
    doc = json.loads(path.read_text())
    assert doc["format"] == backup.BACKUP_FORMAT
    saved = backup.load_block_backup(path)
    assert [(c.switch, c.block, c.new) for c in saved] == [(0x20, 0, bytes(range(64))), (0x21, 3, b"\xff" * 64)]
    assert backup.save_before_apply(T(), None, [], tmp_path / "b") is None
    (tmp_path / "x.json").write_text('{"format": "other"}')
    with pytest.raises(backup.BackupError):
        backup.load_block_backup(tmp_path / "x.json")


# -- on ibsim ------------------------------------------------------------------------------
@pytest.mark.parametrize("_", [0], ids=["two_switch"])
@pytest.mark.ibsim
@pytest.mark.skipif(not ibsim_available(), reason=skip_reason())
def test_backup_restore_round_trip(ibsim, tmp_path, _):
    fabric = topogen.two_switch()
    net = tmp_path / "2sw.net"
    net.write_text(netfile.dumps(fabric))
    sim = ibsim(net)
    sim.smagent("sweep")
    out = tmp_path / "tables.dump"
    sim.smagent("lft", "backup", "-o", str(out))
    text = out.read_text()
    assert len(re.findall(r"^Unicast lids", text, re.M)) == 2
    before = sim.smagent("lft", "dump").stdout
    # damage: point two LIDs elsewhere on one switch
    sw_lid = re.search(r"DR path slid 0; dlid 0; (\S+) guid", text).group(1)
    for lid, port in (("1", "4"), ("2", "255")):  # damage on purpose: written with --allow-defects, exit 1
        assert sim.smagent("lft", "set", sw_lid, lid, port, "--allow-defects", check=False).returncode == 1
    assert sim.smagent("lft", "dump").stdout != before
    dry = json.loads(sim.smagent("lft", "restore", str(out), "--dry-run", "--json").stdout)
    assert dry["dry_run"] and dry["planned"]["lft_blocks"] == 1 and dry["sets"]["lft_blocks"] == 0
    assert sim.smagent("lft", "dump").stdout != before  # a dry run sent no Set
    res = json.loads(sim.smagent("lft", "restore", str(out), "--json").stdout)
    assert res["sets"]["lft_blocks"] == 1 and res["problems"] == []
    assert sim.smagent("lft", "dump").stdout == before
    again = json.loads(sim.smagent("lft", "restore", str(out), "--json").stdout)
    assert again["planned"] == {"switchinfo": 0, "lft_blocks": 0}


@pytest.mark.ibsim
@pytest.mark.skipif(not ibsim_available(), reason=skip_reason())
def test_save_before_apply_then_restore_blocks(ibsim, tmp_path):
    """save_before_apply keeps exactly the blocks a sweep is about to overwrite; writing
    that file back (lft restore FILE.json) returns the switches to their previous tables."""
    fabric = topogen.two_switch()
    net = tmp_path / "2sw.net"
    net.write_text(netfile.dumps(fabric))
    sim = ibsim(net)
    sim.smagent("sweep")
    before = sim.smagent("lft", "dump").stdout
    # plan a change in-process through umad2sim: route every LID of block 0 to port 255
    code = f"""
from smagent import discovery
from smagent.fdb import backup, journal, lft as linear
from smagent.transport import open_transport
t = open_transport("umad")
topo = discovery.discover(t)
sws = [n for n in topo.switches()]
cur, err = linear.read_lft_blocks(t, [(n.guid, n.path, 0) for n in sws])
assert not err, err
changes = [linear.BlockChange(n.guid, n.description, n.path, 0, cur[(n.guid, 0)], cur[(n.guid, 0)][:2] + b"\\xff" * 62)
           for n in sws]
path = backup.save_before_apply(t, topo, changes, {str(tmp_path / 'saved')!r})
j = journal.Journal({str(tmp_path / 'apply.journal')!r})
j.begin(changes)
written, problems = linear.write_lft_blocks(t, changes[:1])
for c in written:
    j.written(c.switch, c.block)
print(path)
"""
    r = sim.run([sys.executable, "-c", code], check=False)
    assert r.returncode == 0, r.stderr
    saved = Path(r.stdout.strip().splitlines()[-1])
    p = journal.Journal.pending(tmp_path / "apply.journal")
    assert p is not None and len(p.written) == 1 and len(p.remaining) == len(p.plan) - 1
    assert sim.smagent("lft", "dump").stdout != before
    res = json.loads(sim.smagent("lft", "restore", str(saved), "--json").stdout)
    assert res["sets"]["lft_blocks"] == 1 and res["problems"] == []
    assert sim.smagent("lft", "dump").stdout == before


# -- a finished journal is cheap to check; retention of journals and backups ----------------
def _finish(path, plan, keep=None, backup_file=None):
    j = journal.Journal(path, keep=keep)
    j.begin(plan, backup=backup_file)
    j.written_many(plan)
    j.done()
    return j


def test_finished_journal_is_moved_away_and_kept(tmp_path):
    path = tmp_path / "apply.journal"
    _finish(path, [_change(0x20, 0)])
    assert not path.exists() and journal.Journal.pending(path) is None
    (kept,) = (tmp_path / journal.JOURNALS_DIR).glob("apply-*.journal")
    assert journal.Journal.pending(kept) is None  # still a readable, finished journal
    assert kept.read_text().splitlines()[-1].startswith('{"event":"done"')


def test_finished_journal_is_told_without_reading_it(tmp_path, monkeypatch):
    """A finished journal left in place (a crash before the move, an older smagent) is
    recognised from its ends: the full read is never reached."""
    path = tmp_path / "apply.journal"
    j = journal.Journal(path)
    j.begin([_change(0x20, b) for b in range(50)])
    j.written(0x20, 0)
    j._record({"event": "done", "time": "t"})  # done without the move
    j.close()
    monkeypatch.setattr(journal, "_read_records", lambda *a: pytest.fail("read whole"))
    monkeypatch.setattr(Path, "read_text", lambda *a, **k: pytest.fail("read whole"))
    assert journal.Journal.pending(path) is None


def test_unfinished_journal_shapes_still_read_whole(tmp_path):
    """What the quick check must not take for finished: a torn done record, a done
    record without its newline but followed by nothing parseable, no begin record."""
    path = tmp_path / "apply.journal"
    j = journal.Journal(path)
    j.begin([_change(0x20, 0), _change(0x20, 1)])
    j.written(0x20, 0)
    j.close()
    body = path.read_text()
    path.write_text(body + '{"event":"do')  # torn mid-done: still pending
    p = journal.Journal.pending(path)
    assert p is not None and p.written == {(0x20, 0)}
    path.write_text(body + '{"event":"done"}')  # no newline: left to the full read, which takes a whole record
    assert journal.Journal.pending(path) is None
    no_begin = tmp_path / "other"
    no_begin.write_text('{"event":"written","switch":"0x20","block":0}\n{"event":"done"}\n')
    with pytest.raises(journal.JournalError):
        journal.Journal.pending(no_begin, set_aside=False)


def test_pending_journal_survives_rotation(tmp_path):
    """Finished journals rotate and are pruned; an interrupted one stays where the next
    sweep looks, and a new apply moves it aside (``-interrupted``) instead of erasing it."""
    path = tmp_path / "apply.journal"
    archive = tmp_path / journal.JOURNALS_DIR
    for b in range(5):
        _finish(path, [_change(0x20, b)], keep=3)
    assert len(list(archive.glob("apply-*.journal"))) == 3
    j = journal.Journal(path, keep=3)
    j.begin([_change(0x21, 0), _change(0x21, 1)], backup="B")
    j.written(0x21, 0)
    j.close()  # interrupted
    p = journal.Journal.pending(path)
    assert p is not None and p.written == {(0x21, 0)} and p.backup == "B"
    _finish(path, [_change(0x22, 0)], keep=3)  # the next apply
    assert journal.Journal.pending(path) is None
    names = sorted(f.name for f in archive.glob("apply-*.journal"))
    assert len(names) == 3 and sum(n.endswith("-interrupted.journal") for n in names) == 1
    (old,) = archive.glob("apply-*-interrupted.journal")
    assert journal.Journal.pending(old).written == {(0x21, 0)}


def _backups(d, n):
    d.mkdir(parents=True, exist_ok=True)
    files = []
    for i in range(n):
        f = d / f"lft-before-2026010{i % 10}-{i:04d}.json"
        f.write_text("{}")
        os.utime(f, ns=(10**18 + i * 10**9, 10**18 + i * 10**9))  # i-th oldest
        files.append(f)
    return files


def test_backup_retention_keeps_newest_and_protected(tmp_path):
    d = tmp_path / "backups"
    files = _backups(d, 8)
    (d / "notes.txt").write_text("mine")  # not a backup: never touched
    gone = backup.prune(d, keep=3, protect=[files[1]])
    assert sorted(gone) == sorted(files[0:1] + files[2:5])
    assert sorted(d.iterdir()) == sorted([files[1], *files[5:], d / "notes.txt"])
    assert backup.prune(d, keep=3, protect=[files[1]]) == []


def test_state_keep_setting(monkeypatch, tmp_path):
    from smagent.config import files as paths
    from smagent.errors import BadInput
    monkeypatch.delenv(paths.STATE_KEEP_ENV, raising=False)
    assert paths.state_keep() == paths.STATE_KEEP_DEFAULT == 20
    monkeypatch.setenv(paths.STATE_KEEP_ENV, "5")
    assert paths.state_keep() == 5
    for bad in ("0", "-1", "many", "2.5"):
        monkeypatch.setenv(paths.STATE_KEEP_ENV, bad)
        with pytest.raises(BadInput, match=paths.STATE_KEEP_ENV):
            paths.state_keep()
        with pytest.raises(BadInput, match=paths.STATE_KEEP_ENV):
            paths.check_state_dir(tmp_path)  # refused before the first SMP


def test_apply_keeps_last_n_and_an_interrupted_applys_backup(tmp_path, monkeypatch):
    """Many applies through the one apply path: the newest N backups and journals stay,
    and the backup of an interrupted apply outlives N later ones while it is pending."""
    from smagent.fdb import apply as applymod

    class T:  # every change carries its old content: nothing is read
        pass
    monkeypatch.setattr(linear, "write_lft_blocks", lambda t, cs, **_: (list(cs), []))
    state, keep = tmp_path / "state", 3

    def run(block, finish=True):
        a = applymod.Apply(T(), applymod.Plan(lft=[_change(0x20, block, old=bytes([block]) * 64)]),
                           state_dir=state, keep=keep)
        a.start()
        a.lft()
        if finish:
            a.finish()
        else:
            a.journal.close()  # killed before done
        return Path(a.backup_file)

    first = [run(b) for b in range(4)]
    stuck = run(10, finish=False)
    later = [run(b) for b in range(20, 20 + 2 * keep)]
    # `later` did finish: the last journal is done, so `stuck` is an ordinary old backup now
    kept = sorted((state / "backups").glob("lft-before-*.json"))
    assert sorted(later[-keep:]) == kept and not any(f.exists() for f in first)
    names = [f.name for f in (state / journal.JOURNALS_DIR).glob("*.journal")]
    assert len(names) == keep and not stuck.exists()
    # while an apply is pending, its backup is spared, however many newer backups there are
    stuck = run(30, finish=False)
    newer = sorted(stuck.parent.glob("lft-before-*.json"))
    for n in range(2 * keep):  # newer than every backup so far
        f = stuck.parent / f"lft-before-99999999-{n}.json"
        f.write_text("{}")
        os.utime(f, ns=(stuck.stat().st_mtime_ns + (n + 1) * 10**9,) * 2)
    nxt = applymod.Apply(T(), applymod.Plan(lft=[_change(0x20, 50, old=b"\x05" * 64)]), state_dir=state, keep=keep)
    nxt.start()  # the apply after the interrupted one: prunes, then journals afresh
    assert stuck.exists() and Path(nxt.backup_file).exists()
    assert not any(f.exists() for f in newer if f != stuck)
    assert len(list((state / "backups").glob("lft-before-*.json"))) == keep + 2  # newest N, this apply's, the stuck one
    assert backup.load_block_backup(stuck)[0].new == bytes([30]) * 64  # whole and loadable
    (moved,) = (state / journal.JOURNALS_DIR).glob("*-interrupted.journal")
    assert journal.Journal.pending(moved).backup == str(stuck)


def test_truncated_backup_is_refused_whole(tmp_path):
    class T:
        pass
    path = backup.save_before_apply(T(), None, [_change(0x20, b, old=bytes([b]) * 64) for b in range(4)], tmp_path)
    text = path.read_text()
    for cut in (len(text) // 2, len(text) - 3):
        path.write_text(text[:cut])
        with pytest.raises(backup.BackupError, match="not a block backup"):
            backup.load_backup(path)
