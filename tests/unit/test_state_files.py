"""State files under disk faults: a torn or garbled apply journal never blocks a sweep
(it is reported and set aside), and a full disk stops a one-shot sweep with exit 3 (as
before) but is only a warning under the running SM (`atomicfile.tolerate_full_disk`).

The full disk is real where the sandbox lets root mount a small tmpfs (`full_fs`); the
in-process injection tests (ENOSPC from os.fsync) run everywhere."""
import errno
import logging
import os
import signal
import subprocess
import sys

import pytest

import smagent
from ibsim_harness import ibsim_available, skip_reason
from sm_harness import wait_status
from smagent.config import atomicfile
from smagent.planning import lidassign as lids
from smagent.model import netfile, topogen
from smagent.errors import FabricFailure
from smagent.fdb import journal


@pytest.fixture
def tolerant():
    atomicfile.tolerate_full_disk()
    yield
    atomicfile.tolerate_full_disk(False)


@pytest.fixture
def full_fs(tmp_path):
    """A 1 MiB tmpfs at tmp_path/fs; ``fill()`` takes all its space. Unmounted after."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip()}); the injection tests cover this")

    class Fs:
        path = mnt

        @staticmethod
        def fill():
            with open(mnt / "filler", "wb") as f:
                try:
                    while True:
                        f.write(b"\0" * 65536)
                        f.flush()
                except OSError as e:
                    assert e.errno == errno.ENOSPC

    yield Fs
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_torn_journal_is_set_aside_and_the_sweep_goes_on(tmp_path, caplog):
    """A full disk used to leave `{"event":"beg`: every later sweep failed with "no 'begin'
    record: not an apply journal"."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "apply.journal").write_text('{"event":"beg')
    with caplog.at_level(logging.WARNING, logger="smagent"), smagent.connect("sim") as fabric:
        r = fabric.sweep(state_dir=str(state))
    assert r.problems == [] and r.lft_changes
    aside = list((state / "journals").glob("apply-*-unreadable.journal"))
    assert len(aside) == 1 and aside[0].read_text() == '{"event":"beg'
    assert any("no 'begin' record" in m and "set aside as" in m for m in caplog.messages), caplog.messages
    assert not (state / "apply.journal").exists()  # this sweep's own apply finished


def test_a_garbled_journal_is_set_aside_by_pending(tmp_path):
    path = tmp_path / "apply.journal"
    path.write_bytes(b"\xff\xfe garbage\n")
    assert journal.Journal.pending(path) is None
    assert not path.exists() and len(list((tmp_path / "journals").glob("*-unreadable.journal"))) == 1


def _no_space(monkeypatch):
    def fsync(_fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "fsync", fsync)


def test_one_shot_sweep_on_a_full_disk_exits_3_and_leaves_no_torn_file(tmp_path, monkeypatch):
    state = tmp_path / "state"
    with smagent.connect("sim") as fabric:
        _no_space(monkeypatch)
        with pytest.raises(FabricFailure, match="No space left on device") as e:
            fabric.sweep(state_dir=str(state))
    assert e.value.exit_code == 3
    assert not (state / "apply.journal").exists()
    assert [p for p in state.rglob("*") if p.is_file()] == []  # no temporary file left


def test_running_sm_on_a_full_disk_warns_and_routes(tmp_path, monkeypatch, caplog, tolerant):
    state = tmp_path / "state"
    with caplog.at_level(logging.WARNING, logger="smagent"), smagent.connect("sim") as fabric:
        _no_space(monkeypatch)
        r = fabric.sweep(state_dir=str(state))
        assert r.problems == [] and r.lft_changes
        monkeypatch.undo()
        assert fabric.sweep(dry_run=True).sets_planned == 0  # the tables were all written
    msgs = " | ".join(caplog.messages)
    assert "no backup written: No space left on device" in msgs
    assert "journal not written: No space left on device" in msgs
    assert "not written: No space left on device" in msgs and "LID file" in msgs
    assert [p for p in state.rglob("*") if p.is_file()] == []


