"""OpenSM's whole qos-policy.conf (`smagent.config.qospolicy`, `qosparse`, `qosrules`):
port-groups (port GUID ranges, port names, partitions by name and P_Key, node types,
SELF), qos-setup (checked, ignored), qos-levels (SL, MTU and rate limits, packet life,
path bits, P_Keys), qos-match-rules (source, destination, service IDs, P_Keys, QoS
classes) and qos-ulps together; every bad file refused with its line; the first matching
rule's level deciding a PathRecord's SL, MTU, rate, packet lifetime and P_Key, as the SA
answers it."""
import pytest

from mad import codes, sa
from mad.header import Method
from mad.sa import SaStatus
from mad.sa_records import PathRecord
from smagent import sweep
from smagent.config import partitions, qospolicy
from smagent.errors import EXIT_BAD_INPUT
from smagent.model import topogen
from smagent.model.subnet import Subnet
from smagent.sa import SaAgent
from smagent.transport.address import Address, Incoming
from smagent.transport.sim import SimTransport

EVERYTHING = """# every construct of OpenSM's grammar
port-groups
    port-group
        name: Storage Targets            # blanks dropped: StorageTargets
        use: SRP targets
        port-guid: 0x10-0x12, 0x20
        port-guid: 0x30
    end-port-group
    port-group
        name: Named
        port-name: "host a/P1", hostb/p2
    end-port-group
    port-group
        name: Parts
        partition: Part1, Part2
        pkey: 0x8005-0x0007
    end-port-group
    port-group
        name: Kinds
        node-type: switch, ROUTER, Self
    end-port-group
    port-group
        name: Everyone
        node-type: ALL
    end-port-group
end-port-groups
qos-setup
    vlarb-tables
        vlarb-scope
            group: Storage
            across: Named
            vlarb-high: 0:255,1:127
            vlarb-low: 8:255
            vl-high-limit: 10
        end-vlarb-scope
    end-vlarb-tables
    sl2vl-tables
        sl2vl-scope
            group: Parts
            from: *
            to: 1-4, 7
            across-to: Named
            across-from: Kinds
            sl2vl-table: 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,7
        end-sl2vl-scope
    end-sl2vl-tables
end-qos-setup
qos-levels
    qos-level
        name: DEFAULT
        use: the default
        sl: 0
    end-qos-level
    qos-level
        name: WholeSet
        sl: 1
        mtu-limit: 4
        rate-limit: 5
        packet-life: 8
        path-bits: 0, 2-3
        path-bits: 4
        pkey: 0x1234
        pkey: 0x8010-0x0012
    end-qos-level
end-qos-levels
qos-match-rules
    qos-match-rule
        use: by QoS class
        qos-class: 7-9,11
        qos-level-name: wholeset
    end-qos-match-rule
    qos-match-rule
        source: Named, Parts
        destination: storagetargets
        service-id: 0x10000-0x1FFFF
        service-id: 0x30000
        pkey: 0x0F00-0x0FFF
        qos-level-name: WholeSet
    end-qos-match-rule
end-qos-match-rules
qos-ulps
    default                              : 3
    any, source-port-guid 0x40           : 4
    any, source-target-port-guid 0x50    : 5
    srp, target-port-guid 0x60-0x61      : 6
end-qos-ulps
"""


