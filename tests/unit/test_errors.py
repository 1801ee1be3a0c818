"""The error contract (issue 10; issue 11 items 3 and 11): typed errors carry their exit
code, a bug is an internal error (never "bad input"), a failure after the first Set says
what was sent, every file argument is checked before the first SMP, and with --json an
error is still exactly one JSON document on stdout."""
import errno
import json

import pytest
from click.testing import CliRunner

from smagent import errors, routing, sweep
from smagent.planning import lidassign as lids
from smagent.fdb import lft as linear
from smagent.fdb import mft as mfttab
from smagent.planning import update_order
from smagent.cli import main


def run(*args):
    return CliRunner().invoke(main, list(args))


def smps(tmp_path, name="rec.erf"):
    """A capture to count what a run sent (empty or absent: nothing)."""
    cap = tmp_path / name
    return cap, lambda: cap.exists() and cap.stat().st_size > 0


# -- the classes ------------------------------------------------------------------------------
def test_every_module_error_carries_the_right_code():
    from smagent.sweep import desired
    from smagent.model import fabric, netfile
    from smagent.planning import multicast
    from smagent.transport import pcap
    from smagent.discovery import targets
    from smagent import verify
    from smagent.transport import TransportError
    from smagent.transport.umad_lib import UmadError
    bad = [desired.DesiredStateError, fabric.FabricError, multicast.GroupFileError, netfile.NetFileError,
           pcap.CaptureError, targets.TargetNotFound, lids.LidFileError, lids.LidError, routing.RoutingError]
    assert all(issubclass(c, errors.BadInput) and c.exit_code == 2 for c in bad)
    failed = [TransportError, UmadError, sweep.SweepError]
    assert all(issubclass(c, errors.FabricFailure) and c.exit_code == 3 for c in failed)
    assert issubclass(sweep.OtherMasterSM, errors.SafetyRefusal) and sweep.OtherMasterSM.exit_code == 4
    assert (errors.InternalError.exit_code, errors.Interrupted.exit_code) == (70, 130)
    import smagent
    import smagent.api  # noqa: F401 - loaded on first use otherwise (the file may run alone)
    assert smagent.BadInput is errors.BadInput and smagent.api.FabricFailure is errors.FabricFailure


# -- a bug is a bug -------------------------------------------------------------------------
def test_a_plain_value_error_after_a_set_is_an_internal_error_not_bad_input(monkeypatch):
    def boom(*a, **kw):
        raise ValueError("boom")
    monkeypatch.setattr(linear, "write_lft_blocks", boom)  # after the PortInfo and SwitchInfo Sets
    r = run("sweep")
    assert r.exit_code == errors.EXIT_INTERNAL != errors.EXIT_BAD_INPUT, r.output
    assert "internal error: ValueError: boom" in r.stderr and "please report" in r.stderr
    assert "SubnSet(PortInfo)" in r.stderr, r.stderr  # what had been sent
    assert "Traceback" not in r.stderr


def test_a_bug_before_any_set_is_an_internal_error_too(monkeypatch, tmp_path):
    def boom(*a, **kw):
        raise ValueError("bug in an engine")
    monkeypatch.setattr(routing, "route", boom)
    r = run("sweep", "--json")
    assert r.exit_code == errors.EXIT_INTERNAL, r.output
    doc = json.loads(r.stdout)  # one document, even so
    assert doc["exit_code"] == 70 and doc["exception"] == "ValueError" and doc["changed"] == []
    assert "bug in an engine" in doc["error"]


def test_debug_shows_the_traceback_of_an_internal_error(monkeypatch):
    def boom(*a, **kw):
        raise KeyError("oops")
    monkeypatch.setattr(routing, "route", boom)
    assert "Traceback" in run("--debug", "sweep", "--dry-run").stderr
    monkeypatch.setenv("SMAGENT_DEBUG", "1")
    assert "Traceback" in run("sweep", "--dry-run").stderr


