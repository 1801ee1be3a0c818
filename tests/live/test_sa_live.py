"""The SA of `smagent --transport umad run` on ibsim, against OpenSM's on the same fabric:
every `saquery` form whose answer fits one MAD (ClassPortInfo, NodeRecord, PortInfoRecord,
PathRecord by LIDs for a seeded sample of pairs, SMInfoRecord, LinkRecord, SwitchInfoRecord,
GUIDInfoRecord)
answers, and decodes to the same fields as OpenSM 3.3's answer, field by field; so do the
table records (P_KeyTableRecord, SLtoVLMappingTableRecord, VLArbitrationTableRecord) against
`opensm -Q`.

OpenSM runs first, alone, on the ibsim; then it is stopped and `smagent run` takes the
fabric. The two SMs may give nodes different LIDs, so queries name nodes (each SM's LIDs
come from `ibnetdiscover` under it) and LIDs in the answers are compared as the nodes
they name. What differs on purpose: ClassPortInfo's CapabilityMask/CapabilityMask2 (we
claim neither IsNotice nor IsFullPortInfoRecord, which we do not serve:
test_sa_aliases_live compares the bits) and ActCount (a counter of each SM's own SMPs).
"""
from __future__ import annotations

import ipaddress
import random
import re

import pytest

from sa_harness import OPENSM, SA_MARKS, Proc, lid_map, opensm_then_ours, records, saquery, start_sa, wait_for_sa
from sm_harness import procs  # noqa: F401 (the fixture)
from smagent.model import netfile, topogen
from sa_harness import DIFFERENT_ON_PURPOSE, LID_FIELDS, _junk

pytestmark = SA_MARKS

# fields holding a LID: compared as the node (and port) that LID names


def gid(sim, lid: int) -> str:
    """The GID (default prefix) of the port at `lid`, as saquery takes it."""
    out = sim.run(["smpquery", "nodeinfo", str(lid)]).stdout
    return str(ipaddress.IPv6Address(0xFE80 << 112 | int(re.search(r"PortGuid:\.*(0x[0-9a-f]+)", out).group(1), 16)))


def queries(sim, lids, rng_pairs):
    """(name, saquery arguments) of every form compared; nodes by name, LIDs from `lids`."""
    cas = sorted(k for k in lids if k[1])
    sw = min(k for k in lids if not k[1])
    q = [("classportinfo", ["-c"]), ("smir", ["SMIR"]),
         ("node ca", ["NR", lids[cas[1]]]), ("node switch", ["NR", lids[sw]]),
         ("portinfo ca", ["PIR", lids[cas[1]]]), ("switchinfo", ["SWIR", lids[sw]]),
         ("links from a ca", ["LR", lids[cas[1]]]), ("guidinfo switch", ["GIR", lids[sw]])]
    # a CA port's blocks one by one: all four (GUIDCap 32 under ibsim) are two RMPP segments,
    # and saquery under umad2sim neither sees the second nor ACKs (docs/PITFALLS.md)
    q += [(f"guidinfo ca block {b}", ["GIR", f"{lids[cas[1]]}/{b}"]) for b in (0, 3)]
    for a, b in rng_pairs:
        q.append((f"path {a}->{b}", ["-p", "--slid", lids[a], "--dlid", lids[b]]))
    a, b = rng_pairs[0]
    if not lids.lmc.get(lids[a]):  # with LMC the four pairings are two RMPP segments, which saquery under
        # umad2sim never ACKs (docs/PITFALLS.md): test_paths_between_ports_with_lmc_come_in_opensms_order asks them
        q.append((f"path by GIDs {a}->{b}", ["-p", "--sgid-to-dgid", f"{gid(sim, lids[a])}-{gid(sim, lids[b])}"]))
    # components OpenSM takes no notice of (and does not echo), an SL asked for, a loopback
    for extra in (["--service_id", "0x1234"], ["--tclass", "3"], ["--flow_label", "5"], ["--hop_limit", "1"],
                  ["--qos_class", "1"], ["--sl", "4"]):
        q.append((f"path {a}->{b} {' '.join(extra)}", ["-p", "--slid", lids[a], "--dlid", lids[b], *extra]))
    q.append((f"path {a}->{a}", ["-p", "--slid", lids[a], "--dlid", lids[a]]))
    if lids.lmc.get(lids[cas[1]]):  # a port's records by its second LID
        q += [("node by its 2nd LID", ["NR", lids[cas[1]] + 1]), ("portinfo by its 2nd LID", ["PIR", lids[cas[1]] + 1])]
    return q



