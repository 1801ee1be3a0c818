"""The incremental route repair (`smagent.routing.patch`): after random cuts and lost
switches on fat trees and irregular fabrics, every pair is still routed, no credit loop
(`verify`'s check, `verify.cdg`), every path that moved is up*/down* under the ranking the
engine made the routes under, and only entries whose old path crossed what was lost
changed; a split fabric is refused (the sweep then routes afresh)."""
from __future__ import annotations

import random

import numpy as np
import pytest

from routing_inputs import prepared
from smagent import routing, verify
from smagent.model import topogen
from smagent.routing import RoutingInput
from smagent.routing import patch as patchmod
from smagent.routing.patch import Basis, PatchRefused, losses, patch


def carried(src, dst):
    """``dst`` (a `topogen.variant` of ``src``) with src's GUIDs and LIDs."""
    for n in dst:
        o = src.node(n.name)
        dst.set_guid(n, o.guid)
        n.lids.update(o.lids)
    return dst


def switch_links(f):
    return [((a.node, a.num), (b.node, b.num)) for a, b in f.links()
            if f.node(a.node).is_switch and f.node(b.node).is_switch]


def links_of(rin):
    return {(x, p): y for x, lst in rin.adjacency.items() for p, y in lst}


def walk(rin, routes, g, lid, nbr=None):
    """The switches (GUIDs) and exit ports from ``g`` to ``lid``'s home, by ``routes``
    (``nbr``: `links_of(rin)`, if worked out already)."""
    nbr = links_of(rin) if nbr is None else nbr
    hops = []
    for _ in range(64):
        p = routes[g][lid]
        hops.append((g, p))
        if (g, p) == rin.lid_homes[lid]:
            return hops
        g = nbr[(g, p)]
    raise AssertionError(f"loop from {g:#x} to LID {lid}")


def crosses(rin_old, routes, g, lid, lost_ends, lost_switches, nbr=None):
    return any((x, p) in lost_ends or x in lost_switches for x, p in walk(rin_old, routes, g, lid, nbr))


def is_updown(rin, routes, g, lid, heights, nbr=None):
    down = False
    nbr = links_of(rin) if nbr is None else nbr
    for x, p in walk(rin, routes, g, lid, nbr)[:-1]:
        up = heights[nbr[(x, p)]] > heights[x]
        if up and down:
            return False
        down = down or not up
    return True


def hop_counts(rin, routes, pairs):
    """Each (switch, LID)'s hop count by ``routes`` (None: it never gets there)."""
    nbr = links_of(rin)
    out = {}
    for g, lid in pairs:
        x = g
        for hops in range(64):
            p = routes[x][lid]
            if (x, p) == rin.lid_homes[lid] or (x, p) not in nbr:
                out[g, lid] = hops if (x, p) == rin.lid_homes[lid] else None
                break
            x = nbr[(x, p)]
    return out


def check_patch(f, engine, drop_links=(), drop_nodes=()):
    """Route ``f`` with ``engine``, lose links/switches, patch (what was lost known, as
    the SM patches); check it all, and every path that crossed the loss against the
    repair of every broken entry (no longer than it; up*/down* where it is)."""
    rin = RoutingInput.from_fabric(f)
    routes = routing.route(engine, rin)
    g = carried(f, topogen.variant(f, drop_links=drop_links, drop_nodes=drop_nodes))
    rin2 = RoutingInput.from_fabric(g)
    basis = Basis.of(routes.patch_rule, routing.parse_spec(engine), rin)
    suspects, lost, why = losses(basis, rin2)
    assert why is None and lost
    old = {s: bytes(routes[s].ports) for s in routes}
    done = patch(rin2, old, routes.patch_rule, suspects, patchmod.Lost.of(basis, rin2, old))
    new = done.routes
    rep = verify.check(verify.snapshot_from_routes(g, new))
    assert rep.summary["pairs_unreachable"] == 0
    if engine == "minhop":  # no deadlock promise: only that every pair is routed, loop-free
        assert not set(rep.defects) - {"cdg_cycle"}, rep.defects
    else:
        assert not rep.defects, rep.defects
    gone = {f.node(n).guid for n in drop_nodes}
    lost_ends = {(x, p) for x, p, _ in basis.links - Basis.of(routes.patch_rule, None, rin2).links}
    heights = routes.patch_rule.heights
    cas = {x for x, p in rin2.lid_homes.values() if p}
    changed = 0
    crossed = []
    nbr, nbr2 = links_of(rin), links_of(rin2)
    for s in rin2.switches:
        for lid in rin2.lid_homes:
            if crosses(rin, routes, s, lid, lost_ends, gone, nbr):
                crossed.append((s, lid))
                if heights is not None and s in cas and rin2.lid_homes[lid][1]:
                    assert is_updown(rin2, new, s, lid, heights, nbr2), (s, lid)
            if new[s][lid] == routes[s][lid]:
                continue
            changed += 1
            assert (s, lid) in crossed  # only what crossed the loss
    assert changed == done.moved - sum(len(rin2.switches) for lid in rin.lid_homes if lid not in rin2.lid_homes)
    whole = patch(rin2, old, routes.patch_rule, suspects).routes  # every broken entry re-decided
    mine, theirs = hop_counts(rin2, new, crossed), hop_counts(rin2, whole, crossed)
    assert all(mine[k] <= theirs[k] for k in crossed), [k for k in crossed if mine[k] > theirs[k]][:3]
    return done, routes, new


