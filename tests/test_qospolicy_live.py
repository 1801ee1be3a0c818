"""QoS policy parity with OpenSM on ibsim: the same policy given to `opensm -o -Q` (its
qos_* lines in the file `-F` reads, its qos-ulps section in the file `-Y` reads) and to
`smagent sweep --qos-policy FILE` (one file holding both), each on a fresh ibsim of the
same fat tree, leaves the same SL2VL tables (every input / output pair of a switch), VLArb
parts and PortInfo (VLHighLimit included) on every port, read by directed route. The SLs
of PathRecords are compared in-process (tests/test_qospolicy.py): OpenSM's SA answers
`saquery -p` only while it runs as a daemon, which `opensm -o` does not."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from ibsim_harness import IbSim, ibsim_available, skip_reason
from links_dump import dump
from smagent import netfile, topogen

OPENSM = shutil.which("opensm", path="/usr/sbin:/sbin:" + os.environ.get("PATH", ""))
pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason()),
              pytest.mark.skipif(OPENSM is None, reason="opensm is not installed (Debian package opensm)")]

TABLES = """qos_swe_sl2vl 0,1,2,3,0,1,2,3,4,5,6,7,4,5,6,7
qos_swe_vlarb_low 0:16,1:8,2:8,3:8,4:4,5:4,6:4,7:4
qos_swe_vlarb_high 0:32
qos_ca_sl2vl 0,0,1,1,2,2,3,3,4,4,5,5,6,6,7,7
qos_ca_vlarb_low 0:4,1:4,2:4,3:4,4:4,5:4,6:4,7:4
qos_ca_high_limit 3
qos_high_limit 2
"""
ULPS = """qos-ulps
    default                          : 0
    any, service-id 0x10000-0x1FFFF  : 2
    any, pkey 0x7fff                 : 1
end-qos-ulps
"""


def test_same_tables_as_opensm_with_the_same_policy(tmp_path):
    net = tmp_path / "ft.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    (tmp_path / "osm.conf").write_text(TABLES)
    (tmp_path / "ulps.conf").write_text(ULPS)
    (tmp_path / "policy.conf").write_text(TABLES + ULPS)
    with IbSim(net, tmp_path / "osm") as sim:
        env = sim.opensm_env(tmp_path / "osm-cache")
        r = subprocess.run([OPENSM, "-o", "-Q", "-F", str(tmp_path / "osm.conf"), "-Y", str(tmp_path / "ulps.conf"),
                            "-f", str(tmp_path / "osm.log")], env=env, cwd=sim.cwd, capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        theirs = dump(sim)
    with IbSim(net, tmp_path / "smagent") as sim:
        sim.run([sys.executable, "-m", "smagent.cli", "--transport", "umad", "sweep", "--qos-policy",
                 str(tmp_path / "policy.conf")], timeout=600)
        ours = dump(sim)
    assert set(ours) == set(theirs)
    diffs = {port: {k: (ours[port].get(k), v) for k, v in theirs[port].items() if ours[port].get(k) != v}
             for port in theirs}
    diffs = {p: d for p, d in diffs.items() if d}
    assert not diffs, json.dumps(diffs, indent=1)[:4000]
    # the policy's tables are there, not OpenSM's defaults
    hca = next(v for k, v in ours.items() if k.startswith(("Hca1:", "H0:")))
    assert hca["sl2vl"] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7]
    sw = next(v for k, v in ours.items() if k.startswith("L0:") and not k.endswith(":0") and "sl2vl in 0" in v)
    assert sw["sl2vl in 0"] == [0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7]
    assert [list(e) for e in sw["vlarb 1"][:2]] == [[0, 16], [1, 8]] and [list(e) for e in hca["vlarb 1"][:2]] == [
        [0, 4], [1, 4]]
    # VLHighLimit reads 0 after either SM here (compared above, equal): ibsim keeps none of the
    # values sent; tests/test_qospolicy.py proves qos_ca_high_limit on the in-process simulator
