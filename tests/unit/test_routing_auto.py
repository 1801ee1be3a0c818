"""routing auto (the default): the engine it picks on fat trees, damaged trees, tori,
meshes and Dragonfly+, every pair routed with no credit loop on any VL (the tests' own
walk, `cycle_witness`); updn when the VLs cannot carry dfsssp's layers; the same fabric,
the same choice; a running SM keeping its engine while a link flaps; ftree's fallback
being any engine; the choice named in the sweep's text and --json and the daemon's status."""
from __future__ import annotations

import json

import pytest

from cycle_witness import vl_cycle
from routing_inputs import damaged_ft2, damaged_ft3, rin_of
from smagent import routing
from smagent.model import topogen
from smagent.routing import AutoMemory, RoutingError


def tables(routes) -> dict:
    return {g: bytes(t.ports) for g, t in routes.items()}


def fat_tree_with(leaf_cable: bool):
    """fat_tree_2(8) with H1 and H5 unplugged; ``leaf_cable``: their freed ports L0:2 and
    L1:2 cabled to each other (a miscabled link: the fabric stops being a fat tree). The
    same nodes either way, so the GUIDs match."""
    f = topogen.variant(topogen.fat_tree_2(8), drop_links=[(("H1", 1), ("L0", 2)), (("H5", 1), ("L1", 2))])
    if leaf_cable:
        f.connect("L0", 2, "L1", 2)
    return f


CHOICES = {
    "ft2": (lambda: topogen.fat_tree_2(8), "ftree"),
    "ft3": (lambda: topogen.fat_tree_3(4), "ftree"),
    "damaged_ft2": (damaged_ft2, "dfsssp"),  # ftree routes them, but its balance is not ideal there
    "damaged_ft3": (damaged_ft3, "dfsssp"),
    "ft2_hosts_missing": (lambda: fat_tree_with(False), "ftree"),  # hosts missing: still complete
    "tree_with_a_switch_under_a_leaf": (topogen.damaged_fat_tree_2, "dfsssp"),
    "torus": (lambda: topogen.torus_2d(6, 3, 1), "dfsssp"),
    "mesh": (lambda: topogen.mesh_2d(5, 5, 1), "dfsssp"),
    "dragonfly_plus": (lambda: topogen.dragonfly_plus(4, 2, 2, 2), "dfsssp"),
}


@pytest.mark.parametrize("name", sorted(CHOICES))
def test_auto_picks_the_best_deadlock_free_engine_and_routes_every_pair(name):
    make, want = CHOICES[name]
    rin = rin_of(make())
    rin.data_vls = 8
    routes = routing.route("auto", rin)
    assert routes.chosen is not None and routes.chosen[0] == want, routes.chosen
    assert vl_cycle(rin, routes, routes.sls) is None  # every pair routed, no loop, no credit loop
    if want != "ftree":
        assert "(ftree: " in routes.chosen[1]  # why ftree was passed over
    again = routing.route("auto", rin_of(make()))  # the same fabric, the same choice and tables
    assert again.chosen == routes.chosen and tables(again) == tables(routes)


def test_a_cable_missing_from_a_fat_tree_takes_dfsssp_which_cools_the_hottest_link():
    """ftree routes a tree with a switch and a cable gone, but its balance is no longer
    ideal: dfsssp, balancing by the load links carry, does better (the tests' own count)."""
    from cycle_witness import link_loads
    rin = rin_of(damaged_ft3())
    routes = routing.route("auto", rin)
    assert routes.chosen[0] == "dfsssp" and "an incomplete fat tree: level-" in routes.chosen[1], routes.chosen
    hot = {e: max(link_loads(rin, routing.route(e, rin)).values()) for e in ("ftree", "minhop", "updn")}
    assert max(link_loads(rin, routes).values()) < min(hot.values()), hot
    memory = AutoMemory("ftree")  # a running SM that chose ftree before the cut keeps it
    assert routing.route("auto", rin, memory=memory).chosen[0] == "ftree"


def test_torus_needs_layers_so_too_few_vls_means_updn():
    rin = rin_of(topogen.torus_2d(6, 3, 1))
    rin.data_vls = 8
    assert routing.route("auto", rin).needed == 2  # the rings' credit loops: dfsssp layers them
    rin.data_vls = 1
    routes = routing.route("auto", rin)
    engine, why = routes.chosen
    assert engine == "updn" and "dfsssp needs 2 virtual lanes" in why, why
    assert routes.sls is None and vl_cycle(rin, routes) is None


