"""Where a fresh fabric's sweep SMPs go (issue 42): `smagent sweep --no-qos`'s SMPs on ibsim by
phase and attribute, with resends, timeouts and late answers counted apart, against what
each phase must send on that fabric (`expected`: one term per phase from the fabric's
counts), and those terms worked out for a larger fabric that is not run (`--project`).

    python bench/sweep_smp_breakdown.py --fabric ft3-1024
    python bench/sweep_smp_breakdown.py --fabric ft3-11664 --project ft3-39366

The sweep runs in a child process on ibsim through umad2sim (the library's `sweep` with
`--no-qos`'s link options, as `smagent sweep --no-qos` builds them; each phase's MADs by
kind from the transport's own count, resends included); ibsim -v counts the packets it
answered, the independent figure bench/sweep_vs_opensm.py compares with OpenSM's.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT / "bench"))


def child() -> None:
    """In ibsim's environment: one sweep, each phase's MADs by kind, the transport's stats."""
    from smagent import linkconf, sweep
    from smagent.sweep import state as statemod
    from smagent.transport import open_transport
    t = open_transport("umad")
    by_phase: dict[str, dict] = {}
    enter, exit_ = statemod.Phase.__enter__, statemod.Phase.__exit__

    def phase_enter(self):
        self.kinds0 = t.stats.by_kind
        return enter(self)

    def phase_exit(self, *exc):
        by_phase[self.name] = dict(t.stats.by_kind - self.kinds0)
        return exit_(self, *exc)
    statemod.Phase.__enter__, statemod.Phase.__exit__ = phase_enter, phase_exit  # type: ignore[method-assign]
    r = sweep.sweep(t, sweep.SweepOptions(links=linkconf.LinkOptions(qos=False).check()))
    top = max((n.switch_info.linear_fdb_top for n in r.topology.switches() if n.switch_info), default=0)
    json.dump({"phases": by_phase, "stats": t.stats.snapshot(), "problems": r.problems, "top": r.lid_plan.top,
               "linear_fdb_top_before": top}, sys.stdout)


