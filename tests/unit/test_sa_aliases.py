"""Alias GUIDs (smagent.sa.aliases through the SA agent, in process), as OpenSM 3.3.23
answers GUIDInfoRecord Set and Delete: the port by LID and block (both needed), index 0
of block 0 read only, a block past GUIDCap no record, a 0 asks the SM for a GUID, a GUID
of another port not stored; afterwards GUIDInfoRecords show the aliases and PathRecords
answer by the alias GID (carrying it), until the alias is deleted or its port leaves."""
import dataclasses

from mad import sa
from mad.header import Method
from mad.sa_records import GUIDInfoRecord, PathRecord
from smagent.sa.aliases import OPENIB_OUI
from smagent.transport.address import Address, Incoming
from sa_fixtures import agent, subnet  # noqa: F401 (the fixtures)
from sa_fixtures import table

ME = Address.gsi(1)


def ask(agent, method, record, *fields, src=ME):
    q = sa.request(method, record, component_mask=type(record).mask(*fields) if fields else 0, transaction_id=3)
    ((raw, _to),) = agent.handle(Incoming(q.encode(), src), 0.0)
    return sa.SaMad.decode(raw)


def _cas(agent):
    s = agent.subnet
    return [(n, p) for n in sorted(s.nodes.values(), key=lambda n: n.guid) if not n.is_switch for p in n.lid_ports()]


def _set(agent, lid, guids, *indexes, block=0, method=Method.SET):
    rec = GUIDInfoRecord(lid=lid, block_num=block, guids=(list(guids) + [0] * 8)[:8])
    return ask(agent, method, rec, "lid", "block_num", *(f"guids[{i}]" for i in indexes))


def test_set_stores_aliases_and_get_shows_them(agent):
    (node, port), (other, oport) = _cas(agent)[1:3]
    lid, own = agent.subnet.base_lid(node, port), node.port_guid(port)
    alias = 0x0002C90300ABCD01
    m = _set(agent, lid, [0, alias], 1)
    assert m.status == 0 and m.record(GUIDInfoRecord).guids == [own, alias, 0, 0, 0, 0, 0, 0]
    (got,) = table(agent, GUIDInfoRecord(lid=lid, block_num=0), "lid", "block_num")
    assert got.guids[:2] == [own, alias]
    # a 0 asks the SM for one (00:14:05 << 40 | a counter); asked again, the same
    assigned = _set(agent, lid, [], 2).record(GUIDInfoRecord).guids[2]
    assert assigned >> 40 == OPENIB_OUI and _set(agent, lid, [], 2).record(GUIDInfoRecord).guids[2] == assigned
    # another port's GUID, or this port's alias at another index: not stored
    olid = agent.subnet.base_lid(other, oport)
    assert _set(agent, olid, [0, alias], 1).record(GUIDInfoRecord).guids[1] == 0
    assert _set(agent, lid, [0, 0, 0, alias], 3).record(GUIDInfoRecord).guids[3] == 0
    assert _set(agent, olid, [0, node.port_guid(port)], 1).record(GUIDInfoRecord).guids[1] == 0
    # Delete clears what it names; the SM's GUID comes back to its index when asked again
    m = _set(agent, lid, [], 1, 2, method=Method.DELETE)
    assert m.status == 0 and m.record(GUIDInfoRecord).guids == [own] + [0] * 7
    assert _set(agent, lid, [], 2).record(GUIDInfoRecord).guids[2] == assigned


