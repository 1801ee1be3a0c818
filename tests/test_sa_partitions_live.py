"""The SA under partitions, live on ibsim: with the same partitions.conf (three partitions
with full and limited members, one of them `ipoib`, and OpenSM's implicit default),
`smagent run --partitions` answers as OpenSM 3.3 does:
* `saquery -p` between every ordered pair of CA ports, and with an SL asked for:
  whether there is a path, and its P_Key (where two ports share several partitions, the
  one OpenSM picks), SL, MTU, rate and packet lifetime. LIDs are each SM's own, so pairs
  are named by node.
* the same with SLs given to two partitions (`sl=`) against `opensm -Q` (OpenSM honours
  them with QoS only; smagent unless --no-qos): the paths carry their partition's SL.
* `saquery -g` and `saquery -m` asked from several hosts: the multicast groups each may
  see (those of its partitions), one record a group, members not shown (no SM_Key)."""
from __future__ import annotations

import itertools
import subprocess

import pytest

from sa_harness import OPENSM, SA_MARKS, SAQUERY, Proc, lid_map, records, saquery, start_sa, wait_for_sa
from sm_harness import procs  # noqa: F401 (the fixture)
from smagent import netfile, topogen
from test_partitions_live import conf_text, ports

pytestmark = SA_MARKS
FIELDS = ("pkey", "sl", "mtu", "rate", "pkt_life", "preference", "qos_class")


def paths(sim) -> dict:
    lids = lid_map(sim)
    cas = sorted(k for k in lids if k[1])
    out = {}
    for a, b in itertools.permutations(cas, 2):
        for sl in ((), ("--sl", 3)):  # and an SL asked for: minhop decides none, so it is given
            r = saquery(sim, "-p", "--slid", lids[a], "--dlid", lids[b], *sl, check=False)
            out[(a, b, *sl)] = (r.returncode, [{k: v for k, v in rec.items() if k in FIELDS}
                                               for rec in records(r.stdout)])
    return out


@pytest.mark.parametrize("sls", [False, True])
def test_path_records_under_partitions_answer_like_opensm(tmp_path, ibsim, procs, sls):
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net)
    conf = tmp_path / "partitions.conf"
    text = conf_text(ports(sim))
    if sls:
        text = text.replace("storage=0x8001, ipoib, mtu=4", "storage=0x8001, ipoib, mtu=4, sl=1")
        text = text.replace("compute=0x0002", "compute=0x0002, sl=2")
    conf.write_text(text)
    osm_dir = tmp_path / "opensm"
    osm = Proc([OPENSM, *(["-Q"] if sls else []), "-P", str(conf), "-f", str(osm_dir / "opensm.log")],
               sim.opensm_env(osm_dir), osm_dir, osm_dir / "stdout")
    procs.append(osm)
    wait_for_sa(sim, "OpenSM", osm)
    want = paths(sim)
    osm.stop()
    start_sa(sim, tmp_path, procs, "--partitions", conf)
    got = paths(sim)
    keys = {rec["pkey"] for _rc, recs in want.values() for rec in recs}
    assert {rec["sl"] for _rc, recs in want.values() for rec in recs} >= ({"0x0", "0x1", "0x2", "0x3"} if sls
                                                                          else {"0x0", "0x3"})
    assert keys >= {"0x1", "0x8001", "0xFFFF", "0x7FFF"}, keys  # several partitions in play
    assert any(not recs for _rc, recs in want.values())  # limited-limited pairs: no path
    wrong = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
    assert not wrong, "\n".join(f"{k}:\n  smagent {g}\n  OpenSM  {w}" for k, (g, w) in wrong.items())


def groups_seen(sim) -> dict:
    """(host, -g | -m) -> saquery's exit and records, MLIDs aside (each SM hands out its own)."""
    out = {}
    for host in ("H0", "H1", "H3", "H6", "H7"):
        for flag in ("-g", "-m"):
            r = subprocess.run([SAQUERY, flag], env=dict(sim.env, SIM_HOST=host), cwd=sim.cwd, capture_output=True,
                               text=True, timeout=30)
            out[(host, flag)] = (r.returncode, sorted(tuple(sorted((k, v) for k, v in rec.items() if k != "Mlid"))
                                                      for rec in records(r.stdout)))
    return out


def test_multicast_groups_shown_as_opensm_shows_them(tmp_path, ibsim, procs):
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net)
    conf = tmp_path / "partitions.conf"
    conf.write_text(conf_text(ports(sim)))
    osm_dir = tmp_path / "opensm"
    osm = Proc([OPENSM, "-P", str(conf), "-f", str(osm_dir / "opensm.log")], sim.opensm_env(osm_dir), osm_dir,
               osm_dir / "stdout")
    procs.append(osm)
    wait_for_sa(sim, "OpenSM", osm)
    want = groups_seen(sim)
    osm.stop()
    start_sa(sim, tmp_path, procs, "--partitions", conf)
    got = groups_seen(sim)
    assert any(recs for _rc, recs in want.values())  # the ipoib partition's broadcast group
    wrong = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
    assert not wrong, "\n".join(f"{k}:\n  smagent {g}\n  OpenSM  {w}" for k, (g, w) in wrong.items())
