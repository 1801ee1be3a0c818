"""The fat-tree engine (levels, balance, deadlock freedom, refusal), the balance figures
(checked against a brute-force walk of every pair) and `smagent report`."""
import json
import math
import pathlib
import sys

import pytest
from click.testing import CliRunner

from smagent.verify import balance
from smagent.model import netfile, topogen
from smagent import routing, verify
from smagent.cli import main
from smagent.routing import RouteTable, RoutingError, route
from smagent.routing._core import Graph
from smagent.routing.ftree import tree_levels
from routing_inputs import prepared, rin_of
from routing_inputs import damaged_ft2, damaged_ft3

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures"



def levels_by_name(fabric):
    rin = rin_of(fabric)
    G = Graph(rin)
    lv = tree_levels(G.nbrs, [bool(G.ca_lids[x]) for x in range(G.S)], G.name)
    return {rin.names[G.guids[x]]: lv[x] for x in range(G.S)}


def check(fabric, engine="ftree", lmc=0):
    rin = rin_of(fabric, lmc)
    routes = route(engine, rin)
    snap = verify.snapshot_from_routes(fabric, routes, lmc=lmc)
    return rin, routes, verify.check(snap), balance.compute(snap)


# ------------------------------------------------------------------------- levels
@pytest.mark.parametrize("make, want", [
    (lambda: topogen.fat_tree_2(8), {"L": 1, "S": 2}),
    (lambda: topogen.fat_tree_3(8), {"L": 1, "A": 2, "S": 3}),
    (lambda: topogen.fat_tree_3(8, hosts=40), {"L": 1, "A": 2, "S": 3}),
    (lambda: topogen.fat_tree_3(8, hosts=4), {"L": 1}),
    (damaged_ft2, {"L": 1, "S": 2}),
    (damaged_ft3, {"L": 1, "A": 2, "S": 3}),
], ids=["ft2", "ft3", "ft3-pruned", "one-leaf", "ft2-damaged-dual", "ft3-damaged"])
def test_levels_found(make, want):
    got = levels_by_name(make())
    assert {n: want[n[0]] for n in got} == got


def test_levels_refuse_a_torus_and_a_host_on_a_spine():
    with pytest.raises(RoutingError, match=r"not a fat tree: T\d_\d .* both carry hosts"):
        route("ftree", rin_of(topogen.torus_2d(4, 4)))
    f = topogen.fat_tree_2(4)  # leaves L0..L3 (hosts on 1-2), spines S0, S1 (ports 1-4)
    g = topogen.variant(f, drop_links=[(("L3", 3), ("S0", 4))], dual=[("X", ("S0", 4), ("L3", 3))])
    with pytest.raises(RoutingError, match="S0 .* both carry hosts"):
        route("ftree", rin_of(g))


def test_fallback_routes_with_the_named_engine(caplog):
    rin = rin_of(topogen.torus_2d(3, 3))
    with caplog.at_level("WARNING", logger="smagent.routing"):
        got = route("ftree:fallback=updn", rin)
    assert "routing with updn instead" in caplog.text
    assert {g: dict(t.items()) for g, t in got.items()} == \
        {g: dict(t.items()) for g, t in route("updn", rin).items()}
    for spec, msg in [("ftree:fallback=ftree", "the fallback is another engine"), ("ftree:x", "ftree:fallback=ENGINE"),
                      ("ftree:fallback=", "ftree:fallback=ENGINE"), ("ftree:fallback=dor", "unknown routing engine")]:
        with pytest.raises(RoutingError, match=msg):
            routing.parse_spec(spec)


# ---------------------------------------------------------------------- routes
@pytest.mark.parametrize("make", [lambda: topogen.fat_tree_2(8), lambda: topogen.fat_tree_2(12),
                                  lambda: topogen.fat_tree_3(4), lambda: topogen.fat_tree_3(8)],
                         ids=["ft2-8", "ft2-12", "ft3-4", "ft3-8"])
@pytest.mark.parametrize("lmc", [0, 1])
def test_regular_trees_at_the_ideal_and_deadlock_free(make, lmc):
    fabric = make()
    _rin, _routes, rep, b = check(fabric, lmc=lmc)
    assert rep.ok, rep.defects  # every pair delivered, no loop, channel dependency graph acyclic
    hosts = len(fabric.cas())
    assert b["pairs"] == hosts * (1 << lmc) * (hosts - 1)
    for lv in b["levels"]:
        assert lv["max"] - lv["ideal"] <= 1, lv
    assert b["max"] <= math.ceil(b["ideal"])


