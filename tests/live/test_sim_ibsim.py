"""Differential test: the simulator and a live ibsim, asked the same directed-route
questions by the same paths, give the same answers.

ibsim is driven with infiniband-diags (`smpdump` for the raw 64-byte data and the
status word, `smpquery` for its decoded text). Every difference found is listed in
KNOWN_DIFFERENCES with which side follows the specification; anything else fails.
"""
import re

import pytest

from mad import smp
from mad.attributes import AttrID, NodeType, layout_for
from mad.header import Method
from smagent.sim import SimFabric

from ibsim_harness import IbSim, ibsim_available, skip_reason
from sim_program import dr_paths

pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]

NETFILES = ["vectors/ibsim-2sw4hca.net", "vectors/ibsim-36port.net"]

# (attribute, field) -> why the two sides differ, for ports whose link is down
UNLINKED_PORT_DIFFERENCES = {
    # ibsim reports LocalPhyErrors 4 on switch ports without a cable (a counter of its own
    # making); nothing has happened on the link, the simulator reports 0.
    "local_phy_errors",
    # ibsim drops CapabilityMask bit 22 (IsCapabilityMaskNoticeSupported) on a CA port
    # without a cable; the mask describes the port's SMA, not its link: the simulator
    # keeps it.
    "capability_mask",
}


@pytest.fixture(scope="module", params=NETFILES)
def pair(request, tmp_path_factory):
    from pathlib import Path
    net = Path(__file__).parents[1] / request.param
    ib = IbSim(net, tmp_path_factory.mktemp("ibsim"))
    ib.start()
    try:
        yield ib, SimFabric.load(net, link_reset="ibsim")
    finally:
        ib.stop()


def smpdump(ib, path, attr, mod):
    """(status word or None if unanswered, 64 data bytes) as ibsim answered."""
    res = ib.run(["smpdump", "-D", ",".join(map(str, path)), hex(attr), str(mod)], check=False, timeout=30)
    words = []
    status = None
    for line in res.stdout.splitlines():
        m = re.match(r"SMP status: (0x[0-9a-f]+)", line)
        if m:
            status = int(m.group(1), 16)
        elif re.fullmatch(r"([0-9a-f]{4} ?)+", line.strip()):
            words += line.split()
    return status, bytes.fromhex("".join(words))


def ours(sim, path, attr, mod):
    raw = sim.handle(smp.dr(Method.GET, attr, path, mod).encode(), sim.default_port())
    if raw is None:
        return None, None
    resp = smp.decode(raw)
    return resp.status_word, resp.data


def queries(sim):
    """Every (path, attribute, modifier, node, port) worth asking in this fabric."""
    paths = dr_paths(sim, sim.default_port())
    for name, path in paths.items():
        node = sim.node(name)
        yield path, AttrID.NODE_INFO, 0, node, None
        yield path, AttrID.NODE_DESCRIPTION, 0, node, None
        for port in range(0 if node.is_switch else 1, node.num_ports + 1):
            yield path, AttrID.PORT_INFO, port, node, port
        if node.is_switch:
            yield path, AttrID.SWITCH_INFO, 0, node, None
            yield path, AttrID.LINEAR_FORWARDING_TABLE, 0, node, None
            yield path, AttrID.P_KEY_TABLE, 0, node, None
        else:
            yield path, AttrID.SWITCH_INFO, 0, node, None  # 0x000C from both


def test_smpdump_answers_agree(pair):
    ib, sim = pair
    n = 0
    for path, attr, mod, node, port in queries(sim):
        theirs_status, theirs = smpdump(ib, path, attr, mod)
        our_status, data = ours(sim, path, attr, mod)
        where = f"{node.name} {layout_for(attr).name} path {path} modifier {mod}"
        assert theirs_status == our_status, where
        if our_status != 0x8000:
            continue
        a, b = layout_for(attr).decode(data), layout_for(attr).decode(theirs)
        differing = {f for f in a.LAYOUT.names if getattr(a, f) != getattr(b, f)}
        if port is not None and port != 0 and node.peers[port] is None:
            differing -= UNLINKED_PORT_DIFFERENCES
        assert not differing, (where, {f: (getattr(a, f), getattr(b, f)) for f in differing})
        n += 1
    assert n > 20


def test_random_forwarding_table_ibsim_never_answers(pair):
    """ibsim has no RFT handler and drops the SMP; IBA wants an answer, and with
    RandomFDBCap 0 the answer is 0x000C (attribute not supported)."""
    ib, sim = pair
    path = dr_paths(sim, sim.default_port())[sim.switches()[0].name]
    assert smpdump(ib, path, AttrID.RANDOM_FORWARDING_TABLE, 0)[0] is None
    assert ours(sim, path, AttrID.RANDOM_FORWARDING_TABLE, 0)[0] == 0x800C


