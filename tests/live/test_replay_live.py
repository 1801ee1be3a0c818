"""Replay against live: what a replay of the committed fixtures prints equals what the
same command prints live on ibsim running the same fabric (fixtures/<name>.net), on the
fresh fabric and again after a real `smagent sweep`. Timings are the only thing removed
(tests/fixture_text.normalize).

A failure here after a change to what the agent asks or prints means the fixtures are
stale: regenerate them with `python scripts/make_fixtures.py` (see fixtures/README.md).
`test_live_recording_replays_identically` does not depend on the committed fixtures: it
records a session now and replays it.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixture_text import normalize, normalize_stderr
from ibsim_harness import IbSim, ibsim_available, skip_reason
from smagent.model import netfile

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"

pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]

# live, only the first few `lft show`s of a state (ft2-648 has 54, the torus 16): each is a
# process start, and a few show whether the recording still matches ibsim
LFT_SHOWS = 3


def start(name: str, tmp_path: Path) -> IbSim:
    net = FIXTURES / f"{name}.net"
    fabric = netfile.load(net)
    return IbSim(net, tmp_path / f"{name}-run", extra_args=netfile.ibsim_size_args(fabric))


def commands(name: str, state: str) -> list[list[str]]:
    doc = json.loads((FIXTURES / f"{name}-{state}.expected.json").read_text())
    out, shows = [], 0
    for c in doc["commands"]:
        if c["args"][:2] == ["lft", "show"]:
            shows += 1
            if shows > LFT_SHOWS:
                continue
        out.append(c["args"])
    return out


def live(sim: IbSim, args, differs) -> object:
    """ARGS run live; run again once if ``differs(result)``: on a loaded machine ibsim can
    answer late, and the retry adds SMPs the recording has not (a real difference repeats)."""
    lv = sim.smagent(*args, check=False)
    return sim.smagent(*args, check=False) if differs(lv) else lv


def compare(replay, sim: IbSim, fixture: Path, args: list[str]) -> list[str]:
    """Run ARGS live and replayed; return the differences (empty: equal)."""
    rp = replay(fixture, *args)
    lv = live(sim, args, lambda lv: bool(differences(fixture, args, lv, rp)))
    return differences(fixture, args, lv, rp)


def differences(fixture: Path, args: list[str], lv, rp) -> list[str]:
    what = f"{fixture.name}: smagent {' '.join(args)}"
    diffs = []
    if lv.returncode != rp.exit_code:
        diffs.append(f"{what}: exit {lv.returncode} live, {rp.exit_code} replayed ({rp.stderr.strip()[-300:]})")
    a, b = normalize(args, lv.stdout), normalize(args, rp.stdout)
    if a != b:
        la, lb = a.splitlines(), b.splitlines()
        first = next((i for i, (x, y) in enumerate(zip(la, lb)) if x != y), min(len(la), len(lb)))
        diffs.append(f"{what}: stdout differs from line {first + 1}: live "
                     f"{la[first:first + 1]!r} ({len(la)} lines), replayed {lb[first:first + 1]!r} ({len(lb)} lines)")
    if normalize_stderr(lv.stderr) != rp.stderr:
        diffs.append(f"{what}: stderr live {normalize_stderr(lv.stderr)!r}, replayed {rp.stderr!r}")
    return diffs


def routing_of(name: str) -> list[str]:
    """The ``--routing`` the fixture's sweeps were recorded with (scripts/make_fixtures.py
    chooses it; the recording is the one place it is written down)."""
    doc = json.loads((FIXTURES / f"{name}-fresh.expected.json").read_text())
    args = next(c["args"] for c in doc["commands"] if c["args"][0] == "sweep")
    return args[args.index("--routing"):args.index("--routing") + 2] if "--routing" in args else []


def plan_of(stdout: str) -> tuple[list[str], dict]:
    s = json.loads(stdout)
    counts = {k: s[k] for k in ("nodes", "switches", "cas", "links", "lids", "lmc", "linear_fdb_top", "sets",
                                "smps_sent", "retries", "timeouts", "unreachable", "problems")}
    counts["phase_smps"] = {k: v["smps"] for k, v in s["phases"].items()}
    return s["plan"], counts


@pytest.mark.parametrize("name", ["two-switch", "torus-4x4", "ft2-648"])
def test_replay_equals_live(replay, name, tmp_path):
    rt = routing_of(name)
    with start(name, tmp_path) as sim:
        # the dry-run plan, compared field by field first (clearest failure), then every command
        fresh = FIXTURES / f"{name}-fresh.erf"
        rp = replay(fresh, "sweep", *rt, "--dry-run", "--json")
        lv = live(sim, ["sweep", *rt, "--dry-run", "--json"], lambda lv: plan_of(lv.stdout) != plan_of(rp.stdout))
        assert lv.returncode == 0 and rp.exit_code == 0, (lv.stderr, rp.output)
        (lplan, lcounts), (rplan, rcounts) = plan_of(lv.stdout), plan_of(rp.stdout)
        assert rplan == lplan
        assert rcounts == lcounts
        assert lplan, "a fresh fabric has a plan"
        diffs = []
        for args in commands(name, "fresh"):
            diffs += compare(replay, sim, fresh, args)
        # a real sweep, then the swept state
        r = sim.smagent("sweep", *rt, check=False)
        assert r.returncode == 0, r.stderr
        swept = FIXTURES / f"{name}-swept.erf"
        rp = replay(swept, "sweep", *rt, "--dry-run", "--json")
        lv = live(sim, ["sweep", *rt, "--dry-run", "--json"], lambda lv: plan_of(lv.stdout) != plan_of(rp.stdout))
        assert plan_of(rp.stdout) == plan_of(lv.stdout)
        assert plan_of(lv.stdout)[0] == [], "nothing left to do after a sweep"
        for args in commands(name, "swept"):
            diffs += compare(replay, sim, swept, args)
        assert not diffs, "replay differs from live (stale fixtures? python scripts/make_fixtures.py):\n" + \
            "\n".join(diffs)


@pytest.mark.parametrize("name", ["two-switch", "torus-4x4"])
def test_live_recording_replays_identically(replay, name, tmp_path):
    """Independent of the committed fixtures: record now, replay the recording."""
    rt = routing_of(name)
    with start(name, tmp_path) as sim:
        cases = [["sweep", *rt, "--dry-run", "--json"], ["discover"], ["query", "nodeinfo", "0,1"],
                 ["lft", "show", "0,1"],
                 ["query", "rft", "0,1"]]
        for i, args in enumerate(cases):
            cap = tmp_path / f"s{i}.erf"
            lv = sim.smagent(*args, record=cap, check=False)
            rp = replay(cap, *args)
            assert rp.exit_code == lv.returncode, (args, rp.output)
            assert normalize(args, rp.stdout) == normalize(args, lv.stdout), args
            assert rp.stderr == normalize_stderr(lv.stderr), args
        # a whole real sweep recorded (Sets and all) cannot be replayed as a sweep...
        cap = tmp_path / "sweep.erf"
        assert sim.smagent("sweep", *rt, record=cap, check=False).returncode == 0
        rp = replay(cap, "sweep", *rt)
        assert rp.exit_code == 2 and "cannot take writes" in rp.stderr and rp.stdout == ""  # before any Get
        # ... but its Gets replay: the dry run of that recording is the plan it carried out
        before = json.loads(replay(tmp_path / "s0.erf", "sweep", *rt, "--dry-run", "--json").stdout)
        again = json.loads(replay(cap, "sweep", *rt, "--dry-run", "--json").stdout)
        assert again["plan"] == before["plan"]
