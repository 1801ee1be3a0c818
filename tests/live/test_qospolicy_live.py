"""QoS policy parity with OpenSM on ibsim: the same policy given to `opensm -o -Q` (its
qos_* lines in the file `-F` reads, its qos-ulps section in the file `-Y` reads) and to
`smagent sweep --qos-policy FILE` (one file holding both), each on a fresh ibsim of the
same fat tree, leaves the same SL2VL tables (every input / output pair of a switch), VLArb
parts and PortInfo (VLHighLimit included) on every port, read by directed route. And the
SLs `saquery -p` gets for sample pairs (plain, by service ID, by P_Key) from OpenSM's SA
(`opensm -Q -Y`, a daemon) and from `smagent run --qos-policy` are equal."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from ibsim_harness import IbSim, ibsim_available, skip_reason
from links_dump import dump
from smagent.model import netfile, topogen

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


def both_sms(tmp_path, fabric, tables: str) -> dict:
    """Every port's tables after `opensm -o -Q` (``tables`` in the file -F reads, ULPS in the
    one -Y reads) and after `smagent sweep --qos-policy` (one file holding both), each on a
    fresh ibsim of ``fabric``; asserted equal port by port. Returns smagent's."""
    net = tmp_path / "ft.net"
    net.write_text(netfile.dumps(fabric))
    (tmp_path / "osm.conf").write_text(tables)
    (tmp_path / "ulps.conf").write_text(ULPS)
    (tmp_path / "policy.conf").write_text(tables + ULPS)
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
    return ours


def test_same_tables_as_opensm_with_the_same_policy(tmp_path):
    ours = both_sms(tmp_path, topogen.fat_tree_2(4), TABLES)
    # the policy's tables are there, not OpenSM's defaults
    hca = next(v for k, v in ours.items() if k.startswith(("Hca1:", "H0:")))
    assert hca["sl2vl"] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7]
    sw = next(v for k, v in ours.items() if k.startswith("L0:") and not k.endswith(":0") and "sl2vl in 0" in v)
    assert sw["sl2vl in 0"] == [0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7]
    assert [list(e) for e in sw["vlarb 1"][:2]] == [[0, 16], [1, 8]] and [list(e) for e in hca["vlarb 1"][:2]] == [
        [0, 4], [1, 4]]
    # VLHighLimit reads 0 after either SM here (compared above, equal): ibsim keeps none of the
    # values sent; tests/unit/test_qospolicy.py proves qos_ca_high_limit on the in-process simulator


SW0 = """qos_sw0_sl2vl 1,0,3,2,5,4,7,6,1,0,3,2,5,4,7,6
qos_sw0_vlarb_low 0:2,1:2,2:2,3:2,4:9
qos_sw0_high_limit 5
"""


@pytest.mark.parametrize("sw0", [SW0, ""], ids=["sw0-lines", "no-sw0-lines"])
def test_enhanced_port0_gets_the_same_tables_as_opensm(tmp_path, sw0):
    """ibsim's switches are enhanced where the topology says so ("enhanced port 0"): OpenSM
    and smagent leave the same tables on those port 0s (the (input, 0) pairs from swe; (0, 0),
    VLArb and VLHighLimit from sw0, or without sw0 lines from the class-less default, not
    swe), compared with every other port."""
    fabric = topogen.fat_tree_2(4)
    for s in fabric.switches():
        if s.name in ("L0", "S1"):
            s.caps["enhanced_port0"] = 1
    ours = both_sms(tmp_path, fabric, TABLES + sw0)
    for name in ("L0:0", "S1:0"):  # the sw0 tables are there (or the default), not swe's
        assert ours[name]["sl2vl in 0"] == ([1, 0, 3, 2, 5, 4, 7, 6, 1, 0, 3, 2, 5, 4, 7, 6] if sw0 else
                                            [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7]), name
        assert ours[name]["sl2vl in 1"] == [0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7], name  # swe
        assert [list(e) for e in ours[name]["vlarb 1"][:5]] == ([[0, 2], [1, 2], [2, 2], [3, 2], [4, 9]] if sw0 else
                                                               [[0, 0], [1, 4], [2, 4], [3, 4], [4, 4]]), name
    assert "vlarb 1" not in ours["L1:0"]  # a base port 0 has none (not read)