def test_real_full_disk_one_shot_and_running_sm(full_fs, caplog):
    state = full_fs.path / "state"
    with smagent.connect("sim") as fabric:
        fabric.sweep(state_dir=str(state))  # the first sweep fits: guid2lid, backup, journal
        g2l = (state / "guid2lid").read_text()
        full_fs.fill()
        fabric.sweep(state_dir=str(state), lmc=1, dry_run=True)  # planning writes nothing
        with pytest.raises(FabricFailure, match="No space left on device"):
            fabric.sweep(state_dir=str(state), lmc=1)
        assert (state / "guid2lid").read_text() == g2l  # never torn
        atomicfile.tolerate_full_disk()
        try:
            with caplog.at_level(logging.WARNING, logger="smagent"):
                r = fabric.sweep(state_dir=str(state), lmc=2)
        finally:
            atomicfile.tolerate_full_disk(False)
        assert r.problems == []
        assert fabric.sweep(dry_run=True, lmc=2).sets_planned == 0
    assert any(m.startswith("LID file") and "not written" in m for m in caplog.messages), caplog.messages
    assert (state / "guid2lid").read_text() == g2l
    os.unlink(full_fs.path / "filler")  # space again: the journal left by the failed sweep is no obstacle
    with smagent.connect("sim") as fabric:
        assert fabric.sweep(state_dir=str(state)).problems == []
    assert lids.load_guid2lid(state / "guid2lid").problems == []


def test_atomic_write_leaves_special_files_in_place(tmp_path):
    atomicfile.write_text("/dev/null", "nothing\n")  # written, not replaced by a regular file
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")
    f = tmp_path / "out"
    atomicfile.write_text(f, "one\n")
    atomicfile.write_text(f, "two\n")
    assert f.read_text() == "two\n" and os.listdir(tmp_path) == ["out"]
    link = tmp_path / "link"
    link.symlink_to(f)
    atomicfile.write_text(link, "three\n")
    assert link.is_symlink() and f.read_text() == "three\n"


@pytest.mark.ibsim
@pytest.mark.skipif(not ibsim_available(), reason=skip_reason())
def test_daemon_on_a_full_disk_repairs_and_warns(ibsim, full_fs, tmp_path):
    """`smagent run` with its state directory on a real full file system: a cut link is
    repaired, the writes it could not make are warnings in the log."""
    net = tmp_path / "2sw.net"
    net.write_text(netfile.dumps(topogen.two_switch()))
    sim = ibsim(net, console=True)
    state, log = full_fs.path / "state", tmp_path / "run.log"
    proc = subprocess.Popen([sys.executable, "-m", "smagent.cli", "--transport", "umad", "run", "--state-dir",
                             str(state), "--log-file", str(log), "--sweep-interval", "1"],
                            env=sim.env, cwd=sim.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_status(proc, sim, state, log, lambda s: s["state"] == "MASTER" and s["sweeps"] >= 1, "a first sweep")
        full_fs.fill()
        sim.unlink("Switch2", 3)  # one of the two inter-switch cables: the routes over it move
        s = wait_status(proc, sim, state, log, lambda s: s["counters"]["repairs"] >= 1, "a repair")
        assert s["last_sweep"]["problems"] == 0 and s["last_sweep"]["lft_blocks"] > 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(15) == 0
    text = log.read_text()
    assert "no backup written: No space left on device" in text or "journal not written" in text, text
    assert "failed" not in text and "Traceback" not in text


def test_daemon_log_on_a_full_disk_says_so_once(tmp_path, capsys):
    from smagent.commands.logfile import LogFile
    h = LogFile(tmp_path / "run.log")
    log = logging.getLogger("smagent.test-logfile")
    log.addHandler(h)
    log.propagate = False
    try:
        log.warning("one")
        real = h.stream.flush

        def full():
            raise OSError(errno.ENOSPC, "No space left on device")
        h.stream.flush = full
        log.warning("two")
        log.warning("three")
        h.stream.flush = real
        log.warning("four")
    finally:
        log.removeHandler(h)
        h.close()
    err = capsys.readouterr().err
    assert err.count("No space left on device") == 1 and "Traceback" not in err
    assert (tmp_path / "run.log").read_text() == "one\ntwo\nthree\nfour\n"  # nothing lost once there is space
