"""Multicast: group files, trees, the MFT diff by (block, position), and on the in-process
simulator every member receiving a group's packet exactly once (ingress never echoed)."""
import json

import pytest

from fabrics import big_switch_fabric
from mad import forwarding as fw
from smagent.planning import multicast
from smagent.model import netfile, topogen
from smagent import sweep
from smagent.fdb import mft as mfttab
from smagent.model.fabric import HCA, SWITCH, Fabric
from smagent.planning.multicast import GroupFileError, parse_groups
from smagent.sim import trace
from smagent.sweep import planjson
from smagent.transport.sim import SimTransport


# -- helpers ------------------------------------------------------------------------------
def sets(t) -> int:
    return sum(v for k, v in t.stats.by_kind.items() if k.startswith("SubnSet("))


def ca_ports(sim):
    return [(n.name, p) for n in sim if not n.is_switch for p in range(1, n.num_ports + 1) if n.peers[p]]


def port_guid(sim, name, port=1):
    return sim.node(name).port_guids[port]


def check_exactly_once(sim, mlid, members, senders=None):
    """Every member but the sender receives exactly one copy; nothing loops or drops."""
    for src in senders or members:
        t = trace(sim, src, mlid, multicast=True)
        assert t.outcome == "delivered", (src, t)
        assert t.drops == [], (src, t.drops)
        got = [(h[0], h[1]) for h in t.hops if not sim.node(h[0]).is_switch and h[2] is None]
        want = set(members) - {src}
        assert sorted(got) == sorted(want), (src, got)  # sorted lists: duplicates would show
        assert src not in t.dest  # never echoed back out the ingress


# -- group file ---------------------------------------------------------------------------
def test_parse_group_file():
    spec = parse_groups(
        "# groups\n"
        "\n"
        "0xC000 all   # IPoIB\n"
        "49153 0x0002c903000a1b2d 0x2c903000a1b31\n"
        "  0xc002 0x10\t0x11\n"
        "default-multicast 0x200000 1 255\n", "g.txt")
    assert [(g.mlid, g.members, g.where) for g in spec.groups] == [
        (0xC000, ("all",), "g.txt:3"),
        (0xC001, (0x0002C903000A1B2D, 0x2C903000A1B31), "g.txt:4"),
        (0xC002, (0x10, 0x11), "g.txt:5")]
    assert [(d.switch, d.primary, d.not_primary, d.where) for d in spec.defaults] == [(0x200000, 1, 255, "g.txt:6")]


@pytest.mark.parametrize("text, needle", [
    ("0xC000 all\n0xBFFF 0x1\n", "g.txt:2: MLID 0xbfff is not a multicast LID"),
    ("0xFFFF 0x1\n", "g.txt:1: MLID 0xffff is not a multicast LID"),
    ("0xC000 all\n\n0xc000 0x1\n", "g.txt:3: MLID 0xc000 appears again (first at line 1)"),
    ("0xC001 0x1 zz\n", "g.txt:1: member 'zz' is not a port GUID"),
    ("0xC001 0x1 0x01\n", "g.txt:1: member 0x0000000000000001 listed twice"),
    ("0xC001 0x10000000000000000\n", "g.txt:1: member '0x10000000000000000' is not a port GUID"),
    ("0xC001\n", "g.txt:1: group 0xc001 has no members"),
    ("hello 0x1\n", "g.txt:1: expected 'MLID MEMBER...'"),
    ("default-multicast 0x200000 1\n", "g.txt:1: expected 'default-multicast SWITCH_GUID PRIMARY NOT_PRIMARY'"),
    ("default-multicast 0x200000 1 256\n", "g.txt:1: not-primary port 256"),
    ("# nothing\n\n", "g.txt: no groups"),
])
def test_group_file_errors_name_file_and_line(text, needle):
    with pytest.raises(GroupFileError) as e:
        parse_groups(text, "g.txt")
    assert needle in str(e.value), str(e.value)


def test_group_file_collects_every_problem():
    with pytest.raises(GroupFileError) as e:
        parse_groups("0xBFFF 0x1\n0xC000 zz\n", "g.txt")
    assert [p.split(":")[1] for p in e.value.problems] == ["1", "2"]


def test_load_groups_missing_file(tmp_path):
    with pytest.raises(GroupFileError, match="cannot read the group file"):
        multicast.load_groups(tmp_path / "nope.txt")


