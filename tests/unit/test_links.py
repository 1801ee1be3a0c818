"""Link configuration (smagent.linkconf) in the in-process simulator, whose ports start at
IBA reset values (smagent.sim.nodes, link_reset="iba"): NeighborMTU 256, VL0 only,
identity SL2VL, zero VLArb, the default partition as a limited member.

* after a sweep, an all-pairs trace of 4096-byte packets on every SL is delivered;
  with the link configuration left out (`links=False`) the same trace fails with the
  MTU and VL reasons;
* a second sweep sends no Set; a changed maximum MTU changes exactly the links whose
  MTU it caps;
* the planner's per-port values (MTU, VLs, HOQ, SL2VL masking) on mixed capabilities.
"""
from __future__ import annotations

import collections

import pytest

from mad import forwarding as fw
from mad.attributes import AttrID, NodeType
from smagent import linkconf as links, sweep, verify
from smagent.model import topogen
from smagent.sim.dataplane import Packet, pkey_matches
from smagent.transport.sim import SimTransport


def ca_ports(sim):
    return [(n.name, p) for n in sim.nodes.values() if not n.is_switch
            for p in range(1, n.num_ports + 1) if n.peers[p] is not None]


def all_pairs(sim, packet):
    """(delivered, Counter of drop reasons) of a trace between every two CA ports."""
    ports = ca_ports(sim)
    reasons = collections.Counter()
    ok = 0
    for src in ports:
        for dst in ports:
            if src == dst:
                continue
            lid = sim.node(dst[0]).lid_range(dst[1])[0]
            tr = sim.trace(src, lid, packet=packet)
            if tr.delivered:
                ok += 1
            else:
                reasons[tr.reason] += 1
    return ok, reasons, len(ports) * (len(ports) - 1)


@pytest.fixture(scope="module")
def swept():
    t = SimTransport(topogen.fat_tree_2(4))
    r = sweep.sweep(t, sweep.SweepOptions())
    assert r.problems == []
    return t, r


def test_every_sl_with_4096_byte_packets_after_a_sweep(swept):
    t, _r = swept
    for sl in range(15):  # SL15 maps to VL7 in OpenSM's table: a data VL too
        ok, reasons, total = all_pairs(t.sim, Packet(sl=sl, size=4096))
        assert ok == total, (sl, reasons)
    ok, reasons, total = all_pairs(t.sim, Packet(sl=15, size=4096))
    assert ok == total, reasons


def test_unconfigured_links_drop_with_mtu_and_vl_reasons():
    t = SimTransport(topogen.fat_tree_2(4))
    r = sweep.sweep(t, sweep.SweepOptions(links=False))  # LIDs, routes, ACTIVE; links at reset
    assert r.problems == [] and not r.link_changes
    ok, reasons, total = all_pairs(t.sim, Packet(sl=0, size=4096))
    assert ok == 0 and all("exceeds the link MTU of 256 bytes" in k for k in reasons), reasons
    ok, reasons, total = all_pairs(t.sim, Packet(sl=1, size=256))
    assert ok == 0 and all("SL 1 maps to VL1, but the link runs 1 data VL" in k for k in reasons), reasons
    ok, reasons, total = all_pairs(t.sim, Packet(sl=15, size=256))
    assert ok == 0 and all("maps to VL15" in k for k in reasons), reasons
    # the limited default partition: two limited members cannot talk
    ok, reasons, total = all_pairs(t.sim, Packet(sl=0, size=256))
    assert ok == 0 and all("P_Key 0x7fff is not in the receiving port's P_Key table" in k for k in reasons), reasons


def test_pkey_match_rule():
    assert pkey_matches(0xFFFF, 0x7FFF) and pkey_matches(0x7FFF, 0xFFFF) and pkey_matches(0xFFFF, 0xFFFF)
    assert not pkey_matches(0x7FFF, 0x7FFF)  # two limited members
    assert not pkey_matches(0x8001, 0x8002) and not pkey_matches(0x8000, 0x8000)  # base 0 is invalid


def test_second_sweep_sends_no_set(swept):
    t, r = swept
    s = r.summary()["sets"]
    assert s["sl2vl"] and s["vlarb"] and s["pkeys"] and s["portinfo"]
    sent = t.stats.sent
    again = sweep.sweep(t, sweep.SweepOptions())
    assert set(again.summary()["sets"].values()) == {0}, again.plan_lines()[:5]
    assert not again.link_changes and not again.port_changes
    assert again.stats["sent"] - sent > 0  # it did read


