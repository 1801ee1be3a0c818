"""An SA no host can stall, on ibsim: tables of every pair's PathRecords pending do not hold a
NodeRecord Get up, and a table's first segment, read by a requester that never ACKs
(saquery under umad2sim), is not sent again to whoever takes its ibsim client slot next."""
from __future__ import annotations

import json
import subprocess
import sys

from sa_harness import SA_MARKS, saquery, start_sa
from sm_harness import procs  # noqa: F401 (the fixture)
from smagent.model import netfile, topogen

pytestmark = SA_MARKS

# a client on its own ibsim node: "tables" sends four every-pair GetTables at once (distinct:
# none is answered from another's kept answer), once the "get" client is ready, and reports
# when their first MADs were all in; "get" sends a NodeRecord Get 100 ms after the tables
# have left and reports its answer and the SA's status (control socket) right after it
CLIENT = r"""
import json, os, sys, time
from pathlib import Path
from mad import sa
from mad.header import Method
from mad.sa_records import NodeRecord, PathRecord
from mad.smp import next_tid
from smagent.sa.client import SaClient, sa_address
from smagent.transport import open_transport
from smagent.transport.base import Request
from smagent.transport.umad import SA_CLIENT
mode, go = sys.argv[1], Path(sys.argv[2])
t = open_transport("umad", classes=[SA_CLIENT], window=8, retries=0, timeout_ms=20000)
c = SaClient(t, sa_address(t))
if mode == "get":
    Path(str(go) + ".ready").touch()
    while not go.exists():
        time.sleep(0.0005)
    time.sleep(0.1)  # the tables' requests are out
    rec = c.get(NodeRecord(lid=c.address.lid), NodeRecord.mask("lid"))
    from smagent.sm import control
    sa_status = control.query(control.socket_path(sys.argv[3]))["sa"]  # right after the answer
    print(json.dumps({"at": time.monotonic(), "lid": rec.lid, "sa": sa_status}))
else:
    while not Path(str(go) + ".ready").exists():
        time.sleep(0.0005)
    forms = [({}, ()), ({"p_key": 0xFFFF}, ("p_key",)), ({"sl": 0}, ("sl",)), ({"num_path": 1}, ("num_path",))]
    reqs = [Request.gmp(sa.request(Method.GET_TABLE, PathRecord(**v), component_mask=PathRecord.mask(*f),
                                   transaction_id=next_tid()).encode(), c.address) for v, f in forms]
    go.touch()
    replies = t.execute(reqs)
    print(json.dumps({"at": time.monotonic(), "statuses": [None if r.raw is None else
                                                            int.from_bytes(r.raw[4:6], "big") for r in replies]}))
"""

# a client that takes the ibsim client slot saquery just left and listens: how many
# responses (to requests it never sent) reach it
LISTENER = r"""
import json, time
from smagent.transport import open_transport
from smagent.transport.umad import SA_CLIENT
t = open_transport("umad", classes=[SA_CLIENT], retries=0)
end = time.monotonic() + float(__import__("sys").argv[1])
while time.monotonic() < end:
    t.serve_queued()
    time.sleep(0.01)
print(json.dumps({"strays": t.stats.late}))
"""


def _client(sim, host, *args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CLIENT, *map(str, args)], env=dict(sim.env, SIM_HOST=host),
                            cwd=sim.cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(p: subprocess.Popen) -> dict:
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    return json.loads(out)


def test_a_get_is_answered_while_every_pairs_tables_are_worked_out(tmp_path, ibsim, procs):
    """Four every-pair tables (208 ports: 43,264 records each) asked at once, then a Get
    from another host: the Get is answered while the tables are still being worked out
    (the SA's status right after the answer says so), not after them: they are worked out
    between other requests, not one after another inside the request's handling."""
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_3(8)))
    sim = ibsim(net)
    start_sa(sim, tmp_path, procs, "--sweep-interval", "0")
    go = tmp_path / "go"
    get = _client(sim, "H2", "get", go, tmp_path / "state")
    tables = _client(sim, "H1", "tables", go, "-")
    got, done = _result(get), _result(tables)
    assert done["statuses"] == [0, 0, 0, 0]  # each table's first segment, sent before it is whole
    assert got["lid"] and got["sa"]["tables_pending"] >= 1, got  # the Get went first


def test_a_table_read_by_a_requester_that_never_acks_is_not_sent_again(tmp_path, ibsim, procs):
    """saquery under umad2sim reads a NodeRecord table's first segment and exits without an
    ACK; the client that takes its ibsim slot next (ibsim routes a response by the TID's
    top 16 bits, the slot) gets nothing in the 3 s our retries would have taken; saquery
    runs again and again, table after table, without failing (the old SA's strays hung
    `saquery -p` and crashed others)."""
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(6)))  # 18 hosts + 6 switches: several segments of NodeRecords
    sim = ibsim(net)
    start_sa(sim, tmp_path, procs, "--sweep-interval", "0")
    for _ in range(3):  # tables of several segments, every pair's PathRecords among them, and one-MAD answers
        for form in (["NR"], ["PIR"], ["SWIR"], ["LR"], ["-p"], ["-c"]):
            assert saquery(sim, *form).stdout  # exit 0 (saquery's own check), the first segment's records
    listener = subprocess.run([sys.executable, "-c", LISTENER, "3.0"], env=sim.env, cwd=sim.cwd,
                              capture_output=True, text=True, timeout=60)
    assert listener.returncode == 0, listener.stderr
    assert json.loads(listener.stdout) == {"strays": 0}
