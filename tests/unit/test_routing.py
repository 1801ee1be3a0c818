"""Routing engines on hand-built inputs: shortest paths, balance, LMC spreading,
up*/down* legality and deadlock freedom, the file engine and the engine spec."""
import re
from collections import Counter, deque

import pytest
from hypothesis import given, settings, strategies as st

from smagent.model import netfile, topogen
from smagent import verify
from smagent.model.lftdump import format_lft
from smagent.routing import ENGINES, RouteTable, RoutingError, RoutingInput, route
from smagent.routing._core import Graph, fill
from smagent.routing.updn import choose_roots
from routing_inputs import prepared, rin_of



def switch_dist(rin):
    """All-pairs hop counts between switches (plain BFS, independent of the engines)."""
    out = {}
    for s in rin.switches:
        d = {s: 0}
        q = deque([s])
        while q:
            x = q.popleft()
            for _p, y in rin.adjacency[x]:
                if y not in d:
                    d[y] = d[x] + 1
                    q.append(y)
        out[s] = d
    return out


def walk(rin, routes, src, lid, limit=64):
    """Switches a packet for ``lid`` visits from switch ``src`` (ends at the LID's home)."""
    nbr = {(g, p): y for g, lst in rin.adjacency.items() for p, y in lst}
    path = [src]
    home, hport = rin.lid_homes[lid]
    cur = src
    while not (cur == home and routes[cur][lid] == hport):
        cur = nbr[(cur, routes[cur][lid])]
        path.append(cur)
        assert len(path) < limit, f"loop routing LID {lid}"
    return path


def check_report(fabric, routes, lmc=0):
    return verify.check(verify.snapshot_from_routes(fabric, routes, lmc=lmc))


# ---------------------------------------------------------------------------- basics
@pytest.mark.parametrize("engine", ["minhop", "updn"])
@pytest.mark.parametrize("make", [lambda: topogen.fat_tree_2(8), lambda: topogen.fat_tree_3(4),
                                  lambda: topogen.torus_2d(4, 4), lambda: topogen.mesh_2d(3, 2, 2),
                                  topogen.two_switch], ids=["ft2", "ft3", "torus", "mesh", "2sw"])
def test_every_switch_routes_every_lid(engine, make):
    fabric = make()
    rin = rin_of(fabric)
    routes = route(engine, rin)
    assert set(routes) == set(rin.switches)
    for g in rin.switches:
        assert set(routes[g]) == set(rin.lid_homes), g
    for lid, (g, p) in rin.lid_homes.items():
        assert routes[g][lid] == p  # the LID's own switch: its port (0 for the switch itself)
    rep = check_report(fabric, routes)
    assert "unreachable" not in rep.defects and "loop" not in rep.defects
    assert rep.summary["pairs_unreachable"] == 0


def test_minhop_takes_shortest_paths():
    for fabric in (topogen.fat_tree_3(4), topogen.torus_2d(5, 3), topogen.mesh_2d(4, 3)):
        rin = rin_of(fabric)
        routes = route("minhop", rin)
        dist = switch_dist(rin)
        for s in rin.switches:
            for lid, (home, _p) in rin.lid_homes.items():
                assert len(walk(rin, routes, s, lid)) - 1 == dist[s][home]


def test_minhop_balances_fat_tree_uplinks():
    """At every leaf the 4 up ports carry the other leaves' 28 host LIDs 7 each;
    switch LIDs are routed but not counted (OpenSM's default)."""
    fabric = topogen.fat_tree_2(8)
    rin = rin_of(fabric)
    routes = route("minhop", rin)
    for n in fabric.switches():
        if not n.name.startswith("L"):
            continue
        remote = [lid for lid, (g, p) in rin.lid_homes.items() if g != n.guid and p != 0]
        load = Counter(routes[n.guid][lid] for lid in remote)
        assert sorted(load) == [5, 6, 7, 8] and set(load.values()) == {7}, load


