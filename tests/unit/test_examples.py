"""The examples in examples/ are scripts a user runs: each runs here as a subprocess
against the simulator (its default), exits 0, and says what it should."""
import json
import re
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def run(script, *args, cwd=None):
    # this checkout's packages, not whichever smagent is installed (a script's own
    # directory, examples/, is what Python puts first on its path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, str(EXAMPLES / script), *map(str, args)], capture_output=True,
                          text=True, timeout=300, cwd=cwd, env=env)


def test_provision_applies_a_static_route_and_a_group():
    r = run("provision.py")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    route, group = s["static_route"], s["group"]
    assert route["port"] != route["was"] and s["lft_now"] == route["port"]
    lft = [x for x in s["planned"] if "LinearForwardingTable" in x]
    assert lft == [f"SubnSet(LinearForwardingTable) {route['switch']} block {route['lid'] // 64}: "
                   f"{route['lid']}: {route['was']} -> {route['port']}"]
    assert any("mlid 0xc001: ports {} -> " in x for x in s["planned"])
    assert {g["mlid"] for g in s["multicast"]} == {"0xc000", "0xc001"} and len(group["members"]) == 2
    assert s["left_after_apply"] == [] and s["verify_ok"] and s["problems"] == []
    assert "Sets planned for:" in r.stderr


def test_offline_dry_run_plans_the_same_from_its_recording(tmp_path):
    rec = tmp_path / "plan.erf"
    r = run("offline_dry_run.py", "--record", rec)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines and all(x.startswith("SubnSet(MulticastForwardingTable) ") and "mlid 0xc001" in x for x in lines)
    assert "0 Sets sent, the same as the live plan" in r.stderr
    assert rec.exists() and not pathlib.Path(f"{rec}.partial").exists()


def test_offline_dry_run_of_a_committed_fixture():
    r = run("offline_dry_run.py", "--fixture", ROOT / "fixtures" / "two-switch-fresh.erf")
    assert r.returncode == 0, r.stderr
    assert any(x.startswith("SubnSet(LinearForwardingTable) ") for x in r.stdout.splitlines())
    assert "Sets planned offline on 6 nodes" in r.stderr


def test_offline_dry_run_names_what_a_recording_lacks(tmp_path):
    """A recording of something else (one query): the replay miss names the request (exit 3)."""
    import smagent
    rec = tmp_path / "query.erf"
    with smagent.connect("sim") as f, f.recording(rec):
        f.query("nodeinfo", "0")
    r = run("offline_dry_run.py", "--fixture", rec)
    assert r.returncode == 3, r.stderr
    assert "error: SubnGet(" in r.stderr and f"not in the recording {rec}" in r.stderr


def test_drift_monitor_baseline_then_no_drift_then_an_injected_change(tmp_path):
    base = tmp_path / "baseline.json"
    first = run("drift_monitor.py", "--baseline", base)
    assert first.returncode == 0 and "baseline written" in first.stderr, first.stderr
    snap = json.loads(base.read_text())
    assert snap["lft"] and snap["mft"] and snap["ports"]
    same = run("drift_monitor.py", "--baseline", base, "--checks", 2, "--interval", 0)
    assert same.returncode == 0, same.stderr
    assert same.stdout == "" and same.stderr.count("0 difference(s)") == 2
    # L1 routes LID 10 out of some port other than 6 after the bring-up (which: the default engine's choice)
    drifted = run("drift_monitor.py", "--baseline", base, "--inject", "L1", 10, 6)
    assert drifted.returncode == 1, drifted.stderr
    [line] = drifted.stdout.splitlines()
    m = re.fullmatch(r"LFT L1: LID 10: port (\d+) -> 6", line)
    assert m and m.group(1) != "6", line
    bad = run("drift_monitor.py", "--baseline", base, "--inject", "NoSuchSwitch", 10, 6)
    assert bad.returncode == 2 and "NoSuchSwitch" in bad.stderr


def test_ci_gate_on_the_simulator(tmp_path):
    """ci_gate.py snapshot (--transport sim), then check offline: the shipped desired state
    passes, a file that names no such switch is bad input (exit 1 overall)."""
    snap = tmp_path / "fabric.erf"
    r = run("ci_gate.py", "snapshot", snap, "--transport", "sim")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["failed"] == 0 and snap.exists()
    bad = tmp_path / "bad.yaml"
    bad.write_text("lft:\n  - {switch: NoSuchSwitch, lid: 2, port: 1}\n")
    r = run("ci_gate.py", "check", snap, EXAMPLES / "desired.yaml", bad)
    assert r.returncode == 1, r.stderr
    first, second = map(json.loads, r.stdout.splitlines())
    assert first["verdict"] == "pass" and first["exit"] == 0 and first["sets"] > 0
    assert second["verdict"] == "bad input" and second["exit"] == 2 and "NoSuchSwitch" in second["problems"][0]
    assert "1 of 2 desired states pass" in r.stderr
    r = run("ci_gate.py", "check", tmp_path / "absent.erf", bad)
    assert r.returncode == 2 and "error:" in r.stderr
