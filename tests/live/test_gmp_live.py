"""GMPs through `UmadTransport` on ibsim: LID-routed Performance Management Gets to QP1
(Q_Key 0x80010000) answered by ibsim's own PerfMgt agents, through the same window and
TID matching as SMPs, checked against infiniband-diags' perfquery on the same fabric;
and an SA request from another client (SIM_HOST) that arrives with its source address
and is answered at that address.

OpenSM (`opensm -o`) gives the ports their LIDs first; the code under test runs in a
child Python under ibsim's LD_PRELOAD (umad2sim), like tests/live/test_umad_live.py.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ibsim_harness import IbSim, ibsim_available, skip_reason

OPENSM = shutil.which("opensm", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))
pytestmark = [pytest.mark.ibsim,
              pytest.mark.skipif(OPENSM is None, reason="opensm is not installed (Debian package opensm)")]

NETFILE = Path(__file__).resolve().parents[1] / "vectors" / "ibsim-2sw4hca.net"

# Child: PerfGet(ClassPortInfo) and PerfGet(PortCounters) of a port, to each LID given,
# all in one batch (one window); prints what came back, decoded.
PERF = """
    import json, sys
    from mad import gmp, perfmgt
    from mad.smp import next_tid
    from smagent.transport import open_transport
    from smagent.transport.address import Address
    from smagent.transport.base import Request
    from smagent.transport.umad import PERF_CLIENT

    targets = json.loads(sys.argv[1])  # [[lid, port], ...]
    t = open_transport("umad", classes=[PERF_CLIENT])
    reqs = []
    for lid, port in targets:
        reqs.append(Request.gmp(perfmgt.get(gmp.CLASS_PORT_INFO, tid=next_tid()), Address.gsi(lid)))
        reqs.append(Request.gmp(perfmgt.port_counters_get(port, tid=next_tid()), Address.gsi(lid)))
    replies = t.execute(reqs, check=True)
    out = []
    for i in range(0, len(replies), 2):
        cpi = replies[i].gmp(gmp.ClassPortInfo)
        pc = replies[i + 1].gmp(perfmgt.PortCounters)
        out.append({"class_version": replies[i].raw[2], "cpi": [cpi.base_version, cpi.class_version,
                    cpi.capability_mask], "counters": {n: getattr(pc, n) for n in pc.LAYOUT.names}})
    print(json.dumps({"out": out, "stats": t.stats.snapshot()}))
    t.close()
"""

# Child: an SA (serve=True, SA_SERVER) that answers every request it is handed with
# status 0x000C at the address it came from, and prints that address.
SA = """
    import json
    from mad import gmp
    from smagent.transport import open_transport
    from smagent.transport.umad import SA_SERVER

    t = open_transport("umad", serve=True, classes=[SA_SERVER])
    seen = []
    def answer(m):
        a = m.address
        h = gmp.header_of(m.raw)
        seen.append({"lid": a.lid, "qpn": a.qpn, "grh": a.grh is not None, "class": h.mgmt_class,
                     "method": h.method, "attr": h.attribute_id})
        t.respond(gmp.response_to(m.raw, status=0x000C), a.reply())
    t.on_request = answer
    print("ready", flush=True)
    while not seen:
        t.poll(1.0)
    print(json.dumps(seen), flush=True)
    t.close()