# -- trees --------------------------------------------------------------------------------
def line_adj(n, extra=()):
    """Switches 1..n in a line (port 2 -> next, port 1 -> previous), plus extra edges."""
    adj = {g: [] for g in range(1, n + 1)}
    for g in range(1, n):
        adj[g].append((2, g + 1, 1))
        adj[g + 1].append((1, g, 2))
    for a, pa, b, pb in extra:
        adj[a].append((pa, b, pb))
        adj[b].append((pb, a, pa))
    for v in adj.values():
        v.sort()
    return adj


def test_root_is_the_centre():
    adj = line_adj(5)
    assert multicast.choose_root(adj, {1, 5}) == 3
    assert multicast.choose_root(adj, {1, 2}) == 1  # ties: smaller sum, then lowest GUID
    assert multicast.choose_root(adj, {4}) == 4


def test_tree_pruned_to_members():
    adj = line_adj(5)
    assert multicast.spanning_tree(adj, 3, {1, 3}) == {3: {1}, 2: {1, 2}, 1: {2}}
    assert multicast.spanning_tree(adj, 2, {2}) == {2: set()}


def test_tree_parallel_links_and_cycles_use_one_cable():
    # 1 and 2 joined twice (ports 2<->1 and 5<->6); a ring 1-2-3-1
    adj = line_adj(3, extra=[(1, 5, 2, 6), (3, 7, 1, 8)])
    tree = multicast.spanning_tree(adj, 1, {2, 3})
    assert tree == {1: {2, 8}, 2: {1}, 3: {7}}
    edges = sum(len(v) for v in tree.values()) // 2
    assert edges == len(tree) - 1  # a tree


# -- MFT units and diff by (block, position) ----------------------------------------------
def test_mft_units_by_block_and_position():
    units = mfttab.mft_units({0xC000: frozenset({1, 17, 35}), 0xC021: frozenset({36})}, range(2), 3)
    assert set(units) == {(b, p) for b in range(2) for p in range(3)}
    assert units[(0, 0)][0] == 1 << 1 and units[(0, 1)][0] == 1 << 1 and units[(0, 2)][0] == 1 << 3
    assert units[(1, 2)][1] == 1 << 4
    assert sum(map(sum, units.values())) == 2 + 2 + 8 + 16
    with pytest.raises(ValueError, match="outside the planned units"):
        mfttab.mft_units({0xC040: frozenset({1})}, range(2), 3)


def test_mft_diff_writes_only_changed_units_and_clears_stale():
    desired = mfttab.mft_units({0xC000: frozenset({1, 17, 35})}, range(1), 3)
    current = {(7, 0, 0): [2] + [0] * 31,  # already right
               (7, 0, 1): [0, 1 << 5] + [0] * 30,  # stale 0xC001 port 21, and 17 missing
               (7, 0, 2): [1 << 3] + [0] * 31}  # right
    ch = mfttab.diff_mft(7, "sw", (0, 1), desired, current)
    assert [(c.block, c.position) for c in ch] == [(0, 1)]
    assert ch[0].changed_mlids() == [(0xC000, set(), {17}), (0xC001, {21}, set())]
    assert ch[0].describe() == "sw block 0 position 1: mlid 0xc000: ports {} -> {17}; mlid 0xc001: ports {21} -> {}"
    unread = mfttab.diff_mft(7, "sw", (0, 1), desired, {})
    assert len(unread) == 3 and unread[0].describe().startswith("sw block 0 position 0: mlid 0xc000: ports ? -> {1}")


# -- on the simulator ---------------------------------------------------------------------
def test_default_group_on_default_fabric_exactly_once():
    t = SimTransport()
    r = sweep.sweep(t, sweep.SweepOptions())
    assert r.problems == [] and len(r.mft_changes) == 5
    assert r.summary()["multicast"] == [{"mlid": "0xc000", "members": 9, "root": "S1", "switches": 5}]
    check_exactly_once(t.sim, 0xC000, ca_ports(t.sim))
    before = sets(t)
    again = sweep.sweep(t, sweep.SweepOptions())
    assert sets(t) == before, "a second sweep sends no Set"
    assert again.summary()["sets"] == {"portinfo": 0, "switchinfo": 0, "lft_blocks": 0, "mft_blocks": 0,
                                       "rft_blocks": 0, "sl2vl": 0, "vlarb": 0, "pkeys": 0, "guids": 0}


