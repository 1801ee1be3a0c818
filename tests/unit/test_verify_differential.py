"""Differential test: `verify` against the simulator's data plane, pair by pair.

`smagent.verify` and `smagent.sim.dataplane` implement the forwarding rules separately
(the simulator is the independent witness). Random fabrics (seeded), LFT and RFT switches
mixed, are swept by smagent on the in-process simulator; some then get damaged tables
(LFT entries, LinearFDBTop, RFT entries, DefaultPort, a switch link left ARMED) so there
are defects. For every (source, DLID) pair the outcome `verify.outcomes` computes from
the tables it read must equal what `trace` makes of a packet: delivered, or the same
kind of failure at the same switch. The set of pairs is derived from the simulator, not
from verify, so a source or LID verify forgets fails the test too.

Half the cases have LFT switches only: verify walks those for many DLIDs at once
(`smagent.verify.lftwalk`, numpy), the other half DLID by DLID; `test_bulk_walk_equals_the_reference`
also checks the two walks give the same report (defects, examples, credit loops).

`test_an_injected_bug_is_caught` proves the comparison can fail: it breaks one RFT rule
in verify or in the simulator (no discard on DefaultPort ingress; BaseLID ranges without
clearing the low LMC bits) and expects disagreements.
"""
import random
import re

import pytest

from mad.attributes import PortState
from mad import forwarding as fw
from smagent import sweep, verify
from smagent.model.fabric import HCA, SWITCH, Fabric
from smagent.sim import trace
from smagent.transport.sim import SimTransport

CASES = 40
PORTS = 8


def random_fabric(rng: random.Random, rft: float = 0.5) -> Fabric:
    """2..6 switches of 8 ports on a random spanning tree plus a few extra links, 0..3
    hosts each (at least 2, the first the SM's), each switch RFT-only with chance ``rft``."""
    f = Fabric()
    n_sw = rng.randint(2, 6)
    hosts = [rng.randint(0, 3) for _ in range(n_sw)]
    hosts[0] = max(hosts[0], 1)
    if sum(hosts) < 2:
        hosts[-1] += 1
    f.add_node(name="H0", node_type=HCA, num_ports=1)  # first node: the SM attaches here
    free = {}
    for i in range(n_sw):
        f.add_node(name=f"S{i}", node_type=SWITCH, num_ports=PORTS)
        free[i] = list(range(1, PORTS + 1))
        rng.shuffle(free[i])
        if rng.random() < rft:
            f.node(f"S{i}").caps.update(linear_fdb_cap=0, random_fdb_cap=rng.choice([32, 48, 64]),
                                        lids_per_port=0)
    for i in range(1, n_sw):
        j = rng.randrange(i)
        f.connect(f"S{i}", free[i].pop(), f"S{j}", free[j].pop())
    for _ in range(rng.randint(0, 2)):
        i, j = rng.sample(range(n_sw), 2)
        if len(free[i]) > hosts[i] and len(free[j]) > hosts[j]:
            f.connect(f"S{i}", free[i].pop(), f"S{j}", free[j].pop())
    k = 0
    for i in range(n_sw):
        for _ in range(min(hosts[i], len(free[i]))):
            name = "H0" if k == 0 else f"H{k}"
            if k:
                f.add_node(name=name, node_type=HCA, num_ports=1)
            f.connect(name, 1, f"S{i}", free[i].pop())
            k += 1
    return f


def damage(sim, rng: random.Random) -> list[str]:
    """A few random faults in the switches' tables and one link's state; what was done."""
    done = []
    switches = sim.switches()
    lids = [lid for n in sim for p in (range(1) if n.is_switch else range(1, n.num_ports + 1))
            for lid in range(n.lid_range(p)[0], n.lid_range(p)[1] + 1)]
    for _ in range(rng.randint(1, 4)):
        sw = rng.choice(switches)
        lid = rng.choice(lids)
        port = rng.choice([0, 255, PORTS + 1, *range(1, PORTS + 1)])
        if sw.lft is not None:
            what = rng.choice(["entry", "entry", "top"])
            if what == "entry":
                sw.lft[lid] = port
                done.append(f"{sw.name} LFT[{lid}] = {port}")
            else:
                sw.si.linear_fdb_top = rng.choice(lids)
                done.append(f"{sw.name} LinearFDBTop = {sw.si.linear_fdb_top}")
        else:
            what = rng.choice(["entry", "entry", "invalidate", "default"])
            if what == "default":
                sw.si.default_port = rng.choice([0, PORTS + 1, *range(1, PORTS + 1)])
                done.append(f"{sw.name} DefaultPort = {sw.si.default_port}")
            elif what == "invalidate":
                used = [i for i, x in enumerate(sw.rft) if fw.rft_unpack(x)]
                if used:
                    i = rng.choice(used)
                    sw.rft[i] = 0
                    done.append(f"{sw.name} RFT[{i}] invalid")
            else:  # an entry anywhere, any LMC, base not necessarily aligned: it may overlap others
                i = rng.randrange(len(sw.rft))
                base, lmc = lid + rng.choice([0, 0, 1, -1]), rng.choice([0, 0, 1, 2, 3])
                base = max(base, 1)
                sw.rft[i] = fw.rft_pack(base, lmc, port)
                done.append(f"{sw.name} RFT[{i}] = {base}/{lmc} -> {port}")
            sw.rft_map = None
    if rng.random() < 0.3:  # one end of a switch-to-switch link left ARMED
        ends = [(sw, p) for sw in switches for p in range(1, sw.num_ports + 1)
                if sw.peers[p] is not None and sw.peers[p][0].is_switch]
        if ends:
            sw, p = rng.choice(ends)
            sim.set_port_state(sw.name, p, PortState.ARMED)
            done.append(f"{sw.name}[{p}] ARMED")
    return done


