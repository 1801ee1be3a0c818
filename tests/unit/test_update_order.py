"""A reroute's LFT Sets in stages, the destination's side first (smagent.planning.update_order;
the apply path's `Apply.lft`): after every single Set no pair that the old and the new
tables both deliver is black-holed or loops. Checked by the module's own walker on
generated fabrics and, independently, by the simulator's data plane after every Set of a
real sweep; both checks find breakage in the order the apply used before (round-robin
over switches), so they can fail."""
from __future__ import annotations

import pytest

from smagent import routing
from smagent import sweep as sweepmod
from smagent.fdb.switch import interleave
from smagent.model import topogen
from smagent.planning import update_order as uo
from smagent.routing import RoutingInput
from smagent.transport.sim import SimTransport

import routing_inputs

B = uo.B


def _images(routes) -> dict[int, bytes]:
    return {sw: bytes(t.ports) for sw, t in routes.items()}


def _without(rin: RoutingInput, gone: int) -> RoutingInput:
    """The same fabric routed around switch ``gone`` (a drain: it is still cabled)."""
    return RoutingInput(switches=[s for s in rin.switches if s != gone],
                        adjacency={s: [(p, n) for p, n in adj if n != gone] for s, adj in rin.adjacency.items()
                                   if s != gone},
                        lid_homes={lid: h for lid, h in rin.lid_homes.items() if h[0] != gone},
                        num_ports={s: n for s, n in rin.num_ports.items() if s != gone}, names=rin.names)