def test_ports_hold_opensm_values_after_a_sweep(swept):
    t, _r = swept
    for n in t.sim.nodes.values():
        for p in range(0 if n.is_switch else 1, n.num_ports + 1):
            pi = n.pi[p]
            peer = n.peers[p]
            if not n.is_switch or p == 0:
                assert pi.gid_prefix == links.DEFAULT_SUBNET_PREFIX and pi.subnet_timeout == 18
                assert n.pkeys[p][0] == 0xFFFF
            if p == 0 or peer is None:
                continue
            assert pi.neighbor_mtu == 5  # both ends' MTUCap: 4096
            assert pi.operational_vls == 4  # VLCap VL0-7 on both ends
            if n.is_switch:
                leaf = not peer[0].is_switch
                assert (pi.hoq_life, pi.vl_stall_count) == ((16, 7) if leaf else (18, 7)), (n.name, p)
            # OpenSM's SL2VL masked into VL0-7; VLArb low/high as OpenSM's QoS defaults
            tbl = n.sl2vl.get((0, p) if not n.is_switch else (0, p))
            assert tbl == [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7]
            assert n.vlarb[(p, "low")][:8] == [(0, 0)] + [(vl, 4) for vl in range(1, 8)]
            assert n.vlarb[(p, "high")][:8] == [(0, 4)] + [(vl, 0) for vl in range(1, 8)]


def test_max_mtu_changes_exactly_the_links_it_caps():
    # one host's port can do only 2048 bytes: its link runs 2048, every other link 4096.
    # Capping at 2048 then changes both ends of every other link and nothing else.
    t = SimTransport(topogen.fat_tree_2(4))
    small = t.sim.node("H0")
    small.pi[1].mtu_cap = 4
    peer, pport = small.peers[1]
    r = sweep.sweep(t, sweep.SweepOptions())
    assert r.problems == []
    linked = {(n.name, p) for n in t.sim.nodes.values() for p in range(1, n.num_ports + 1) if n.peers[p]}
    at_2048 = {("H0", 1), (peer.name, pport)}
    assert {(n, p) for n, p in linked if t.sim.node(n).pi[p].neighbor_mtu == 4} == at_2048
    plan = sweep.plan(t, sweep.SweepOptions(links=links.LinkOptions(max_mtu=2048)))
    changed = {(c.name, c.port): c.link_diff for c in plan.port_changes}
    names = {n.guid: n.name for n in t.sim.nodes.values()}
    assert {(names[c.guid], c.port) for c in plan.port_changes} == linked - at_2048
    assert all(d == {"neighbor_mtu": (5, 4)} for d in changed.values()), changed
    assert not plan.link_changes  # MTU alone moves no table
    # and a maximum at or above what the links run changes nothing
    assert not sweep.plan(t, sweep.SweepOptions(links=links.LinkOptions(max_mtu=4096))).port_changes


def test_planner_takes_the_smaller_end_and_the_cap():
    class PI:
        def __init__(self, **kw):
            self.__dict__.update({**dict(mtu_cap=5, vl_cap=5, operational_vls=1, capability_mask=0), **kw})

    class N:
        def __init__(self, guid, kind, ports):
            self.guid, self.node_type, self.ports = guid, kind, ports
            self.is_switch = kind == NodeType.SWITCH

    class Topo:
        pass

    sw = N(1, NodeType.SWITCH, {0: PI(), 1: PI(), 2: PI()})
    ca = N(2, NodeType.CA, {1: PI(mtu_cap=3, vl_cap=3)})
    sw2 = N(3, NodeType.SWITCH, {0: PI(), 1: PI(vl_cap=0)})
    topo = Topo()
    topo.nodes = {1: sw, 2: ca, 3: sw2}
    topo.links = {(1, 1): (2, 1), (2, 1): (1, 1), (1, 2): (3, 1), (3, 1): (1, 2)}
    o = links.LinkOptions()
    f = links.port_fields(topo, sw, 1, o)
    assert (f["neighbor_mtu"], f["operational_vls"], f["hoq_life"], f["vl_stall_count"]) == (3, 3, 16, 7)
    assert "gid_prefix" not in f
    f = links.port_fields(topo, sw, 2, o)
    assert (f["neighbor_mtu"], f["operational_vls"], f["hoq_life"]) == (5, 1, 18)  # VLCap 0 counts as 1
    assert links.port_fields(topo, sw, 0, o) == {"gid_prefix": 0xFE80000000000000, "subnet_timeout": 18}
    f = links.port_fields(topo, ca, 1, links.LinkOptions(max_mtu=1024, max_vls=2, subnet_prefix=0xFEC0 << 48))
    assert (f["neighbor_mtu"], f["operational_vls"], f["gid_prefix"]) == (3, 2, 0xFEC0 << 48)
    assert "hoq_life" not in f
    # OpenSM's VL mask: SL2VL entries folded into the VLs the port runs, VL15 kept
    assert links.qos._sl2vl_table(links.LinkOptions(sl2vl=tuple(range(16))), 3) == tuple(
        [0, 1, 2, 3] * 3 + [0, 1, 2, 15])


