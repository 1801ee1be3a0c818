"""What a sweep keeps between runs: LFT blocks saved before they are overwritten, the
apply journal (an interrupted apply is reported and finished by the next sweep), and
the LIDs of ports that have gone missing from the fabric (kept in the LID file)."""
import smagent
from smagent.planning import lidassign as lids
from smagent.fdb import backup
from smagent.fdb.journal import Journal


def test_backup_and_journal(tmp_path):
    state = tmp_path / "state"
    with smagent.connect("sim") as fabric:
        r = fabric.sweep(state_dir=str(state))
        assert r.problems == [] and r.lft_changes
        saved = backup.load_block_backup(r.backup_file)
        assert {(c.switch, c.block) for c in saved} == {(c.switch, c.block) for c in r.lft_changes}
        # what was saved is what the switches held before: all 0xFF on a fresh fabric
        assert all(c.new == bytes([0xFF]) * 64 for c in saved)
        assert Journal.pending(state / "apply.journal") is None  # finished cleanly
        # an apply that died half-way: the journal says so, the next sweep finishes it
        j = Journal(state / "apply.journal")
        j.begin(r.lft_changes)
        j.written(r.lft_changes[0].switch, r.lft_changes[0].block)
        j.close()
        again = fabric.sweep(state_dir=str(state))
        assert any("interrupted" in n for n in again.notes), again.notes
        assert Journal.pending(state / "apply.journal") is None or not again.lft_changes
        assert fabric.sweep(dry_run=True).sets_planned == 0


def test_missing_ports_keep_their_lids(tmp_path):
    lid_file = tmp_path / "guid2lid"
    ghost = 0x00DEAD0000000001
    lid_file.write_text(f"0x{ghost:016x} 0x0040 0x0040\n")
    with smagent.connect("sim") as fabric:
        r = fabric.sweep(lid_file=str(lid_file))
        assert r.problems == []
        assert any(f"{ghost:#018x}" in n and "reserved" in n for n in r.notes), r.notes
        assert r.summary()["missing"] == {f"{ghost:#018x}": 0x40}
        assert 0x40 not in r.lid_plan.lids.values()  # nobody took the absent port's LID
    table = lids.load_guid2lid(lid_file)
    assert table[ghost] == (0x40, 0x40)  # still there for when it comes back
    assert len(table) > 1


def test_blocks_above_top_are_not_read_to_be_saved(tmp_path):
    """A first sweep writes blocks above each switch's LinearFDBTop (old content None: not
    in use); saving them would mean reading them all, for nothing anyone used."""
    from smagent.fdb import lft as linear

    class NoTransport:  # any read would fail loudly
        def execute(self, reqs):
            raise AssertionError("nothing should be read")

    above = linear.BlockChange(0x20, "S", (0, 1), 5, None, b"\x01" * 64)
    live = linear.BlockChange(0x20, "S", (0, 1), 0, b"\xff" * 64, b"\x02" * 64)
    path = backup.save_before_apply(NoTransport(), None, [above, live], tmp_path)
    assert [(c.block, c.new) for c in backup.load_block_backup(path)] == [(0, b"\xff" * 64)]
    assert backup.save_before_apply(NoTransport(), None, [above], tmp_path) is None


def test_interrupted_apply_is_journalled_and_finished(tmp_path):
    """Ctrl-C in the middle of the LFT writes: the journal records the blocks confirmed
    so far, the next sweep says the apply was interrupted and finishes it."""
    import pytest

    from smagent import sweep as sweepmod
    from smagent.model import topogen
    from smagent.transport.sim import SimTransport
    t = SimTransport(topogen.fat_tree_3(4), retries=0)  # several LFT blocks per switch
    state = tmp_path / "state"
    from smagent.sweep import write as writemod  # where the write pass reads it
    writemod.JOURNAL_CHUNK, old_chunk = 4, writemod.JOURNAL_CHUNK
    count = {"lft_sets": 0}

    def on_send(req):
        smp = req.smp
        if smp.method == 0x02 and smp.attribute_id == 0x19:
            count["lft_sets"] += 1
            if count["lft_sets"] == 11:
                raise KeyboardInterrupt

    try:
        t.on_send = on_send
        with pytest.raises(KeyboardInterrupt):
            sweepmod.sweep(t, sweepmod.SweepOptions(state_dir=str(state)))
        t.on_send = None
        p = Journal.pending(state / "apply.journal")
        assert p is not None and len(p.written) == 8  # two chunks of 4 came back before the third died
        assert p.remaining
        r = sweepmod.sweep(t, sweepmod.SweepOptions(state_dir=str(state)))
        assert any("interrupted" in n for n in r.notes) and r.problems == []
        assert Journal.pending(state / "apply.journal") is None
        assert sweepmod.sweep(t, sweepmod.SweepOptions(dry_run=True)).sets_planned == 0
    finally:
        writemod.JOURNAL_CHUNK = old_chunk