def _changes(old: dict[int, bytes], new: dict[int, bytes]) -> list[uo.Change]:
    out = []
    for sw, t in new.items():
        o = old[sw]
        size = -(-max(len(t), len(o)) // B) * B
        t, o = t.ljust(size, b"\xff"), o.ljust(size, b"\xff")
        out += [uo.Change(sw, b, o[b * B:(b + 1) * B], t[b * B:(b + 1) * B]) for b in range(size // B)
                if o[b * B:(b + 1) * B] != t[b * B:(b + 1) * B]]
    return out


def _drain(fabric, node: str, engine: str):
    rin = routing_inputs.rin_of(fabric)
    gone = next(n.guid for n in fabric if n.name == node)
    old, new = _images(routing.route(engine, rin)), _images(routing.route(engine, _without(rin, gone)))
    peer = {(s, p): n for s, adj in rin.adjacency.items() for p, n in adj}
    hosts: dict[int, int] = {}
    for _lid, (s, p) in rin.lid_homes.items():
        hosts[s] = hosts.get(s, 0) + (p != 0)
    net = uo.Net(peer, {lid: h for lid, h in rin.lid_homes.items() if h[0] != gone}, hosts)
    return net, old, _changes(old, new), peer


class _Unit:
    def __init__(self, c):
        self.switch, self.block, self.c = c.switch, c.block, c


@pytest.mark.parametrize("engine", ["minhop", "updn", "ftree"])
def test_draining_an_aggregation_switch_breaks_no_pair(engine):
    net, old, changes, peer = _drain(topogen.fat_tree_3(8, hosts=64), "A0", engine)
    order = uo.staged(changes, peer)
    ours = [(changes[w.index].switch, changes[w.index].block, w.content) for w in order.writes]
    assert uo.broken_steps(net, old, ours) == (0, len(changes))  # one Set a block: no extra SMP here
    assert len(order.stages) > 1 and not order.loops
    before = [(u.c.switch, u.c.block, u.c.new) for u in interleave([_Unit(c) for c in changes])]
    assert uo.broken_steps(net, old, before)[0] > 0  # the round-robin order breaks pairs


def test_a_block_whose_destinations_want_opposite_orders_is_written_in_parts():
    """Switches X and Y; LID 1 hangs off Z behind both, LID 2 off W behind both. Before, X
    reaches 1 over Y and Y reaches 2 over X; after, the other way round: for LID 1 X must
    change first, for LID 2 Y. One block holds both: no order of whole blocks, so each is
    written twice, and no pair breaks."""
    X, Y, Z, W = 1, 2, 3, 4
    peer = {(X, 1): Y, (Y, 1): X, (X, 2): Z, (Y, 2): Z, (X, 3): W, (Y, 3): W, (Z, 1): X, (W, 1): X}
    homes = {1: (Z, 9), 2: (W, 9)}
    def table(e1, e2):
        t = bytearray(b"\xff" * B)
        t[1], t[2] = e1, e2
        return bytes(t)
    old = {X: table(1, 3), Y: table(2, 1), Z: table(9, 1), W: table(1, 9)}  # X->Y->Z for 1, Y->X->W for 2
    new = {X: table(2, 1), Y: table(1, 3), Z: old[Z], W: old[W]}  # X->Z for 1 is direct... Y->X->Z; Y->W, X->Y->W
    changes = [uo.Change(X, 0, old[X], new[X]), uo.Change(Y, 0, old[Y], new[Y])]
    net = uo.Net(peer, homes, {X: 1, Y: 1})
    order = uo.staged(changes, peer)
    sets = [(changes[w.index].switch, 0, w.content) for w in order.writes]
    assert len(sets) > len(changes) and uo.broken_steps(net, old, sets)[0] == 0
    both = [(c.switch, 0, c.new) for c in changes]
    assert max(uo.broken_steps(net, old, both)[0], uo.broken_steps(net, old, both[::-1])[0]) > 0


def test_new_routes_that_loop_are_named():
    peer = {(1, 1): 2, (2, 1): 1}
    loop = bytes([0xFF, 1] + [0xFF] * (B - 2))
    order = uo.staged([uo.Change(1, 0, b"\x05" * B, loop), uo.Change(2, 0, b"\x05" * B, loop)], peer)
    assert sorted(order.loops) == [(1, 1), (2, 1)]


def test_a_bring_up_is_one_stage():
    """Where the switches route nothing yet no path can break: every block at once."""
    rin = routing_inputs.rin_of(topogen.fat_tree_3(4))
    new = _images(routing.route("minhop", rin))
    changes = _changes({s: b"\xff" * len(t) for s, t in new.items()}, new)
    peer = {(s, p): n for s, adj in rin.adjacency.items() for p, n in adj}
    assert len(uo.staged(changes, peer).stages) == 1


def test_the_array_check_of_a_bring_up_stages_as_levels_do(monkeypatch):
    """`staged` skips `levels` for a bring-up it finds loop-free on arrays: on random
    changes (bring-ups, loops, reroutes, blocks not read) the same Order as without it,
    and it is taken for some of them."""
    import random
    rng = random.Random(42)
    cases = []
    for _ in range(600):
        switches, ports = rng.randint(1, 6), rng.randint(1, 4)
        # some far ends are switches that change nothing (numbers beyond the changed ones)
        peer = {(g, p): rng.randrange(switches + 2) for g in range(switches) for p in range(1, ports + 1)
                if rng.random() < 0.6}
        changes = []
        for g in range(switches):
            for b in rng.sample(range(3), rng.randint(1, 2)):
                new = bytes(rng.choice([0xFF, 0, *range(1, ports + 1)]) for _ in range(B))
                r = rng.random()
                old = (None if r < 0.3 else bytes(o if rng.random() < 0.3 else 0xFF for o in new) if r < 0.8
                       else bytes(rng.choice([0xFF, *range(1, ports + 1)]) for _ in range(B)))
                changes.append(uo.Change(g, b, old, new))
        cases.append((changes, peer))
    fast = [uo.staged(c, p) for c, p in cases]
    taken = sum(uo._bring_up_without_loops(c, p) for c, p in cases)
    monkeypatch.setattr(uo, "_bring_up_without_loops", lambda changes, peer: False)
    assert fast == [uo.staged(c, p) for c, p in cases]
    assert 0 < taken < len(cases)


def _reroute(monkeypatch, ordered: bool) -> list:
    """A 3-level fat tree swept with updn rooted at one core switch, then swept with minhop:
    before every LFT Set of the second sweep, the host pairs the simulator's data plane does
    not deliver."""
    if not ordered:  # the stages the other way round, the destination's side last
        staged = uo.staged
        monkeypatch.setattr(uo, "staged", lambda changes, peer: uo.Order(staged(changes, peer).stages[::-1], []))
    t = SimTransport(topogen.fat_tree_3(4), retries=0)
    sim = t.sim
    root = next(n.guid for n in sim.nodes.values() if n.name == "S0")
    assert sweepmod.sweep(t, sweepmod.SweepOptions(routing=f"updn:{root:#018x}")).problems == []
    hosts = [(n.name, 1) for n in sim.nodes.values() if not n.is_switch]
    lids = [sim.port_lid(h) for h in hosts]
    bad: list = []

    def check(req):
        smp = req.smp
        if smp.method == 0x02 and smp.attribute_id == 0x19:  # SubnSet(LinearForwardingTable)
            bad.extend((src, lid) for src in hosts for lid in lids if sim.trace(src, lid).outcome != "delivered")

    t.on_send = check
    r = sweepmod.sweep(t, sweepmod.SweepOptions(routing="minhop"))
    assert r.problems == [] and r.lft_written > 0
    return bad


def test_every_set_of_a_real_reroute_keeps_every_pair_delivered(monkeypatch):
    assert _reroute(monkeypatch, ordered=True) == []


def test_the_data_plane_check_sees_the_old_order_break_pairs(monkeypatch):
    assert _reroute(monkeypatch, ordered=False)


# -- MFT: ports a tree loses before ports it gains -------------------------------------------
def _mcast_drain(fabric, gone: str):
    """(switch port -> switch port beyond, old masks, new masks) of one group of every host,
    its tree re-rooted away from ``gone`` (drained: still cabled)."""
    ports, (root, old), without = routing_inputs.mcast_trees(fabric, mlids=1)
    assert root == gone, "the fabric's tree must be rooted at the drained switch"
    return ports, old, without(gone)


def _loop_states(ports, old, new, order: list[list[tuple[str, dict]]]) -> int:
    now = {s: dict(m) for s, m in old.items()}
    loops = 0
    for stage in order:
        for s, m in stage:
            now[s] = dict(m)
            loops += len(uo.mcast_loops(ports, now))
    return loops


def test_a_re_rooted_multicast_tree_never_loops_while_its_sets_go_out():
    fabric = topogen.fat_tree_2(8)
    root = "S0"
    ports, old, new = _mcast_drain(fabric, root)
    switches = sorted(set(old) | set(new))
    changes = [uo.MaskChange([old.get(s, {}).get(0xC000, 0)], [new.get(s, {}).get(0xC000, 0)]) for s in switches]
    as_masks = lambda i, masks: (switches[i], {0xC000: masks[0]})  # noqa: E731
    # an arbitrary order: the new root's unit first, then the rest by name (the old root S0
    # last): for a while leaves still send up to S0, which sends down to leaves already
    # sending up to the new root S1, which sends down to them all
    first = sorted(range(len(switches)), key=lambda i: (switches[i] != "S1", switches[i]))
    naive = [[as_masks(i, changes[i].new) for i in first]]
    assert _loop_states(ports, old, new, naive) > 0  # the check can fail
    stages = uo.mft_staged(changes)
    ours = [[as_masks(w.index, w.masks) for w in stage] for stage in stages]
    assert _loop_states(ports, old, new, ours) == 0
    assert ours[-1] and {s: m for stage in ours for s, m in stage} == {s: {0xC000: new.get(s, {}).get(0xC000, 0)}
                                                                       for s in switches}


def test_mft_stages_write_a_unit_twice_only_where_it_loses_and_gains_ports():
    stages = uo.mft_staged([uo.MaskChange([0b0110], [0b0010]),  # loses only: stage 0
                            uo.MaskChange([0b0010], [0b0110]),  # gains only: stage 1
                            uo.MaskChange([0b0110], [0b1010]),  # both: 0b0010 first, then 0b1010
                            uo.MaskChange(None, [0b1])])  # not read: with the growing stage
    assert [[(w.index, w.masks, w.final) for w in s] for s in stages] == [
        [(0, (0b0010,), True), (2, (0b0010,), False)],
        [(1, (0b0110,), True), (2, (0b1010,), True), (3, (0b1,), True)]]


def _drain_multicast(monkeypatch, ordered: bool) -> list:
    """The bundled-size fat tree swept, then its multicast root S0 drained: before every MFT
    Set of the drain, the hosts whose copies to the group go round in the simulator."""
    from smagent.api import Session
    if not ordered:  # every unit at once with its new masks, as the apply wrote them before
        monkeypatch.setattr(uo, "mft_staged", lambda changes: [[uo.MaskWrite(i, tuple(c.new), True)
                                                                for i, c in enumerate(changes)]])
    t = SimTransport(topogen.fat_tree_2(8), retries=0)
    sim, session = t.sim, Session(t)
    assert session.sweep().problems == []
    hosts = [(n.name, 1) for n in sim.nodes.values() if not n.is_switch]
    root = [n.name for n in sim.nodes.values() if n.is_switch and n.name.startswith("S") and n.mft and any(n.mft)]
    assert root == ["S0"]
    looped: list = []

    def check(req):
        if req.smp.method == 0x02 and req.smp.attribute_id == 0x1B:  # SubnSet(MulticastForwardingTable)
            looped.extend(h for h in hosts if sim.trace(h, 0xC000).outcome == "loop")

    t.on_send = check
    assert session.drain(["S0"]).safe
    return looped


def test_draining_the_multicast_root_never_makes_copies_go_round(monkeypatch):
    assert _drain_multicast(monkeypatch, ordered=True) == []


def test_the_simulator_sees_copies_go_round_in_the_old_order(monkeypatch):
    assert _drain_multicast(monkeypatch, ordered=False)
