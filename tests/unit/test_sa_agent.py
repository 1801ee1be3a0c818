"""The SA agent (smagent.sa) on an in-process fabric: a sweep's `Subnet` snapshot, then
SA MADs handed to `SaAgent.handle` as a transport would, and its answers decoded."""
import dataclasses
import random

import pytest

import smagent
from mad import forwarding as fw
from mad import sa
from mad import smp as smpcodec
from mad.attributes import AttrID, P_KeyTable, SLtoVLMappingTable, SMInfo, VLArbitrationTable
from mad.gmp import ClassPortInfo, build
from mad.header import Method, MgmtClass
from mad.sa_records import (LinkRecord, NodeRecord, P_KeyTableRecord, PathRecord, PortInfoRecord,
                            SLtoVLMappingTableRecord, SMInfoRecord, SwitchInfoRecord, VLArbitrationTableRecord)
from smagent.sa import SaAgent
from smagent.model.subnet import Subnet
from smagent.transport.address import Address, Grh, Incoming, way_back
from sa_fixtures import table
from smagent.transport.base import Request
from sa_fixtures import multi

SM_KEY = 0x1122334455667788
ME = Address.gsi(1)


@pytest.fixture(scope="module")
def subnet():
    with smagent.connect("sim") as fabric:
        r = fabric.sweep(routing="minhop")  # an engine that decides no SL: the SL rules below are the SA's
    assert r.problems == []
    mine = SMInfo(guid=r.topology.local[0], sm_key=SM_KEY, act_count=5, priority=3, sm_state=3)
    return Subnet.from_sweep(r, sms=((r.lid_plan.master_lid, mine),))


@pytest.fixture
def agent(subnet):
    a = SaAgent(SM_KEY)
    a.publish(subnet)
    return a


def ask(agent, method, record, *fields, tid=1, sm_key=0, src=ME):
    q = sa.request(method, record, component_mask=type(record).mask(*fields) if fields else 0,
                   transaction_id=tid, sm_key=sm_key)
    out = agent.handle(Incoming(q.encode(), src), 0.0)
    assert len(out) == 1 and out[0][1] == src.reply()
    return sa.SaMad.decode(out[0][0])


def test_subnet_is_a_snapshot(subnet):
    with pytest.raises(TypeError):
        subnet.nodes[1] = None  # read-only mappings
    with pytest.raises(dataclasses.FrozenInstanceError):
        subnet.lmc = 1
    cas = sorted((n for n in subnet.nodes.values() if not n.is_switch), key=lambda n: n.guid)
    a, b = cas[0], cas[-1]
    hops = subnet.route((a.guid, a.lid_ports()[0]), subnet.base_lid(b, b.lid_ports()[0]))
    assert hops and hops[0][0] == (a.guid, a.lid_ports()[0]) and hops[-1][1][0] == b.guid
    assert subnet.route((a.guid, a.lid_ports()[0]), subnet.base_lid(a, a.lid_ports()[0])) == []


def test_node_record_get(agent, subnet):
    m = ask(agent, Method.GET, NodeRecord(lid=subnet.sm_lid), "lid")
    assert m.method == Method.GET_RESP and m.status == 0 and m.attribute_offset == NodeRecord.STRIDE // 8
    rec = m.record(NodeRecord)
    node, port = subnet.port_of_lid(subnet.sm_lid)
    assert (rec.node_guid, rec.port_guid, rec.node_string) == (node.guid, node.port_guid(port), node.description)


def test_get_statuses(agent):
    assert ask(agent, Method.GET, NodeRecord()).sa_status is sa.SaStatus.ERR_TOO_MANY_RECORDS
    assert ask(agent, Method.GET, NodeRecord(lid=0xBFFF), "lid").sa_status is sa.SaStatus.ERR_NO_RECORDS
    bad = sa.request(Method.GET, LinkRecord(), transaction_id=3).encode()
    bad = bad[:48] + (1 << 10).to_bytes(8, "big") + bad[56:]  # a component LinkRecord does not have
    m = sa.SaMad.decode(agent.handle(Incoming(bad, ME), 0.0)[0][0])
    assert m.sa_status is sa.SaStatus.ERR_REQ_INVALID and m.method == Method.GET_RESP


def test_unsupported_gets_the_iba_status(agent, subnet):
    assert ask(agent, Method.SET, NodeRecord(lid=1), "lid").status == 0x000C  # Set of a record not served
    assert ask(agent, Method.DELETE, NodeRecord()).method == Method.DELETE_RESP
    odd = build(MgmtClass.SUBN_ADM, 0x09, 0x0011, tid=5)  # no SA method 0x09
    m = sa.SaMad.decode(agent.handle(Incoming(odd, ME), 0.0)[0][0])
    assert m.status == 0x0008 and m.method == 0x89
    old = build(MgmtClass.SUBN_ADM, Method.GET, 0x0011, tid=6, class_version=1)
    assert sa.SaMad.decode(agent.handle(Incoming(old, ME), 0.0)[0][0]).status == 0x0004
    standby = SaAgent(SM_KEY, master=False)
    standby.publish(subnet)
    assert ask(standby, Method.GET, NodeRecord(lid=1), "lid").status == 0x000C
    assert agent.handle(Incoming(b"\x01\x03", ME), 0.0) == []  # not a MAD: nothing
    short = sa.request(Method.GET, NodeRecord(lid=1), component_mask=NodeRecord.mask("lid"), transaction_id=8)
    (m, _a), = agent.handle(Incoming(short.encode()[:120], ME), 0.0)  # a short write is still answered
    assert sa.SaMad.decode(m).method == Method.GET_RESP


def test_class_port_info(agent):
    raw = build(MgmtClass.SUBN_ADM, Method.GET, 0x0001, tid=9)
    m = agent.handle(Incoming(raw, ME), 0.0)[0][0]
    cpi = ClassPortInfo.decode(m[56:])
    assert m[3] == Method.GET_RESP and (cpi.base_version, cpi.class_version, cpi.resp_time_value, cpi.redirect_qp) == (1, 2, 16, 1)


def test_node_table_through_rmpp(agent, subnet):
    recs = table(agent, NodeRecord())
    want = sorted((subnet.base_lid(n, p), n.port_guid(p)) for n in subnet.nodes.values() for p in n.lid_ports())
    assert sorted((r.lid, r.port_guid) for r in recs) == want
    assert len(recs) * NodeRecord.STRIDE > sa.SA_DATA_SIZE  # it did take several segments
    assert table(agent, NodeRecord(), drop=2) == recs  # a lost segment is sent again
    assert agent.senders == {}  # finished transfers are forgotten