def test_every_construct_is_read():
    p = qospolicy.parse(EVERYTHING, "q")
    g = {x.name: x for x in p.groups}
    assert list(g) == ["StorageTargets", "Named", "Parts", "Kinds", "Everyone"]
    assert g["StorageTargets"].guids == ((0x10, 0x12), (0x20, 0x20), (0x30, 0x30)) and g["StorageTargets"].use
    assert g["Named"].port_names == (("host a", 1), ("hostb", 2))  # quotes keep the blank
    assert g["Parts"].partitions == ("Part1", "Part2") and g["Parts"].pkeys == ((0x0005, 0x0007),)  # 15 bits
    assert g["Kinds"].node_types == {2, 3} and g["Kinds"].self_port
    assert g["Everyone"].node_types == {1, 2, 3} and not g["Everyone"].self_port
    assert p.default is not None and (p.default.name, p.default.sl) == ("DEFAULT", 0)  # the level wins over qos-ulps'
    whole = p.levels[1]
    assert (whole.sl, whole.mtu_limit, whole.rate_limit, whole.packet_life) == (1, 4, 5, 8)
    assert whole.path_bits == ((0, 0), (2, 3), (4, 4)) and whole.pkeys == ((0x1234, 0x1234), (0x10, 0x12))
    by_class, full, *ulps = p.rules
    assert by_class.level is whole and by_class.qos_classes == ((7, 9), (11, 11)) and by_class.text == "by QoS class"
    assert full.sources == (g["Named"], g["Parts"]) and full.destinations == (g["StorageTargets"],)
    assert full.service_ids == ((0x10000, 0x1FFFF), (0x30000, 0x30000)) and full.pkeys == ((0xF00, 0xFFF),)
    assert [(r.ulp, r.sl, bool(r.sources), bool(r.destinations)) for r in ulps] == [
        ("any", 4, True, False), ("any", 5, True, True), ("srp", 6, False, True)]  # after the match rules
    assert [r.line for r in p.rules] == [67, 72, 83, 84, 85]


def test_the_first_matching_rule_decides_match_rules_before_qos_ulps():
    p = qospolicy.parse(EVERYTHING, "q")
    members = qospolicy.Membership()  # by GUID ranges only
    assert p.match(0x11, qos_class=8).text == "by QoS class"
    assert p.match(0x11) is None and p.sl(0x11) == 0  # the default level
    assert p.match(0x11, 0x10005, 0x8F01, src_guid=0x99) is None, "the source is in no group of the rule"
    assert p.sl(0x60) == 6 and p.sl(0x62) == 0  # srp: by target
    assert p.sl(0x1, src_guid=0x40) == 4 and p.sl(0x40) == 0  # by source
    assert p.sl(0x50, src_guid=0x50) == 5 and p.sl(0x50, src_guid=0x1) == 0  # both ends
    assert p.sl(0x60, src_guid=0x40) == 4, "file order: the source rule comes first"
    named = qospolicy.membership(p, [qospolicy.FabricPort(0x99, 1, "host a", 1, 1)], {}, {}, None)
    assert p.match(0x11, 0x10005, 0x8F01, src_guid=0x99, members=named) is p.rules[1]
    assert p.match(0x11, 0x10005, None, src_guid=0x99, members=named) is None, "a P_Key rule needs the P_Key asked"
    assert p.match(0x11, None, 0x8F01, src_guid=0x99, members=named) is None, "a service-ID rule needs one asked"
    assert members.contains((p.groups[0],), 0x30) and not members.contains((p.groups[0],), 0x13)


