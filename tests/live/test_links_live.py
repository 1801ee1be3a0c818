"""Link configuration parity with OpenSM on ibsim (docs/PITFALLS.md: ibsim pre-sets what real
ports leave at reset, so this proves the fields ibsim stores; tests/unit/test_links.py proves
the rest against the simulator's reset values).

On the same fabric, twice: `smagent --transport umad sweep`, and `opensm -o`; then every
port's PortInfo (all fields ibsim reports, LIDs aside), its SL2VL tables (every input /
output pair of a switch), VLArb parts and P_Key block 0 are read by directed route and
must be equal port by port. OpenSM writes SL2VL and VLArb tables only with QoS on:
`opensm -o -Q` is compared with `smagent sweep --qos`, and plain `opensm -o` with
`smagent sweep --no-qos`. smagent's default (qos "auto") is compared with `opensm -o -Q`
too: ibsim's pre-set SL2VL tables send SLs 8-14 to VLs 8-14, which its VL0-7 links do not
run, so the default must repair every one of them, as -Q does. The SM (both) runs on host
Hca1/H0, as ibsim attaches it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from ibsim_harness import IbSim, ibsim_available, skip_reason
from links_dump import dump
from smagent.model import netfile, topogen

OPENSM = shutil.which("opensm", path="/usr/sbin:/sbin:" + os.environ.get("PATH", ""))
pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason()),
              pytest.mark.skipif(OPENSM is None, reason="opensm is not installed (Debian package opensm)")]

def configure(tmp_path, fabric, name, tool, qos):
    net = tmp_path / f"{name}.net"
    net.write_text(netfile.dumps(fabric))
    with IbSim(net, tmp_path / f"{tool}-{qos}") as sim:
        if tool == "smagent":
            cmd = [sys.executable, "-m", "smagent.cli", "--transport", "umad", "sweep"] + SMAGENT_QOS[qos]
            sim.run(cmd, timeout=600)
        else:
            d = sim.cwd / "osm"
            d.mkdir()
            env = dict(sim.env, OSM_CACHE_DIR=str(d), OSM_TMP_DIR=str(d))
            q = ["-Q"] if qos != "no-qos" else []
            r = subprocess.run([OPENSM, "-o", "-f", str(d / "osm.log")] + q, env=env,
                               cwd=sim.cwd, capture_output=True, text=True, timeout=600)
            assert r.returncode == 0, r.stderr[-2000:]
        return dump(sim)


FABRICS = {
    "two_switch": topogen.two_switch,  # parallel links, unlinked switch ports
    "fat_tree_2_4": lambda: topogen.fat_tree_2(4),
}


SMAGENT_QOS = {"qos": ["--qos"], "no-qos": ["--no-qos"], "default": []}


@pytest.mark.parametrize("qos", sorted(SMAGENT_QOS))
@pytest.mark.parametrize("name", sorted(FABRICS))
def test_ports_equal_what_opensm_leaves(tmp_path, name, qos):
    ours = configure(tmp_path, FABRICS[name](), name, "smagent", qos)
    theirs = configure(tmp_path, FABRICS[name](), name, "opensm", qos)
    assert set(ours) == set(theirs)
    diffs = {port: {k: (ours[port].get(k), v) for k, v in theirs[port].items() if ours[port].get(k) != v}
             for port in theirs}
    diffs = {p: d for p, d in diffs.items() if d}
    assert not diffs, json.dumps(diffs, indent=1)[:4000]
    # and the configuration is there: OpenSM's values, not ibsim's presets
    hca = next(v for k, v in ours.items() if k.startswith(("Hca1:", "H0:")))
    assert hca["gid_prefix"] == 0xFE80000000000000
    assert any(v["hoq_life"] == 16 for v in ours.values()) and any(v["hoq_life"] == 18 for v in ours.values())
    if qos != "no-qos":
        assert hca["sl2vl"] == [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7]