def test_interrupt_is_130(monkeypatch):
    def stop(*a, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr(routing, "route", stop)
    r = run("sweep")
    assert r.exit_code == 130 and "interrupted: nothing was sent" in r.stderr, r.stderr


def test_another_master_sm_is_a_safety_refusal(monkeypatch):
    def master(*a, **kw):
        raise sweep.OtherMasterSM("another subnet manager is MASTER: X; stop it, or pass --force")
    monkeypatch.setattr("smagent.discovery.smcheck.check_other_sms", master)  # the one master-SM check
    r = run("sweep", "--json")
    assert r.exit_code == errors.EXIT_SAFETY == 4
    assert json.loads(r.stdout)["type"] == "OtherMasterSM"


# -- file arguments before the first SMP (issue 11 item 3) -------------------------------------
@pytest.mark.parametrize("args, needle", [
    (["sweep", "--lid-file", "/nonexistent/dir/g2l"], "--lid-file /nonexistent/dir/g2l: directory"),
    (["sweep", "--state-dir", "{file}/sub"], "--state-dir"),
    (["discover", "-o", "/nonexistent/dir/out"], "/nonexistent/dir"),
    (["lft", "dump", "-o", "/nonexistent/dir/out"], "/nonexistent/dir"),
    (["lft", "backup", "-o", "/nonexistent/dir/out"], "/nonexistent/dir"),
    (["topology", "generate", "two-switch", "-o", "/nonexistent/dir/out"], "/nonexistent/dir"),
])
def test_paths_are_checked_before_the_first_smp(tmp_path, args, needle):
    a_file = tmp_path / "plain"
    a_file.write_text("")
    cap, sent = smps(tmp_path)
    r = run("--record", str(cap), *[x.replace("{file}", str(a_file)) for x in args])
    assert r.exit_code == 2, r.output
    assert needle in r.stderr, r.stderr
    assert not sent(), "an SMP left before the path was refused"


def test_a_lid_file_that_is_a_directory_is_refused(tmp_path):
    r = run("sweep", "--lid-file", str(tmp_path))
    assert r.exit_code == 2 and "is a directory" in r.stderr


def test_a_failure_after_sets_began_is_exit_3_with_what_was_sent(monkeypatch, tmp_path):
    def full(path, table):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))
    monkeypatch.setattr(lids, "save_guid2lid", full)  # passes the early check, fails at the end
    r = run("sweep", "--lid-file", str(tmp_path / "g2l"), "--json")
    assert r.exit_code == 3, r.output
    doc = json.loads(r.stdout)
    assert "No space left on device" in doc["error"] and str(tmp_path / "g2l") in doc["error"]
    assert any(c.startswith("SubnSet(PortInfo)") for c in doc["changed"]), doc
    assert any(c.startswith("SubnSet(LinearForwardingTable)") for c in doc["changed"]), doc
    assert "Sets already sent" in r.stderr


def test_bad_input_raised_after_sets_is_not_reported_as_nothing_sent(monkeypatch):
    def late(*a, **kw):
        raise errors.BadInput("late check")
    monkeypatch.setattr(mfttab, "write_mft_units", late)
    r = run("sweep")
    assert r.exit_code == 3 and "late check" in r.stderr and "SubnSet(PortInfo)" in r.stderr, r.stderr


# -- --json errors: one document ------------------------------------------------------------------
@pytest.mark.parametrize("args, code", [
    (["sweep", "--lid-file", "/nonexistent/dir/g2l"], 2),
    (["lft", "set", "NoSuchSwitch", "3", "1"], 2),
    (["query", "nodeinfo", "0,1,x"], 2),
    (["sweep", "--lmc", "9"], 2),
    (["sweep", "--no-such-option"], 2),  # click's usage error
    (["--mkey", "zz", "discover"], 2),  # a global option's usage error
    (["--transport", "replay", "discover"], 2),
])
def test_json_error_is_one_document(args, code):
    r = run(*args, "--json")
    assert r.exit_code == code, r.output
    doc = json.loads(r.stdout)  # exactly one document
    assert doc["exit_code"] == code and doc["error"]
    assert "Error:" in r.stderr
    assert doc["problems"] and doc["problems"][0] in doc["error"]  # click's usage errors too


def test_bad_input_lists_every_problem_in_json(tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text("lmc: 9\nrouting: bogus\n")
    r = run("plan", str(f), "--json")
    assert r.exit_code == 2
    doc = json.loads(r.stdout)
    assert len(doc["problems"]) >= 2, doc


def test_a_bad_query_is_refused_before_the_transport_opens():
    # umad here has no device (no ibsim): opening it would be a fabric failure (3); the
    # arguments are checked first, so the answer is bad input (2)
    r = run("--transport", "umad", "query", "nodeinfo", "0,1,x")
    assert r.exit_code == 2 and "0,1,x" in r.stderr, r.output
    r = run("--transport", "umad", "query", "lft", "Switch2", "--block", "3000")
    assert r.exit_code == 2, r.output


def test_an_unwritable_record_file_is_bad_input():
    r = run("--record", "/nonexistent/dir/rec.erf", "discover", "--json")
    assert r.exit_code == 2 and "/nonexistent/dir/rec.erf" in json.loads(r.stdout)["error"], r.output


def test_the_api_says_what_a_sweep_had_sent_when_it_failed(monkeypatch):
    import smagent

    def late(*a, **kw):
        raise errors.BadInput("late check")
    with smagent.connect("sim") as fabric:
        fabric.sweep()  # Sets sent by an earlier call are not this call's
        with pytest.raises(errors.BadInput) as e:
            fabric.sweep(lmc=9)
        assert not isinstance(e.value, errors.FabricFailure)
        # the MFT stage's ordering runs on every apply (this resweep changes no MFT entry)
        monkeypatch.setattr(update_order, "mft_staged", late)
        with pytest.raises(errors.FabricFailure) as e:
            fabric.sweep(lmc=1)  # new LIDs: PortInfo Sets, then the late failure
        assert "late check" in str(e.value) and any(c.startswith("SubnSet(PortInfo)") for c in e.value.changed)
