"""UmadPort against ibsim, through rdma-core's libibumad and ibsim's umad2sim.

umad2sim is an LD_PRELOAD library, so the code under test runs in a child
Python started with LD_PRELOAD and the simulator's IBSIM_SOCKNAME, in a
scratch directory (umad2sim writes ./sys-<pid> there). infiniband-diags'
smpquery, run with the same environment, is the independent witness.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ibsim_harness import IbSim, ibsim_available, skip_reason

pytestmark = pytest.mark.ibsim

TESTS = Path(__file__).resolve().parents[1]
NETFILE = TESTS / "vectors" / "ibsim-2sw4hca.net"

# Switch1 (the SM's node, ibsim's first) and Switch2 behind its port 3.
SWITCH_PATH = "0,3"
EMPTY_PATH = "0,4"  # Switch1 port 4 has no link


class Sim:
    """The module's ibsim, with the helpers these tests use."""

    def __init__(self, ib: IbSim):
        self.ib = ib

    def run(self, argv, timeout=30) -> subprocess.CompletedProcess:
        return self.ib.run(argv, check=False, timeout=timeout, stdin=subprocess.DEVNULL)

    def python(self, code: str, *args: str) -> subprocess.CompletedProcess:
        return self.run([sys.executable, "-c", textwrap.dedent(code), *args])

    def smpquery_nodeinfo(self, path: str) -> dict[str, str]:
        r = self.run(["smpquery", "-D", "nodeinfo", path])
        assert r.returncode == 0, r.stderr
        return dict(re.findall(r"^(\w+):\.+(\S+)", r.stdout, re.M))


@pytest.fixture(scope="module")
def umad_sim(tmp_path_factory):
    """One ibsim for the module (its tests only read): started through the harness."""
    if not ibsim_available():
        pytest.skip(skip_reason())
    with IbSim(NETFILE, tmp_path_factory.mktemp("ibsim")) as ib:
        yield Sim(ib)


