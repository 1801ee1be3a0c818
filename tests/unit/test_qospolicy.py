"""QoS policy (`smagent.config.qospolicy`, `smagent.planning.qoslayers`): OpenSM's qos-ulps and qos_* lines
parsed with line numbers; the SL of paths (OpenSM's first-match order) in the sweep's path
SLs and the SA's PathRecords; the per-port-class SL2VL/VLArb tables written and read back;
with dfsssp on a torus, a policy SL that brings back a credit loop refused naming the pair."""
import json

import pytest

from mad import sa
from mad.header import Method
from mad.sa_records import PathRecord
from smagent.planning import pathsl
from smagent.config import qospolicy
from smagent import sweep, verify
from smagent.model import topogen
from smagent.errors import EXIT_BAD_INPUT
from smagent.sa import SaAgent
from smagent.model.subnet import Subnet
from smagent.transport.address import Address, Incoming
from smagent.transport.sim import SimTransport

POLICY = """# a policy with every kind of rule
qos_swe_sl2vl 0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,3
qos_vlarb_low 0:8,1:8,2:8,3:8
qos_ca_high_limit 4
qos-ulps
    default                                  : 1
    any, service-id 0x10000-0x1FFFF, 0x20000 : 2
    any, target-port-guid {guid}             : 3
    ipoib                                    : 4
    sdp, port-num 10-20                      : 5
    any, pkey 0x0ABC                         : 6
end-qos-ulps
"""


def test_rules_match_in_file_order_as_opensm():
    p = qospolicy.parse(POLICY.format(guid="0x100001-0x100003"), "q")
    assert p.sl(0x100002) == 3  # target rule
    assert p.sl(0x100002, service_id=0x10005) == 2  # the service-id rule comes first
    assert p.sl(0x999, service_id=0x1000F) == 2 and p.sl(0x999, service_id=0x30000) == 1
    assert p.sl(0x999, pkey=0xFFFF) == 4 and p.sl(0x999, pkey=0x8ABC) == 6  # membership bit ignored
    assert p.sl(0x999) == 1  # default: a query naming neither
    assert p.port_class("swe").sl2vl == (0, 1, 2, 3) * 4 and p.port_class("swe").vlarb_low[:2] == ((0, 8), (1, 8))
    assert p.port_class("ca").high_limit == 4 and p.port_class("ca").sl2vl is None
    assert qospolicy.parse("qos-ulps\n default : 0 # the shortest\nend-qos-ulps\n").default_sl == 0


@pytest.mark.parametrize("text,line,needle", [
    ("qos-ulps\n default : 0\n any, sauce-port-guid 0x1 : 2\nend-qos-ulps\n", 3, "'any' needs service-id"),
    ("qos-ulps\n default : 0\n rds, : 2\nend-qos-ulps\n", 3, "'rds,' without a criterion"),
    ("qos-ulps\n default : 16\nend-qos-ulps\n", 2, "SL '16' is not 0..15"),
    ("qos-ulps\n default : 1\n default : 2\nend-qos-ulps\n", 3, "a second 'default' rule (first on line 2)"),
    ("qos-ulps\n any, pkey 0x5-0x2 : 1\nend-qos-ulps\n", 2, "range '0x5-0x2' is empty"),
    ("qos-ulps\n rdma : 1\nend-qos-ulps\n", 2, "unknown ULP 'rdma'"),
    ("qos-ulps\n default : 1\n", 1, "not closed by 'end-qos-ulps'"),
    ("qos-ulps\n default : 0\nend-qos-ulps\nport-groups\nend-port-groups\n", 5,
     "port-groups (line 4) holds nothing"),
    ("qos_swe_sl2vl 0,1\n", 1, "needs 16 VLs"),
    ("qos_ca_vlarb_low 0:8,15:1\n", 1, "VL 0..14"),
    ("qos_sl2vl 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,7\nqos_sl2vl 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,7\n", 2,
     "given twice (first on line 1)"),
    ("qos_rtr_sl2vl 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,7\n", 1, "router ports"),
    ("qos_max_vls 16\n", 1, "16 is not 1..15"),
    ("qos TRUE\n", 1, "unknown option 'qos'"),
])
def test_errors_name_their_line(text, line, needle):
    with pytest.raises(qospolicy.QosPolicyError) as e:
        qospolicy.parse(text, "q")
    assert e.value.exit_code == EXIT_BAD_INPUT
    assert any(p.startswith(f"line {line}:") and needle in p for p in e.value.problems), e.value.problems