"""


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    """ibsim with a console, LIDs assigned by OpenSM."""
    if not ibsim_available():
        pytest.skip(skip_reason())
    tmp = tmp_path_factory.mktemp("ibsim-gmp")
    with IbSim(NETFILE, tmp, console=True) as sim:
        r = subprocess.run([OPENSM, "-o", "-f", str(tmp / "osm.log")], env=sim.opensm_env(tmp / "osm"),
                           cwd=sim.cwd, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        yield sim


def _lid_of(sim: IbSim, node: str | None) -> int:
    """The base LID of the port a client attaches to at ``node`` (ibstat, a witness)."""
    env = dict(sim.env, **({"SIM_HOST": node} if node else {}))
    r = subprocess.run(["/usr/sbin/ibstat"], env=env, cwd=sim.cwd, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return int(re.search(r"Base lid: (\d+)", r.stdout).group(1))


def _perfquery(sim: IbSim, lid: int, port: int) -> tuple[int, dict[str, int]]:
    r = sim.run(["perfquery", str(lid), str(port)], check=True)
    cap = int(re.search(r"CapMask: (0x[0-9a-fA-F]+)", r.stdout).group(1), 16)
    return cap, {k: int(v, 0) for k, v in re.findall(r"^(\w+):\.+(\S+)$", r.stdout, re.M)}


def test_perfmgt_gets_to_qp1_match_perfquery(fabric):
    sim = fabric
    switch_lid, ca_lid = _lid_of(sim, None), _lid_of(sim, "Hca2")  # Switch1 (ibsim's first node), a CA
    assert switch_lid and ca_lid and switch_lid != ca_lid
    # counters only the console sets (traffic counters move with every MAD)
    sim.command('PerformanceSet "Switch1"[1] PortCounters.SymbolErrorCounter=7')
    sim.command('PerformanceSet "Hca2"[1] PortCounters.PortXmitDiscards=5')
    r = sim.run([sys.executable, "-c", textwrap.dedent(PERF), json.dumps([[switch_lid, 1], [ca_lid, 1]])],
                check=False, timeout=60)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    sw, ca = got["out"]
    assert got["stats"]["by_kind"] == {"PerfGet(ClassPortInfo)": 2, "PerfGet(PortCounters)": 2}
    assert got["stats"]["received"] == 4 and got["stats"]["timeouts"] == 0
    for mine, lid in ((sw, switch_lid), (ca, ca_lid)):
        cap, theirs = _perfquery(sim, lid, 1)
        assert mine["class_version"] == 1  # PerfMgt is class version 1
        assert mine["cpi"] == [1, 1, cap]  # ClassPortInfo: base version 1, class version 1, perfquery's CapMask
        c = mine["counters"]
        assert c["port_select"] == theirs["PortSelect"] == 1
        for field in ("SymbolErrorCounter", "PortXmitDiscards", "LinkDownedCounter", "PortRcvErrors"):
            snake = re.sub(r"(?<!^)(?=[A-Z])", "_", field).lower()
            assert c[snake] == theirs[field], field
    assert sw["counters"]["symbol_error_counter"] == 7 and ca["counters"]["port_xmit_discards"] == 5
    assert sw["cpi"][2] != ca["cpi"][2]  # ibsim's switch and CA agents differ: the answers are the LIDs' own


def test_an_sa_request_from_another_node_arrives_with_its_address_and_is_answered_there(fabric):
    sim = fabric
    sender_lid = _lid_of(sim, "Hca2")
    sa = subprocess.Popen([sys.executable, "-c", textwrap.dedent(SA)], env=sim.env, cwd=sim.cwd,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert sa.stdout.readline().strip() == "ready", sa.stderr.read()
        # saquery on Hca2 asks the SA (the issm holder, our child) for NodeRecords
        q = subprocess.run(["/usr/sbin/saquery", "NR"], env=dict(sim.env, SIM_HOST="Hca2"), cwd=sim.cwd,
                           capture_output=True, text=True, timeout=60)
        out, err = sa.communicate(timeout=30)
    finally:
        if sa.poll() is None:
            sa.kill()
            sa.wait()
    assert sa.returncode == 0, err
    (seen,) = json.loads(out.strip().splitlines()[-1])
    # SubnAdmGetTable(NodeRecord) from Hca2's LID, QP1 (the GSI), no GRH (one subnet)
    assert seen == {"lid": sender_lid, "qpn": 1, "grh": False, "class": 0x03, "method": 0x12, "attr": 0x0011}
    # our answer reached saquery (no timeout): it reports the status we sent
    assert q.returncode != 0 and "0x000c" in (q.stdout + q.stderr).lower(), q.stdout + q.stderr
