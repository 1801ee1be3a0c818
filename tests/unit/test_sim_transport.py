"""SimTransport: construction, where the SM sits, loss handled like umad2sim (status 110
at once, then the base class retries), fault injection."""
import time

import pytest

from mad import smp
from mad.attributes import AttrID
from mad.header import Method
from smagent.model import netfile
from smagent.sim import DEFAULT_TOPOLOGY, SimConfigError, SimFabric
from smagent.transport import open_transport
from smagent.transport.base import Request, SmpTimeout
from smagent.transport.sim import SimTransport

TWO_SW_TEXT = """
Switch 4 "S"
[1] "A"[1]
[2] "B"[1]

Hca 1 "A"
[1] "S"[1]

Hca 1 "B"
[1] "S"[2]
"""


def nodeinfo(path):
    return Request(smp.dr(Method.GET, AttrID.NODE_INFO, path))


def test_default_topology_and_sm_port():
    t = SimTransport()
    assert t.local == ("H1", 1)  # the first node of the bundled file, like ibsim
    assert set(t.sim.nodes) >= {"H1", "H8", "L1", "L4", "S1", "S2"}
    assert t.query(nodeinfo("0")).attribute().node_guid == 0x100000


@pytest.mark.parametrize("topology", [
    DEFAULT_TOPOLOGY, TWO_SW_TEXT, netfile.loads(TWO_SW_TEXT), SimFabric.load(TWO_SW_TEXT),
])
def test_topology_inputs(topology):
    t = SimTransport(topology)
    assert t.query(nodeinfo("0,1")).attribute().node_type in (1, 2)


def test_switch_first_puts_the_sm_on_port0():
    t = SimTransport(TWO_SW_TEXT)
    assert t.local == ("S", 0)
    assert t.query(nodeinfo("0")).attribute().local_port_num == 0


@pytest.mark.parametrize("local,want", [("L1", ("L1", 0)), ("H1", ("H1", 1)), ("H1:2", ("H1", 2)),
                                        (("H3", 1), ("H3", 1))])
def test_local_forms(local, want):
    assert SimTransport(local=local).local == want


def test_bad_local_ports():
    with pytest.raises(SimConfigError, match="port 0"):
        SimTransport(local=("L1", 3))
    with pytest.raises(SimConfigError, match="does not exist"):
        SimTransport(local=("H2", 2))
    with pytest.raises(SimConfigError, match="no node"):
        SimTransport(local="nope")


def test_attach_sm_is_optional():
    t = SimTransport(attach_sm=False, retries=0)
    (r,) = t.execute([Request(smp.dr(Method.GET, AttrID.SM_INFO, "0"))])
    assert r.response.status == 0x000C


def test_lost_smps_come_back_at_once_as_timeouts():
    t = SimTransport(timeout_ms=2000, retries=2)
    t0 = time.monotonic()
    (r,) = t.execute([nodeinfo("0,1,4")])  # L1 port 4 has no cable
    assert isinstance(r.error, SmpTimeout) and "3 tries" in str(r.error)
    assert time.monotonic() - t0 < 1.0  # never waited for the 2 s timeout: umad status 110
    assert (t.stats.sent, t.stats.timeouts, t.stats.retries) == (3, 3, 2)


def test_drop_rate_is_retried_away():
    t = SimTransport(retries=10, drop_rate=0.3, seed=7)
    paths = ["0,1", "0,1,5", "0,1,6,3", "0,1,5,4,2"]
    replies = t.execute([nodeinfo(paths[i % 4]) for i in range(200)])
    assert all(r.ok for r in replies)
    assert t.stats.retries > 20 and t.sim.counters["dropped"] == t.stats.retries
    assert "drop_rate" in t.sim.last_drop.reason


def test_window_keeps_order_and_counts():
    t = SimTransport(window=8)
    paths = ["0", "0,1", "0,1,5", "0,1,6", "0,1,2"]
    replies = t.execute([nodeinfo(p) for p in paths * 20])
    guids = [r.value().node_guid for r in replies]
    assert guids[:5] == [t.sim.node(n).guid for n in ("H1", "L1", "S1", "S2", "H2")]
    assert guids == guids[:5] * 20
    assert t.stats.sent == t.stats.received == 100


def test_open_transport_builds_a_sim():
    t = open_transport("sim", topology=TWO_SW_TEXT, local="A")
    assert isinstance(t, SimTransport) and t.local == ("A", 1)
    assert t.query(nodeinfo("0,1")).attribute().num_ports == 4


def test_local_lid_follows_portinfo_sets():
    t = SimTransport()
    assert t.local_lid == 0
    pi = t.query(Request(smp.dr(Method.GET, AttrID.PORT_INFO, "0", 1))).attribute()
    pi.lid, pi.port_state, pi.port_physical_state = 7, 0, 0
    t.query(Request(smp.dr(Method.SET, AttrID.PORT_INFO, "0", 1, pi)))
    assert t.local_lid == 7 == t.sim.port_lid(("H1", 1))


def test_capability_keywords_need_a_fresh_simulator():
    with pytest.raises(TypeError):
        SimTransport(SimFabric.load(), linear_fdb_cap=64)
    t = SimTransport(linear_fdb_cap=64)
    assert t.query(Request(smp.dr(Method.GET, AttrID.SWITCH_INFO, "0,1"))).attribute().linear_fdb_cap == 64


def test_requests_built_as_bytes_retry_with_fresh_tids_and_carry_keys():
    """`Request.dr` (bytes from a template, patched on send) behaves as `Request(smp)`:
    a retry has a fresh TID, the key chain's key for the path is written in, and a lossy
    batch of both kinds is retried away."""
    t = SimTransport(retries=10, drop_rate=0.3, seed=11)
    sent = []
    send = t._send
    t._send = lambda raw, dlid: (sent.append(smp.decode(raw)), send(raw, dlid))[1]
    t.keys.learn(path=(0, 1), guid=0x99, key=0xABCD)  # L1 (any node: the sim checks no key here)
    paths = [(0, 1), (0, 1, 5), (0, 1, 6, 3)]
    reqs = [Request.dr(Method.GET, AttrID.NODE_INFO, paths[i % 3]) for i in range(60)]
    reqs += [nodeinfo(paths[i % 3]) for i in range(60)]
    replies = t.execute(reqs)
    assert all(r.ok for r in replies) and t.stats.retries > 10
    assert len({s.transaction_id for s in sent}) == len(sent)  # every try its own TID
    assert {(s.path, s.m_key) for s in sent} == {((0, 1), 0xABCD), ((0, 1, 5), 0), ((0, 1, 6, 3), 0)}
    assert [r.value().node_guid for r in replies[:3]] == [r.value().node_guid for r in replies[60:63]]
    assert replies[0].request.smp.path == (0, 1) and replies[0].request.raw == smp.encode(replies[0].request.smp)
