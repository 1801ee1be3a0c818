#!/usr/bin/env python3
"""An SA that no host can stall: every pair's PathRecord table vs the work behind it,
`smagent run` and OpenSM side by side on the same ibsim fabric (a 375-node 3-level tree:
fat_tree_3(10), 250 hosts).

For each SM in turn (it brings the fabric up alone, periodic sweeps pushed out):

* get behind: a client on one host asks SubnAdmGetTable(PathRecord) naming neither end
  (every pair: 140,625 records) and reads the whole answer through smagent's own RMPP
  receiver (`SaClient.table`); 20 ms after it has sent it, a client on another host sends
  a NodeRecord Get: how long that Get waits, and how long the whole table took;
* `saquery -p` (every pair), timed to its exit;
* repair: three clients on three hosts ask for such a table each; 50 ms later a leaf's
  uplink is cut (ibsim console `Unlink`): time until the SM has repaired (smagent: its
  status' last sweep; OpenSM: the next "SUBNET UP" in its log).

Under ibsim, OpenSM's table reaches the client as its first 256 bytes only (umad2sim knows
no RMPP, OpenSM leaves RMPP to the kernel): its "whole table" time is the time to its first
MAD. Not a test: figures are reported, never asserted (a loaded 2-core machine moves them).

    python bench/sa_table_stall.py                 # fat_tree_3(10), both SMs
    python bench/sa_table_stall.py --k 6 --sm smagent --json out.json
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from daemon_vs_opensm import OpenSMRun, SmagentRun, cut_link  # noqa: E402
from ibsim_harness import IbSim  # noqa: E402

from smagent.model import netfile, topogen  # noqa: E402

GET_DELAY_S = 0.02  # the Get leaves this long after the table's request
CUT_DELAY_S = 0.05  # the link is cut this long after the three tables' requests


def client(mode: str, go: str, timeout_s: float) -> dict:
    """One client (in its own process, on its own ibsim node): ``table`` sends the every-pair
    GetTable, then creates the file ``go`` and reads the table (``table-after-get``: once
    the ``get`` client is ready); ``get`` waits for ``go``, then `GET_DELAY_S`, then times a
    NodeRecord Get."""
    from mad import sa
    from mad.header import Method
    from mad.sa_records import NodeRecord, PathRecord
    from mad.smp import next_tid
    from smagent.sa.client import SaClient, sa_address
    from smagent.transport import open_transport
    from smagent.transport.base import Request
    from smagent.transport.umad import SA_CLIENT
    t = open_transport("umad", classes=[SA_CLIENT], window=1, retries=0, timeout_ms=int(timeout_s * 1000))
    c = SaClient(t, sa_address(t), max_table=1 << 26)  # every pair's records: 9 MB on 375 nodes
    if mode == "get":
        Path(go + ".ready").touch()  # the table's request leaves once this Get can follow it
        while not os.path.exists(go):
            time.sleep(0.001)
        time.sleep(GET_DELAY_S)
        t0 = time.monotonic()
        rec = c.get(NodeRecord(lid=c.address.lid), NodeRecord.mask("lid"))
        return {"get_s": round(time.monotonic() - t0, 4), "ok": rec.lid == c.address.lid}
    if mode == "table-after-get":
        while not os.path.exists(go + ".ready"):
            time.sleep(0.001)
    t0 = time.monotonic()
    raw = sa.request(Method.GET_TABLE, PathRecord(), component_mask=0, transaction_id=next_tid()).encode()
    Path(go).touch()  # a few microseconds before the request leaves: the Get waits GET_DELAY_S more
    (reply,) = t.execute([Request.gmp(raw, c.address)])
    first = time.monotonic() - t0
    if reply.raw is None:
        return {"error": f"no answer: {reply.error}", "seconds": round(first, 3)}
    records = c._records(reply.raw, PathRecord)
    return {"first_mad_s": round(first, 3), "table_s": round(time.monotonic() - t0, 3), "records": len(records)}


def spawn(sim, host: str, mode: str, go: Path, timeout_s: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, "--client", json.dumps([mode, str(go), timeout_s])],
                            env=dict(sim.env, SIM_HOST=host), cwd=sim.cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def collect(p: subprocess.Popen, timeout: float) -> dict:
    out, err = p.communicate(timeout=timeout)
    if p.returncode:
        return {"error": err.strip().splitlines()[-1] if err.strip() else f"exit {p.returncode}"}
    return json.loads(out)


def run(tool: str, fabric, scratch: Path, a) -> dict:
    net = scratch / "fabric.net"
    scratch.mkdir(parents=True, exist_ok=True)
    net.write_text(netfile.dumps(fabric))
    cut = cut_link(fabric)
    out: dict = {"load_before": round(os.getloadavg()[0], 2)}
    with IbSim(net, scratch, extra_args=netfile.ibsim_size_args(fabric), console=True) as sim:
        if tool == "smagent":
            sm = SmagentRun(sim, "--sweep-interval", "300")
            sm.wait(lambda s: s.get("state") == "MASTER" and s["sweeps"] >= 1)
        else:
            sm = OpenSMRun(sim, scratch / "osm", "-s", "300")
            sm.wait_ups(1)
        try:
            time.sleep(1.0)
            go = scratch / "go-1"
            table = spawn(sim, "H1", "table-after-get", go, a.timeout)
            get = spawn(sim, "H2", "get", go, a.timeout)
            out["get_behind"] = collect(get, a.timeout + 30)
            out["table"] = collect(table, a.timeout + 60)
            time.sleep(1.0)
            t0 = time.monotonic()  # saquery -p: every pair (under ibsim it prints the first MAD's records)
            r = subprocess.run(["saquery", "-p"], env=sim.env, cwd=sim.cwd, capture_output=True, text=True, timeout=120)
            out["saquery_p"] = {"seconds": round(time.monotonic() - t0, 3), "exit": r.returncode}
            time.sleep(1.0)
            go = scratch / "go-3"
            tables = [spawn(sim, f"H{h}", "table", go, a.timeout) for h in (3, 4, 5)]
            while not go.exists():
                time.sleep(0.001)
            time.sleep(CUT_DELAY_S)
            t0 = time.time()
            sim.unlink(*cut)
            if tool == "smagent":
                s = sm.wait(lambda s: s["counters"]["repairs"] >= 1, timeout=120)
                out["repair_s"] = round(s["last_sweep"]["time"] - t0, 3)
            else:
                out["repair_s"] = round(sm.wait_ups(2, timeout=120)[1] - t0, 3)
            out["tables_meanwhile"] = [collect(p, a.timeout + 60) for p in tables]
        finally:
            sm.stop()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--k", type=int, default=10, help="fat_tree_3(K): K=10 is 375 nodes")
    p.add_argument("--sm", choices=("both", "smagent", "opensm"), default="both")
    p.add_argument("--timeout", type=float, default=30.0, help="a client's wait for the first MAD (s)")
    p.add_argument("--json", type=Path)
    p.add_argument("--client", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.client:
        mode, go, timeout_s = json.loads(a.client)
        print(json.dumps(client(mode, go, timeout_s)))
        return
    fabric = topogen.fat_tree_3(a.k)
    result: dict = {"fabric": f"fat_tree_3({a.k})", "nodes": len(fabric.nodes), "date": time.strftime("%F %T %Z")}
    with tempfile.TemporaryDirectory(prefix="sa-stall-") as tmp:
        for tool in ("opensm", "smagent") if a.sm == "both" else (a.sm,):
            r = result[tool] = run(tool, fabric, Path(tmp) / tool, a)
            print(f"{tool:8} {json.dumps(r)}", flush=True)
    if a.json:
        a.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
