"""ServiceRecords (smagent.sa.services through the SA agent, in-process): Set registers
(replacing one with the same ServiceID, ServiceGID and ServiceP_Key), the lease expires
it, Get/GetTable find by components, Delete removes."""

from mad import sa
from mad.header import Method
from mad.sa_records import ServiceRecord
from smagent.transport.address import Address, Incoming
from sa_fixtures import agent, subnet  # noqa: F401 (the fixtures)

KEY = ("service_id", "service_gid", "service_p_key")


def gid(agent, i=0):
    s = agent.subnet
    ca = sorted((n for n in s.nodes.values() if not n.is_switch), key=lambda n: n.guid)[i]
    return agent._recs.gid(ca, ca.lid_ports()[0])


def ask(agent, method, record, *fields, now=0.0):
    q = sa.request(method, record, component_mask=ServiceRecord.mask(*fields), transaction_id=4)
    ((raw, _to),) = agent.handle(Incoming(q.encode(), Address.gsi(1)), now)
    return sa.SaMad.decode(raw.ljust(256, b"\0"))


def test_register_find_replace_and_delete(agent):
    g = gid(agent)
    rec = ServiceRecord(service_id=0x10000CE100415453, service_gid=g, service_p_key=0xFFFF, service_name="srp",
                        service_data8=[7] + [0] * 15)
    m = ask(agent, Method.SET, rec, *KEY, "service_name", "service_data8")
    assert m.method == Method.GET_RESP and m.status == 0
    got = m.record(ServiceRecord)
    assert (got.service_name, got.service_lease, got.service_data8[0]) == ("srp", 0xFFFFFFFF, 7)
    found = ask(agent, Method.GET, ServiceRecord(service_name="srp"), "service_name").record(ServiceRecord)
    assert found.service_gid == g
    # the same three keys: replaced, not added
    ask(agent, Method.SET, rec.replace(service_name="srp2"), *KEY, "service_name")
    assert [r.service_name for r in agent.services.find(ServiceRecord(), 0, 0.0)] == ["srp2"]
    other = rec.replace(service_id=5, service_gid=gid(agent, 1))
    ask(agent, Method.SET, other, *KEY)
    assert ask(agent, Method.GET, ServiceRecord(service_id=5), "service_id").record(ServiceRecord).service_id == 5
    d = ask(agent, Method.DELETE, rec, *KEY)
    assert d.method == Method.DELETE_RESP and d.status == 0
    assert [r.service_id for r in agent.services.find(ServiceRecord(), 0, 0.0)] == [5]
    assert ask(agent, Method.DELETE, rec, *KEY).sa_status is sa.SaStatus.ERR_NO_RECORDS


def test_lease_expires(agent):
    rec = ServiceRecord(service_id=1, service_gid=gid(agent), service_p_key=0xFFFF, service_lease=30)
    assert ask(agent, Method.SET, rec, *KEY, "service_lease", now=100.0).status == 0
    assert ask(agent, Method.GET, ServiceRecord(service_id=1), "service_id", now=129.0).status == 0
    gone = ask(agent, Method.GET, ServiceRecord(service_id=1), "service_id", now=130.0)
    assert gone.sa_status is sa.SaStatus.ERR_NO_RECORDS


def test_bad_registrations_say_why(agent):
    rec = ServiceRecord(service_id=1, service_gid=gid(agent), service_p_key=0xFFFF)
    short = ask(agent, Method.SET, rec, "service_id", "service_gid")
    assert short.sa_status is sa.SaStatus.ERR_REQ_INSUFFICIENT_COMPONENTS
    stranger = ask(agent, Method.SET, rec.replace(service_gid=0xFE80 << 112 | 0x99), *KEY)
    assert stranger.sa_status is sa.SaStatus.ERR_REQ_INVALID_GID