@pytest.mark.parametrize("engine", ["ftree", "updn", "minhop"])
@pytest.mark.parametrize("seed", range(6))
def test_random_cuts_in_a_fat_tree(engine, seed):
    f = prepared(topogen.fat_tree_3(8))
    cut = random.Random(seed).sample(switch_links(f), 1)
    done, _, _ = check_patch(f, engine, drop_links=cut)
    assert 0 < done.moved


def test_several_cables_at_once_are_routed_afresh():
    """Two cables with no switch in common: switch-LID paths extended around both closed
    a credit loop in a random trial (seed 3 of `random.sample`, k=8); not patched."""
    f = prepared(topogen.fat_tree_3(8))
    rin = RoutingInput.from_fabric(f)
    basis = Basis.of(routing.route("ftree", rin).patch_rule, None, rin)
    g = carried(f, topogen.variant(f, drop_links=[(("L0", 5), ("A0", 1)), (("L9", 6), ("A9", 2))]))
    assert "2 links lost at once" in losses(basis, RoutingInput.from_fabric(g))[2]
    one = carried(f, topogen.variant(f, drop_links=[(("L0", 5), ("A0", 1)), (("L1", 5), ("A0", 2))]))
    assert losses(basis, RoutingInput.from_fabric(one))[2] is None  # two links of one switch


@pytest.mark.parametrize("engine", ["ftree", "updn"])
@pytest.mark.parametrize("lost", [{"S0"}, {"A3"}, {"S13"}, {"A9"}])
def test_lost_switches_in_a_fat_tree(engine, lost):
    done, _, _ = check_patch(prepared(topogen.fat_tree_3(8)), engine, drop_nodes=lost)
    assert done.moved


IRREGULAR = {"torus": lambda: topogen.torus_2d(4, 4), "damaged_ft2": topogen.damaged_fat_tree_2,
             "mesh": lambda: topogen.mesh_2d(4, 3)}


@pytest.mark.parametrize("engine", ["updn", "minhop"])
@pytest.mark.parametrize("fabric", sorted(IRREGULAR))
def test_every_single_cut_in_irregular_fabrics(engine, fabric):
    """(Shortest paths instead of updn's rule break the up*/down* check in 45 of these 81
    cuts.)"""
    f = prepared(IRREGULAR[fabric]())
    patched = 0
    for link in switch_links(f):
        try:
            check_patch(f, engine, drop_links=[link])
            patched += 1
        except PatchRefused:  # the cut splits the switches, or updn's ranking
            continue
    assert patched >= len(switch_links(f)) // 2


def test_a_lost_leaf_uplink_moves_only_that_leafs_entries_and_its_hosts_evenly():
    """ftree: a leaf's uplink cut: the leaf sends what went up that link over the uplinks
    left, evenly (least-loaded), and the switches above move only the leaf's own LIDs."""
    f = prepared(topogen.fat_tree_3(8))
    done, old, new = check_patch(f, "ftree", drop_links=[(("L0", 5), ("A0", 1))])
    leaf = f.node("L0").guid
    rin = RoutingInput.from_fabric(f)
    ca = {lid for lid, (_g, p) in rin.lid_homes.items() if p}
    counts = {p: sum(1 for lid, port in new[leaf].items() if port == p and lid in ca) for p in (5, 6, 7, 8)}
    assert counts[5] == 0 and max(counts.values()) - min(counts[p] for p in (6, 7, 8)) <= 1, counts
    a0 = f.node("A0").guid  # above: of the hosts' LIDs only the leaf's own moved
    homes = {lid for lid, (g, _p) in rin.lid_homes.items() if g == leaf} & ca
    assert {lid for lid in ca if new[a0][lid] != old[a0][lid]} == homes


