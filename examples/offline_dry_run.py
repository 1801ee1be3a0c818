#!/usr/bin/env python3
"""Offline dry run example: plan a change on a machine with no fabric, from a recording.
Written against the Python API alone.

    python examples/offline_dry_run.py [--fixture FILE] [--record FILE] [--topology FILE]

Without ``--fixture`` it makes its own recording first, as one would on the fabric's
management host: a simulator session is brought up, then only the Gets of a plan are
recorded (``session.recording(FILE)``). Then, offline, a replay session on that file
plans again (``connect("replay", fixture=FILE)``): no fabric, no Set, the same plan.
With ``--fixture`` (e.g. fixtures/two-switch-fresh.erf, a fresh fabric recorded on
ibsim) it only dry-runs that recording as a sweep.

Prints the offline plan on stdout and one line of figures on stderr. Exits 0 when the
offline plan is the live one, 1 when they differ, 2/3 on bad input or a replay miss (a
request the recording lacks: the error names it).
"""
import argparse
import os
import sys
import tempfile

import smagent
from smagent.sweep import desired

# the change to plan: a multicast group of every CA port, and IPoIB broadcast kept
CHANGE = {"multicast": [{"mlid": 0xC000, "members": ["all"]}, {"mlid": 0xC001, "members": ["all"]}]}


def record_plan(path: str, topology) -> list[str]:
    """On the fabric: bring it up, record the Gets of one plan of CHANGE; its plan lines."""
    with smagent.connect("sim", topology=topology) as fabric:
        fabric.sweep()
        with fabric.recording(path):
            return fabric.plan(desired.parse(CHANGE, "offline_dry_run.py")).plan_lines()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fixture", help="an existing recording to dry-run as a sweep")
    ap.add_argument("--record", help="where to write the recording (default: a temporary file)")
    ap.add_argument("--topology", help="the simulated fabric to record from")
    args = ap.parse_args()
    try:
        if args.fixture:
            with smagent.connect("replay", fixture=args.fixture) as offline:
                plan = offline.sweep(dry_run=True)
            print("\n".join(plan.plan_lines()))
            print(f"# {args.fixture}: {plan.sets_planned} Sets planned offline on {len(plan.topology.nodes)} "
                  f"nodes, {plan.stats['sent']} requests answered from the recording", file=sys.stderr)
            return 0
        with tempfile.TemporaryDirectory() as tmp:
            path = args.record or os.path.join(tmp, "plan.erf")
            live = record_plan(path, args.topology)
            with smagent.connect("replay", fixture=path) as offline:  # from here on: no fabric
                plan = offline.plan(desired.parse(CHANGE, "offline_dry_run.py"))
                sets = sum(v for k, v in offline.stats["by_kind"].items() if k.startswith("SubnSet"))
            lines = plan.plan_lines()
            print("\n".join(lines))
            same = lines == live
            print(f"# recorded {os.path.getsize(path)} bytes; offline plan: {len(lines)} Sets on "
                  f"{len(plan.topology.nodes)} nodes, {sets} Sets sent, "
                  f"{'the same as' if same else 'DIFFERENT from'} the live plan", file=sys.stderr)
            return 0 if same and sets == 0 else 1
    except smagent.SmagentError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main())