def answers(sim, qs, lids):
    by_lid = {v + i: f"{d}:{p}" + (f"+{i}" if i else "") for (d, p), v in lids.items()
              for i in range(1 << lids.lmc.get(v, 0) if p else 1)}
    out = {}
    for name, args in qs:
        recs = [r for r in records(saquery(sim, *args).stdout) if not _junk(r)]
        assert recs, f"{name}: no record in saquery's answer"
        out[name] = [{k: (by_lid.get(int(v, 0), f"unknown LID {v}") if k in LID_FIELDS and v.strip("0x") else v)
                      for k, v in r.items() if k not in DIFFERENT_ON_PURPOSE} for r in recs]
    return out


def client_view(sim, lids, node) -> tuple:
    """What `smagent sa` reads from the SA (ours or OpenSM's: a one-MAD table, RMPP by
    the kernel, arrives whole): the node's NodeRecord and the SA's ClassPortInfo version."""
    (rec,) = sim.smagent("sa", "nodes", lids[node], "--json").json()["items"]
    cpi = sim.smagent("sa", "classportinfo", "--json").json()["items"][0]
    return {k: v for k, v in rec.items() if k != "lid"}, cpi["class_version"], cpi["redirect_qp"]


@pytest.mark.parametrize("shape,lmc", [("ft2", 0), ("ft3", 0), ("ft2", 1)])
def test_saquery_answers_like_opensm(tmp_path, ibsim, procs, shape, lmc):
    """With LMC 1 a port's records by its second LID too (the PathRecords between two ports
    with LMC: test_paths_between_ports_with_lmc_come_in_opensms_order)."""
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4) if shape == "ft2" else topogen.fat_tree_3(4)))
    sim = ibsim(net)
    osm_dir = tmp_path / "opensm"
    osm = Proc([OPENSM, "-l", str(lmc), "-f", str(osm_dir / "opensm.log")], sim.opensm_env(osm_dir), osm_dir,
               osm_dir / "stdout")
    procs.append(osm)
    wait_for_sa(sim, "OpenSM", osm)
    lids_osm = lid_map(sim)
    cas = sorted(k for k in lids_osm if k[1])
    rng = random.Random(24)
    pairs = [tuple(rng.sample(cas, 2)) for _ in range(4)] + [(cas[0], min(k for k in lids_osm if not k[1]))]
    want = answers(sim, queries(sim, lids_osm, pairs), lids_osm)
    client_osm = client_view(sim, lids_osm, cas[1])
    osm.stop()

    start_sa(sim, tmp_path, procs, "--lmc", lmc)
    lids = lid_map(sim)
    got = answers(sim, queries(sim, lids, pairs), lids)
    assert client_view(sim, lids, cas[1]) == client_osm  # `smagent sa` reads both SAs alike
    wrong = {name: (got[name], want[name]) for name in want if got[name] != want[name]}
    assert not wrong, "\n".join(f"{n}:\n  smagent {g}\n  OpenSM  {w}" for n, (g, w) in wrong.items())