def test_a_split_is_refused():
    """A leaf that lost every uplink: no path to its hosts; the sweep routes afresh."""
    f = prepared(topogen.fat_tree_3(8))
    rin = RoutingInput.from_fabric(f)
    routes = routing.route("ftree", rin)
    g = carried(f, topogen.variant(f, drop_links=[(("L0", p), ("A%d" % (p - 5), 1)) for p in (5, 6, 7, 8)]))
    with pytest.raises(PatchRefused, match="no (up\\*/down\\* )?path"):
        patch(RoutingInput.from_fabric(g), {s: bytes(routes[s].ports) for s in routes}, routes.patch_rule)


def test_only_losses_are_patched():
    f = prepared(topogen.fat_tree_3(8))
    rin = RoutingInput.from_fabric(f)
    basis = Basis.of(routing.route("ftree", rin).patch_rule, None, rin)
    assert losses(basis, rin)[2] == "no link was lost"
    cut = carried(f, topogen.variant(f, drop_links=[(("L0", 5), ("A0", 1))]))
    assert "came up" in losses(Basis.of(basis.rule, None, RoutingInput.from_fabric(cut)), rin)[2]
    host = carried(f, topogen.variant(f, drop_nodes=["H3"]))  # only a LID gone: patched, nothing lost
    assert losses(basis, RoutingInput.from_fabric(host)) == (set(), 0, None)
    # the host back (a new LID, no link gained): every switch scanned, its LID routed
    assert losses(Basis.of(basis.rule, None, RoutingInput.from_fabric(host)), rin) == (None, 0, None)
    moved = RoutingInput.from_fabric(f)
    lid, other = min(moved.lid_homes), max(moved.lid_homes)
    moved.lid_homes[lid] = moved.lid_homes[other]  # a LID on another port: routed afresh
    assert f"LID {lid} is new or moved" == losses(basis, moved)[2]


def _dense_chains(nxt, heights):
    """The kept paths' cost, down-only and up*/down* flags by fixed point over every cell
    (the walk `_chains` replaces)."""
    at = np.arange(nxt.shape[1])
    kept = np.where(nxt == -2, 0, patchmod.INF)
    down_only, legal = nxt == -2, nxt == -2
    fine, to = nxt >= 0, np.maximum(nxt, 0)
    goes_down = heights[to] < heights[:, None]
    while True:
        k2 = np.where(fine, np.minimum(kept[to, at] + 1, patchmod.INF), kept)  # a loop stays INF
        d2 = np.where(fine, down_only[to, at] & goes_down, down_only)
        l2 = np.where(fine, d2 | (~goes_down & legal[to, at]), legal)
        if (k2 == kept).all() and (d2 == down_only).all() and (l2 == legal).all():
            return kept, down_only, legal
        kept, down_only, legal = k2, d2, l2


@pytest.mark.parametrize("seed", range(20))
def test_the_walks_over_broken_cells_equal_the_whole_table_fixed_points(seed):
    """`_upstream` (backwards from the dead cells, dense past a size) and `_chains` (each
    looked-at cell's chain walked) give what the fixed points over every cell give, on
    random next-hop tables of a random graph with dead ends, homes and loops."""
    rng = np.random.default_rng(seed)
    S, C = int(rng.integers(4, 40)), int(rng.integers(1, 30))
    nbrs = [sorted(set(rng.choice(S, size=int(rng.integers(1, 5))).tolist()) - {x}) or [(x + 1) % S]
            for x in range(S)]
    senders = [[y for y in range(S) if x in nbrs[y]] for x in range(S)]
    nxt = np.array([[rng.choice(nbrs[x]) for _ in range(C)] for x in range(S)], np.int64)
    nxt[rng.random((S, C)) < 0.05] = -1
    nxt[rng.integers(0, S, C), np.arange(C)] = -2
    seed_cells = nxt == -1
    table = patchmod._neighbour_table(senders, S)
    assert (patchmod._upstream(nxt, table, seed_cells) == patchmod._closure(nxt, seed_cells.copy())).all()
    broken = patchmod._closure(nxt, seed_cells.copy())
    heights = rng.integers(0, 4, S)
    cy, cc = np.nonzero(~broken)
    got = patchmod._chains(nxt, heights, cy, cc)
    for mine, whole in zip(got, _dense_chains(nxt, heights)):
        assert (mine == whole[cy, cc]).all()


