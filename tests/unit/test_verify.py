"""`smagent.verify` on hand-built tables: every defect class, exact pair counts, the
channel dependency graph, multicast, and the `verify` command's exit codes."""
import dataclasses
import json

import pytest

from mad import forwarding as fw
from mad import smp as smpcodec
from mad.attributes import AttrID, LinearForwardingTable
from mad.header import Method
from smagent.model import netfile, topogen
from smagent import verify
from smagent.model.fabric import Fabric
from smagent.routing import RouteTable, RoutingInput, route
from smagent.transport.base import Request


def prepared(fabric, lmc=0):
    netfile.assign_ibsim_guids(fabric)
    lid = 1
    for n in fabric.switches():
        n.lids[0] = lid
        lid += 1
    for n in fabric.cas():
        for p, _peer in fabric.connected_ports(n):
            n.lids[p] = lid
            lid += 1 << lmc
            if lmc:
                n.lmcs[p] = lmc
    return fabric


def line3():
    """H0 - A[1], A[2] - B[3], H1 - B[1], B[2] - C[3], H2 - C[1]; 8-port switches."""
    f = Fabric()
    for h in range(3):
        f.add_node(name=f"H{h}", node_type="Hca", num_ports=1)
    for s in "ABC":
        f.add_node(name=s, node_type="Switch", num_ports=8)
    for h, s in enumerate("ABC"):
        f.connect(f"H{h}", 1, s, 1)
    f.connect("A", 2, "B", 3)
    f.connect("B", 2, "C", 3)
    return prepared(f)


def snap_of(fabric, engine="minhop", routes=None):
    if routes is None:
        routes = route(engine, RoutingInput.from_fabric(fabric))
    return verify.snapshot_from_routes(fabric, routes)


def poke(snap, fabric, switch, lid, port):
    s = snap.switches[fabric.node(switch).guid]
    lft = bytearray(s.lft)
    lft[lid] = port
    snap.switches[s.guid] = dataclasses.replace(s, lft=bytes(lft))


def classes(rep):
    return {k: v["count"] for k, v in rep.defects.items()}


# ------------------------------------------------------------------------ unicast
def test_clean_line_counts_every_pair():
    f = line3()
    rep = verify.check(snap_of(f))
    assert rep.ok and rep.defects == {}
    s = rep.summary
    # 3 CA ports + 3 switches send to 6 LIDs, never to themselves
    assert (s["sources"], s["lids"], s["pairs"], s["pairs_unreachable"]) == (6, 6, 30, 0)
    assert s["channels"] == 4  # A->B, B->A, B->C, C->B


def test_no_route_is_a_dead_end_with_every_pair_named():
    f = line3()
    snap = snap_of(f)
    h2 = f.node("H2").lid(1)
    poke(snap, f, "B", h2, 255)
    rep = verify.check(snap)
    # everything entering at A or B (H0, A, H1, B) loses H2's LID
    assert classes(rep) == {"unreachable": 4, "dead_end": 1}
    assert rep.defects["unreachable"]["by_cause"] == {"no_route": 4}
    assert rep.texts["dead_end"] == [f"B LID {h2} (H2[1]): dead end at B: LFT entry 255 (no route) "
                                                   f"(port 255)"]
    ex = rep.texts["unreachable"]
    assert f"H0[1] -> LID {h2} (H2[1]): dead end at B: LFT entry 255 (no route) (port 255)" in ex
    assert any(e.startswith("A (port 0) -> ") for e in ex) and any(e.startswith("B (port 0) -> ") for e in ex)


def test_loop():
    f = line3()
    snap = snap_of(f)
    h2 = f.node("H2").lid(1)
    poke(snap, f, "B", h2, 3)  # back to A, which sends it to B again
    rep = verify.check(snap)
    # a forwarding loop is also a cycle of channel dependencies (A->B waits on B->A)
    assert classes(rep) == {"unreachable": 4, "loop": 1, "cdg_cycle": 1}
    assert rep.texts["loop"][0] == f"LID {h2} (H2[1]): loops through A -> B -> A"
    assert rep.defects["unreachable"]["by_cause"] == {"loop": 4}


def test_top_too_low():
    f = line3()
    snap = snap_of(f)
    b = snap.switches[f.node("B").guid]
    snap.switches[b.guid] = dataclasses.replace(b, top=4)  # LIDs 5, 6 (H1, H2) above the top
    rep = verify.check(snap)
    # LID 5 (H1, on B): from H0, A, B, H2, C (not H1 itself); LID 6 (H2): from H0, A, H1, B
    assert rep.defects["unreachable"]["by_cause"] == {"above_top": 5 + 4}
    assert all("DLID above LinearFDBTop (4)" in e for e in rep.texts["dead_end"])


