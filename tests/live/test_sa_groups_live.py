"""Multicast groups by join on ibsim, with `smagent --transport umad run` as the SM: a
client on another node (SIM_HOST; its own umad agent for class 0x03) sends
SubnAdmSet(MCMemberRecord); the group's MFT entries appear, as `ibroute -M` reads them,
on every switch of its tree (the members' leaves and one spine) and nowhere else;
`saquery -g` shows the group; a join asking an MTU no link carries is refused; when the
members leave, the entries are gone from every switch."""
from __future__ import annotations

import re
import time

from ibsim_harness import run_smagent
from smagent.model import netfile, topogen
from sa_harness import SA_MARKS, assert_same, lid_map, opensm_then_ours, saquery, start_sa
from sm_harness import procs  # noqa: F401 (the fixture)

pytestmark = SA_MARKS

assert pytestmark


def mft(sim, lid: int) -> dict[int, set[int]]:
    """MLID -> ports, as `ibroute -M` reads a switch's MFT (an 'x' under each port)."""
    text = sim.run(["ibroute", "-M", str(lid)]).stdout
    cols: dict[int, int] = {}
    out: dict[int, set[int]] = {}
    for line in text.splitlines():
        if line.strip().startswith("Ports:"):
            cols = {m.start(): int(m.group()) for m in re.finditer(r"\d+", line)}
        m = re.match(r"^(0x[0-9a-fA-F]+)\s", line)
        if m and cols:
            out[int(m.group(1), 16)] = {p for pos, p in cols.items() if line[pos:pos + 1] == "x"}
    return out


def holders(sim, switches, mlid):
    return {name: ports for name, lid in switches.items() if (ports := mft(sim, lid).get(mlid))}


def wait_holders(sim, switches, mlid, done, seconds=30):
    deadline = time.monotonic() + seconds
    while True:
        got = holders(sim, switches, mlid)
        if done(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.3)


def test_join_from_another_node_programs_the_tree_and_leave_removes_it(tmp_path, ibsim, procs):
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net)
    start_sa(sim, tmp_path, procs)
    switches = {d: lid for (d, p), lid in lid_map(sim).items() if not p}

    def client(host, *args, check=True):
        return run_smagent(["--transport", "umad", "sa", *args], env=dict(sim.env, SIM_HOST=host), cwd=sim.cwd,
                           check=check, timeout=60)

    (rec,) = client("H5", "join", "--json").json()["items"]  # a new group: MGID and MLID assigned
    mgid, mlid = rec["mgid"], rec["mlid"]
    assert 0xC000 < mlid <= 0xC3FF and mgid >> 120 == 0xFF and rec["join_state"] == 1
    mgid_text = f"{mgid:#034x}"
    (rec2,) = client("H2", "join", mgid_text, "--json").json()["items"]
    assert (rec2["mlid"], rec2["mgid"]) == (mlid, mgid) and rec2["port_gid"] != rec["port_gid"]
    got = wait_holders(sim, switches, mlid, lambda g: {"L1", "L2"} <= set(g))
    spines = {s for s in got if s.startswith("S")}
    # the tree: the two members' leaves (toward the member, H2 on L1 port 1, H5 on L2 port 2,
    # and up to the spine) and one spine; the other leaves hold nothing
    assert set(got) == {"L1", "L2"} | spines and len(spines) == 1, got
    assert 1 in got["L1"] and 2 in got["L2"] and len(got["L1"]) == len(got["L2"]) == 2, got
    # the SA's view, as saquery (OpenSM's client) reads it
    text = saquery(sim, "-g").stdout
    assert text.count("MCMemberRecord") >= 2 and f"0x{mlid:x}".upper()[2:] in text.upper(), text
    # an MTU no link carries (more than 4096) is refused, and changes nothing
    refused = client("H3", "join", mgid_text, "--mtu", "5", "--selector", "greater", check=False)
    assert refused.returncode == 3 and "request is invalid" in refused.stderr, refused.stderr
    # the members leave: the group dies, its entries go from every switch
    client("H2", "leave", mgid_text)
    assert wait_holders(sim, switches, mlid, lambda g: "L1" not in g) == {"L2": {2}}  # H5's leaf alone
    client("H5", "leave", mgid_text)
    assert wait_holders(sim, switches, mlid, lambda g: not g) == {}
    assert client("H5", "groups", mgid_text, "--json").json()["count"] == 0


