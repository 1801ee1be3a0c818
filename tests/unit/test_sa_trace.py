"""SubnAdmGetTraceTable of TraceRecord (smagent.sa.trace) in process: a swept simulated
fabric's `Subnet`, GetTraceTable MADs handed to `SaAgent.handle`, the GetTableResp
reassembled by an RMPP receiver, and every hop list compared with a walk of the LFTs
written here (not `Subnet.route`, which the code under test uses)."""
import pytest

import smagent
from mad import sa
from mad.header import Method
from mad.rmpp import RmppReceiver, RmppState
from mad.sa import SaStatus
from mad.sa_records import PathRecord, TraceRecord
from smagent.model import netfile, topogen
from smagent.sa import SaAgent
from smagent.model.subnet import Subnet
from smagent.transport.address import Address, Incoming

ME = Address.gsi(1)
CA, SWITCH = 1, 2
PREFIX = 0xFE80000000000000


def _subnet(topology=None, **sweep) -> Subnet:
    kw = {} if topology is None else {"topology": netfile.dumps(topology)}
    with smagent.connect("sim", **kw) as fabric:
        r = fabric.sweep(**sweep)
    assert r.problems == []
    return Subnet.from_sweep(r, generation=3)


@pytest.fixture(scope="module")
def tree2():
    return _subnet(topogen.fat_tree_2(4))


@pytest.fixture(scope="module")
def tree3():
    return _subnet(topogen.fat_tree_3(4))


@pytest.fixture(scope="module")
def tree2_lmc():
    return _subnet(topogen.fat_tree_2(4), lmc=1)


def _agent(subnet, **kw) -> SaAgent:
    a = SaAgent(**kw)
    a.publish(subnet)
    return a


def _request(record, mask, *, method=Method.GET_TRACE_TABLE, attr=TraceRecord.ATTR_ID, tid=9) -> bytes:
    m = sa.request(method, record, transaction_id=tid)
    m.attribute_id, m.component_mask = attr, mask  # any mask: the agent is to check it
    return m.encode()


def trace(agent, record, *fields, mask=None):
    """(status, TraceRecords) of a GetTraceTable carrying PathRecord ``record``: the
    answer's segments ACKed until the transfer is whole (an error: one MAD)."""
    raw = _request(record, PathRecord.mask(*fields) if mask is None else mask)
    pending = [m for m, _a in agent.handle(Incoming(raw, ME), 0.0)]
    first = sa.SaMad.decode(pending[0].ljust(256, b"\0"))
    assert first.method == Method.GET_TABLE_RESP and first.attribute_id == TraceRecord.ATTR_ID
    if first.status:
        assert len(pending) == 1
        return first.status, []
    rx = RmppReceiver(class_header_size=sa.SA_HEADER_SIZE)
    while not rx.finished:
        assert pending, "the sender stopped before the end"
        mad, pending = pending[0].ljust(256, b"\0"), pending[1:]
        for ack in rx.on_mad(mad, 0.0):
            pending += [m for m, _a in agent.handle(Incoming(ack, ME), 0.0)]
    assert rx.state is RmppState.DONE
    return 0, sa.decode_table(rx.data, TraceRecord, sa.SaMad.decode(rx.first).attribute_offset)


def path_get_status(agent, record, *fields) -> int:
    out = agent.handle(Incoming(sa.request(Method.GET, record, component_mask=PathRecord.mask(*fields),
                                           transaction_id=1).encode(), ME), 0.0)
    return sa.SaMad.decode(out[0][0]).status


def walk(s: Subnet, slid: int, dlid: int) -> list[tuple[int, int, int]]:
    """(node GUID, entry port, exit port) of each node from SLID's port to DLID: the
    subnet's links and LFT bytes read directly (a CA sends by its own port; a switch by
    its LFT's entry for DLID, 0 when the DLID is its own)."""
    lid_owner = {}
    for n in s.nodes.values():
        for p in ([0] if n.is_switch else n.port_guids):
            pi = n.ports[p]
            for lid in range(pi.lid, pi.lid + (1 if n.is_switch else 1 << pi.lmc)):
                lid_owner[lid] = (n.guid, p)
    guid, port = lid_owner[slid]
    dest = lid_owner[dlid]
    out = []
    entry = port
    while True:
        node = s.nodes[guid]
        if guid == dest[0] and (node.is_switch or entry == dest[1]):
            out.append((guid, entry, dest[1]))
            return out
        exit_ = s.lft[guid][dlid] if node.is_switch else entry
        assert exit_ not in (0, 255), f"LFT of {guid:#x} drops LID {dlid}"
        out.append((guid, entry, exit_))
        guid, entry = s.links[(guid, exit_)]
        assert len(out) < 16, "a loop"