def test_above_cap_and_no_lft():
    f = line3()
    snap = snap_of(f)
    c = snap.switches[f.node("C").guid]
    snap.switches[c.guid] = dataclasses.replace(c, cap=5)
    a = snap.switches[f.node("A").guid]
    snap.switches[a.guid] = dataclasses.replace(a, cap=0)
    rep = verify.check(snap)
    causes = rep.defects["unreachable"]["by_cause"]
    assert set(causes) == {"above_cap", "no_lft"}


def test_port_that_does_not_exist_unlinked_or_down():
    f = line3()
    h0, h1, h2 = (f.node(h).lid(1) for h in ("H0", "H1", "H2"))
    snap = snap_of(f)
    poke(snap, f, "A", h2, 9)  # A has 8 ports
    poke(snap, f, "C", h0, 7)  # no cable on C[7]
    rep = verify.check(snap)
    assert rep.defects["unreachable"]["by_cause"] == {"no_such_port": 2, "unlinked_port": 2}
    # a link that is up but not ACTIVE
    snap = snap_of(f)
    b = snap.switches[f.node("B").guid]
    snap.switches[b.guid] = dataclasses.replace(b, active=b.active - {1})
    rep = verify.check(snap)
    assert rep.texts["inactive_port"] == ["B[1] is linked (to H1[1]) but not ACTIVE"]
    # nothing reaches H1 (4 switches' worth of sources but H1 itself)... and H1 sends nowhere
    assert rep.defects["unreachable"]["by_cause"] == {"port_not_active": 5}
    assert h1 in (int(e.split("LID ")[1].split()[0]) for e in rep.texts["dead_end"])


def test_misdelivered():
    f = line3()
    snap = snap_of(f)
    h2 = f.node("H2").lid(1)
    poke(snap, f, "B", h2, 1)  # to H1's port
    rep = verify.check(snap)
    assert classes(rep) == {"unreachable": 4, "misdelivered": 1}
    assert rep.texts["misdelivered"] == [f"LID {h2} (H2[1]): delivered to H1[1] by B"]
    # port 0 of a switch that does not own the LID
    snap = snap_of(f)
    poke(snap, f, "C", h2, 0)
    rep = verify.check(snap)
    assert rep.defects["misdelivered"]["count"] == 1
    assert rep.defects["unreachable"]["count"] == 5


def test_switch_own_lid_not_port0_loses_no_pair_but_is_reported():
    """A packet for a switch's own LID goes to its management port before any table
    lookup (seed: the receiving port checks the DLID first), so B's own entry set to 255
    or to a port loses no pair; but ibsim and switches that look the DLID up in the LFT
    send B's LID-routed SMPs astray: reported as own_lid_not_port0. Its entry for
    another LID set to 0 is a misdelivery."""
    f = line3()
    snap = snap_of(f)
    b = f.node("B").lid(0)
    assert verify.check(snap).ok
    for port in (255, 2):
        poke(snap, f, "B", b, port)
        rep = verify.check(snap)
        assert classes(rep) == {"own_lid_not_port0": 1} and rep.summary["pairs_unreachable"] == 0
        assert rep.defects["own_lid_not_port0"]["examples"] == [{"switch": "B", "lid": b, "port": port}]
        assert rep.texts["own_lid_not_port0"] == [f"B LID {b} (its own): its LFT entry is port {port}, not port 0 "
                                                  f"(LID-routed SMPs for it go astray)"]
    s = snap.switches[f.node("B").guid]
    snap.switches[s.guid] = dataclasses.replace(s, top=b - 1)  # above LinearFDBTop: dropped there
    assert verify.check(snap).defects["own_lid_not_port0"]["examples"] == [{"switch": "B", "lid": b, "port": None}]
    snap = snap_of(f)
    h1 = f.node("H1").lid(1)
    poke(snap, f, "B", h1, 0)
    rep = verify.check(snap)
    assert rep.defects["misdelivered"]["examples"] == [{"lid": h1, "dest": "H1[1]", "delivered_to": "B (port 0)",
                                                        "by": "B"}]


