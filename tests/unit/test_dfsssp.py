"""dfsssp: every pair routed, no credit loop on any VL (checked here from the tables and
the SLs, independently of the engine and of verify), the VLs within what ports run,
balance against minhop."""
import pytest

from cycle_witness import link_loads, vl_cycle
from smagent.model import netfile, topogen
from smagent import routing, verify
from smagent.routing import RoutingError, RoutingInput



FABRICS = {
    "torus": lambda: topogen.torus_2d(5, 3, 2),
    "mesh": lambda: topogen.mesh_2d(4, 3, 2),
    "ft3": lambda: topogen.fat_tree_3(4),
    "damaged_tree": topogen.damaged_fat_tree_2,
    "ring": lambda: topogen.torus_2d(6, 1, 1),
}


def prepared(fabric, lmc):
    """ibsim's GUIDs, LIDs in node order (switches first): what verify's snapshot needs."""
    netfile.assign_ibsim_guids(fabric)
    lid = 1
    for n in fabric.switches():
        n.lids[0], lid = lid, lid + 1
    for n in fabric.cas():
        for p, _peer in fabric.connected_ports(n):
            lid = -(-lid // (1 << lmc)) * (1 << lmc)
            n.lids[p] = lid
            if lmc:
                n.lmcs[p] = lmc
            lid += 1 << lmc
    return fabric


@pytest.mark.parametrize("name", sorted(FABRICS))
def test_dfsssp_routes_every_pair_without_a_credit_loop_on_any_vl(name):
    lmc = 1 if name == "mesh" else 0
    fabric = prepared(FABRICS[name](), lmc)
    rin = RoutingInput.from_fabric(fabric, lmc=lmc)
    routes = routing.route("dfsssp", rin)
    assert routes.sls is not None and 1 <= routes.layers <= 8
    assert max(max(v) for v in routes.sls.values()) < routes.layers
    assert vl_cycle(rin, routes, routes.sls) is None  # also: every pair routed, no loop
    snap = verify.snapshot_from_routes(fabric, routes, lmc=lmc)
    snap.path_sl = routes.sls  # no SL2VL tables read: SL n on VL n, as the sweep writes them
    rep = verify.check(snap)
    assert rep.ok and rep.summary["pairs_unreachable"] == 0, rep.defects
    if name in ("torus", "mesh", "ring"):  # the check can fail: minhop's shortest paths loop
        assert vl_cycle(rin, routing.route("minhop", rin)) is not None
    if name in ("torus", "ring"):  # and dfsssp's own, all on one VL (its layers break them)
        assert vl_cycle(rin, routes) is not None


def test_layers_fit_the_vls_the_ports_run_or_the_engine_refuses():
    f = topogen.torus_2d(5, 3, 2)
    rin = RoutingInput.from_fabric(f)
    rin.data_vls = 1
    with pytest.raises(RoutingError, match=r"dfsssp needs 2 virtual lanes .* only 1 data VL"):
        routing.route("dfsssp", rin)
    rin.data_vls = 4
    routes = routing.route("dfsssp", rin)
    assert routes.layers == 4 and vl_cycle(rin, routes, routes.sls) is None
    counts = [0] * 4
    for sl_of in routes.sls.values():
        for lid in rin.lid_homes:
            counts[sl_of[lid]] += 1
    assert min(counts) > 0  # every VL carries paths: the layers are spread


def test_dfsssp_loads_the_hottest_link_no_more_than_minhop_or_updn():
    rin = RoutingInput.from_fabric(topogen.torus_2d(5, 3, 2))
    hot = {e: max(link_loads(rin, routing.route(e, rin)).values()) for e in ("dfsssp", "minhop", "updn")}
    assert hot["dfsssp"] <= hot["minhop"] and hot["dfsssp"] < hot["updn"], hot


def test_the_spec_parser_knows_dfsssp():
    assert routing.parse_spec("DFSSSP").engine == "dfsssp"
    with pytest.raises(RoutingError, match="dfsssp takes no argument"):
        routing.parse_spec("dfsssp:x")


# ------------------------------------------------------------------ sweep + verify
@pytest.fixture(scope="module")
def swept_torus():
    """A 5x3 torus with two hosts a switch, swept with dfsssp on the in-process simulator."""
    from smagent import sweep
    from smagent.transport.sim import SimTransport
    t = SimTransport(topogen.torus_2d(5, 3, 2))
    r = sweep.sweep(t, sweep.SweepOptions(routing="dfsssp"))
    return t, r


def test_sweep_writes_sl2vl_tables_that_carry_each_layer_and_verify_finds_no_loop(swept_torus):
    from smagent import verify
    t, r = swept_torus
    assert r.problems == [] and r.path_sls is not None
    assert not any("channel dependency cycle" in n for n in r.notes)  # the plan check agrees
    assert any(c.kind == "sl2vl" for c in r.link_changes)  # ibsim-like identity SL15->VL15 is rewritten
    snap = verify.collect(t, mcast=False)
    assert snap.tables_read and snap.sl2vl
    for table in snap.sl2vl.values():  # read back: each layer's SL on its VL at every hop
        assert all(table[sl] == sl for sl in range(8))
    snap.path_sl = r.path_sls
    rep = verify.check(snap)
    assert rep.ok, rep.defects
    # without the SLs every path rides VL 0: the loops the layers break are reported
    snap.path_sl = None
    rep = verify.check(snap)
    assert set(rep.defects) == {"cdg_cycle"}
    # and SL2VL tables folding every SL onto VL 0 bring them back, SLs or not
    snap.path_sl = r.path_sls
    snap.sl2vl = {k: (0,) * 16 for k in snap.sl2vl}
    rep = verify.check(snap)
    assert set(rep.defects) == {"cdg_cycle"} and rep.defects["cdg_cycle"]["cycle"][0]["vl"] == 0


def test_verify_with_the_sls_a_sweep_gives(swept_torus):
    from smagent import verify
    t, r = swept_torus
    assert verify.verify(t, mcast=False, path_sl=r.path_sls).ok


# ------------------------------------------------- the sweep refuses a credit loop
def sets(t) -> int:
    return sum(v for k, v in t.stats.by_kind.items() if k.startswith("SubnSet("))


@pytest.fixture
def on(monkeypatch):
    """Make the CLI run on a given transport: on(t)."""
    from smagent import api

    def use(t):
        monkeypatch.setattr("smagent.cli.Context.session", lambda self: api.Session(t))
    return use


def test_minhop_on_a_torus_is_refused_naming_the_loop_unless_allowed(cli, on, tmp_path):
    import json
    from smagent.errors import EXIT_DEFECTS, EXIT_OK, EXIT_SAFETY
    from smagent.transport.sim import SimTransport
    t = SimTransport(topogen.torus_2d(5, 3, 2))
    on(t)
    r = cli("sweep", "--routing", "minhop", "--json")
    assert r.exit_code == EXIT_SAFETY, r.output
    cyc = json.loads(r.stdout)["defects"]["cdg_cycle"]
    assert cyc["count"] == 1 and all(h["switch"].startswith("T") for h in cyc["cycle"])
    assert sets(t) == 0, "refused before the first Set"
    r = cli("sweep", "--routing", "minhop")
    assert r.exit_code == EXIT_SAFETY and "cdg_cycle: channel dependency cycle of" in r.stderr, r.output
    assert sets(t) == 0
    r = cli("sweep", "--routing", "dfsssp", "--state-dir", tmp_path / "st")
    assert r.exit_code == EXIT_OK and sets(t) > 0, r.output
    from smagent.planning import pathsl
    sls = pathsl.load(tmp_path / "st" / "path_sls")
    assert len(sls) == 15 and max(max(row) for row in sls.values()) > 0
    r = cli("verify", "--json", "--path-sls", tmp_path / "st" / "path_sls")
    assert r.exit_code == EXIT_OK and json.loads(r.stdout)["ok"], r.output
    assert cli("verify").exit_code == 1, "without the SLs every path rides SL 0: the loops are real"
    r = cli("verify", "--state-dir", tmp_path / "st")  # the sweep's SLs, without --path-sls
    assert r.exit_code == EXIT_OK, r.output
    r = cli("sweep", "--routing", "minhop", "--allow-defects", "--state-dir", tmp_path / "st")
    assert r.exit_code == EXIT_DEFECTS and "cdg_cycle" in r.output, r.output  # written, and said
    assert not (tmp_path / "st" / "path_sls").exists(), "minhop puts every path on SL 0: no stale SLs"
    assert cli("verify").exit_code == 1


def test_path_sl_file_is_checked_whole(cli, tmp_path):
    from smagent.planning import pathsl
    from smagent.errors import EXIT_BAD_INPUT, BadInput
    f = tmp_path / "path_sls"
    sls = {0x20: bytes([0, 1, 2, 0]), 0x21: bytes([3, 0])}
    pathsl.save(f, sls)
    assert pathsl.load(f) == sls
    data = bytearray(f.read_bytes())
    data[len(pathsl.MAGIC) + 10] ^= 1
    f.write_bytes(bytes(data))
    with pytest.raises(BadInput, match="checksum mismatch"):
        pathsl.load(f)
    f.write_bytes(b"hello")
    r = cli("verify", "--path-sls", f)
    assert r.exit_code == EXIT_BAD_INPUT and "not a smagent path SL file" in r.stderr, r.output
    r = cli("verify", "--path-sls", tmp_path / "missing")
    assert r.exit_code == EXIT_BAD_INPUT and "missing" in r.stderr, r.output


def test_layers_without_the_sl2vl_tables_to_carry_them_are_refused_before_any_set(cli, on):
    from smagent.errors import EXIT_BAD_INPUT
    from smagent.transport.sim import SimTransport
    t = SimTransport(topogen.torus_2d(5, 3, 2))
    on(t)
    r = cli("sweep", "--routing", "dfsssp", "--no-qos")
    assert r.exit_code == EXIT_BAD_INPUT and "--no-qos leaves the SL2VL tables" in r.stderr, r.output
    assert sets(t) == 0


def test_qos_auto_rewrites_usable_tables_that_fold_the_layers_together():
    """Tables that put every SL on VL0 carry data (qos "auto" leaves them for minhop) but
    would fold dfsssp's layers into one VL: a dfsssp sweep rewrites them."""
    from smagent import linkconf as links, sweep, verify
    from smagent.transport.sim import SimTransport
    t = SimTransport(topogen.torus_2d(5, 3, 2))
    flat = links.LinkOptions(qos=True, sl2vl=(0,) * 16)
    assert sweep.sweep(t, sweep.SweepOptions(routing="updn", links=flat)).problems == []
    assert not any(c.kind == "sl2vl" for c in sweep.sweep(t, sweep.SweepOptions(routing="updn")).link_changes)
    r = sweep.sweep(t, sweep.SweepOptions(routing="dfsssp"))
    assert r.problems == [] and any(c.kind == "sl2vl" for c in r.link_changes)
    assert any("the routing layers SLs 0..7 on VLs 0..7" in n for n in r.notes), r.notes
    snap = verify.collect(t, mcast=False)
    snap.path_sl = r.path_sls
    assert verify.check(snap).ok


def test_paths_shows_the_sl_of_a_pair(cli, on, tmp_path):
    import json
    from smagent import api
    from smagent.planning import pathsl
    from smagent.transport.sim import SimTransport
    t = SimTransport(topogen.torus_2d(5, 3, 2))
    on(t)
    st = tmp_path / "st"
    assert cli("sweep", "--routing", "dfsssp", "--state-dir", st).exit_code == 0
    sls = pathsl.load(st / "path_sls")
    topo = api.Session(t).discover()
    hosts = sorted((n for n in topo.cas()), key=lambda n: n.lid(1))
    shown = set()
    for src in hosts[:4]:
        switch = topo.links[(src.guid, 1)][0]
        for dst in hosts:
            r = cli("paths", src.lid(1), dst.lid(1), "--state-dir", st, "--json")
            assert r.exit_code == 0, r.output
            doc = json.loads(r.stdout)
            assert doc["sl"] == sls[switch][dst.lid(1)] and doc["switch"] == topo.nodes[switch].description
            shown.add(doc["sl"])
    assert len(shown) > 1
    r = cli("paths", hosts[0].lid(1), hosts[1].lid(1), "--state-dir", st)
    assert r.stdout.startswith(f"LID {hosts[0].lid(1)} -> LID {hosts[1].lid(1)}: SL ")
    r = cli("paths", 999, 1, "--state-dir", st)
    assert r.exit_code == 2 and "LID 999 is no port's LID" in r.stderr, r.output
    r = cli("paths", hosts[0].lid(1), 1, "--state-dir", tmp_path / "empty")
    assert r.exit_code == 0 and "SL 0" in r.stdout and "every path on SL 0" in r.stdout
