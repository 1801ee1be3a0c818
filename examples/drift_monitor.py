#!/usr/bin/env python3
"""Drift monitor example: compare what the switches hold with a saved baseline, using the
bulk reads (every LFT, every MFT and every PortInfo, each in one windowed batch).
Written against the Python API alone.

    python examples/drift_monitor.py --baseline FILE [--save] [--checks N] [--interval S]
                                     [--transport sim|umad] [--topology FILE]
                                     [--inject SWITCH LID PORT]

``--save`` (or no FILE yet) writes the baseline: the state as read now. Otherwise each
check reads the fabric and lists every difference: LFT entries (switch, LID, old -> new
port), MFT entries (switch, MLID, ports), and the port fields a monitor cares about (LID,
LMC, state, MTU, VLs). The in-process simulator starts unconfigured, so with
``--transport sim`` the script brings it up first; ``--inject`` changes one LFT entry
before the checks (in the simulator, to see the monitor catch it).

Prints the drift on stdout, one line per difference, and a summary on stderr. Exits 0
with no drift, 1 with drift, 2/3 on bad input or a fabric failure.
"""
import argparse
import json
import os
import sys
import time

import smagent

PORT_FIELDS = ("lid", "lmc", "port_state", "neighbor_mtu", "operational_vls")


def snapshot(fabric) -> dict:
    """The state to compare, as JSON-able text keys: one discovery, three bulk reads."""
    topo = fabric.discover()
    names = {f"{n.guid:#018x}": n.description for n in topo.nodes.values()}
    lfts = fabric.read_lfts(topo)
    mfts = fabric.read_mfts(topo)
    ports = fabric.read_portinfos(topo)
    return {
        "names": names,
        "lft": {f"{g:#018x}": table.hex() for g, table in lfts.items()},
        "mft": {f"{g:#018x}": {f"{mlid:#06x}": ports for mlid, ports in sorted(groups.items())}
                for g, groups in mfts.items()},
        "ports": {f"{g:#018x}:{p}": {f: int(getattr(pi, f)) for f in PORT_FIELDS}
                  for (g, p), pi in sorted(ports.items())},
    }


def drift(base: dict, now: dict) -> list[str]:
    """Every difference, readable; empty when the fabric holds the baseline."""
    names = {**base["names"], **now["names"]}
    out = [f"node {names[g]} ({g}): {'gone' if g in base['names'] else 'new'}"
           for g in sorted(set(base["names"]) ^ set(now["names"]))]
    for g in sorted(set(base["lft"]) & set(now["lft"])):
        old, new = bytes.fromhex(base["lft"][g]), bytes.fromhex(now["lft"][g])
        for lid in range(max(len(old), len(new))):
            a = old[lid] if lid < len(old) else None
            b = new[lid] if lid < len(new) else None
            if a != b:
                out.append(f"LFT {names[g]}: LID {lid}: port {a} -> {b}")
    for g in sorted(set(base["mft"]) & set(now["mft"])):
        old, new = base["mft"][g], now["mft"][g]  # {"0xc000": [ports]}
        for mlid in sorted(set(old) | set(new), key=lambda m: int(m, 16)):
            if old.get(mlid) != new.get(mlid):
                out.append(f"MFT {names[g]}: MLID {mlid}: ports {old.get(mlid, [])} -> {new.get(mlid, [])}")
    for key in sorted(set(base["ports"]) | set(now["ports"])):
        a, b = base["ports"].get(key), now["ports"].get(key)
        g, port = key.split(":")
        if a is None or b is None:
            out.append(f"port {names.get(g, g)} {port}: {'no longer answers' if b is None else 'new'}")
            continue
        diffs = [f"{f} {a[f]} -> {b[f]}" for f in PORT_FIELDS if a[f] != b[f]]
        if diffs:
            out.append(f"port {names.get(g, g)} {port}: " + ", ".join(diffs))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--save", action="store_true", help="write the baseline from the fabric as it is now")
    ap.add_argument("--checks", type=int, default=1)
    ap.add_argument("--interval", type=float, default=10.0)
    ap.add_argument("--transport", default="sim")
    ap.add_argument("--topology")
    ap.add_argument("--inject", nargs=3, metavar=("SWITCH", "LID", "PORT"))
    args = ap.parse_args()
    try:
        with smagent.connect(args.transport, topology=args.topology) as fabric:
            if args.transport == "sim":
                fabric.sweep()  # the simulator starts unconfigured
            if args.save or not os.path.exists(args.baseline):
                with open(args.baseline, "w", encoding="utf-8") as f:
                    json.dump(snapshot(fabric), f)
                print(f"# baseline written to {args.baseline}", file=sys.stderr)
                if not args.inject:
                    return 0
            with open(args.baseline, encoding="utf-8") as f:
                base = json.load(f)
            if args.inject:
                switch, lid, port = args.inject
                fabric.lft_set(switch, int(lid, 0), int(port, 0))
            found = []
            for i in range(args.checks):
                if i:
                    time.sleep(args.interval)
                t0 = time.monotonic()
                found = drift(base, snapshot(fabric))
                for line in found:
                    print(line)
                print(f"# check {i + 1}: {len(found)} difference(s) from {args.baseline}, "
                      f"{time.monotonic() - t0:.3f} s", file=sys.stderr)
            return 1 if found else 0
    except smagent.SmagentError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main())
