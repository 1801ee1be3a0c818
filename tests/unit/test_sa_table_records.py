"""The SA's table records kept compact (`smagent.sa.records.CompactRecords`: a packed key
each, a record built only when a query reaches it) answer what the straightforward list of
every record answered: on a few fabrics, random GetTables (by LID, block, position, port,
or any other component, with aliases set on some ports) give the same records in the same
order, byte for byte, as filtering the plain list; and nothing the SA keeps between
queries is a record."""
from __future__ import annotations

import dataclasses
import gc
import random

import pytest

from mad import sa
from mad.forwarding import LFT_BLOCK_SIZE
from mad.header import Method
from mad.sa_records import (GUIDInfoRecord, LinearForwardingTableRecord, MulticastForwardingTableRecord,
                            P_KeyTableRecord, SLtoVLMappingTableRecord, VLArbitrationTableRecord)
from smagent.api import Session
from smagent.model import topogen
from smagent.model.subnet import Subnet
from smagent.sa import SaAgent
from smagent.sa.records import Records
from smagent.transport.address import Address, Incoming
from smagent.transport.sim import SimTransport
from sa_fixtures import table

SM_KEY = 0x0102030405060708
ME = Address.gsi(1)
FABRICS = {
    "tree3": (lambda: topogen.fat_tree_3(6), {}),
    "torus": (lambda: topogen.torus_2d(4, 4, hosts_per_switch=2), {"routing": "updn"}),
    "lmc": (lambda: topogen.fat_tree_2(4), {"lmc": 2}),
}
KINDS = {  # the record kind and the fields its records are keyed and ordered by after the LID
    "lfts": (LinearForwardingTableRecord, ("block_num",)),
    "mfts": (MulticastForwardingTableRecord, ("block_num", "position")),
    "guid_infos": (GUIDInfoRecord, ("block_num",)),
    "pkey_tables": (P_KeyTableRecord, ("port_num", "block_num")),
    "sl2vl_tables": (SLtoVLMappingTableRecord, ("input_port_num", "output_port_num")),
    "vlarb_tables": (VLArbitrationTableRecord, ("output_port_num", "block_num")),
}


@pytest.fixture(scope="module", params=sorted(FABRICS))
def swept(request) -> tuple[str, Subnet]:
    make, opts = FABRICS[request.param]
    r = Session(SimTransport(make())).sweep(keep_link_tables=True, **opts)
    assert r.problems == []
    sub = Subnet.from_sweep(r)
    # MFT units beyond the default group's, at random blocks and positions: the order
    # (LID, block, position) must hold where a switch has many
    rng, mft = random.Random(request.param), dict(sub.mft)
    switches = [g for g, n in sub.nodes.items() if n.is_switch]
    for _ in range(300):
        mft[(rng.choice(switches), rng.randrange(512), rng.randrange(16))] = tuple(
            rng.randrange(1 << 16) for _ in range(32))
    return request.param, dataclasses.replace(sub, mft=mft)