def test_restoring_a_sweep_backup_puts_back_linear_fdb_top(tmp_path, monkeypatch):
    """`lft restore` of the automatic lft-before-* file of a `sweep --lmc 1` puts back the
    LFT blocks and LinearFDBTop the sweep overwrote, and says plainly that the LIDs and LMC
    it assigned are not undone."""
    from click.testing import CliRunner

    from smagent import api, cli, sweep as sweepmod
    from smagent.model import topogen
    from smagent.transport.sim import SimTransport
    t = SimTransport(topogen.two_switch())
    state = tmp_path / "state"
    assert sweepmod.sweep(t, sweepmod.SweepOptions(state_dir=str(state))).problems == []
    switches = t.sim.switches()
    before = {n.name: (n.si.linear_fdb_top, bytes(n.lft[:n.si.linear_fdb_top + 1])) for n in switches}
    r = sweepmod.sweep(t, sweepmod.SweepOptions(lmc=1, state_dir=str(state)))
    assert r.problems == [] and r.backup_file
    assert all(n.si.linear_fdb_top > before[n.name][0] for n in switches)
    monkeypatch.setattr(cli.Context, "session", lambda self: api.Session(t))
    out = CliRunner().invoke(cli.main, ["lft", "restore", r.backup_file, "--json"], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    after = {n.name: (n.si.linear_fdb_top, bytes(n.lft[:n.si.linear_fdb_top + 1])) for n in switches}
    assert after == before
    assert "cannot undo the LIDs, LMC" in out.output


def test_lids_are_kept_in_the_state_dir_by_default(tmp_path, monkeypatch):
    """Issue 11 item 2: with a state directory and no LID file, the LIDs go to
    STATE_DIR/guid2lid (created with the directory); without either, none is written."""
    from smagent import sweep as sweepmod
    from smagent.transport.sim import SimTransport
    monkeypatch.chdir(tmp_path)
    t = SimTransport()
    state = tmp_path / "new" / "state"
    r = sweepmod.sweep(t, sweepmod.SweepOptions(state_dir=str(state)))
    assert r.problems == []
    saved = lids.load_guid2lid(state / "guid2lid")
    assert {g: lo for g, (lo, _hi) in saved.items()} == r.lid_plan.lids
    assert sweepmod.sweep(SimTransport(), sweepmod.SweepOptions()).problems == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new"]


def test_state_files_are_where_state_dir_names_them(tmp_path):
    """The state directory's files have one spelling (paths.StateDir): the sweep keeps its
    LIDs, the apply its backups and its finished journal where StateDir says."""
    from pathlib import Path
    from smagent import sweep as sweepmod
    from smagent.model import topogen
    from smagent.config.files import StateDir
    from smagent.transport.sim import SimTransport
    t = SimTransport(topogen.two_switch())
    state = StateDir(tmp_path / "state")
    r = sweepmod.sweep(t, sweepmod.SweepOptions(state_dir=str(state.root)))
    assert r.problems == [] and r.backup_file is not None
    assert state.guid2lid.is_file() and state.guid2lid.name == sweepmod.GUID2LID == "guid2lid"
    assert Path(r.backup_file).parent == state.backups
    assert not state.journal.exists() and any(state.journals.iterdir())  # finished: moved aside


def test_a_plan_on_the_known_state_reads_nothing():
    """The table source (smagent.sweep.tables): a plan against the subnet model an apply left
    (the running SM's repairs) discovers nothing, asks no SM, reads no table and checks no
    plan; the same plan live reads the fabric. Both find nothing to change."""
    from smagent import sweep as sweepmod
    from smagent.model import topogen
    from smagent.transport.sim import SimTransport
    t = SimTransport(topogen.two_switch())
    r = sweepmod.sweep(t, sweepmod.SweepOptions())
    assert r.problems == [] and r.known is not None
    sent = t.stats.sent
    known = sweepmod.plan(t, sweepmod.SweepOptions(known=r.known))
    assert t.stats.sent == sent and known.sets_planned == 0 and "plan_check" not in known.phases
    live = sweepmod.plan(t, sweepmod.SweepOptions())
    assert t.stats.sent > sent and live.sets_planned == 0 and "plan_check" in live.phases
    assert live.phases["discover"]["smps"] > 0 and live.phases["lft_read"]["smps"] > 0
    # a block the model does not know is unknown: planned for writing
    lacking = r.known.evolve(lft_unknown=r.known.lft_unknown | {next(iter(r.known.lft_blocks))})
    assert len(sweepmod.plan(t, sweepmod.SweepOptions(known=lacking)).lft_changes) == 1
    assert r.known.lft_blocks.keys() - lacking.lft_blocks.keys() == {next(iter(r.known.lft_blocks))}


def test_lft_chunks_are_journalled_one_write_each_and_fsynced_once(tmp_path, monkeypatch):
    """Issue 28: each chunk of LFT Sets gets its "written" record (flushed: the test above
    reads them after an interrupt), but the LFT phase fsyncs once, not once per chunk: the
    fsyncs of a sweep do not grow with the chunks."""
    import json
    import os

    from smagent import sweep as sweepmod
    from smagent.model import topogen
    from smagent.sweep import write as writemod
    from smagent.transport.sim import SimTransport
    real_fsync, calls = os.fsync, []

    def counting(fd):
        calls.append(fd)
        real_fsync(fd)
    monkeypatch.setattr(os, "fsync", counting)
    fsyncs, lft_records = {}, {}
    for chunk in (4, 1024):
        monkeypatch.setattr(writemod, "JOURNAL_CHUNK", chunk)
        state = tmp_path / f"state-{chunk}"
        calls.clear()
        r = sweepmod.sweep(SimTransport(topogen.fat_tree_3(4)), sweepmod.SweepOptions(state_dir=str(state)))
        assert r.problems == [] and r.lft_written > 8
        fsyncs[chunk] = len(calls)
        (journal,) = (state / "journals").glob("apply-*.journal")
        lft_records[chunk] = sum(1 for line in journal.read_text().splitlines()
                                 if json.loads(line).get("event") == "written" and json.loads(line)["table"] == "lft")
    assert lft_records[4] > lft_records[1024] == 1
    assert fsyncs[4] == fsyncs[1024]