# what the simulator's drop reasons are, in verify's words
CAUSE_OF = [
    (r"above LinearFDBTop", "above_top"),
    (r"above LinearFDBCap", "above_cap"),
    (r"is 0xFF", "no_route"),
    (r"sends DLID \d+ to port \d+, which does not exist", "no_such_port"),
    (r"matches no RFT entry and came in on DefaultPort", "rft_default_in"),
    (r"DefaultPort \d+ does not exist", "rft_no_default"),
    (r"has no link", "unlinked_port"),
    (r"data needs ACTIVE", "port_not_active"),
    (r"no unicast forwarding table", "no_lft"),
]


def witness(sim, src: tuple[str, int], dlid: int, owner: tuple[str, int]):
    """The simulator's outcome, in the terms of `verify.outcomes` (switch by name)."""
    t = trace(sim, src, dlid)
    switches = [h[0] for h in t.hops if sim.node(h[0]).is_switch]
    if t.outcome == "loop":
        return "loop"
    if t.outcome == "delivered":
        return "delivered" if t.dest == owner else ("misdelivered", switches[-1])
    if "is not a LID of this port" in t.reason:
        return ("misdelivered", switches[-1])
    kind = next((k for pat, k in CAUSE_OF if re.search(pat, t.reason)), t.reason)
    node, port = t.where
    if not sim.node(node).is_switch or (kind == "port_not_active" and not t.reason.startswith("exit port")):
        node = sim.node(node).peers[port][0].name  # the far end refused it: the switch that sent it decided
    return (kind, node)


def sim_pairs(sim) -> dict:
    """Every (source, DLID) pair from the simulator's own state: sources are ACTIVE CA
    ports on ACTIVE switch ports and switches with a LID; DLIDs every LID a port holds."""
    owner, sources = {}, []
    for n in sim:
        for p in ([0] if n.is_switch else range(1, n.num_ports + 1)):
            lo, hi = n.lid_range(p)
            for lid in range(lo, hi + 1):
                owner[lid] = (n.name, p)
            if n.is_switch and lo:
                sources.append((n.name, 0))
            elif not n.is_switch and lo and n.peers[p] is not None:
                peer, pp = n.peers[p]
                if n.state[p] == PortState.ACTIVE and peer.state[pp] == PortState.ACTIVE and peer.is_switch:
                    sources.append((n.name, p))
    return {(s, lid): owner[lid] for s in sources for lid in owner if owner[lid] != s}


def compare(t) -> tuple[int, list]:
    """(pairs compared, disagreements) between verify's outcomes and the simulator's traces."""
    snap = verify.collect(t, mcast=False)
    names = {g: s.name for g, s in snap.switches.items()}
    got = {}
    for (src, dlid), o in verify.outcomes(snap).items():
        name = (names[src[1]], 0) if src[0] == "sw" else (snap.ca_ports[src[1]].name, src[1][1])
        got[(name, dlid)] = o if o == "delivered" else ("loop" if o[0] == "loop" else (o[0], names[o[1]]))
    want = sim_pairs(t.sim)
    bad = [("missing in verify", k) for k in want.keys() - got.keys()]
    bad += [("extra in verify", k) for k in got.keys() - want.keys()]
    for (src, dlid), owner in sorted(want.items()):
        if (src, dlid) in got:
            w = witness(t.sim, src, dlid, owner)
            if got[(src, dlid)] != w:
                bad.append((src, dlid, "verify", got[(src, dlid)], "simulator", w))
    return len(want), bad


def swept(seed: int):
    """Seeds from CASES on: LFT switches only (the bulk walk)."""
    rng = random.Random(seed)
    t = SimTransport(topology=random_fabric(rng, rft=0.5 if seed < CASES else 0.0))
    # a random fabric may have credit loops with minhop: written anyway, the point here
    # is the walk, not the routing (the sweep's refusal is tests/unit/test_dfsssp.py's)
    r = sweep.sweep(t, sweep.SweepOptions(lmc=rng.choice([0, 0, 1]), allow_defects=True))
    assert r.problems == [], r.problems
    return t, rng


