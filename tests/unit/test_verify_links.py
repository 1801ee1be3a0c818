"""`verify`'s link checks (smagent.verify: link_mtu_mismatch, link_vl_mismatch,
sl_unmapped, no_default_partition; the warnings degraded_link, link_below_capability)
in the in-process simulator, whose ports start at IBA reset values (NeighborMTU 256,
VL0 only, identity SL2VL, P_Key 0x7FFF):

* a sweep without the link configuration (`links=False`) leaves every defect the
  reset values cause; a normal sweep leaves none;
* ends that disagree on MTU or VLs are named;
* differential: on random fabrics with SL2VL tables and OperationalVLs scrambled after a
  sweep, verify's per-hop SL verdicts predict, for every (CA port, LID) route and every
  SL, whether the simulator's data plane delivers a 4096-byte packet (the witness).
"""
from __future__ import annotations

import json
import random

import pytest

from smagent import sweep, verify
from smagent.model import topogen
from smagent.sim.dataplane import Packet
from smagent.transport.sim import SimTransport


def swept(fabric, **opts):
    t = SimTransport(fabric)
    assert sweep.sweep(t, sweep.SweepOptions(**opts)).problems == []
    return t


def test_normal_sweep_leaves_no_link_defect():
    t = swept(topogen.fat_tree_2(4))
    rep = verify.verify(t, mcast=False)
    assert rep.ok and rep.defects == {}, rep.defects
    s = rep.summary
    assert s["links_checked"] and s["tables_checked"] and s["data_hops"] > 0
    # the simulator's links train at 4xSDR of 12xQDR possible: listed, not a defect
    assert set(rep.warnings) == {"degraded_link"}
    assert rep.warnings["degraded_link"]["count"] == 16  # every link of the 6 switches, 8 hosts
    assert "width 4X of 12X possible" in rep.warnings["degraded_link"]["examples"][0]["why"]


def test_unconfigured_links_are_reported():
    t = swept(topogen.fat_tree_2(4), links=False)  # LIDs, routes, ACTIVE; links at reset
    rep = verify.verify(t, mcast=False, examples=1000)
    assert not rep.ok
    assert set(rep.defects) == {"sl_unmapped", "no_default_partition"}, rep.defects
    # every data hop maps SLs 1..15 outside the one VL the link runs (SL15: VL15)
    sl = rep.defects["sl_unmapped"]
    assert sl["count"] == rep.summary["data_hops"]
    for e in sl["examples"]:
        assert e["data_vls"] == 1 and e["sls"] == [[s, s] for s in range(1, 16)], e
    hosts = [k for k in t.sim.nodes if k.startswith("H")]
    nodefault = rep.defects["no_default_partition"]
    assert nodefault["count"] == len(hosts) + 6  # every host port and every switch port 0
    assert all(e["pkeys"] == ["0x7fff"] for e in nodefault["examples"])
    low = rep.warnings["link_below_capability"]["examples"]
    assert {(e["field"], e["value"], e["capable"]) for e in low} == {("neighbor_mtu", 256, 4096),
                                                                     ("operational_vls", 1, 8)}


def test_cli_lists_link_defects_and_warnings(cli, monkeypatch):
    from smagent import api, cli as climod
    t = swept(topogen.fat_tree_2(4), links=False)
    monkeypatch.setattr(climod.Context, "session", lambda self: api.Session(t))  # verify runs through the API
    r = cli("verify", "--no-mcast")
    assert r.exit_code == 1, r.output
    hops = verify.verify(t, mcast=False).summary["data_hops"]
    assert f"defect sl_unmapped: {hops} hops on data paths" in r.output
    assert "defect no_default_partition: 14 " in r.output
    assert "warning link_below_capability: 32 " in r.output and "MTU 256, both ends can run 4096" in r.output
    doc = cli("verify", "--no-mcast", "--json").json()
    assert doc["ok"] is False and "degraded_link" in doc["warnings"] and "degraded_link" not in doc["defects"]
    t2 = swept(topogen.fat_tree_2(4))
    monkeypatch.setattr(climod.Context, "session", lambda self: api.Session(t2))
    r = cli("verify", "--no-mcast")
    assert r.exit_code == 0, r.output  # warnings do not change the exit code
    assert f"links agree on MTU and VLs; every SL maps to a data VL on {hops} data hops" in r.output
    assert "warning degraded_link: 16 " in r.output


