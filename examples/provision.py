#!/usr/bin/env python3
"""Provisioning example: plan, show, apply, prove.

    python examples/provision.py [--transport sim|umad] [--topology FILE] [--lid-file FILE]

Exits 0 when the fabric holds the plan, 1 when something is left to fix, 2/3 on bad
input or a fabric failure (the same codes as the CLI).
"""
import argparse
import json
import sys

import smagent


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--transport", default="sim")
    ap.add_argument("--topology")
    ap.add_argument("--lid-file")
    args = ap.parse_args()
    try:
        with smagent.connect(args.transport, topology=args.topology) as fabric:
            plan = fabric.sweep(dry_run=True, lid_file=args.lid_file)
            print(f"{plan.sets_planned} Sets planned on {len(plan.topology.nodes)} nodes", file=sys.stderr)
            for line in plan.plan_lines()[:5]:
                print("  " + line, file=sys.stderr)
            result = fabric.sweep(lid_file=args.lid_file)
            again = fabric.sweep(dry_run=True, lid_file=args.lid_file)  # converged: nothing left
            summary = result.summary()
            summary["left_after_apply"] = again.sets_planned
            print(json.dumps(summary))
            return 0 if not result.problems and again.sets_planned == 0 else 1
    except smagent.SmagentError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main())
