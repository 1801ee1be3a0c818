"""Routing engines and `smagent verify` on ibsim, with infiniband-diags and OpenSM as
witnesses.

* fat tree and torus: after `sweep --routing updn` / `--routing minhop`, `verify` passes
  (minhop on a torus: the sweep refuses the credit loop, exit 4, and with
  --allow-defects `verify` exits 1 for the channel dependency cycle, the deadlock risk it
  really has) and ibtracert follows ~200 sampled CA pairs through the programmed LFTs;
* one LFT entry set to 255 with `lft set`: verify exits 1 and names the pairs it cut;
* side by side with OpenSM's minhop on the same fabric and the same LIDs: both route
  every LID; the entries that differ are counted and explained (see `_compare`).
"""
import os
import random
import re
import shutil
import subprocess

import pytest

from ibsim_harness import ibsim_available, skip_reason
from smagent.model import netfile, topogen
from routing_harness import _parse_lfts, start, verify_json

pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]

OPENSM = shutil.which("opensm", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))



def ca_lids(sim) -> list[int]:
    out = sim.run(["ibnetdiscover"]).stdout
    disc = netfile.loads(out, "ibnetdiscover")
    return sorted(n.lid(p) for n in disc.cas() for p, _peer in disc.connected_ports(n))


def tracert_sample(sim, lids, n=200, seed=11):
    pairs = [(a, b) for a in lids for b in lids if a != b]
    if len(pairs) > n:
        pairs = random.Random(seed).sample(pairs, n)
    for a, b in pairs:
        r = sim.run(["ibtracert", str(a), str(b)], check=False)
        assert r.returncode == 0, f"ibtracert {a} {b} failed: {r.stdout}{r.stderr}"
    return len(pairs)



# ------------------------------------------------------------------------------------
def test_fat_tree_updn_minhop_verify_and_corruption(tmp_path):
    fabric = topogen.fat_tree_2(8)
    with start(tmp_path, fabric, "ft8") as sim:
        for engine in ("updn", "minhop"):
            sim.smagent("sweep", "--routing", engine)
            rc, rep = verify_json(sim)
            assert rc == 0 and rep["ok"], rep
            assert rep["summary"]["lids"] == 32 + 12 and rep["summary"]["pairs_unreachable"] == 0
            assert tracert_sample(sim, ca_lids(sim)) == 200
        # cut one route: leaf L0 no longer forwards H31's LID
        sw = re.search(r'"L0" base port 0 lid (\d+)', sim.run(["ibswitches"]).stdout).group(1)
        disc = netfile.loads(sim.run(["ibnetdiscover"]).stdout, "ibnetdiscover")
        victim = next(n for n in disc.cas() if n.description == "H31").lid(1)
        cut = sim.smagent("lft", "set", sw, str(victim), "255", "--allow-defects", check=False)
        assert cut.returncode == 1 and "unreachable" in cut.stderr, cut.stderr  # the edit's check saw it too
        r = sim.smagent("verify", check=False)
        assert r.returncode == 1, r.stdout + r.stderr
        # every source entering at L0 (its 4 hosts and L0 itself) loses LID victim
        assert re.search(r"^defect unreachable: 5 ", r.stdout, re.M), r.stdout
        assert re.search(rf"^  H0\[1\] -> LID {victim} \(H31\[1\]\): dead end at L0: LFT entry 255", r.stdout,
                         re.M), r.stdout
        assert re.search(rf"^defect dead_end: 1 .*\n  L0 LID {victim} \(H31\[1\]\)", r.stdout, re.M), r.stdout
        rc, rep = verify_json(sim)
        assert rc == 1 and rep["defects"]["unreachable"]["by_cause"] == {"no_route": 5}
        # and the witness agrees: ibtracert from H0 to H31 stops
        h0 = next(n for n in disc.cas() if n.description == "H0").lid(1)
        assert sim.run(["ibtracert", str(h0), str(victim)], check=False).returncode != 0
        # a sweep repairs it
        sim.smagent("sweep", "--routing", "minhop")
        assert verify_json(sim)[0] == 0