# ------------------------------------------------------------ PathRecord SLs from the SA
SAQUERY_SL = re.compile(r"^\s*sl\.+0x([0-9a-f]+)", re.M)


def cas_by_name(sim) -> dict:
    """CA description -> (LID, port GUID) of port 1, from ibnetdiscover under the running SM."""
    out, desc = {}, None
    for line in sim.run(["ibnetdiscover"]).stdout.splitlines():
        m = re.match(r'^(Ca|Hca|Switch)\s.*#\s+"([^"]+)"', line)
        if m:
            desc = m.group(2) if m.group(1) != "Switch" else None
            continue
        m = re.match(r"^\[1\]\((\w+)\)\s.*#\s+lid (\d+) lmc", line)
        if m and desc is not None:
            out[desc] = (int(m.group(2)), int(m.group(1), 16))
    return out


def wait_for_path(sim, proc, cas, seconds=60):
    """Until the SA answers a PathRecord (``proc``: the SM, alive meanwhile)."""
    deadline = time.monotonic() + seconds
    (a, _ga), (b, _gb) = list(cas.values())[:2]
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the SM exited {proc.returncode}"
        r = sim.run(["saquery", "-p", "--slid", str(a), "--dlid", str(b)], check=False)
        if r.returncode == 0 and SAQUERY_SL.search(r.stdout):
            return
        time.sleep(0.5)
    raise AssertionError(f"no PathRecord answer in {seconds} s")


def sls(sim, cas, pairs) -> dict:
    """(source, destination, query) -> the SL saquery -p gets, by names (each SM's LIDs)."""
    forms = {"plain": [], "service_id": ["--service_id", "0x10005"], "pkey": ["--pkey", "0xffff"],
             "other_service": ["--service_id", "0x30000"]}
    out = {}
    for a, b in pairs:
        for form, extra in forms.items():
            r = sim.run(["saquery", "-p", "--slid", str(cas[a][0]), "--dlid", str(cas[b][0]), *extra])
            out[(a, b, form)] = int(SAQUERY_SL.search(r.stdout).group(1), 16)
    return out