@pytest.mark.parametrize("fabric, routing", [(big_switch_fabric(), "minhop"), (topogen.fat_tree_2(6), "minhop"),
                                             (topogen.torus_2d(3, 3), "dfsssp")],
                         ids=["36port", "fat_tree_2(6)", "torus3x3"])
def test_every_member_once_on_varied_fabrics(fabric, routing):
    """(a torus is routed with dfsssp: minhop's credit loops are refused by the sweep)"""
    t = SimTransport(topology=fabric)
    r = sweep.sweep(t, sweep.SweepOptions(routing=routing))
    assert r.problems == []
    check_exactly_once(t.sim, 0xC000, ca_ports(t.sim))
    before = sets(t)
    sweep.sweep(t, sweep.SweepOptions(routing=routing))
    assert sets(t) == before


def test_positions_above_zero_on_36_port_switch():
    t = SimTransport(topology=big_switch_fabric())
    dry = sweep.sweep(t, sweep.SweepOptions(dry_run=True))
    assert sets(t) == 0
    lines = [x for x in dry.plan_lines() if x.startswith("SubnSet(MulticastForwardingTable)")]
    assert lines == [
        "SubnSet(MulticastForwardingTable) Big block 0 position 0: mlid 0xc000: ports {} -> {1}",
        "SubnSet(MulticastForwardingTable) Small block 0 position 0: mlid 0xc000: ports {} -> {1,2,3}",
        "SubnSet(MulticastForwardingTable) Big block 0 position 1: mlid 0xc000: ports {} -> {17,20}",
        "SubnSet(MulticastForwardingTable) Big block 0 position 2: mlid 0xc000: ports {} -> {35,36}",
    ]
    sweep.sweep(t, sweep.SweepOptions())
    mft = t.sim.node("Big").mft
    assert mft[0] == sum(1 << p for p in (1, 17, 20, 35, 36))


def test_group_file_groups_and_non_members(tmp_path):
    t = SimTransport(topology=big_switch_fabric())
    sim = t.sim
    g = {n: port_guid(sim, n) for n in ("H1", "H20", "H35", "G3")}
    f = tmp_path / "groups"
    f.write_text(f"0xC000 all\n0xC001 0x{g['H20']:x} 0x{g['H35']:x}\n0xC021 0x{g['H1']:x} 0x{g['G3']:x}\n")
    r = sweep.sweep(t, sweep.SweepOptions(mcast_groups=str(f)))
    assert r.problems == []
    assert sorted(m["mlid"] for m in r.summary()["multicast"]) == ["0xc000", "0xc001", "0xc021"]
    check_exactly_once(sim, 0xC000, ca_ports(sim))
    check_exactly_once(sim, 0xC001, [("H20", 1), ("H35", 1)])
    check_exactly_once(sim, 0xC021, [("H1", 1), ("G3", 1)])
    assert {(b, p) for c in r.mft_changes for b, p in [(c.block, c.position)] if c.switch == sim.node("Big").guid} \
        == {(0, 0), (0, 1), (0, 2), (1, 0), (1, 2)}
    # Small is not on 0xC001's tree: its entry stays empty
    assert sim.node("Small").mft[1] == 0
    before = sets(t)
    again = sweep.sweep(t, sweep.SweepOptions(mcast_groups=str(f)))
    assert sets(t) == before and again.summary()["sets"]["mft_blocks"] == 0
    # a group dropped from the file is kept and reported by default, cleared when pruning
    f.write_text("0xC021 all\n")
    kept = sweep.sweep(t, sweep.SweepOptions(mcast_groups=str(f)))
    assert sim.node("Big").mft[0] != 0 and sim.node("Big").mft[1] != 0
    assert set(kept.summary()["multicast_kept"]) == {"0xc000", "0xc001"}
    sweep.sweep(t, sweep.SweepOptions(mcast_groups=str(f), prune_multicast=True))
    assert sim.node("Big").mft[0] == 0 and sim.node("Big").mft[1] == 0
    check_exactly_once(sim, 0xC021, ca_ports(sim))


def test_group_errors_against_the_fabric(tmp_path):
    t = SimTransport(topology=big_switch_fabric(), node_caps={"Small": {"multicast_fdb_cap": 32}})
    f = tmp_path / "groups"
    f.write_text("0xC000 all\n0xC020 all\n0xC001 0xdead\n")
    with pytest.raises(GroupFileError) as e:
        sweep.sweep(t, sweep.SweepOptions(mcast_groups=str(f)))
    msg = str(e.value)
    assert f"{f}:2: MLID 0xc020 is beyond switch Small" in msg and "MulticastFDBCap 32" in msg
    assert f"{f}:3: member 0x000000000000dead is not a port GUID of this fabric" in msg
    assert sets(t) == 0, "nothing sent after bad input"


