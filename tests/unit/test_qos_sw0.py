"""An enhanced switch port 0's QoS tables (IBA SwitchInfo.EnhancedPort0; OpenSM's
qos_sw0_*): the simulator has SL2VL (port 0 as output) and VLArb tables on an enhanced
port 0 and refuses them on a base one; the sweep writes them on enhanced port 0 only, as
OpenSM's QoS manager leaves them: the (input, 0) pairs from the swe class, the pair
(0, 0), port 0's VLArb and VLHighLimit from the sw0 class (else the class-less default);
through the one write path (backed up, journalled), read back by SMPs; a second sweep
sends nothing. In the in-process simulator."""
import json

import pytest

from mad import forwarding as fw
from mad.attributes import AttrID, SLtoVLMappingTable, VLArbitrationTable, vlarb_block, vlarb_entries
from mad.header import Method
from smagent import api, sweep
from smagent.model import netfile, topogen
from smagent.config import qospolicy
from smagent.sim import sma
from smagent.transport.base import Request
from smagent.transport.sim import SimTransport

POLICY = """qos_sw0_sl2vl 3,2,1,0,3,2,1,0,3,2,1,0,3,2,1,0
qos_sw0_vlarb_low 0:1,1:2,2:3,3:4
qos_sw0_high_limit 3
qos_swe_sl2vl 0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,3
"""
SW0 = [3, 2, 1, 0] * 4
SWE = [0, 1, 2, 3] * 4


def _transport(enhanced=("S0",)) -> SimTransport:
    """A 2-level fat tree (IBA reset tables) whose switches in ``enhanced`` have an enhanced port 0."""
    fabric = topogen.fat_tree_2(4)
    for s in fabric.switches():
        if s.name in enhanced:
            s.caps["enhanced_port0"] = 1  # as `# smagent: cap` / ibsim's "enhanced port 0" give it
    return SimTransport(netfile.dumps(fabric), link_reset="iba")


def _path(t, name):
    node = t.sim.node(name)
    return next(n.path for n in sweep.sweep(t, sweep.SweepOptions(dry_run=True)).topology.switches()
                if n.guid == node.guid)


@pytest.fixture
def port_table_sets(monkeypatch):
    """(switch name, attribute, AttributeModifier) of every SL2VL / VLArb Set the simulator's SMAs take."""
    seen = []
    for attr in (AttrID.SL_TO_VL_MAPPING_TABLE, AttrID.VL_ARBITRATION_TABLE):
        get, set_, flag = sma._HANDLERS[int(attr)]

        def spy(node, in_port, smp, reveal, _set=set_, _attr=attr):
            seen.append((node.name, _attr, smp.attribute_modifier))
            return _set(node, in_port, smp, reveal)
        monkeypatch.setitem(sma._HANDLERS, int(attr), (get, spy, flag))
    return seen


@pytest.mark.parametrize("enhanced", [False, True])
def test_the_simulator_has_port0_tables_only_on_an_enhanced_port0(enhanced):
    t = _transport(("S0",) if enhanced else ())
    path = _path(t, "S0")
    table = SLtoVLMappingTable(sl_to_vl=SW0)
    arb = vlarb_block([(1, 9), (2, 9)])
    reps = t.execute([Request.dr(Method.SET, AttrID.SL_TO_VL_MAPPING_TABLE, path, fw.sl2vl_modifier(2, 0), table),
                      Request.dr(Method.GET, AttrID.SL_TO_VL_MAPPING_TABLE, path, fw.sl2vl_modifier(0, 0)),
                      Request.dr(Method.SET, AttrID.VL_ARBITRATION_TABLE, path, fw.vlarb_modifier(1, 0), arb),
                      Request.dr(Method.GET, AttrID.VL_ARBITRATION_TABLE, path, fw.vlarb_modifier(3, 0)),
                      # input port 0 to an external output: there on every switch
                      Request.dr(Method.GET, AttrID.SL_TO_VL_MAPPING_TABLE, path, fw.sl2vl_modifier(0, 1))])
    assert reps[4].ok
    node = t.sim.node("S0")
    if enhanced:
        assert all(r.ok for r in reps), [r.error for r in reps]
        assert reps[0].value(SLtoVLMappingTable).sl_to_vl == SW0 and node.sl2vl[(2, 0)] == SW0
        assert vlarb_entries(reps[2].value(VLArbitrationTable))[:2] == [(1, 9), (2, 9)]
    else:
        assert not any(r.ok for r in reps[:4])
        assert all("0x801c" in str(r.error) for r in reps[:4]), [str(r.error) for r in reps[:4]]
        assert (2, 0) not in node.sl2vl and node.vlarb[(0, "low")][:2] == [(0, 0), (0, 0)]  # nothing taken


