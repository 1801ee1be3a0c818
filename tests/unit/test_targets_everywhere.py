"""One target syntax everywhere (issue 16 item 9): a desired state names switches and
multicast members as the CLI and the API name targets (LID, DR path, GUID,
description; members also `all`), through one lookup (`targets.find_node`)."""
import pytest

import smagent
from smagent.sweep import desired


from smagent.planning import multicast
from smagent.discovery import targets
@pytest.fixture(scope="module")
def swept():
    """A swept simulator session (every port has a LID) and its topology."""
    f = smagent.connect("sim")
    f.sweep()
    yield f, f.discover()
    f.close()


def _text(n, topo):
    """Every way to name switch or CA ``n`` in the CLI's syntax."""
    return [",".join(map(str, n.path)), str(n.lid(n.lid_ports()[0])), f"{n.guid:#018x}", n.description]


def test_the_cli_and_a_desired_state_find_the_same_node(swept):
    f, topo = swept
    for n in topo.switches():
        for text in _text(n, topo):
            assert f.query("nodeinfo", text).node_guid == n.guid  # the node `lft set TEXT ...` writes
            assert targets.find_node(text, topo)[0] is n
            r = desired.resolve(desired.parse({"lft": [{"switch": text, "lid": 1, "port": 1}]}), topo)
            assert r.static_lft == {n.guid: {1: 1}}, text


def test_desired_switch_as_dr_path_and_lid_plans_like_a_description(swept):
    f, topo = swept
    sw = next(n for n in topo.switches() if len(n.path) == 2)
    lid = sw.lid()
    plans = [f.plan(desired.parse({"lft": [{"switch": ref, "lid": 3, "port": 2}]})).plan_lines()
             for ref in (sw.description, ",".join(map(str, sw.path)), list(sw.path), lid)]
    assert plans[0] and all(p == plans[0] for p in plans)


def test_member_all_is_every_ca_port(swept):
    f, topo = swept
    ds = desired.parse({"multicast": [{"mlid": 0xC001, "members": ["all"]}]})
    r = desired.resolve(ds, topo)
    assert r.groups == {0xC001: {multicast.ALL}}
    plan = f.plan(ds)
    tree = next(t for t in plan.multicast.trees if t.group.mlid == 0xC001)
    ca_ports = {(n.guid, p) for n in topo.cas() for p in n.lid_ports()}
    assert len(tree.members) == len(ca_ports)
    # the same group as the CLI's group file line "0xC001 all"
    cli = multicast.plan(topo, multicast.parse_groups("0xC001 all"))
    assert cli.desired == {s: {0xC001: m[0xC001]} for s, m in plan.multicast.desired.items() if 0xC001 in m}


def test_a_member_by_port_lid_or_path_is_that_port(swept):
    _f, topo = swept
    ca = topo.cas()[0]
    p = ca.lid_ports()[0]
    for ref in (str(ca.lid(p)), ",".join(map(str, ca.port_paths[p])), f"{ca.port_guids[p]:#018x}"):
        r = desired.resolve(desired.parse({"multicast": [{"mlid": 0xC002, "members": [ref]}]}), topo)
        assert r.groups[0xC002] == {(ca.guid, p)}, ref
    r = desired.resolve(desired.parse({"multicast": [{"mlid": 0xC002, "members": [ca.description]}]}), topo)
    assert r.groups[0xC002] == {(ca.guid, q) for q in ca.lid_ports()}


def test_bad_targets_are_listed_like_the_cli_says_them(swept):
    _f, topo = swept
    ca = topo.cas()[0]
    doc = {"lft": [{"switch": "0,1,99", "lid": 1, "port": 1},
                   {"switch": "0x7777", "lid": 1, "port": 1},
                   {"switch": "0,1,300", "lid": 1, "port": 1},
                   {"switch": ",".join(map(str, ca.port_paths[ca.lid_ports()[0]])), "lid": 1, "port": 1}],
           "multicast": [{"mlid": 0xC003, "members": ['"all"', "0,1,99"]}]}
    with pytest.raises(desired.DesiredStateError) as ei:
        desired.resolve(desired.parse(doc), topo)
    probs = ei.value.problems
    assert any(x.startswith("lft[1]: DR path 0,1,99: port 99 of") and "no discovered link" in x for x in probs)
    assert any(x.startswith("lft[2]: no port holds LID 30583") for x in probs)
    assert any(x.startswith("lft[3]: '0,1,300'") and "300" in x for x in probs)
    assert any(x.startswith("lft[4]:") and "is a channel adapter, not a switch" in x for x in probs)
    assert "multicast[1] member: no node '\"all\"' in the fabric" in probs  # quotes force a description
    with pytest.raises(targets.NodeNotFound, match="no discovered link"):
        targets.find_node("0,1,99", topo)