def test_minhop_on_a_3_level_tree_is_worse_than_ftree():
    *_, rep_m, bm = check(topogen.fat_tree_3(8), "minhop")
    *_, rep_f, bf = check(topogen.fat_tree_3(8))
    assert bf["routes"] == bm["routes"]  # both shortest: the same routes per level
    assert bf["max"] < bm["max"]


@pytest.mark.parametrize("make", [damaged_ft2, damaged_ft3, lambda: topogen.fat_tree_3(8, hosts=40)],
                         ids=["ft2-damaged-dual", "ft3-damaged", "ft3-pruned"])
@pytest.mark.parametrize("lmc", [0, 2])
def test_damaged_and_pruned_trees_route_cleanly(make, lmc):
    fabric = make()
    _rin, _routes, rep, b = check(fabric, lmc=lmc)
    assert rep.ok, rep.defects
    *_, bm = check(make(), "minhop", lmc)
    assert b["max"] <= bm["max"]


def test_lmc_lids_of_a_port_leave_a_leaf_on_different_uplinks():
    fabric = topogen.fat_tree_2(8)
    rin, routes, _rep, _b = check(fabric, lmc=2)
    leaf = next(g for g, name in rin.names.items() if name == "L7")
    for n in fabric.cas()[:12]:
        base = n.lid(1)
        ports = [routes[leaf][lid] for lid in range(base, base + 4)]
        assert len(set(ports)) == 4 and all(p > 4 for p in ports), (n.name, ports)


# ------------------------------------------------------------------ balance
def brute_force_loads(fabric, snap):
    """Per directed switch link (guid, port): routes of every delivered CA-to-CA pair,
    walking each pair hop by hop (no sharing, no numpy)."""
    owner = {}
    for k, c in snap.ca_ports.items():
        for lid in range(c.lid, c.lid + (1 << c.lmc)):
            owner[lid] = k
    loads = {}
    for g, s in snap.switches.items():
        for p in s.active:
            if snap.links.get((g, p), (None,))[0] in snap.switches:
                loads[(g, p)] = 0
    pairs = 0
    for src in snap.ca_ports:
        for lid, dst in owner.items():
            if dst == src:
                continue
            g, hops, ok = snap.links[src][0], [], False
            for _ in range(64):
                p = snap.switches[g].lft[lid]
                peer = snap.links.get((g, p))
                if peer == dst:
                    ok = True
                    break
                if peer is None or peer[0] not in snap.switches:
                    break
                hops.append((g, p))
                g = peer[0]
            if ok:
                pairs += 1
                for h in hops:
                    loads[h] += 1
    return pairs, loads


@pytest.mark.parametrize("engine, cells", [("minhop", None), ("ftree", None), ("ftree", 1)])
def test_balance_matches_a_brute_force_walk(engine, cells, monkeypatch):
    """``cells`` 1: one DLID at a time (`balance.CELLS`), the same figures."""
    if cells is not None:
        monkeypatch.setattr(balance, "CELLS", cells)
    fabric = damaged_ft2()
    rin = rin_of(fabric, 1)
    snap = verify.snapshot_from_routes(fabric, route(engine, rin), lmc=1)
    # cut one route: L2 sends H4's first LID back down to a host that does not own it
    h4 = fabric.node("H4").lid(1)
    l2 = fabric.node("L2")
    lft = bytearray(snap.switches[l2.guid].lft)
    lft[h4] = 1
    snap.switches[l2.guid].lft = bytes(lft)
    pairs, loads = brute_force_loads(fabric, snap)
    b = balance.compute(snap)
    assert b["pairs"] == pairs and b["links"] == len(loads)
    assert b["routes"] == sum(loads.values()) and b["max"] == max(loads.values())
    assert b["mean"] == round(sum(loads.values()) / len(loads), 2)
    assert b["hottest"][0]["routes"] == max(loads.values())
    up = next(lv for lv in b["levels"] if lv["name"] == "1->2 up")
    leaf_links = [v for (g, p), v in loads.items() if fabric.by_guid(g).name.startswith("L")]
    assert up["links"] == len(leaf_links) and up["routes"] == sum(leaf_links) and up["max"] == max(leaf_links)
    assert sum(c for _v, c in up["histogram"]) == up["links"]


