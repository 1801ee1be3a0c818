"""Partitions parity with OpenSM on ibsim: the same partitions.conf (three partitions,
full and limited members, ALL_CAS and GUID lists, one with ipoib, the default partition
left to OpenSM's implicit rule; and one whose rule for the default P_Key names no ALL)
given to `opensm -o -P FILE` and to `smagent sweep --partitions FILE`, each on a fresh
ibsim of the same net file, leaves the same P_Key
table contents (as sets of P_Keys with their membership bits) on every CA port and switch
port 0, and the same PartitionEnforcementInbound/Outbound bits and P_Keys on every switch
port, read with `smpquery pkeys` and `smpquery portinfo`."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from ibsim_harness import IbSim, ibsim_available, skip_reason
from smagent.model import netfile, topogen
from partitions_harness import conf_text, explicit_default_text, ports

OPENSM = shutil.which("opensm", path="/usr/sbin:/sbin:" + os.environ.get("PATH", ""))
pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason()),
              pytest.mark.skipif(OPENSM is None, reason="opensm is not installed (Debian package opensm)")]

# every port to read: name, DR path, port, kind, port GUID (one JSON list)



def smpquery(sim, *args) -> str:
    return sim.run(["smpquery", "-D", *map(str, args)], timeout=60).stdout


def read(sim, port_list) -> dict:
    """name:port -> {"pkeys": sorted nonzero keys, "enforce": (inbound, outbound)}."""
    out = {}
    for name, path, port, kind, _guid in port_list:
        dr = ",".join(map(str, path))
        text = smpquery(sim, "pkeys", dr, port) if kind == "switch" else smpquery(sim, "pkeys", dr)
        keys = sorted(int(k, 16) for k in re.findall(r"0x[0-9a-f]{4}\b", text) if int(k, 16) & 0x7FFF)
        rec = {"pkeys": [f"{k:#06x}" for k in keys]}
        if kind == "switch" and port:
            pi = smpquery(sim, "portinfo", dr, port)
            rec["enforce"] = [int(re.search(rf"{f}:\.*(\d+)", pi).group(1)) for f in ("PartEnforceInb",
                                                                                   "PartEnforceOutb")]
        out[f"{name}:{port}"] = rec
    return out



@pytest.mark.parametrize("make_conf", [conf_text, explicit_default_text])
def test_same_tables_as_opensm(tmp_path, make_conf):
    net = tmp_path / "ft.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    conf = tmp_path / "partitions.conf"
    with IbSim(net, tmp_path / "osm") as sim:
        plist = ports(sim)
        conf.write_text(make_conf(plist))
        env = sim.opensm_env(tmp_path / "osm-cache")
        r = subprocess.run([OPENSM, "-o", "-P", str(conf), "-f", str(tmp_path / "osm.log")], env=env, cwd=sim.cwd,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        theirs = read(sim, plist)
    with IbSim(net, tmp_path / "smagent") as sim:
        assert ports(sim) == plist  # the same fabric, the same GUIDs
        sim.smagent("sweep", "--partitions", str(conf), timeout=600)
        ours = read(sim, plist)
    diffs = {k: (ours.get(k), v) for k, v in theirs.items() if ours.get(k) != v}
    assert not diffs, json.dumps(diffs, indent=1)[:4000]
    # and the partitions are there, full and limited, on the CA ports and on the switch
    # ports facing them (ibsim advertises PartitionEnforcementCap but keeps no
    # PartitionEnforcementInbound/Outbound bit it is sent: both read 0 after either SM;
    # the simulator's test proves the bits, tests/unit/test_partitions.py)
    if make_conf is explicit_default_text:  # every end port in the default partition
        ends = [v["pkeys"] for k, v in ours.items() if k.endswith(":0") or k.startswith("H")]
        assert ends and all("0x7fff" in keys or "0xffff" in keys for keys in ends)
    else:
        keys = [k for v in ours.values() for k in v["pkeys"]]
        assert {"0x8001", "0x0001", "0x8002", "0x0002", "0x8003", "0x0003", "0x7fff", "0xffff"} <= set(keys)
        facing = [k for k, v in ours.items() if k.startswith("L") and not k.endswith(":0") and "0x8001" in v["pkeys"]]
        assert facing