# Child-side driver: sends DR NodeInfo Gets along the paths given on the
# command line and prints one JSON object per path.
DRIVER = """
    import json, select, sys
    from smagent.transport.umad_lib import UmadPort

    def dr_nodeinfo(tid_low, path):
        m = bytearray(256)
        m[0:4] = bytes([1, 0x81, 1, 0x01])        # SubnGet, directed route
        m[7] = len(path)                          # hop pointer 0, hop count
        m[12:16] = tid_low.to_bytes(4, "big")
        m[16:18] = (0x0011).to_bytes(2, "big")    # NodeInfo
        m[32:36] = b"\\xff\\xff\\xff\\xff"            # DrSLID, DrDLID permissive
        for hop, port in enumerate(path, 1):
            m[128 + hop] = port
        return bytes(m)

    out = {}
    with UmadPort() as port:
        info = port.local_port_info()
        out["info"] = {"ca": info.ca, "port": info.port, "port_guid": info.port_guid,
                       "node_type": info.node_type, "state": info.state}
        agent = port.register(0x81)
        out["lid_agent"] = port.register(0x01)
        poller = select.poll()                    # libc poll(): umad2sim intercepts it
        poller.register(port.fileno(), select.POLLIN)
        for i, arg in enumerate(sys.argv[1:]):
            path = [int(p) for p in arg.split(",")[1:]]
            tid = 0x5A000000 + i
            port.send(agent, dr_nodeinfo(tid, path), 0xFFFF)
            ready = poller.poll(2000)
            got = port.recv(0) if ready else None
            out[arg] = None if got is None else {"status": got[1], "hex": got[0].hex(), "tid": tid}
        # A window of 8 in flight, matched on the low TID half.
        tids = set(range(0x77000000, 0x77000008))
        for t in tids:
            port.send(agent, dr_nodeinfo(t, [3]), 0xFFFF)
        seen = set()
        while len(seen) < len(tids):
            got = port.recv(2000)
            if got is None:
                break
            seen.add(int.from_bytes(got[0][12:16], "big"))
        out["window"] = sorted(seen) == sorted(tids)
    print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def driven(umad_sim):
    r = umad_sim.python(DRIVER, "0", SWITCH_PATH, EMPTY_PATH)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _nodeinfo(mad: bytes) -> dict:
    d = mad[64:128]
    return {
        "node_type": d[2],
        "num_ports": d[3],
        "node_guid": int.from_bytes(d[12:20], "big"),
        "port_guid": int.from_bytes(d[20:28], "big"),
        "local_port": d[36],
    }


@pytest.mark.parametrize("path", ["0", SWITCH_PATH])
def test_dr_nodeinfo_matches_smpquery(umad_sim, driven, path):
    got = driven[path]
    assert got is not None, "no answer within 2 s"
    assert got["status"] == 0
    mad = bytes.fromhex(got["hex"])
    assert mad[1] == 0x81 and mad[3] == 0x81  # directed route, SubnGetResp
    assert mad[4] & 0x80  # D bit: a response
    assert int.from_bytes(mad[4:6], "big") & 0x7FFF == 0  # MAD status OK
    assert int.from_bytes(mad[12:16], "big") == got["tid"]  # low TID half survives
    assert int.from_bytes(mad[16:18], "big") == 0x0011
    assert mad[7] == path.count(",")  # hop count
    ni = _nodeinfo(mad)
    witness = umad_sim.smpquery_nodeinfo(path)
    assert ni["node_type"] == 2 and witness["NodeType"] == "Switch"
    assert ni["node_guid"] == int(witness["Guid"], 16)
    assert ni["port_guid"] == int(witness["PortGuid"], 16)
    assert ni["num_ports"] == int(witness["NumPorts"]) == 8
    assert ni["local_port"] == int(witness["LocalPort"])


def test_the_two_switches_differ(driven):
    a = _nodeinfo(bytes.fromhex(driven["0"]["hex"]))
    b = _nodeinfo(bytes.fromhex(driven[SWITCH_PATH]["hex"]))
    assert a["node_guid"] != b["node_guid"]
    assert (a["local_port"], b["local_port"]) == (0, 3)  # entered Switch2 on port 3


def test_dr_smp_to_nothing_times_out_at_once(driven):
    got = driven[EMPTY_PATH]
    assert got is not None, "umad2sim should hand back an undeliverable SMP at once"
    assert got["status"] == 110  # ETIMEDOUT, as the kernel reports an unanswered request
    mad = bytes.fromhex(got["hex"])
    assert mad[3] == 0x01  # our SubnGet, not a response
    assert int.from_bytes(mad[12:16], "big") == got["tid"]


def test_window_of_eight_matched_by_tid(driven):
    assert driven["window"] is True


def test_local_port_info_under_ibsim(umad_sim, driven):
    info = driven["info"]
    witness = umad_sim.smpquery_nodeinfo("0")
    # ibsim puts the SM client on the first node of the net file: Switch1, port 0.
    assert (info["ca"], info["port"], info["node_type"], info["state"]) == ("ibsim0", 0, 2, 4)
    assert info["port_guid"] == int(witness["PortGuid"], 16)
    assert driven["lid_agent"] >= 0


UNKNOWN = """
    import sys
    from smagent.transport.umad_lib import UmadPort, UnknownPort
    ca, port = sys.argv[1], sys.argv[2]
    try:
        UmadPort(ca=None if ca == "-" else ca, port=None if port == "-" else int(port)).close()
    except UnknownPort as exc:
        print("UnknownPort:", exc)
    else:
        print("opened")
"""


def test_unknown_ca_under_ibsim(umad_sim):
    r = umad_sim.python(UNKNOWN, "mlx5_9", "-")
    assert r.returncode == 0, r.stderr
    assert "UnknownPort: unknown --ca mlx5_9" in r.stdout
    assert "ibsim0 (port 0)" in r.stdout  # lists what exists


def test_unknown_port_under_ibsim(umad_sim):
    r = umad_sim.python(UNKNOWN, "ibsim0", "5")
    assert r.returncode == 0, r.stderr
    assert "UnknownPort: unknown --port 5 on CA ibsim0" in r.stdout


def test_explicit_ca_opens(umad_sim):
    r = umad_sim.python(UNKNOWN, "ibsim0", "-")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "opened"
