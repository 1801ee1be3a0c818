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


def table(sim, path, port, kind) -> list[int]:
    """Every index of a port's P_Key table, as `smpquery pkeys` reads it (all blocks)."""
    dr = ",".join(map(str, path))
    text = smpquery(sim, "pkeys", dr, port) if kind == "switch" else smpquery(sim, "pkeys", dr)
    out: list[int] = []
    for m in re.finditer(r"^\s*(\d+):((?:\s+0x[0-9a-f]{4})+)", text, re.M):
        assert int(m.group(1)) == len(out)
        out += [int(k, 16) for k in m.group(2).split()]
    return out


def shrinking_texts(port_list) -> list[str]:
    """Two hosts sharing 40 partitions (two blocks), a host named twice (full, then
    limited by ALL_CAS: the last mention wins), keys whose bytes order differs from their
    value (0x0100 before 0x0001 in OpenSM); then the same file with one partition left."""
    g = [f"0x{x:016x}" for _n, _p, _port, kind, x in port_list if kind == "ca"]
    many = "".join(f"p{i}=0x{0x100 + i:x} : {g[0]}=full, {g[2]}=full ;\n" for i in range(40))
    rest = (f"storage=0x0c0c : {g[1]}=full, ALL_CAS=limited ;\n"
            f"lo=0x0001 : {g[3]}=full ;\nhi=0x0200 : {g[3]}=full ;\n")
    return [many + rest, f"p5=0x105 : {g[0]}=full, {g[2]}=full ;\n" + rest]


def test_every_index_as_opensm_after_a_shrinking_file(tmp_path):
    """`opensm -o -P` twice (40 shared partitions, then one) against `smagent sweep
    --partitions` twice, each on a fresh ibsim: every index of every CA port and switch
    port 0 equal, and the switch ports facing hosts hold the host's keys with no stale
    key in any block (OpenSM leaves block 1 there; smagent clears it)."""
    net = tmp_path / "ft.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    files = []
    with IbSim(net, tmp_path / "osm") as sim:
        plist = ports(sim)
        for i, text in enumerate(shrinking_texts(plist)):
            files.append(tmp_path / f"p{i}.conf")
            files[-1].write_text(text)
            env = sim.opensm_env(tmp_path / f"osm-cache{i}")
            r = subprocess.run([OPENSM, "-o", "-P", str(files[-1]), "-f", str(tmp_path / f"osm{i}.log")], env=env,
                               cwd=sim.cwd, capture_output=True, text=True, timeout=600)
            assert r.returncode == 0, r.stderr[-2000:]
        theirs = {f"{n}:{p}": table(sim, path, p, kind) for n, path, p, kind, _g in plist}
    with IbSim(net, tmp_path / "smagent") as sim:
        assert ports(sim) == plist
        for f in files:
            sim.smagent("sweep", "--partitions", str(f), timeout=600)
        ours = {f"{n}:{p}": table(sim, path, p, kind) for n, path, p, kind, _g in plist}
    ends = [f"{n}:{p}" for n, _path, p, kind, _g in plist if kind == "ca" or p == 0]
    diffs = {k: ([(i, hex(a), hex(b)) for i, (a, b) in enumerate(zip(ours[k], theirs[k])) if a != b])
             for k in ends if ours[k] != theirs[k]}
    assert not diffs, json.dumps(diffs, indent=1)[:4000]
    hosts = [f"{n}:{p}" for n, _path, p, kind, _g in plist if kind == "ca"]
    for k in hosts:  # no stale key of the 40
        assert not [x for x in ours[k] if 0x100 <= x & 0x7FFF < 0x128 and x != 0x8105]
    assert len([k for k in hosts if ours[k][6] == 0x8105]) == 2  # 0x105 kept its index 6, as OpenSM
    names = {f"{n}:{p}": (n, path, kind) for n, path, p, kind, _g in plist}
    facing = [k for k in ours if names[k][2] == "switch" and not k.endswith(":0") and 0x8105 in ours[k]]
    assert len(facing) == 2
    for k in facing:  # the host's keys, gaps closed, nothing after them in any block
        keys = [x for x in ours[k] if x]
        assert ours[k][:len(keys)] == keys and len(keys) == 3 and len(ours[k]) > 32
    assert any(len([x for x in theirs[k] if x]) > 2 for k in facing)  # OpenSM left the stale block 1
