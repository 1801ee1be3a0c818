"""SwitchInfo.OptimizedSLtoVLMappingProgramming (IBA 14.2.5.4, 14.2.5.8; issue 28): where
a switch advertises it, the sweep writes an output port's SL2VL table for every input
port with one Set (AttributeModifier bit 17, as OpenSM's 0x20000 | out), not one Set per
(input, output) pair; where it does not (ibsim's switches, the simulator's default) the
bit is never sent and the simulator refuses it. The plan still lists every pair, marked
``all_inputs``; the backup and `lft restore` put every pair back; reads stay per pair.
In the in-process simulator (its switches start with the IBA reset identity tables)."""
import json

import pytest

from mad import forwarding as fw
from mad.attributes import AttrID, SLtoVLMappingTable, SwitchInfo
from mad.header import Method
from smagent import api, sweep as sweepmod, verify
from smagent.model import topogen
from smagent.sim import SimFabric
from smagent.sweep import planjson
from smagent.transport.base import Request
from smagent.transport.sim import SimTransport


def _transport(optimized: int, fabric=None) -> SimTransport:
    return SimTransport(SimFabric.from_fabric(fabric or topogen.fat_tree_2(4), optimized_sl2vl_mapping=optimized))


@pytest.mark.parametrize("optimized", [0, 1])
def test_the_simulator_takes_the_all_input_ports_set_only_where_it_advertises_it(optimized):
    t = _transport(optimized, topogen.two_switch())
    si = t.execute([Request.dr(Method.GET, AttrID.SWITCH_INFO, (0, 1))])[0].value(SwitchInfo)
    assert fw.sl2vl_optimized(si) is bool(optimized)
    table = SLtoVLMappingTable(sl_to_vl=[3] * 15 + [15])
    (rep,) = t.execute([Request.dr(Method.SET, AttrID.SL_TO_VL_MAPPING_TABLE, (0, 1),
                                   fw.sl2vl_all_inputs_modifier(2), table)])
    sw = t.sim.node(t.sim.switches()[0].name)
    held = [sw.sl2vl.get((i, 2), sw.sl2vl_default) for i in range(sw.num_ports + 1)]
    if optimized:
        assert rep.ok and rep.value(SLtoVLMappingTable) == table
        assert all(list(h) == table.sl_to_vl for h in held)  # every input port, this output port
        assert all(o == 2 for _i, o in sw.sl2vl)  # and no other output port
    else:
        assert not rep.ok and "0x801c" in str(rep.error)  # reserved bits: invalid field
        assert all(list(h) == list(range(16)) for h in held)  # nothing written


def _sl2vl_sets(t) -> int:
    return t.stats.by_kind["SubnSet(SLtoVLMappingTable)"]


def _pairs(records) -> set:
    return {(r["guid"], r["in_port"], r["out_port"], tuple(r["new"])) for r in records if r["table"] == "SL2VL"}


def test_a_sweep_writes_one_set_per_output_port_and_the_plan_still_lists_every_pair():
    plain, opt = _transport(0), _transport(1)
    r0 = sweepmod.sweep(plain, sweepmod.SweepOptions())
    r1 = sweepmod.sweep(opt, sweepmod.SweepOptions())
    assert r0.problems == [] and r1.problems == []
    switches = opt.sim.switches()
    out_ports = sum(n.num_ports for n in switches)  # every switch port is linked in this tree
    ca_ports = sum(1 for n in opt.sim.nodes.values() if not n.is_switch)
    assert _sl2vl_sets(plain) == out_ports * (switches[0].num_ports + 1) + ca_ports  # one per pair
    assert _sl2vl_sets(opt) == out_ports + ca_ports  # one per output port
    # the same pairs planned, with the same tables; the switches' marked all_inputs
    d0, d1 = list(r0.plan_records(detail=True)), list(r1.plan_records(detail=True))
    assert _pairs(d0) == _pairs(d1)
    assert not any(r.get("all_inputs") for r in d0)
    sw_guids = {f"0x{n.guid:016x}" for n in switches}
    assert all(r.get("all_inputs") is (True if r["guid"] in sw_guids else None)
               for r in d1 if r["table"] == "SL2VL")
    # the compact plan says so too, and expands back to exactly the detailed records
    compact = list(r1.plan_records())
    assert any(g.get("all_inputs") for g in compact if g["table"] == "SL2VLGroup")
    assert planjson.canonical(e for g in compact for e in planjson.expand(g)) == planjson.canonical(d1)
    # every pair holds it, read pair by pair: verify is clean, and a second sweep plans no SL2VL Set
    for n in switches:
        assert {(i, o) for i in range(n.num_ports + 1) for o in range(1, n.num_ports + 1)} <= set(n.sl2vl)
    assert api.Session(opt).verify().ok
    again = sweepmod.sweep(opt, sweepmod.SweepOptions(dry_run=True))
    assert not [c for c in again.link_changes if c.kind == "sl2vl"]


def test_the_backup_and_journal_record_the_all_input_ports_set_and_restore_puts_every_pair_back(tmp_path):
    state = tmp_path / "state"
    t = _transport(1)
    s = api.Session(t, state_dir=str(state))
    r = s.sweep(state_dir=str(state))
    assert r.problems == [] and r.backup_file
    opt = [c for c in r.link_changes if c.all_inputs]
    assert opt and all(c.same_as is None and c.also for c in opt)
    saved = [u for sw in json.loads(open(r.backup_file).read())["switches"].values() for u in sw.get("links", ())
             if u.get("all_inputs")]
    assert len(saved) == len(opt) and all(u["table"] == "sl2vl" and u["also"] for u in saved)
    (done,) = (state / "journals").glob("apply-*.journal")
    begin = json.loads(done.read_text().splitlines()[0])
    assert sum(1 for u in begin["blocks"] if u.get("all_inputs")) == len(opt)
    before = t.stats.by_kind["SubnSet(SLtoVLMappingTable)"]
    res = s.lft_restore(r.backup_file)
    assert res.ok, res.problems
    assert t.stats.by_kind["SubnSet(SLtoVLMappingTable)"] - before == res.sets_sent["sl2vl"] == len(
        [c for c in r.link_changes if c.kind == "sl2vl"])  # one Set per output port again
    assert any("not read before the sweep wrote them" in n for n in res.notes), res.notes
    for n in t.sim.switches():
        assert all(tab == list(range(16)) for tab in n.sl2vl.values()), n.name  # every pair, unread ones too


def test_a_topology_file_gives_a_switch_the_capability():
    """`# smagent: cap optimized_sl2vl_mapping=1` on a switch (what `--transport sim
    --topology FILE` reads): that switch advertises it and gets the one-Set form; the
    others keep one Set per pair."""
    from smagent.model import netfile
    fabric = topogen.two_switch()
    first = fabric.switches()[0]
    first.caps["optimized_sl2vl_mapping"] = 1
    t = SimTransport(netfile.dumps(fabric))
    r = sweepmod.sweep(t, sweepmod.SweepOptions())
    assert r.problems == []
    by_switch = {n.guid: n for n in t.sim.switches()}
    opt = {c.guid for c in r.link_changes if c.all_inputs}
    assert [by_switch[g].name for g in opt] == [first.name]
    assert all(not c.all_inputs for c in r.link_changes if c.guid != next(iter(opt)))