@pytest.mark.parametrize("text,line,needle", [
    ("qos-levels\n qos-level\n name: DEFAULT\n end-qos-level\nend-qos-levels\n", 2, "qos-level without a 'sl:'"),
    ("qos-levels\n qos-level\n sl: 1\n end-qos-level\nend-qos-levels\nqos-ulps\n default : 0\nend-qos-ulps\n", 2,
     "qos-level without a 'name:'"),
    ("qos-levels\n qos-level\n name: a\n name: b\n sl: 1\n end-qos-level\nend-qos-levels\n", 4,
     "second 'name' (first on line 3)"),
    ("qos-levels\n qos-level\n name: DEFAULT\n sl: 1\n mtu-limit: 6\n end-qos-level\nend-qos-levels\n", 5,
     "MTU limit 6 is not 1..5"),
    ("qos-levels\n qos-level\n name: DEFAULT\n sl: 1\n rate-limit: 23\n end-qos-level\nend-qos-levels\n", 5,
     "rate limit 23 is not 2..22"),
    ("qos-levels\n qos-level\n name: DEFAULT\n sl: 16\n end-qos-level\nend-qos-levels\n", 4, "SL 16 is not 0..15"),
    ("qos-levels\n qos-level\n name: DEFAULT\n sl: 1\n packet-life: 64\n end-qos-level\nend-qos-levels\n", 5,
     "packet lifetime 64"),
    ("qos-levels\n qos-level\n name: DEFAULT\n sl: 1\n colour: red\n end-qos-level\nend-qos-levels\n", 5,
     "expected one of name:"),
    ("port-groups\n port-group\n use: x\n end-port-group\nend-port-groups\nqos-ulps\n default : 0\nend-qos-ulps\n",
     2, "port-group without a 'name:'"),
    ("port-groups\nend-port-groups\nqos-ulps\n default : 0\nend-qos-ulps\n", 2, "port-groups (line 1) holds nothing"),
    ("qos-ulps\nend-qos-ulps\n", 2, "qos-ulps (line 1) holds nothing"),
    ("port-groups\n port-group\n name: a\n port-name: h/P0\n end-port-group\nend-port-groups\n", 4,
     "illegal port number"),
    ("port-groups\n port-group\n name: a\n port-name: h1\n end-port-group\nend-port-groups\n", 4,
     "is not NodeDescription/Pn"),
    ("port-groups\n port-group\n name: a\n node-type: CA, HOST\n end-port-group\nend-port-groups\n", 4,
     "'host' is not a node type"),
    ("port-groups\n port-group\n name: a\n port-guid: 0x10-zz\n end-port-group\nend-port-groups\n", 4,
     "port-guid '0x10-zz' is not a number"),
    ("port-groups\n port-group\n name: a, b\n end-port-group\nend-port-groups\n", 3, "name takes one name"),
    ("qos-match-rules\n qos-match-rule\n use: x\n end-qos-match-rule\nend-qos-match-rules\n", 2,
     "without a 'qos-level-name:'"),
    ("qos-match-rules\n qos-match-rule\n qos-level-name: Gold\n end-qos-match-rule\nend-qos-match-rules\n"
     "qos-ulps\n default : 0\nend-qos-ulps\n", 2, "qos-match-rule 1: qos-level 'Gold' is not defined"),
    ("qos-match-rules\n qos-match-rule\n source: Nobody\n qos-level-name: default\n end-qos-match-rule\n"
     "end-qos-match-rules\nqos-ulps\n default : 0\nend-qos-ulps\n", 2, "source port-group 'Nobody' is not defined"),
    ("qos-match-rules\n qos-match-rule\n destination: Nobody\n qos-level-name: default\n end-qos-match-rule\n"
     "end-qos-match-rules\nqos-ulps\n default : 0\nend-qos-ulps\n", 2, "destination port-group 'Nobody'"),
    ("qos-match-rules\n qos-match-rule\n qos-level-name: a\n qos-level-name: b\n end-qos-match-rule\n"
     "end-qos-match-rules\n", 4, "second 'qos-level-name'"),
    ("qos-levels\n qos-level\n name: DEFAULT\n sl: 0\nend-qos-levels\n", 5, "inside qos-level (line 2)"),
    ("qos-setup\n sl2vl-tables\n sl2vl-scope\n group: a\n sl2vl-table: 0,1\n end-sl2vl-scope\n end-sl2vl-tables\n"
     "end-qos-setup\n", 5, "needs 16 VLs"),
    ("qos-setup\n sl2vl-tables\n sl2vl-scope\n sl2vl-table: 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,7\n end-sl2vl-scope\n"
     " end-sl2vl-tables\nend-qos-setup\n", 3, "names no port group"),
    ("qos-setup\n sl2vl-tables\n sl2vl-scope\n group: a\n to: 128\n sl2vl-table: 0,1,2,3,4,5,6,7,8,9,10,11,12,13,"
     "14,7\n end-sl2vl-scope\n end-sl2vl-tables\nend-qos-setup\n", 5, "port number out of range"),
    ("qos-setup\n vlarb-tables\n vlarb-scope\n vl-high-limit: 3\n end-vlarb-scope\n end-vlarb-tables\nend-qos-setup\n",
     3, "vlarb-scope names no port group"),
    ("QOS-ULPS\n default : 0\nEND-QOS-ULPS\n", 1, "keywords are lower case"),
    ("qos-levels\nend-qos-levels\n", None, "no default QoS level"),
    ("qos-ulps\n any, service-id 0x10 : 1\nend-qos-ulps\n", None, "no default QoS level"),
    ("qos-ulps\n default : 0\n any, service-id 0x1ffffffffffffffff : 1\nend-qos-ulps\n", 3, "64 bits"),
])
def test_a_bad_policy_is_refused_naming_its_line(text, line, needle):
    with pytest.raises(qospolicy.QosPolicyError) as e:
        qospolicy.parse(text, "q")
    assert e.value.exit_code == EXIT_BAD_INPUT
    prefix = f"line {line}:" if line is not None else ""
    assert any(p.startswith(prefix) and needle in p for p in e.value.problems), e.value.problems


