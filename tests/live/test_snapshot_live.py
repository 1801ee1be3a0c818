"""`smagent snapshot` on ibsim: one snapshot answers, offline, the plans of desired states
that change routes, static LFT entries, groups, link caps, QoS tables and partitions with
the verdict and the plan lines a live `smagent plan` gives (examples/ci_gate.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ibsim_harness import ibsim_available, skip_reason

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]


def gate(sim, *args):
    env = dict(sim.env, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), sim.env.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, str(ROOT / "examples" / "ci_gate.py"), *map(str, args)],
                          capture_output=True, text=True, env=env, cwd=sim.cwd, timeout=300)


def proposals(tmp_path: Path, lid: int) -> dict[str, Path]:
    docs = {
        "routes": {"routing": "updn"},
        "static": {"lft": [{"switch": "Switch1", "lid": lid, "port": 5}]},
        "black_hole": {"lft": [{"switch": "Switch1", "lid": lid, "port": 4}]},  # port 4 is not cabled
        "groups": {"multicast": [{"mlid": 0xC001, "members": ["Hca1", "Hca2"]}]},
        "caps": {"links": {"max_mtu": 2048, "max_vls": 2}},
        "qos": {"links": {"qos": True, "sl2vl": "0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1", "vlarb_low": "0:8,1:8"}},
        "partitions": {"partitions": [{"name": "storage", "pkey": 0x8001, "members": ["ALL_CAS"]}]},
    }
    out = {}
    for name, doc in docs.items():
        out[name] = tmp_path / f"{name}.yaml"
        out[name].write_text(yaml.safe_dump(doc))
    return out


def test_ci_gate_offline_verdicts_equal_live_plans(ibsim, tmp_path):
    sim = ibsim(ROOT / "fixtures" / "two-switch.net")
    sim.smagent("sweep")
    lid = json.loads(sim.smagent("query", "portinfo", "Hca2", "--json").stdout)["value"]["lid"]
    snap = tmp_path / "fabric.erf"
    r = gate(sim, "snapshot", snap)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["failed"] == 0
    files = proposals(tmp_path, lid)
    r = gate(sim, "check", snap, *files.values())
    assert r.returncode == 1, r.stderr  # the black hole does not pass
    offline = {Path(v["desired"]).stem: v for v in map(json.loads, r.stdout.splitlines())}
    verdicts = {}
    for name, path in files.items():
        live = sim.smagent("plan", path, "--json", check=False)
        off = offline[name]
        verdicts[name] = off["verdict"]
        assert off["exit"] == live.returncode, (name, off, live.stderr)
        if live.returncode in (0, 1):
            assert off["plan"] == json.loads(live.stdout)["plan"], name
            assert off["sets"] > 0 or name == "routes", name
    assert verdicts["black_hole"] == "refused" and verdicts["static"] == "pass", verdicts
    assert all(v == "pass" for k, v in verdicts.items() if k != "black_hole"), verdicts
