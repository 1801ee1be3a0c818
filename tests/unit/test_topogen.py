"""Topology generators: shapes, counts, port budgets, and ibsim agreeing."""
import time
from collections import Counter, deque
from pathlib import Path

import pytest

from smagent.model import netfile, topogen
from smagent.model.fabric import HCA, SWITCH, Fabric

from ibsim_harness import IbSim, ibsim_available, skip_reason

EXAMPLE_2SW2PATH4HCA = Path(__file__).parents[1] / "vectors" / "ibsim-2sw4hca.net"


def check_invariants(f: Fabric, radix: int | None = None) -> None:
    """Properties every generated fabric has."""
    first = next(iter(f))
    assert first.node_type == HCA and first.name in ("H0", "Hca1")  # SM lands on a host
    for n in f.switches():
        used = [p for p, _ in f.connected_ports(n)]
        assert len(used) <= n.num_ports and all(1 <= p <= n.num_ports for p in used)
        if radix is not None:
            assert n.num_ports == radix
    for h in f.cas():
        peer = f.neighbor(h, 1)
        assert peer is not None and f.node(peer.node).node_type == SWITCH
    # one connected fabric
    start = first.name
    seen, todo = {start}, deque([start])
    while todo:
        for _, r in f.connected_ports(todo.popleft()):
            if r.node not in seen:
                seen.add(r.node)
                todo.append(r.node)
    assert len(seen) == len(f)


def counts(f: Fabric) -> tuple[int, int, int]:
    return len(f.switches()), len(f.cas()), f.num_links


@pytest.mark.parametrize("k, expected", [(2, (3, 2, 4)), (4, (6, 8, 16)), (8, (12, 32, 64)), (36, (54, 648, 1296))])
def test_fat_tree_2_counts(k, expected):
    f = topogen.fat_tree_2(k)
    assert counts(f) == expected
    check_invariants(f, radix=k)
    # every switch port is used: full bisection, nothing idle
    assert all(len(f.connected_ports(s)) == k for s in f.switches())


def test_fat_tree_2_wiring():
    f = topogen.fat_tree_2(8)
    assert f.neighbor("H0", 1) == ("L0", 1) and f.neighbor("H5", 1) == ("L1", 2)
    # leaf i port k/2+1+j <-> spine j port i+1
    assert f.neighbor("L3", 5) == ("S0", 4) and f.neighbor("L7", 8) == ("S3", 8)
    for leaf in range(8):
        spines = {f.neighbor(f"L{leaf}", p).node for p in range(5, 9)}
        assert spines == {"S0", "S1", "S2", "S3"}


