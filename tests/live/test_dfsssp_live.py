"""dfsssp on ibsim, checked from the switches' own tables: `ibroute` dumps, `smpquery
sl2vl` tables and the SL of each path (the file the sweep left, `smagent.planning.pathsl`), with a
per-VL channel dependency check written here, independent of `smagent.verify`. The same
check finds minhop's credit loop (written with --allow-defects), so it can fail. And
`verify` on OpenSM's dfsssp tables, with the SLs its SA gives, reports no credit loop its
VLs break."""
import os
import re
import shutil
import subprocess
import time

import pytest

from cycle_witness import graph_cycle
from ibsim_harness import IbSim, IbSimError, ibsim_available, skip_reason
from smagent.model import netfile, topogen

from smagent.planning import pathsl
pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]

LFT_LINE = re.compile(r"^0x([0-9a-f]+) (\d+) :", re.M)
SL2VL_LINE = re.compile(r"^ports: in\s+(\d+), out\s+(\d+):((?:\s*\|\s*\d+)+)\|", re.M)


def read_fabric(sim):
    """Switches {GUID: (LID, {DLID: port})}, links {(GUID, port): (GUID, port)}, CA ports
    {(GUID, port): LID}, from ibnetdiscover and ibroute."""
    disc = netfile.loads(sim.run(["ibnetdiscover"]).stdout, "ibnetdiscover")
    links, cas, switches = {}, {}, {}
    for n in disc:
        for p, peer in disc.connected_ports(n):
            links[(n.guid, p)] = (disc.node(peer.node).guid, peer.num)
            if not n.is_switch:
                cas[(n.guid, p)] = n.lid(p)
    for n in disc.switches():
        lid = n.lid(0)
        dump = sim.run(["ibroute", str(lid)]).stdout
        switches[n.guid] = (lid, {int(d, 16): int(p) for d, p in LFT_LINE.findall(dump)})
    return switches, links, cas


def read_sl2vl(sim, switches, links):
    """{(switch GUID, in port, out port): 16 VLs} for every out port towards a switch."""
    tables = {}
    for g, (lid, _lft) in switches.items():
        for (g1, p), (g2, _q) in links.items():
            if g1 == g and g2 in switches:
                out = sim.run(["smpquery", "sl2vl", str(lid), str(p)]).stdout
                for i, o, row in SL2VL_LINE.findall(out):
                    tables[(g, int(i), int(o))] = [int(v) for v in row.replace("|", " ").split()]
    return tables


def vl_cycle(switches, links, cas, sl2vl, sls):
    """A cycle of (switch, out port, VL) channels over every CA port's paths to every
    LID, each path on its SL (``sls``: {switch GUID: SL by DLID}, None: SL 0)."""
    dlids = sorted(set(cas.values()) | {lid for lid, _ in switches.values()})
    deps: dict = {}
    for (ca, cp), _src_lid in cas.items():
        entry_sw, entry_port = links[(ca, cp)]
        for dlid in dlids:
            sl = sls[entry_sw][dlid] if sls else 0
            g, inp, prev = entry_sw, entry_port, None
            for _ in range(len(switches) + 1):
                out = switches[g][1].get(dlid, 255)
                assert out != 255, f"switch 0x{g:x} has no route to LID {dlid}"
                if out == 0:
                    break
                peer = links[(g, out)]
                if peer[0] not in switches:
                    assert cas[peer] == dlid
                    break
                node = (g, out, sl2vl[(g, inp, out)][sl])
                if prev is not None:
                    deps.setdefault(prev, set()).add(node)
                prev, (g, inp) = node, peer
            else:
                raise AssertionError(f"routing loop to LID {dlid}")
    return graph_cycle(deps)


@pytest.mark.parametrize("name, make", [("torus", lambda: topogen.torus_2d(5, 3, 2)),
                                        ("mesh", lambda: topogen.mesh_2d(4, 3, 2))])