def test_ends_that_disagree_are_named():
    t = swept(topogen.fat_tree_2(4))
    h0 = t.sim.node("H0")
    (leaf, lport) = h0.peers[1]
    h0.pi[1].neighbor_mtu = 4  # 2048 against the leaf's 4096
    leaf.pi[lport].operational_vls = 3  # VL0-3 against the host's VL0-7
    rep = verify.verify(t, mcast=False)
    (mtu,) = rep.defects["link_mtu_mismatch"]["examples"]
    assert {mtu["port"], mtu["peer"]} == {"H0[1]", f"{leaf.name}[{lport}]"}
    assert {mtu["value"], mtu["peer_value"]} == {2048, 4096}
    (vls,) = rep.defects["link_vl_mismatch"]["examples"]
    assert {vls["value"], vls["peer_value"]} == {4, 8}
    # SLs mapped to VL4..7 now leave the leaf towards H0 on a link that runs 4 data VLs
    assert rep.defects["sl_unmapped"]["examples"][0]["data_vls"] == 4
    assert all(e["port"] in ("H0[1]", f"{leaf.name}[{lport}]") for e in rep.defects["sl_unmapped"]["examples"])


def _scramble(sim, rng):
    """Random SL2VL tables on some hops and fewer VLs on some links (both ends alike)."""
    for n in sim.nodes.values():
        for p in range(1, n.num_ports + 1):
            if n.peers[p] is None:
                continue
            if rng.random() < 0.15:
                other, op = n.peers[p]
                code = rng.choice((1, 2, 3))
                n.pi[p].operational_vls = other.pi[op].operational_vls = code
            ins = range(n.num_ports + 1) if n.is_switch else (0,)
            for i in ins:
                if rng.random() < 0.1:
                    n.sl2vl[(i, p)] = [rng.choice((0, 1, 2, 5, 7, 15)) for _ in range(16)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sl_verdicts_match_the_data_plane(seed):
    rng = random.Random(seed)
    fabric = rng.choice([lambda: topogen.fat_tree_2(4), lambda: topogen.mesh_2d(3, 2),
                         lambda: topogen.fat_tree_3(4), lambda: topogen.torus_2d(3, 3)])()
    t = swept(fabric, allow_defects=True)  # minhop's credit loops on a mesh or torus: not the point here
    _scramble(t.sim, rng)
    rep = verify.verify(t, mcast=False, examples=10 ** 6)
    bad = {}  # (node, in port or None for a CA port, out port) -> SLs dropped there
    for e in rep.defects.get("sl_unmapped", {"examples": []})["examples"]:
        node = e["port"].rsplit("[", 1)[0]
        bad[(node, e["in_port"], e["out_port"])] = {s for s, _vl in e["sls"]}
    assert bad, "the scramble should leave some hop unmapped"
    sim = t.sim
    ports = [(n.name, p) for n in sim.nodes.values() if not n.is_switch
             for p in range(1, n.num_ports + 1) if n.peers[p] is not None]
    checked = dropped = 0
    for src in ports:
        for dst in ports:
            if src == dst:
                continue
            lid = sim.node(dst[0]).lid_range(dst[1])[0]
            route = sim.trace(src, lid)
            assert route.delivered, route
            hops = [(h[0], None if not sim.node(h[0]).is_switch else h[1], h[2]) for h in route.hops
                    if h[2] is not None]
            for sl in range(16):
                predicted = not any(sl in bad.get(h, ()) for h in hops)
                got = sim.trace(src, lid, packet=Packet(sl=sl, size=4096))
                assert got.delivered == predicted, (src, dst, sl, got.reason, got.where, hops)
                checked += 1
                dropped += not got.delivered
    assert 0 < dropped < checked