def test_port_info_records_hide_the_m_key(agent, subnet):
    sw = next(n for n in subnet.nodes.values() if n.is_switch)
    lid = subnet.base_lid(sw, 0)
    recs = table(agent, PortInfoRecord(endport_lid=lid), "endport_lid")
    assert [r.port_num for r in recs] == sorted(sw.ports)
    assert all(r.m_key == 0 for r in recs)
    keyed = table(agent, PortInfoRecord(endport_lid=lid), "endport_lid", sm_key=SM_KEY)
    assert [r.m_key for r in keyed] == [sw.ports[p].m_key for p in sorted(sw.ports)]


def test_switch_link_and_sm_records(agent, subnet):
    sws = table(agent, SwitchInfoRecord())
    assert sorted(r.lid for r in sws) == sorted(subnet.base_lid(n, 0) for n in subnet.nodes.values() if n.is_switch)
    sw = next(n for n in subnet.nodes.values() if n.is_switch)
    links = table(agent, LinkRecord(from_lid=subnet.base_lid(sw, 0)), "from_lid")
    assert sorted(r.from_port_num for r in links) == sorted(p for (g, p) in subnet.links if g == sw.guid)
    sm = ask(agent, Method.GET, SMInfoRecord(lid=subnet.sm_lid), "lid").record(SMInfoRecord)
    assert (sm.priority, sm.sm_state, sm.sm_key) == (3, 3, 0)
    assert ask(agent, Method.GET, SMInfoRecord(), sm_key=SM_KEY).record(SMInfoRecord).sm_key == SM_KEY


def _ca_lids(subnet):
    return sorted(subnet.base_lid(n, p) for n in subnet.nodes.values() if not n.is_switch for p in n.lid_ports())


def test_path_records(agent, subnet, monkeypatch):
    lids = _ca_lids(subnet)
    s, d = lids[0], lids[-1]
    pr = ask(agent, Method.GET, PathRecord(slid=s, dlid=d), "slid", "dlid").record(PathRecord)
    hops = subnet.route(subnet.lids[s], d)
    mtus = [subnet.nodes[g].ports[p].mtu_cap for a, b in hops for g, p in (a, b)]
    assert (pr.slid, pr.dlid, pr.p_key, pr.sl, pr.reversible, pr.mtu) == (s, d, 0xFFFF, 0, 1, min(mtus))
    assert (pr.mtu_selector, pr.rate_selector, pr.packet_life_time_selector) == (2, 2, 2) and pr.rate
    by_gid = ask(agent, Method.GET, PathRecord(sgid=pr.sgid, dgid=pr.dgid), "sgid", "dgid").record(PathRecord)
    assert by_gid == pr
    # no source: every port is one, as OpenSM answers, in its order (port GUIDs by their
    # network-order bytes read little-endian); a Get: the first path found
    every_src = table(agent, PathRecord(dlid=d), "dlid")
    ports = [(n, q) for n in subnet.nodes.values() for q in n.lid_ports() if subnet.base_lid(n, q)]
    order = sorted(ports, key=lambda e: int.from_bytes(e[0].port_guid(e[1]).to_bytes(8, "big"), "little"))
    assert [p.slid for p in every_src] == [subnet.base_lid(n, q) for n, q in order]
    from smagent.sa import pathrecords as pathsmod
    worked, real = [], pathsmod.path_record
    monkeypatch.setattr(pathsmod, "path_record", lambda *a, **k: worked.append(1) or real(*a, **k))
    first = ask(agent, Method.GET, PathRecord(dlid=d), "dlid", src=Address.gsi(s)).record(PathRecord)
    monkeypatch.undo()
    assert first == every_src[0] and first.slid != s and len(worked) == 1  # the others never worked out
    assert [p.packet_life_time for p in every_src if p.slid == d] == [0]  # loopback (IBA 1.2 table 205)
    # selectors: a path whose MTU is greater than its own does not exist; less than 4096 does
    more = PathRecord(slid=s, dlid=d, mtu_selector=0, mtu=pr.mtu)
    assert ask(agent, Method.GET, more, "slid", "dlid", "mtu_selector", "mtu").sa_status is sa.SaStatus.ERR_NO_RECORDS
    less = PathRecord(slid=s, dlid=d, mtu_selector=1, mtu=pr.mtu + 1)
    assert ask(agent, Method.GET, less, "slid", "dlid", "mtu_selector", "mtu").status == 0
    other = PathRecord(slid=s, dlid=d, p_key=0x8001)
    assert ask(agent, Method.GET, other, "slid", "dlid", "p_key").sa_status is sa.SaStatus.ERR_NO_RECORDS
    # a GID of no port: no record, as OpenSM 3.3.23 answers (a Get ERR_NO_RECORDS, a GetTable none)
    assert ask(agent, Method.GET, PathRecord(sgid=1 << 64 | 5), "sgid").sa_status is sa.SaStatus.ERR_NO_RECORDS
    assert ask(agent, Method.GET, PathRecord(slid=s, dgid=1 << 64 | 5), "slid", "dgid").sa_status \
        is sa.SaStatus.ERR_NO_RECORDS
    assert table(agent, PathRecord(slid=s, dgid=1 << 64 | 5), "slid", "dgid") == []
    # NumbPath 0: a Get is NumbPath 1 all the same (IBA 1.2 erratum), a GetTable finds none (as OpenSM)
    assert ask(agent, Method.GET, PathRecord(slid=s, dlid=d, num_path=0), "slid", "dlid", "num_path").status == 0
    assert table(agent, PathRecord(slid=s, dlid=d, num_path=0), "slid", "dlid", "num_path") == []
    every = table(agent, PathRecord(slid=s), "slid")
    assert sorted(p.dlid for p in every) == sorted(subnet.base_lid(n, p) for n in subnet.nodes.values()
                                                   for p in n.lid_ports())


def test_path_mtu_and_rate_are_the_smallest_on_the_route(subnet):
    """One switch port on the route narrowed (512-byte MTU, 1X): the path takes both."""
    lids = _ca_lids(subnet)
    s, d = lids[0], lids[-1]
    (g, port), _b = subnet.route(subnet.lids[s], d)[1]  # the exit of the first switch
    node = subnet.nodes[g]
    pi = node.ports[port].replace(mtu_cap=2, link_width_active=1)
    nodes = {**subnet.nodes, g: dataclasses.replace(node, ports={**node.ports, port: pi})}
    agent = SaAgent(SM_KEY)
    agent.publish(subnet.evolve(topology=dataclasses.replace(subnet.topology, nodes=nodes)))
    pr = ask(agent, Method.GET, PathRecord(slid=s, dlid=d), "slid", "dlid").record(PathRecord)
    wide = SaAgent(SM_KEY)
    wide.publish(subnet)
    before = ask(wide, Method.GET, PathRecord(slid=s, dlid=d), "slid", "dlid").record(PathRecord)
    assert pr.mtu == 2 and before.mtu > 2
    from mad import codes
    assert codes.rate_gbps(pr.rate) < codes.rate_gbps(before.rate)
    assert pr.rate == codes.rate_code(pi)