@pytest.mark.parametrize("kw, msg", [({"max_mtu": 3000}, "max MTU 3000"), ({"max_vls": 3}, "max VLs 3"),
                                     ({"sl2vl": (0,) * 15}, "sl2vl needs 16"),
                                     ({"vlarb_low": ((15, 1),)}, "vlarb_low"),
                                     ({"hoq_life": 32}, "hoq_life 32")])
def test_bad_options_are_named(kw, msg):
    with pytest.raises(links.LinkConfigError, match=msg):
        links.LinkOptions(**kw).check()


def test_dry_run_plan_lists_link_changes():
    t = SimTransport(topogen.two_switch())
    r = sweep.plan(t, sweep.SweepOptions())
    lines = r.plan_lines()
    assert any("gid_prefix 0x0000000000000000 -> 0xfe80000000000000" in x for x in lines)
    assert any("neighbor_mtu 256 bytes -> 4096 bytes" in x and "operational_vls 1 VL -> 8 VLs" in x for x in lines)
    assert any(x.startswith("SubnSet(SLtoVLMappingTable)") and "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15 -> "
               "0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7" in x for x in lines)
    assert any(x.startswith("SubnSet(VLArbitrationTable)") and "low 0-31" in x for x in lines)
    assert any(x.startswith("SubnSet(P_KeyTable)") and "[0] 0x7fff -> 0xffff" in x for x in lines)
    assert t.stats.snapshot()["sent"] and not any(k.startswith("SubnSet") for k in t.stats.snapshot().get("by_kind", {}))


def test_desired_state_links_section_drives_the_plan():
    from smagent.sweep import desired
    t = SimTransport(topogen.two_switch())
    assert sweep.sweep(t, sweep.SweepOptions()).problems == []
    ds = desired.parse({"links": {"max_mtu": 1024, "subnet_prefix": "0xfec0000000000000",
                                  "sl2vl": "0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7"}}, "d.yaml")
    assert ds.links.max_mtu == 1024 and ds.links.subnet_prefix == 0xFEC0000000000000
    r = sweep.plan(t, sweep.SweepOptions(desired=ds))
    diffs = [c.link_diff for c in r.port_changes]
    assert diffs and all(set(d) <= {"neighbor_mtu", "gid_prefix"} for d in diffs)
    assert all(d["neighbor_mtu"] == (5, 3) for d in diffs if "neighbor_mtu" in d)
    assert sum("gid_prefix" in d for d in diffs) == 4 + 2  # 4 CA ports, 2 switch ports 0
    assert not r.link_changes  # that SL2VL is what the ports hold already (VL0-7)


def test_desired_state_links_problems_are_listed():
    from smagent.sweep import desired
    with pytest.raises(desired.DesiredStateError) as e:
        desired.parse({"links": {"max_mtu": 3000, "qos": "yes", "nope": 1, "vlarb_low": "1-4"}}, "d.yaml")
    text = str(e.value)
    for msg in ("max MTU 3000", "qos: 'yes' is not true or false", "unknown key 'nope'", "'1-4' is not VL:WEIGHT"):
        assert msg in text, text