@pytest.mark.parametrize("command", [["sweep"], ["sweep", "--dry-run"], ["plan", "{desired}"],
                                     ["apply", "{desired}"], ["run"], ["verify"]])
def test_every_qos_policy_option_refuses_a_bad_file_with_its_line(cli, tmp_path, command):
    f = tmp_path / "q.conf"
    f.write_text("qos-ulps\n default : 0\n any, service-id 0xzz : 1\nend-qos-ulps\n")
    d = tmp_path / "d.yaml"
    d.write_text("lmc: 0\n")
    args = [a.replace("{desired}", str(d)) for a in command]
    rec = tmp_path / "rec.pcap"
    more = [] if command[0] == "verify" else ["--state-dir", tmp_path / "s"]
    r = cli("--transport", "sim", "--record", rec, *args, "--qos-policy", f, *more)
    assert r.exit_code == EXIT_BAD_INPUT, r.output
    assert "line 3: service-id '0xzz' is not a number" in r.output and "Traceback" not in r.output
    assert not rec.exists() or rec.stat().st_size <= 24, "nothing sent: the capture holds its header only"


def test_a_desired_state_names_the_policy(tmp_path):
    from smagent.sweep import desired
    f = tmp_path / "q.conf"
    f.write_text("qos-ulps\n default : 3\nend-qos-ulps\n")
    assert desired.parse({"qos_policy": str(f)}).qos_policy.default_sl == 3
    f.write_text("qos-ulps\n default : x\nend-qos-ulps\n")
    with pytest.raises(desired.DesiredStateError, match=r"qos_policy .*line 2: SL 'x' is not 0..15"):
        desired.parse({"qos_policy": str(f)})


# ------------------------------------------------------------ fat tree: SLs and tables
def _ask(agent, record, *fields):
    q = sa.request(Method.GET, record, component_mask=type(record).mask(*fields), transaction_id=1)
    out = agent.handle(Incoming(q.encode(), Address.gsi(1)), 0.0)
    return sa.SaMad.decode(out[0][0]).record(PathRecord)


@pytest.fixture(scope="module")
def tree():
    """A 2-level fat tree swept with a policy: target H3 on SL 3, everything else by default on SL 1."""
    t = SimTransport(topogen.fat_tree_2(4))
    topo = sweep.sweep(t, sweep.SweepOptions(dry_run=True)).topology
    hosts = {n.description: n for n in topo.cas()}
    policy = qospolicy.parse(POLICY.format(guid=hex(hosts["H3"].port_guids[1])), "q")
    r = sweep.sweep(t, sweep.SweepOptions(qos_policy=policy))
    assert r.problems == [], r.problems
    return t, r, policy, {n.description: n for n in r.topology.cas()}


def test_the_policy_sls_are_the_path_sls_the_sweep_keeps(tree):
    _t, r, _policy, hosts = tree
    h3 = hosts["H3"].lid(1)
    assert r.path_sls is not None
    for row in r.path_sls.values():
        assert row[h3] == 3
        assert {row[h.lid(1)] for name, h in hosts.items() if name != "H3"} == {1}


