"""Routing and table computation at scale: RoutingInput.build + route + linear.desired_lft
for every switch, on the model of a 3-level fat tree of 36-port switches (11,664 hosts,
1,620 switches, 13,284 LIDs: 21.5 million LFT entries). Target: under 10 s and 2 GiB
per engine.

    python bench/routing.py                      # k=36, minhop and updn, LMC 0
    python bench/routing.py --k 24 --lmc 1 --engines minhop
    python bench/routing.py --engines ftree      # the fat-tree engine
    python bench/routing.py --engines dfsssp     # deadlock-free SSSP (also its layers: VLs used)
    python bench/routing.py --via-sim            # also time discovery through SimTransport
    python bench/routing.py --verify --k 16      # also time verify.check on the result

The discovery Topology is fabricated from `topogen.fat_tree_3(k)` without SMPs (what
discovery would return: nodes, port GUIDs, links), so the figure is the routing work
alone. Each engine runs in its own process, so its peak RSS (ru_maxrss) is its own;
the baseline line is a process that only builds the topology and the LID plan.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mad.attributes import NodeType  # noqa: E402
from smagent.planning import lidassign as lids  # noqa: E402
from smagent import routing
from smagent.model import topogen
from smagent.fdb import lft as linear  # noqa: E402
from smagent.discovery import DNode, Topology  # noqa: E402
from smagent.sweep import routing_input  # noqa: E402


class _NI:  # the one NodeInfo field anything downstream of discovery reads here
    def __init__(self, port_guid):
        self.port_guid = port_guid


def topology_from_fabric(fabric) -> Topology:
    """The Topology discovery would return for ``fabric`` (ibsim's GUID numbering), built
    directly: no PortInfo/SwitchInfo, which routing does not read."""
    guid, nodes = {}, {}
    nxt = {True: 0x200000, False: 0x100000}
    for n in fabric:
        g = nxt[n.is_switch]
        nxt[n.is_switch] += 1 if n.is_switch else n.num_ports + 1
        guid[n.name] = g
        d = DNode(g, NodeType.SWITCH if n.is_switch else NodeType.CA, n.num_ports, (0,), _NI(g),
                  description=n.name)
        if n.is_switch:
            d.port_guids[0] = g
        else:
            for p, _peer in fabric.connected_ports(n):
                d.port_guids[p] = g + p
                d.port_paths[p] = (0,)
        nodes[g] = d
    links = {}
    for a, b in fabric.links():
        ka, kb = (guid[a.node], a.num), (guid[b.node], b.num)
        links[ka], links[kb] = kb, ka
    first = next(iter(fabric))
    return Topology(nodes, links, (guid[first.name], 1))


def lid_plan(topo: Topology, lmc: int) -> lids.LidPlan:
    ports = []
    for n in sorted(topo.nodes.values(), key=lambda n: (not n.is_switch, n.guid)):
        for p in n.lid_ports():
            ports.append((n.port_guids.get(p, n.guid), n.is_switch, 0))
    return lids.assign(ports, lmc=lmc)


def maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_one(k: int, engine: str, lmc: int, do_verify: bool) -> dict:
    t0 = time.perf_counter()
    fabric = topogen.fat_tree_3(k)
    topo = topology_from_fabric(fabric)
    plan = lid_plan(topo, lmc)
    setup = time.perf_counter() - t0
    out = {"k": k, "engine": engine, "lmc": lmc, "switches": len(topo.switches()), "hosts": len(topo.cas()),
           "lids": len(plan.lids) if not lmc else None, "setup_s": round(setup, 2)}
    if engine == "baseline":
        out["maxrss_mib"] = round(maxrss_mib(), 1)
        return out
    cpu = time.process_time()
    t = time.perf_counter()
    rin = routing_input(topo, plan)
    t_build = time.perf_counter() - t
    t = time.perf_counter()
    routes = routing.route(engine, rin)
    t_route = time.perf_counter() - t
    t = time.perf_counter()
    lfts = {g: linear.desired_lft(routes[g], plan.top) for g in rin.switches}
    t_lft = time.perf_counter() - t
    cpu = time.process_time() - cpu  # on a shared machine wall time also counts other work
    entries = sum(len(v) for v in routes.values())
    assert entries == len(rin.switches) * len(rin.lid_homes), "every switch must route every LID"
    out.update(lids=len(rin.lid_homes), entries=entries, build_s=round(t_build, 2), route_s=round(t_route, 2),
               desired_lft_s=round(t_lft, 2), total_s=round(t_build + t_route + t_lft, 2), cpu_s=round(cpu, 2),
               maxrss_mib=round(maxrss_mib(), 1), lft_bytes=sum(len(v) for v in lfts.values()))
    if routes.sls is not None:
        out["layers"] = routes.layers
    if do_verify:
        from smagent import verify
        fabric_g = topogen.fat_tree_3(k)
        from smagent.model import netfile
        netfile.assign_ibsim_guids(fabric_g)
        for n in fabric_g:
            for p in n.lid_ports() if hasattr(n, "lid_ports") else ([0] if n.is_switch else
                                                                   [p for p, _ in fabric_g.connected_ports(n)]):
                pg = n.port_guid(p)
                if pg in plan.lids:
                    n.lids[p] = plan.lids[pg]
                    if lmc and not n.is_switch:
                        n.lmcs[p] = lmc
        t = time.perf_counter()
        snap = verify.snapshot_from_routes(fabric_g, routes, top=plan.top, lmc=lmc)
        rep = verify.check(snap)
        out.update(verify_s=round(time.perf_counter() - t, 2), verify_pairs=rep.summary["pairs"],
                   verify_defects=sorted(rep.defects), maxrss_mib=round(maxrss_mib(), 1))
    return out


def run_via_sim(k: int) -> dict:
    from smagent import discovery
    from smagent.transport.sim import SimTransport
    fabric = topogen.fat_tree_3(k)
    t = time.perf_counter()
    tr = SimTransport(fabric)
    t_sim = time.perf_counter() - t
    t = time.perf_counter()
    topo = discovery.discover(tr)
    return {"k": k, "sim_build_s": round(t_sim, 2), "discover_s": round(time.perf_counter() - t, 2),
            "smps": topo.smps, "nodes": len(topo.nodes), "maxrss_mib": round(maxrss_mib(), 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, default=36, help="switch radix (fat_tree_3(k)); default 36")
    ap.add_argument("--engines", default="minhop,updn")
    ap.add_argument("--lmc", type=int, default=0)
    ap.add_argument("--via-sim", action="store_true", help="also time SimTransport + discover")
    ap.add_argument("--verify", action="store_true", help="also time verify.check on the routes")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one == "sim":
        print(json.dumps(run_via_sim(a.k)))
        return
    if a.one:
        print(json.dumps(run_one(a.k, a.one, a.lmc, a.verify)))
        return
    runs = ["baseline", *a.engines.split(",")] + (["sim"] if a.via_sim else [])
    for engine in runs:
        cmd = [sys.executable, __file__, "--k", str(a.k), "--lmc", str(a.lmc), "--one", engine]
        if a.verify:
            cmd.append("--verify")
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"{engine}: failed\n{r.stderr}", file=sys.stderr)
            sys.exit(1)
        res = json.loads(r.stdout)
        if engine == "baseline":
            print(f"fat_tree_3({a.k}): {res['switches']} switches, {res['hosts']} hosts; topology + LID plan "
                  f"{res['setup_s']} s, peak RSS {res['maxrss_mib']} MiB (baseline)")
        elif engine == "sim":
            print(f"  SimTransport build {res['sim_build_s']} s + discover {res['discover_s']} s "
                  f"({res['smps']} SMPs, {res['nodes']} nodes), peak RSS {res['maxrss_mib']} MiB")
        else:
            line = (f"  {engine:7s} LMC {a.lmc}: {res['lids']} LIDs, {res['entries']:,} entries: "
                    f"build {res['build_s']} s + route {res['route_s']} s + desired_lft {res['desired_lft_s']} s "
                    f"= {res['total_s']} s (CPU {res['cpu_s']} s); peak RSS {res['maxrss_mib']} MiB")
            if "verify_s" in res:
                line += f"; verify.check {res['verify_s']} s ({res['verify_pairs']:,} pairs, defects {res['verify_defects']})"
            print(line)


if __name__ == "__main__":
    main()