def test_query_renders_the_tables_readably():
    from mad.attributes import P_KeyTable, SLtoVLMappingTable, vlarb_block
    from smagent.commands import render
    text = render.attribute_text(P_KeyTable(p_keys=[0xFFFF, 0x7FFF, 0x8000] + [0] * 29))
    assert "[0]:" in text and "0xffff (full member, base 0x7fff)" in text and "0x7fff (limited member" in text
    assert "[2]" not in text  # base 0 is no P_Key
    text = render.attribute_text(SLtoVLMappingTable(sl_to_vl=list(range(16))))
    assert text.splitlines()[1].startswith("SL1:") and text.splitlines()[1].endswith("VL1")
    assert "VL15 (dropped: management VL)" in text.splitlines()[15]
    text = render.attribute_text(vlarb_block([(0, 0), (1, 4)]))
    assert text.splitlines() == ["[1]:".ljust(44, ".") + "VL1 weight 4"]
    assert render.jsonable(vlarb_block([(1, 4)]))["vl_0"] == 1  # --json keeps numbers


@pytest.mark.parametrize("args, msg", [(["--subnet-prefix", "zz"], "--subnet-prefix 'zz': not a number"),
                                       (["--subnet-prefix", hex(1 << 64)], "is not a 64-bit value"),
                                       (["--max-mtu", "3000"], "'3000' is not one of")])
def test_sweep_link_flags_refused_with_exit_2(args, msg):
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "smagent.cli", "sweep", *args], capture_output=True, text=True)
    assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr, r.stderr


# -- qos "auto" (the default): repair unusable SL2VL/VLArb tables, leave usable ones -------
def _table_sets(r):
    s = r.summary()["sets"]
    return s["sl2vl"], s["vlarb"]


def _sweep(q, reset="iba", topo=None):
    t = SimTransport(topo or topogen.fat_tree_2(4), link_reset=reset)
    return t, sweep.sweep(t, sweep.SweepOptions(links=links.LinkOptions(qos=q)))


def test_auto_leaves_usable_tables_for_a_probe_per_ca_port_and_switch():
    """ibsim's pre-set tables (the simulator's "ibsim" profile: SL i -> VL i mod 8, OpenSM's
    VLArb) carry every SL: "auto" writes none and reads one probe per CA port and per
    switch (one SL2VL table), not every output port's tables."""
    topo = topogen.fat_tree_2(4)
    _t, never = _sweep(False, "ibsim", topo)
    t, auto = _sweep("auto", "ibsim", topo)
    assert auto.problems == [] and _table_sets(auto) == (0, 0)
    units = links.qos_units(auto.topology, links.LinkOptions(), {})
    cas, switches = len(topo.cas()), len(topo.switches())
    assert len(units) == cas + switches  # every switch port runs VL0-7: one group each
    assert auto.stats["sent"] - never.stats["sent"] == cas + switches  # one SL2VL Get each
    _t, always = _sweep(True, "ibsim", topo)  # "always" reads every output port's tables
    assert always.stats["sent"] - never.stats["sent"] > 3 * (auto.stats["sent"] - never.stats["sent"])
    assert verify.verify(t, mcast=False).ok


def test_auto_repairs_reset_tables_as_always_does():
    t, auto = _sweep("auto")
    _t, always = _sweep(True)
    assert auto.problems == [] and _table_sets(auto) == _table_sets(always) != (0, 0)
    assert sorted(c.describe() for c in auto.link_changes) == sorted(c.describe() for c in always.link_changes)
    assert any("QoS tables (qos auto)" in n and "SL 8 -> VL8" in n for n in auto.notes), auto.notes
    for sl in (0, 7, 8, 14, 15):
        ok, reasons, total = all_pairs(t.sim, Packet(sl=sl, size=4096))
        assert ok == total, (sl, reasons)
    rep = verify.verify(t, mcast=False)
    assert rep.ok and "sl_unmapped" not in rep.defects, rep.defects
    again = sweep.sweep(t, sweep.SweepOptions())
    assert set(again.summary()["sets"].values()) == {0} and not again.notes