def test_levels_and_groups_are_found_ignoring_case_first_of_a_name_wins():
    p = qospolicy.parse("port-groups\n port-group\n name: A\n port-guid: 1\n end-port-group\n port-group\n"
                        " name: a\n port-guid: 2\n end-port-group\nend-port-groups\nqos-levels\n qos-level\n"
                        " name: Default\n sl: 4\n end-qos-level\n qos-level\n name: DEFAULT\n sl: 5\n end-qos-level\n"
                        "end-qos-levels\nqos-match-rules\n qos-match-rule\n destination: a\n qos-level-name: default\n"
                        " end-qos-match-rule\nend-qos-match-rules\n", "q")
    assert p.default_sl == 4 and p.rules[0].destinations[0].guids == ((1, 1),)
    assert p.sl(1) == 4 and p.match(2) is None


# ------------------------------------------------------------ on a fabric, through the SA
def _get(agent, record, *fields) -> sa.SaMad:
    q = sa.request(Method.GET, record, component_mask=type(record).mask(*fields), transaction_id=1)
    out = agent.handle(Incoming(q.encode(), Address.gsi(1)), 0.0)
    return sa.SaMad.decode(out[0][0])


POLICY = """port-groups
    port-group
        name: Leaf0
        port-name: H0/P1, H1/P1
    end-port-group
    port-group
        name: Part
        partition: gold
    end-port-group
    port-group
        name: Switches
        node-type: SWITCH
    end-port-group
    port-group
        name: Me
        node-type: SELF
    end-port-group
end-port-groups
qos-levels
    qos-level
        name: DEFAULT
        sl: 1
    end-qos-level
    qos-level
        name: Slow
        sl: 2
        mtu-limit: 2
        rate-limit: 2
        packet-life: 9
    end-qos-level
    qos-level
        name: Gold
        sl: 3
        pkey: 0x20-0x30
    end-qos-level
    qos-level
        name: Classy
        sl: 6
    end-qos-level
end-qos-levels
qos-match-rules
    qos-match-rule
        qos-class: 5
        qos-level-name: Classy
    end-qos-match-rule
    qos-match-rule
        source: Leaf0
        destination: Part
        qos-level-name: Slow
    end-qos-match-rule
    qos-match-rule
        destination: Switches, Me
        qos-level-name: Gold
    end-qos-match-rule
end-qos-match-rules
qos-ulps
    any, service-id 0x100 : 7
end-qos-ulps
"""


@pytest.fixture(scope="module")
def fabric():
    """A 2-level fat tree swept with POLICY and a partition gold=0x20 of H0, H3, H4, H5 (full
    members); the SM's port is H0's."""
    t = SimTransport(topogen.fat_tree_2(4))
    parts = _parts(sweep.sweep(t, sweep.SweepOptions(dry_run=True)))
    policy = qospolicy.parse(POLICY, "q")
    r = sweep.sweep(t, sweep.SweepOptions(qos_policy=policy, partitions=parts, routing="minhop"))
    assert r.problems == [], r.problems
    agent = SaAgent(0)
    agent.publish(Subnet.from_sweep(r, qos_policy=policy, partitions=parts))
    lids = {n.description: n.lid(1) for n in r.topology.cas()}
    lids.update({n.description: n.lid() for n in r.topology.switches()})
    return agent, lids, r


def test_groups_resolve_on_the_fabric(fabric):
    agent, _lids, r = fabric
    s = agent.subnet
    cas = {n.description: n.port_guids[1] for n in r.topology.cas()}
    m = s.qos_members
    groups = {g.name: g for g in s.qos_policy.groups}
    assert {h for h, g in cas.items() if m.contains((groups["Leaf0"],), g)} == {"H0", "H1"}
    assert {h for h, g in cas.items() if m.contains((groups["Part"],), g)} == {"H0", "H3", "H4", "H5"}
    assert all(m.contains((groups["Switches"],), n.port_guids.get(0, n.guid)) for n in r.topology.switches())
    assert not any(m.contains((groups["Switches"],), g) for g in cas.values())
    local = r.topology.nodes[r.topology.local[0]]
    me = local.port_guids.get(0 if local.is_switch else r.topology.local[1])
    assert me == cas["H0"] and [h for h, g in cas.items() if m.contains((groups["Me"],), g)] == ["H0"]


