"""`Subnet.tables` kept compact (`smagent.model.subnet.LinkTables`: per node, the distinct tables
once and an index per unit) answers exactly what the plain dict of every unit the sweep
read or wrote answered: the same mapping, the same SA records byte for byte, the same
carry-over into the next snapshot, on a fabric with QoS tables on every switch pair."""
from __future__ import annotations

import dataclasses
import types

import pytest

from mad.attributes import SLtoVLMappingTable
from smagent.model import topogen
from smagent.api import Session
from smagent.sa.records import Records
from smagent.model.subnet import LinkTables, Subnet
from smagent.transport.sim import SimTransport


@pytest.fixture(scope="module")
def swept():
    r = Session(SimTransport(topogen.fat_tree_3(8))).sweep(keep_link_tables=True)
    assert r.problems == [] and len(r.link_tables) > 5000
    return r


def _plain(r, sub: Subnet) -> Subnet:
    """The same snapshot with its tables as the straightforward dict of every unit."""
    return dataclasses.replace(sub, tables=types.MappingProxyType(dict(r.link_tables)))


def _encoded(records: list) -> list[bytes]:
    return [rec.encode() for rec in records]


def test_the_compact_tables_are_the_units_read(swept):
    sub = Subnet.from_sweep(swept)
    assert isinstance(sub.tables, LinkTables)
    assert len(sub.tables) == len(swept.link_tables)
    assert dict(sub.tables) == dict(swept.link_tables)
    key = next(k for k in swept.link_tables if k[0] == "sl2vl" and k[3])
    assert sub.tables[key] == swept.link_tables[key] and key in sub.tables
    for missing in [("sl2vl", key[1], key[2], 0xFFFF), ("sl2vl", 1, 0, 0), ("bogus", key[1], key[2], key[3])]:
        assert missing not in sub.tables
        with pytest.raises(KeyError):
            sub.tables[missing]
    # held per switch: a handful of distinct SL2VL tables, each one object in the snapshot
    distinct = {id(t) for k, t in sub.tables.items() if k[0] == "sl2vl"}
    pairs = sum(1 for k in sub.tables if k[0] == "sl2vl")
    assert len(distinct) * 50 < pairs
    assert {id(t) for _g, _p, _m, t in sub.tables.units("sl2vl")} == distinct
    assert all(isinstance(t, SLtoVLMappingTable) for _g, _p, _m, t in sub.tables.units("sl2vl"))


def test_the_sa_records_are_byte_identical(swept):
    sub = Subnet.from_sweep(swept)
    compact, plain = Records(sub), Records(_plain(swept, sub))
    for name in ("pkey_tables", "sl2vl_tables", "vlarb_tables"):
        got, want = getattr(compact, name), getattr(plain, name)
        assert want and _encoded(got) == _encoded(want), name


def test_the_next_snapshot_carries_the_nodes_not_read_again(swept):
    sub = Subnet.from_sweep(swept)
    some = {g for g in list(sub.nodes)[::3]}
    reread = {k: v for k, v in swept.link_tables.items() if k[1] in some}
    gone = next(g for g, n in sub.nodes.items() if not n.is_switch and g not in some)
    topo = dataclasses.replace(swept.topology, nodes={g: n for g, n in swept.topology.nodes.items() if g != gone})
    later = dataclasses.replace(swept, link_tables=reread, topology=topo, known=None)
    again = Subnet.from_sweep(later, previous=sub)
    # what the dict snapshot did: the previous units of nodes still there, the reads on top
    want = {k: v for k, v in swept.link_tables.items() if k[1] != gone}
    assert dict(again.tables) == want
    plain_again = Subnet.from_sweep(later, previous=_plain(swept, sub))
    assert dict(plain_again.tables) == want
    for name in ("pkey_tables", "sl2vl_tables", "vlarb_tables"):
        assert _encoded(getattr(Records(again), name)) == _encoded(getattr(Records(plain_again), name))
    # a node not read again is shared with the previous snapshot, not copied
    kept = next(g for g in sub.tables._nodes if g not in some and g != gone)
    assert again.tables._nodes[kept] is sub.tables._nodes[kept]


