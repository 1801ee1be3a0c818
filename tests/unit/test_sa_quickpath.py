"""The plain PathRecord Get read in place (`smagent.sa.quickpath`) answers byte for byte
what the general path answers, on subnets with partitions, LMC, a QoS policy and an
SL-deciding routing, for queries of every form (the ones it declines included)."""
from __future__ import annotations

import random

import pytest

import smagent
from mad import sa
from mad.header import Method
from mad.sa_records import PathRecord
from smagent.model import netfile, topogen
from smagent.config import partitions, qospolicy
from smagent import sweep
from smagent.sa import SaAgent, quickpath
from mad.sa import SA_HEADER
from smagent.model.subnet import Subnet
from smagent.transport.address import Address, Incoming
from smagent.transport.sim import SimTransport

POLICY = """qos-ulps
  default : 1
  any, service-id 0x1000F : 2
  any, target-port-guid {guid} : 3
  ipoib : 4
end-qos-ulps
"""
# the components a query may carry, the ends apart (selectors included: declined, answered the general way)
EXTRAS = ["p_key", "sl", "service_id", "num_path", "tclass", "flow_label", "hop_limit", "reversible", "qos_class",
          "preference", "raw_traffic", "mtu", "rate", "packet_life_time"]


def _plain():
    with smagent.connect("sim") as f:
        return Subnet.from_sweep(f.sweep())


def _partitioned():
    with smagent.connect("sim") as f:
        cas = sorted(f.discover().cas(), key=lambda n: n.guid)
        g = [f"{n.port_guids[sorted(n.port_paths)[0]]:#x}" for n in cas]
        conf = partitions.parse(f"Default=0x7fff : ALL=limited, SELF=full ;\n"
                                f"a=0x10, sl=2 : {g[1]}=full, {g[2]}=limited ;\n"
                                f"b=0x20 : {g[3]}=full, {g[4]}=limited ;\n")
        return Subnet.from_sweep(f.sweep(partitions=conf), partitions=conf)


def _lmc():
    with smagent.connect("sim") as f:
        return Subnet.from_sweep(f.sweep(lmc=1))


def _policy():
    t = SimTransport(topogen.fat_tree_2(4))
    hosts = {n.description: n for n in sweep.sweep(t, sweep.SweepOptions(dry_run=True)).topology.cas()}
    policy = qospolicy.parse(POLICY.format(guid=hex(hosts["H3"].port_guids[1])), "q")
    return Subnet.from_sweep(sweep.sweep(t, sweep.SweepOptions(qos_policy=policy)), qos_policy=policy)


def _dfsssp():
    with smagent.connect("sim", topology=netfile.dumps(topogen.torus_2d(4, 3, hosts_per_switch=1))) as f:
        return Subnet.from_sweep(f.sweep(routing="dfsssp"))


def _query(rng: random.Random, s: Subnet, agent: SaAgent, tid: int) -> bytes:
    """A PathRecord Get of a random form: ends by LID (a base, another of an LMC range, a
    switch's, one nobody has) or GID (of a port, of none), and random other components."""
    ports = [(n, p) for n in s.nodes.values() for p in n.lid_ports()]
    fields, values = [], {}
    for gid_field, lid_field in (("sgid", "slid"), ("dgid", "dlid")):
        node, port = rng.choice(ports)
        how = rng.choice(["lid", "lid", "gid", "gid", "both", "none", "odd"])
        lid = s.base_lid(node, port)
        if how == "odd":
            lid = rng.choice([lid + 1, 0xBFFF, 0])
        if how in ("lid", "both", "odd"):
            fields.append(lid_field)
            values[lid_field] = lid
        if how in ("gid", "both"):
            fields.append(gid_field)
            gid = agent._recs.gid(node, port)
            values[gid_field] = gid if rng.random() < 0.9 else gid ^ 0x1
    for extra in rng.sample(EXTRAS, rng.choice([0, 0, 1, 1, 2, 3])):
        fields.append(extra)
        values[extra] = {"p_key": rng.choice([0xFFFF, 0x7FFF, 0x8010, 0x10, 0x20, 0x1234]),
                         "sl": rng.randrange(16), "service_id": rng.choice([0x1000F, 0x30000, 0, 1 << 60]),
                         "num_path": rng.choice([0, 1, 2, 127]), "mtu": rng.randrange(1, 6),
                         "rate": rng.randrange(2, 12), "packet_life_time": rng.randrange(20)}.get(extra, rng.randrange(2))
    q = sa.request(Method.GET, PathRecord(**values), component_mask=PathRecord.mask(*fields), transaction_id=tid)
    return q.encode()


