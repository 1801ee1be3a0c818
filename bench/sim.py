"""SMP round trips per second through SimTransport: directed-route NodeInfo Gets with a
window of 8, the median of 5 runs. Target: at least 20,000/s.

    python bench/sim.py [--topology FILE] [--count N] [--runs 5] [--window 8] [--profile]
    python bench/sim.py --all-pairs 36    # data-plane traces, every host pair of fat_tree_2(36)
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mad import smp  # noqa: E402
from mad.attributes import AttrID  # noqa: E402
from smagent.transport.base import Request  # noqa: E402
from smagent.transport.sim import SimTransport  # noqa: E402

# DR paths of the bundled default topology from H1 port 1: 1 to 3 hops.
PATHS = ["0,1", "0,1,5", "0,1,5,2", "0,1,6,3,1", "0,1,1", "0,1,2"]


def one_run(transport: SimTransport, count: int) -> float:
    reqs = [Request(smp.dr(1, AttrID.NODE_INFO, PATHS[i % len(PATHS)])) for i in range(count)]
    t0 = time.perf_counter()
    replies = transport.execute(reqs)
    dt = time.perf_counter() - t0
    bad = [r for r in replies if not r.ok]
    if bad:
        raise SystemExit(f"{len(bad)} failed, first: {bad[0].error}")
    return count / dt


def program_min_hop(sim) -> dict:
    """LIDs and shortest-path LFTs written straight into the simulator (no SMPs): the
    bench measures tracing, not programming. Returns {(host, port): lid}."""
    import collections

    plan, lid = {}, 1
    for n in sim:
        for p in ([0] if n.is_switch else [p for p in range(1, n.num_ports + 1) if n.peers[p]]):
            plan[(n.name, p)] = lid
            sim.set_lid(n.name, p, lid)
            lid += 1
    for (name, port), lid in plan.items():
        node = sim.node(name)
        dest, out0 = (node, 0) if node.is_switch else (node.peers[port][0], node.peers[port][1])
        dest.lft[lid] = out0
        seen, queue = {dest.name}, collections.deque([dest])
        while queue:  # BFS outwards: each switch reached points back the way it was reached
            s = queue.popleft()
            for p in range(1, s.num_ports + 1):
                peer = s.peers[p]
                if peer and peer[0].is_switch and peer[0].name not in seen:
                    seen.add(peer[0].name)
                    peer[0].lft[lid] = peer[1]
                    queue.append(peer[0])
    for sw in sim.switches():
        sw.si.linear_fdb_top = lid - 1
    sim.activate_all()
    return {k: v for k, v in plan.items() if not sim.node(k[0]).is_switch}


def all_pairs(k: int) -> None:
    from smagent.model import topogen
    from smagent.sim import SimFabric, trace

    sim = SimFabric.from_fabric(topogen.fat_tree_2(k))
    hosts = program_min_hop(sim)
    t0 = time.perf_counter()
    bad = 0
    for src in hosts:
        for dst, lid in hosts.items():
            bad += trace(sim, src, lid).dest != dst
    dt = time.perf_counter() - t0
    n = len(hosts) ** 2
    print(f"trace: {n:,} host pairs of fat_tree_2({k}) ({len(hosts)} hosts) in {dt:.2f} s, "
          f"{n / dt:,.0f} traces/s, {bad} not delivered")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default=None, help="net file (default: the bundled fabric)")
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--window", type=int, default=8)
    ap.add_argument("--profile", action="store_true", help="profile one run with cProfile")
    ap.add_argument("--all-pairs", type=int, metavar="K", help="instead: trace all host pairs of fat_tree_2(K)")
    args = ap.parse_args(argv)
    if args.all_pairs:
        all_pairs(args.all_pairs)
        return
    t = SimTransport(args.topology, window=args.window)
    if args.profile:
        import cProfile
        import pstats
        cProfile.runctx("one_run(t, args.count)", globals(), {"t": t, "args": args, "one_run": one_run},
                        "/tmp/sim.prof")
        pstats.Stats("/tmp/sim.prof").sort_stats("tottime").print_stats(20)
        return
    one_run(t, 1000)  # warm up caches
    rates = [one_run(t, args.count) for _ in range(args.runs)]
    print(f"SimTransport: {statistics.median(rates):,.0f} SMP round trips/s "
          f"(median of {args.runs} runs of {args.count} DR NodeInfo Gets, window {args.window}; "
          f"runs: {', '.join(f'{r:,.0f}' for r in rates)})")


if __name__ == "__main__":
    main()
