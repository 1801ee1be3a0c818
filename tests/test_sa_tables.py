"""P_KeyTableRecord, SLtoVLMappingTableRecord and VLArbitrationTableRecord (IBA 15.2.5) from
the tables a sweep read or wrote (`SweepResult.link_tables` -> `Subnet.tables`), checked
against what the simulated ports answer to SMP Gets of the same tables: keys as OpenSM
keys them, component masks honoured, P_Keys only to a requester with our SM_Key, units
never read have no record, and a later snapshot keeps the tables a repair did not read."""
import dataclasses

import pytest

import smagent
from mad import forwarding as fw
from mad import sa
from mad import smp as smpcodec
from mad.attributes import AttrID, P_KeyTable, SLtoVLMappingTable, VLArbitrationTable
from mad.header import Method
from mad.sa_records import P_KeyTableRecord, SLtoVLMappingTableRecord, VLArbitrationTableRecord
from smagent.sa import SaAgent
from smagent.subnet import Subnet
from smagent.transport.base import Request
from test_sa_agent import SM_KEY, ask, table


@pytest.fixture(scope="module")
def swept():
    with smagent.connect("sim") as fabric:
        r = fabric.sweep(keep_link_tables=True)
        assert r.problems == [] and r.link_tables
        sub = Subnet.from_sweep(r)
        topo = r.topology
        ca = next(n for n in topo.nodes.values() if not n.is_switch)
        sw = next(n for n in topo.nodes.values() if n.is_switch)
        p = min(ca.port_guids)

        def smp(attr, kind, node, port, modifier):
            path = node.path_to_port(port) if not node.is_switch else node.path
            return fabric.transport.query(Request(smpcodec.dr(Method.GET, attr, path, modifier))).attribute(kind)
        wit = {  # what the ports answer now: the witness
            "ca_pkey": smp(AttrID.P_KEY_TABLE, P_KeyTable, ca, p, fw.pkey_modifier(0)),
            "sw_pkey": smp(AttrID.P_KEY_TABLE, P_KeyTable, sw, 0, fw.pkey_modifier(0, 0)),
            "ca_sl2vl": smp(AttrID.SL_TO_VL_MAPPING_TABLE, SLtoVLMappingTable, ca, p, 0),
            "sw_sl2vl": smp(AttrID.SL_TO_VL_MAPPING_TABLE, SLtoVLMappingTable, sw, 0, fw.sl2vl_modifier(1, 2)),
            "ca_vlarb": smp(AttrID.VL_ARBITRATION_TABLE, VLArbitrationTable, ca, p, fw.vlarb_modifier(1)),
            "sw_vlarb": smp(AttrID.VL_ARBITRATION_TABLE, VLArbitrationTable, sw, 0, fw.vlarb_modifier(3, 2)),
        }
    a = SaAgent(SM_KEY)
    a.publish(sub)
    return a, r, sub, sub.base_lid(sub.nodes[ca.guid], p), p, sub.base_lid(sub.nodes[sw.guid], 0), wit


def _one(m, kind):
    assert m.status == 0, hex(m.status)
    return kind.decode(m.data)


def test_pkey_records_need_our_sm_key(swept):
    a, _r, _s, ca_lid, p, sw_lid, wit = swept
    q = P_KeyTableRecord(lid=ca_lid, port_num=p, block_num=0)
    assert ask(a, Method.GET, q, "lid", "port_num", "block_num").status == sa.SaStatus.ERR_REQ_INVALID.word
    got = _one(ask(a, Method.GET, q, "lid", "port_num", "block_num", sm_key=SM_KEY), P_KeyTableRecord)
    assert (got.lid, got.port_num, got.block_num, got.p_keys) == (ca_lid, p, 0, wit["ca_pkey"].p_keys)
    assert got.p_keys[0] == fw.PKEY_DEFAULT
    sw = _one(ask(a, Method.GET, P_KeyTableRecord(lid=sw_lid, port_num=0), "lid", "port_num", sm_key=SM_KEY),
              P_KeyTableRecord)
    assert (sw.port_num, sw.block_num, sw.p_keys) == (0, 0, wit["sw_pkey"].p_keys)


def test_sl2vl_records_of_a_ca_port_and_a_switch_pair(swept):
    a, _r, _s, ca_lid, _p, sw_lid, wit = swept
    ca = _one(ask(a, Method.GET, SLtoVLMappingTableRecord(lid=ca_lid), "lid"), SLtoVLMappingTableRecord)
    assert (ca.input_port_num, ca.output_port_num, ca.sl_to_vl) == (0, 0, wit["ca_sl2vl"].sl_to_vl)
    q = SLtoVLMappingTableRecord(lid=sw_lid, input_port_num=1, output_port_num=2)
    sw = _one(ask(a, Method.GET, q, "lid", "input_port_num", "output_port_num"), SLtoVLMappingTableRecord)
    assert sw.sl_to_vl == wit["sw_sl2vl"].sl_to_vl
    # a switch's records to one output port: every input port written, each field matched
    outs = table(a, SLtoVLMappingTableRecord(lid=sw_lid, output_port_num=2), "lid", "output_port_num")
    assert len(outs) > 1 and {(r.lid, r.output_port_num) for r in outs} == {(sw_lid, 2)}
    assert len({r.input_port_num for r in outs}) == len(outs)


def test_vlarb_records_by_port_and_block(swept):
    a, _r, _s, ca_lid, p, sw_lid, wit = swept
    names = VLArbitrationTable.LAYOUT.names
    ca = _one(ask(a, Method.GET, VLArbitrationTableRecord(lid=ca_lid, output_port_num=p, block_num=1),
                  "lid", "output_port_num", "block_num"), VLArbitrationTableRecord)
    assert [getattr(ca, k) for k in names] == [getattr(wit["ca_vlarb"], k) for k in names]
    assert any(getattr(ca, f"weight_{i}") for i in range(32))  # a table, not zeros
    sw = _one(ask(a, Method.GET, VLArbitrationTableRecord(lid=sw_lid, output_port_num=2, block_num=3),
                  "lid", "output_port_num", "block_num"), VLArbitrationTableRecord)
    assert [getattr(sw, k) for k in names] == [getattr(wit["sw_vlarb"], k) for k in names]
    # a unit the sweep never read (switch port 0's VLArb) has no record
    m = ask(a, Method.GET, VLArbitrationTableRecord(lid=sw_lid, output_port_num=0, block_num=1),
            "lid", "output_port_num", "block_num")
    assert m.status == sa.SaStatus.ERR_NO_RECORDS.word


def test_a_later_snapshot_keeps_the_tables_not_read_again(swept):
    _a, r, sub, *_ = swept
    again = Subnet.from_sweep(dataclasses.replace(r, link_tables={}), previous=sub)
    assert dict(again.tables) == dict(sub.tables)
    assert not Subnet.from_sweep(dataclasses.replace(r, link_tables={})).tables
    gone = next(g for g, n in sub.nodes.items() if not n.is_switch)
    topo = dataclasses.replace(r.topology, nodes={g: n for g, n in r.topology.nodes.items() if g != gone})
    fewer = Subnet.from_sweep(dataclasses.replace(r, link_tables={}, topology=topo, known=None), previous=sub)
    assert fewer.tables and all(k[1] != gone for k in fewer.tables)


def test_only_kept_when_asked():
    with smagent.connect("sim") as fabric:
        assert fabric.sweep().link_tables == {}