def test_balance_of_a_hand_built_two_switch_fabric():
    """Switch1 (hosts Hca1, Hca3) and Switch2 (Hca2, Hca4), cables on ports 3 and 5.
    All of Switch1's traffic to Switch2 takes port 3; Switch2's to Switch1 takes 5."""
    f = prepared(topogen.two_switch())
    s1, s2 = f.node("Switch1"), f.node("Switch2")
    routes = {s1.guid: {s1.lid(0): 0, s2.lid(0): 3}, s2.guid: {s2.lid(0): 0, s1.lid(0): 5}}
    for h, (here, there) in {"Hca1": (1, 5), "Hca3": (2, 5), "Hca2": (1, 3), "Hca4": (2, 3)}.items():
        lid = f.node(h).lid(1)
        home, away = (s1, s2) if h in ("Hca1", "Hca3") else (s2, s1)
        routes[home.guid][lid] = here
        routes[away.guid][lid] = there
    tables = {g: RouteTable.from_entries(r) for g, r in routes.items()}
    b = balance.compute(verify.snapshot_from_routes(f, tables))
    assert b["pairs"] == 12 and b["links"] == 4 and b["routes"] == 8
    assert b["max"] == 4 and b["mean"] == 2.0
    assert "both carry hosts" in b["levels_note"]
    assert [(lv["name"], lv["histogram"]) for lv in b["levels"]] == [("all links", [[0, 2], [4, 2]])]
    assert {h["link"] for h in b["hottest"][:2]} == {"Switch1[3] -> Switch2[3]", "Switch2[5] -> Switch1[5]"}


# ------------------------------------------------------------------- CLI
def test_verify_json_and_text_carry_balance(tmp_path):
    fx = str(FIXTURES / "ft2-648-swept.erf")
    r = CliRunner().invoke(main, ["--transport", "replay", "--fixture", fx, "verify", "--json", "--no-mcast"])
    assert r.exit_code == 0, r.output
    b = json.loads(r.output)["balance"]
    assert b["pairs"] == 648 * 647 and b["max"] == 630 and b["ideal"] == 630.0
    assert [lv["name"] for lv in b["levels"]] == ["1->2 up", "2->1 down"]
    r = CliRunner().invoke(main, ["--transport", "replay", "--fixture", fx, "verify", "--no-mcast"])
    assert "# balance: 816,480 routes of 419,256 CA-to-CA pairs over 1296" in r.output
    assert "#   1->2 up: 648 links, 408,240 routes, max 630, ideal 630.0" in r.output


def test_report_png_from_json_and_svg_from_the_simulator(tmp_path):
    fabric = damaged_ft2()
    rin = rin_of(fabric)
    b = balance.compute(verify.snapshot_from_routes(fabric, route("ftree", rin)))
    saved = tmp_path / "v.json"
    saved.write_text(json.dumps({"ok": True, "balance": b}))
    png = tmp_path / "r.png"
    r = CliRunner().invoke(main, ["report", str(png), "--from-json", str(saved)])
    assert r.exit_code == 0, r.output
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    svg = tmp_path / "r.svg"
    r = CliRunner().invoke(main, ["report", str(svg), "--from-json", str(saved), "--json"])
    assert r.exit_code == 0, r.output
    assert "<svg" in svg.read_text()[:2000] and json.loads(r.output)["format"] == "svg"
    # a fresh simulator routes nothing yet: an empty chart would pass for a balanced one
    net = tmp_path / "f.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    empty = tmp_path / "empty.svg"
    r = CliRunner().invoke(main, ["--topology", str(net), "report", str(empty), "--json"])
    assert r.exit_code == 1 and not empty.exists(), r.output
    doc = json.loads(r.stdout)
    assert doc["output"] is None and doc["balance"]["routes"] == 0
    assert "routes no CA-to-CA pair" in doc["problems"][0] and "smagent sweep" in r.stderr


def test_report_bad_input(tmp_path, monkeypatch):
    r = CliRunner().invoke(main, ["report", str(tmp_path / "x.jpg")])
    assert r.exit_code == 2 and "PNG or SVG" in r.output
    bad = tmp_path / "bad.json"
    bad.write_text('{"ok": true}')
    r = CliRunner().invoke(main, ["report", str(tmp_path / "x.png"), "--from-json", str(bad)])
    assert r.exit_code == 2 and "no balance figures" in r.output
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    r = CliRunner().invoke(main, ["report", str(tmp_path / "x.png"), "--from-json", str(bad)])
    assert r.exit_code == 2 and "pip install 'smagent[report]'" in r.output