def test_the_sa_answers_with_the_policy_sls(tree):
    _t, r, policy, hosts = tree
    agent = SaAgent(0)
    agent.publish(Subnet.from_sweep(r, qos_policy=policy))
    s, d3, d0 = hosts["H1"].lid(1), hosts["H3"].lid(1), hosts["H0"].lid(1)
    assert _ask(agent, PathRecord(slid=s, dlid=d3), "slid", "dlid").sl == 3
    assert _ask(agent, PathRecord(slid=s, dlid=d0), "slid", "dlid").sl == 1
    sdp = _ask(agent, PathRecord(slid=s, dlid=d3, service_id=0x1000F), "slid", "dlid", "service_id")
    assert (sdp.sl, sdp.service_id) == (2, 0)  # a service-id rule before the target rule; not echoed (OpenSM)
    assert _ask(agent, PathRecord(slid=s, dlid=d0, p_key=0xFFFF), "slid", "dlid", "p_key").sl == 4  # ipoib
    assert _ask(agent, PathRecord(slid=s, dlid=d0, service_id=0x30000), "slid", "dlid", "service_id").sl == 1


def test_the_port_class_tables_are_written_and_read_back(tree):
    t, _r, _policy, _hosts = tree
    for n in t.sim.nodes.values():
        for p in range(1, n.num_ports + 1):
            if n.peers[p] is None:
                continue
            if n.is_switch:  # qos_swe_sl2vl on every (input, output) pair, masked into VL0-7
                assert {tuple(n.sl2vl[(i, p)]) for i in range(n.num_ports + 1)} == {(0, 1, 2, 3) * 4}, n.name
            else:
                assert n.sl2vl[(0, p)] == [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7]  # OpenSM's, masked
                assert n.pi[p].vl_high_limit == 4  # qos_ca_high_limit
            assert n.vlarb[(p, "low")][:5] == [(0, 8), (1, 8), (2, 8), (3, 8), (0, 0)]  # qos_vlarb_low: all classes
    switches = {n.guid for n in _r.topology.switches()}
    snap = verify.collect(t, mcast=False)  # the same, read back through SMPs
    read = {tuple(tbl) for (g, _i, _o), tbl in snap.sl2vl.items() if g in switches}
    assert read == {(0, 1, 2, 3) * 4}, read


def test_no_qos_with_policy_tables_is_refused_before_any_set(cli, tmp_path, monkeypatch):
    from smagent import api
    t = SimTransport(topogen.fat_tree_2(4))
    monkeypatch.setattr("smagent.cli.Context.session", lambda self: api.Session(t))
    f = tmp_path / "q.conf"
    f.write_text("qos_sl2vl 0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0\n")
    r = cli("sweep", "--no-qos", "--qos-policy", f)
    assert r.exit_code == EXIT_BAD_INPUT and "drop --no-qos" in r.stderr, r.output
    assert not any(k.startswith("SubnSet(") for k in t.stats.by_kind)


# ------------------------------------------------------------ torus: the layers hold
@pytest.fixture(scope="module")
def torus():
    t = SimTransport(topogen.torus_2d(5, 3, 2))
    r = sweep.sweep(t, sweep.SweepOptions(routing="dfsssp"))
    hosts = sorted(r.topology.cas(), key=lambda n: n.guid)
    return t, hosts


def test_a_policy_that_keeps_the_layers_is_accepted_and_verify_is_clean(torus, tmp_path):
    t, hosts = torus
    g = hosts[5].port_guids[1]
    policy = qospolicy.parse(f"qos-ulps\n default : 5\n any, target-port-guid {g:#x} : 4\nend-qos-ulps\n", "q")
    r = sweep.sweep(t, sweep.SweepOptions(routing="dfsssp", qos_policy=policy, state_dir=str(tmp_path)))
    assert r.problems == [] and r.path_sls is not None
    dlid = hosts[5].lid(1)
    assert {row[dlid] for row in r.path_sls.values()} == {4}, "the target rule's SL from every switch"
    assert len({row[hosts[0].lid(1)] for row in r.path_sls.values()}) > 1, "default gives way to the layers"
    kept = pathsl.load(tmp_path / "path_sls")
    assert kept == r.path_sls
    assert verify.verify(t, mcast=False, path_sl=kept).ok