def _plain(s: Subnet, kind: str) -> list:
    """Every record of ``kind`` as a plain list in GetTable order, worked out directly."""
    out: list = []
    if kind == "lfts":
        for n in s.nodes.values():
            lid, t = s.base_lid(n, 0), s.lft.get(n.guid)
            if n.is_switch and lid and t is not None and n.switch_info is not None:
                top = min(n.switch_info.linear_fdb_top // LFT_BLOCK_SIZE, len(t) // LFT_BLOCK_SIZE - 1)
                out += [LinearForwardingTableRecord(lid=lid, block_num=b, ports=list(t[b * 64:(b + 1) * 64]))
                        for b in range(top + 1)]
        return sorted(out, key=lambda r: (r.lid, r.block_num))
    if kind == "mfts":
        for (g, b, pos), masks in s.mft.items():
            if g in s.nodes and s.base_lid(s.nodes[g], 0):
                out.append(MulticastForwardingTableRecord(lid=s.base_lid(s.nodes[g], 0), position=pos,
                                                          block_num=b, port_masks=list(masks)))
        return sorted(out, key=lambda r: (r.lid, r.block_num, r.position))
    if kind == "guid_infos":
        for n in s.nodes.values():
            for p in n.lid_ports():
                if s.base_lid(n, p) and p in n.ports:
                    out += [GUIDInfoRecord(lid=s.base_lid(n, p), block_num=b,
                                           guids=[n.port_guid(p) if b == 0 else 0] + [0] * 7)
                            for b in range((n.ports[p].guid_cap + 7) // 8)]
        return sorted(out, key=lambda r: (r.lid, r.block_num))
    return list(getattr(Records(s), kind))  # the P_Key, SL2VL, VLArb kinds: test_subnet_tables's


def _query(rng: random.Random, cls, keys: tuple[str, ...], every: list):
    """A query like one of the records, some key fields changed (to values records have,
    or none has), and a random set of its components: mostly the LID and key fields."""
    like = rng.choice(every)
    rest = [c.name for c in cls.COMPONENTS if c.name not in ("reserved", "lid", *keys)]
    fields = [n for n in ("lid", *keys) if rng.random() < 0.5] + [n for n in rest if rng.random() < 0.1]
    change = {n: rng.choice([0, 1, 2, rng.randrange(16)]) for n in keys if rng.random() < 0.2}
    if rng.random() < 0.2:  # no port's LID, or another record's
        change["lid"] = rng.choice([0, 0xBFFF, rng.choice(every).lid])
    return like.replace(**change), fields


def _encoded(records) -> list[bytes]:
    return [r.encode() for r in records]


def _aliases(agent: SaAgent, s: Subnet, rng: random.Random) -> None:
    """Alias GUIDs on a few CA ports, in block 0 and (where there is one) block 1."""
    cas = [(n, p) for n in sorted(s.nodes.values(), key=lambda n: n.guid) if not n.is_switch for p in n.lid_ports()]
    for n, p in rng.sample(cas, 3):
        for block in range(min(2, (n.ports[p].guid_cap + 7) // 8)):
            rec = GUIDInfoRecord(lid=s.base_lid(n, p), block_num=block, guids=[0, 0, 0] + [0] * 5)
            q = sa.request(Method.SET, rec, component_mask=GUIDInfoRecord.mask("lid", "block_num", "guids[2]"),
                           transaction_id=rng.randrange(1 << 32))
            (raw, _to), = agent.handle(Incoming(q.encode(), ME), 0.0)
            assert sa.SaMad.decode(raw).status == 0


def test_every_record_as_the_plain_list(swept):
    _name, s = swept
    recs = Records(s)
    for kind in KINDS:
        kept, plain = getattr(recs, kind), _plain(s, kind)
        assert plain and len(kept) == len(plain), kind
        assert _encoded(kept) == _encoded(plain), kind
        lid = plain[len(plain) // 2].lid
        assert _encoded(kept.of_lid(lid)) == _encoded([r for r in plain if r.lid == lid]), kind


def test_random_queries_answer_what_the_plain_list_answers(swept):
    name, s = swept
    rng = random.Random(name)
    agent = SaAgent(SM_KEY)
    agent.publish(s)
    _aliases(agent, s, rng)
    checked = found = 0
    for kind, (cls, keys) in KINDS.items():
        plain = _plain(s, kind)
        if kind == "guid_infos":  # the aliases set, as the SA shows them
            ports = {s.base_lid(*s.port_of_guid(g)): g for g in agent.aliases.tables}
            plain = [r.replace(guids=agent.aliases.block(ports[r.lid], r.block_num)) if r.lid in ports else r
                     for r in plain]
            assert plain != _plain(s, kind)
        for _ in range(60):
            q, fields = _query(rng, cls, keys, plain)
            mask = cls.mask(*fields) if fields else 0
            want = [r for r in plain if r.matches(q, mask)]
            got = table(agent, q, *fields, sm_key=SM_KEY)
            assert _encoded(got) == _encoded(want), (kind, q, fields)
            checked, found = checked + 1, found + bool(want)
    assert found > checked // 2  # most queries find records: the comparison is not of empty lists


def test_the_sa_keeps_no_record_objects_and_the_lfts_are_the_snapshots(swept):
    _name, s = swept
    recs = Records(s)
    for kind, (cls, _keys) in KINDS.items():
        kept = getattr(recs, kind)
        held = [o for ref in gc.get_referents(kept) for o in ([ref] + (ref if isinstance(ref, list) else []))]
        assert not any(isinstance(o, cls) for o in held), kind
        if kind == "lfts":  # each block read from the switch's LFT in the snapshot, not a copy
            assert {id(o) for o in held if isinstance(o, bytes)} == {id(t) for t in s.lft.values()}