def test_lmc_spreads_a_ports_lids_over_different_paths():
    """LMC 2 on a fat tree with 4 spines: from every other leaf the 4 LIDs of a host
    leave by 4 different up ports (so 4 different spines: 4 disjoint paths)."""
    fabric = topogen.fat_tree_2(8)
    rin = rin_of(fabric, lmc=2)
    routes = route("minhop", rin)
    homes: dict = {}
    for lid, home in rin.lid_homes.items():
        if home[1]:
            homes.setdefault(home, []).append(lid)
    leaves = [n.guid for n in fabric.switches() if n.name.startswith("L")]
    for (g, _p), lids in homes.items():
        assert len(lids) == 4
        for leaf in leaves:
            if leaf != g:
                assert len({routes[leaf][lid] for lid in lids}) == 4
    assert not check_report(fabric, routes, lmc=2).defects


def test_lmc_spreads_on_a_torus_where_two_shortest_paths_exist():
    fabric = topogen.torus_2d(4, 4)
    rin = rin_of(fabric, lmc=1)
    dist = switch_dist(rin)
    routes = route("minhop", rin)
    nbr = {(g, p): y for g, lst in rin.adjacency.items() for p, y in lst}
    homes: dict = {}
    for lid, home in rin.lid_homes.items():
        if home[1]:
            homes.setdefault(home, []).append(lid)
    spread = 0
    for (g, _p), lids in homes.items():
        for s in rin.switches:
            if s == g:
                continue
            closer = {p for p, y in rin.adjacency[s] if dist[y][g] == dist[s][g] - 1}
            if len({nbr[(s, p)] for p in closer}) >= 2:
                assert routes[s][lids[0]] != routes[s][lids[1]], (s, g)
                spread += 1
    assert spread > 100


class _Forgetful(dict):
    """An LMC memo that never remembers: every component computed from scratch."""

    def get(self, key, default=None):
        self.misses = getattr(self, "misses", 0) + 1
        return default

    def __setitem__(self, key, value):
        pass


@pytest.mark.parametrize("lmc", [1, 2])
@pytest.mark.parametrize("make, shared", [(lambda: topogen.fat_tree_3(8), True),
                                          (lambda: topogen.torus_2d(4, 3, 2), False),
                                          (lambda: topogen.fat_tree_2(12), True), ("parallel_cables", True)],
                         ids=["ft3", "torus", "ft2", "parallel"])