def test_set_and_delete_statuses_as_opensm(agent):
    (node, port), = _cas(agent)[1:2]
    lid, cap = agent.subnet.base_lid(node, port), node.ports[port].guid_cap
    rec = GUIDInfoRecord(lid=lid, guids=[0, 1, 0, 0, 0, 0, 0, 0])
    assert ask(agent, Method.SET, rec, "lid", "guids[1]").sa_status is sa.SaStatus.ERR_REQ_INSUFFICIENT_COMPONENTS
    assert _set(agent, lid, [5], 0).sa_status is sa.SaStatus.ERR_REQ_INVALID  # index 0: the port's own
    assert _set(agent, lid, [], 0, method=Method.DELETE).status == 0  # nothing set yet: the request back
    _set(agent, lid, [0, 7], 1)
    assert _set(agent, lid, [], 0, method=Method.DELETE).sa_status is sa.SaStatus.ERR_REQ_INVALID
    assert _set(agent, lid, [], 1, block=(cap + 7) // 8).sa_status is sa.SaStatus.ERR_NO_RECORDS
    assert _set(agent, 0xBFFF, [], 1).sa_status is sa.SaStatus.ERR_NO_RECORDS  # no port has that LID
    assert ask(agent, Method.GET_TABLE, rec, "lid").status == 0


def test_path_records_answer_by_the_alias_gid(agent):
    (a, pa), (b, pb) = _cas(agent)[1], _cas(agent)[-1]
    recs = agent._recs
    alias = 0x0002C90300ABCD02
    alias_gid = recs.gid(b, pb) >> 64 << 64 | alias
    src = Address.gsi(agent.subnet.base_lid(a, pa))
    q = PathRecord(sgid=recs.gid(a, pa), dgid=alias_gid)
    assert ask(agent, Method.GET, q, "sgid", "dgid", src=src).sa_status is sa.SaStatus.ERR_NO_RECORDS
    assert _set(agent, agent.subnet.base_lid(b, pb), [0, alias], 1).status == 0
    by_alias = ask(agent, Method.GET, q, "sgid", "dgid", src=src).record(PathRecord)
    plain = ask(agent, Method.GET, PathRecord(sgid=recs.gid(a, pa), dgid=recs.gid(b, pb)), "sgid", "dgid",
                src=src).record(PathRecord)
    assert by_alias == dataclasses.replace(plain, dgid=alias_gid)
    assert [r.dgid for r in table(agent, q, "sgid", "dgid", src=src)] == [alias_gid]
    # deleted: no port has that GID again (the answer kept before is not served)
    _set(agent, agent.subnet.base_lid(b, pb), [], 1, method=Method.DELETE)
    assert ask(agent, Method.GET, q, "sgid", "dgid", src=src).sa_status is sa.SaStatus.ERR_NO_RECORDS


def test_a_port_that_leaves_loses_its_aliases(agent, subnet):
    (b, pb) = _cas(agent)[-1]
    alias = 0x0002C90300ABCD03
    _set(agent, agent.subnet.base_lid(b, pb), [0, alias], 1)
    assert agent.aliases.port_of(alias) == b.port_guid(pb)
    nodes = {g: n for g, n in subnet.nodes.items() if g != b.guid}
    agent.publish(subnet.evolve(topology=dataclasses.replace(subnet.topology, nodes=nodes)))
    assert agent.aliases.port_of(alias) is None
    agent.publish(subnet)


def test_an_alias_gid_joins_groups_as_its_port(agent):
    from mad.sa_records import MCMemberRecord
    (b, pb) = _cas(agent)[-1]
    lid, alias = agent.subnet.base_lid(b, pb), 0x0002C90300ABCD04
    _set(agent, lid, [0, alias], 1)
    alias_gid = agent._recs.gid(b, pb) >> 64 << 64 | alias
    mgid = 0xFF15A01BFFFF0000000000000000BEEF
    join = MCMemberRecord(mgid=mgid, port_gid=alias_gid, q_key=0x0B1B, p_key=0xFFFF, join_state=1)
    m = ask(agent, Method.SET, join, "mgid", "port_gid", "q_key", "p_key", "sl", "flow_label", "tclass", "join_state")
    assert m.status == 0 and m.record(MCMemberRecord).port_gid == alias_gid
    (group,) = agent.groups.spec_groups(lambda guid: True, lambda guid: agent.aliases.port_of(guid) or guid)
    assert group.members == (b.port_guid(pb),)  # the tree reaches the port the alias names
    # a member alias cannot be deleted (OpenSM: ERR_REQ_DENIED); after the leave it can
    assert _set(agent, lid, [], 1, method=Method.DELETE).sa_status is sa.SaStatus.ERR_REQ_DENIED
    ask(agent, Method.DELETE, join, "mgid", "port_gid", "join_state")
    assert _set(agent, lid, [], 1, method=Method.DELETE).status == 0