def test_dfsssp_on_ibsim_has_no_credit_loop_on_any_vl(tmp_path, name, make):
    """(on the mesh dfsssp's interleaved order happens to need one layer: its SL-0 graph is
    acyclic; the torus needs more)"""
    fabric = make()
    net = tmp_path / f"{name}.net"
    net.write_text(netfile.dumps(fabric))
    state = tmp_path / "state"
    with IbSim(net, tmp_path / "run", extra_args=netfile.ibsim_size_args(fabric)) as sim:
        sweep = sim.smagent("sweep", "--routing", "dfsssp", "--state-dir", str(state))
        assert "dfsssp:" in sweep.stdout
        sls = pathsl.load(state / "path_sls")
        switches, links, cas = read_fabric(sim)
        sl2vl = read_sl2vl(sim, switches, links)
        assert set(sls) == set(switches)
        used = {sls[g][d] for g in sls for d in set(cas.values())}
        assert len(used) > 1 and max(used) < 8  # layers spread, within the 8 VLs ibsim's ports run
        assert vl_cycle(switches, links, cas, sl2vl, sls) is None
        if name == "torus":
            assert vl_cycle(switches, links, cas, sl2vl, None) is not None, "on SL 0 alone the loops are there"
        assert sim.smagent("verify", "--path-sls", str(state / "path_sls"), check=False).returncode == 0
        # minhop, written anyway: the independent check and verify both find its loop
        assert sim.smagent("sweep", "--routing", "minhop", check=False).returncode == 4
        sim.smagent("sweep", "--routing", "minhop", "--allow-defects", check=False)
        switches, links, cas = read_fabric(sim)
        assert vl_cycle(switches, links, cas, sl2vl, None) is not None
        assert sim.smagent("verify", check=False).returncode == 1


OPENSM = shutil.which("opensm", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))
SAQUERY_SL = re.compile(r"^\s*sl\.+0x([0-9a-f]+)", re.M)


@pytest.mark.skipif(OPENSM is None, reason="opensm is not installed")
def test_verify_on_opensm_dfsssp_tables_counts_loops_per_vl_with_its_sls(tmp_path):
    """OpenSM's dfsssp layers a ring over VLs and hands the SLs out in PathRecords:
    with those SLs (`saquery -p`, one CA a switch) in a path SL file, `verify` finds no
    credit loop in its tables; on SL 0 alone it does (the loops its VLs break)."""
    fabric = topogen.torus_2d(6, 1, 1)  # a ring: few pairs to ask the SA about
    net = tmp_path / "ring.net"
    net.write_text(netfile.dumps(fabric))
    with IbSim(net, tmp_path / "run", extra_args=netfile.ibsim_size_args(fabric)) as sim:
        env = sim.opensm_env(tmp_path / "osm")
        log = tmp_path / "osm" / "osm.log"
        osm = subprocess.Popen([OPENSM, "-R", "dfsssp", "-f", str(log)], env=env, cwd=sim.cwd,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 90
            while True:  # OpenSM assigns LIDs, routes, then its SA answers
                try:
                    switches, links, cas = read_fabric(sim)
                except IbSimError:  # a switch without a LID yet
                    switches, links, cas = {}, {}, {}
                lids = sorted(cas.values())
                if lids and all(lids):
                    probe = sim.run(["saquery", "-p", "--slid", str(lids[0]), "--dlid", str(lids[-1])], check=False)
                    if probe.returncode == 0 and SAQUERY_SL.search(probe.stdout):
                        break
                assert time.monotonic() < deadline and osm.poll() is None, "OpenSM's SA did not answer"
                time.sleep(1)
            dlids = sorted(set(cas.values()) | {lid for lid, _ in switches.values()})
            top = max(dlids)
            sls = {}
            for (ca, cp), lid in cas.items():
                row = bytearray(top + 1)
                for dlid in dlids:
                    if dlid != lid:
                        out = sim.run(["saquery", "-p", "--slid", str(lid), "--dlid", str(dlid)]).stdout
                        row[dlid] = int(SAQUERY_SL.search(out).group(1), 16)
                sls[links[(ca, cp)][0]] = bytes(row)
            assert max(max(r) for r in sls.values()) > 0, "OpenSM's dfsssp layered this ring"
            pathsl.save(tmp_path / "osm_sls", sls)
            with_sls = sim.smagent("verify", "--json", "--no-mcast", "--path-sls", str(tmp_path / "osm_sls"),
                                   check=False).json()
            on_sl0 = sim.smagent("verify", "--json", "--no-mcast", check=False).json()
        finally:
            osm.terminate()
            osm.wait(30)
    # its log is written out when it stops: it routed with dfsssp (OpenSM falls back silently)
    assert "dfsssp tables configured on all switches" in log.read_text(errors="replace")
    assert "cdg_cycle" not in with_sls["defects"], with_sls["defects"]["cdg_cycle"]
    assert "cdg_cycle" in on_sl0["defects"]