@pytest.mark.parametrize("shuffled", [False, True], ids=["lids-in-order", "lids-shuffled"])
def test_lmc_memo_gives_what_computing_every_switch_gives(make, shared, lmc, shuffled, monkeypatch,
                                                          irregular_fabrics):
    """Switches of one shape share one LMC answer (`_core._assign_lmc`): the tables are
    those of computing every switch on its own, whether or not a port's LIDs are
    consecutive with its neighbours' (shuffled: LID runs of one port only)."""
    import random
    from smagent.routing import _core
    fabric = irregular_fabrics[make][0]() if isinstance(make, str) else make()
    netfile.assign_ibsim_guids(fabric)
    size, lid = 1 << lmc, 1
    for n in fabric.switches():
        n.lids[0] = lid
        lid += 1
    cas = list(fabric.cas())
    if shuffled:
        random.Random(7).shuffle(cas)
    for n in cas:
        for p, _peer in fabric.connected_ports(n):
            lid = -(-lid // size) * size
            n.lids[p], n.lmcs[p] = lid, lmc
            lid += size
    rin = RoutingInput.from_fabric(fabric, lmc)
    memos = []
    layout = _core.Graph._lmc_layout

    def spy(G, forget):
        layout(G)
        if forget:
            G.lmc_memo = _Forgetful()
        memos.append(G.lmc_memo)

    for engine in ("minhop", "updn"):
        monkeypatch.setattr(_core.Graph, "_lmc_layout", lambda G: spy(G, False))
        fast = route(engine, rin)
        monkeypatch.setattr(_core.Graph, "_lmc_layout", lambda G: spy(G, True))
        slow = route(engine, rin)
        assert {g: bytes(t.ports) for g, t in fast.items()} == {g: bytes(t.ports) for g, t in slow.items()}
        # a fat tree's leaves (and aggregation switches) share a shape; a torus's switches do not
        if shared:
            assert 0 < len(memos[-2]) < memos[-1].misses
        else:
            assert len(memos[-2]) == memos[-1].misses
    assert not check_report(fabric, fast, lmc=lmc).defects.keys() - {"cdg_cycle"}


# ------------------------------------------------------------------------------ updn
def test_updn_roots_are_spines_and_cores():
    for fabric, prefix in ((topogen.fat_tree_2(8), "S"), (topogen.fat_tree_3(4), "S")):
        rin = rin_of(fabric)
        G = Graph(rin)
        roots = {G.guids[x] for x in choose_roots(G, G.components())}
        assert roots == {n.guid for n in fabric.switches() if n.name.startswith(prefix)}


def test_updn_torus_has_one_central_root():
    rin = rin_of(topogen.torus_2d(4, 4))
    G = Graph(rin)
    roots = choose_roots(G, G.components())
    assert len(roots) == 1 and G.guids[roots[0]] == min(rin.switches)  # all tie: lowest GUID


@pytest.mark.parametrize("make", [lambda: topogen.torus_2d(4, 4), lambda: topogen.torus_2d(3, 5, 2),
                                  lambda: topogen.mesh_2d(3, 3), lambda: topogen.torus_2d(6, 1)],
                         ids=["torus44", "torus35", "mesh33", "ring6"])
def test_minhop_has_cdg_cycles_where_updn_has_none(make):
    fabric = make()
    rin = rin_of(fabric)
    bad = check_report(fabric, route("minhop", rin))
    assert set(bad.defects) == {"cdg_cycle"}
    cyc = bad.defects["cdg_cycle"]["cycle"]
    assert len(cyc) >= 2
    good = check_report(fabric, route("updn", rin))
    assert good.ok, good.defects


IRREGULAR = ["ft2_dual_damaged", "ft2_every_spine_damaged", "ft3_without_agg", "ft3_8_without_agg"]


@pytest.mark.parametrize("name", IRREGULAR)
def test_updn_chooses_roots_that_route_irregular_fat_trees(name, irregular_fabrics):
    """A damaged fat tree: the spines (cores) farthest from the CAs leave some leaf
    without an up*/down* path to a switch. Other roots are chosen, the notes say which
    and why the first ones were passed over; every pair is reachable, no CDG cycle."""
    make, expected = irregular_fabrics[name]
    fabric = make()
    rin = rin_of(fabric)
    routes = route("updn", rin)
    passed_over, chosen = routes.notes[:-1], routes.notes[-1]
    assert passed_over and all("without an up*/down* route" in n for n in passed_over), routes.notes
    assert chosen.startswith("updn roots (") and "farthest from the channel adapters)" not in chosen
    if expected is not None:
        names = set(re.findall(r"\b([A-Z]\d+) \(0x", chosen.split(":", 1)[1]))
        assert names == expected, chosen
    rep = check_report(fabric, routes)
    assert rep.ok and rep.summary["pairs_unreachable"] == 0, rep.defects
    G = Graph(rin)  # the first rule's roots, given by hand, are refused as before
    tops = ",".join(f"{G.guids[x]:#x}" for x in choose_roots(G, G.components()))
    with pytest.raises(RoutingError, match=r"no up\*/down\* path"):
        route(f"updn:{tops}", rin)


def test_updn_notes_the_roots_on_a_regular_tree():
    routes = route("updn", rin_of(topogen.fat_tree_2(8)))
    assert len(routes.notes) == 1 and routes.notes[0].startswith(
        "updn roots (farthest from the channel adapters): S0 (0x"), routes.notes
    assert route(f"updn:{min(routes):#x}", rin_of(topogen.fat_tree_2(8))).notes == []
    assert route("minhop", rin_of(topogen.fat_tree_2(8))).notes == []


@pytest.mark.parametrize("name", ["ft2_dual_damaged", "ft3_without_agg"])
def test_updn_sweeps_irregular_fat_trees_on_the_simulator(name, irregular_fabrics):
    from smagent import sweep
    from smagent.transport.sim import SimTransport
    t = SimTransport(irregular_fabrics[name][0]())
    r = sweep.sweep(t, sweep.SweepOptions(routing="updn"))
    assert r.problems == [] and any(n.startswith("updn roots (") for n in r.notes), (r.problems, r.notes)
    rep = verify.verify(t, mcast=False)
    assert rep.summary["pairs_unreachable"] == 0 and rep.summary["pairs"] > 0
    assert not {"unreachable", "cdg_cycle", "dead_end", "loop"} & set(rep.defects), rep.defects


def test_updn_routes_are_up_then_down():
    fabric = topogen.torus_2d(4, 4)
    rin = rin_of(fabric)
    routes = route("updn", rin)
    G = Graph(rin)
    roots = choose_roots(G, G.components())
    from smagent.routing.updn import ranks
    rank = ranks(G, roots)
    key = {G.guids[x]: (rank[x], -G.guids[x]) for x in range(G.S)}
    for s in rin.switches:
        for lid in rin.lid_homes:
            path = walk(rin, routes, s, lid)
            went_down = False
            for a, b in zip(path, path[1:]):
                up = key[b] < key[a]
                assert not (up and went_down), f"down then up on {path}"
                went_down |= not up


def test_updn_on_fat_tree_is_shortest_for_ca_traffic_and_routes_spine_to_spine():
    """Spine to spine has no up*/down* path when all spines are roots (OpenSM leaves
    those LIDs unrouted); we route them through a leaf, which only the spine's own
    port 0 uses, so the data CDG stays acyclic."""
    fabric = topogen.fat_tree_2(8)
    rin = rin_of(fabric)
    routes = route("updn", rin)
    dist = switch_dist(rin)
    for n in fabric.switches():
        for lid, (home, _p) in rin.lid_homes.items():
            assert len(walk(rin, routes, n.guid, lid)) - 1 == dist[n.guid][home]
    assert check_report(fabric, routes).ok


def test_updn_explicit_roots():
    fabric = topogen.fat_tree_2(8)
    rin = rin_of(fabric)
    s0 = fabric.node("S0").guid
    one = route(f"updn:{s0:#x}", rin)
    assert check_report(fabric, one).ok
    # everything climbs to S0: leaves send remote host LIDs only to S0's port
    l0 = fabric.node("L0")
    s0_port = next(p for p, peer in fabric.connected_ports(l0) if peer.node == "S0")
    remote = [lid for lid, (g, p) in rin.lid_homes.items() if g != l0.guid and p]
    assert {one[l0.guid][lid] for lid in remote} == {s0_port}


def test_updn_bad_roots_fail_loudly():
    fabric = topogen.fat_tree_2(8)
    rin = rin_of(fabric)
    l0, l1 = fabric.node("L0").guid, fabric.node("L1").guid
    with pytest.raises(RoutingError, match=r"updn cannot route from L\d .* to L\d"):
        route(f"updn:{l0:#x},{l1:#x}", rin)
    with pytest.raises(RoutingError, match="not a switch of this fabric"):
        route("updn:0x1234", rin)
    with pytest.raises(RoutingError, match="is not a GUID"):
        route("updn:banana", rin)


def test_split_fabric():
    """Two separate switch graphs: minhop routes within each (the sweep reports the rest),
    updn picks roots in each part."""
    fabric = topogen.two_switch()
    fabric.disconnect("Switch1", 3)
    fabric.disconnect("Switch1", 5)
    rin = rin_of(fabric)
    for engine in ("minhop", "updn"):
        routes = route(engine, rin)
        for g in rin.switches:
            local = {lid for lid, (h, _p) in rin.lid_homes.items() if h == g}
            assert set(routes[g]) == local


# ----------------------------------------------------------------------------- core
@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=6), st.integers(0, 30))
def test_fill_equals_the_greedy_rule(loads, n):
    ports = list(range(1, len(loads) + 1))
    load = [0] + list(loads)
    want, ref = [], list(load)
    for _ in range(n):
        p = min(ports, key=lambda q: (ref[q], q))
        want.append(p)
        ref[p] += 1
    assert fill(ports, load, n) == want and load == ref