def test_the_sw0_tables_go_to_enhanced_port0_only_backed_up_and_read_back(tmp_path, port_table_sets):
    t = _transport()
    state = tmp_path / "state"
    s = api.Session(t, state_dir=str(state))
    policy = qospolicy.parse(POLICY, "q")
    r = s.sweep(state_dir=str(state), qos_policy=policy)
    assert r.problems == [] and r.backup_file, r.problems
    # the base port 0 switch (S1) got no Set naming port 0; the enhanced one (S0) got them all
    to_port0 = {(n, a, m) for n, a, m in port_table_sets
                if (a == AttrID.SL_TO_VL_MAPPING_TABLE and m & 0xFF == 0) or (a == AttrID.VL_ARBITRATION_TABLE
                                                                              and m & 0xFF == 0)}
    switches = {n.name for n in t.sim.switches()}
    assert {n for n, _a, _m in to_port0 if n in switches} == {"S0"}
    s0 = t.sim.node("S0")
    assert {(a, m) for n, a, m in to_port0 if n == "S0"} == (
        {(AttrID.SL_TO_VL_MAPPING_TABLE, fw.sl2vl_modifier(i, 0)) for i in range(s0.num_ports + 1)}
        | {(AttrID.VL_ARBITRATION_TABLE, fw.vlarb_modifier(part, 0)) for part in (1, 3)})  # 8 entries: parts 1, 3
    # read back through SMPs: (0, 0) sw0, (in, 0) swe; VLArb low sw0; VLHighLimit sw0
    path = _path(t, "S0")
    reps = t.execute([Request.dr(Method.GET, AttrID.SL_TO_VL_MAPPING_TABLE, path, fw.sl2vl_modifier(i, 0))
                      for i in range(s0.num_ports + 1)]
                     + [Request.dr(Method.GET, AttrID.VL_ARBITRATION_TABLE, path, fw.vlarb_modifier(1, 0))])
    assert [r.value(SLtoVLMappingTable).sl_to_vl for r in reps[:-1]] == [SW0] + [SWE] * s0.num_ports
    assert vlarb_entries(reps[-1].value(VLArbitrationTable))[:5] == [(0, 1), (1, 2), (2, 3), (3, 4), (0, 0)]
    assert s0.pi[0].vl_high_limit == 3 and t.sim.node("S1").pi[0].vl_high_limit == 0
    # backed up and journalled as every link table: the units of port 0 are in the backup
    saved = json.loads(open(r.backup_file).read())["switches"][f"0x{s0.guid:016x}"]["links"]
    units = {(u["table"], u["modifier"]) for u in saved} | {("sl2vl", m) for u in saved for m in u.get("also", ())}
    assert {("sl2vl", fw.sl2vl_modifier(i, 0)) for i in range(s0.num_ports + 1)} <= units
    assert {("vlarb", fw.vlarb_modifier(1, 0)), ("vlarb", fw.vlarb_modifier(3, 0))} <= units
    (journal,) = (state / "journals").glob("apply-*.journal")
    begin = json.loads(journal.read_text().splitlines()[0])
    done = {(b["table"], b["block"]) for b in begin["blocks"] if b["switch"] == f"0x{s0.guid:016x}"}
    assert {("sl2vl", fw.sl2vl_modifier(0, 0)), ("vlarb", fw.vlarb_modifier(1, 0))} <= done
    # a second sweep sends no table Set at all
    del port_table_sets[:]
    again = s.sweep(state_dir=str(state), qos_policy=policy)
    assert again.problems == [] and again.link_changes == [] and port_table_sets == []
    assert not [c for c in again.port_changes if c.guid == s0.guid]
    # the backup puts port 0's tables back as they were (the IBA reset values)
    assert s.lft_restore(r.backup_file).ok
    assert all(s0.sl2vl[(i, 0)] == list(range(16)) for i in range(s0.num_ports + 1))
    assert s0.vlarb[(0, "low")][:2] == [(0, 0), (0, 0)]


