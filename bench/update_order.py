"""Ordered updates (issue 40 item 2): a reroute's LFT Sets in smagent's order (stages, the
destination's side first: `smagent.planning.update_order`) against the round-robin order
the apply used before, on generated fabrics. For each scenario (drain a switch: routes
around it while it is still cabled; change the engine) it counts, after every single Set,
the (source switch, LID) pairs that both the old and the new tables deliver and the tables
as they stand do not, weighted by the hosts behind the source switch: broken pair-steps.

MFT Sets the same way (`update_order.mft_staged`: ports a tree loses, then ports it gains):
draining a group's root re-roots its tree; after every single Set it counts the groups whose
copies can go round for ever (`update_order.mcast_loops`), for all Sets at once in the
fabric's switch order, in 20 random orders (seeded), and staged.

    python bench/update_order.py
"""
from __future__ import annotations

import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))

from smagent import routing  # noqa: E402
from smagent.fdb.switch import interleave  # noqa: E402
from smagent.model import topogen  # noqa: E402
from smagent.planning import update_order as uo  # noqa: E402
from smagent.routing import RoutingInput  # noqa: E402
import routing_inputs  # noqa: E402

B = uo.B


def images(routes):
    return {sw: bytes(t.ports) for sw, t in routes.items()}


def without(rin: RoutingInput, gone: int) -> RoutingInput:
    return RoutingInput(switches=[s for s in rin.switches if s != gone],
                        adjacency={s: [(p, n) for p, n in adj if n != gone] for s, adj in rin.adjacency.items()
                                   if s != gone},
                        lid_homes={lid: h for lid, h in rin.lid_homes.items() if h[0] != gone},
                        num_ports={s: n for s, n in rin.num_ports.items() if s != gone}, names=rin.names,
                        data_vls=rin.data_vls)


def changes_of(old, new):
    out = []
    for sw, t in new.items():
        o = old[sw]
        size = -(-max(len(t), len(o)) // B) * B
        t, o = t.ljust(size, b"\xff"), o.ljust(size, b"\xff")
        out += [uo.Change(sw, b, o[b * B:(b + 1) * B], t[b * B:(b + 1) * B]) for b in range(size // B)
                if o[b * B:(b + 1) * B] != t[b * B:(b + 1) * B]]
    return out


class Unit:
    def __init__(self, c):
        self.switch, self.block, self.c = c.switch, c.block, c


def measure(label, rin, old, new, homes):
    peer = {(s, p): n for s, adj in rin.adjacency.items() for p, n in adj}
    hosts: dict[int, int] = {}
    for _lid, (s, p) in rin.lid_homes.items():
        hosts[s] = hosts.get(s, 0) + (p != 0)
    net = uo.Net(peer, homes, hosts)
    changes = changes_of(old, new)
    t0 = time.process_time()
    order = uo.staged(changes, peer)
    cpu = time.process_time() - t0
    ours = [(changes[w.index].switch, changes[w.index].block, w.content) for w in order.writes]
    before = [(u.c.switch, u.c.block, u.c.new) for u in interleave([Unit(c) for c in changes])]
    b_ours, n_ours = uo.broken_steps(net, old, ours)
    b_rr, n_rr = uo.broken_steps(net, old, before)
    print(f"{label:<44} {len(changes):>6} {b_rr:>12,} {b_ours:>10,} {n_ours:>6} {len(order.stages):>6} "
          f"{len(order.loops):>5} {cpu * 1000:>8.1f}")


def drain(name, fabric, node, engine):
    rin = routing_inputs.rin_of(fabric)
    gone = next(n.guid for n in fabric if n.name == node)
    after = without(rin, gone)
    measure(f"{name}: drain {node} ({engine})", rin, images(routing.route(engine, rin)),
            images(routing.route(engine, after)), after.lid_homes)


def switch_engine(name, fabric, a, b):
    rin = routing_inputs.rin_of(fabric)
    measure(f"{name}: {a} -> {b}", rin, images(routing.route(a, rin)), images(routing.route(b, rin)),
            rin.lid_homes)


def loop_steps(ports, old, order) -> int:
    now = {s: dict(m) for s, m in old.items()}
    steps = 0
    for s, m in order:
        now[s] = m
        steps += len(uo.mcast_loops(ports, now))
    return steps


def mcast_drain(name, fabric):
    ports, (root, old), without = routing_inputs.mcast_trees(fabric)
    new = without(root)
    new = {s: new.get(s, {m: 0 for m in old[s]}) for s in old}
    units = [s for s in old if old[s] != new[s]]
    changes = [uo.MaskChange([old[s][m] for m in sorted(old[s])], [new[s][m] for m in sorted(old[s])]) for s in units]
    as_masks = lambda s, masks: (s, dict(zip(sorted(old[s]), masks)))  # noqa: E731
    plain = loop_steps(ports, old, [as_masks(s, c.new) for s, c in zip(units, changes)])
    rng = random.Random(1)
    shuffled = []
    for _ in range(20):
        idx = list(range(len(units)))
        rng.shuffle(idx)
        shuffled.append(loop_steps(ports, old, [as_masks(units[i], changes[i].new) for i in idx]))
    stages = uo.mft_staged(changes)
    ours = loop_steps(ports, old, [as_masks(units[w.index], w.masks) for st in stages for w in st])
    sets = sum(len(st) for st in stages)
    print(f"{name + ': drain the root ' + root:<44} {len(units):>6} {plain:>12,} "
          f"{sum(shuffled) / len(shuffled):>10,.1f} {max(shuffled):>8,} {ours:>8,} {sets:>6}")


def main() -> None:
    print(f"{'scenario':<44} {'blocks':>6} {'round-robin':>12} {'smagent':>10} {'Sets':>6} {'stages':>6} "
          f"{'loops':>5} {'order ms':>8}")
    print("(broken pair-steps: round-robin, the apply's order before; smagent, staged)")
    ft2 = lambda: topogen.fat_tree_2(36)  # noqa: E731 - 648 hosts
    ft3 = lambda: topogen.fat_tree_3(8, hosts=128)  # noqa: E731
    for eng in ("minhop", "updn", "ftree"):
        drain("ft2-648", ft2(), "S0", eng)
        drain("ft3-128", ft3(), "S0", eng)
        drain("ft3-128", ft3(), "A0", eng)
    drain("damaged ft3", routing_inputs.damaged_ft3(), "A1", "updn")
    drain("torus 6x6x2", topogen.torus_2d(6, 6, 2), "T2_2", "dfsssp")
    drain("mesh 5x5x2", topogen.mesh_2d(5, 5, 2), "T2_2", "updn")
    switch_engine("ft3-128", ft3(), "minhop", "ftree")
    switch_engine("torus 6x6x2", topogen.torus_2d(6, 6, 2), "updn", "dfsssp")
    print()
    print(f"{'multicast (4 groups of every host)':<44} {'units':>6} {'switch order':>12} {'random avg':>10} "
          f"{'max':>8} {'smagent':>8} {'Sets':>6}")
    print("(group x Set steps where copies can go round: every Set at once in switch order, 20 random orders, staged)")
    mcast_drain("ft2-648", topogen.fat_tree_2(36))
    mcast_drain("ft3-128", topogen.fat_tree_3(8, hosts=128))
    mcast_drain("damaged ft3", routing_inputs.damaged_ft3())
    mcast_drain("torus 6x6x2", topogen.torus_2d(6, 6, 2))
    mcast_drain("mesh 5x5x2", topogen.mesh_2d(5, 5, 2))


if __name__ == "__main__":
    main()