def test_torus_updn_clean_minhop_deadlock_risk(tmp_path):
    fabric = topogen.torus_2d(4, 4)
    with start(tmp_path, fabric, "torus44") as sim:
        sim.smagent("sweep", "--routing", "updn")
        rc, rep = verify_json(sim)
        assert rc == 0 and rep["ok"], rep
        lids = ca_lids(sim)
        tracert_sample(sim, lids)
        # minhop delivers everything, but its routes go both ways round the rings: the
        # channel dependency graph has a cycle, a credit-loop deadlock risk. The sweep
        # refuses it (exit 4, the loop named, nothing sent: updn's tables stay) ...
        before = sim.run(["dump_lfts"]).stdout
        refused = sim.smagent("sweep", "--routing", "minhop", check=False)
        assert refused.returncode == 4, refused.stdout + refused.stderr
        assert "cdg_cycle" in refused.stderr and "T" in refused.stderr
        assert sim.run(["dump_lfts"]).stdout == before
        assert verify_json(sim)[0] == 0
        # ... unless allowed: then verify reports what it wrote -> exit 1
        assert sim.smagent("sweep", "--routing", "minhop", "--allow-defects", check=False).returncode == 1
        rc, rep = verify_json(sim)
        assert rc == 1
        assert set(rep["defects"]) == {"cdg_cycle"}, rep["defects"]
        assert rep["summary"]["pairs_unreachable"] == 0
        cyc = rep["defects"]["cdg_cycle"]["cycle"]
        assert len(cyc) >= 2 and all(h["switch"].startswith("T") for h in cyc)
        tracert_sample(sim, lids)
        # and back to updn: clean again
        sim.smagent("sweep", "--routing", "updn")
        assert verify_json(sim)[0] == 0


def test_routing_file_engine_round_trip(tmp_path):
    """Dump the updn tables, re-route with minhop, then load the dump with the file
    engine: the tables return to updn's, byte for byte."""
    fabric = topogen.torus_2d(3, 3)
    with start(tmp_path, fabric, "torus33") as sim:
        lidfile = tmp_path / "guid2lid"
        sim.smagent("sweep", "--routing", "updn", "--lid-file", str(lidfile))
        dump = tmp_path / "updn.lfts"
        sim.smagent("lft", "dump", "-o", str(dump))
        # the cycle again: refused by the sweep unless allowed (exit 1: written, and said)
        assert sim.smagent("sweep", "--routing", "minhop", "--lid-file", str(lidfile), check=False).returncode == 4
        rc = sim.smagent("sweep", "--routing", "minhop", "--lid-file", str(lidfile), "--allow-defects",
                         check=False).returncode
        assert rc == 1 and verify_json(sim)[0] == 1
        sim.smagent("sweep", "--routing", f"file:{dump}", "--lid-file", str(lidfile))
        assert verify_json(sim)[0] == 0
        again = tmp_path / "again.lfts"
        sim.smagent("lft", "dump", "-o", str(again))
        assert again.read_text() == dump.read_text()
        # a file that is not a dump: exit 2, nothing sent
        bad = tmp_path / "bad.lfts"
        bad.write_text("Unicast lids [0x0-0x3] of switch Lid 1 guid 0x0000000000200000 (T0_0):\n0x0001 banana\n")
        r = sim.smagent("sweep", "--routing", f"file:{bad}", check=False)
        assert r.returncode == 2 and "bad.lfts:2" in r.stderr, r.stderr


# ------------------------------------------------------------------------------------