def test_black_hole_entries_are_every_entry_into_a_port_without_a_usable_link():
    """`black_hole_entries` (the plan check's absolute rule) looks at every LFT entry up to
    LinearFDBTop, owned LID or not: a missing port, a port with no link, one not ACTIVE;
    255 and port 0 are not holes."""
    f = line3()
    snap = snap_of(f)
    assert verify.black_hole_entries(snap) == []
    top = snap.switches[f.node("A").guid].top
    poke(snap, f, "A", top, 7)  # a LID nobody owns, into a port with no cable
    poke(snap, f, "B", 1, 9)  # B has 8 ports
    poke(snap, f, "C", 2, 255)
    poke(snap, f, "C", 3, 0)
    a = snap.switches[f.node("A").guid]
    snap.switches[a.guid] = dataclasses.replace(a, active=a.active - {2})
    holes = verify.black_hole_entries(snap)
    assert {(h["switch"], h["lid"], h["port"], h["cause"]) for h in holes} >= {
        ("A", top, 7, "unlinked_port"), ("B", 1, 9, "no_such_port")}
    assert {h["cause"] for h in holes} == {"unlinked_port", "no_such_port", "port_not_active"}
    assert all(h["switch"] != "C" for h in holes)
    # A[2] - B[3] is down for data at both ends: every route over it is a hole
    assert {(h["switch"], h["port"]) for h in holes if h["cause"] == "port_not_active"} == {("A", 2), ("B", 3)}


def test_ca_port_problems():
    f = line3()
    snap = snap_of(f)
    h1 = snap.ca_ports[(f.node("H1").guid, 1)]
    snap.ca_ports[(h1.guid, 1)] = dataclasses.replace(h1, active=False)
    h2 = snap.ca_ports[(f.node("H2").guid, 1)]
    snap.ca_ports[(h2.guid, 1)] = dataclasses.replace(h2, lid=f.node("H0").lid(1))
    rep = verify.check(snap)
    assert rep.texts["inactive_port"] == ["H1[1] is linked but not ACTIVE"]
    assert rep.defects["duplicate_lid"]["count"] == 1
    a = snap.switches[f.node("A").guid]
    snap.switches[a.guid] = dataclasses.replace(a, lid=0)
    assert "no_lid" in verify.check(snap).defects


# -------------------------------------------------------------------------- CDG
def ring4(hosts=1):
    f = prepared(topogen.torus_2d(4, 1, hosts_per_switch=hosts))
    # clockwise only: every switch sends everything not its own out of its east port
    east = hosts + 1
    rin = RoutingInput.from_fabric(f)
    routes = {}
    for g in rin.switches:
        routes[g] = RouteTable.from_entries({lid: (home[1] if home[0] == g else east)
                                             for lid, home in rin.lid_homes.items()})
    return f, routes


def test_cdg_cycle_reported_explicitly():
    f, routes = ring4()
    rep = verify.check(snap_of(f, routes=routes))
    assert classes(rep) == {"cdg_cycle": 1}
    cyc = rep.defects["cdg_cycle"]["cycle"]
    assert [h["switch"] for h in cyc] == ["T0_0", "T1_0", "T2_0", "T3_0"] and {h["port"] for h in cyc} == {2}
    assert rep.texts["cdg_cycle"][0].startswith(
        "channel dependency cycle of 4 channels: T0_0[2] -> T1_0[2] -> T2_0[2] -> T3_0[2] -> T0_0[2]")


def test_cdg_counts_data_traffic_only():
    """The same clockwise ring without hosts: only switch port 0 (management) traffic
    uses the channels, so there is no deadlock risk to report."""
    f, routes = ring4(hosts=0)
    rep = verify.check(snap_of(f, routes=routes))
    assert rep.ok and rep.summary["dependencies"] == 0


def test_find_cycle():
    assert verify.find_cycle({1: {2: 0}, 2: {3: 0}, 3: {}}) is None
    cyc = verify.find_cycle({1: {2: 0}, 2: {3: 0}, 3: {1: 0, 4: 0}, 4: {}})
    assert sorted(cyc) == [1, 2, 3]
    assert verify.find_cycle({5: {5: 0}}) == [5]
    # long chains do not recurse
    chain = {i: {i + 1: 0} for i in range(20000)}
    assert verify.find_cycle(chain) is None
    chain[20000] = {0: 0}
    assert len(verify.find_cycle(chain)) == 20001


# -------------------------------------------------------------------- multicast
def with_mft(snap, f, mlid, groups):
    snap.mcast_read = True
    for name, ports in groups.items():
        s = snap.switches[f.node(name).guid]
        snap.switches[s.guid] = dataclasses.replace(s, mft={mlid: frozenset(ports)})
    return snap


def test_mcast_tree_delivers_once():
    f = line3()
    snap = with_mft(snap_of(f), f, 0xC000, {"A": {1, 2}, "B": {1, 2, 3}, "C": {1, 3}})
    rep = verify.check(snap)
    assert rep.ok and rep.summary["mcast_groups"] == 1