@pytest.mark.parametrize("rule,sl", [("any, target-port-guid {g:#x}", 7), ("any, service-id 0x10", 3),
                                     ("any, source-port-guid 0x0-0xFFFFFFFFFFFFFFFF", 7)])
def test_a_policy_sl_that_brings_back_a_credit_loop_is_refused_naming_the_pair(torus, cli, tmp_path, monkeypatch,
                                                                              rule, sl):
    from smagent import api
    t, hosts = torus
    monkeypatch.setattr("smagent.cli.Context.session", lambda self: api.Session(t))
    f = tmp_path / "q.conf"
    f.write_text(f"qos-ulps\n default : 0\n {rule.format(g=hosts[5].port_guids[1])} : {sl}\nend-qos-ulps\n")
    before = sum(v for k, v in t.stats.by_kind.items() if k.startswith("SubnSet("))
    r = cli("sweep", "--routing", "dfsssp", "--qos-policy", f)
    assert r.exit_code == EXIT_BAD_INPUT, r.output
    assert f"brings back a credit loop on VL{sl}" in r.stderr and "paths from the CA ports of T" in r.stderr
    assert f"rule line 3 ({rule.format(g=hosts[5].port_guids[1])}) puts them on SL {sl}" in r.stderr, r.stderr
    assert sum(v for k, v in t.stats.by_kind.items() if k.startswith("SubnSet(")) == before, "nothing sent"


def test_a_rule_by_source_counts_only_where_its_sources_are(torus):
    """The SL a rule by source gives that would bring back a credit loop from host 5's
    switch is refused; from no port of the fabric it moves no path, and is taken."""
    t, _hosts = torus
    policy = qospolicy.parse("qos-ulps\n default : 0\n any, source-port-guid 0x1-0x2 : 7\nend-qos-ulps\n", "q")
    assert sweep.sweep(t, sweep.SweepOptions(routing="dfsssp", qos_policy=policy, dry_run=True)).problems == []


def test_verify_counts_credit_loops_with_the_policy_sls(torus, cli, tmp_path, monkeypatch):
    """verify --qos-policy puts the policy's target SLs over the paths' layers: the SL the
    sweep would refuse shows as a credit loop in the live tables, the one it accepts not."""
    from smagent import api
    t, hosts = torus
    monkeypatch.setattr("smagent.cli.Context.session", lambda self: api.Session(t))
    st = tmp_path / "st"
    assert cli("sweep", "--routing", "dfsssp", "--state-dir", st).exit_code == 0
    g = hosts[5].port_guids[1]
    for sl, code in ((4, 0), (7, 1)):
        f = tmp_path / f"q{sl}.conf"
        f.write_text(f"qos-ulps\n default : 0\n any, target-port-guid {g:#x} : {sl}\nend-qos-ulps\n")
        r = cli("verify", "--no-mcast", "--json", "--path-sls", st / "path_sls", "--qos-policy", f)
        assert r.exit_code == code, r.output
        if code:
            assert json.loads(r.stdout)["defects"]["cdg_cycle"]["cycle"][0]["vl"] == sl


def test_paths_shows_the_sl_a_query_gets(cli, tmp_path, monkeypatch):
    from smagent import api
    t = SimTransport(topogen.fat_tree_2(4))
    monkeypatch.setattr("smagent.cli.Context.session", lambda self: api.Session(t))
    f = tmp_path / "q.conf"
    f.write_text("qos-ulps\n default : 1\n any, service-id 0x10-0x1F : 2\n ipoib : 4\nend-qos-ulps\n")
    st = tmp_path / "st"
    assert cli("sweep", "--qos-policy", f, "--state-dir", st).exit_code == 0
    hosts = sorted(api.Session(t).discover().cas(), key=lambda n: n.guid)
    a, b = hosts[0].lid(1), hosts[3].lid(1)
    for extra, sl, rule in (([], 1, None), (["--service-id", 0x15], 2, "line 3 (any, service-id 0x10-0x1F)"),
                            (["--service-id", 0x20], 1, None), (["--pkey", 0xFFFF], 4, "line 4 (ipoib)")):
        r = cli("paths", a, b, "--state-dir", st, "--qos-policy", f, *extra, "--json")
        assert r.exit_code == 0, r.output
        doc = json.loads(r.stdout)
        assert (doc["sl"], doc["rule"]) == (sl, rule), (extra, doc)
    r = cli("paths", a, b, "--state-dir", st, "--service-id", 5)
    assert r.exit_code == EXIT_BAD_INPUT and "give --qos-policy FILE" in r.stderr


