"""LID-routed SMPs: they travel through the switches' LFTs (and come back to the
requester's LID the same way), so they work only once LIDs and tables are programmed,
and fail, as a timeout at the transport, when a table is wrong."""
import collections

import pytest

from mad import smp
from mad.attributes import AttrID, LinearForwardingTable, PortState
from mad.forwarding import PERMISSIVE_LID, portinfo_modifier
from mad.header import Method
from smagent.sim import trace
from smagent.transport.base import Request, SmpTimeout
from smagent.transport.sim import SimTransport


# -- a tiny SM, written against the simulator's topology, that programs over DR SMPs ------------
def dr_paths(sim, start):
    """Directed route from `start` to every node: {name: (0, p1, p2, ...)} (BFS)."""
    src = sim.node(start[0])
    paths = {src.name: (0,)}
    queue = collections.deque([src])
    while queue:
        n = queue.popleft()
        if n is not src and not n.is_switch:
            continue
        ports = [start[1]] if n is src and not n.is_switch else range(1, n.num_ports + 1)
        for p in ports:
            peer = n.peers[p]
            if peer is not None and peer[0].name not in paths:
                paths[peer[0].name] = paths[n.name] + (p,)
                queue.append(peer[0])
    return paths


def lid_plan(sim):
    """A LID for every switch (port 0) and every cabled CA port: {(name, port): lid}."""
    plan, lid = {}, 1
    for n in sim:
        ports = [0] if n.is_switch else [p for p in range(1, n.num_ports + 1) if n.peers[p] is not None]
        for p in ports:
            plan[(n.name, p)] = lid
            lid += 1
    return plan


def min_hop_lfts(sim, plan):
    """{switch: {lid: exit port}}: shortest paths, lowest port on ties."""
    switches = [s for s in sim if s.is_switch]
    out = {s.name: {} for s in switches}
    for (name, port), lid in plan.items():
        node = sim.node(name)
        dest = node if node.is_switch else node.peers[port][0]
        dist = {dest.name: 0}
        queue = collections.deque([dest])
        while queue:  # BFS over switches from the destination's switch
            s = queue.popleft()
            for p in range(1, s.num_ports + 1):
                peer = s.peers[p]
                if peer and peer[0].is_switch and peer[0].name not in dist:
                    dist[peer[0].name] = dist[s.name] + 1
                    queue.append(peer[0])
        for s in switches:
            if s is dest:
                out[s.name][lid] = 0 if node.is_switch else node.peers[port][1]
            elif s.name in dist:
                out[s.name][lid] = min(p for p in range(1, s.num_ports + 1)
                                       if s.peers[p] and dist.get(s.peers[p][0].name) == dist[s.name] - 1)
    return out