def test_mcast_defects():
    f = line3()
    # B does not forward to C: H2 never hears H0/H1, and C's side is cut off
    rep = verify.check(with_mft(snap_of(f), f, 0xC000, {"A": {1, 2}, "B": {1, 3}, "C": {1, 3}}))
    assert any("H2[1] receives 0 copies of what H0[1] sends" in e for e in rep.texts["mcast"])
    # a branch into a port with no cable
    rep = verify.check(with_mft(snap_of(f), f, 0xC000, {"A": {1, 2, 7}, "B": {1, 2, 3}, "C": {1, 3}}))
    assert any("A forwards to port 7, which is not linked" in e for e in rep.texts["mcast"])
    # a switch the tree reaches that has no entry
    rep = verify.check(with_mft(snap_of(f), f, 0xC000, {"A": {1, 2}, "B": {1, 2, 3}}))
    assert any("C receives the group but has no MFT entry" in e for e in rep.texts["mcast"])


def test_mcast_cycle_in_tree():
    f, routes = ring4()
    # every ring port of every switch: the group's packets go round both ways
    snap = with_mft(snap_of(f, routes=route("updn", RoutingInput.from_fabric(f))), f, 0xC001,
                    {f"T{i}_0": {1, 2, 3} for i in range(4)})
    rep = verify.check(snap, examples=100)
    ex = rep.texts["mcast"]
    assert any("the tree has a cycle" in e for e in ex)
    assert any("receives 2 copies" in e for e in ex)


# --------------------------------------------------------------------- command
@pytest.fixture
def swept_sim(monkeypatch):
    """A simulator swept once, handed to every CLI invocation (the transport opens once
    per command, so the simulator must outlive it)."""
    from smagent import api, cli, sweep
    from smagent.transport.sim import SimTransport
    t = SimTransport(topogen.fat_tree_2(4))
    assert sweep.sweep(t, sweep.SweepOptions(routing="updn")).problems == []
    monkeypatch.setattr(cli.Context, "session", lambda self: api.Session(t))  # verify runs through the API
    return t


def test_command_clean_exit_0(cli, swept_sim):
    r = cli("verify")
    assert r.exit_code == 0, r.output
    assert "ok: every source reaches every LID" in r.output
    r = cli("verify", "--json")
    doc = json.loads(r.output)
    assert r.exit_code == 0 and doc["ok"] and doc["defects"] == {} and doc["summary"]["mcast_groups"] is not None


def test_command_defects_exit_1(cli, swept_sim):
    from smagent import discovery
    t = swept_sim
    topo = discovery.discover(t)
    leaf = next(n for n in topo.switches() if n.description == "L0")
    victim = next(n for n in topo.cas() if n.description == "H7").lid(1)
    block, i = fw.lft_block(victim)
    get = t.execute([Request(smpcodec.dr(Method.GET, AttrID.LINEAR_FORWARDING_TABLE, leaf.path,
                                         fw.lft_modifier(block)))])[0].value()
    ports = list(get.ports)
    ports[i] = 255
    t.execute([Request(smpcodec.dr(Method.SET, AttrID.LINEAR_FORWARDING_TABLE, leaf.path, fw.lft_modifier(block),
                                   LinearForwardingTable(ports=ports)))])
    r = cli("verify", "--no-mcast")
    assert r.exit_code == 1, r.output
    assert "defect unreachable: 3 (source, LID) pairs not delivered" in r.output  # H0, H1, L0
    assert f"H0[1] -> LID {victim} (H7[1]): dead end at L0: LFT entry 255" in r.output
    doc = json.loads(cli("verify", "--json", "--no-mcast").output)
    assert doc["ok"] is False and doc["summary"]["mcast_groups"] is None
    assert doc["defects"]["dead_end"]["count"] == 1


def test_command_fabric_failure_exit_3(cli, monkeypatch, swept_sim):
    from smagent.transport.base import SmpTimeout

    def boom(*a, **kw):  # the local port does not answer: nothing can be read
        raise SmpTimeout("SubnGet(NodeInfo) DR 0 (the local port): timeout")
    monkeypatch.setattr(verify, "collect", boom)
    r = cli("verify")
    assert r.exit_code == 3 and "timeout" in r.output