def test_a_desired_states_policy_is_planned_and_applied(tmp_path):
    from smagent import api
    t = SimTransport(topogen.fat_tree_2(4))
    f = tmp_path / "q.conf"
    f.write_text("qos_swe_sl2vl 0,0,0,0,1,1,1,1,2,2,2,2,3,3,3,3\nqos-ulps\n default : 2\nend-qos-ulps\n")
    session = api.Session(t)
    plan = session.plan({"qos_policy": str(f)})
    assert {tuple(c.new.sl_to_vl) for c in plan.link_changes if c.kind == "sl2vl" and
            plan.topology.nodes[c.guid].is_switch} == {(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3)}
    applied = session.apply({"qos_policy": str(f)}, state_dir=str(tmp_path / "st"))
    assert applied.left.sets_planned == 0, applied.left.plan_lines()
    assert {row[1] for row in pathsl.load(tmp_path / "st" / "path_sls").values()} == {2}  # the default SL


def test_a_policy_sl_its_own_tables_send_to_vl15_is_refused(tmp_path):
    t = SimTransport(topogen.fat_tree_2(4))
    policy = qospolicy.parse("qos_ca_sl2vl 0,1,2,3,4,5,6,7,0,1,2,3,4,5,15,7\n"
                             "qos-ulps\n default : 0\n any, service-id 0x10 : 14\nend-qos-ulps\n", "q")
    with pytest.raises(qospolicy.QosPolicyError, match=r"rule line 4 \(any, service-id 0x10\) gives SL 14, which "
                                                      r"the ca ports' SL2VL table .* sends to VL15"):
        sweep.sweep(t, sweep.SweepOptions(qos_policy=policy))
    assert not any(k.startswith("SubnSet(") for k in t.stats.by_kind), "refused before any Set"


@pytest.mark.parametrize("parts, rule, refused", [
    ("a=0x10 : ALL_CAS=full ;", "ipoib", "IPoIB partition 0x7fff: its partition has 1 full member;"),
    ("a=0x10 : ALL_CAS=full ;", "ipoib, pkey 0x7fff", "IPoIB partition 0x7fff: its partition has 1 full member;"),
    ("a=0x10 : ALL_CAS=full ;", "ipoib, pkey 0x20", "IPoIB partition 0x0020: no partition has it"),
    ("a=0x10 : ALL_CAS=full ;", "ipoib, pkey 0x10", None),
    ("Default=0x7fff : ALL=full ;", "ipoib", None),
    (None, "ipoib, pkey 0x7fff", None),  # no partitions: every end port a full default member
])
def test_an_ipoib_rule_needs_a_partition_with_two_full_members_as_opensm(parts, rule, refused):
    """OpenSM's policy parser refuses an ipoib rule whose partition does not exist or has
    fewer than two full members (the implicit default: only the SM's port is full)."""
    from smagent.config import partitions
    t = SimTransport(topogen.fat_tree_2(4))
    policy = qospolicy.parse(f"qos-ulps\n default : 0\n {rule} : 1\nend-qos-ulps\n", "q")
    opts = sweep.SweepOptions(qos_policy=policy, partitions=parts and partitions.parse(parts))
    if refused is None:
        assert sweep.sweep(t, opts).problems == []
        return
    with pytest.raises(qospolicy.QosPolicyError, match=f"line 3: {rule}: {refused}"):
        sweep.sweep(t, opts)
    assert not any(k.startswith("SubnSet(") for k in t.stats.by_kind), "refused before any Set"
