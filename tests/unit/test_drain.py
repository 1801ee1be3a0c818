"""`smagent drain` (issue 40 item 1, one-shot): every pair routed around a switch or a cable,
checked on the simulator's own data plane (independent of the SM's code) before every Set
the drain sends and after the drained switch is unplugged: no host pair is ever lost.
A drain that would cut off hosts elsewhere is refused before any Set."""
from __future__ import annotations

import json

import pytest

import smagent
from smagent.errors import SafetyRefusal
from smagent.model import topogen
from smagent.model import netfile


def _lost(sim) -> list:
    hosts = [(n.name, p) for n in sim.nodes.values() if not n.is_switch for p in range(1, n.num_ports + 1)
             if n.peers[p] is not None]
    lids = {h: sim.port_lid(h) for h in hosts}
    return [(a, b) for a in hosts for b in hosts if a != b and sim.trace(a, lids[b]).outcome != "delivered"]


@pytest.fixture
def tree(tmp_path):
    net = tmp_path / "ft3.net"
    netfile.save(topogen.fat_tree_3(4), str(net))
    with smagent.connect("sim", topology=str(net)) as s:
        assert s.sweep(routing="updn").problems == []
        yield s


def _drain_watched(session, target):
    """Drain ``target``; the host pairs lost before each LFT/MFT Set."""
    sim = session.transport.sim
    seen: list = []

    def check(req):
        smp = req.smp
        if smp.method == 0x02 and smp.attribute_id in (0x19, 0x1B):  # LFT and MFT Sets
            seen.extend(_lost(sim))

    session.transport.on_send = check
    try:
        return session.drain([target], routing="updn"), seen
    finally:
        session.transport.on_send = None


def test_the_watch_sees_pairs_lost_in_the_wrong_order(tree, monkeypatch):
    from smagent.planning import update_order as uo
    staged = uo.staged
    monkeypatch.setattr(uo, "staged", lambda changes, peer: uo.Order(staged(changes, peer).stages[::-1], []))
    _r, seen = _drain_watched(tree, "A0")
    assert seen


def test_draining_an_aggregation_switch_loses_no_pair_then_or_after_it_is_pulled(tree):
    sim = tree.transport.sim
    assert _lost(sim) == []
    r, seen = _drain_watched(tree, "A0")
    assert r.safe and r.sets > 0 and r.entries_left == [] and seen == []
    a0 = sim.node("A0")
    for p in [p for p in range(1, a0.num_ports + 1) if a0.peers[p] is not None]:
        sim.unlink("A0", p)  # pulled: nothing routed over it, nothing lost
    assert _lost(sim) == []


def test_a_cable(tree):
    r = tree.drain(["L0[3]"], routing="updn")
    assert r.safe and r.rerouted > 0


def test_a_drain_that_cuts_off_other_hosts_is_refused_before_any_set(tmp_path):
    net = tmp_path / "line.net"
    netfile.save(topogen.mesh_2d(3, 1, 1), str(net))  # T0_0 - T1_0 - T2_0, a host on each
    with smagent.connect("sim", topology=str(net)) as s:
        s.sweep(routing="updn")
        sent = []
        s.transport.on_send = lambda req: sent.append(req.smp.method) if req.smp.method == 0x02 else None
        with pytest.raises(SafetyRefusal, match="cut off 2 host pairs"):
            s.drain(["T1_0"], routing="updn")  # H0 and H2 would lose each other; H1 is on it
        assert sent == []


def test_cli(cli, tmp_path):
    r = cli("drain", "S1", "--json")  # the bundled fabric: its own sweep (a fresh simulator), then the drain
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["safe_to_remove"] is True and doc["drained"] == ["S1"]
    r = cli("drain", "S1", "--dry-run")
    assert r.exit_code == 0 and "nothing sent" in r.stdout
    assert cli("drain", "S1[77]").exit_code == 2


def _crossing(sim, name: str) -> list:
    """Host pairs whose routes pass through switch ``name``."""
    hosts = [(n.name, 1) for n in sim.nodes.values() if not n.is_switch]
    lids = {h: sim.port_lid(h) for h in hosts}
    return [(a, b) for a in hosts for b in hosts if a != b
            and any(hop[0] == name for hop in sim.trace(a, lids[b]).hops)]


def test_a_drain_without_a_daemon_is_kept_by_later_sweeps_until_undrained(tree, tmp_path):
    from smagent.config import drainfile
    tree.state_dir = str(tmp_path / "state")
    sim = tree.transport.sim
    assert _crossing(sim, "A0")
    r = tree.drain(["A0"], routing="updn")
    assert r.safe and r.kept and "until `smagent undrain`" in "\n".join(r.lines())
    assert [str(e) for e in drainfile.load(tree.state_dir)] == ["A0"]
    again = tree.sweep(routing="updn")  # a plain sweep later: still routed around
    assert any("kept drained" in n and "A0" in n for n in again.notes) and _crossing(sim, "A0") == []
    drainfile.save(tree.state_dir, [])  # what `smagent undrain` does without a daemon, then a sweep
    tree.sweep(routing="updn")
    assert _crossing(sim, "A0")


