"""Directed-route SMPs hop by hop (IBA 14.2.2; Linux smi.c states the same rules):
HopPointer on every link, ReturnPath, the D bit, and what the fabric drops."""
import pathlib

import pytest

from mad import smp
from mad.attributes import AttrID
from mad.header import Method
from smagent.sim import SimFabric
from smagent.transport.base import Request, SmpTimeout
from smagent.transport.sim import SimTransport

VECTORS = pathlib.Path(__file__).parents[1] / "vectors"

# Bundled default fabric, SM on H1 port 1:
#   H1:1 - L1:1, L1:5 - S1:1, L1:6 - S2:1, L1:7 - S1:5, S1:2 - L2:5, L2:1 - H3:1, L2:3 - H1:2
PATHS = {
    0: ("0", "H1", []),
    1: ("0,1", "L1", [1]),
    2: ("0,1,7", "S1", [1, 5]),
    3: ("0,1,7,2", "L2", [1, 5, 5]),
    4: ("0,1,6,2,1", "H3", [1, 1, 6, 1]),
}


def transport(topology=None, **kw):
    kw.setdefault("retries", 0)
    kw.setdefault("timeout_ms", 10)
    return SimTransport(topology, **kw)


def nodeinfo(t, path):
    (r,) = t.execute([Request(smp.dr(Method.GET, AttrID.NODE_INFO, path))])
    return r


@pytest.mark.parametrize("hops", [0, 1, 2, 3, 4])
def test_response_fields(hops):
    path, name, entered = PATHS[hops]
    t = transport()
    r = nodeinfo(t, path)
    resp = r.response
    assert r.ok and resp.attribute().node_guid == t.sim.node(name).guid
    assert (resp.d, resp.status, resp.status_word, resp.method) == (1, 0, 0x8000, Method.GET_RESP)
    assert resp.hop_pointer == 0  # delivered back at the requester (C14-13:3)
    assert resp.hop_count == hops
    assert resp.path == smp.parse_path(path)  # InitialPath echoed
    # ReturnPath[i] = the port the SMP entered hop i on; entry 0 unused (ibsim: requester's port)
    assert list(resp.return_path[1:hops + 1]) == entered
    assert resp.return_path[0] == 0 and not any(resp.return_path[hops + 1:])


@pytest.mark.parametrize("hops", [0, 1, 2, 3])
def test_hop_pointer_on_every_link(hops):
    """Outgoing, the HopPointer on the link into hop i is i and the SMA sees HopCount+1;
    returning, the link out of hop i carries i, down to 0 at the requester. ibsim never
    moves the HopPointer (it answers 0 throughout), which the delivered value hides."""
    path, name, entered = PATHS[hops]
    t = transport()
    seen = []
    t.sim.observer = lambda *e: seen.append(e)
    assert nodeinfo(t, path).ok
    ipath = smp.parse_path(path)
    nodes = ["H1"] + [None] * hops
    for i in range(1, hops + 1):  # which node is hop i
        prev = t.sim.node(nodes[i - 1])
        nodes[i] = prev.peers[ipath[i]][0].name
    want = [("out", nodes[i - 1], ipath[i], i, 0) for i in range(1, hops + 1)]
    want.append(("sma", name, entered[-1] if hops else 1, hops + 1, 0))
    want += [("out", nodes[i], entered[i - 1], i, 1) for i in range(hops, 0, -1)]
    want.append(("deliver", "H1", 1, 0, 1))
    assert seen == want


def test_switch_requester_path_starts_at_any_port():
    t = transport(VECTORS / "ibsim-2sw4hca.net")  # SM on Switch1 port 0
    assert t.local == ("Switch1", 0)
    r = nodeinfo(t, "0,5,2")  # out Switch1:5, into Switch2:5, out 2 to Hca4
    assert r.ok and list(r.response.return_path[1:3]) == [5, 1]
    assert r.response.attribute().node_guid == 0x100009


def test_path_through_an_unlinked_port_times_out():
    t = transport(VECTORS / "ibsim-2sw4hca.net", retries=2)
    r = nodeinfo(t, "0,4")
    assert isinstance(r.error, SmpTimeout)
    assert t.stats.timeouts == 3 and t.stats.retries == 2  # umad status 110, retried
    assert t.sim.last_drop.reason == "exit port 4 has no link" and t.sim.last_drop.where == ("Switch1", 4)


def test_unlink_breaks_the_path_and_the_reply():
    t = transport()
    assert nodeinfo(t, "0,1,5").ok
    t.sim.unlink("S1", 1)
    assert isinstance(nodeinfo(t, "0,1,5").error, SmpTimeout)
    assert nodeinfo(t, "0,1,7").ok  # the parallel cable still works
    t.sim.link("S1", 1, "L1", 5)
    assert nodeinfo(t, "0,1,5").ok


def test_smps_cross_links_that_are_not_active():
    t = transport()
    sim = t.sim
    assert sim.node("L1").state[5] == 2  # INIT: no SM has run
    assert nodeinfo(t, "0,1,5,2").ok
    sim.set_port_state("S1", 2, 3)  # ARMED
    assert nodeinfo(t, "0,1,5,2").ok
    sim.set_port_state("S1", 2, 1)  # DOWN
    assert isinstance(nodeinfo(t, "0,1,5,2").error, SmpTimeout)