def test_the_records_share_their_tables_lists_and_leave_them_alone(swept):
    sub = Subnet.from_sweep(swept)
    recs = Records(sub)
    lists = {id(r.sl_to_vl) for r in recs.sl2vl_tables}
    assert lists == {id(t.sl_to_vl) for _g, _p, _m, t in sub.tables.units("sl2vl")}
    assert len(lists) * 50 < len(recs.sl2vl_tables)
    assert {id(r.p_keys) for r in recs.pkey_tables} <= {id(t.p_keys) for _g, _p, _m, t in sub.tables.units("pkeys")}
    # answering every table record through the SA changes no table
    from mad import sa
    from mad.header import Method
    from mad.sa_records import P_KeyTableRecord, SLtoVLMappingTableRecord, VLArbitrationTableRecord
    from smagent.sa import SaAgent
    from smagent.transport.address import Address, Incoming
    agent = SaAgent(0x1234)
    agent.publish(sub)
    me, before = Address.gsi(1), {k: t.encode() for k, t in sub.tables.items()}
    for tid, rec in enumerate((P_KeyTableRecord(), SLtoVLMappingTableRecord(), VLArbitrationTableRecord())):
        q = sa.request(Method.GET_TABLE, rec, transaction_id=100 + tid, sm_key=0x1234)
        assert agent.handle(Incoming(q.encode(), me), 0.0)
    assert {k: t.encode() for k, t in sub.tables.items()} == before


def test_a_sweep_holds_equal_tables_once(swept):
    import copy
    import pickle

    from smagent.model.subnet import InterningTables
    values = list(swept.link_tables.values())
    assert isinstance(swept.link_tables, InterningTables) and len({id(v) for v in values}) * 50 < len(values)
    a, b = SLtoVLMappingTable(sl_to_vl=list(range(16))), SLtoVLMappingTable(sl_to_vl=list(range(16)))
    c = SLtoVLMappingTable(sl_to_vl=[0] * 16)
    kept = InterningTables({("sl2vl", 1, 0, 1): a})
    kept[("sl2vl", 1, 0, 2)] = b
    kept.update({("sl2vl", 2, 0, 1): b, ("sl2vl", 2, 0, 2): c})
    assert kept[("sl2vl", 1, 0, 2)] is a and kept[("sl2vl", 2, 0, 1)] is a and kept[("sl2vl", 2, 0, 2)] is c
    # pairs from a generator, each table dropped once stored (its id free for the next): each
    # key still holds its own table's equal
    kept.update(((("sl2vl", 4, 0, m), SLtoVLMappingTable(sl_to_vl=[m % 3] * 16)) for m in range(30)))
    assert all(kept[("sl2vl", 4, 0, m)].sl_to_vl == [m % 3] * 16 for m in range(30))
    assert kept[("sl2vl", 4, 0, 0)] is c and len({id(kept[("sl2vl", 4, 0, m)]) for m in range(30)}) == 3
    for again in (copy.copy(kept), pickle.loads(pickle.dumps(kept))):
        assert type(again) is InterningTables and again == kept
        again[("sl2vl", 3, 0, 1)] = SLtoVLMappingTable(sl_to_vl=[0] * 16)
        assert again[("sl2vl", 3, 0, 1)] is again[("sl2vl", 2, 0, 2)]


def test_the_sa_keeps_no_record_objects_only_keys_and_shared_tables(swept):
    """The table records are kept compact (a packed key and a table reference each) and
    built when asked: nothing the SA holds between queries is a record."""
    import gc
    from mad.sa_records import P_KeyTableRecord, SLtoVLMappingTableRecord, VLArbitrationTableRecord
    recs = Records(Subnet.from_sweep(swept))
    kinds = (SLtoVLMappingTableRecord, P_KeyTableRecord, VLArbitrationTableRecord)
    for name in ("sl2vl_tables", "pkey_tables", "vlarb_tables"):
        kept = getattr(recs, name)
        held = [o for ref in gc.get_referents(kept) for o in ([ref] + (ref if isinstance(ref, list) else []))]
        assert not any(isinstance(o, kinds) for o in held), name
        every = list(kept)
        assert len(every) == len(kept) > 0
        assert _encoded([kept[0], kept[-1], *kept[1:3]]) == _encoded([every[0], every[-1], *every[1:3]])
        lid = every[len(every) // 2].lid
        assert _encoded(kept.of_lid(lid)) == _encoded([r for r in every if r.lid == lid])