def _cas(s: Subnet) -> list[tuple[int, int, int]]:
    """(node GUID, port, base LID) of every CA port."""
    return sorted((n.guid, p, n.ports[p].lid) for n in s.nodes.values() if not n.is_switch for p in n.port_guids)


def _check(s: Subnet, got: list[TraceRecord], expect: list[tuple[int, int, int]]) -> None:
    assert [(r.node_id, r.entry_port, r.exit_port) for r in got] == expect
    for r in got:
        n = s.nodes[r.node_id]
        assert r.node_type == (SWITCH if n.is_switch else CA)
        assert (r.gid_prefix, r.id_generation, r.chassis_id) == (PREFIX, 3, n.node_info.system_image_guid)
        if n.is_switch:
            assert r.entry_port_id == r.exit_port_id == n.node_info.port_guid
        else:
            assert r.entry_port_id == n.port_guids[r.entry_port] and r.exit_port_id == n.port_guids[r.exit_port]


@pytest.mark.parametrize("which", ["tree2", "tree3"])
def test_every_ca_pair_traces_the_lft_walk(which, request):
    """Every ordered pair of CA ports, by LIDs and by GIDs: one record per node crossed,
    the source CA first (it enters and leaves by its own port), the destination last
    (likewise), the switches between with their LFT's ports, as the walk finds them."""
    s = request.getfixturevalue(which)
    agent = _agent(s)
    cas = _cas(s)
    lengths = set()
    for sg, sp, slid in cas:
        for dg, dp, dlid in cas:
            status, got = trace(agent, PathRecord(slid=slid, dlid=dlid), "slid", "dlid")
            assert status == 0
            expect = walk(s, slid, dlid)
            _check(s, got, expect)
            assert got[0].node_type == got[-1].node_type == CA
            assert (got[0].node_id, got[0].entry_port, got[0].exit_port) == (sg, sp, sp)
            assert (got[-1].node_id, got[-1].entry_port, got[-1].exit_port) == (dg, dp, dp)
            lengths.add(len(got))
    by_gid = PathRecord(sgid=PREFIX << 64 | s.nodes[cas[0][0]].port_guids[cas[0][1]],
                        dgid=PREFIX << 64 | s.nodes[cas[-1][0]].port_guids[cas[-1][1]])
    status, got = trace(agent, by_gid, "sgid", "dgid")
    assert status == 0
    _check(s, got, walk(s, cas[0][2], cas[-1][2]))
    # a CA to itself: one record; a leaf's neighbours: 3; across the tree: 5 (2-level), 7 (3-level)
    assert lengths == ({1, 3, 5} if which == "tree2" else {1, 3, 5, 7})


def test_switch_ends(tree3):
    """A switch as destination (its LID: the packet ends at port 0) and as source (it
    starts at port 0)."""
    s = tree3
    agent = _agent(s)
    switches = sorted((n for n in s.nodes.values() if n.is_switch), key=lambda n: n.guid)
    cas = _cas(s)
    for sw in switches:
        slid = sw.ports[0].lid
        status, got = trace(agent, PathRecord(slid=cas[0][2], dlid=slid), "slid", "dlid")
        assert status == 0
        _check(s, got, walk(s, cas[0][2], slid))
        assert (got[-1].node_id, got[-1].exit_port, got[-1].node_type) == (sw.guid, 0, SWITCH)
        status, got = trace(agent, PathRecord(slid=slid, dlid=cas[-1][2]), "slid", "dlid")
        assert status == 0
        _check(s, got, walk(s, slid, cas[-1][2]))
        assert (got[0].node_id, got[0].entry_port) == (sw.guid, 0)