def test_the_plan_lists_port0_tables_as_other_link_tables():
    t = _transport()
    r = sweep.sweep(t, sweep.SweepOptions(dry_run=True, qos_policy=qospolicy.parse(POLICY, "q")))
    switches = {f"0x{n.guid:016x}": n.name for n in t.sim.switches()}
    recs = [x for x in r.plan_records(detail=True) if x["guid"] in switches]
    sl2vl0 = {(switches[x["guid"]], x["in_port"], tuple(x["new"])) for x in recs
              if x["table"] == "SL2VL" and x["out_port"] == 0}
    assert sl2vl0 == {("S0", 0, tuple(SW0))} | {("S0", i, tuple(SWE)) for i in range(1, 5)}
    vlarb0 = [x for x in recs if x["table"] == "VLArb" and x["port"] == 0]
    assert {switches[x["guid"]] for x in vlarb0} == {"S0"}
    assert [x["new"][:4] for x in vlarb0 if x["priority"] == "low"] == [[[0, 1], [1, 2], [2, 3], [3, 4]]]


def test_without_sw0_lines_port0_gets_the_default_tables_not_swe():
    """OpenSM builds the sw0 class over the class-less qos_* lines (then its defaults), never
    over swe: a policy with qos_swe_sl2vl alone leaves port 0's pair (0, 0) on the default."""
    t = _transport()
    r = sweep.sweep(t, sweep.SweepOptions(qos_policy=qospolicy.parse(
        "qos_swe_sl2vl 0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,3\nqos_sl2vl 1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1\n", "q")))
    assert r.problems == []
    s0 = t.sim.node("S0")
    assert s0.sl2vl[(0, 0)] == [1] * 16 and s0.sl2vl[(1, 0)] == SWE


def test_qos_auto_repairs_an_enhanced_port0_at_reset_and_then_leaves_it(port_table_sets):
    """qos "auto" probes port 0 as a unit of its own (its VLs are its own): at reset its
    SL2VL tables send SL 8-15 to VLs it does not run, so it gets what --qos writes (OpenSM's
    tables, masked into its VLs); once written, a sweep sends nothing there."""
    t = _transport()
    r = sweep.sweep(t, sweep.SweepOptions())
    assert r.problems == []
    s0, s1 = t.sim.node("S0"), t.sim.node("S1")
    osm = [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7]  # OpenSM's default in VL0-7 (port 0's VLCap)
    assert all(s0.sl2vl[(i, 0)] == osm for i in range(s0.num_ports + 1))
    assert s0.vlarb[(0, "low")][:3] == [(0, 0), (1, 4), (2, 4)]
    assert not any(o == 0 for _i, o in s1.sl2vl) and s1.vlarb[(0, "low")][:2] == [(0, 0), (0, 0)]
    del port_table_sets[:]
    again = sweep.sweep(t, sweep.SweepOptions())
    assert again.problems == [] and port_table_sets == []


def test_diff_against_the_plan_reads_port0_tables_back(tmp_path):
    """`smagent diff plan.json` after the sweep: an enhanced port 0's planned SL2VL pairs and
    VLArb parts are read back (the snapshot asks for them), so nothing shows as drift."""
    t = _transport()
    s = api.Session(t, state_dir=str(tmp_path / "state"))
    plan = tmp_path / "plan.json"
    records = list(s.sweep(dry_run=True).plan_records(detail=True))
    guid = f"0x{t.sim.node('S0').guid:016x}"
    assert any(r["guid"] == guid and r["table"] == "SL2VL" and r["out_port"] == 0 for r in records)
    plan.write_text(json.dumps({"plan": records}))
    assert s.diff(plan).records != []
    s.sweep()
    assert s.diff(plan).records == []


def test_with_optimized_sl2vl_mapping_port0_keeps_its_own_pair():
    """A switch that takes all-input-ports SL2VL Sets gets them for its external outputs; its
    enhanced port 0 is written pair by pair, so (0, 0) keeps the sw0 table."""
    fabric = topogen.fat_tree_2(4)
    for s in fabric.switches():
        s.caps.update(enhanced_port0=1, optimized_sl2vl_mapping=1)
    t = SimTransport(netfile.dumps(fabric), link_reset="iba")
    policy = qospolicy.parse(POLICY, "q")
    r = sweep.sweep(t, sweep.SweepOptions(qos_policy=policy))
    assert r.problems == [] and any(c.all_inputs for c in r.link_changes)
    assert not any(c.all_inputs and c.modifier & 0xFF == 0 for c in r.link_changes)
    for n in t.sim.switches():
        assert n.sl2vl[(0, 0)] == SW0, n.name
        assert all(n.sl2vl[(i, o)] == SWE for i in range(n.num_ports + 1) for o in range(n.num_ports + 1)
                   if (i, o) != (0, 0)), n.name
    assert sweep.sweep(t, sweep.SweepOptions(qos_policy=policy)).link_changes == []
