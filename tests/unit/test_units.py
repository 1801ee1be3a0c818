"""One set of units (issue item 3): plan text shows a coded PortInfo field in its human unit
(MTU bytes, VL counts, states by name), plan JSON gives the code and that name, and the API
hands the coded fields out as enums (mad.codes)."""
from __future__ import annotations

import smagent
from mad import codes
from mad.attributes import PortState
from smagent.sweep import desired


def test_value_names():
    assert codes.value_name("neighbor_mtu", 4) == "2048 bytes" and codes.value_name("mtu_cap", 9) == "undefined (9)"
    assert codes.value_name("operational_vls", 3) == "4 VLs" and codes.value_name("vl_cap", 1) == "1 VL"
    assert codes.value_name("port_state", 4) == "ACTIVE" and codes.value_name("port_physical_state", 5) == "LinkUp"
    assert codes.value_name("link_width_active", 2) == "4X" and codes.value_name("link_speed_active", 4) == "10.0 Gbps"
    assert codes.value_name("lid", 4) is None
    assert codes.value_text("lid", 4) == "4" and codes.value_text("gid_prefix", 0xFE80 << 48) == "0xfe80000000000000"
    assert codes.Mtu(4).bytes == 2048 and codes.Vls.VL0_7.data_vls == 8


def test_plan_text_and_json_agree_on_units():
    with smagent.connect("sim") as s:
        s.sweep()
        plan = s.plan(desired.parse({"links": {"max_mtu": 2048, "max_vls": 4}}, "caps"))
    line = next(x for x in plan.plan_lines() if "neighbor_mtu" in x)
    assert "neighbor_mtu 4096 bytes -> 2048 bytes" in line and "operational_vls 8 VLs -> 4 VLs" in line, line
    recs = {r["field"]: r for r in plan.plan_changes(detail=True) if r["table"] == "PortInfo"}
    mtu, vls = recs["neighbor_mtu"], recs["operational_vls"]
    assert (mtu["old"], mtu["new"], mtu["old_name"], mtu["new_name"]) == (5, 4, "4096 bytes", "2048 bytes")
    assert (vls["old"], vls["new"], vls["old_name"], vls["new_name"]) == (4, 3, "8 VLs", "4 VLs")


def test_fresh_port_states_by_name_in_both():
    with smagent.connect("sim") as s:
        plan = s.plan()
    assert any("port_state INIT -> ARMED -> ACTIVE" in x for x in plan.plan_lines())
    st = next(r for r in plan.plan_changes(detail=True) if r.get("field") == "port_state")
    assert (st["old"], st["new"], st["old_name"], st["new_name"]) == (2, 4, "INIT", "ACTIVE")


def test_api_gives_enums():
    with smagent.connect("sim") as s:
        s.sweep()
        pi = s.query("portinfo", "H1")
    assert pi.port_state is PortState.ACTIVE and pi.port_state == 4
    assert isinstance(pi.neighbor_mtu, codes.Mtu) and pi.neighbor_mtu.bytes == 4096
    assert isinstance(pi.operational_vls, codes.Vls) and pi.operational_vls.data_vls == 8
    assert isinstance(pi.link_width_active, codes.LinkWidth) and pi.link_width_active == codes.LinkWidth.X4
    assert isinstance(pi.link_speed_active, codes.LinkSpeed)
    assert codes.as_enum("neighbor_mtu", 9) == 9 and type(codes.as_enum("neighbor_mtu", 9)) is int