@pytest.mark.parametrize("engine", ["ftree", "updn", "minhop"])
@pytest.mark.parametrize("lose", ["cable", "switch"])
def test_what_came_back_gets_the_routes_before_the_loss(engine, lose):
    """`restore`: once the fabric is again the one the routes were made on, the patched
    tables with the moved entries put back (and a lost switch's own table) are the routes
    from before the loss, byte for byte; refused while the fabric differs or a table was
    changed since the patch."""
    f = prepared(topogen.fat_tree_3(8))
    rng = random.Random(f"{engine}{lose}")
    drop = {"drop_links": [rng.choice(switch_links(f))]} if lose == "cable" else \
        {"drop_nodes": [rng.choice(["S0", "A3", "S5"])]}
    done, routes, new = check_patch(f, engine, **drop)
    rin, rin2 = RoutingInput.from_fabric(f), RoutingInput.from_fabric(carried(f, topogen.variant(f, **drop)))
    spec = routing.parse_spec(engine)
    basis, now = Basis.of(routes.patch_rule, spec, rin), Basis.of(routes.patch_rule, spec, rin2)
    held = {s: bytes(new[s].ports) for s in new}
    lost = patchmod.Lost.of(basis, rin2, {s: bytes(routes[s].ports) for s in routes})
    undo = patchmod.Undo.of(basis, rin2, done, lost)
    assert bool(undo.lost) == (lose == "switch") and undo.links == basis.links - now.links
    back = patchmod.restore(rin, held, undo, now)
    assert not isinstance(back, str), back
    assert back.patch_rule == routes.patch_rule
    for s in rin.switches:
        n = len(routes[s].ports)
        assert bytes(back[s].ports[:n]) == bytes(routes[s].ports), s
    assert sum(len(at) for at, _b, _a in done.cells.values()) == done.moved
    # refused: the loss still there; a table changed since; a lost switch's table not kept
    assert "links differ" in patchmod.restore(rin2, held, undo, now)
    s, (at, _b, after) = next(iter(done.cells.items()))
    tampered = {**held, s: bytes(x ^ 1 if i == at[0] else x for i, x in enumerate(held[s]))}
    assert "changed since the patch" in patchmod.restore(rin, tampered, undo, now)
    if undo.lost:
        undo.lost = {}
        assert "no known forwarding table" in patchmod.restore(rin, held, undo, now)


@pytest.mark.parametrize("engine", ["ftree", "updn", "minhop"])
def test_the_dead_exits_alone_move_where_the_old_paths_keep_their_length(engine, monkeypatch):
    """What was lost known (`Lost`): a lost core's neighbours take another core at the same
    length, so only their dead exits move and the full repair (`_relax`) never runs (it
    does when the lost core's table is not known: its old paths cannot be followed); a
    two-level tree's spine that lost its only link to a leaf has no path of the old length
    (one hop): the full repair runs for those DLIDs."""
    relaxed = []
    relax = patchmod._relax
    monkeypatch.setattr(patchmod, "_relax", lambda *a, **k: relaxed.append(1) or relax(*a, **k))

    def patched(f, hide=(), **drop):
        rin = RoutingInput.from_fabric(f)
        routes = routing.route(engine, rin)
        rin2 = RoutingInput.from_fabric(carried(f, topogen.variant(f, **drop)))
        basis = Basis.of(routes.patch_rule, None, rin)
        old = {s: bytes(routes[s].ports) for s in routes}
        relaxed.clear()
        known = {s: t for s, t in old.items() if s not in {f.node(n).guid for n in hide}}
        mine = patch(rin2, old, routes.patch_rule, losses(basis, rin2)[0], patchmod.Lost.of(basis, rin2, known))
        return bool(relaxed), mine

    ran, mine = patched(prepared(topogen.fat_tree_3(8)), drop_nodes=["S0"])
    assert not ran and mine.moved
    assert patched(prepared(topogen.fat_tree_3(8)), hide=["S0"], drop_nodes=["S0"])[0]  # its old table unknown
    cut = [(("L0", 5), ("S0", 1))]
    ran, mine = patched(prepared(topogen.fat_tree_2(8)), drop_links=cut)
    assert ran and mine.moved
    check_patch(prepared(topogen.fat_tree_2(8)), engine, drop_links=cut)  # and what it promises holds