BROADCAST = "ff12:401b:ffff::ffff:ffff"


def answers(sim) -> dict:
    """Joins and leaves from several hosts, each answer as `smagent sa` decodes it (or the
    exit and last line of a refusal); MLIDs and assigned MGIDs aside (each SM picks its own)."""
    def ask(host, *args):
        r = run_smagent(["--transport", "umad", "sa", *args, "--json"], env=dict(sim.env, SIM_HOST=host), cwd=sim.cwd,
                        check=False)
        if r.returncode:
            return r.returncode, r.stderr.strip().splitlines()[-1]
        assigned = len(args) < 2 or args[1].startswith("--")  # no MGID given: the SA assigns one
        return [{k: v for k, v in it.items() if k not in ("mlid", "port_gid") and not (k == "mgid" and assigned)}
                for it in r.json()["items"]]
    return {
        "join": ask("H3", "join", BROADCAST),
        "join send-only": ask("H4", "join", BROADCAST, "--join-state", "send-only"),
        "join mtu > 2048": ask("H5", "join", BROADCAST, "--mtu", "4", "--selector", "greater"),
        "join mtu = 2048": ask("H5", "join", BROADCAST, "--mtu", "4"),
        "join mtu < 2048": ask("H6", "join", BROADCAST, "--mtu", "4", "--selector", "less"),
        "join another Q_Key": ask("H6", "join", BROADCAST, "--q-key", "0x1"),
        "create": ask("H3", "join"),
        "create, rate < 10 Gb/s": ask("H2", "join", "--rate", "3", "--selector", "less"),
        "create, largest MTU": ask("H2", "join", "--mtu", "5", "--selector", "largest"),
        "create IPv6 all-nodes (its broadcast group exists)": ask("H2", "join", "ff12:601b:ffff::1"),
        "create IPoIB, no broadcast group of that scope": ask("H2", "join", "ff15:401b:ffff::1234"),
        "create IPoIB, another Q_Key": ask("H2", "join", "ff12:401b:ffff::1234", "--q-key", "0x1"),
        "create with the SA's signature, link-local": ask("H2", "join", "ff12:a01b:ffff::1234"),
        "create with reserved flags": ask("H2", "join", "ff32::1234"),
        "create with the SA's signature, site-local": ask("H2", "join", "ff15:a01b:ffff::1234"),
        "leave": ask("H3", "leave", BROADCAST),
        "leave again": ask("H3", "leave", BROADCAST),
        "leave full, a send-only member": ask("H4", "leave", BROADCAST),
    }


def test_joins_and_leaves_answer_like_opensm(tmp_path, ibsim, procs):
    """The same joins and leaves answered by OpenSM 3.3's SA and by ours, field by field:
    a group made by a join keeps what the join gave (scope, packet lifetime), a rate
    "less than" the link's is the next below, a leave answers the request with the
    JoinState left, a leave of bits not held is refused."""
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net)
    want, got = opensm_then_ours(sim, tmp_path, procs, answers)
    assert isinstance(want["create, rate < 10 Gb/s"], list) and not isinstance(want["leave again"], list)
    assert isinstance(want["create IPv6 all-nodes (its broadcast group exists)"], list)
    assert not any(isinstance(want[k], list) for k in want if k.startswith("create") and "link-local" in k
                   or "no broadcast" in k or "reserved" in k)
    assert_same(got, want)