def test_default_group_skipped_without_mft():
    t = SimTransport(topology=big_switch_fabric(), node_caps={"Small": {"multicast_fdb_cap": 0}})
    r = sweep.sweep(t, sweep.SweepOptions())
    assert r.problems == [] and r.mft_changes == [] and r.summary()["multicast"] == []
    assert any("multicast not programmed" in n and "Small" in n for n in r.notes), r.notes


def test_no_multicast_option_leaves_mft():
    t = SimTransport(topology=big_switch_fabric())
    r = sweep.sweep(t, sweep.SweepOptions(multicast=False))
    assert r.mft_changes == [] and not any("MulticastForwardingTable" in k for k in t.stats.by_kind)


def test_mcast_fdb_top_only_where_supported():
    t = SimTransport(topology=big_switch_fabric())
    big = t.sim.node("Big")
    big.pi[0].capability_mask |= 1 << 30  # IsMulticastFDBTopSupported
    r = sweep.sweep(t, sweep.SweepOptions(mcast_groups=multicast.GroupSpec(
        [multicast.Group(0xC000, ("all",)), multicast.Group(0xC003, ("all",))])))
    assert r.problems == []
    assert big.si.multicast_fdb_top == 0xC003
    assert t.sim.node("Small").si.multicast_fdb_top == 0  # not supported there: untouched
    assert any("multicast_fdb_top 0x0000 -> 0xc003" in x for x in r.plan_lines())
    check_exactly_once(t.sim, 0xC003, ca_ports(t.sim))
    before = sets(t)
    sweep.sweep(t, sweep.SweepOptions(mcast_groups=multicast.GroupSpec(
        [multicast.Group(0xC000, ("all",)), multicast.Group(0xC003, ("all",))])))
    assert sets(t) == before
    # a group dropped: kept by default (the top still covers it), and when pruning the
    # stale entries up to the old top are read and cleared
    sweep.sweep(t, sweep.SweepOptions(multicast=True, mcast_groups=multicast.GroupSpec(
        [multicast.Group(0xC000, ("all",))])))
    assert big.si.multicast_fdb_top == 0xC003 and big.mft[3] != 0
    sweep.sweep(t, sweep.SweepOptions(multicast=True, prune_multicast=True, mcast_groups=multicast.GroupSpec(
        [multicast.Group(0xC000, ("all",))])))
    assert big.si.multicast_fdb_top == 0xC000 and big.mft[3] == 0


def test_default_sweep_keeps_mlids_it_was_not_told_about(cli, tmp_path, monkeypatch):
    """An MLID an admin set with `mft set` is outside the configured groups: the default
    sweep keeps it and says so; --prune-multicast (or desired state multicast_prune) removes it."""
    from smagent import api
    t = SimTransport(topology=big_switch_fabric())
    monkeypatch.setattr("smagent.cli.Context.session", lambda self: api.Session(t))  # the CLI over this fabric
    r = cli("mft", "set", "0,1", "0xc005", "1", "20")
    assert r.exit_code == 0, r.output
    big = t.sim.node("Big")
    assert big.mft[5] == (1 << 1) | (1 << 20)
    r = cli("sweep", "--dry-run", "--json")
    doc = json.loads(r.output)
    assert doc["multicast_kept"] == {"0xc005": ["Big"]}
    entries = [e for c in doc["plan"] for e in planjson.expand(c)]
    assert entries and not any(c.get("mlid") == "0xc005" for c in entries), doc["plan"]
    assert any("kept MLID 0xc005 on Big" in n for n in doc["notes"]), doc["notes"]
    assert cli("sweep").exit_code == 0
    assert big.mft[5] == (1 << 1) | (1 << 20)  # still there
    ds = tmp_path / "want.json"
    ds.write_text(json.dumps({"multicast": [{"mlid": "0xC000", "members": ["H1"]}], "multicast_prune": True}))
    r = cli("apply", str(ds))
    assert r.exit_code == 0, r.output
    assert big.mft[5] == 0
    big.mft[5] = 1 << 1
    r = cli("sweep", "--prune-multicast")
    assert r.exit_code == 0 and big.mft[5] == 0, r.output