def test_the_sa_answers_with_the_matched_level(fabric):
    agent, lids, _r = fabric
    plain = _get(agent, PathRecord(slid=lids["H2"], dlid=lids["H3"]), "slid", "dlid").record(PathRecord)
    assert (plain.sl, plain.packet_life_time, plain.p_key) == (1, 18, 0xFFFF)  # the default level
    assert plain.mtu > 2 and codes.rate_gbps(plain.rate) > 2.5, "a path the Slow level would cap"
    slow = _get(agent, PathRecord(slid=lids["H0"], dlid=lids["H3"]), "slid", "dlid").record(PathRecord)
    assert (slow.sl, slow.mtu, slow.rate, slow.packet_life_time) == (2, 2, 2, 9)  # Leaf0 -> gold: capped
    back = _get(agent, PathRecord(slid=lids["H3"], dlid=lids["H4"]), "slid", "dlid").record(PathRecord)
    assert back.sl == 1, "the source is not in Leaf0"
    h1 = _get(agent, PathRecord(slid=lids["H1"], dlid=lids["H2"]), "slid", "dlid").record(PathRecord)
    assert h1.sl == 1, "H2 is not in the gold partition"
    cls = _get(agent, PathRecord(slid=lids["H0"], dlid=lids["H3"], qos_class=5), "slid", "dlid", "qos_class")
    assert cls.record(PathRecord).sl == 6, "the QoS-class rule comes first"
    sid = _get(agent, PathRecord(slid=lids["H2"], dlid=lids["H3"], service_id=0x100), "slid", "dlid", "service_id")
    assert sid.record(PathRecord).sl == 7, "qos-ulps after the match rules"


def test_a_levels_pkeys_decide_the_paths_pkey(fabric):
    """Paths to the SM's port (H0: SELF) get the Gold level, whose P_Keys are 0x20-0x30."""
    agent, lids, _r = fabric
    to_sm = _get(agent, PathRecord(slid=lids["H3"], dlid=lids["H0"]), "slid", "dlid").record(PathRecord)
    assert (to_sm.sl, to_sm.p_key) == (3, 0x0020), "the first of the level's P_Keys the two share (15 bits, as OpenSM)"
    none = _get(agent, PathRecord(slid=lids["H2"], dlid=lids["H0"]), "slid", "dlid")
    assert none.sa_status == SaStatus.ERR_NO_RECORDS, "H2 shares none of the level's P_Keys"
    asked = _get(agent, PathRecord(slid=lids["H3"], dlid=lids["H0"], p_key=0xFFFF), "slid", "dlid", "p_key")
    assert asked.sa_status == SaStatus.ERR_NO_RECORDS, "a P_Key the level does not name"
    asked = _get(agent, PathRecord(slid=lids["H3"], dlid=lids["H0"], p_key=0x8020), "slid", "dlid", "p_key")
    assert asked.record(PathRecord).p_key == 0x8020, "one it names: the P_Key asked"
    switch = _get(agent, PathRecord(slid=lids["H3"], dlid=lids["L1"]), "slid", "dlid")
    assert switch.sa_status == SaStatus.ERR_NO_RECORDS, "a switch is in no gold partition"


def test_an_sl_other_than_the_levels_finds_no_path(fabric):
    agent, lids, _r = fabric
    q = PathRecord(slid=lids["H0"], dlid=lids["H3"], sl=2)
    assert _get(agent, q, "slid", "dlid", "sl").record(PathRecord).sl == 2
    q = PathRecord(slid=lids["H0"], dlid=lids["H3"], sl=1)
    assert _get(agent, q, "slid", "dlid", "sl").sa_status == SaStatus.ERR_NO_RECORDS


