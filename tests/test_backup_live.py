"""Backup/restore of LFTs (`smagent lft backup` / `lft restore`, smagent.fdb.backup) and the
apply journal. Journal and block-file tests are pure; the round trips run on ibsim."""
import json
import os
import re
import sys
from pathlib import Path

import pytest

from ibsim_harness import ibsim_available, skip_reason
from smagent import netfile, topogen
from smagent.fdb import backup, journal, linear

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
        journal.Journal.pending(bad)
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
    sim.smagent("lft", "set", sw_lid, "1", "4")
    sim.smagent("lft", "set", sw_lid, "2", "255")
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
from smagent.fdb import backup, journal, linear
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