@pytest.mark.parametrize("k, switches, hosts, links", [(4, 20, 16, 48), (8, 80, 128, 384), (36, 1620, 11664, 34992)])
def test_fat_tree_3_full_counts(k, switches, hosts, links):
    f = topogen.fat_tree_3(k)
    assert counts(f) == (switches, hosts, links)
    check_invariants(f, radix=k)
    assert all(len(f.connected_ports(s)) == k for s in f.switches())
    kinds = Counter(n.name[0] for n in f.switches())
    assert kinds == {"L": k * k // 2, "A": k * k // 2, "S": k * k // 4}


def test_fat_tree_3_wiring():
    f = topogen.fat_tree_3(4)  # pods of 2 leaves + 2 aggs, 4 cores
    assert f.neighbor("L3", 3) == ("A2", 2)  # pod 1, leaf e=1 -> agg a=0 of pod 1, port e+1
    assert f.neighbor("A3", 4) == ("S3", 2)  # pod 1, agg a=1, core a*2+1, port pod+1
    for core in f.switches():
        if core.name.startswith("S"):
            pods = sorted(int(f.neighbor(core, p).node[1:]) // 2 for p in range(1, 5))
            assert pods == [0, 1, 2, 3]  # one link into every pod


@pytest.mark.parametrize(
    "hosts, expected",
    [
        (1, (1, 1, 1)),  # a single leaf: no aggregation, no core
        (2, (1, 2, 2)),
        (3, (2 + 2, 3, 3 + 2 * 2)),  # two leaves of one pod: aggs, no cores
        (5, (3 + 4 + 4, 5, 5 + 3 * 2 + 4 * 2)),  # two pods: 4 aggs, all 4 cores
        (16, (20, 16, 48)),
    ],
)
def test_fat_tree_3_pruned_small(hosts, expected):
    f = topogen.fat_tree_3(4, hosts=hosts)
    assert counts(f) == expected
    check_invariants(f, radix=4)


def test_fat_tree_3_thousand_hosts_of_k36():
    f = topogen.fat_tree_3(36, hosts=1000)
    # 1000 hosts -> 56 leaves (18 hosts each) in 4 pods -> 72 aggs; 324 cores
    assert counts(f) == (56 + 72 + 324, 1000, 1000 + 56 * 18 + 72 * 18)
    check_invariants(f, radix=36)
    assert len(f.connected_ports("L55")) == 10 + 18  # the last leaf is partly filled


@pytest.mark.parametrize(
    "x, y, h, ports, links",
    [(4, 4, 2, 8, 32 + 16 + 16), (3, 5, 1, 5, 15 + 15 + 15), (2, 3, 1, 8, 6 + 6 + 6),
     (1, 4, 3, 8, 12 + 4), (1, 1, 2, 6, 2)],
)
def test_torus_counts(x, y, h, ports, links):
    f = topogen.torus_2d(x, y, h, ports)
    assert counts(f) == (x * y, x * y * h, links)
    check_invariants(f, radix=ports)


def test_torus_wiring_and_wraparound():
    f = topogen.torus_2d(3, 2, hosts_per_switch=1, switch_ports=6)
    # ports: 1 host, 2 east, 3 west, 4 north, 5 south
    assert f.neighbor("T2_0", 2) == ("T0_0", 3)  # x wraps
    assert f.neighbor("T1_1", 4) == ("T1_0", 5)  # y of size 2: wrap is a second cable
    assert f.neighbor("T1_0", 4) == ("T1_1", 5)
    assert f.neighbor("H4", 1) == ("T1_1", 1)


@pytest.mark.parametrize("x, y, h, links", [(4, 3, 1, 12 + 9 + 8), (1, 5, 2, 10 + 4), (2, 2, 0, 4)])
def test_mesh_counts(x, y, h, links):
    f = topogen.mesh_2d(x, y, h, 8)
    assert counts(f) == (x * y, x * y * h, links)
    if h:
        check_invariants(f, radix=8)
    assert f.neighbor("T0_0", h + 2) is None  # no wrap-around on the west edge


def test_dragonfly_plus_counts_and_wiring():
    f = topogen.dragonfly_plus(4, leaves=2, spines=2, hosts_per_leaf=2)
    # 4 groups x (2 leaves + 2 spines); links: 16 hosts, 4 x 2 x 2 in-group, 6 group pairs x 2 planes
    assert counts(f) == (16, 16, 16 + 16 + 12)
    check_invariants(f, radix=6)  # a leaf: 2 hosts + 2 spines; a spine: 2 leaves + 3 groups: 6 ports
    assert f.neighbor("H5", 1) == ("L2", 2)  # hosts in leaf order
    assert f.neighbor("L2", 3) == ("S2", 1)  # group 1's leaf 0 -> its spine 0 (S2), on the spine's port 1
    assert f.neighbor("L3", 4) == ("S3", 2)
    # spine j of group a meets spine j of group b: port leaves+1+(b-1 when b > a, else b)
    assert f.neighbor("S0", 3) == ("S2", 3) and f.neighbor("S0", 5) == ("S6", 3)
    assert f.neighbor("S7", 5) == ("S5", 5) and f.neighbor("S1", 4) == ("S5", 3)
    plane = {g: {f.neighbor(f"S{g * 2 + 1}", p).node for p in (3, 4, 5)} for g in range(4)}
    assert plane[0] == {"S3", "S5", "S7"}  # the spines of a plane form a complete graph of groups
    big = topogen.dragonfly_plus(9, leaves=4, spines=4, hosts_per_leaf=4)
    assert counts(big) == (72, 144, 144 + 144 + 36 * 4) and big.switches()[0].num_ports == 12
    assert topogen.dragonfly_plus(3, switch_ports=36).switches()[0].num_ports == 36
    with pytest.raises(ValueError, match=r"groups must be an integer >= 2"):
        topogen.dragonfly_plus(1)
    with pytest.raises(ValueError, match=r"switches need 5..254 ports"):  # 2 leaves + 3 other groups
        topogen.dragonfly_plus(4, switch_ports=4)


def test_generator_argument_errors():
    with pytest.raises(ValueError, match="even integer"):
        topogen.fat_tree_2(5)
    with pytest.raises(ValueError, match="even integer"):
        topogen.fat_tree_3(256)
    with pytest.raises(ValueError, match=r"hosts must be in 1..16"):
        topogen.fat_tree_3(4, hosts=17)
    with pytest.raises(ValueError, match=r"switch_ports must be in 6..254"):
        topogen.torus_2d(3, 3, 2, 5)
    with pytest.raises(ValueError, match="x must be a positive integer"):
        topogen.mesh_2d(0, 3)


def test_two_switch_matches_ibsim_example():
    f = topogen.two_switch()
    assert f == netfile.load(EXAMPLE_2SW2PATH4HCA)  # order aside, the same fabric
    assert next(iter(f)).name == "Hca1"
    check_invariants(f)


@pytest.mark.parametrize(
    "make", [lambda: topogen.fat_tree_2(8), lambda: topogen.fat_tree_3(4, hosts=7),
             lambda: topogen.torus_2d(3, 3, 2), lambda: topogen.mesh_2d(2, 3), topogen.two_switch,
             lambda: topogen.dragonfly_plus(3)],
)
def test_deterministic_and_round_trips(make):
    a, b = make(), make()
    assert netfile.dumps(a) == netfile.dumps(b)
    assert netfile.loads(netfile.dumps(a)) == a


# -- live: ibsim + ibnetdiscover see exactly what we generated -------------------
LIVE = [
    ("fat_tree_2_k8", lambda: topogen.fat_tree_2(8)),
    ("fat_tree_2_k36", lambda: topogen.fat_tree_2(36)),
    ("fat_tree_3_k36_1000_hosts", lambda: topogen.fat_tree_3(36, hosts=1000)),  # needs -S/-P
    ("torus_4x4", lambda: topogen.torus_2d(4, 4, 2, 8)),
    ("dragonfly_plus_4x2x2", lambda: topogen.dragonfly_plus(4)),
    ("two_switch", topogen.two_switch),
]


def discover(sim: IbSim) -> Fabric:
    """ibnetdiscover through umad2sim, parsed; retried while ibsim settles."""
    deadline = time.monotonic() + 5
    while True:
        res = sim.run(["ibnetdiscover"], check=False, timeout=300)
        if res.returncode == 0 and res.stdout.strip():
            return netfile.loads(res.stdout, source="ibnetdiscover output")
        if time.monotonic() > deadline:
            raise AssertionError(f"ibnetdiscover failed (rc={res.returncode}): {res.stderr[-2000:]}")
        time.sleep(0.5)


@pytest.mark.ibsim
@pytest.mark.skipif(not ibsim_available(), reason=skip_reason())
@pytest.mark.parametrize("name, make", LIVE, ids=[n for n, _ in LIVE])
def test_ibsim_discovers_generated_topology(tmp_path, name, make):
    generated = make()
    path = tmp_path / f"{name}.net"
    path.write_text(netfile.dumps(generated))
    with IbSim(path, tmp_path, extra_args=netfile.ibsim_size_args(generated)) as sim:
        seen = discover(sim)

    assert counts(seen) == counts(generated)
    # ibnetdiscover names nodes "S-<guid>"/"H-<guid>"; ibsim reports our names as descriptions
    shape = {n.description: (n.node_type, n.num_ports) for n in seen}
    assert shape == {n.name: (n.node_type, n.num_ports) for n in generated}
    assert seen.link_set(key=lambda n: n.description) == generated.link_set()
    # and the GUIDs are those ibsim's numbering predicts for our file order
    netfile.assign_ibsim_guids(generated)
    for n in seen:
        g = generated.node(n.description)
        assert n.guid == g.guid, n.description
        for p, _ in seen.connected_ports(n):
            assert n.port_guid(p) == g.port_guid(p)