def test_a_port_name_past_the_nodes_ports_is_refused_before_any_set():
    t = SimTransport(topogen.fat_tree_2(4))
    policy = qospolicy.parse("port-groups\n port-group\n name: a\n port-name: H0/P2, Nobody/P9\n end-port-group\n"
                             "end-port-groups\nqos-ulps\n default : 0\nend-qos-ulps\n", "q")
    with pytest.raises(qospolicy.QosPolicyError, match=r"line 2: port-group a: port name 'H0/P2': 'H0' has 1 ports"):
        sweep.sweep(t, sweep.SweepOptions(qos_policy=policy))
    assert not any(k.startswith("SubnSet(") for k in t.stats.by_kind), "refused before any Set"


def test_hosts_of_one_leaf_get_their_own_sl_from_a_rule_by_source():
    """Plain Gets are answered per class of source ports (`sa.quickpath`): two hosts of one
    leaf, one in a rule's source group, each get their own SL, whoever asks first."""
    t = SimTransport(topogen.fat_tree_2(4))
    r = sweep.sweep(t, sweep.SweepOptions(dry_run=True))
    cas = {n.description: n for n in r.topology.cas()}
    policy = qospolicy.parse(f"qos-ulps\n default : 1\n any, source-port-guid {cas['H1'].port_guids[1]:#x} : 5\n"
                             "end-qos-ulps\n", "q")
    r = sweep.sweep(t, sweep.SweepOptions(qos_policy=policy, routing="minhop"))
    agent = SaAgent(0)
    agent.publish(Subnet.from_sweep(r, qos_policy=policy))
    lids = {n.description: n.lid(1) for n in r.topology.cas()}
    got = [_get(agent, PathRecord(slid=lids[h], dlid=lids["H2"]), "slid", "dlid").record(PathRecord).sl
           for h in ("H0", "H1", "H0")]
    assert got == [1, 5, 1]
    qc = _get(agent, PathRecord(slid=lids["H0"], dlid=lids["H2"], qos_class=3), "slid", "dlid", "qos_class")
    assert qc.record(PathRecord).sl == 1


def test_a_levels_pkeys_are_tried_lowest_first_whatever_the_order_written(fabric):
    """OpenSM sorts a level's P_Key ranges: `pkey: 0x7fff, 0x20` gives H3 -> H0 (both in
    0x20 and the default partition) 0x0020."""
    _agent, lids, r = fabric
    policy = qospolicy.parse(POLICY.replace("pkey: 0x20-0x30", "pkey: 0x7fff, 0x20"), "q")
    other = SaAgent(0)
    other.publish(Subnet.from_sweep(r, qos_policy=policy, partitions=_parts(r)))
    got = _get(other, PathRecord(slid=lids["H3"], dlid=lids["H0"]), "slid", "dlid").record(PathRecord)
    assert (got.sl, got.p_key) == (3, 0x0020)
    to_switch = _get(other, PathRecord(slid=lids["H3"], dlid=lids["L1"]), "slid", "dlid").record(PathRecord)
    assert (to_switch.sl, to_switch.p_key) == (3, 0x7FFF)


def _parts(r):
    cas = {n.description: n for n in r.topology.cas()}
    guids = ", ".join(f"{cas[h].port_guids[1]:#x}" for h in ("H0", "H3", "H4", "H5"))
    return partitions.parse(f"Default=0x7fff : ALL=full ;\ngold=0x20, defmember=full : {guids} ;\n")


def test_what_names_nothing_on_the_fabric_is_noted():
    """Taken, as OpenSM takes it, and said in the sweep's notes."""
    t = SimTransport(topogen.fat_tree_2(4))
    policy = qospolicy.parse("port-groups\n port-group\n name: a\n port-name: Nobody/P1\n partition: gold\n"
                             " end-port-group\nend-port-groups\nqos-ulps\n default : 0\n any, pkey 0x44 : 1\n"
                             " ipoib : 2\nend-qos-ulps\n", "q")
    notes = sweep.sweep(t, sweep.SweepOptions(qos_policy=policy, dry_run=True)).notes
    assert "q: line 10: P_Key 0x0044: no partition has it; the rule matches no query for a path that exists" in notes
    assert "q: line 2: port-group a: port name 'Nobody/P1': no node 'Nobody' on the fabric" in notes
    assert "q: line 2: port-group a: no partition named 'gold'" in notes
    assert not any("0x7fff" in n for n in notes), "the default partition exists"
