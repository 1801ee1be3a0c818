"""ServiceRecords (smagent.sa.services through the SA agent, in-process), as OpenSM 3.3
answers them: Set registers (replacing one with the same ServiceID, ServiceGID and
ServiceP_Key), the lease expires it, Get/GetTable find by components, newest first,
Delete removes the registration of the request's RID; ServiceKey only with the SM_Key."""

from mad import sa
from mad.header import Method
from mad.sa_records import ServiceRecord
from smagent.sa import SaAgent
from smagent.transport.address import Address, Incoming
from sa_fixtures import agent, subnet, table  # noqa: F401 (the fixtures)

KEY = ("service_id", "service_gid", "service_p_key")


def gid(agent, i=0):
    s = agent.subnet
    ca = sorted((n for n in s.nodes.values() if not n.is_switch), key=lambda n: n.guid)[i]
    return agent._recs.gid(ca, ca.lid_ports()[0])


def ask(agent, method, record, *fields, now=0.0, sm_key=0):
    q = sa.request(method, record, component_mask=ServiceRecord.mask(*fields), transaction_id=4, sm_key=sm_key)
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
    short = ask(agent, Method.SET, rec, "service_id", "service_p_key")  # no ServiceGID
    assert short.sa_status is sa.SaStatus.ERR_REQ_INVALID
    # with its ServiceP_Key named, the ServiceGID must be a port of the subnet holding it
    stranger = rec.replace(service_gid=0xFE80 << 112 | 0x99)
    assert ask(agent, Method.SET, stranger, *KEY).sa_status is sa.SaStatus.ERR_REQ_INVALID
    # a partition the requester is no member of (without partitions: all but the default)
    assert ask(agent, Method.SET, rec.replace(service_p_key=0x8001), *KEY).sa_status is sa.SaStatus.ERR_REQ_INVALID
    assert not agent.services.registered
    # without ServiceP_Key nothing is checked: a GID of no port is registered (OpenSM does),
    # and a P_Key the requester does not hold, kept and then shown only to its members: none
    assert ask(agent, Method.SET, stranger, "service_id", "service_gid").status == 0
    hidden = rec.replace(service_id=2, service_p_key=0x8001)
    assert ask(agent, Method.SET, hidden, "service_id", "service_gid").status == 0
    assert [r.service_id for r in table(agent, ServiceRecord())] == [1]
    assert len(agent.services.registered) == 2


def test_without_a_p_key_answered_with_the_default_and_deleted_by_what_was_sent(agent):
    """OpenSM's answer to a Set without ServiceP_Key shows 0xFFFF; the registration keeps
    the P_Key the record carried (0 here), shown to all, and a Delete names it by that RID,
    whatever its mask: another name or a mask without the P_Key finds it all the same."""
    rec = ServiceRecord(service_id=0x1000, service_gid=gid(agent), service_name="a")
    got = ask(agent, Method.SET, rec, "service_id", "service_gid", "service_name").record(ServiceRecord)
    assert (got.service_p_key, got.service_lease) == (0xFFFF, 0xFFFFFFFF)
    assert [r.service_p_key for r in agent.services.find(ServiceRecord(), 0, 0.0)] == [0]
    wrong_pkey = ask(agent, Method.DELETE, rec.replace(service_p_key=0xFFFF), *KEY)
    assert wrong_pkey.sa_status is sa.SaStatus.ERR_NO_RECORDS
    d = ask(agent, Method.DELETE, rec.replace(service_name="other"), "service_id", "service_gid", "service_name")
    assert d.method == Method.DELETE_RESP and d.record(ServiceRecord) == rec.replace(service_lease=0xFFFFFFFF)
    assert not agent.services.registered


def test_tables_newest_first_lease_selects_nothing_and_keys_need_the_sm_key(subnet):
    agent = SaAgent(sm_key=0x5EC2E7)
    agent.publish(subnet)
    for i, name in enumerate(("a", "b", "c")):
        rec = ServiceRecord(service_id=i, service_gid=gid(agent, i), service_p_key=0xFFFF, service_name=name,
                            service_key=0xABC0 + i, service_lease=60)
        assert ask(agent, Method.SET, rec, *KEY, "service_name", "service_key", "service_lease").record(
            ServiceRecord).service_key == 0
    again = ServiceRecord(service_id=0, service_gid=gid(agent, 0), service_p_key=0xFFFF, service_name="a2")
    ask(agent, Method.SET, again, *KEY, "service_name")  # replaced where it stood
    assert [r.service_name for r in table(agent, ServiceRecord())] == ["c", "b", "a2"]
    assert {r.service_key for r in table(agent, ServiceRecord())} == {0}
    assert [r.service_key for r in table(agent, ServiceRecord(), sm_key=0x5EC2E7)] == [0xABC2, 0xABC1, 0]
    # ServiceLease in the mask selects nothing
    assert len(table(agent, ServiceRecord(service_lease=7), "service_lease")) == 3
    trusted = ask(agent, Method.GET, ServiceRecord(service_name="b"), "service_name", sm_key=0x5EC2E7)
    assert trusted.record(ServiceRecord).service_key == 0xABC1
    assert ask(agent, Method.GET, ServiceRecord(service_name="b"), "service_name").record(
        ServiceRecord).service_key == 0


def test_cli_refuses_a_bad_service_before_opening_a_port(cli):
    """No port is opened (none exists here: the refusal comes first), exit 2 names the fault."""
    for args, says in ((["x", "zz"], "ServiceID 'zz' is not a number"),
                       (["x", "1", "--p-key", "0x10000"], "--p-key 0x10000 does not fit in 16 bits"),
                       (["n" * 65, "1"], "longer than 64 bytes")):
        for verb in ("service-register", "service-delete"):
            r = cli("--transport", "umad", "sa", verb, *args)
            assert r.exit_code == 2 and says in r.output, (verb, args, r.output)
