"""`smagent report`: the layout of the fabric (tree levels, grids recovered from the
cabling, layers), every link's load in `verify --json`, and the picture's artists."""
import json
import pathlib

import pytest
from click.testing import CliRunner

from smagent.verify import balance
from smagent.commands import report_layout as layout
from smagent.model import topogen
from smagent import verify
from smagent.cli import main
from smagent.routing import route
from routing_inputs import damaged_ft2, damaged_ft3
from routing_inputs import rin_of

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures"


def graph(fabric):
    """(switch names, switch-to-switch cables, CA ports per switch) of a topogen fabric."""
    names = [n.name for n in fabric.switches()]
    hosts = {s: 0 for s in names}
    cables = []
    for a, b in fabric.links():
        if a.node in hosts and b.node in hosts:
            cables.append((a.node, b.node))
        else:
            hosts[a.node if a.node in hosts else b.node] += 1
    return names, cables, hosts


def figures(fabric, engine="ftree"):
    return balance.compute(verify.snapshot_from_routes(fabric, route(engine, rin_of(fabric))))


# ------------------------------------------------------------------- layout
@pytest.mark.parametrize("make, want", [
    (lambda: topogen.fat_tree_2(8), {"L": 1, "S": 2}),
    (lambda: topogen.fat_tree_3(8), {"L": 1, "A": 2, "S": 3}),
    (damaged_ft3, {"L": 1, "A": 2, "S": 3}),
    (damaged_ft2, {"L": 1, "S": 2}),
], ids=["ft2", "ft3", "ft3-damaged", "ft2-damaged-dual"])
def test_tree_levels(make, want):
    lay = layout.compute(*graph(make()))
    assert lay.kind == "tree"
    assert {s: lay.rank[s] for s in lay.rank} == {s: want[s[0]] for s in lay.rank}
    assert all(lay.pos[s][1] == lay.rank[s] for s in lay.rank)  # leaves at the bottom


def test_tree_pods_and_groups():
    lay = layout.compute(*graph(topogen.fat_tree_3(8)))
    pods = {}
    for s, p in lay.pod.items():
        pods.setdefault(p, set()).add(s)
    # pod p: leaves L(4p..4p+3) and aggregation switches A(4p..4p+3)
    assert sorted(sorted(m) for m in pods.values()) == sorted(
        sorted([f"L{4 * p + i}" for i in range(4)] + [f"A{4 * p + i}" for i in range(4)]) for p in range(8))
    names, cables, _hosts = graph(topogen.fat_tree_3(8))
    group = layout.aggregate(lay, layout.neighbours(names, cables))
    assert len(set(group.values())) == 8 + 8 + 4  # leaves and aggs per pod, cores by the position they serve
    # core S(a*4+c) reaches aggregation switch a of every pod: the cores of one a are one group
    for a in range(4):
        assert len({group[f"S{a * 4 + c}"] for c in range(4)}) == 1


def _symmetric(coords, size, wrap, name_xy):
    """The recovered coordinates are the names' up to a symmetry of the grid: a swap of
    the dimensions, a reflection of each, and (on a torus) a rotation of each."""
    X, Y = size
    pts = {s: name_xy(s) for s in coords}
    for swap in (False, True):
        p = {s: (y, x) if swap else (x, y) for s, (x, y) in pts.items()}
        if max(v[0] for v in p.values()) + 1 != X:
            continue
        for fx in (1, -1):
            for fy in (1, -1):
                for ox in range(X if wrap[0] else 1):
                    for oy in range(Y if wrap[1] else 1):
                        def map_(v):
                            x, y = fx * v[0] + ox, fy * v[1] + oy
                            return (x % X if wrap[0] else x + (X - 1 if fx < 0 else 0),
                                    y % Y if wrap[1] else y + (Y - 1 if fy < 0 else 0))
                        if all(map_(p[s]) == coords[s] for s in coords):
                            return True
    return False


def _name_xy(s):
    x, y = s[1:].split("_")
    return int(x), int(y)


@pytest.mark.parametrize("x, y, wrap", [(6, 5, True), (4, 4, True), (3, 5, True), (5, 4, False), (2, 6, False)])
def test_grid_recovered_up_to_symmetry(x, y, wrap):
    make = topogen.torus_2d if wrap else topogen.mesh_2d
    names, cables, hosts = graph(make(x, y, 2))
    # names are not relied on: the same fabric under shuffled, meaningless names
    alias = {s: f"sw{(i * 7919) % 1000:03d}_{i}" for i, s in enumerate(names)}
    back = {v: k for k, v in alias.items()}
    lay = layout.compute([alias[s] for s in reversed(names)], [(alias[a], alias[b]) for a, b in cables],
                         {alias[s]: h for s, h in hosts.items()})
    assert lay.kind == "grid"
    assert lay.size == (max(x, y), min(x, y)) and lay.wrap == ((wrap and max(x, y) > 2, wrap and min(x, y) > 2))
    X, Y = lay.size
    assert len(set(lay.coords.values())) == X * Y
    for a, b in cables:  # every cable one step along one dimension (wrapping on a torus)
        (ax, ay), (bx, by) = lay.coords[alias[a]], lay.coords[alias[b]]
        assert sorted([(ax - bx) % X if wrap else abs(ax - bx), (ay - by) % Y if wrap else abs(ay - by)]) in (
            [0, 1], [0, X - 1], [0, Y - 1])
    if (x, y) != (4, 4):  # a 4 x 4 torus is a 4-cube as well: it has more grid drawings than these
        assert _symmetric(lay.coords, lay.size, lay.wrap, lambda s: _name_xy(back[s]))