def test_auto_repairs_only_what_is_broken():
    """A CA port whose table sends SL 3 to a VL it does not run, and a switch whose probe
    pair does too: that CA port, and the switch's ports of that VL group, are read and
    written as --qos does; nothing else is read beyond the probes, nothing else written."""
    t, r = _sweep("auto", "ibsim")
    assert _table_sets(r) == (0, 0)
    sim = t.sim
    sim.node("H0").sl2vl[(0, 1)] = [0, 1, 2, 12] + [0] * 12
    sw = next(n for n in sim.nodes.values() if n.is_switch)
    linked = [p for p in range(1, sw.num_ports + 1) if sw.peers[p] is not None]
    sw.sl2vl[(linked[1], linked[0])] = [15] * 16  # the probe: first linked output, from the next input
    sw.vlarb[(linked[0], "high")] = [(0, 0)] * 64  # unread while the SL2VL probe is fine; written now
    again = sweep.sweep(t, sweep.SweepOptions())
    assert again.problems == []
    by_node = collections.Counter((c.name, c.kind) for c in again.link_changes)
    assert by_node[("H0", "sl2vl")] == 1 and by_node[("H0", "vlarb")] == 0  # H0's VLArb is OpenSM's
    # the group's tables are read and diffed as --qos does: the probe's output differs
    # (all its pairs are written), the other outputs hold OpenSM's tables already
    assert by_node[(sw.name, "sl2vl")] == sw.num_ports + 1
    assert by_node[(sw.name, "vlarb")] == 1  # the one that differs from OpenSM's
    assert {n for n, _k in by_node} == {"H0", sw.name}, by_node
    assert any("SL 3 -> VL12" in n or "SL 0 -> VL15" in n for n in again.notes), again.notes
    assert set(sweep.sweep(t, sweep.SweepOptions()).summary()["sets"].values()) == {0}
    for sl in range(16):
        ok, reasons, total = all_pairs(sim, Packet(sl=sl, size=2048))
        assert ok == total, (sl, reasons)


def test_auto_judges_vlarb_where_there_is_no_sl2vl_table():
    """A CA port without IsSLMappingSupported sends every SL on VL0: its probe is its VLArb
    tables, and an all-zero pair (the reset value) gives VL0 no weight."""
    topo = topogen.fat_tree_2(4)
    t = SimTransport(topo, link_reset="ibsim")
    h0 = t.sim.node("H0")
    h0.pi[1].capability_mask &= ~links.CAP_SL_MAPPING
    for table in ("low", "high"):
        h0.vlarb[(1, table)] = [(0, 0)] * 64
    r = sweep.sweep(t, sweep.SweepOptions())
    assert r.problems == []
    assert {(c.name, c.kind) for c in r.link_changes} == {("H0", "vlarb")}
    assert any("VLArbitration gives VL0 no weight" in n for n in r.notes), r.notes


def test_auto_judges_a_port_whose_vls_change_on_its_own():
    """A switch port whose OperationalVLs the sweep changes is probed by itself: its table
    was chosen for other VLs (here VL0-7 on a link capped to 2 VLs)."""
    topo = topogen.fat_tree_2(4)
    t, r = _sweep("auto", "ibsim", topo)
    sw = next(n for n in r.topology.switches())
    op_vls = {(sw.guid, p): sw.ports[p].operational_vls for p in sw.ports if p}
    first = min(p for _g, p in op_vls if (sw.guid, p) in r.topology.links)
    op_vls[(sw.guid, first)] = 2  # planned: VL0-1
    units = [u for u in links.qos_units(r.topology, links.LinkOptions(), op_vls) if u.ports[0][0].guid == sw.guid]
    alone = [u for u in units if u.data_vls == 2]
    assert len(alone) == 1 and len(alone[0].ports) == 1 and len(units) == 2
    (probe,) = [w for w in alone[0].ports[0] if w.kind == "sl2vl"]
    assert fw.sl2vl_from_modifier(probe.modifier)[1] == first and probe.value[:4] == (0, 1, 0, 1)


def test_auto_with_tables_of_ones_own_writes_them():
    assert links.LinkOptions().qos_mode == "auto"
    assert links.LinkOptions(sl2vl=tuple([0] * 16)).qos_mode == "always"
    assert links.LinkOptions(qos=False, sl2vl=tuple([0] * 16)).qos_mode == "never"
    assert links.options_from_mapping({"qos": "auto"}).qos_mode == "auto"
    assert links.options_from_mapping({"qos": True}).qos_mode == "always"
    with pytest.raises(links.LinkConfigError, match="qos 'sometimes' is not true, false or 'auto'"):
        links.LinkOptions(qos="sometimes").check()


@pytest.mark.parametrize("flag, sl2vl_sets", [([], True), (["--qos"], True), (["--no-qos"], False)])
def test_sweep_qos_flags(flag, sl2vl_sets):
    import json
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "smagent.cli", "sweep", "--json", *flag], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert bool(json.loads(r.stdout)["sets"]["sl2vl"]) == sl2vl_sets