def test_command_silent_host_is_unreached_rest_verified(cli, swept_sim):
    """A host that stops answering (its SMA drops everything: M_Key protection with a
    key we do not hold) no longer stops verification: the rest is verified, the host is
    listed as `unreached`, exit 1. With a routing defect elsewhere both are reported."""
    sim = swept_sim.sim
    h5 = sim.node("H5")
    h5.pi[1].m_key, h5.pi[1].m_key_protect_bits = 0x5EC2E7, 2
    r = cli("verify")
    assert r.exit_code == 1, r.output
    assert "defect unreached: 1 parts of the fabric that did not answer (verified around)" in r.output
    assert "(behind L2 port 2): no response" in r.output
    assert "defect mcast" not in r.output and "defect unreachable" not in r.output  # the rest is clean
    doc = json.loads(cli("verify", "--json").output)
    assert set(doc["defects"]) == {"unreached"} and doc["summary"]["unreached"] == 1
    (u,) = doc["defects"]["unreached"]["examples"]
    l2 = sim.node("L2")
    assert u["node"] == "L2" and u["guid"] == f"0x{l2.guid:016x}" and u["port"] == 2 and u["path"][-1] == 2
    assert "no response" in u["error"]
    # 7 CA ports and 6 switches still traced: 13 sources x 13 LIDs minus themselves
    assert doc["summary"]["lids"] == 13 and doc["summary"]["pairs"] == 13 * 12
    # a routing defect elsewhere is still found
    l0 = sim.node("L0")
    h7 = sim.node("H7").lid_range(1)[0]
    was = l0.lft[h7]
    l0.lft[h7] = 255
    doc = json.loads(cli("verify", "--json").output)
    assert set(doc["defects"]) == {"unreached", "unreachable", "dead_end"}
    assert doc["defects"]["dead_end"]["examples"] == [{"switch": "L0", "lid": h7, "dest": "H7[1]", "cause": "no_route",
                                                       "port": 255}]
    # a route into the silent host's port is named for what it is
    l0.lft[h7] = was
    l2.lft[h7] = 2
    doc = json.loads(cli("verify", "--json").output)
    assert doc["defects"]["unreachable"]["by_cause"] == {"unreached_port": 2}  # from H4 and L2
    assert doc["defects"]["dead_end"]["examples"][0]["cause"] == "unreached_port"


def test_switch_whose_lft_does_not_answer_is_unreached(swept_sim, monkeypatch):
    """A switch that answers discovery but not its LFT Gets: listed as unreached (with the
    error), the packets that must cross it counted as cause `unread`, the rest verified."""
    from smagent.fdb import lft as linear
    real = linear.read_lft_blocks
    l1 = swept_sim.sim.node("L1").guid

    def lossy(transport, wanted):
        got, errors = real(transport, [w for w in wanted if w[0] != l1])
        lost = [w for w in wanted if w[0] == l1]
        return got, errors + [f"DR {w[1]}: LFT block {w[2]}: timeout" for w in lost]

    monkeypatch.setattr(linear, "read_lft_blocks", lossy)
    rep = verify.verify(swept_sim)
    (u,) = rep.defects["unreached"]["examples"]
    assert u["node"] == "L1" and u["where"] == "L1 (LFT)" and u["error"].endswith("timeout")
    assert set(rep.defects) == {"unreached", "unreachable", "dead_end"}, rep.texts  # no multicast noise
    assert set(rep.defects["unreachable"]["by_cause"]) == {"unread"}
    # what enters at L1 (H2, H3, L1: 13 LIDs each) reaches only L1's own LID; the 11
    # other sources lose H2 and H3, behind L1
    assert rep.defects["unreachable"]["by_cause"]["unread"] == 3 * 13 - 2 + 11 * 2


def test_switch_whose_mft_does_not_answer_is_unreached(swept_sim, monkeypatch):
    """Only the MFT of L1 does not answer: unicast is verified as usual, L1 is listed as
    unreached, and the multicast check does not blame L1 for an entry it could not read."""
    from smagent.fdb import mft as multicast
    real = multicast.read_mft_units
    l1 = swept_sim.sim.node("L1").guid

    def lossy(transport, wanted):
        got, errors = real(transport, [w for w in wanted if w[0] != l1])
        return got, errors + [f"DR {w[1]}: MFT block {w[2]} position {w[3]}: timeout" for w in wanted if w[0] == l1]

    monkeypatch.setattr(multicast, "read_mft_units", lossy)
    rep = verify.verify(swept_sim)
    assert set(rep.defects) == {"unreached"}, rep.texts
    (u,) = rep.defects["unreached"]["examples"]
    assert u["where"] == "L1 (MFT)" and "timeout (+31 more)" in u["error"] and rep.summary["pairs_unreachable"] == 0