@pytest.mark.parametrize("path,reason", [
    ("0,1,1,1", "passes through CA"),  # L1 port 1 leads back to H1, which cannot forward
    ("0,2", "a CA sends only out its own port"),
    ("0,1,9", "is not a port"),  # 8-port switch
])
def test_impossible_paths_are_dropped(path, reason):
    t = transport()
    assert isinstance(nodeinfo(t, path).error, SmpTimeout)
    assert reason in t.sim.last_drop.reason


def test_malformed_directed_route_smps_are_dropped():
    sim = SimFabric.load()
    for mutate, reason in (
        (lambda s: setattr(s, "hop_count", 64), "HopCount 64"),
        (lambda s: setattr(s, "hop_pointer", 1), "HopPointer 0"),
        (lambda s: setattr(s, "d", 1), "D=1"),
        (lambda s: setattr(s, "dr_slid", 5), "needs an LRH DLID"),  # LRH DLID left permissive
        (lambda s: setattr(s, "dr_dlid", 7), "has no LID"),  # L1 cannot be answered: no LID yet
    ):
        req = smp.dr(Method.GET, AttrID.NODE_INFO, "0,1")
        mutate(req)
        assert sim.handle(smp.encode(req), ("H1", 1)) is None
        assert reason in sim.last_drop.reason
    assert sim.handle(b"\x01" * 100, ("H1", 1)) is None
    assert sim.counters["dropped"] == 6


def test_a_long_path_of_63_hops():
    # Ping-pong between two switches: 62 switch hops, then out to a host.
    t = transport(VECTORS / "ibsim-2sw4hca.net")
    path = "0," + ",".join(["3"] * 62) + ",1"  # Switch1 -3-> Switch2 -3-> Switch1 ... -> Hca1
    r = nodeinfo(t, path)
    assert r.ok and r.response.hop_count == 63
    assert r.response.attribute().node_guid == 0x100000


def test_response_lost_when_the_reverse_link_fails_midway():
    sim = SimFabric.load()

    def cut(event, node, port, hp, d):  # the request has been answered: pull a cable
        if event == "sma":
            sim.unlink("L1", 5)

    sim.observer = cut
    assert sim.handle(smp.dr(Method.GET, AttrID.NODE_INFO, "0,1,5").encode(), ("H1", 1)) is None
    assert sim.last_drop.where == ("S1", 1)


# -- directed routes with LID-routed ends (DrSLID / DrDLID not permissive) ---------------------------
def hybrid(path, *, dr_slid=0xFFFF, dr_dlid=0xFFFF, lrh_dlid=0xFFFF):
    req = smp.dr(Method.GET, AttrID.NODE_INFO, path)
    req.dr_slid, req.dr_dlid = dr_slid, dr_dlid
    return Request(req, dlid=lrh_dlid)


@pytest.fixture
def programmed():
    from sim_program import program

    t = transport()
    return t, program(t)


def test_directed_then_lid_routed(programmed):
    t, plan = programmed
    seen = []
    t.sim.observer = lambda *e: seen.append(e)
    (r,) = t.execute([hybrid("0,1,5", dr_dlid=plan[("H7", 1)])])  # DR to S1, then by LID to H7
    assert r.ok, t.sim.last_drop
    resp = r.response
    assert resp.attribute().node_guid == t.sim.node("H7").guid
    assert (resp.d, resp.hop_pointer, list(resp.return_path[1:3])) == (1, 0, [1, 1])
    assert ("sma", "H7", 1, 3, 0) in seen  # the SMA sees HopPointer = HopCount + 1
    assert seen[-3:] == [("out", "S1", 1, 2, 1), ("out", "L1", 1, 1, 1), ("deliver", "H1", 1, 0, 1)]


def test_lid_routed_then_directed(programmed):
    t, plan = programmed
    # By LID to S2, then out S2 port 4 to L4; the answer returns to S2 and by LID to H1.
    (r,) = t.execute([hybrid("0,4", dr_slid=plan[("H1", 1)], lrh_dlid=plan[("S2", 0)])])
    assert r.ok, t.sim.last_drop
    assert r.response.attribute().node_guid == t.sim.node("L4").guid
    assert (r.response.hop_pointer, r.response.return_path[1]) == (0, 6)


def test_lid_routed_both_ends(programmed):
    t, plan = programmed
    (r,) = t.execute([hybrid("0,3", dr_slid=plan[("H1", 1)], lrh_dlid=plan[("S2", 0)],
                             dr_dlid=plan[("H6", 1)])])
    assert r.ok, t.sim.last_drop
    assert r.response.attribute().node_guid == t.sim.node("H6").guid


def test_hybrid_failures(programmed):
    t, plan = programmed
    (r,) = t.execute([hybrid("0,1,1", dr_dlid=plan[("H2", 1)])])  # the directed part ends at a CA
    assert isinstance(r.error, SmpTimeout) and "must leave from a switch" in t.sim.last_drop.reason
    t.sim.lft("S2")[plan[("H1", 1)]] = 0xFF  # S2 cannot send the answer on to DrSLID
    (r,) = t.execute([hybrid("0,4", dr_slid=plan[("H1", 1)], lrh_dlid=plan[("S2", 0)])])
    assert isinstance(r.error, SmpTimeout) and t.sim.last_drop.where[0] == "S2"