def test_route_table_is_a_read_only_mapping():
    t = RouteTable(bytearray([255, 1, 255, 0, 7]), [1, 3, 4])
    assert dict(t) == {1: 1, 3: 0, 4: 7} and len(t) == 3 and list(t.items()) == [(1, 1), (3, 0), (4, 7)]
    assert 2 not in t and 99 not in t and t.get(2) is None and t == {1: 1, 3: 0, 4: 7}
    with pytest.raises(KeyError):
        t[2]
    lost = RouteTable(bytearray([255, 1, 255, 255]), [1, 3])  # LID 3 unrouted: not listed
    assert dict(lost.items()) == {1: 1} and lost.missing([1, 3]) == [3] and t.missing([1, 3, 4]) == []
    assert t.missing([1, 3, 4, 9]) == [9]  # beyond the image


def test_route_table_from_entries_and_updated():
    t = RouteTable.from_entries({2: 5, 4: 1}, size=8)
    assert len(t.ports) == 8 and dict(t) == {2: 5, 4: 1}
    s = t.updated({4: 255, 10: 3})  # 255 removes a route; a LID past the image grows it
    assert dict(s) == {2: 5, 10: 3} and len(s.ports) == 11 and dict(t) == {2: 5, 4: 1}
    assert s.missing([2, 4, 10]) == [4]