def test_default_multicast_directive(tmp_path):
    t = SimTransport(topology=big_switch_fabric())
    big = t.sim.node("Big")
    f = tmp_path / "groups"
    f.write_text(f"0xC000 all\ndefault-multicast 0x{big.guid:x} 36 1\n")
    r = sweep.sweep(t, sweep.SweepOptions(mcast_groups=str(f)))
    assert r.problems == []
    assert (big.si.default_multicast_primary_port, big.si.default_multicast_not_primary_port) == (36, 1)
    assert t.sim.node("Small").si.default_multicast_primary_port == 0  # as read
    f.write_text(f"0xC000 all\ndefault-multicast 0x{big.guid:x} 37 1\n")
    with pytest.raises(GroupFileError, match=r":2: port 37 does not exist on Big"):
        sweep.sweep(t, sweep.SweepOptions(mcast_groups=str(f)))


# -- CLI ----------------------------------------------------------------------------------
def test_cli_sweep_with_group_file(cli, tmp_path):
    net = tmp_path / "big.net"
    net.write_text(netfile.dumps(big_switch_fabric()))
    groups = tmp_path / "groups"
    groups.write_text("0xC000 all\n0xC001 all\n")
    r = cli("--transport", "sim", "--topology", str(net), "sweep", "--dry-run", "--mcast-groups", str(groups),
            "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["sets"]["mft_blocks"] == 4 and doc["sets"]["rft_blocks"] == 0
    mft = [(c["mlid"], c["old"], c["new"]) for rec in doc["plan"] for c in planjson.expand(rec)
           if c["table"] == "MFT" and (c["switch"], c["block"], c["position"]) == ("Big", 0, 2)]
    assert mft == [("0xc000", [], [35, 36]), ("0xc001", [], [35, 36])], mft
    groups.write_text("0xC000 all\n0xC001 nope\n")
    r = cli("--transport", "sim", "--topology", str(net), "sweep", "--mcast-groups", str(groups))
    assert r.exit_code == 2 and f"{groups}:2" in r.output
    r = cli("--transport", "sim", "--topology", str(net), "sweep", "--mcast-groups", str(groups), "--no-multicast")
    assert r.exit_code == 2


def test_mft_block_math_used_by_units():
    # MLID 0xC000 + 32*b + i, position p = ports 16p..16p+15 (docs/PITFALLS.md)
    assert fw.mft_block(0xC021) == (1, 1) and fw.mft_position(35) == (2, 3)


def test_switch_guid_member_is_its_port_0(tmp_path):
    t = SimTransport(topology=big_switch_fabric())
    sim = t.sim
    small = sim.node("Small")
    f = tmp_path / "groups"
    f.write_text(f"0xC002 0x{small.guid:x} 0x{port_guid(sim, 'H17'):x}\n")
    r = sweep.sweep(t, sweep.SweepOptions(mcast_groups=str(f)))
    assert r.problems == []
    assert small.mft[2] == 1 << 0 | 1 << 1  # port 0 and the link to Big
    tr = trace(sim, ("H17", 1), 0xC002, multicast=True)
    assert tr.delivered and tr.dest == frozenset({("Small", 0)})


def _root_by_searches(adj, members):
    """choose_root's rule the plain way: one breadth-first search per member switch."""
    dists = [multicast._bfs(adj, m) for m in sorted(members)]
    keys = [(max(d[g] for d in dists), sum(d[g] for d in dists), g)
            for g in adj if all(g in d for d in dists)]
    return min(keys)[2]


@pytest.mark.parametrize("seed", range(30))
def test_choose_root_equals_one_search_per_member(seed):
    import random
    rng = random.Random(seed)
    n = rng.randint(1, 40)
    adj = {g: [] for g in range(1, n + 1)}
    for g in range(2, n + 1):  # connected: a random tree plus extra links
        for h in [rng.randint(1, g - 1)] + [rng.randint(1, n) for _ in range(rng.randint(0, 2))]:
            if h != g:
                adj[g].append((len(adj[g]) + 1, h, len(adj[h]) + 1))
                adj[h].append((len(adj[h]) + 1, g, len(adj[g])))
    members = set(rng.sample(sorted(adj), rng.randint(1, n)))
    assert multicast.choose_root(adj, members) == _root_by_searches(adj, members)