def test_a_running_sm_keeps_its_engine_while_a_link_flaps():
    """Fat tree -> ftree; a leaf-to-leaf cable appears: ftree cannot, dfsssp; the cable
    goes and comes back: dfsssp stays (it still routes deadlock-free), where a fresh
    choice would flip to ftree and back, re-routing every switch each time."""
    memory = AutoMemory()
    assert routing.route("auto", rin_of(fat_tree_with(False)), memory=memory).chosen[0] == "ftree"
    got = routing.route("auto", rin_of(fat_tree_with(True)), memory=memory).chosen
    assert got[0] == "dfsssp" and memory.engine == "dfsssp"
    for leaf_cable in (False, True, False):
        rin = rin_of(fat_tree_with(leaf_cable))
        routes = routing.route("auto", rin, memory=memory)
        assert routes.chosen[0] == "dfsssp" and vl_cycle(rin, routes, routes.sls) is None
        if not leaf_cable:
            assert routes.chosen[1].startswith("kept from the previous sweep")
            assert routing.route("auto", rin).chosen[0] == "ftree"  # no memory: chosen afresh
    torus = rin_of(topogen.torus_2d(6, 3, 1))
    torus.data_vls = 1  # the kept engine no longer fits: auto moves on, and remembers
    assert routing.route("auto", torus, memory=memory).chosen[0] == "updn" and memory.engine == "updn"


@pytest.mark.parametrize("fallback", ["dfsssp", "auto", "minhop"])
def test_any_engine_may_be_ftrees_fallback(fallback):
    rin = rin_of(topogen.torus_2d(5, 3, 2))
    got = routing.route(f"ftree:fallback={fallback}", rin)
    assert tables(got) == tables(routing.route(fallback, rin))
    assert got.notes[0].startswith(f"ftree: not a fat tree") and f"routed with {fallback} instead" in got.notes[0]
    with pytest.raises(RoutingError, match="the fallback is another engine"):
        routing.parse_spec("ftree:fallback=ftree")


def test_a_file_fallback_is_loaded_before_any_smp(tmp_path):
    with pytest.raises(RoutingError, match="missing.dump"):
        routing.preload("ftree:fallback=file:" + str(tmp_path / "missing.dump"))


def test_the_default_is_auto():
    from smagent.sweep import SweepOptions
    assert routing.DEFAULT.engine == "auto" and routing.parse_spec(SweepOptions().routing) == routing.DEFAULT


# ------------------------------------------------------------- the sweep names it
def test_sweep_without_routing_brings_up_a_torus_and_names_the_choice(cli, monkeypatch, tmp_path):
    from smagent import api
    from smagent.errors import EXIT_OK
    from smagent.transport.sim import SimTransport
    t = SimTransport(topogen.torus_2d(5, 3, 2))
    monkeypatch.setattr("smagent.cli.Context.session", lambda self: api.Session(t))
    r = cli("sweep", "--json", "--state-dir", tmp_path / "st")
    assert r.exit_code == EXIT_OK, r.output
    got = json.loads(r.stdout)["routing"]
    assert got["engine"] == "dfsssp" and "2 layers" in got["reason"], got
    assert cli("verify", "--path-sls", tmp_path / "st" / "path_sls").exit_code == EXIT_OK
    r = cli("sweep", "--dry-run", "--no-qos")  # the SL2VL tables left alone carry no layer: updn
    assert r.exit_code == EXIT_OK and "# routing: updn (up*/down* is deadlock-free on any fabric" in r.stdout, r.output


def test_the_daemon_status_names_the_engine_and_keeps_it_through_a_flap():
    from smagent.sm.daemon import Daemon, DaemonOptions
    from smagent.transport.sim import SimTransport
    t = SimTransport(fat_tree_with(True))
    t.serve()
    now = [1000.0]
    d = Daemon(t, DaemonOptions(sweep_interval=10), clock=lambda: now[0])
    d.start()
    assert d.status()["routing"]["engine"] == "dfsssp"
    for _ in range(2):
        t.sim.unlink("L0", 2)  # the leaf-to-leaf cable flaps: a fat tree again, then not
        for _ in range(4):
            now[0] += 0.5
            d.step(max_wait=0)
        assert d.status()["routing"]["engine"] == "dfsssp", d.status()["routing"]
        t.sim.link("L0", 2, "L1", 2)
        for _ in range(4):
            now[0] += 0.5
            d.step(max_wait=0)
        assert d.status()["routing"]["engine"] == "dfsssp"
    assert d.counters.sweeps >= 3 and d.counters.sweeps_failed == 0
