#!/usr/bin/env python3
"""Provisioning example: bring a fabric up, then give it a static route and a multicast
group from a desired state: plan, show, apply, prove (a fresh plan is empty, `verify`
finds no defect). Written against the Python API alone.

    python examples/provision.py [--transport sim|umad] [--topology FILE] [--lid-file FILE]

The static route sends one host's LID from a leaf switch up its *other* uplink (routing
chose one; the admin wants the second, e.g. to keep a link free); the group 0xC001 joins
two hosts. Both are named the way the CLI names targets: descriptions and a LID.

Prints one JSON summary on stdout, the plan on stderr. Exits 0 when the fabric holds
the desired state, 1 when something is left to fix, 2/3/4 on bad input, a fabric
failure or a refusal (the same codes as the CLI).
"""
import argparse
import json
import sys

import smagent
from smagent.sweep import desired


def choose_static_route(fabric, topo):
    """A leaf, a remote host's LID and the leaf's uplink that routing did not choose."""
    by_guid = topo.nodes
    for leaf in sorted(topo.switches(), key=lambda n: n.description):
        uplinks = sorted(p for p in range(1, leaf.num_ports + 1)
                         if (peer := topo.links.get((leaf.guid, p))) and by_guid[peer[0]].is_switch)
        hosts_here = {topo.links[(leaf.guid, p)][0] for p in range(1, leaf.num_ports + 1)
                      if (leaf.guid, p) in topo.links}
        if len(uplinks) < 2:
            continue
        remote = next((h for h in sorted(topo.cas(), key=lambda n: n.description) if h.guid not in hosts_here), None)
        if remote is None:
            continue
        lid = remote.lid(remote.lid_ports()[0])
        now = fabric.lft_show(leaf.description).table[lid]
        other = next(p for p in uplinks if p != now)
        return leaf.description, lid, other, now
    raise SystemExit("no leaf switch with two uplinks: this example needs a fat tree")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--transport", default="sim")
    ap.add_argument("--topology")
    ap.add_argument("--lid-file")
    args = ap.parse_args()
    try:
        with smagent.connect(args.transport, topology=args.topology) as fabric:
            up = fabric.sweep(lid_file=args.lid_file)  # LIDs first: the static route names one
            topo = fabric.discover()
            leaf, lid, port, was = choose_static_route(fabric, topo)
            hosts = sorted(n.description for n in topo.cas())[:2]
            want = desired.parse({
                "lid_file": args.lid_file,  # routing: the default (auto), as the bring-up routed
                "lft": [{"switch": leaf, "lid": lid, "port": port}],
                "multicast": [{"mlid": 0xC000, "members": ["all"]},  # keep IPoIB broadcast
                              {"mlid": 0xC001, "members": hosts}],
            }, "provision.py")
            plan = fabric.plan(want)
            print(f"# bring-up: {up.sets_planned} Sets; now {plan.sets_planned} Sets planned for: "
                  f"{leaf} LID {lid} out of port {port} (routing chose {was}), group 0xc001 = {', '.join(hosts)}",
                  file=sys.stderr)
            for line in plan.plan_lines():
                print("  " + line, file=sys.stderr)
            applied = fabric.apply(want)
            report = fabric.verify()
            summary = applied.result.summary()
            summary.update(static_route={"switch": leaf, "lid": lid, "port": port, "was": was},
                           group={"mlid": "0xc001", "members": hosts},
                           planned=plan.plan_lines(), left_after_apply=applied.left_after_apply,
                           verify_ok=report.ok, lft_now=fabric.lft_show(leaf).table[lid])
            print(json.dumps(summary))
            return 0 if applied.ok and report.ok and summary["lft_now"] == port else 1
    except smagent.SmagentError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main())
