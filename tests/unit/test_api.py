"""The scripting face: smagent.connect() sessions on the in-process simulator, typed
results and typed errors (the examples run for real in test_examples.py)."""
import pytest

import smagent
from mad.attributes import NodeType


def test_session_discover_query_sweep_converges():
    with smagent.connect("sim") as fabric:
        topo = fabric.discover()
        assert topo.switches() and topo.cas()
        ni = fabric.query("nodeinfo", "0")
        assert ni.node_type in (NodeType.CA, NodeType.SWITCH)
        plan = fabric.sweep(dry_run=True)
        assert plan.sets_planned > 0 and plan.dry_run
        done = fabric.sweep()
        assert done.problems == []
        assert fabric.sweep(dry_run=True).sets_planned == 0
        # every CA port now has a LID, readable through the API
        for n in topo.cas():
            for p in n.lid_ports():
                assert fabric.query("portinfo", ",".join(map(str, n.port_paths[p])), port=p).lid > 0
        assert fabric.stats["sent"] > 0


def test_query_by_description_and_guid():
    with smagent.connect("sim") as fabric:
        topo = fabric.discover()
        sw = topo.switches()[0]
        assert fabric.query("nodeinfo", sw.description).node_guid == sw.guid
        assert fabric.query("nodeinfo", f"{sw.guid:#018x}").node_guid == sw.guid


@pytest.mark.parametrize("call, needle", [
    (lambda f: f.query("nodeinfo", "0xC000"), "lid"),
    (lambda f: f.query("portinfo", "0", port=300), "port"),
    (lambda f: f.query("bogus", "0"), "unknown attribute"),
    (lambda f: f.query("nodeinfo", "0,1,300"), "path"),
    (lambda f: f.sweep(lmc=9), "LMC"),
    (lambda f: f.query("nodeinfo", "no-such-node"), "no-such-node"),
])
def test_bad_input_is_typed_and_sends_nothing(call, needle):
    with smagent.connect("sim") as fabric:
        before = fabric.stats["sent"]
        with pytest.raises(smagent.BadInput, match=needle) as ei:
            call(fabric)
        assert ei.value.exit_code == 2
        if needle != "no-such-node":  # resolving a description discovers (Gets only)
            assert fabric.stats["sent"] == before


def test_missing_topology_is_bad_input():
    with pytest.raises(smagent.BadInput):
        smagent.connect("sim", topology="/nonexistent/topology.net")


def test_unreachable_is_fabric_failure():
    with smagent.connect("sim", retries=0, timeout_ms=5) as fabric:
        with pytest.raises(smagent.FabricFailure) as ei:
            fabric.query("nodeinfo", "0,1,7,7,7")
        assert ei.value.exit_code == 3


def test_transport_errors_name_their_request():
    """A timeout names the request that failed, as a replay miss does (``request``)."""
    with smagent.connect("sim", retries=0, timeout_ms=5) as f:
        with pytest.raises(smagent.FabricFailure) as ei:
            f.query("nodeinfo", "0,1,7,7")
    assert ei.value.request == "SubnGet(NodeInfo, modifier 0x0) to DR 0,1,7,7"
    assert ei.value.changed == [] and ei.value.exit_code == 3