@pytest.mark.parametrize("seed", range(2 * CASES))
def test_verify_agrees_with_the_data_plane(seed, monkeypatch):
    monkeypatch.setattr(verify.unicast, "BULK_MIN", 0)  # the LFT-only half through the bulk walk
    t, rng = swept(seed)
    n, bad = compare(t)
    assert n and not bad, bad[:5]
    rep = verify.verify(t, mcast=False)
    assert rep.summary["pairs_unreachable"] == 0
    if seed % 2:
        done = damage(t.sim, rng)
        n, bad = compare(t)
        assert n and not bad, (done, bad[:5])


def _report(snap):
    rep = verify.check(snap, 50)
    summary = {k: v for k, v in rep.summary.items() if not k.endswith("seconds")}
    return summary, rep.defects, rep.texts


@pytest.mark.parametrize("seed", range(CASES, 2 * CASES))
def test_bulk_walk_equals_the_reference(seed, monkeypatch):
    """On LFT-only fabrics, damaged or not, the bulk walk (`lftwalk`) and verify's own
    DLID-by-DLID walk give the same report, examples and credit loops included."""
    from smagent.verify import lftwalk
    monkeypatch.setattr(verify.unicast, "BULK_MIN", 0)  # these fabrics are small
    t, rng = swept(seed)
    if seed % 2:
        damage(t.sim, rng)
    snap = verify.collect(t, mcast=False)
    net = verify.model._Net.of(snap)
    verify.unicast._check_lids_and_sources(net, verify.model._Defects(0))
    assert lftwalk.Walker.of(net) is not None  # the bulk walk is the one under test
    bulk = _report(snap)
    monkeypatch.setattr(lftwalk.Walker, "of", classmethod(lambda cls, net: None))
    assert _report(snap) == bulk


def test_bulk_walk_falls_back_on_loops(monkeypatch):
    """A loop sends its DLID to verify's own walk, which names the cycle."""
    from smagent.verify import lftwalk
    calls = []
    real = lftwalk.Walker.failing

    def spy(self, step, fallback, sending, deps):
        def fb(dlid, deps):
            calls.append(dlid)
            return fallback(dlid, deps)
        return real(self, step, fb, sending, deps)
    monkeypatch.setattr(lftwalk.Walker, "failing", spy)
    monkeypatch.setattr(verify.unicast, "BULK_MIN", 0)
    t, _rng = swept(CASES + 1)
    sw = next(n for n in t.sim.switches() if any(p and p[0].is_switch for p in n.peers[1:]))
    peer_port = next(q for q, p in enumerate(sw.peers) if q and p is not None and p[0].is_switch)
    other, back = sw.peers[peer_port][0], sw.peers[peer_port][1]
    lid = next(n.lid_range(1)[0] for n in t.sim if not n.is_switch)
    sw.lft[lid], other.lft[lid] = peer_port, back  # LID bounces between the two
    rep = verify.check(verify.collect(t, mcast=False))
    assert calls == [lid] and "loop" in rep.defects, (calls, rep.defects.keys())


def test_damage_makes_defects():
    """The damaged cases are not vacuous: most of them do lose pairs, of several kinds."""
    kinds, hurt = set(), 0
    for seed in range(1, CASES, 2):
        t, rng = swept(seed)
        damage(t.sim, rng)
        out = verify.outcomes(verify.collect(t, mcast=False))
        lost = [o for o in out.values() if o != "delivered"]
        hurt += bool(lost)
        kinds |= {o[0] for o in lost}
    assert hurt >= CASES // 4, hurt
    assert {"rft_default_in", "no_such_port", "misdelivered"} <= kinds, kinds
    assert len(kinds) >= 6, kinds


def _verify_ignores_default_ingress(monkeypatch):
    real = verify.unicast._step
    monkeypatch.setattr(verify.unicast, "_step", lambda net, place, dlid: real(net, place & ~1, dlid))


def _sim_ignores_default_ingress(monkeypatch):
    from smagent.sim import dataplane
    from smagent.sim.nodes import Dropped
    real = dataplane.unicast_port

    def buggy(sw, in_port, dlid, smp):
        try:
            return real(sw, in_port, dlid, smp)
        except Dropped as d:
            if "came in on DefaultPort" in d.reason:
                return sw.si.default_port
            raise
    monkeypatch.setattr(dataplane, "unicast_port", buggy)


def _verify_unaligned_rft_ranges(monkeypatch):
    def buggy(entries):  # BaseLID .. BaseLID + 2^LMC - 1 without clearing the low LMC bits
        m = {}
        for base, lmc, port in entries:
            for lid in range(base, base + (1 << lmc)):
                m.setdefault(lid, port)
        return m
    monkeypatch.setattr(verify.model, "_rft_map", buggy)


@pytest.mark.parametrize("bug", [_verify_ignores_default_ingress, _sim_ignores_default_ingress,
                                 _verify_unaligned_rft_ranges])
def test_an_injected_bug_is_caught(monkeypatch, bug):
    """Break one RFT rule in verify or in the simulator: the comparison must disagree."""
    bug(monkeypatch)
    caught = 0
    for seed in range(1, CASES, 2):
        t, rng = swept(seed)
        damage(t.sim, rng)
        caught += bool(compare(t)[1])
    assert caught, f"{bug.__name__} went unnoticed"