def smpquery(ib, what, path, *extra):
    res = ib.run(["smpquery", "-D", what, ",".join(map(str, path)), *map(str, extra)], timeout=30)
    out = {}
    for line in res.stdout.splitlines():
        m = re.match(r"^(\w[\w ]*?):\.+(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


def _num(text):
    return int(text, 0)


NODEINFO_NAMES = {"BaseVers": "base_version", "ClassVers": "class_version", "NumPorts": "num_ports",
                  "SystemGuid": "system_image_guid", "Guid": "node_guid", "PortGuid": "port_guid",
                  "PartCap": "partition_cap", "DevId": "device_id", "Revision": "revision",
                  "LocalPort": "local_port_num", "VendorId": "vendor_id"}
SWITCHINFO_NAMES = {"LinearFdbCap": "linear_fdb_cap", "RandomFdbCap": "random_fdb_cap",
                    "McastFdbCap": "multicast_fdb_cap", "LinearFdbTop": "linear_fdb_top",
                    "DefPort": "default_port", "DefMcastPrimPort": "default_multicast_primary_port",
                    "DefMcastNotPrimPort": "default_multicast_not_primary_port", "LifeTime": "life_time_value",
                    "StateChange": "port_state_change", "LidsPerPort": "lids_per_port",
                    "PartEnforceCap": "partition_enforcement_cap", "FilterRawInbound": "filter_raw_inbound_cap",
                    "FilterRawOutbound": "filter_raw_outbound_cap", "EnhancedPort0": "enhanced_port0",
                    "MulticastFDBTop": "multicast_fdb_top"}
PORTINFO_STATES = {"Down": 1, "Initialize": 2, "Armed": 3, "Active": 4}
PHYS_STATES = {"Polling": 2, "Disabled": 3, "LinkUp": 5}


def test_smpquery_reads_the_same_values(pair):
    ib, sim = pair
    for name, path in dr_paths(sim, sim.default_port()).items():
        node = sim.node(name)
        text = smpquery(ib, "nodeinfo", path)
        mine = smp.decode(sim.handle(smp.dr(Method.GET, AttrID.NODE_INFO, path).encode(),
                                     sim.default_port())).attribute()
        assert {k: _num(text[k]) for k in NODEINFO_NAMES} == {k: getattr(mine, v) for k, v in NODEINFO_NAMES.items()}
        assert text["NodeType"] == ("Switch" if mine.node_type == NodeType.SWITCH else "Channel Adapter")
        port = 0 if node.is_switch else mine.local_port_num
        text = smpquery(ib, "portinfo", path, port)
        pi = smp.decode(sim.handle(smp.dr(Method.GET, AttrID.PORT_INFO, path, port).encode(),
                                   sim.default_port())).attribute()
        assert (PORTINFO_STATES[text["LinkState"]], PHYS_STATES[text["PhysLinkState"]], _num(text["Lid"]),
                _num(text["LocalPort"]), _num(text["LMC"])) == \
               (pi.port_state, pi.port_physical_state, pi.lid, pi.local_port_num, pi.lmc)
        if node.is_switch:
            text = smpquery(ib, "switchinfo", path)
            si = smp.decode(sim.handle(smp.dr(Method.GET, AttrID.SWITCH_INFO, path).encode(),
                                       sim.default_port())).attribute()
            assert {k: _num(text[k]) for k in SWITCHINFO_NAMES} == \
                   {k: getattr(si, v) for k, v in SWITCHINFO_NAMES.items()}


def test_ibnetdiscover_output_simulates_the_same_fabric(pair):
    """A topology read back from ibsim with ibnetdiscover (GUIDs given, nodes named by
    GUID) answers like the net file it came from: same GUIDs, ports and descriptions."""
    ib, sim = pair
    discovered = SimFabric.load(ib.run(["ibnetdiscover"]).stdout, link_reset="ibsim")
    name, port = sim.default_port()
    by_guid = {n.guid: n.name for n in discovered}
    there = (by_guid[sim.node(name).guid], port)
    for path in dr_paths(sim, (name, port)).values():
        for attr in (AttrID.NODE_INFO, AttrID.NODE_DESCRIPTION):
            raw = smp.dr(Method.GET, attr, path).encode()
            assert sim.handle(raw, (name, port))[64:128] == discovered.handle(raw, there)[64:128]