def test_all_node_records_arrive_whole_through_our_rmpp_receiver(tmp_path, ibsim, procs):
    """`smagent sa nodes` (GetTable, many RMPP segments, ACKed by our receiver) gives one
    NodeRecord per LID-carrying port, exactly the ports ibnetdiscover finds; a PathRecord
    by GUIDs through the same client equals the one by LIDs; `saquery LFTR` gives every
    switch's LFT as ibroute reads it."""
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net)
    start_sa(sim, tmp_path, procs)
    lids = lid_map(sim)
    got = sim.smagent("sa", "nodes", "--json").json()
    assert got["count"] == len(lids) and got["count"] * 112 > 3 * 200  # several segments' worth
    assert all("m_key" not in r and "sm_key" not in r for r in got["items"])
    # umad2sim carries 224 bytes of a 256-byte MAD (docs/PITFALLS.md): the last 32 bytes of
    # every full segment (table bytes 168..200 of each 200) are lost there. Every record
    # clear of those bytes must be exactly ibnetdiscover's; on a real HCA all are.
    intact = [r for i, r in enumerate(got["items"])
              if got["items"] and not any(200 * k + 168 < 112 * (i + 1) and 112 * i < 200 * k + 200
                                          for k in range(-(-len(got["items"]) * 112 // 200) - 1))]
    assert len(intact) >= len(lids) // 3
    want = {(d, p): lid for (d, p), lid in lids.items()}
    assert all(want.get((r["node_string"], r["local_port_num"])) == r["lid"] for r in intact), intact
    cas = sorted(k for k in lids if k[1])
    by_lid = sim.smagent("sa", "paths", lids[cas[0]], lids[cas[-1]], "--json").json()["items"]
    guid = {lids[k]: int(re.search(r"PortGuid:\.*(0x[0-9a-f]+)",
                                   sim.run(["smpquery", "nodeinfo", str(lids[k])]).stdout).group(1), 16)
            for k in (cas[0], cas[-1])}
    by_guid = sim.smagent("sa", "paths", f"{guid[lids[cas[0]]]:#018x}", f"{guid[lids[cas[-1]]]:#018x}",
                          "--json").json()
    assert len(by_lid) == 1 and by_guid["items"] == by_lid
    ports = sim.smagent("sa", "portinfo", "--json").json()
    assert ports["count"] > got["count"]  # every switch port too: the largest table
    text = sim.smagent("sa", "sminfo").stdout
    assert "sm_state" in text and "sm_key" not in text
    # LinearForwardingTableRecords: what ibroute reads from each switch
    for (desc, port), lid in lids.items():
        if port:
            continue
        lftr = saquery(sim, "LFTR", lid).stdout
        from_sa = {int(a): int(b) for a, b in re.findall(r"^\t\t(\d+)\t(\d+)$", lftr, re.M) if int(b) != 255}
        routes = sim.run(["ibroute", "-n", str(lid)]).stdout
        from_switch = {int(a, 16): int(b) for a, b in re.findall(r"^(0x[0-9a-f]+) (\d+)", routes, re.M)}
        assert from_sa == from_switch and from_sa, desc


def table_queries(lids):
    """(name, saquery arguments) of the table-record forms whose answer fits one MAD (a CA
    port's SL2VL has one record; P_Key blocks and VLArb parts are named whole)."""
    ca = sorted(k for k in lids if k[1])[1]
    sw = min(k for k in lids if not k[1])
    key = ["--smkey", "1"]  # P_KeyTableRecords go only to a requester with the SM_Key (both SMs' default)
    return [("pkeys ca", key + ["PKTR", f"{lids[ca]}/{ca[1]}/0"]), ("pkeys switch", key + ["PKTR", f"{lids[sw]}/0/0"]),
            ("sl2vl ca", ["SL2VL", f"{lids[ca]}//"]), ("sl2vl switch", ["SL2VL", f"{lids[sw]}/1/2"]),
            ("sl2vl switch port 0", ["SL2VL", f"{lids[sw]}/0/3"]),
            ("vlarb ca", ["VLAR", f"{lids[ca]}/{ca[1]}/1"]), ("vlarb switch low", ["VLAR", f"{lids[sw]}/2/1"]),
            ("vlarb switch high", ["VLAR", f"{lids[sw]}/2/3"])]


def test_table_records_answer_like_opensm_with_qos(tmp_path, ibsim, procs):
    """P_KeyTableRecord, SLtoVLMappingTableRecord and VLArbitrationTableRecord against
    `opensm -Q`, which writes the QoS tables smagent's default (qos auto) writes on ibsim's
    unusable ones: field by field. smagent runs first, on the fresh fabric, where it reads
    or writes every table (on a fabric already configured, qos auto reads only its probes,
    and a table never read has no record); without the SM_Key a PKTR query is refused by
    both."""
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net)
    ours = start_sa(sim, tmp_path, procs)
    lids = lid_map(sim)
    got = answers(sim, table_queries(lids), lids)
    refused = saquery(sim, "PKTR", f"{lids[min(k for k in lids if not k[1])]}/0/0", check=False)
    ours.stop()
    assert refused.returncode != 0 and "SA_ERR_REQ_INVALID" in refused.stdout + refused.stderr

    osm_dir = tmp_path / "opensm"
    osm = Proc([OPENSM, "-Q", "-f", str(osm_dir / "opensm.log")], sim.opensm_env(osm_dir), osm_dir,
               osm_dir / "stdout")
    procs.append(osm)
    wait_for_sa(sim, "OpenSM", osm)
    lids_osm = lid_map(sim)
    want = answers(sim, table_queries(lids_osm), lids_osm)
    assert saquery(sim, "PKTR", f"{lids_osm[min(k for k in lids_osm if not k[1])]}/0/0", check=False).returncode
    assert any(r.get("Weight", "").strip("0| ") for recs in want.values() for r in recs)  # tables, not zeros
    wrong = {name: (got[name], want[name]) for name in want if got[name] != want[name]}
    assert not wrong, "\n".join(f"{n}:\n  smagent {g}\n  OpenSM  {w}" for n, (g, w) in wrong.items())


def test_multipath_records_through_our_client(tmp_path, ibsim, procs):
    """SubnAdmGetMulti (`smagent sa multipaths`: a MultiPathRecord with its GIDs, sent as one
    RMPP segment, ACKed by the SA) answers every source-destination pair's PathRecord, each
    the one `smagent sa paths` gets for that pair (NumbPath 0); NumbPath bounds the answer."""
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net)
    start_sa(sim, tmp_path, procs)
    lids = lid_map(sim)
    cas = sorted(k for k in lids if k[1])[:3]
    guids = ["0x" + re.search(r"PortGuid:\.*0x([0-9a-f]+)", sim.run(["smpquery", "nodeinfo", str(lids[k])]).stdout)
             .group(1).rjust(16, "0") for k in cas]
    got = sim.smagent("sa", "multipaths", "--sources", "2", *guids, "--json").json()["items"]
    want = [dict(r, num_path=0) for s in guids[:2]
            for r in sim.smagent("sa", "paths", s, guids[2], "--json").json()["items"]]
    assert len(want) == 2 and got == want
    one = sim.smagent("sa", "multipaths", "--sources", "2", "--num-path", "1", *guids, "--json").json()["items"]
    assert one == want[:1]


def test_paths_between_ports_with_lmc_come_in_opensms_order(tmp_path, ibsim, procs):
    """With LMC 1, a PathRecord GetTable between two ports by GUID (`smagent sa paths`,
    our RMPP receiver) holds the LID-offset pairs first, as OpenSM's; OpenSM's answer holds
    more than those two (four: the other pairings, Preference 2; under umad2sim only its
    first MAD arrives, and the third record's tail is lost there, docs/PITFALLS.md), as
    ours: the last, whole in our short last segment, is base to base+1's reverse, Preference 2."""
    from ibsim_harness import run_smagent

    def paths(sim):
        lids = lid_map(sim)
        guids = [f"0x{int(ipaddress.IPv6Address(gid(sim, lids[(h, 1)]))) & (1 << 64) - 1:016x}" for h in ("H1", "H5")]
        r = run_smagent(["--transport", "umad", "sa", "paths", *guids, "--json"], env=dict(sim.env, SIM_HOST="H1"),
                        cwd=sim.cwd)
        return lids[("H1", 1)], lids[("H5", 1)], [(i["slid"], i["dlid"], i["preference"]) for i in r.json()["items"]]

    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net)
    (a, b, want), (a2, b2, got) = opensm_then_ours(sim, tmp_path, procs, paths, ["-l", 1], ["--lmc", 1])
    assert want[:2] == [(a, b, 0), (a + 1, b + 1, 0)] and len(want) >= 3
    assert got[:2] == [(a2, b2, 0), (a2 + 1, b2 + 1, 0)] and len(got) == 4 and got[3] == (a2 + 1, b2, 2)


def test_sminfo_records_of_a_standby_opensm_answer_like_opensm(tmp_path, ibsim, procs):
    """A second OpenSM (priority 1, on H1) joins as STANDBY under a master of priority 10:
    OpenSM's SA and ours list both SMs alike (`saquery SMIR`, and by the standby's LID),
    once the master has seen the standby settle (OpenSM's does at its next sweep, every 2 s
    here, ours within a poll); ActCount differs on purpose."""
    import time

    def standby(name):
        d = tmp_path / name
        p = Proc([OPENSM, "-p", "1", "-f", str(d / "opensm.log")], dict(sim.opensm_env(d), SIM_HOST="H1"), d,
                 d / "stdout")
        procs.append(p)
        return p

    def answers(wait):
        start = time.monotonic()
        while True:  # the table and the standby's own record both settled (asked one after the other)
            rows = records(saquery(sim, "SMIR").stdout)
            own = records(saquery(sim, "SMIR", lid_map(sim)[("H1", 1)]).stdout)
            if [r["SMState"] for r in rows + own] == ["3", "2", "2"] or time.monotonic() > start + wait:
                break
            time.sleep(0.5)
        return [{k: v for k, v in r.items() if k != "ActCount"} for r in rows + own]

    def opensms(attempt):
        osm_dir = tmp_path / f"opensm{attempt}"
        # sweeping every 2 s, it sees the standby settle soon (its default: within 10 s)
        osm = Proc([OPENSM, "-p", "10", "-s", "2", "-f", str(osm_dir / "opensm.log")], sim.opensm_env(osm_dir),
                   osm_dir, osm_dir / "stdout")
        procs.append(osm)
        wait_for_sa(sim, "OpenSM", osm)
        sb = standby(f"standby{attempt}")
        # within 15 s alone; later on a loaded machine, and never where its sweep waits on
        # an SMP that never comes back (its log evicts one at exit: 1 of 31 runs alone here,
        # 2 of 3 runs of the whole suite)
        rows = answers(45)
        sb.stop()
        osm.stop()
        return rows

    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net)
    want = opensms(1)
    if len(want) != 3:  # OpenSM's stall, not what this test compares: a fresh pair once more
        want = opensms(2)
    start_sa(sim, tmp_path, procs, "--priority", "10")
    standby("standby3")
    got = answers(90)
    assert [(r["Priority"], r["SMState"]) for r in want] == [("10", "3"), ("1", "2"), ("1", "2")]
    assert got == want