@pytest.mark.parametrize("engine", ["minhop", "updn", "file"])
def test_every_engine_returns_route_tables(engine, tmp_path):
    fabric = prepared(topogen.torus_2d(3, 3))
    rin = RoutingInput.from_fabric(fabric)
    spec = engine
    if engine == "file":
        f = tmp_path / "lfts"
        f.write_text(dump_text(fabric, route("minhop", rin), max(rin.lid_homes)))
        spec = f"file:{f}"
    routes = route(spec, rin)
    assert set(routes) == set(rin.switches)
    assert all(type(t) is RouteTable and len(t.ports) > max(rin.lid_homes) for t in routes.values())


# --------------------------------------------------------------------------- specs
@pytest.mark.parametrize("spec, msg", [
    ("dor", "unknown routing engine 'dor'"),
    ("", "unknown routing engine"),
    ("minhop:x", "minhop takes no argument"),
    ("file:", "needs the dump"),
    ("file", "needs the dump"),
    ("updn:", "no root GUID"),
])
def test_bad_specs(spec, msg):
    rin = rin_of(topogen.two_switch())
    with pytest.raises(RoutingError, match=msg):
        route(spec, rin)
    assert isinstance(RoutingError("x"), ValueError)  # the CLI maps it to exit 2


def test_engines_listed():
    assert tuple(ENGINES) == ("auto", "minhop", "updn", "ftree", "dfsssp", "file")


# ----------------------------------------------------------------------------- file
def dump_text(fabric, routes, top):
    lines = []
    for n in fabric.switches():
        table = bytearray([255]) * (top + 1)
        for lid, p in routes[n.guid].items():
            table[lid] = p
        lines += format_lft(f"Lid {n.lid(0)}", n.guid, n.description, top, table, n.num_ports)
    return "\n".join(lines) + "\n"


