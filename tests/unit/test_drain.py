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