def test_other_shapes_are_layered():
    # two switches joined by two cables, hosts on both: neither a tree nor a grid
    lay = layout.compute(*graph(topogen.two_switch()))
    assert lay.kind == "layered" and set(lay.rank.values()) == {1}
    # a ring of 5 switches with a chord: every switch a leaf, one line bent
    names = [f"r{i}" for i in range(5)]
    cables = [(names[i], names[(i + 1) % 5]) for i in range(5)] + [("r0", "r2")]
    lay = layout.compute(names, cables, {"r0": 1})
    assert lay.kind == "layered" and lay.rank == {"r0": 1, "r1": 2, "r2": 2, "r4": 2, "r3": 3}


# ------------------------------------------------------------------- every link's load
def test_every_directed_link_kept():
    f = damaged_ft2()
    b = figures(f)
    assert len(b["link_loads"]) == b["links"] == 2 * sum(
        1 for a, z in f.links() if a.node[0] in "LS" and z.node[0] in "LS")
    assert sum(r[4] for r in b["link_loads"]) == b["routes"] and max(r[4] for r in b["link_loads"]) == b["max"]
    ideal = {(lv["from"], lv["to"]): lv["ideal"] for lv in b["levels"]}
    level = {"L": 1, "S": 2}
    name = {s[0]: s[1] for s in b["switches"]}
    for frm, _fp, to, _tp, _load, want in b["link_loads"]:
        assert want == ideal[(level[name[frm][0]], level[name[to][0]])]
    assert {s[1]: s[2] for s in b["switches"]}["L0"] == 4  # H0, H2, H3 and D0's port 1