def fabric_counts(fabric) -> dict:
    """What a fresh bring-up of ``fabric`` (every cabled port, one LID a port: LMC 0) has to touch."""
    sw = fabric.switches()
    cas = fabric.cas()
    ca_ports = sum(len(fabric.connected_ports(n)) for n in cas)
    sw_ext = sum(len(fabric.connected_ports(n)) for n in sw)
    sw_all = sum(n.num_ports + 1 for n in sw)  # discovery reads every port of a switch, port 0 included
    links = fabric.num_links
    lids = len(sw) + ca_ports
    blocks = (lids + 1 + 63) // 64  # LIDs 1..lids, 64 a block
    positions = sum((n.num_ports + 1 + 15) // 16 for n in sw)  # MFT port-mask positions, 16 ports each
    return {"nodes": len(fabric), "switches": len(sw), "ca_ports": ca_ports, "switch_ext_ports": sw_ext,
            "switch_ports_with_0": sw_all, "links": links, "lids": lids, "lft_blocks_per_switch": blocks,
            "mft_positions": positions}


def expected(c: dict) -> dict:
    """Each phase's SMPs on a fresh fabric, by the rule the sweep follows (no loss, no resend); the
    default group's MFT Sets depend on its tree and are not a term."""
    s = c["switches"]
    return {
        "discover": {"SubnGet(NodeInfo)": c["links"] + 1, "SubnGet(NodeDescription)": c["nodes"],
                     "SubnGet(SwitchInfo)": s, "SubnGet(PortInfo)": c["switch_ports_with_0"] + c["ca_ports"]},
        "link_read": {"SubnGet(P_KeyTable)": s + c["ca_ports"]},  # each end port's first block
        "lft_read": {"SubnGet(LinearForwardingTable)": s},  # the blocks up to LinearFDBTop: block 0 when fresh
        "mft_read": {"SubnGet(MulticastForwardingTable)": c["mft_positions"]},  # the default group's block
        "lids_arm": {"SubnSet(PortInfo)": c["switch_ports_with_0"] + c["ca_ports"]},  # LID, link fields, ARMED
        "switchinfo": {"SubnSet(SwitchInfo)": s},
        "lft_write": {"SubnSet(LinearForwardingTable)": s * c["lft_blocks_per_switch"]},
        "activate": {"SubnSet(PortInfo)": c["switch_ext_ports"] + c["ca_ports"]},  # ARMED -> ACTIVE
    }


def main(argv=None) -> None:
    from sweep_vs_opensm import count_packets, make_fabric
    from ibsim_harness import IbSim
    from smagent.model import netfile
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fabric", default="ft3-1024", help="as bench/sweep_vs_opensm.py names them")
    ap.add_argument("--project", nargs="*", default=[], help="fabrics whose expected SMPs are worked out, not run")
    ap.add_argument("--json", type=Path, help="the measured breakdown here")
    ns = ap.parse_args(argv)
    fabric = make_fabric(ns.fabric)
    counts = fabric_counts(fabric)
    print(f"{ns.fabric}: {counts}; {time.strftime('%F %T %Z')}, load {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="smp-breakdown-") as tmp:
        net = Path(tmp) / "fabric.net"
        net.write_text(netfile.dumps(fabric))
        with IbSim(net, Path(tmp) / "sim", extra_args=[*netfile.ibsim_size_args(fabric), "-v"],
                   ready_timeout=900) as sim:
            before = count_packets(sim.log)
            t0 = time.monotonic()
            out = subprocess.run([sys.executable, __file__, "--child"], env=sim.env, cwd=sim.cwd,
                                 capture_output=True, text=True, check=False)
            wall = time.monotonic() - t0
            time.sleep(0.5)
            packets = count_packets(sim.log) - before
    if out.returncode:
        raise SystemExit(f"the sweep failed ({out.returncode}): {out.stderr[-2000:]}")
    res = json.loads(out.stdout)
    res.update(fabric=ns.fabric, counts=counts, ibsim_packets=packets, wall_s=round(wall, 1),
               load_after=os.getloadavg())
    if ns.json:
        ns.json.write_text(json.dumps(res, indent=1))
    st = res["stats"]
    print(f"sweep: {st['sent']:,} SMPs sent by the transport (resends {st['retries']:,}, timeouts "
          f"{st['timeouts']:,}, late answers {st['late']:,}, busy {st['busy']:,}); ibsim answered or forwarded "
          f"{packets:,}; {wall:.1f} s; problems {len(res['problems'])}")
    exp = expected(counts)
    print(f"{'phase':12} {'attribute':34} {'sent':>10} {'expected':>10} {'extra':>8}")
    total_exp = 0
    for phase, kinds in res["phases"].items():
        for kind in sorted(set(kinds) | set(exp.get(phase, {}))):
            n, e = kinds.get(kind, 0), exp.get(phase, {}).get(kind)
            total_exp += e or 0
            if n or e:
                print(f"{phase:12} {kind:34} {n:>10,} {'-' if e is None else f'{e:,}':>10} "
                      f"{'' if e is None else f'{n - e:+,}':>8}")
    print(f"{'':12} {'rule-covered total':34} {'':>10} {total_exp:>10,}")
    for name in ns.project:
        c = fabric_counts(make_fabric(name))
        e = expected(c)
        tot = collections.Counter()
        for phase, kinds in e.items():
            tot[phase] = sum(kinds.values())
        print(f"{name}: {c}")
        print("  expected by phase: " + ", ".join(f"{k} {v:,}" for k, v in tot.items())
              + f"; total {sum(tot.values()):,} (LFT blocks {tot['lft_write']:,}, the rest "
              f"{sum(tot.values()) - tot['lft_write']:,})")


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        child()
    else:
        main()