def test_lmc_traces_follow_each_lid(tree2_lmc):
    """LMC 1: every (source LID, destination LID) of two CA ports traces the route its
    DLID takes; the offsets do not all share one route. By GIDs the query names one path
    per offset: the trace follows the first, the one the PathRecord Get of the same query
    answers (IBA 1.2: a Get is NumbPath 1)."""
    s = tree2_lmc
    agent = _agent(s)
    cas = _cas(s)
    routes = set()
    for _sg, _sp, sbase in cas:
        for _dg, _dp, dbase in cas:
            for slid in (sbase, sbase + 1):
                for dlid in (dbase, dbase + 1):
                    status, got = trace(agent, PathRecord(slid=slid, dlid=dlid), "slid", "dlid")
                    assert status == 0
                    expect = walk(s, slid, dlid)
                    _check(s, got, expect)
                    routes.add((sbase, dbase, tuple(expect)))
    assert len(routes) > len(cas) ** 2  # some pair's two DLIDs cross different switches
    a, b = (s.nodes[g].port_guids[p] for g, p, _l in (cas[0], cas[-1]))
    q = PathRecord(sgid=PREFIX << 64 | a, dgid=PREFIX << 64 | b)
    assert trace(agent, q, "sgid", "dgid")[0] == path_get_status(agent, q, "sgid", "dgid") == 0
    _check(s, trace(agent, q, "sgid", "dgid")[1], walk(s, cas[0][2], cas[-1][2]))


def test_statuses(tree2):
    """The statuses a PathRecord Get of the same query gets (no path, a GID of no port: no record,
    a P_Key not shared, a selector nothing meets); without source or destination
    ERR_REQ_INSUFFICIENT_COMPONENTS; a mask past the PathRecord's components
    ERR_REQ_INVALID; GetTraceTable of another attribute, or from a STANDBY SA, 0x000C."""
    s = tree2
    agent = _agent(s)
    cas = _cas(s)
    a, b = cas[0][2], cas[-1][2]
    same = [
        (PathRecord(slid=a, dlid=0xBFF0), ("slid", "dlid"), SaStatus.ERR_NO_RECORDS),
        (PathRecord(slid=a, dgid=PREFIX << 64 | 0xDEAD), ("slid", "dgid"), SaStatus.ERR_NO_RECORDS),  # as OpenSM
        (PathRecord(slid=a, dlid=b, p_key=0x8123), ("slid", "dlid", "p_key"), SaStatus.ERR_NO_RECORDS),
        (PathRecord(slid=a, dlid=b, mtu_selector=0, mtu=5), ("slid", "dlid", "mtu_selector", "mtu"),
         SaStatus.ERR_NO_RECORDS),
    ]
    for q, fields, want in same:
        assert trace(agent, q, *fields)[0] == path_get_status(agent, q, *fields) == want.word, fields
    for fields in (("slid",), ("dlid",), ("sgid",), ()):
        assert trace(agent, PathRecord(slid=a, dlid=b), *fields)[0] == \
            SaStatus.ERR_REQ_INSUFFICIENT_COMPONENTS.word
    assert trace(agent, PathRecord(slid=a, dlid=b), mask=PathRecord.mask("slid", "dlid") | 1 << 40)[0] == \
        SaStatus.ERR_REQ_INVALID.word
    for attr in (PathRecord.ATTR_ID, 0x0011):
        out = agent.handle(Incoming(_request(PathRecord(slid=a, dlid=b), PathRecord.mask("slid", "dlid"),
                                             attr=attr), ME), 0.0)
        assert sa.SaMad.decode(out[0][0]).status == 0x000C
    standby = _agent(s, master=False)
    out = standby.handle(Incoming(_request(PathRecord(slid=a, dlid=b), PathRecord.mask("slid", "dlid")), ME), 0.0)
    assert sa.SaMad.decode(out[0][0]).status == 0x000C


def test_sa_trace_command_refuses_bad_input(cli):
    """Bad endpoints exit 2 naming the problem, before any MAD; the in-process simulator
    has no SA to ask."""
    for args, why in ((["0", "5"], "LID"), (["1", "0xC000"], "out of range"), (["x", "1"], "not a LID"),
                      (["0x12345", "1"], "out of range")):
        r = cli("--transport", "umad", "sa", "trace", *args)
        assert r.exit_code == 2 and why in r.output, (args, r.output)
    r = cli("sa", "trace", "1", "2")
    assert r.exit_code == 2 and "--transport umad" in r.output