def test_path_records_to_a_group_answer_like_opensm(tmp_path, ibsim, procs):
    """`saquery -p --sgid-to-dgid SGID-MGID` after H3 joined the broadcast group, from
    OpenSM's SA and ours, field by field (DLID, the MLID, aside): H3's path to it, and none
    for a non-member, an unknown group, or a P_Key or SL not the group's; TClass, hop limit
    and MTU that match or are not compared."""
    import re
    from sa_harness import records

    def answers(sim):
        lids = lid_map(sim)
        gids = {}
        for h in ("H3", "H4"):
            text = sim.run(["smpquery", "nodeinfo", str(lids[(h, 1)])]).stdout
            guid = int(re.search(r"PortGuid:\.*(0x[0-9a-f]+)", text).group(1), 16)
            gids[h] = ":".join(f"{guid >> s & 0xFFFF:x}" for s in (48, 32, 16, 0))
        run_smagent(["--transport", "umad", "sa", "join", BROADCAST], env=dict(sim.env, SIM_HOST="H3"), cwd=sim.cwd)

        def path(host, dgid=BROADCAST, *extra):
            r = saquery(sim, "-p", "--sgid-to-dgid", f"fe80::{gids[host]}-{dgid}", *extra)
            return [{k: v for k, v in rec.items() if k != "dlid"} for rec in records(r.stdout)]
        return {"member": path("H3"), "not a member": path("H4"), "unknown group": path("H3", "ff12:401b:ffff::1"),
                "P_Key 0x7fff": path("H3", BROADCAST, "--pkey", "0x7fff"), "SL 1": path("H3", BROADCAST, "--sl", "1"),
                "TClass 0": path("H3", BROADCAST, "--tclass", "0"),
                "hop limit 0": path("H3", BROADCAST, "--hop_limit", "0"),
                "MTU 5": path("H3", BROADCAST, "--mtu", "5")}

    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net)
    want, got = opensm_then_ours(sim, tmp_path, procs, answers)
    assert len(want["member"]) == 1 and want["not a member"] == want["SL 1"] == [] and len(want["MTU 5"]) == 1
    assert_same(got, want)


def test_trees_follow_joins_leaves_and_ports_that_go_like_opensm(tmp_path, ibsim, procs):
    """The broadcast group's MFT entries (as `ibroute -M` reads them) under OpenSM 3.3's SM
    and under `smagent run`, step by step: before any join none; after H3, H5, H7 joined
    their three leaves (toward them) and one spine; after H3 left two leaves; a send-only
    full member (JoinState 0x8, H2) joins and is on the tree; H5's cable pulled: it leaves
    the group and its leaf drops out. The spine each SM picks may differ: only how many."""
    def shape(got: dict) -> dict:
        return {"leaves": {s: sorted(p for p in ports if p <= 2) for s, ports in got.items() if s.startswith("L")},
                "spines": sum(1 for s in got if s.startswith("S"))}

    def collect(sim):
        switches = {d: lid for (d, p), lid in lid_map(sim).items() if not p}

        def client(host, *args):
            return run_smagent(["--transport", "umad", "sa", *args, "--json"], env=dict(sim.env, SIM_HOST=host),
                               cwd=sim.cwd, timeout=60).json()["items"]

        (group,) = client("H1", "groups", BROADCAST)
        mlid = group["mlid"]

        def settled(leaves, seconds=20):
            return shape(wait_holders(sim, switches, mlid, lambda g: set(shape(g)["leaves"]) == leaves, seconds))

        out = {"before any join": shape(holders(sim, switches, mlid))}
        for h in ("H3", "H5", "H7"):
            client(h, "join", BROADCAST)
        out["H3, H5, H7 joined"] = settled({"L1", "L2", "L3"})
        client("H3", "leave", BROADCAST)
        out["H3 left"] = settled({"L2", "L3"})
        (rec,) = client("H2", "join", BROADCAST, "--join-state", "send-only-full")
        out["send-only full join"] = rec["join_state"]
        out["H2 joined send-only full"] = settled({"L1", "L2", "L3"})
        sim.unlink("L2", 2)
        out["H5's cable pulled"] = settled({"L1", "L3"})
        sim.relink("L2", 2)  # the next SM finds the whole fabric again
        time.sleep(1)
        return out

    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net, console=True)
    want, got = opensm_then_ours(sim, tmp_path, procs, collect)
    assert want["before any join"] == {"leaves": {}, "spines": 0}, want
    assert want["H3, H5, H7 joined"] == {"leaves": {"L1": [2], "L2": [2], "L3": [2]}, "spines": 1}, want
    assert_same(got, want)
