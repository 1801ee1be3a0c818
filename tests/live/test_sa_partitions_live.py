"""The SA under partitions, live on ibsim: with the same partitions.conf (three partitions
with full and limited members, one of them `ipoib`, and OpenSM's implicit default),
`smagent run --partitions` answers as OpenSM 3.3 does:
* `saquery -p` between every ordered pair of CA ports, and with an SL asked for:
  whether there is a path, and its P_Key (where two ports share several partitions, the
  one OpenSM picks), SL, MTU, rate and packet lifetime. LIDs are each SM's own, so pairs
  are named by node.
* the same with SLs given to two partitions (`sl=`) against `opensm -Q` (OpenSM honours
  them with QoS only; smagent unless QoS is off): the paths carry their partition's SL.
* `saquery -g` and `saquery -m` asked from several hosts: the multicast groups each may
  see (those of its partitions), one record a group, members not shown (no SM_Key).
* what a requester sees: asked from several hosts, records about ports it does not share
  a partition with are left out as OpenSM leaves them out, under that file and under one
  whose rule for the default P_Key names no ALL."""
from __future__ import annotations

import itertools
import subprocess

import pytest

from sa_harness import SA_MARKS, SAQUERY, lid_map, records, saquery, assert_same, opensm_then_ours
from sm_harness import procs  # noqa: F401 (the fixture)
from smagent.model import netfile, topogen
from partitions_harness import conf_text, explicit_default_text, ports
from sa_harness import DIFFERENT_ON_PURPOSE, LID_FIELDS, _junk

pytestmark = SA_MARKS
FIELDS = ("pkey", "sl", "mtu", "rate", "pkt_life", "preference", "qos_class")


def both_sas(tmp_path, ibsim, procs, collect, conf=conf_text, opensm_args=()) -> tuple[dict, dict]:
    """(OpenSM's answers, ours): on one ibsim fat_tree_2(4), the partitions.conf ``conf``
    writes from the fabric's ports given to both SMs (`opensm_then_ours`)."""
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net)
    path = tmp_path / "partitions.conf"
    path.write_text(conf(ports(sim)))
    return opensm_then_ours(sim, tmp_path, procs, collect, [*opensm_args, "-P", path], ["--partitions", path])


def with_sls(ports_list) -> str:
    """`conf_text` with SLs given to two partitions."""
    text = conf_text(ports_list).replace("storage=0x8001, ipoib, mtu=4", "storage=0x8001, ipoib, mtu=4, sl=1")
    return text.replace("compute=0x0002", "compute=0x0002, sl=2")


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


def _entered_by(key: str, rec: dict) -> bool:
    """A port's LocalPortNum in a PortInfoRecord of a port other than 0 is the port the SM's
    Get came in by, on each SM's own directed route (parallel cables: either): not compared."""
    return key == "LocalPort:" and rec.get("PortNum", "0") != "0"


@pytest.mark.parametrize("sls", [False, True])
def test_path_records_under_partitions_answer_like_opensm(tmp_path, ibsim, procs, sls):
    want, got = both_sas(tmp_path, ibsim, procs, paths, with_sls if sls else conf_text, ["-Q"] if sls else [])
    keys = {rec["pkey"] for _rc, recs in want.values() for rec in recs}
    assert {rec["sl"] for _rc, recs in want.values() for rec in recs} >= ({"0x0", "0x1", "0x2", "0x3"} if sls
                                                                          else {"0x0", "0x3"})
    assert keys >= {"0x1", "0x8001", "0xFFFF", "0x7FFF"}, keys  # several partitions in play
    assert any(not recs for _rc, recs in want.values())  # limited-limited pairs: no path
    assert_same(got, want)


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
    want, got = both_sas(tmp_path, ibsim, procs, groups_seen)
    assert any(recs for _rc, recs in want.values())  # the ipoib partition's broadcast group
    assert_same(got, want)


REQUESTERS = ("H1", "H3", "H6")  # a full member (storage), limited ones sharing some partitions, none
TARGET_CAS = ("H0", "H2", "H3", "H5", "H7")
TARGET_SWITCHES = ("L0", "L1", "S0")
PATHS = (("H4", "H0"), ("H5", "H0"), ("H1", "H2"), ("H6", "H7"))  # the requester must share with both ends


def _sa_query(sim, host, *args):
    r = subprocess.run([SAQUERY, *map(str, args)], env=dict(sim.env, SIM_HOST=host), cwd=sim.cwd,
                       capture_output=True, text=True, timeout=30)
    return r.returncode, [rec for rec in records(r.stdout) if not _junk(rec)]


