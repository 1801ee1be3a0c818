#!/usr/bin/env python3
"""Pre-change CI gate: judge proposed desired states offline, from one snapshot of the fabric.
Written against the Python API alone.

    python examples/ci_gate.py snapshot FILE [--transport umad|sim]   # on the management host
    python examples/ci_gate.py check FILE DESIRED.yaml ...           # anywhere, no fabric

``snapshot`` records one discovery and every table any plan could read
(``Session.snapshot``). ``check`` plans each desired state against a replay of that file
(``connect("replay", fixture=FILE)``: no fabric, no Set) and prints one JSON line per
desired state: ``verdict`` ("pass", "refused": the planned tables would break the
fabric and ``apply`` would refuse them, "bad input": the desired state does not fit the
fabric, "error"), the exit code ``smagent plan`` would give (0, 1, 2, 3), the Sets planned and the plan (as `plan --json` lists it): the same
verdict a live ``smagent plan`` gives on that fabric. A read the snapshot lacks is an
error naming every missing read. Exits 0 when every desired state passes, 1 when one
does not, 2/3 when the snapshot cannot be taken or read.
"""
import argparse
import json
import sys

import smagent


def verdict(offline, path: str) -> dict:
    """One desired state planned on the replay: what `smagent plan` would say."""
    try:
        plan = offline.plan(path)
    except smagent.SmagentError as e:
        kind = "bad input" if e.exit_code == 2 else "error"
        return {"desired": path, "verdict": kind, "exit": e.exit_code, "problems": [str(e)]}
    out = {"desired": path, "sets": plan.sets_planned, "plan": plan.plan_changes()}
    if plan.problems or plan.topology.unreachable:  # as `smagent plan` exits
        return {**out, "verdict": "error", "exit": 3, "problems": plan.problems + plan.topology.unreachable}
    if plan.plan_defects:  # `apply` would refuse it
        return {**out, "verdict": "refused", "exit": 1, "defects": plan.plan_defects}
    return {**out, "verdict": "pass", "exit": 0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    snap = sub.add_parser("snapshot", help="record the fabric's tables to FILE")
    snap.add_argument("file")
    snap.add_argument("--transport", default="umad", help="umad (default) or sim")
    check = sub.add_parser("check", help="judge desired states offline from FILE")
    check.add_argument("file")
    check.add_argument("desired", nargs="+")
    args = ap.parse_args()
    try:
        if args.what == "snapshot":
            with smagent.connect(args.transport) as fabric:
                s = fabric.snapshot(args.file).summary()
            print(json.dumps({k: s[k] for k in ("file", "nodes", "requests", "failed")}))
            return 0
        with smagent.connect("replay", fixture=args.file) as offline:
            results = [verdict(offline, path) for path in args.desired]
    except smagent.SmagentError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    for r in results:
        print(json.dumps(r))
    failed = [r["desired"] for r in results if r["verdict"] != "pass"]
    print(f"# {len(results) - len(failed)} of {len(results)} desired states pass"
          + (f"; not: {', '.join(failed)}" if failed else ""), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
