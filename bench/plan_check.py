"""The check of planned tables (`smagent.sweep.plancheck`, run by every sweep and apply before its
first Set) on the in-process simulator: its CPU time against the whole dry run's, on a
fresh fabric and on one already swept (then both snapshots have LIDs and routes).

    python bench/plan_check.py                          # fixtures/ft2-648.net, 648 hosts
    python bench/plan_check.py --topology FILE --runs 5

CPU time (time.process_time), so a loaded machine skews it less than wall time; the dry
run's figure includes the simulator answering every Get in the same process.

Then what a manual edit's check costs (issue 39 item 3, `Session.edit_check`): ``lft set
--dry-run`` of one entry with the check (the fabric's tables read as `verify` reads them,
then `plancheck.check_edit`) and without (`fdb.ops.lft_set` with no ``check``), CPU time
and SMPs; and the share of the plan check spent on the hottest-link figure
(`verify.balance.compute`, which the sweep summary names).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import smagent  # noqa: E402
from smagent.fdb import ops  # noqa: E402
from smagent.sweep import plancheck  # noqa: E402
from smagent.verify import balance  # noqa: E402


def cpu(fn):
    t0 = time.process_time()
    out = fn()
    return out, time.process_time() - t0


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topology", default=str(ROOT / "fixtures" / "ft2-648.net"))
    ap.add_argument("--runs", type=int, default=3)
    ns = ap.parse_args(argv)
    with smagent.connect("sim", topology=ns.topology) as fabric:
        for state in ("fresh", "swept"):
            if state == "swept":
                fabric.sweep()
            dry, plans = [], []
            for _ in range(ns.runs):
                r, t = cpu(lambda: fabric.sweep(dry_run=True))
                dry.append(t)
                plans.append(cpu(lambda: plancheck.check(r))[1])
            rep = r.plan_check.report.summary
            print(f"{state}: {rep['switches']} switches, {rep['lids']} LIDs, {rep['pairs']} pairs: "
                  f"plan check {statistics.median(plans):.3f} s CPU, whole dry run {statistics.median(dry):.3f} s CPU "
                  f"(median of {ns.runs})")
        new = plancheck._snapshot(r, planned=True)
        bal = statistics.median(cpu(lambda: balance.compute(new, hottest=0))[1] for _ in range(ns.runs))
        print(f"of which the hottest-link figure (balance.compute): {bal:.3f} s CPU")
        edit(fabric, ns.runs)


def edit(fabric, runs: int) -> None:
    """One LFT entry set, dry run: with the check and without. The entry: the LID above
    the switch's LinearFDBTop (nobody's) to port 0, a change that breaks nothing."""
    sw = fabric.discover().switches()[0]
    lid, port = fabric.lft_show(f"{sw.guid:#018x}").top + 1, 0
    target = fabric.target(f"{sw.guid:#018x}")
    for name, check in (("with the check", fabric.edit_check()), ("without", None)):
        times, smps = [], []
        for _ in range(runs):
            sent = fabric.transport.stats.sent
            _r, t = cpu(lambda: ops.lft_set(fabric.transport, target, lid, port, dry_run=True, check=check))
            times.append(t)
            smps.append(fabric.transport.stats.sent - sent)
        print(f"lft set {sw.description} {lid} {port} --dry-run {name}: {statistics.median(times):.3f} s CPU, "
              f"{smps[0]} SMPs")


if __name__ == "__main__":
    main()