def _opensm(tmp_path, fabric, name, engine, lmc=0):
    """``opensm -o -R engine`` on a fresh ibsim of ``fabric``: its tables and a file of
    the LIDs it gave (guid2lid)."""
    with start(tmp_path, fabric, f"{name}-osm") as sim:
        osm_dir = tmp_path / f"osm-{name}"
        env = sim.opensm_env(osm_dir)
        log = osm_dir / "osm.log"
        r = subprocess.run([OPENSM, "-o", "-R", engine, "-l", str(lmc), "-f", str(log), "-d2"], env=env,
                           cwd=sim.cwd, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        # OpenSM falls back to minhop silently when an engine fails; its log says which
        # engine configured the switches
        assert f"{engine} tables configured on all switches" in log.read_text()
        theirs = _parse_lfts(sim.run(["dump_lfts"]).stdout)
        lidfile = tmp_path / f"guid2lid-{name}"
        lidfile.write_text((osm_dir / "guid2lid").read_text())
    return theirs, lidfile


def _compare(tmp_path, fabric, name, lmc=0):
    """OpenSM minhop vs ours on the same fabric with the same LIDs; returns (entries,
    entries that differ).

    Both implement the same rule (smagent.routing._core): a shortest-path port with the
    fewest routes so far, ties to the lowest port; LIDs taken in OpenSM's port_order_list
    order (CA ports by switch, switches with more CAs first, then byte-swapped GUID order
    as OpenSM's sw_guid_tbl qmap keys them); switch LIDs routed but not counted, after
    the first LMC pass; LMC > 0 through OpenSM's recommend_path scan (start_from rotation,
    unused neighbours first, its least_forwarded_to quirk). Measured: 0 differing entries
    on every fabric below, and on fat_tree_2(36) (LMC 2), 3-level fat trees, meshes and
    tori (LMC 0-3). Differences would come from what we do not model: OpenSM keeping
    existing shortest-path entries on a re-sweep (ibsim starts with empty tables, so not
    here), port_shifting / scatter_ports / hop weights / guid_routing_order files.
    """
    theirs, lidfile = _opensm(tmp_path, fabric, name, "minhop", lmc)
    with start(tmp_path, fabric, f"{name}-ours") as sim:
        # tori and meshes: minhop's credit loops written knowingly (exit 1), as OpenSM does
        ran = sim.smagent("sweep", "--routing", "minhop", "--lmc", str(lmc), "--lid-file", str(lidfile),
                          "--allow-defects", check=False)
        assert ran.returncode in (0, 1), ran.stdout + ran.stderr
        ours = _parse_lfts(sim.run(["dump_lfts"]).stdout)
    assert set(ours) == set(theirs) and len(ours) == len(fabric.switches())
    lids = set().union(*(set(t) for t in theirs.values()))
    n_ports = sum(len(fabric.connected_ports(n)) for n in fabric.cas())
    assert len(lids) == len(fabric.switches()) + n_ports * (1 << lmc)
    total = differ = 0
    for g in theirs:
        assert set(theirs[g]) == lids and set(ours[g]) == lids, "both must route every LID on every switch"
        for lid in lids:
            total += 1
            differ += theirs[g][lid] != ours[g][lid]
    return total, differ


@pytest.mark.skipif(OPENSM is None, reason="opensm is not installed")
@pytest.mark.parametrize("name, make, lmc", [
    ("fat_tree_2_8", lambda: topogen.fat_tree_2(8), 0),
    ("torus_2d_4x4", lambda: topogen.torus_2d(4, 4), 0),
    ("torus_2d_4x4_lmc2", lambda: topogen.torus_2d(4, 4), 2),
    ("torus_2d_4x4_lmc1", lambda: topogen.torus_2d(4, 4), 1),
    ("fat_tree_3_8_lmc1", lambda: topogen.fat_tree_3(8), 1),
    ("fat_tree_3_8_lmc2", lambda: topogen.fat_tree_3(8), 2),
    ("mesh_2d_4x3_2h_lmc1", lambda: topogen.mesh_2d(4, 3, 2), 1),
])
def test_minhop_matches_opensm(tmp_path, name, make, lmc, record_property):
    total, differ = _compare(tmp_path, make(), name, lmc)
    record_property("entries", total)
    record_property("entries_differing", differ)
    print(f"{name}: {differ} of {total} LFT entries differ from OpenSM minhop")
    assert differ == 0, f"{differ} of {total} entries differ from OpenSM minhop (see _compare for the model)"


@pytest.mark.skipif(OPENSM is None, reason="opensm is not installed")
@pytest.mark.parametrize("name", ["ft2_dual_damaged", "ft3_without_agg"])
def test_updn_routes_irregular_fat_trees_as_opensm_does(tmp_path, name, irregular_fabrics):
    """Issue 11 item 8: where OpenSM's updn finds roots on a damaged fat tree, so do we
    (without being told), and the tables agree with OpenSM's on every entry OpenSM
    writes; OpenSM leaves a few switch-to-switch LIDs unrouted, we route them (port 0
    traffic only, see smagent.routing.updn). Then verify and ibtracert agree."""
    fabric = irregular_fabrics[name][0]()
    theirs, lidfile = _opensm(tmp_path, fabric, name, "updn")
    with start(tmp_path, fabric, f"{name}-ours") as sim:
        r = sim.smagent("sweep", "--routing", "updn", "--lid-file", str(lidfile))
        assert re.search(r"^# note: updn roots \(.*equally far", r.stdout, re.M), r.stdout
        ours = _parse_lfts(sim.run(["dump_lfts"]).stdout)
        rc, rep = verify_json(sim)
        assert rc == 0 and rep["ok"] and rep["summary"]["pairs_unreachable"] == 0, rep
        tracert_sample(sim, ca_lids(sim))
    switch_lids = {lid for t in ours.values() for lid, p in t.items() if p == 0}
    assert set(ours) == set(theirs)
    total = differ = 0
    for g, table in ours.items():
        assert not set(theirs[g]) - set(table)
        assert set(table) - set(theirs[g]) <= switch_lids  # what OpenSM leaves unrouted
        for lid, port in theirs[g].items():
            total += 1
            differ += port != table[lid]
    print(f"{name}: {differ} of {total} OpenSM updn entries differ")
    assert total > 0 and differ == 0