def program(t, *, activate=True):
    """Assign LIDs, set LinearFDBTop, write LFTs and (optionally) bring every port to
    ACTIVE, all with directed-route SMPs from the transport's port. Returns the LID plan."""
    sim = t.sim
    paths = dr_paths(sim, t.local)
    plan = lid_plan(sim)
    reqs = []
    for (name, port), lid in plan.items():
        path = paths[name]
        if not sim.node(name).is_switch and port != path_port(sim, t.local, paths, name):
            # reach the other port of a multi-port CA through the fabric
            peer, pp = sim.node(name).peers[port]
            path = paths[peer.name] + (pp,)
        pi = smp.decode(t.query(Request(smp.dr(Method.GET, AttrID.PORT_INFO, path, portinfo_modifier(port))))
                        .encode()).attribute()
        pi.lid, pi.port_state, pi.port_physical_state, pi.master_sm_lid = lid, 0, 0, plan[t.local]
        reqs.append(Request(smp.dr(Method.SET, AttrID.PORT_INFO, path, portinfo_modifier(port), pi)))
    top = max(plan.values())
    for sw, table in min_hop_lfts(sim, plan).items():
        path = paths[sw]
        si = t.query(Request(smp.dr(Method.GET, AttrID.SWITCH_INFO, path))).attribute()
        si.linear_fdb_top = top
        reqs.append(Request(smp.dr(Method.SET, AttrID.SWITCH_INFO, path, 0, si)))
        for block in range(top // 64 + 1):
            ports = [table.get(64 * block + i, 0xFF) for i in range(64)]
            reqs.append(Request(smp.dr(Method.SET, AttrID.LINEAR_FORWARDING_TABLE, path, block,
                                       LinearForwardingTable.cls(ports=ports))))
    t.execute(reqs, check=True)
    if activate:
        for state in (PortState.ARMED, PortState.ACTIVE):
            for n in sim:
                for p in range(1, n.num_ports + 1):
                    if n.peers[p] is not None:
                        n.state[p] = state  # both ends of every link, as an SM's bring-up ends
    return plan


def path_port(sim, local, paths, name):
    """The port of CA `name` that its DR path enters."""
    path = paths[name]
    if len(path) == 1:
        return local[1]
    prev = sim.node(local[0])
    for hop in path[1:-1]:
        prev = prev.peers[hop][0]
    return prev.peers[path[-1]][1]


# -- tests ----------------------------------------------------------------------------------
def transport(**kw):
    kw.setdefault("retries", 0)
    kw.setdefault("timeout_ms", 10)
    return SimTransport(None, **kw)


def lid_get(t, dlid, attr=AttrID.NODE_INFO, modifier=0):
    (r,) = t.execute([Request(smp.lid_routed(Method.GET, attr, modifier), dlid=dlid)])
    return r


@pytest.fixture
def programmed():
    t = transport()
    plan = program(t)
    return t, plan


def test_lid_routed_fails_before_tables_are_programmed():
    t = transport()
    r = lid_get(t, 5)
    assert isinstance(r.error, SmpTimeout)
    assert "LinearFDBTop 0" in t.sim.last_drop.reason


def test_every_lid_answers_after_programming(programmed):
    t, plan = programmed
    for (name, port), lid in plan.items():
        r = lid_get(t, lid)
        assert r.ok, (name, port, t.sim.last_drop)
        ni = r.response.attribute()
        node = t.sim.node(name)
        assert ni.node_guid == node.guid and ni.port_guid == node.port_guids[port]
        assert r.response.method == Method.GET_RESP and r.response.mgmt_class == 0x01


def test_lid_routed_to_a_switch_reports_its_ingress_port(programmed):
    t, plan = programmed
    r = lid_get(t, plan[("S1", 0)])
    assert r.response.attribute().local_port_num == 1  # L1 sends LID-routed traffic on to S1 via port 5


def test_wrong_entries_drop_the_smp(programmed):
    t, plan = programmed
    sim = t.sim
    h5 = plan[("H5", 1)]
    lft = sim.lft("L1")
    good = lft[h5]
    lft[h5] = 0xFF
    assert isinstance(lid_get(t, h5).error, SmpTimeout)
    assert "0xFF" in sim.last_drop.reason and sim.last_drop.where[0] == "L1"
    lft[h5] = 2  # towards H2: delivered to the wrong CA, which does not take it
    assert isinstance(lid_get(t, h5).error, SmpTimeout)
    assert sim.last_drop.where == ("H2", 1) and "not a LID of this port" in sim.last_drop.reason
    lft[h5] = 9  # an 8-port switch
    assert isinstance(lid_get(t, h5).error, SmpTimeout) and "does not exist" in sim.last_drop.reason
    lft[h5] = good
    s1 = sim.lft("S1")
    s1[h5] = 1  # back to L1, which sends it to S1 again: a loop
    assert isinstance(lid_get(t, h5).error, SmpTimeout) and "loop" in sim.last_drop.reason
    s1[h5] = 3
    assert lid_get(t, h5).ok


def test_linear_fdb_top_bounds_forwarding(programmed):
    t, plan = programmed
    t.sim.node("L1").si.linear_fdb_top = plan[("H5", 1)] - 1
    assert isinstance(lid_get(t, plan[("H5", 1)]).error, SmpTimeout)
    assert "above LinearFDBTop" in t.sim.last_drop.reason


def test_the_response_needs_a_route_back(programmed):
    t, plan = programmed
    me = plan[("H1", 1)]
    t.sim.lft("L3")[me] = 0xFF  # H5's switch cannot reach the requester any more
    r = lid_get(t, plan[("H5", 1)])
    assert isinstance(r.error, SmpTimeout)
    assert t.sim.last_drop.where[0] == "L3"
    assert lid_get(t, plan[("H3", 1)]).ok  # other destinations are fine


def test_requester_without_lid_gets_no_response(programmed):
    t, plan = programmed
    t.sim.set_lid("H1", 1, 0)
    assert isinstance(lid_get(t, plan[("H5", 1)]).error, SmpTimeout)
    assert "has no LID" in t.sim.last_drop.reason


def test_switch_lid_and_own_lid_and_permissive(programmed):
    t, plan = programmed
    s2 = plan[("S2", 0)]
    t.sim.lft("S2")[s2] = 0xFF  # a switch's own LID needs no LFT entry
    assert lid_get(t, s2).response.attribute().node_guid == t.sim.node("S2").guid
    me = lid_get(t, plan[("H1", 1)])  # loopback to our own SMA
    assert me.response.attribute().local_port_num == 1
    neighbour = lid_get(t, PERMISSIVE_LID)  # the first SMA on the way takes it
    assert neighbour.response.attribute().node_guid == t.sim.node("L1").guid


def test_lmc_range_reaches_the_ca(programmed):
    t, plan = programmed
    base = 0x40
    t.sim.set_lid("H7", 1, base, lmc=2)
    for sw, table in min_hop_lfts(t.sim, {("H7", 1): base}).items():
        for lid in range(base, base + 4):
            t.sim.lft(sw)[lid] = table[base]
        t.sim.node(sw).si.linear_fdb_top = base + 3
    for lid in range(base, base + 4):
        assert lid_get(t, lid).response.attribute().node_guid == t.sim.node("H7").guid
    assert isinstance(lid_get(t, base + 4).error, SmpTimeout)


def test_smps_need_no_active_ports_but_data_does():
    t = transport()
    plan = program(t, activate=False)  # links stay INIT
    h5 = plan[("H5", 1)]
    assert lid_get(t, h5).ok
    data = trace(t.sim, ("H1", 1), h5)
    assert data.outcome == "dropped" and "ACTIVE" in data.reason
    assert trace(t.sim, ("H1", 1), h5, smp=True).dest == ("H5", 1)


def test_lid_routed_set_works_like_directed(programmed):
    t, plan = programmed
    lid = plan[("L4", 0)]
    pi = lid_get(t, lid, AttrID.PORT_INFO, 0).response.attribute()
    pi.port_state = pi.port_physical_state = 0
    pi.subnet_timeout = 17
    (r,) = t.execute([Request(smp.lid_routed(Method.SET, AttrID.PORT_INFO, 0, pi), dlid=lid)])
    assert r.ok and r.response.attribute().subnet_timeout == 17
