"""A tiny SM written against the in-process simulator's topology: it programs LIDs,
LinearFDBTop and LFTs over directed-route SMPs (and optionally brings every port to
ACTIVE), independently of smagent's own sweep, so simulator tests can use a programmed
fabric without trusting the code they test."""
import collections

from mad import smp
from mad.attributes import AttrID, LinearForwardingTable, PortState
from mad.forwarding import portinfo_modifier
from mad.header import Method
from smagent.transport.base import Request


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
                                       LinearForwardingTable(ports=ports))))
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