@pytest.mark.parametrize("build", [_plain, _partitioned, _lmc, _policy, _dfsssp])
def test_quick_answers_are_the_general_answers(build, monkeypatch):
    s = build()
    agent = SaAgent(0x1122334455667788)
    agent.publish(s)
    rng = random.Random(build.__name__)
    lids = sorted(s.lids)
    asked = [(_query(rng, s, agent, tid), rng.choice(lids + [0xBFFF])) for tid in range(1, 1500)]
    quick = 0
    for raw, requester in asked:
        if quickpath.QuickPaths(agent._recs).path_get(raw, requester) is not None:
            quick += 1
    # the plain form is common: the comparison is not empty (under LMC, only switches' port 0 is plain)
    assert quick > (0 if build is _lmc else len(asked) // 5)

    def answers(a: SaAgent) -> list:
        out = []
        for raw, requester in asked:
            source = Address(requester, qpn=1).pack()
            out.append(a.handle(Incoming(raw, Address.unpack(source)), 0.0))
            out.append(a.answer_fast(raw, source, lambda: 0.0))  # the flood's way in
            a._fast.clear()
            a._path_answers.clear()
        return out

    fast = answers(agent)
    monkeypatch.setattr(quickpath.QuickPaths, "path_get", lambda *_a: None)
    general = SaAgent(0x1122334455667788)
    general.publish(s)
    slow = answers(general)
    for (raw, requester), (h1, f1), (h2, f2) in zip(asked, zip(fast[::2], fast[1::2]), zip(slow[::2], slow[1::2])):
        assert h1 == h2, (PathRecord.component_names(int.from_bytes(raw[48:56], "big")), requester)
        assert f1 == f2
    assert agent.requests == general.requests and agent.answered == general.answered
    statuses = {int.from_bytes(h[0][0][4:6], "big") for h in slow[::2]}
    assert len(statuses) > 1  # answers and refusals alike


def _mixed_links():
    """A 2-level tree whose host links differ (MTU, width, speed) within a leaf."""
    t = SimTransport(topogen.fat_tree_2(6))
    return Subnet.from_sweep(sweep.sweep(t, sweep.SweepOptions()))


def _dfsssp_pairs():
    with smagent.connect("sim", topology=netfile.dumps(topogen.torus_2d(3, 3, hosts_per_switch=2))) as f:
        return Subnet.from_sweep(f.sweep(routing="dfsssp"))


@pytest.mark.parametrize("build", [_mixed_links, _partitioned, _policy, _dfsssp_pairs])
def test_answers_a_source_class_shares_are_each_sources_own(build):
    """The terms decided for one source stand for every port of its class
    (`paths.source_class`): for every pair of ports, asked in random order, with and
    without a P_Key or SL asked, the shared answer is the one worked out for that source
    alone. Port MTUs and rates are made to differ within each leaf, so a class that left
    them out would give a host its neighbour's."""
    from smagent.sa.records import Records
    _AT = SA_HEADER.stop
    s = build()
    rng = random.Random(build.__name__)
    recs = Records(s)
    caps = recs.port_caps
    host_ports = sorted(k for k in caps if not s.nodes[k[0]].is_switch)
    host_links = host_ports + [s.links[k] for k in host_ports if k in s.links]  # and the switch ports they enter
    for key in rng.sample(host_links, len(host_links) // 4):  # the rest alike: they share classes
        mtu, code, gbps = caps[key]
        caps[key] = (rng.choice([mtu, 3, 4]), *rng.choice([(code, gbps), (2, 2.5), (7, 40.0)]))
    shared, alone = quickpath.QuickPaths(recs), quickpath.QuickPaths(recs)
    alone._shared = False
    ends = [(n, p, s.base_lid(n, p)) for n in s.nodes.values() for p in n.lid_ports() if s.base_lid(n, p)]
    asked = []
    for (a, pa, la), (b, pb, lb), extra in ((x, y, e) for x in ends for y in ends for e in (
            {}, rng.choice([{"p_key": rng.choice([0xFFFF, 0x8010, 0x10])}, {"sl": rng.randrange(4)}]))):
        by_gid = rng.random() < 0.5
        ends_of = ({"sgid": recs.gid(a, pa), "dgid": recs.gid(b, pb)} if by_gid else {"slid": la, "dlid": lb})
        q = sa.request(Method.GET, PathRecord(**ends_of, **extra), component_mask=PathRecord.mask(*ends_of, *extra),
                       transaction_id=len(asked) + 1)
        asked.append((q.encode(), la if rng.random() < 0.75 else rng.choice(ends)[2]))  # mostly the source asks
    rng.shuffle(asked)
    answers = set()
    for raw, requester in asked:
        got = shared.path_get(raw, requester)
        assert got == alone.path_get(raw, requester)
        answers.add(got)
    assert not alone._decided
    loopbacks = sum(1 for raw, _r in asked if raw[_AT + 40:_AT + 42] == raw[_AT + 42:_AT + 44] != bytes(2))
    assert len(asked) - len(shared._decided) - loopbacks > len(ends)  # terms found decided for a classmate
    assert len({a[1] for a in answers if a[0] == 0}) > len(ends)  # and not by all alike


@pytest.mark.parametrize("build", [_plain, _partitioned, _lmc, _policy, _dfsssp])
def test_every_pairs_table_is_the_general_answer(build):
    """`QuickPaths.table` (every pair, worked out a chunk at a time) gives the bytes the
    general path gives, for the components that change its terms and requesters that see
    more or less under partitions; LMC is declined (the general path pairs the LIDs)."""
    s = build()
    agent = SaAgent(0x1122334455667788)
    agent.publish(s)
    rng = random.Random(build.__name__)
    forms = [({}, ()), ({"p_key": 0xFFFF}, ("p_key",)), ({"sl": 2}, ("sl",)),
             ({"service_id": 0x1000F}, ("service_id",)), ({"num_path": 1, "tclass": 3}, ("num_path", "tclass"))]
    quick = taken = 0
    for values, fields in forms:
        raw = sa.request(Method.GET_TABLE, PathRecord(**values), component_mask=PathRecord.mask(*fields),
                         transaction_id=1).encode()
        for requester in rng.sample(sorted(s.lids), 3):
            chunks = quickpath.QuickPaths(agent._recs).table(raw, requester)
            status, data, offset = agent._answer(Incoming(raw, Address.gsi(requester)))
            if chunks is None:
                continue
            taken += 1
            assert (status, offset) == (0, PathRecord.STRIDE // 8)
            assert b"".join(chunks) == data, (fields, requester)
            quick += bool(data)
    assert (taken == 0) == (build is _lmc) and (build is _lmc or quick)