def views(sim) -> dict:
    """(requester, query, target) -> (exit, records with LIDs as the nodes they name): NR and
    PIR by LID of CAs and switches (a switch's PIR port by port: OpenSM's table of all its
    ports is longer than one MAD, which umad2sim truncates), LR from a LID, SWIR by LID,
    PathRecords by LIDs between other hosts."""
    lids = lid_map(sim)
    by_lid = {v: f"{d}:{p}" for (d, p), v in lids.items()}
    node = {d: v for (d, _p), v in lids.items()}
    qs = [(t, ("NR", node[t])) for t in TARGET_CAS + TARGET_SWITCHES]
    qs += [(t, ("PIR", node[t])) for t in TARGET_CAS] + [(t, ("LR", node[t])) for t in TARGET_CAS + ("L1",)]
    qs += [(f"{t}/{p}", ("PIR", f"{node[t]}/{p}")) for t in ("L1", "S0") for p in range(5)]
    qs += [(t, ("SWIR", node[t])) for t in TARGET_SWITCHES]
    qs += [(f"{a}>{b}", ("-p", "--slid", node[a], "--dlid", node[b])) for a, b in PATHS]
    out = {}
    for host in REQUESTERS:
        for target, args in qs:
            rc, recs = _sa_query(sim, host, *args)
            out[(host, args[0], target)] = (rc, [
                {k: by_lid.get(int(v, 0), v) if k in LID_FIELDS else v for k, v in rec.items()
                 if k not in DIFFERENT_ON_PURPOSE and not _entered_by(k, rec)} for rec in recs])
    return out


@pytest.mark.parametrize("make_conf", [conf_text, explicit_default_text])
def test_what_a_requester_sees_under_partitions_like_opensm(tmp_path, ibsim, procs, make_conf):
    """Asked from several hosts, NodeRecords and PortInfoRecords of CAs and switches,
    LinkRecords, SwitchInfoRecords and PathRecords come (or not) as OpenSM's SA gives them
    under the same partitions.conf: only about the ports the requester shares a partition
    with (a switch port facing a host holds that host's P_Keys)."""
    want, got = both_sas(tmp_path, ibsim, procs, views, make_conf)
    hidden = [k for k, (_rc, recs) in want.items() if not recs]
    assert ("H3", "NR", "L0") in hidden  # the filter is in play: switches are limited members
    if make_conf is conf_text:
        assert ("H3", "NR", "H5") in hidden and want[("H1", "NR", "H5")][1]  # a full member sees
        assert not want[("H3", "-p", "H6>H7")][1] and want[("H6", "-p", "H6>H7")][1]
    assert_same(got, want)


def table_views(sim) -> dict:
    """(requester, query, target) -> (exit, records) of P_KeyTableRecords (with the SM_Key,
    both SMs' default 1) of CA ports and of a leaf switch's port 0 and ports facing hosts,
    and SL2VL table records of CA ports. (Not compared: tables smagent never read, which
    have no record here and one of zeros or OpenSM's values from OpenSM: VLArb after
    `opensm -Q` left tables smagent's QoS probe finds usable, ports between switches.)"""
    lids = lid_map(sim)
    node = {d: v for (d, _p), v in lids.items()}
    key = ["--smkey", "1"]
    qs = [(t, key + ["PKTR", f"{node[t]}/1/0"]) for t in TARGET_CAS]
    qs += [(f"L1/{p}", key + ["PKTR", f"{node['L1']}/{p}/0"]) for p in range(3)]
    qs += [(t, ["SL2VL", f"{node[t]}//"]) for t in TARGET_CAS]
    out = {}
    for host in REQUESTERS:
        for target, args in qs:
            rc, recs = _sa_query(sim, host, *args)
            out[(host, args[-2], target)] = (rc, [{k: v for k, v in r.items() if k not in LID_FIELDS} for r in recs])
    return out


def test_table_records_a_requester_sees_like_opensm(tmp_path, ibsim, procs):
    """P_KeyTableRecords and SL2VL table records of CA ports and switch ports come (or
    not) to each requester, with the same tables, as from `opensm -Q` (which writes the
    tables smagent's default writes) under the same partitions.conf."""
    want, got = both_sas(tmp_path, ibsim, procs, table_views, opensm_args=["-Q"])
    assert not want[("H3", "PKTR", "H5")][1] and want[("H1", "PKTR", "H5")][1]  # the filter is in play
    assert not want[("H3", "PKTR", "L1/2")][1] and want[("H3", "PKTR", "L1/1")][1]  # switch ports by their keys
    assert_same(got, want)