def test_file_engine_round_trip(tmp_path):
    fabric = prepared(topogen.torus_2d(3, 3))
    rin = RoutingInput.from_fabric(fabric)
    routes = route("updn", rin)
    f = tmp_path / "lfts"
    f.write_text(dump_text(fabric, routes, max(rin.lid_homes)))
    back = route(f"file:{f}", rin)
    assert {g: dict(v) for g, v in back.items()} == {g: dict(v) for g, v in routes.items()}


def test_file_engine_errors(tmp_path):
    fabric = prepared(topogen.two_switch())
    rin = RoutingInput.from_fabric(fabric)
    routes = route("minhop", rin)
    top = max(rin.lid_homes)
    good = dump_text(fabric, routes, top)
    f = tmp_path / "lfts"

    def err(text):
        f.write_text(text)
        with pytest.raises(RoutingError) as e:
            route(f"file:{f}", rin)
        return str(e.value)

    with pytest.raises(RoutingError, match="No such file"):
        route(f"file:{tmp_path / 'missing'}", rin)
    assert "lfts:4: cannot parse 'LID PORT'" in err(re.sub(r"^0x0001 \d+", "0x0001 zero", good, 1, re.M))
    assert "lfts:1: cannot parse the switch GUID" in err("Unicast lids [0x0-0x5] of switch Lid 1 guid nothex:\n")
    assert "not a unicast table dump" in err("hello\n")
    s1 = fabric.node("Switch1")
    assert "is not a switch of this fabric" in err(good.replace(f"0x{s1.guid:016x}", "0x00000000deadbeef"))
    # only one switch's section: the other is missing
    first = good.split("Unicast lids")[1]
    assert "no table for 1 switch(es)" in err("Unicast lids" + first)
    # a port the switch does not have
    bad_port = re.sub(r"^0x0001 \d+", "0x0001 009", good, 1, re.M)
    assert "has ports 0..8" in err(bad_port)
    # a LID that lives on Switch1 port 0 routed elsewhere there: taken with other LIDs
    lid = s1.lid(0)
    other = dump_text(fabric, {**routes, s1.guid: routes[s1.guid].updated({lid: 3})}, top)
    msg = err(other)
    assert f"sends LID 0x{lid:04x} to port 3, but that LID lives on its port 0" in msg and "--lid-file" in msg


def test_file_engine_leaves_gaps_for_the_sweep_to_report(tmp_path):
    fabric = prepared(topogen.two_switch())
    rin = RoutingInput.from_fabric(fabric)
    routes = route("minhop", rin)
    lid = max(rin.lid_homes)
    s2 = fabric.node("Switch2").guid
    if rin.lid_homes[lid][0] == s2:
        s2 = fabric.node("Switch1").guid
    gap = {g: dict(v) for g, v in routes.items()}
    del gap[s2][lid]
    f = tmp_path / "lfts"
    f.write_text(dump_text(fabric, gap, lid))
    back = route(f"file:{f}", rin)
    assert lid not in back[s2] and lid in back[next(g for g in rin.switches if g != s2)]


# ------------------------------------------------------------------- sweep + verify
@pytest.mark.parametrize("engine", ["minhop", "updn"])
def test_sweep_on_the_simulator_then_verify(engine, tmp_path):
    """End to end without ibsim: sweep the in-process simulator, read the tables back."""
    from smagent import sweep
    from smagent.transport.sim import SimTransport
    t = SimTransport(topogen.torus_2d(3, 3))
    # minhop's credit loops are refused unless allowed (tests/unit/test_dfsssp.py)
    r = sweep.sweep(t, sweep.SweepOptions(routing=engine, allow_defects=engine == "minhop"))
    assert r.problems == []
    rep = verify.verify(t, mcast=False)
    if engine == "updn":
        assert rep.ok, rep.defects
    else:
        assert set(rep.defects) == {"cdg_cycle"}
    assert rep.summary["pairs_unreachable"] == 0 and rep.summary["lids"] == 18