def test_sa_command_refuses_bad_input(cli):
    for args in (["sa", "nodes", "0"], ["sa", "paths", "1", "0xC000"], ["sa", "portinfo", "x"]):
        r = cli("--transport", "umad", *args)
        assert r.exit_code == 2 and "LID" in r.output, (args, r.output)
    r = cli("sa", "nodes")  # the in-process simulator has no SA
    assert r.exit_code == 2 and "--transport umad" in r.output
    g = "0x0000000000100001"
    for args, why in ((["12", g], "not a LID"), ([g] * 12, "at most 11"), (["--sources", "2", g, g], "no destination")):
        r = cli("--transport", "umad", "sa", "multipaths", *args)
        assert r.exit_code == 2 and why in r.output, (args, r.output)


def test_forwarding_table_and_guid_records(agent, subnet):
    from mad.sa_records import GUIDInfoRecord, LinearForwardingTableRecord, MulticastForwardingTableRecord
    sw = next(n for n in subnet.nodes.values() if n.is_switch)
    lid = subnet.base_lid(sw, 0)
    blocks = table(agent, LinearForwardingTableRecord(lid=lid), "lid")
    assert [b.block_num for b in blocks] == list(range(sw.switch_info.linear_fdb_top // 64 + 1))
    lft = b"".join(bytes(b.ports) for b in blocks)
    for dlid, (g, p) in subnet.lids.items():  # each LID's entry is where the route goes
        hops = subnet.route((sw.guid, 0), dlid)
        assert lft[dlid] == (hops[0][0][1] if hops else 0)
    one = ask(agent, Method.GET, LinearForwardingTableRecord(lid=lid, block_num=0), "lid", "block_num")
    assert one.status == 0 and one.record(LinearForwardingTableRecord).ports == blocks[0].ports
    mfts = table(agent, MulticastForwardingTableRecord(lid=lid), "lid")
    assert mfts  # the default group (0xC000) is on every switch
    assert {(m.block_num, m.position): m.port_masks for m in mfts} == {
        (b, pos): list(masks) for (g, b, pos), masks in subnet.mft.items() if g == sw.guid}
    ca = next(n for n in subnet.nodes.values() if not n.is_switch)
    port = ca.lid_ports()[0]
    gi = ask(agent, Method.GET, GUIDInfoRecord(lid=subnet.base_lid(ca, port)), "lid", "block_num").record(
        GUIDInfoRecord)
    assert gi.guids[0] == ca.port_guid(port) and gi.guids[1:] == [0] * 7
    # as many blocks as the port's GUIDCap fills, as OpenSM answers; a switch: port 0's
    blocks = table(agent, GUIDInfoRecord(lid=subnet.base_lid(ca, port)), "lid")
    assert [b.block_num for b in blocks] == list(range((ca.ports[port].guid_cap + 7) // 8)) and len(blocks) > 1
    assert all(g == 0 for b in blocks[1:] for g in b.guids)
    assert [b.block_num for b in table(agent, GUIDInfoRecord(lid=lid), "lid")] == [0]  # GUIDCap 1


@pytest.mark.parametrize("shape", ["tree2", "tree3", "torus", "damaged", "lmc"])
def test_path_summaries_give_what_walking_the_lfts_gives(shape):
    """A PathRecord's MTU and rate from a CA port come from its link and the switch's kept
    summary (`Records.downstream`): for every port and every LID, the same as walking the
    LFTs from the port itself, on fabrics where MTUs and rates differ from link to link."""
    from smagent.model import netfile, topogen
    from smagent.sa import pathrecords as paths
    from smagent.sa.records import Records
    fabric = {"tree2": topogen.fat_tree_2(4), "tree3": topogen.fat_tree_3(4), "torus": topogen.torus_2d(3, 3),
              "damaged": topogen.damaged_fat_tree_2(), "lmc": topogen.fat_tree_2(4)}[shape]
    with smagent.connect("sim", topology=netfile.dumps(fabric)) as f:
        r = f.sweep(lmc=1 if shape == "lmc" else 0, routing="updn" if shape == "torus" else None)
    s = Subnet.from_sweep(r)
    rng = random.Random(shape)
    recs = Records(s)
    caps = recs.port_caps  # links of every speed and MTU: the slowest and smallest must win
    for key in list(caps):
        mtu, code, gbps = caps[key]
        caps[key] = (rng.choice([mtu, 3, 4, 5]), *rng.choice([(code, gbps), (2, 2.5), (5, 5.0), (7, 40.0)]))
    checked = 0
    for n in s.nodes.values():
        for p in n.lid_ports():
            for dlid, (g, dp) in s.lids.items():
                ends = [(n.guid, 0 if n.is_switch else p), (g, 0 if s.nodes[g].is_switch else dp)]
                assert paths._mtu_rate(recs, n, p, dlid, ends) == paths.walked_mtu_rate(recs, n, p, dlid, ends)
                checked += 1
    assert checked > 100


def test_lmc_paths_pair_lids_by_offset_then_every_other_pairing():
    with smagent.connect("sim") as fabric:
        r = fabric.sweep(lmc=1)
    s = Subnet.from_sweep(r)
    agent = SaAgent(SM_KEY)
    agent.publish(s)
    cas = sorted((n for n in s.nodes.values() if not n.is_switch), key=lambda n: n.guid)
    a, b = cas[0], cas[-1]
    pa, pb = a.lid_ports()[0], b.lid_ports()[0]
    sgid, dgid = agent._recs.gid(a, pa), agent._recs.gid(b, pb)
    got = table(agent, PathRecord(sgid=sgid, dgid=dgid), "sgid", "dgid")
    base_a, base_b = s.base_lid(a, pa), s.base_lid(b, pb)
    # as OpenSM: the offset pairs (Preference 0), then the others (2)
    assert [(p.slid, p.dlid, p.preference) for p in got] == [(base_a, base_b, 0), (base_a + 1, base_b + 1, 0),
                                                             (base_a, base_b + 1, 2), (base_a + 1, base_b, 2)]
    # a Get is NumbPath 1 (IBA 1.2 erratum): the first, as OpenSM answers; NumbPath limits a GetTable
    first = ask(agent, Method.GET, PathRecord(sgid=sgid, dgid=dgid), "sgid", "dgid").record(PathRecord)
    assert (first.slid, first.dlid) == (base_a, base_b)
    assert len(table(agent, PathRecord(sgid=sgid, dgid=dgid, num_path=1), "sgid", "dgid", "num_path")) == 1
    one = ask(agent, Method.GET, PathRecord(slid=base_a + 1, dlid=base_b), "slid", "dlid").record(PathRecord)
    assert (one.slid, one.dlid) == (base_a + 1, base_b)
    # a port's records are found by any LID of its range, and carry its base LID (as OpenSM)
    from mad.sa_records import GUIDInfoRecord
    for rec, field in ((NodeRecord(lid=base_a + 1), "lid"), (PortInfoRecord(endport_lid=base_a + 1), "endport_lid"),
                       (GUIDInfoRecord(lid=base_a + 1), "lid"), (LinkRecord(from_lid=base_a + 1), "from_lid")):
        got = table(agent, rec, field)
        assert got and {getattr(r, field) for r in got} == {base_a}, type(rec).__name__


def test_path_records_carry_the_sl_dfsssp_chose():
    """A torus routed by dfsssp: each path's SL (its VL layer) reaches hosts in the
    PathRecord, as the sweep kept it (`SweepResult.path_sls`); minhop's paths are SL 0."""
    from smagent.model import netfile, topogen
    with smagent.connect("sim", topology=netfile.dumps(topogen.torus_2d(4, 3, hosts_per_switch=1))) as fabric:
        r = fabric.sweep(routing="dfsssp")
    assert r.path_sls is not None
    s = Subnet.from_sweep(r)
    agent = SaAgent(SM_KEY)
    agent.publish(s)
    lids = _ca_lids(s)
    sls = {}
    for a in lids:
        for b in lids:
            if a != b:
                pr = ask(agent, Method.GET, PathRecord(slid=a, dlid=b), "slid", "dlid").record(PathRecord)
                node, port = s.port_of_lid(a)
                switch = s.links[(node.guid, port)][0]
                sls[a, b] = pr.sl
                assert pr.sl == r.path_sls[switch][b]
    assert len(set(sls.values())) > 1  # the layers are in use: not every path on SL 0
    # dfsssp decides the SL: a query asking its layer gets the path, another SL none
    (a, b), sl = next(iter(sls.items()))
    assert ask(agent, Method.GET, PathRecord(slid=a, dlid=b, sl=sl), "slid", "dlid", "sl").record(PathRecord).sl == sl
    refused = ask(agent, Method.GET, PathRecord(slid=a, dlid=b, sl=sl ^ 1), "slid", "dlid", "sl")
    assert refused.sa_status is sa.SaStatus.ERR_NO_RECORDS


def test_an_sl_asked_for_is_given_where_the_sm_does_not_decide_it(subnet):
    """minhop decides no SL: a PathRecord query naming one gets it, as OpenSM answers, unless
    an SL2VL table on the way (the source CA port's, a switch's from entry to exit port)
    sends it to VL15, where data is dropped."""
    a, b = _ca_lids(subnet)[:2]
    agent = SaAgent(SM_KEY)
    agent.publish(subnet)

    def path(sl=None):
        fields = ("slid", "dlid") + (("sl",) if sl is not None else ())
        return ask(agent, Method.GET, PathRecord(slid=a, dlid=b, sl=sl or 0), *fields)

    assert path().record(PathRecord).sl == 0 and path(3).record(PathRecord).sl == 3
    src = subnet.port_of_lid(a)
    hops = subnet.route((src[0].guid, src[1]), b)
    (sw, entry), out = hops[0][1], hops[1][0][1]
    drop3 = SLtoVLMappingTable(sl_to_vl=[15 if i == 3 else 0 for i in range(16)])
    for key in [("sl2vl", src[0].guid, src[1], 0), ("sl2vl", sw, 0, entry << 8 | out)]:
        agent.publish(dataclasses.replace(subnet, tables={key: drop3}))
        assert path(3).sa_status is sa.SaStatus.ERR_NO_RECORDS and path(4).record(PathRecord).sl == 4


def test_the_sl2vl_tables_a_sweep_keeps_are_looked_at_for_vl15():
    """The compact tables a daemon's sweep keeps (`LinkTables`): an SL some table sends to
    VL15 is known, and a path through that table is not given on it."""
    from smagent.sweep import SweepOptions, sweep
    from smagent.transport.sim import SimTransport
    r = sweep(SimTransport(), SweepOptions(keep_link_tables=True))
    assert not Subnet.from_sweep(r)._sls_to_vl15  # the tables a sweep writes send no SL to VL15
    ca_key = next(k for k in r.link_tables if k[0] == "sl2vl" and not r.topology.nodes[k[1]].is_switch)
    r.link_tables[ca_key] = SLtoVLMappingTable(sl_to_vl=[15 if i == 3 else 0 for i in range(16)])
    s = Subnet.from_sweep(r)
    assert s._sls_to_vl15 == {3}
    src = (ca_key[1], ca_key[2])
    dlid = next(lid for lid, port in s.lids.items() if port != src and not s.nodes[port[0]].is_switch)
    hops = s.route(src, dlid)
    assert s.sl_dropped(hops, 3) and not s.sl_dropped(hops, 4)


def test_a_path_in_several_shared_partitions_gets_opensms_choice(subnet):
    """Ports that share several partitions get the P_Key OpenSM would give them (IBA leaves
    the choice open): the partition lowest in OpenSM's map of the source's keys, which
    holds them by their network-order bytes read as a little-endian number, so 0x0100
    comes before 0x0002; the source's own membership bit; a limited-limited partition
    is passed over."""
    a, b = sorted(subnet.lids.values())[:2]
    s = dataclasses.replace(subnet, pkeys={a: [0xFFFF, 0x8002, 0x0100, 0x0003], b: [0x7FFF, 0x0002, 0x8100, 0x0003]})
    assert s.path_pkey(a, b) == 0x0100  # 0x0100 (read 0x0001) before 0x0002 (0x0200); 0x0003: both limited
    assert s.path_pkey(b, a) == 0x8100
    s = dataclasses.replace(s, pkeys={a: [0xFFFF, 0x8002], b: [0x7FFF, 0x0002]})
    assert s.path_pkey(a, b) == 0x8002 and s.path_pkey(b, a) == 0x0002  # 0x0002 (0x0200) before 0x7FFF (0xFF7F)


def test_path_records_only_within_a_shared_partition():
    """With partitions, a PathRecord exists only between ports that share one (at least one
    of them a full member) and carries its P_Key; limited-limited and unshared pairs get
    none (IBA 10.9), as the data plane would drop their packets."""
    from smagent.config import partitions
    with smagent.connect("sim") as fabric:
        topo = fabric.discover()
        cas = sorted((n for n in topo.nodes.values() if not n.is_switch), key=lambda n: n.guid)
        g = [f"{n.port_guids[p]:#x}" for n in cas[:4] for p in sorted(n.port_paths)[:1]]
        conf = partitions.parse(f"Default=0x7fff : SELF=full ;\n"
                                f"a=0x10 : {g[0]}=full, {g[1]}=limited, {g[2]}=limited ;\n"
                                f"b=0x20 : {g[3]}=full ;\n")
        r = fabric.sweep(partitions=conf)
    assert r.problems == []
    s = Subnet.from_sweep(r, partitions=conf)
    agent = SaAgent(SM_KEY)
    agent.publish(s)

    def lid(i):
        n = cas[i]
        return s.base_lid(s.nodes[n.guid], sorted(n.port_paths)[0])

    def path(a, b, *fields, **kw):
        return ask(agent, Method.GET, PathRecord(slid=lid(a), dlid=lid(b), **kw), "slid", "dlid", *fields)

    assert path(0, 1).record(PathRecord).p_key == 0x8010  # full to limited: the full member's key
    assert path(1, 0).record(PathRecord).p_key == 0x0010  # the source's own membership
    assert path(1, 2).sa_status is sa.SaStatus.ERR_NO_RECORDS  # limited to limited
    assert path(1, 3).sa_status is sa.SaStatus.ERR_NO_RECORDS  # only the default shared, both limited
    # every port is in OpenSM's default partition (ALL=limited), whatever the file says of it
    assert path(0, 3).record(PathRecord).p_key == 0xFFFF
    assert path(0, 1, "p_key", p_key=0x8020).sa_status is sa.SaStatus.ERR_NO_RECORDS
    assert path(0, 1, "p_key", p_key=0x8010).record(PathRecord).p_key == 0x8010


def test_a_partitions_sl_is_its_paths_sl_where_the_sm_manages_qos():
    """partitions.conf's `sl=` gives the paths of that partition their SL (what OpenSM does
    with QoS on); without QoS (--no-qos) they stay on SL 0; an SL the query asks for wins."""
    from smagent.config import partitions
    with smagent.connect("sim") as fabric:
        topo = fabric.discover()
        cas = sorted((n for n in topo.nodes.values() if not n.is_switch), key=lambda n: n.guid)
        g = [f"{n.port_guids[p]:#x}" for n in cas[:2] for p in sorted(n.port_paths)[:1]]
        conf = partitions.parse(f"Default=0x7fff : ALL=full ;\nstorage=0x10, sl=5 : {g[0]}=full, {g[1]}=full ;\n")
        r = fabric.sweep(partitions=conf, routing="minhop")  # no engine SL under the partition's
    for qos, want in ((True, 5), (False, 0)):
        s = Subnet.from_sweep(r, partitions=conf, qos=qos)
        agent = SaAgent(SM_KEY)
        agent.publish(s)
        a, b = (s.base_lid(s.nodes[n.guid], sorted(n.port_paths)[0]) for n in cas[:2])
        pr = ask(agent, Method.GET, PathRecord(slid=a, dlid=b), "slid", "dlid").record(PathRecord)
        assert (pr.p_key & 0x7FFF, pr.sl) == (0x10, want)
        other = ask(agent, Method.GET, PathRecord(slid=a, dlid=b, p_key=0xFFFF), "slid", "dlid", "p_key")
        assert other.record(PathRecord).sl == 0  # the default partition has no sl=
        asked = ask(agent, Method.GET, PathRecord(slid=a, dlid=b, sl=7), "slid", "dlid", "sl")
        assert asked.record(PathRecord).sl == 7


def test_joins_only_in_a_partition_the_port_is_a_member_of():
    from mad.sa_records import MCMemberRecord
    from smagent.config import partitions
    with smagent.connect("sim") as fabric:
        topo = fabric.discover()
        cas = sorted((n for n in topo.nodes.values() if not n.is_switch), key=lambda n: n.guid)
        g0 = cas[0].port_guids[sorted(cas[0].port_paths)[0]]
        conf = partitions.parse(f"Default=0x7fff : ALL=full ;\na=0x10 : {g0:#x}=full ;\n")
        r = fabric.sweep(partitions=conf)
    s = Subnet.from_sweep(r, partitions=conf)
    agent = SaAgent(SM_KEY)
    agent.publish(s)
    fields = ("mgid", "port_gid", "q_key", "p_key", "sl", "flow_label", "tclass", "join_state")

    def join(i, pkey):
        n = s.nodes[cas[i].guid]
        gid = agent._recs.gid(n, sorted(cas[i].port_paths)[0])
        q = MCMemberRecord(mgid=0, port_gid=gid, q_key=0x1234, p_key=pkey, sl=0, flow_label=0, tclass=0,
                           join_state=1)
        return ask(agent, Method.SET, q, *fields, tid=50 + i)

    assert join(1, 0x8010).sa_status is sa.SaStatus.ERR_REQ_INVALID  # not a member of 0x10
    made = join(0, 0x8010)
    assert made.status == 0 and made.record(MCMemberRecord).p_key == 0x8010
    assert join(1, 0xFFFF).status == 0  # the default partition: every port is in it

    # a requester sees the groups of its partitions only, as OpenSM answers

    def lid(i):
        return s.base_lid(s.nodes[cas[i].guid], sorted(cas[i].port_paths)[0])
    seen = {i: {r.p_key for r in table(agent, MCMemberRecord(), src=Address.gsi(lid(i)))} for i in (0, 1)}
    assert seen == {0: {0x8010, 0xFFFF}, 1: {0xFFFF}}


def test_path_answers_are_cached_on_what_the_query_says(agent, subnet):
    """Two PathRecord Gets that differ only past the record (umad2sim hands up junk in a
    MAD's last 32 bytes) are one query: the second is the cached answer."""
    lids = _ca_lids(subnet)
    q = sa.request(Method.GET, PathRecord(slid=lids[0], dlid=lids[-1]), component_mask=PathRecord.mask("slid", "dlid"),
                   transaction_id=5).encode()
    junk = q[:224] + bytes(range(32))
    first = agent.handle(Incoming(q, ME), 0.0)
    before = len(agent._path_answers)
    second = agent.handle(Incoming(junk, ME), 0.0)
    assert len(agent._path_answers) == before == 1
    assert first == second


# -- P_KeyTableRecord, SLtoVLMappingTableRecord, VLArbitrationTableRecord -----------------
# From the tables a sweep read or wrote (`SweepResult.link_tables` -> `Subnet.tables`),
# checked against what the simulated ports answer to SMP Gets of the same tables: keys as
# OpenSM keys them, component masks honoured, P_Keys only to a requester with our SM_Key,
# units never read have no record, and a later snapshot keeps the tables a repair did not
# read.


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


# -- MultiPathRecord (SubnAdmGetMulti) --------------------------------------------------



def _gids(agent, subnet, n):
    cas = sorted(((node, p) for node in subnet.nodes.values() if not node.is_switch for p in node.lid_ports()),
                 key=lambda c: (c[0].guid, c[1]))
    return [agent._recs.gid(node, p) for node, p in cas[:n]]


def test_multipath_gives_every_pairs_paths_in_order(agent, subnet):
    from mad.sa_records import MultiPathRecord
    g = _gids(agent, subnet, 4)
    status, got = multi(agent, MultiPathRecord(sgid_count=2, dgid_count=2), g, "sgid_count", "dgid_count")
    want = [r.replace(num_path=0) for s in g[:2] for d in g[2:]
            for r in table(agent, PathRecord(sgid=s, dgid=d), "sgid", "dgid")]
    assert status == 0 and len(want) == 4 and got == want
    assert all(r.reversible == 1 and r.num_path == 0 for r in got)
    # NumbPath bounds the whole answer: the first ones found
    status, three = multi(agent, MultiPathRecord(sgid_count=2, dgid_count=2, num_path=3), g,
                          "sgid_count", "dgid_count", "num_path")
    assert status == 0 and three == want[:3]
    # other components select as a PathRecord query's: no path carries an MTU above the largest
    top = max(r.mtu for r in got)
    status, none = multi(agent, MultiPathRecord(sgid_count=2, dgid_count=2, mtu_selector=0, mtu=top), g,
                         "sgid_count", "dgid_count", "mtu_selector", "mtu")
    assert status == 0 and none == []
    status, exact = multi(agent, MultiPathRecord(sgid_count=2, dgid_count=2, mtu_selector=2, mtu=top), g,
                          "sgid_count", "dgid_count", "mtu_selector", "mtu")
    assert status == 0 and exact == [r for r in got if r.mtu == top] and exact


def test_multipath_with_lmc_gives_every_lid_pairing_as_opensm():
    """With LMC 1 (2 LIDs a port), OpenSM's MultiPathRecord answer for one pair of ports is
    the paths paired by LID offset first (Preference 0), then the other pairings, source
    LID by source LID (Preference 2), as its PathRecord answer; NumbPath takes the first."""
    from mad.sa_records import MultiPathRecord
    with smagent.connect("sim") as fabric:
        s = Subnet.from_sweep(fabric.sweep(lmc=1))
    agent = SaAgent(SM_KEY)
    agent.publish(s)
    (a, pa), (b, pb) = _ends(s)
    ga, gb = agent._recs.gid(a, pa), agent._recs.gid(b, pb)
    la, lb = s.base_lid(a, pa), s.base_lid(b, pb)
    status, got = multi(agent, MultiPathRecord(sgid_count=1, dgid_count=1), [ga, gb], "sgid_count", "dgid_count")
    assert status == 0
    assert [(r.slid, r.dlid, r.preference) for r in got] == [(la, lb, 0), (la + 1, lb + 1, 0), (la, lb + 1, 2),
                                                            (la + 1, lb, 2)]
    assert all((r.sgid, r.dgid, r.reversible, r.num_path) == (ga, gb, 1, 0) for r in got)
    status, three = multi(agent, MultiPathRecord(sgid_count=1, dgid_count=1, num_path=3), [ga, gb],
                          "sgid_count", "dgid_count", "num_path")
    assert status == 0 and three == got[:3]
    assert table(agent, PathRecord(sgid=ga, dgid=gb), "sgid", "dgid") == got


def test_multipath_for_apm_gives_one_diagonal_from_hashed_offsets():
    """Two sources, two destinations, NumbPath 2 (APM), as OpenSM answers: sources and
    destinations each ordered by port GUID (as OpenSM compares them: network order read on
    x86), an LID offset from a hash of the first ones' base LIDs for the first source's
    path and the next for the second's, the diagonal (S0-D0, S1-D1) where its paths are no
    longer; the same whatever order the GIDs come in."""
    from mad.sa_records import MultiPathRecord
    with smagent.connect("sim") as fabric:
        s = Subnet.from_sweep(fabric.sweep(lmc=1))
    agent = SaAgent(SM_KEY)
    agent.publish(s)
    cas = sorted(((n, n.lid_ports()[0]) for n in s.nodes.values() if not n.is_switch), key=lambda c: c[0].guid)
    picked = [cas[0], cas[1], cas[-2], cas[-1]]
    gids = [agent._recs.gid(n, p) for n, p in picked]
    wire = lambda e: int.from_bytes((e[0] & (1 << 64) - 1).to_bytes(8, "big"), "little")  # noqa: E731
    (g0, l0), (g1, l1) = sorted([(gids[i], s.base_lid(*picked[i])) for i in (0, 1)], key=wire)
    (h0, m0), (h1, m1) = sorted([(gids[i], s.base_lid(*picked[i])) for i in (2, 3)], key=wire)
    a, b = sorted((l0, m0))
    offs = ((a >> 1) << 4 | b >> 1) % 103
    fields = ("sgid_count", "dgid_count", "num_path")
    status, got = multi(agent, MultiPathRecord(sgid_count=2, dgid_count=2, num_path=2), gids, *fields)
    assert status == 0
    assert [(r.sgid, r.dgid, r.slid, r.dlid) for r in got] == [
        (g0, h0, l0 + offs % 2, m0 + offs % 2), (g1, h1, l1 + (offs + 1) % 2, m1 + (offs + 1) % 2)]
    swapped = [gids[1], gids[0], gids[3], gids[2]]
    assert multi(agent, MultiPathRecord(sgid_count=2, dgid_count=2, num_path=2), swapped, *fields) == (0, got)
    # NumbPath 3: every pair's paths instead
    status, every = multi(agent, MultiPathRecord(sgid_count=2, dgid_count=2, num_path=3), gids, *fields)
    assert status == 0 and len(every) == 3 and every[0].preference == 0


def _ends(s):
    cas = sorted((n for n in s.nodes.values() if not n.is_switch), key=lambda n: n.guid)
    return (cas[0], cas[0].lid_ports()[0]), (cas[-1], cas[-1].lid_ports()[0])


def test_multipath_request_of_several_segments(agent, subnet):
    """16 GIDs do not fit one MAD: the request comes in two RMPP segments, ACKed."""
    from mad.sa_records import MultiPathRecord
    some = _gids(agent, subnet, 9)
    g = [some[0]] + (some[1:] * 2)[:15]  # a destination may come twice: its paths come twice
    status, got = multi(agent, MultiPathRecord(sgid_count=1, dgid_count=15), g, "sgid_count", "dgid_count")
    assert status == 0 and [r.dgid for r in got] == g[1:] and {r.sgid for r in got} == {g[0]}
    assert not agent.senders  # every response segment ACKed


def test_multipath_statuses(agent, subnet):
    from mad.sa_records import MultiPathRecord
    g = _gids(agent, subnet, 2)
    assert multi(agent, MultiPathRecord(sgid_count=1, dgid_count=1), g, "sgid_count")[0] == \
        sa.SaStatus.ERR_REQ_INSUFFICIENT_COMPONENTS.word
    assert multi(agent, MultiPathRecord(sgid_count=0, dgid_count=1), g[:1], "sgid_count", "dgid_count")[0] == \
        sa.SaStatus.ERR_REQ_INVALID.word
    bad = (0xFE80 << 112) | 0x1234
    assert multi(agent, MultiPathRecord(sgid_count=1, dgid_count=1), [g[0], bad], "sgid_count", "dgid_count")[0] == \
        sa.SaStatus.ERR_REQ_INVALID_GID.word


def test_multipath_requests_are_forgotten_after_a_while(agent, subnet):
    """A finished request is kept (its duplicates ACKed) for REQUEST_KEPT_S, then dropped;
    one whose further segments never come is aborted then."""
    from mad.rmpp import RmppSender, RmppType, rmpp_of
    from mad.sa_records import MultiPathRecord
    from smagent.sa.agent import REQUEST_KEPT_S
    g = _gids(agent, subnet, 2)
    assert multi(agent, MultiPathRecord(sgid_count=1, dgid_count=1), g, "sgid_count", "dgid_count")[0] == 0
    assert len(agent.receivers) == 1
    raw = sa.request(Method.GET_MULTI, MultiPathRecord(sgid_count=1, dgid_count=15),
                     component_mask=MultiPathRecord.mask("sgid_count", "dgid_count"), transaction_id=4242).encode()
    first = RmppSender(raw[:24], raw[sa.SA_HEADER], raw[56:80] + bytes(16 * 16), timeout=1.0).start(0.0)[0]
    (ack, _a), = agent.handle(Incoming(first, ME), 0.0)  # segment 1 of 2: ACKed, opening the window
    assert rmpp_of(ack).rmpp_type == RmppType.ACK and rmpp_of(ack).segment_number == 1
    assert agent.deadline == REQUEST_KEPT_S
    out = agent.on_timeout(REQUEST_KEPT_S)
    assert [rmpp_of(m).rmpp_type for m, _a in out] == [RmppType.ABORT] and not agent.receivers


def _received(lid: int) -> bytes:
    """A source address as umad hands it up with a request: QP1, no Q_Key (docs/PITFALLS.md)."""
    return Address(lid, qpn=1).pack()


def test_fast_answers_are_the_answers_handle_gives(subnet):
    """`answer_fast` (the flood's path: bytes and a packed source in, whole MADs out) gives
    byte for byte what `handle` gives, the first time (through `handle`) and from its cache
    (another TID, other junk after the record, another requester)."""
    lids = _ca_lids(subnet)
    mask = PathRecord.mask("slid", "dlid")
    fast, slow = SaAgent(SM_KEY), SaAgent(SM_KEY)
    fast.publish(subnet)
    slow.publish(subnet)
    asked = [(s, d, src) for s, d in [(lids[0], lids[-1]), (lids[1], lids[2]), (lids[0], 0xBFFF)]
             for src in (lids[0], lids[1])]
    for tid, (s, d, src) in enumerate(asked * 2, start=40):  # the second round from the cache
        q = sa.request(Method.GET, PathRecord(slid=s, dlid=d), component_mask=mask, transaction_id=tid).encode()
        q = q[:224] + bytes([tid]) * 32  # umad2sim's junk
        got = fast.answer_fast(q, _received(src), lambda: 0.0)
        want = slow.handle(Incoming(q, Address.unpack(_received(src))), 0.0)
        assert got == [(m, a.pack()) for m, a in want]
        assert int.from_bytes(got[0][0][8:16], "big") == tid
    assert len(fast._fast) == len(asked) and fast.answered == slow.answered == 2 * len(asked)
    assert fast.requests == slow.requests  # answers from the cache are counted for the metrics too
    statuses = {sa.SaMad.decode(m).status for (m, _a), in [fast.answer_fast(
        sa.request(Method.GET, PathRecord(slid=s, dlid=d), component_mask=mask, transaction_id=1).encode(),
        _received(src), lambda: 0.0) for s, d, src in asked]}
    assert statuses == {0, sa.SaStatus.ERR_NO_RECORDS.word}  # answers and refusals alike


def test_fast_answers_ignore_what_the_source_address_does_not_say(subnet):
    """umad2sim leaves stray bytes in the GRH fields of a MAD that came without a GRH (and
    the Q_Key of QP1 is not handed up): requests from one port are answered from one cached
    answer whatever those bytes hold; another P_Key index, SL or a real GRH is another way
    back, and another answer."""
    lids = _ca_lids(subnet)
    a = SaAgent(SM_KEY)
    a.publish(subnet)
    q = sa.request(Method.GET, PathRecord(slid=lids[0], dlid=lids[1]), component_mask=PathRecord.mask("slid", "dlid"),
                   transaction_id=7).encode()
    clean = _received(lids[0])
    first = a.answer_fast(q, clean, lambda: 0.0)
    for junk in range(1, 4):
        dirty = bytearray(clean)
        dirty[0] = junk  # above the 24-bit QPN
        dirty[4:8] = bytes([junk]) * 4  # QP1's Q_Key
        dirty[13:36] = bytes([0x7F, junk]) * 11 + b"\x01"  # GRH fields without a GRH
        dirty[38:44] = bytes([junk]) * 6  # reserved
        assert a.answer_fast(q, bytes(dirty), lambda: 0.0) == first
    assert len(a._fast) == 1 and a.answered == 4
    others = [Address(lids[0], qpn=1, pkey_index=1), Address(lids[0], qpn=1, sl=3),
              Address(lids[0], qpn=1, grh=Grh(bytes(range(16))))]
    for other in others:
        (got, to), = a.answer_fast(q, other.pack(), lambda: 0.0)
        assert Address.unpack(to) == other.reply()
    assert len(a._fast) == 1 + len(others)


def test_way_back_keeps_exactly_what_reply_depends_on():
    base = Address(9, qpn=1, qkey=0x80010000, sl=2, pkey_index=3)
    grh = Grh(bytes(range(16)), 1, 64, 5, 0x12345)
    variants = [base, dataclasses.replace(base, lid=10), dataclasses.replace(base, sl=1),
                dataclasses.replace(base, pkey_index=0), dataclasses.replace(base, grh=grh),
                dataclasses.replace(base, grh=dataclasses.replace(grh, flow_label=1)),
                dataclasses.replace(base, qpn=0x42, qkey=7), dataclasses.replace(base, qpn=0x42, qkey=8)]
    keys = [way_back(v.pack()) for v in variants]
    assert len(set(keys)) == len(keys)  # each a different way back
    assert len({v.reply() for v in variants}) == len(variants)
    assert way_back(dataclasses.replace(base, qkey=5).pack()) == keys[0]  # QP1's Q_Key is fixed


def test_fast_answers_leave_everything_else_to_handle(subnet):
    """Not a PathRecord Get, an RMPP MAD, a source that is not a packed address, a STANDBY
    SA, no snapshot: None (the MAD goes to `handle`); a new snapshot forgets the answers."""
    lids = _ca_lids(subnet)
    a = SaAgent(SM_KEY)
    path = sa.request(Method.GET, PathRecord(slid=lids[0], dlid=lids[1]), component_mask=PathRecord.mask("slid", "dlid"),
                      transaction_id=3).encode()
    src = _received(lids[0])
    assert a.answer_fast(path, src, lambda: 0.0) is None  # nothing published yet
    a.publish(subnet)
    table = sa.request(Method.GET_TABLE, PathRecord(slid=lids[0], dlid=lids[1]),
                       component_mask=PathRecord.mask("slid", "dlid"), transaction_id=3).encode()
    node = sa.request(Method.GET, NodeRecord(lid=lids[0]), component_mask=NodeRecord.mask("lid"),
                      transaction_id=3).encode()
    rmpp = bytearray(path)
    rmpp[26] |= 1  # RMPP Active
    for raw, source in [(table, src), (node, src), (bytes(rmpp), src), (path, Address.unpack(src)), (path[:200], src)]:
        assert a.answer_fast(raw, source, lambda: 0.0) is None
    assert a.answer_fast(path, src, lambda: 0.0) is not None and len(a._fast) == 1
    a.master = False  # STANDBY: not answered here, not even from what was kept
    assert a._fast and a.answer_fast(path, src, lambda: 0.0) is None
    a.master = True
    assert a.answer_fast(path, src, lambda: 0.0) is not None
    a.publish(subnet)
    assert not a._fast


def test_answers_never_echo_the_requesters_sm_key(agent, subnet):
    """IBA C15-0.1.5, as OpenSM: a response's SM_Key is 0, a Get's and a GetTable's
    segments alike (a cached answer would hand one requester's key to the next)."""
    m = ask(agent, Method.GET, NodeRecord(lid=subnet.sm_lid), "lid", sm_key=SM_KEY)
    assert m.status == 0 and m.sm_key == 0
    q = sa.request(Method.GET_TABLE, NodeRecord(), transaction_id=78, sm_key=SM_KEY)
    out = agent.handle(Incoming(q.encode(), ME), 0.0)
    assert out and all(raw[24 + 12:24 + 20] == bytes(8) for raw, _a in out)


def _all_pairs(tid: int) -> bytes:
    return sa.request(Method.GET_TABLE, PathRecord(), component_mask=0, transaction_id=tid).encode()


def test_every_pairs_table_is_worked_out_in_chunks_with_other_requests_answered_between(agent):
    """Every pair's PathRecords: queued by `handle`, worked out a chunk at a time by `work`,
    segment 1 out (PayloadLength 0: not known yet) long before the table is whole, the
    rest as the requester's ACKs open the window; a NodeRecord Get answered between chunks;
    the table reassembled is the general path's."""
    from mad.rmpp import RmppReceiver, RmppState
    from smagent.sa import pathrecords, quickpath
    assert agent.handle(Incoming(_all_pairs(9), ME), 0.0) == []  # nothing yet: queued, not worked out here
    rx = RmppReceiver(class_header_size=sa.SA_HEADER_SIZE)
    chunks, first_at = 0, None
    while agent.working:
        out = agent.work(0.0, lambda: False)  # one chunk at a time
        chunks += 1
        for m, _a in out:
            first_at = chunks if first_at is None else first_at
            for ack in rx.on_mad(m.ljust(256, b"\0"), 0.0):
                for seg, _b in agent.handle(Incoming(ack, ME), 0.0):
                    rx.on_mad(seg.ljust(256, b"\0"), 0.0)
        if agent.working:
            node = sa.request(Method.GET, NodeRecord(lid=1), component_mask=NodeRecord.mask("lid"),
                              transaction_id=100 + chunks).encode()
            (reply,) = agent.handle(Incoming(node, ME), 0.0)  # answered at once, between chunks
            assert sa.SaMad.decode(reply[0]).status == 0
    ports = len(pathrecords.opensm_order(agent._recs))
    assert chunks > ports * ports // quickpath.CHUNK_COST  # a chunk is a bounded piece of work
    assert first_at == 1 and chunks > 2  # segment 1 with the first chunk, long before the end
    assert int.from_bytes(rx.first[32:36], "big") == 0  # its PayloadLength: not known then
    assert rx.state is RmppState.DONE
    want = pathrecords.query(agent._recs, PathRecord(), 0, ME.lid)
    assert len(want) == ports * ports
    assert sa.decode_table(rx.data, PathRecord, sa.SaMad.decode(rx.first).attribute_offset) == want
    assert table(agent, PathRecord()) == want  # asked again: the kept answer


def test_one_requester_may_queue_only_a_few_tables(agent):
    from smagent.sa import pending
    for tid in range(pending.PER_REQUESTER):
        assert agent.handle(Incoming(_all_pairs(tid), ME), 0.0) == []
    assert agent.handle(Incoming(_all_pairs(0), ME), 0.0) == []  # the same request again: answered once
    (busy, _a), = agent.handle(Incoming(_all_pairs(99), ME), 0.0)
    assert int.from_bytes(busy[4:6], "big") == sa.SaStatus.ERR_NO_RESOURCES.word
    assert agent.handle(Incoming(_all_pairs(99), Address.gsi(2)), 0.0) == []  # another host: queued
    assert len(agent.pending) == pending.PER_REQUESTER + 1
    other = Address.gsi(3)  # tables whose segment 1 nobody ACKed (saquery under umad2sim) count for nothing
    for tid in range(200, 200 + 2 * pending.PER_REQUESTER):
        agent.handle(Incoming(sa.request(Method.GET_TABLE, NodeRecord(), component_mask=0,
                                         transaction_id=tid).encode(), other), 0.0)
    assert agent.handle(Incoming(_all_pairs(300), other), 0.0) == [] and agent.pending.holds(3, 300)


def test_segment_1_never_acked_is_not_sent_again(agent):
    """A requester that reads segment 1 and never ACKs (saquery under umad2sim) gets nothing
    more: no resend, no ABORT, which ibsim would hand to the next process in its slot."""
    (seg1, _a), = agent.handle(Incoming(sa.request(Method.GET_TABLE, NodeRecord(), component_mask=0,
                                                   transaction_id=5).encode(), ME), 0.0)
    assert rmpp_flags(seg1) & 1 and not rmpp_flags(seg1) & 4  # the first of several
    sent = []
    while agent.deadline is not None:
        sent += agent.on_timeout(agent.deadline)
    assert sent == [] and agent.senders == {}


def rmpp_flags(mad: bytes) -> int:
    return mad[26] & 7
