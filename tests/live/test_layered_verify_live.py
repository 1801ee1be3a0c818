"""`verify` on another SM's VL-layered routes: OpenSM's `lash` and `torus-2QoS` on a 5x3 torus
in ibsim, their SLs read back from OpenSM's SA (`saquery -p` from every CA to every LID,
one CA a switch) into a path SL file (`smagent.planning.pathsl`). With those SLs and the SL2VL
tables the switches hold (torus-2QoS changes VL at its datelines through them), `verify`
reports no credit loop: no false alarm; on SL 0 alone it does (the loops the VLs break
are there)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from ibsim_harness import IbSim, ibsim_available, skip_reason
from smagent.model import netfile, topogen

from smagent.planning import pathsl
OPENSM = shutil.which("opensm", path="/usr/sbin:/sbin:" + os.environ.get("PATH", ""))
pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason()),
              pytest.mark.skipif(OPENSM is None, reason="opensm is not installed (Debian package opensm)")]
SAQUERY_SL = re.compile(r"^\s*sl\.+0x([0-9a-f]+)", re.M)


def fabric_lids(sim) -> tuple[dict, dict, dict]:
    """From ibnetdiscover: switch name -> (GUID, LID), CA name -> LID of port 1, and CA
    name -> the name of the switch it hangs off."""
    switches, cas, under = {}, {}, {}
    kind = name = None
    for line in sim.run(["ibnetdiscover"]).stdout.splitlines():
        m = re.match(r'^(Switch|Ca|Hca)\s+\d+\s+"[SH]-([0-9a-f]+)"\s+#\s+"([^"]+)"', line)
        if m:
            kind, name = m.group(1), m.group(3)
            if kind == "Switch":
                lid = re.search(r"\blid (\d+)", line)
                switches[name] = (int(m.group(2), 16), int(lid.group(1)) if lid else 0)
            continue
        m = re.match(r'^\[1\]\(\w+\)\s+"S-\w+"\[\d+\]\s.*#\s+lid (\d+) lmc \d+\s+"([^"]+)"', line)
        if m and kind != "Switch":
            cas[name], under[name] = int(m.group(1)), m.group(2)
    return switches, cas, under


def wait_routed(sim, osm, engine, log, seconds=120) -> tuple[dict, dict, dict]:
    deadline = time.monotonic() + seconds
    while True:
        assert osm.poll() is None, f"OpenSM exited {osm.returncode}"
        switches, cas, under = fabric_lids(sim)
        lids = sorted(cas.values())
        if lids and all(lids) and all(lid for _g, lid in switches.values()):
            probe = sim.run(["saquery", "-p", "--slid", str(lids[0]), "--dlid", str(lids[-1])], check=False)
            text = log.read_text(errors="replace") if log.exists() else ""
            if probe.returncode == 0 and SAQUERY_SL.search(probe.stdout) and "tables configured on all" in text:
                assert f"{engine} tables configured on all switches" in text, \
                    f"OpenSM did not route with {engine} (it falls back to minhop silently): {text[-1500:]}"
                return switches, cas, under
        assert time.monotonic() < deadline, "OpenSM's SA did not answer"
        time.sleep(1)


def torus_conf(switches) -> str:
    """torus-2QoS.conf for `topogen.torus_2d(5, 3)`: T0_0 the origin, +x to T1_0, +y to T0_1."""
    g = {name: guid for name, (guid, _lid) in switches.items()}
    return (f"torus 5 3 1\nxp_link {g['T0_0']:#x} {g['T1_0']:#x}\nyp_link {g['T0_0']:#x} {g['T0_1']:#x}\n"
            "portgroup_max_ports 8\n")


@pytest.mark.parametrize("engine", ["lash", "torus-2QoS"])
def test_verify_counts_opensms_layered_routes_per_vl_with_its_sls(tmp_path, engine):
    fabric = topogen.torus_2d(5, 3, 1)
    net = tmp_path / "torus.net"
    net.write_text(netfile.dumps(fabric))
    with IbSim(net, tmp_path / "run", extra_args=netfile.ibsim_size_args(fabric)) as sim:
        osm_dir = tmp_path / "osm"
        env = sim.opensm_env(osm_dir)
        (osm_dir / "opensm.conf").write_text("force_log_flush TRUE\n")  # the log read while it runs
        args = [OPENSM, "-R", engine, "-Q", "-F", str(osm_dir / "opensm.conf"), "-f", str(osm_dir / "osm.log")]
        if engine == "torus-2QoS":
            switches, _cas, _under = fabric_lids(sim)  # GUIDs: no LIDs needed
            conf = osm_dir / "torus-2QoS.conf"
            conf.write_text(torus_conf(switches))
            args += ["--torus_config", str(conf)]
        osm = subprocess.Popen(args, env=env, cwd=osm_dir, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            switches, cas, under = wait_routed(sim, osm, engine, osm_dir / "osm.log")
            dlids = sorted(set(cas.values()) | {lid for _g, lid in switches.values()})
            def sl(pair):
                out = sim.run(["saquery", "-p", "--slid", str(pair[0]), "--dlid", str(pair[1])]).stdout
                return int(SAQUERY_SL.search(out).group(1), 16)
            pairs = [(lid, dlid) for lid in cas.values() for dlid in dlids if dlid != lid]
            with ThreadPoolExecutor(4) as pool:  # 4 saquery clients at once: ibsim serves 10
                got = dict(zip(pairs, pool.map(sl, pairs)))
            sls = {}
            for ca, lid in cas.items():
                row = bytearray(max(dlids) + 1)
                for dlid in dlids:
                    row[dlid] = got.get((lid, dlid), 0)
                sls[switches[under[ca]][0]] = bytes(row)
            assert len({sl for row in sls.values() for sl in row}) > 1, f"{engine} put paths on several SLs"
            pathsl.save(tmp_path / "osm_sls", sls)
            with_sls = sim.smagent("verify", "--json", "--no-mcast", "--path-sls", str(tmp_path / "osm_sls"),
                                   check=False).json()
            on_sl0 = sim.smagent("verify", "--json", "--no-mcast", check=False).json()
        finally:
            osm.terminate()
            osm.wait(30)
    assert "cdg_cycle" not in with_sls["defects"], with_sls["defects"].get("cdg_cycle")
    assert "cdg_cycle" in on_sl0["defects"], "on SL 0 alone the torus's credit loops are there"