def test_verify_json_round_trips_into_report(tmp_path):
    fx = str(FIXTURES / "torus-4x4-swept.erf")
    r = CliRunner().invoke(main, ["--transport", "replay", "--fixture", fx, "verify", "--json", "--no-mcast"])
    assert r.exit_code in (0, 1), r.output
    saved = tmp_path / "v.json"
    saved.write_text(r.output)
    # one link record a line: compact at 11,664 hosts (3.2 MB there)
    assert any(line.strip().startswith('["0x') and line.rstrip().endswith("],") for line in r.output.splitlines())
    b = json.loads(r.output)["balance"]
    assert len(b["link_loads"]) == b["links"] == 64 and len(b["switches"]) == 16
    out = tmp_path / "t.svg"
    r = CliRunner().invoke(main, ["report", str(out), "--from-json", str(saved), "--json", "--engine", "minhop"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["balance"] == b
    assert doc["drawn"]["kind"] == "grid" and doc["drawn"]["lines"] == 32 and doc["drawn"]["halves"] == 64
    assert "<svg" in out.read_text()[:2000]


def test_report_output_checked_before_the_fabric_is_read(tmp_path, monkeypatch):
    from smagent.commands import report_cmd
    monkeypatch.setattr(report_cmd, "_measure", lambda *a: pytest.fail("the fabric was read"))
    r = CliRunner().invoke(main, ["report", str(tmp_path / "no-such-dir" / "x.png")])
    assert r.exit_code == 2 and "does not exist" in r.output


def test_report_refuses_figures_without_link_loads(tmp_path):
    b = figures(topogen.fat_tree_2(4))
    for drop in ("link_loads", "switches"):
        old = {k: v for k, v in b.items() if k != drop}
        saved = tmp_path / f"old-{drop}.json"
        saved.write_text(json.dumps({"balance": old}))
        r = CliRunner().invoke(main, ["report", str(tmp_path / "x.png"), "--from-json", str(saved)])
        assert r.exit_code == 2 and "verify --json` again" in r.output, r.output
    bad = dict(b, link_loads=[["0x1", 1, "0x2", 1, 3, 1.0]])
    (tmp_path / "bad.json").write_text(json.dumps({"balance": bad}))
    r = CliRunner().invoke(main, ["report", str(tmp_path / "x.png"), "--from-json", str(tmp_path / "bad.json")])
    assert r.exit_code == 2 and "link_loads names a switch" in r.output


# ------------------------------------------------------------------- the picture
def _links(fig):
    (coll,) = [c for c in fig.axes[0].collections if c.get_gid() == "links"]
    return coll


def test_balanced_tree_is_neutral_and_unlabelled():
    from matplotlib import pyplot as plt

    from smagent.commands.report_picture import figure
    fig, shown = figure(figures(topogen.fat_tree_3(4)), "t")
    try:
        coll = _links(fig)
        assert len(coll.get_segments()) == shown["halves"] == 64  # 32 cables, two halves each
        assert shown["lines"] == 32 and shown["labelled"] == 0 and shown["kind"] == "tree"
        assert set(coll.get_array().tolist()) == {1.0}  # every link on its ideal: the neutral colour
        assert not [t for t in fig.axes[0].texts if "/" in t.get_text()]
        hosts = [c for c in fig.axes[0].collections if c.get_gid() == "hosts"]
        assert len(hosts[0].get_offsets()) == 16
    finally:
        plt.close(fig)


def test_damaged_tree_labels_the_overloaded_links():
    from matplotlib import pyplot as plt

    from smagent.commands.report_picture import LABELS, figure
    b = figures(damaged_ft3(), "ftree")
    fig, shown = figure(b, "t")
    try:
        vals = _links(fig).get_array().tolist()
        worst = max(r[4] / r[5] for r in b["link_loads"])
        assert max(vals) == pytest.approx(worst) and worst > 1.2
        over = sum(1 for v in vals if v > 1.001)
        assert 0 < shown["labelled"] <= min(LABELS, over)
        labels = [t.get_text() for t in fig.axes[0].texts if "/" in t.get_text()]
        hottest = max(b["link_loads"], key=lambda r: r[4] / r[5])
        assert labels[0].startswith(f"{hottest[4]:,}/")
        assert shown["worst"][0] == pytest.approx(worst)
    finally:
        plt.close(fig)


def test_missing_cables_are_drawn_dashed():
    """A damaged tree shows where it is damaged: the cables its regularity says are missing,
    dashed; a whole tree and a whole torus have none."""
    from matplotlib import pyplot as plt

    from smagent.commands.report_picture import figure
    damaged = topogen.variant(topogen.fat_tree_2(8), drop_links=[(("L0", 5), ("S0", 1)), (("L3", 8), ("S3", 4))])
    for fabric, missing in ((topogen.fat_tree_2(8), 0), (damaged, 2), (topogen.torus_2d(4, 4, 1), 0),
                            (topogen.fat_tree_3(4), 0), (damaged_ft3(), 1)):
        fig, shown = figure(figures(fabric, "updn"), "t")
        try:
            assert shown["missing_cables"] == missing, fabric
            dashed = [c for c in fig.axes[0].collections if c.get_gid() == "missing"]
            assert len(dashed[0].get_segments()) == missing if missing else not dashed
        finally:
            plt.close(fig)


def test_big_tree_drawn_by_groups(monkeypatch, tmp_path):
    from matplotlib import pyplot as plt

    from smagent.commands import report_picture
    monkeypatch.setattr(layout, "AGGREGATE_ABOVE", 30)
    fig, shown = report_picture.figure(figures(topogen.fat_tree_3(8)), "t")
    try:
        assert shown["aggregated"] and shown["nodes"] == 8 + 8 + 4
        # within a pod one leaf-group to agg-group line; each agg group reaches the 4 core groups
        assert shown["lines"] == 8 + 8 * 4 and len(_links(fig).get_segments()) == 2 * shown["lines"]
        assert not [c for c in fig.axes[0].collections if c.get_gid() == "hosts"]
    finally:
        plt.close(fig)


def test_grid_picture_has_wraparound_stubs(tmp_path):
    from matplotlib import pyplot as plt

    from smagent.commands.report_picture import figure
    b = figures(topogen.torus_2d(5, 3), "dfsssp")
    fig, shown = figure(b, "t")
    try:
        assert shown["kind"] == "grid" and shown["lines"] == 30
        # the ideal per dimension: the 5-long rings carry more than the 3-long ones
        name = {s[0]: s[1] for s in b["switches"]}
        along_x = [r[4] for r in b["link_loads"] if _name_xy(name[r[0]])[1] == _name_xy(name[r[2]])[1]]
        along_y = [r[4] for r in b["link_loads"] if _name_xy(name[r[0]])[0] == _name_xy(name[r[2]])[0]]
        assert shown["grid_ideals"] == (round(sum(along_x) / 30, 2), round(sum(along_y) / 30, 2))
        assert shown["grid_ideals"][0] > shown["grid_ideals"][1]
        segs = _links(fig).get_segments()
        # the wrap-around cables (x: 3 rows, y: 5 columns) are stubs off the grid's edge
        off = [s for s in segs if s[1][0] < 0 or s[1][0] > 4 or s[1][1] < 0 or s[1][1] > 2]
        assert len(off) == 2 * (3 + 5)
    finally:
        plt.close(fig)


def test_png_written_and_max_over_ideal_printed(tmp_path):
    saved = tmp_path / "d.json"
    saved.write_text(json.dumps({"balance": figures(damaged_ft2())}))
    png = tmp_path / "d.png"
    r = CliRunner().invoke(main, ["report", str(png), "--from-json", str(saved), "--engine", "ftree"])
    assert r.exit_code == 0, r.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    assert "tree layout, 12 nodes, 30 lines" in r.output and "x ideal" in r.output