def _proof(session, target):
    """Drain ``target``; (the result, the SMPs sent after its last LFT/MFT Set: the proof's
    read-back, as (AttributeID, DR path))."""
    sent: list = []
    session.transport.on_send = lambda req: sent.append((req.smp.method, req.smp.attribute_id, req.smp.path))
    try:
        r = session.drain([target], routing="updn")
    finally:
        session.transport.on_send = None
    last = max(i for i, (m, a, _p) in enumerate(sent) if m == 0x02 and a in (0x19, 0x1B))
    return r, [(a, path) for _m, a, path in sent[last + 1:]]


@pytest.mark.parametrize("target", ["A0", "L0[3]"])
def test_the_proof_reads_only_the_switches_cabled_into_what_is_drained(tree, target):
    """Only an exit into the drained part can send traffic into it: the proof reads the
    SwitchInfo, LFT blocks and MFT blocks (the exits' positions) of the switches that have
    one, nothing else of the fabric (a whole re-collection cost ~100x on big trees)."""
    from mad import forwarding as fw
    from smagent.fdb.lft import lft_blocks_to_read
    from smagent.fdb.mft import mft_blocks_to_read
    r, proof = _proof(tree, target)
    assert r.safe
    topo = tree.discover()  # after the drain, not counted: what the proof had to read
    name, _, port = target.rstrip("]").partition("[")
    node = topo.by_description(name)[0].guid
    if port:  # a cable: the switch at each end, on its port of the cable
        exits = {(node, int(port)), topo.links[(node, int(port))]}
    else:  # a node: every port cabled to it
        exits = {far for (g, _p), far in topo.links.items() if g == node}
    exits = {(g, p) for g, p in exits if topo.nodes[g].is_switch}
    neighbours = {g for g, _p in exits}
    assert len(neighbours) == (4 if target == "A0" else 2)
    want = {}
    for g in neighbours:
        n = topo.nodes[g]
        si = n.switch_info
        positions = len({fw.mft_position(p)[0] for s, p in exits if s == g})
        want[n.path] = [0x12] + [0x19] * len(lft_blocks_to_read(si)) \
            + [0x1B] * len(mft_blocks_to_read(si.multicast_fdb_cap, si.multicast_fdb_top)) * positions
    got: dict = {}
    for a, path in proof:
        got.setdefault(path, []).append(a)
    assert {p: sorted(a) for p, a in got.items()} == {p: sorted(a) for p, a in want.items()}


def test_an_entry_still_leading_into_it_after_the_sets_is_found(tree, monkeypatch):
    """The proof reads what the switches hold, not the plan: an LFT entry and an MFT port
    pointed back into the drained switch after the reroute's Sets make it unsafe."""
    import smagent.sweep as sweepmod
    sim = tree.transport.sim
    a0 = sim.node("A0")
    leaf, port = next(peer for peer in a0.peers if peer is not None and peer[0].is_switch)
    host = next(n for n in sim.nodes.values() if not n.is_switch and n.peers[1][0] is not leaf)
    lid = sim.port_lid((host.name, 1))
    real = sweepmod.sweep

    def sweep_then_tamper(transport, opts):
        done = real(transport, opts)
        if not opts.dry_run:  # after the Sets, before the read-back
            leaf.lft[lid] = port
            leaf.mft[0] |= 1 << port
        return done

    monkeypatch.setattr(sweepmod, "sweep", sweep_then_tamper)
    r = tree.drain(["A0"], routing="updn")
    assert not r.safe
    assert r.entries_left == [f"{leaf.name} LFT LID {lid} -> port {port}",
                              f"{leaf.name} MFT MLID 0xc000 includes port {port}"]
    assert "NOT safe to remove: 2 entries still lead into it:" in r.lines()


def test_a_switch_cabled_into_it_that_does_not_answer_the_read_back_is_not_proven_safe(tree, monkeypatch):
    """A switch with an exit into the drained one that does not answer the proof's Gets
    may still send traffic into it: the drain is not reported safe."""
    import smagent.sweep as sweepmod
    from mad import smp as smpcodec
    sim = tree.transport.sim
    leaf = next(peer[0] for peer in sim.node("A0").peers if peer is not None and peer[0].is_switch)
    path = tree.discover().by_description(leaf.name)[0].path
    real_sweep, real_handle = sweepmod.sweep, sim.handle

    def deaf(raw, *args, **kw):
        return None if smpcodec.decode(raw).path == path else real_handle(raw, *args, **kw)

    def sweep_then_silence(transport, opts):
        done = real_sweep(transport, opts)
        if not opts.dry_run:  # after the Sets, before the read-back
            monkeypatch.setattr(sim, "handle", deaf)
        return done

    monkeypatch.setattr(sweepmod, "sweep", sweep_then_silence)
    r = tree.drain(["A0"], routing="updn")
    assert not r.safe and r.entries_left == [f"{leaf.name} LFT and MFT not read back: it may still lead into it"]