def test_pathrecord_sls_equal_opensms_with_the_same_policy(tmp_path, ibsim):
    """OpenSM (-Q -Y) and `smagent run --qos-policy`, one after the other on one ibsim: the SL
    of PathRecords between sample pairs, plain, with a service ID in and out of a rule's
    range, and with the default P_Key (the ipoib rule), are the same: OpenSM's first-match order."""
    from sm_harness import stop_group
    net = tmp_path / "ft.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net)
    osm_dir = tmp_path / "osm"
    env = sim.opensm_env(osm_dir)
    cas = cas_by_name(sim)  # GUIDs only: no SM has set LIDs yet
    g = {name: guid for name, (_lid, guid) in cas.items()}
    policy = tmp_path / "policy.conf"
    policy.write_text("qos-ulps\n    default : 1\n    any, service-id 0x10000-0x1FFFF : 2\n"
                      f"    any, target-port-guid {g['H3']:#x} : 3\n    ipoib : 4\n"
                      f"    any, target-port-guid {g['H5']:#x}, {g['H6']:#x} : 5\nend-qos-ulps\n")
    pairs = [("H0", "H3"), ("H1", "H5"), ("H7", "H6"), ("H2", "H1"), ("H6", "H0")]
    osm = subprocess.Popen([OPENSM, "-Q", "-Y", str(policy), "-f", str(osm_dir / "osm.log")], env=env, cwd=osm_dir,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    try:
        time.sleep(1)
        wait_for_path(sim, osm, cas_by_name(sim))
        theirs = sls(sim, cas_by_name(sim), pairs)
    finally:
        stop_group(osm)
    ours_proc = subprocess.Popen([sys.executable, "-m", "smagent.cli", "--transport", "umad", "run", "--state-dir",
                                  str(tmp_path / "state"), "--log-file", str(tmp_path / "run.log"), "--qos-policy",
                                  str(policy)], env=sim.env, cwd=sim.cwd, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        time.sleep(1)
        wait_for_path(sim, ours_proc, cas_by_name(sim))
        ours = sls(sim, cas_by_name(sim), pairs)
    finally:
        stop_group(ours_proc)
    assert ours == theirs, {k: (ours[k], v) for k, v in theirs.items() if ours.get(k) != v}
    assert theirs[("H0", "H3", "plain")] == 3 and theirs[("H0", "H3", "service_id")] == 2
    assert theirs[("H1", "H5", "pkey")] == 4 and theirs[("H0", "H3", "pkey")] == 3  # file order
    assert theirs[("H2", "H1", "plain")] == 1 and theirs[("H2", "H1", "other_service")] == 1


@pytest.mark.parametrize("parts, refused", [
    ("a=0x10 : ALL_CAS=full ;\n", True),  # the implicit default: only the SM's port is a full member
    ("Default=0x7fff : ALL=full ;\n", False),
])
def test_an_ipoib_rule_is_refused_where_opensm_refuses_it(tmp_path, parts, refused):
    """`ipoib, pkey 0x7fff` in qos-ulps: OpenSM's policy parser refuses the file when the
    partition has fewer than two full members (it logs the error and runs without the
    policy); smagent refuses it before the first Set (exit 2), naming the rule."""
    net = tmp_path / "ft.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(2)))
    ulps = "qos-ulps\n    default : 0\n    ipoib, pkey 0x7fff : 1\nend-qos-ulps\n"
    (tmp_path / "ulps.conf").write_text(ulps)
    (tmp_path / "parts.conf").write_text(parts)
    with IbSim(net, tmp_path / "osm") as sim:
        env = sim.opensm_env(tmp_path / "osm-cache")
        r = subprocess.run([OPENSM, "-o", "-Q", "-Y", str(tmp_path / "ulps.conf"), "-P", str(tmp_path / "parts.conf"),
                            "-f", str(tmp_path / "osm.log")], env=env, cwd=sim.cwd, capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        log = (tmp_path / "osm.log").read_text(errors="replace")
        assert ("partition has less than two full members" in log) == refused, log[-3000:]
        r = sim.run([sys.executable, "-m", "smagent.cli", "--transport", "umad", "sweep", "--qos-policy",
                     str(tmp_path / "ulps.conf"), "--partitions", str(tmp_path / "parts.conf")], timeout=600,
                    check=False)
        if refused:
            assert r.returncode == 2, r.stderr[-2000:]
            assert "ipoib, pkey 0x7fff: IPoIB partition 0x7fff: its partition has 1 full member" in r.stderr
            assert "SubnSet" not in r.stdout
        else:
            assert r.returncode == 0, r.stderr[-2000:]


SAQUERY_FIELD = re.compile(r"^\s*(\w+)\.+(\S+)", re.M)
FULL_POLICY = """port-groups
    port-group
        name: Clients
        port-name: H0/P1, H1/P1
        port-guid: {h7:#x}
    end-port-group
    port-group
        name: Storage
        port-guid: {h4:#x}-{h5:#x}
    end-port-group
    port-group
        name: Switches
        node-type: SWITCH
    end-port-group
end-port-groups
qos-levels
    qos-level
        name: DEFAULT
        sl: 1
    end-qos-level
    qos-level
        name: Storage
        use: capped
        sl: 2
        mtu-limit: 1
        rate-limit: 2
        packet-life: 10
    end-qos-level
    qos-level
        name: Keyed
        sl: 4
        pkey: 0x7fff
    end-qos-level
    qos-level
        name: Classy
        sl: 6
    end-qos-level
end-qos-levels
qos-match-rules
    qos-match-rule
        qos-class: 3-4
        qos-level-name: Classy
    end-qos-match-rule
    qos-match-rule
        source: Clients
        destination: Storage
        qos-level-name: Storage
    end-qos-match-rule
    qos-match-rule
        destination: Switches
        qos-level-name: Keyed
    end-qos-match-rule
    qos-match-rule
        service-id: 0x100-0x1ff
        qos-level-name: storage
    end-qos-match-rule
end-qos-match-rules
qos-ulps
    any, source-port-guid {h6:#x} : 5
end-qos-ulps
"""


def records(sim, cas, pairs) -> dict:
    """(source, destination, query) -> the SL, MTU, rate, packet lifetime and P_Key of the
    PathRecord `saquery -p` gets (None: no record), by names (each SM's LIDs)."""
    forms = {"plain": [], "service_id": ["--service_id", "0x150"], "qos_class": ["--qos_class", "4"],
             "pkey": ["--pkey", "0xffff"]}
    out = {}
    for a, b in pairs:
        for form, extra in forms.items():
            r = sim.run(["saquery", "-p", "--slid", str(cas[a][0]), "--dlid", str(cas[b][0]), *extra], check=False)
            got = dict(SAQUERY_FIELD.findall(r.stdout))
            out[(a, b, form)] = tuple(got.get(k) for k in ("sl", "mtu", "rate", "pkt_life", "pkey")) if got else None
    return out


def test_pathrecords_equal_opensms_with_a_full_policy(tmp_path, ibsim):
    """OpenSM (-Q -Y) and `smagent run --qos-policy`, one after the other on one ibsim, with
    port-groups (port name, GUID range, node type), qos-levels (SL, MTU and rate limits,
    packet lifetime, P_Key), qos-match-rules (source and destination groups, service IDs,
    QoS class) and a qos-ulps rule by source: every PathRecord saquery -p gets between
    sample pairs and to a switch (plain, by service ID, by QoS class, by P_Key) is the same."""
    net = tmp_path / "ft.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net)
    osm_dir = tmp_path / "osm"
    cas = cas_by_name(sim)
    g = {name: guid for name, (_lid, guid) in cas.items()}
    policy = tmp_path / "policy.conf"
    policy.write_text(FULL_POLICY.format(h4=g["H4"], h5=g["H5"], h6=g["H6"], h7=g["H7"]))
    pairs = [("H0", "H4"), ("H7", "H5"), ("H4", "H0"), ("H2", "H3"), ("H6", "H1"), ("H1", "L1"), ("H3", "S0")]

    theirs = sm_answers(sim, opensm(sim, policy, osm_dir), pairs)
    ours = sm_answers(sim, smagent_run(sim, policy, tmp_path), pairs)
    assert ours == theirs, {k: (ours.get(k), v) for k, v in theirs.items() if ours.get(k) != v}
    # the policy is at work, not defaults
    # Storage: capped (the selector 'exactly' in the top bits), lifetime 10
    assert theirs[("H0", "H4", "plain")][:4] == ("0x2", "0x81", "0x82", "0x8A")
    assert theirs[("H0", "H4", "qos_class")][0] == "0x6" and theirs[("H2", "H3", "service_id")][0] == "0x2"
    assert theirs[("H4", "H0", "plain")][0] == "0x1" and theirs[("H6", "H1", "plain")][0] == "0x5"
    assert theirs[("H1", "L1", "plain")][0] == "0x4"
    assert theirs[("H1", "L1", "plain")][4] == "0x7FFF", "a level's P_Key: its 15 bits, no membership bit (OpenSM)"


def opensm(sim, policy, osm_dir, more=()) -> subprocess.Popen:
    """`opensm -Q -Y POLICY` on ``sim``, a daemon in its own process group."""
    env = sim.opensm_env(osm_dir)
    return subprocess.Popen([OPENSM, "-Q", "-Y", str(policy), "-f", str(osm_dir / "osm.log"), *more], env=env,
                            cwd=osm_dir,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def smagent_run(sim, policy, tmp_path, more=()) -> subprocess.Popen:
    """`smagent run --qos-policy POLICY` on ``sim``, in its own process group."""
    return subprocess.Popen([sys.executable, "-m", "smagent.cli", "--transport", "umad", "run", "--state-dir",
                             str(tmp_path / "state"), "--log-file", str(tmp_path / "run.log"), "--qos-policy",
                             str(policy), *more], env=sim.env, cwd=sim.cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def sm_answers(sim, proc, pairs, switches=("L1", "S0")) -> dict:
    """`records` for ``pairs`` once the SM ``proc`` answers PathRecords; the SM is stopped."""
    from sm_harness import stop_group
    try:
        time.sleep(1)
        wait_for_path(sim, proc, cas_by_name(sim))
        now = cas_by_name(sim)
        for sw in switches:
            now[sw] = (switch_lid(sim, sw), 0)
        return records(sim, now, pairs)
    finally:
        stop_group(proc)


def switch_lid(sim, name: str) -> int:
    """A switch's LID, by its NodeDescription, from ibnetdiscover under the running SM."""
    for line in sim.run(["ibnetdiscover"]).stdout.splitlines():
        m = re.match(r'^Switch\s.*"([^"]+)".*\blid (\d+) lmc', line)
        if m and m.group(1) == name:
            return int(m.group(2))
    raise AssertionError(f"no switch {name}")


LEVEL = "qos-levels\n qos-level\n  name: DEFAULT\n  sl: 0\n{more} end-qos-level\nend-qos-levels\n"


@pytest.mark.parametrize("policy, ours", [
    ("qos-ulps\n any, service-id 0x10 : 1\nend-qos-ulps\n", "no default QoS level"),
    (LEVEL.format(more="") + "qos-match-rules\n qos-match-rule\n  qos-level-name: Gold\n end-qos-match-rule\n"
     "end-qos-match-rules\n", "qos-level 'Gold' is not defined"),
    (LEVEL.format(more="") + "qos-match-rules\n qos-match-rule\n  source: Nobody\n  qos-level-name: default\n"
     " end-qos-match-rule\nend-qos-match-rules\n", "source port-group 'Nobody' is not defined"),
    (LEVEL.format(more="  mtu-limit: 6\n"), "MTU limit 6 is not 1..5"),
    (LEVEL.format(more="  sl: 1\n"), "second 'sl'"),
    ("port-groups\nend-port-groups\n" + LEVEL.format(more=""), "port-groups (line 1) holds nothing"),
    (LEVEL.format(more="") + "port-groups\n port-group\n  name: a\n  port-name: H0/P2\n end-port-group\n"
     "end-port-groups\n", "port name 'H0/P2': 'H0' has 1 ports"),
    (LEVEL.format(more="  rate-limit: 7\n  packet-life: 12\n") + "port-groups\n port-group\n  name: a\n"
     "  port-name: H0/P1\n  node-type: self, switch\n end-port-group\nend-port-groups\nqos-setup\nend-qos-setup\n",
     None),
], ids=["no-default", "no-level", "no-group", "mtu-limit", "two-sls", "empty-groups", "port-range", "good"])
def test_a_policy_opensm_refuses_is_refused(tmp_path, policy, ours):
    """`opensm -o -Q -Y FILE` logs the file as failed (ERR AC03 parsing, AC04 its checks:
    it then runs without the policy); smagent refuses the same file before the first Set
    (exit 2), naming the problem. A file OpenSM takes, smagent takes."""
    net = tmp_path / "ft.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(2)))
    f = tmp_path / "policy.conf"
    f.write_text(policy)
    with IbSim(net, tmp_path / "osm") as sim:
        env = sim.opensm_env(tmp_path / "osm-cache")
        r = subprocess.run([OPENSM, "-o", "-Q", "-Y", str(f), "-f", str(tmp_path / "osm.log")], env=env,
                           cwd=sim.cwd, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        log = (tmp_path / "osm.log").read_text(errors="replace")
        assert bool(re.search(r"ERR AC0[34]", log)) == (ours is not None), log[-3000:]
        r = sim.run([sys.executable, "-m", "smagent.cli", "--transport", "umad", "sweep", "--qos-policy", str(f)],
                    timeout=600, check=False)
        if ours is None:
            assert r.returncode == 0, r.stderr[-2000:]
        else:
            assert r.returncode == 2 and ours in r.stderr, r.stderr[-2000:]
            assert "SubnSet" not in r.stdout


BLANKS_NET = """Hca 1 "vs1 HCA-1"
[1] "L0"[1]

Hca 1 "H1"
[1] "L0"[2]

Hca 1 "H2"
[1] "L0"[3]

Switch 4 "L0"
[1] "vs1 HCA-1"[1]
[2] "H1"[1]
[3] "H2"[1]
"""
BLANKS_POLICY = """port-groups
    port-group
        name: Unquoted
        port-name: vs1 HCA-1/P1
    end-port-group
    port-group
        name: Quoted
        port-name: "vs1 HCA-1/P1", H1/P1
    end-port-group
end-port-groups
qos-levels
    qos-level
        name: DEFAULT
        sl: 1
    end-qos-level
    qos-level
        name: two
        sl: 2
    end-qos-level
    qos-level
        name: three
        sl: 3
    end-qos-level
end-qos-levels
qos-match-rules
    qos-match-rule
        destination: unquoted
        qos-level-name: two
    end-qos-match-rule
    qos-match-rule
        destination: Quoted
        qos-level-name: three
    end-qos-match-rule
end-qos-match-rules
"""


def test_a_port_name_with_blanks_needs_quotes_as_in_opensm(tmp_path, ibsim):
    """OpenSM's lexer drops blanks in a port name unless quoted: `port-name: vs1 HCA-1/P1`
    names "vs1HCA-1", no node here; `"vs1 HCA-1/P1"` names the host. Both SMs give the
    paths to it the quoted group's level (SL 3)."""
    net = tmp_path / "blanks.net"
    net.write_text(BLANKS_NET)
    sim = ibsim(net)
    policy = tmp_path / "policy.conf"
    policy.write_text(BLANKS_POLICY)
    pairs = [("H2", "vs1 HCA-1"), ("H2", "H1"), ("vs1 HCA-1", "H2")]
    theirs = sm_answers(sim, opensm(sim, policy, tmp_path / "osm"), pairs, switches=())
    ours = sm_answers(sim, smagent_run(sim, policy, tmp_path), pairs, switches=())
    assert ours == theirs, {k: (ours.get(k), v) for k, v in theirs.items() if ours.get(k) != v}
    assert [theirs[(a, b, "plain")][0] for a, b in pairs] == ["0x3", "0x3", "0x1"]


PARTITION_POLICY = """port-groups
    port-group
        name: ByName
        partition: gold
    end-port-group
    port-group
        name: ByKey
        pkey: 0x8030-0x8031
    end-port-group
end-port-groups
qos-levels
    qos-level
        name: DEFAULT
        sl: 1
    end-qos-level
    qos-level
        name: Gold
        sl: 2
        pkey: 0x20
    end-qos-level
    qos-level
        name: Silver
        sl: 3
    end-qos-level
end-qos-levels
qos-match-rules
    qos-match-rule
        source: ByName
        destination: ByName
        qos-level-name: Gold
    end-qos-match-rule
    qos-match-rule
        destination: ByKey
        qos-level-name: Silver
    end-qos-match-rule
end-qos-match-rules
"""


def test_groups_by_partition_equal_opensms(tmp_path, ibsim):
    """Port groups by partition name and by P_Key range, with the same partitions file
    (`opensm -P`, `smagent run --partitions`): the same PathRecords (SL, P_Key from the
    level, MTU, rate, lifetime) between members and others."""
    net = tmp_path / "ft.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net)
    g = {name: guid for name, (_lid, guid) in cas_by_name(sim).items()}
    parts = tmp_path / "partitions.conf"
    parts.write_text(f"Default=0x7fff : ALL=full ;\ngold=0x20 : {g['H0']:#x}=full, {g['H3']:#x}=full, "
                     f"{g['H5']:#x} ;\nsilver=0x30 : {g['H6']:#x}=full, {g['H3']:#x}=full ;\n")
    policy = tmp_path / "policy.conf"
    policy.write_text(PARTITION_POLICY)
    pairs = [("H0", "H3"), ("H3", "H0"), ("H0", "H5"), ("H2", "H3"), ("H1", "H6"), ("H5", "H0")]
    theirs = sm_answers(sim, opensm(sim, policy, tmp_path / "osm", ["-P", str(parts)]), pairs, switches=())
    ours = sm_answers(sim, smagent_run(sim, policy, tmp_path, ["--partitions", str(parts)]), pairs, switches=())
    assert ours == theirs, {k: (ours.get(k), v) for k, v in theirs.items() if ours.get(k) != v}
    assert theirs[("H0", "H3", "plain")][0] == "0x2" and theirs[("H0", "H3", "plain")][4] == "0x20"
    assert theirs[("H1", "H6", "plain")][0] == "0x3"
