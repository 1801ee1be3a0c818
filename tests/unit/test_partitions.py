"""Partitions (smagent.config.partitions, smagent.linkconf.pkeys): OpenSM's partitions.conf grammar,
every error with its line number and nothing sent; the P_Key tables a sweep writes in the
in-process simulator (CA ports, switch port 0, enforcing switch ports with their
PortInfo bits); only the changed blocks sent when one member changes."""
from __future__ import annotations

import pytest

from smagent.sweep import desired
from smagent import linkconf as links, sweep
from smagent.config import partitions
from smagent.model import topogen
from smagent.transport.pcap import read_capture
from smagent.transport.sim import SimTransport

FULL = partitions.FULL_BIT

MAN_PAGE = """\
# the examples of opensm(8)
Default=0x7fff : ALL, SELF=full ;
NewPartition , ipoib : 0x123456=full, 0x3456789034=limi, 0x2134af2306 ;
YetAnotherOne = 0x300 : SELF=full ;
YetAnotherOne = 0x300 : ALL=limited ;
ShareIO = 0x80 , defmember=full : 0x123451, 0x123452;
ShareIO = 0x80 : defmember=limited : 0x123456, 0x123457, 0x123458=full;
storage=0x8001, ipoib, mtu=4, rate=7, sl=1, scope=2 :
    ALL_CAS=limited,   # a comment inside the list
    0x0002c90300000001=both ;
joined=0x9 : ALL_SWITCHES=full, \\
    ALL_ROUTERS ;
Default=0x7fff,ipoib:
        mgid=ff12:401b::0707,sl=1 # random IPv4 group
        mgid=ff12::1,sl=1,Q_Key=0xDEADBEEF,rate=3,mtu=2 # random group
        ALL=full;
"""


def test_the_man_page_examples_parse():
    c = partitions.parse(MAN_PAGE, "pc")
    by = {p.pkey: p for p in c.partitions}
    assert sorted(by) == [0x1, 0x2, 0x9, 0x80, 0x300, 0x7FFF]
    new = by[0x2]  # generated: the lowest P_Key the file does not name
    assert new.name == "NewPartition"
    assert new.ipoib and [m.membership for m in new.members] == ["full", "limited", "limited"]
    assert any("'limi'" in w and "line 3" in w for w in c.warnings)  # OpenSM: limited, said
    share = by[0x80]
    assert [(m.who, m.membership) for m in share.members] == [
        (0x123451, "full"), (0x123452, "full"), (0x123456, "limited"), (0x123457, "limited"), (0x123458, "full")]
    st = by[0x1]
    assert (st.name, st.ipoib, st.flag("mtu"), st.flag("rate"), st.flag("sl")) == ("storage", True, 4, 7, 1)
    assert [(m.who, m.membership, m.line) for m in st.members] == [("ALL_CAS", "limited", 9),
                                                                   (0x0002C90300000001, "both", 10)]
    assert [m.who for m in by[0x9].members] == ["ALL_SWITCHES", "ALL_ROUTERS"]
    d = by[0x7FFF]
    assert d.name == "Default" and d.ipoib and len(d.mgroups) == 2 and d.mgroups[1][1][1] == ("q_key", 0xDEADBEEF)
    assert [m.who for m in by[0x300].members] == ["SELF", "ALL"]  # merged


def test_implicit_default_partition_as_opensm():
    c = partitions.parse("a=0x10 : ALL_CAS=full ;")
    d = c.by_pkey(0x7FFF)
    assert [(m.who, m.membership) for m in d.members] == [("ALL", "limited"), ("SELF", "full")]
    # a rule for the default P_Key adds to OpenSM's implicit members: no port leaves it
    c = partitions.parse("Default=0x7fff : SELF=full, 0x10=limited ;\na=0x10 : ALL_CAS=full ;")
    assert [(m.who, m.membership) for m in c.by_pkey(0x7FFF).members] == [
        ("ALL", "limited"), ("SELF", "full"), ("SELF", "full"), (0x10, "limited")]


@pytest.mark.parametrize("text, line, needle", [
    ("a=0x10 : ALL ;\nb=0x20 : ALL ;\nc=0x30, bogus : ALL ;\n", 3, "unknown partition flag 'bogus'"),
    ("a=0x10 : ALL ;\n\n\n\nb=0x20 :\n ALL,\n 0xnothex ;\n", 7, "member '0xnothex' is not a port GUID"),
    ("a=0x10 : ALL ;\nb=0x8000 : ALL ;\n", 2, "P_Key '0x8000' is not a 16-bit number with a non-zero base"),
    ("a=0x10 : ALL ;\nb=0x20, mtu=9 : ALL ;\n", 2, "mtu='9': not a number 1..5"),
    ("a=0x10 : ALL ;\nb=0x20 ALL ;\n", 2, "partition definition 'b=0x20 ALL' has no ':' before its members"),
    ("a=0x10 : ALL ;\nb=0x20 : ALL\n", 2, "statement not ended by ';'"),
    ("a=0x10, defmember=most : ALL ;\n", 1, "defmember='most' is not full, limited or both"),
])
def test_errors_name_their_line(text, line, needle):
    with pytest.raises(partitions.PartitionError) as e:
        partitions.parse(text, "pc")
    assert f"line {line}: {needle}" in str(e.value), str(e.value)
    assert e.value.exit_code == 2


def test_every_error_at_once():
    with pytest.raises(partitions.PartitionError) as e:
        partitions.parse("a=0x10, x : ALL ;\nb=0x20 : 0xzz ;\n", "pc")
    assert [p.split(":")[0] for p in e.value.problems] == ["line 1", "line 2"]


def test_a_bad_file_is_refused_with_its_line_and_nothing_sent(live_cli, tmp_path):
    f = tmp_path / "partitions.conf"
    f.write_text("Default=0x7fff : ALL=full ;\n# fine so far\nstorage=0x10 : ALL_CAS=sometimes, 0xq1 ;\n")
    rec = tmp_path / "rec.erf"
    r = live_cli("--transport", "sim", "--record", str(rec), "sweep", "--partitions", str(f), cwd=tmp_path,
                 timeout=120)
    assert r.returncode == 2, r.stderr
    assert "line 3: member '0xq1' is not a port GUID" in r.stderr and "Traceback" not in r.stderr
    assert not rec.exists() or rec.stat().st_size == 0 or list(read_capture(rec)) == []


def test_structured_partitions_in_a_desired_state(tmp_path):
    ds = desired.parse({"partitions": [
        {"name": "storage", "pkey": "0x8001", "ipoib": True, "mtu": 4,
         "members": ["ALL_CAS", "0x0002c90300000001=full", 0x0002C90300000002]},
        {"name": "x", "pkey": 5, "defmember": "full", "members": ["SELF"]}]}, "ds")
    p = ds.partitions.by_pkey(1)
    assert p.name == "storage" and p.ipoib and p.flag("mtu") == 4
    assert [(m.who, m.membership) for m in p.members] == [("ALL_CAS", "limited"), (0x0002C90300000001, "full"),
                                                          (0x0002C90300000002, "limited")]
    assert ds.partitions.by_pkey(5).members[0].membership == "full"
    with pytest.raises(desired.DesiredStateError) as e:
        desired.parse({"partitions": [{"name": "a", "pkey": 0, "members": []}, {"name": "b", "bogus": 1}]}, "ds")
    assert "partitions[1]: P_Key '0' is not" in str(e.value) and "partitions[2]: expected a mapping" in str(e.value)
    f = tmp_path / "p.conf"
    f.write_text("a=0x10 :\n 0xq ;\n")
    with pytest.raises(desired.DesiredStateError) as e:
        desired.parse({"partitions_file": str(f)}, "ds")
    assert "line 2: member '0xq'" in str(e.value)


def _sim(seed_hosts=4):
    return SimTransport(topogen.fat_tree_2(seed_hosts))


def _ca_ports(sim):
    return [(n, p) for n in sim.nodes.values() if not n.is_switch for p in range(1, n.num_ports + 1)
            if n.peers[p] is not None]


def test_sweep_writes_tables_and_enforcement():
    t = _sim()
    cas = _ca_ports(t.sim)
    g = [f"{n.port_guids[p]:#x}" for n, p in cas]
    conf = partitions.parse(f"Default=0x7fff : ALL=full ;\n"
                            f"a=0x10, ipoib : {g[0]}=full, {g[1]} ;\n"
                            f"b=0x20 : ALL_CAS=limited, {g[2]}=full, 0x00000000deadbeef ;\n"
                            f"c=0x30, indx0 : {g[3]}=full ;\n")
    r = sweep.sweep(t, sweep.SweepOptions(partitions=conf))
    assert r.problems == []
    assert any("0x00000000deadbeef" in n and "not an end port" in n for n in r.notes)
    keys = {(n.name, p): [k for k in n.pkeys[p] if k] for n, p in cas}
    assert keys[(cas[0][0].name, cas[0][1])] == [0xFFFF, 0x10 | FULL, 0x20]
    assert keys[(cas[1][0].name, cas[1][1])] == [0xFFFF, 0x10, 0x20]
    assert keys[(cas[2][0].name, cas[2][1])] == [0xFFFF, 0x20 | FULL]
    assert keys[(cas[3][0].name, cas[3][1])] == [0x30 | FULL, 0x20, 0xFFFF]  # indx0, then by P_Key
    assert keys[(cas[4][0].name, cas[4][1])] == [0xFFFF, 0x20]
    for n, p in cas:  # the switch port facing each CA port: its keys, enforcement on
        sw, sp = n.peers[p]
        assert [k for k in sw.pkeys[sp] if k] == keys[(n.name, p)]
        assert (sw.pi[sp].partition_enforcement_inbound, sw.pi[sp].partition_enforcement_outbound) == (1, 1)
    for sw in (n for n in t.sim.nodes.values() if n.is_switch):
        assert [k for k in sw.pkeys[0] if k] == [0xFFFF]  # ALL=full: switch port 0 too
        for p in range(1, sw.num_ports + 1):
            if sw.peers[p] is not None and sw.peers[p][0].is_switch:
                assert sw.pi[p].partition_enforcement_inbound == 0
    again = sweep.sweep(t, sweep.SweepOptions(partitions=conf))
    assert again.summary()["sets"]["pkeys"] == 0 and again.summary()["sets"]["portinfo"] == 0


def test_changing_one_member_sends_only_the_changed_blocks():
    t = _sim()
    cas = _ca_ports(t.sim)
    g = [f"{n.port_guids[p]:#x}" for n, p in cas]
    base = "Default=0x7fff : ALL=full ;\na=0x10 : {} ;\n"
    sweep.sweep(t, sweep.SweepOptions(partitions=partitions.parse(base.format(f"{g[0]}=full, {g[1]}"))))
    sent = []
    t.on_send = sent.append
    r = sweep.sweep(t, sweep.SweepOptions(partitions=partitions.parse(base.format(f"{g[0]}=full, {g[2]}"))))
    pkey_sets = [q for q in sent if "Set" in q.describe() and "P_Key" in q.describe()]
    # g[1] leaves, g[2] joins: their CA ports and the switch ports facing them, one block each
    assert len(pkey_sets) == 4, [q.describe() for q in pkey_sets]
    assert r.summary()["sets"]["pkeys"] == 4
    assert [k for k in cas[1][0].pkeys[cas[1][1]] if k] == [0xFFFF]
    assert [k for k in cas[2][0].pkeys[cas[2][1]] if k] == [0xFFFF, 0x10]


def test_no_partitions_keeps_the_default_partition_only():
    t = _sim()
    r = sweep.sweep(t, sweep.SweepOptions())
    assert r.problems == []
    for n, p in _ca_ports(t.sim):
        assert n.pkeys[p][0] == 0xFFFF
    assert links.LinkOptions().partitions is None


def _random_config(rng, guids):
    """Three to five partitions of random members (full or limited), as file text, and
    the rule's expectation: pkey -> {port GUID: full?}."""
    lines, expect = ["Default=0x7fff : ALL=limited, SELF=full ;"], {}
    for i in range(rng.randint(3, 5)):
        pkey = 0x100 + i
        members = rng.sample(guids, rng.randint(0, len(guids) // 2))
        expect[pkey] = {g: rng.random() < 0.5 for g in members}
        lines.append(f"p{i}=0x{pkey:x} : " + ", ".join(f"0x{g:016x}={'full' if f else 'limited'}"
                                                      for g, f in expect[pkey].items()) + " ;")
    return "\n".join(lines) + "\n", expect


def _reach(t, cas):
    """Data-plane reachability of every ordered pair of CA ports: sent with any P_Key the
    sender holds, delivered."""
    from smagent.sim.dataplane import Packet
    out = {}
    for sn, sp in cas:
        for dn, dp in cas:
            if (sn.name, sp) != (dn.name, dp):
                lid = dn.lid_range(dp)[0]
                out[((sn.guid, sp), (dn.guid, dp))] = any(
                    t.sim.trace((sn.name, sp), lid, packet=Packet(pkey=k)).delivered for k in sn.pkeys[sp] if k)
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_data_plane_reachability_equals_the_partition_rules_and_verify_agrees(seed):
    import random
    from smagent import verify
    from smagent.verify import isolation as vparts
    rng = random.Random(seed)
    t = SimTransport(topogen.fat_tree_2(4) if seed != 2 else topogen.fat_tree_2(6))
    cas = _ca_ports(t.sim)
    guid = {(n.guid, p): n.port_guids[p] for n, p in cas}
    text, expect = _random_config(rng, sorted(guid.values()))
    conf = partitions.parse(text)
    r = sweep.sweep(t, sweep.SweepOptions(partitions=conf))
    assert r.problems == []
    local = r.topology.local
    reach = _reach(t, cas)
    for (a, b), got in reach.items():
        ga, gb = guid[a], guid[b]
        shared = [pk for pk, m in expect.items() if ga in m and gb in m and (m[ga] or m[gb])]
        assert got == (bool(shared) or local in (a, b)), (a, b)  # the SM's port: full default member
    report = verify.verify(t, partitions=conf)
    assert report.ok, report.texts
    assert report.summary["partition_pairs"] == len(reach)
    # tables changed behind the SM's back: one CA port (and the enforcing switch port
    # facing it) gains a foreign partition another port holds as a full member
    (sn, sp), (dn, dp) = next(((s, sp), (d, dp)) for s, sp in cas for d, dp in cas
                              if (s.guid, sp) != (d.guid, dp) and not reach[((s.guid, sp), (d.guid, dp))])
    odd = 0x4321
    sn.pkeys[sp][7] = odd
    sw, swp = sn.peers[sp]
    sw.pkeys[swp][7] = odd
    dn.pkeys[dp][7] = odd | FULL
    dw, dwp = dn.peers[dp]
    dw.pkeys[dwp][7] = odd
    reach = _reach(t, cas)
    assert reach[((sn.guid, sp), (dn.guid, dp))]
    snap = verify.collect(t, partitions=conf)
    for (a, b), got in reach.items():  # verify's rule, pair for pair, equals the data plane
        assert bool(vparts.tables_allow(snap, a, b)) == got, (a, b)
    report = verify.check(snap)
    leak = report.defects["partition_leak"]
    assert leak["count"] == 2 and {e["src"] for e in leak["examples"]} == {f"{sn.name}[{sp}]", f"{dn.name}[{dp}]"}
    # the same on a port the partitions allow: dropped by its switch port's table
    dw.pkeys[dwp][:] = [0] * len(dw.pkeys[dwp])
    report = verify.verify(t, partitions=conf)
    blocked = report.defects["partition_blocked"]
    assert blocked["examples"] and all(f"{dn.name}[{dp}]" in (e["src"], e["dst"]) for e in blocked["examples"])


def test_partitions_show_by_port_and_by_partition(cli, tmp_path):
    f = tmp_path / "p.conf"
    f.write_text("Default=0x7fff : ALL=full ;\nstorage=0x10, ipoib : ALL_CAS=limited, 0x0000000000100001=full ;\n")
    r = cli("--transport", "sim", "partitions", "show", "--partitions", str(f), "--json")
    assert r.exit_code == 0, r.output
    v = r.json()
    st = next(e for e in v["partitions"] if e["pkey"] == "0x0010")
    assert st["name"] == "storage" and st["full"] == ["H1[1]"] and "H2[1]" in st["limited"] and st["ipoib"]
    h1 = next(e for e in v["ports"] if e["port"] == "H1[1]")
    assert h1["pkeys"] == [{"pkey": "0x7fff", "membership": "full"}, {"pkey": "0x0010", "membership": "full"}]
    r = cli("--transport", "sim", "partitions", "show")  # the tables as the ports hold them (reset: 0x7fff)
    assert r.exit_code == 0 and "H1[1] 0x0000000000100001: 0x7fff limited" in r.output
    f.write_text("storage=0x10 : 0xnope ;\n")
    r = cli("--transport", "sim", "partitions", "show", "--partitions", str(f))
    assert r.exit_code == 2 and "line 1: member '0xnope'" in r.output


def test_session_sweep_and_verify_with_a_partitions_file(tmp_path):
    import smagent
    f = tmp_path / "p.conf"
    f.write_text("a=0x10 : ALL_CAS=full ;\nb=0x20 : 0x0000000000100001=full, 0x0000000000100004 ;\n")
    with smagent.connect("sim") as fabric:
        r = fabric.sweep(partitions=str(f))  # a path, read before any SMP (a PartitionConfig works too)
        assert r.problems == []
        report = fabric.verify(partitions=str(f))
        assert "partition_leak" not in report.defects and "partition_blocked" not in report.defects
        assert "no_default_partition" not in report.defects  # 0x7fff limited is what the file asks for
        assert report.summary["partition_pairs"] > 0
        other = tmp_path / "q.conf"
        other.write_text("a=0x10 : 0x0000000000100001=full ;\n")  # the tables now hold more than this
        report = fabric.verify(partitions=str(other))
        assert report.defects["partition_leak"]["count"] > 0


@pytest.mark.parametrize("command", [["run"], ["plan", "{desired}"], ["apply", "{desired}"], ["verify"]])
def test_every_partitions_option_refuses_a_bad_file_with_its_line(cli, tmp_path, command):
    f = tmp_path / "p.conf"
    f.write_text("ok=0x10 : ALL ;\n\nbad=0x20, mtu=7 : ALL ;\n")
    d = tmp_path / "d.yaml"
    d.write_text("lmc: 0\n")
    args = [a.replace("{desired}", str(d)) for a in command]
    r = cli("--transport", "sim", *args, "--partitions", str(f), "--state-dir", str(tmp_path / "s")) \
        if command[0] == "run" else cli("--transport", "sim", *args, "--partitions", str(f))
    assert r.exit_code == 2, r.output
    assert "line 3: mtu='7': not a number 1..5" in r.output


def test_plan_with_partitions_lists_the_pkey_blocks(cli, tmp_path):
    f = tmp_path / "p.conf"
    f.write_text("storage=0x10 : ALL_CAS=full ;\n")
    d = tmp_path / "d.yaml"
    d.write_text(f"partitions_file: {f}\n")
    r = cli("--transport", "sim", "plan", str(d), "--json", "--detail")
    assert r.exit_code in (0, 1), r.output
    pk = [c for c in r.json()["plan"] if c.get("table") == "P_Key"]
    hosts = [c for c in pk if c["node"].startswith("H")]
    assert len(hosts) == 9 and all(0x8010 in c["new"] for c in hosts)  # every CA port of the bundled fabric


def test_partition_tables_are_backed_up_journalled_and_restored(tmp_path):
    import json
    from smagent import api
    from smagent.fdb import journal
    state = tmp_path / "state"
    t = _sim()
    s = api.Session(t, state_dir=str(state))
    s.sweep(state_dir=str(state))  # the default partition first
    cas = _ca_ports(t.sim)
    conf = partitions.parse(f"p=0x10 : ALL_CAS=limited, 0x{cas[0][0].port_guids[cas[0][1]]:016x}=full ;\n")
    r = s.sweep(state_dir=str(state), partitions=conf)
    assert r.problems == [] and r.backup_file
    changed = [c for c in r.link_changes if c.kind == "pkeys"]
    sw_ports = [c for c in changed if c.guid in {n.guid for n in t.sim.nodes.values() if n.is_switch}
                and c.modifier >> 16]
    assert len(sw_ports) == len(cas)  # every switch port facing a CA port, by its modifier's port
    doc = json.loads(open(r.backup_file).read())
    saved = {(u["modifier"], g) for g, sw in doc["switches"].items() for u in sw.get("links", ())
             if u["table"] == "pkeys"}
    assert {(c.modifier, f"0x{c.guid:016x}") for c in changed} == saved
    (recs,) = [rs for f in (state / journal.JOURNALS_DIR).glob("apply-*.journal")
               for rs in [[json.loads(line) for line in f.read_text().splitlines()]]
               if rs[0].get("backup") == r.backup_file]  # this sweep's journal
    planned = {(u["switch"], u["port"], u["block"]) for u in recs[0]["blocks"] if u.get("table") == "pkeys"}
    assert planned == {(f"0x{c.guid:016x}", c.port, c.modifier) for c in changed} and recs[-1]["event"] == "done"
    res = s.lft_restore(r.backup_file)
    assert res.ok, res.problems
    for n, p in cas:
        assert [k for k in n.pkeys[p] if k] == [0xFFFF]  # what the first sweep left
        sw, sp = n.peers[p]
        assert [k for k in sw.pkeys[sp] if k] == [0xFFFF]


def _held(node, port) -> dict:
    """index -> key of every non-empty entry of a port's whole table."""
    return {i: k for i, k in enumerate(node.pkeys[port]) if k & 0x7FFF}


def test_a_shrinking_file_leaves_no_stale_key_in_any_block():
    """40 shared partitions (two blocks), then one: as OpenSM 3.3.23, the key kept stays at
    its index and every other index of every block is 0, on the CA ports and on the
    switch ports facing them (block 1 too, which OpenSM leaves); a key planted at
    index 40 goes in one sweep; `verify` reads every block."""
    from smagent import verify
    t = _sim()
    cas = _ca_ports(t.sim)
    (an, ap), (bn, bp) = cas[0], cas[2]
    ga, gb = f"{an.port_guids[ap]:#x}", f"{bn.port_guids[bp]:#x}"
    many = "".join(f"p{i}=0x{0x100 + i:x} : {ga}=full, {gb}=full ;\n" for i in range(40))
    r = sweep.sweep(t, sweep.SweepOptions(partitions=partitions.parse(many)))
    assert r.problems == []
    assert _held(an, ap) == {0: 0xFFFF, **{1 + i: (0x100 + i) | FULL for i in range(40)}}
    one = partitions.parse(f"p5=0x105 : {ga}=full, {gb}=full ;\n")
    r = sweep.sweep(t, sweep.SweepOptions(partitions=one))
    assert r.problems == []
    assert (an.guid, ap) == r.topology.local  # the SM's port: a full default member, the other limited
    for n, p, dflt in ((an, ap, 0xFFFF), (bn, bp, 0x7FFF)):
        assert _held(n, p) == {0: dflt, 6: 0x105 | FULL}  # 0x105 keeps index 6, as OpenSM
        sw, sp = n.peers[p]
        assert _held(sw, sp) == {0: dflt, 1: 0x105 | FULL}  # gaps closed, block 1 cleared
    assert verify.verify(t, partitions=one).ok
    # a stale full key planted at index 40 of two ports sharing no partition (limited
    # default members both) and of the switch ports facing them: a leak the data plane
    # carries and verify names; one sweep removes it
    cn, cp = cas[3]
    for n, p in ((bn, bp), (cn, cp)):
        n.pkeys[p][40] = 0x4321 | FULL
        sw, sp = n.peers[p]
        sw.pkeys[sp][40] = 0x4321 | FULL
    from smagent.sim.dataplane import Packet
    lid = cn.lid_range(cp)[0]
    assert t.sim.trace((bn.name, bp), lid, packet=Packet(pkey=0x4321 | FULL)).delivered
    report = verify.verify(t, partitions=one)
    assert report.defects["partition_leak"]["count"] == 2
    sweep.sweep(t, sweep.SweepOptions(partitions=one))
    assert _held(bn, bp) == {0: 0x7FFF, 6: 0x105 | FULL} and _held(cn, cp) == {0: 0x7FFF}
    assert _held(*cn.peers[cp]) == {0: 0x7FFF}
    assert not t.sim.trace((bn.name, bp), lid, packet=Packet(pkey=0x4321 | FULL)).delivered
    assert verify.verify(t, partitions=one).ok


def test_the_last_mention_sets_membership_as_opensm_with_a_warning():
    t = _sim()
    cas = _ca_ports(t.sim)
    n, p = cas[1]
    g = f"{n.port_guids[p]:#x}"
    conf = partitions.parse(f"storage=0x0c0c : {g}=full, ALL_CAS=limited ;\n")
    r = sweep.sweep(t, sweep.SweepOptions(partitions=conf))
    assert 0x0C0C in n.pkeys[p] and 0x8C0C not in n.pkeys[p]
    assert any("storage" in w and "last mention wins" in w for w in r.notes)
    # raised again later: full, no warning
    conf = partitions.parse(f"storage=0x0c0c : {g}=full, ALL_CAS=limited ;\nstorage=0x0c0c : {g}=full ;\n")
    r = sweep.sweep(t, sweep.SweepOptions(partitions=conf))
    assert 0x8C0C in n.pkeys[p] and not any("last mention wins" in w for w in r.notes)


def test_new_keys_are_appended_in_opensm_order():
    """OpenSM walks its partitions by the P_Key's bytes as a little-endian number: 0x0100
    (bytes 01 00) comes before 0x0001 (bytes 00 01) and before 0x0002."""
    t = _sim()
    n, p = _ca_ports(t.sim)[0]
    g = f"{n.port_guids[p]:#x}"
    conf = partitions.parse(f"a=0x0002 : {g}=full ;\nb=0x0001 : {g}=full ;\nc=0x0100 : {g}=full ;\n")
    sweep.sweep(t, sweep.SweepOptions(partitions=conf))
    assert _held(n, p) == {0: 0xFFFF, 1: 0x8100, 2: 0x8001, 3: 0x8002}


def test_layout_keeps_held_keys_where_they_are():
    lay = partitions.layout
    # held keys stay; the membership bit follows the file; new ones after the highest
    # index given out (a stale key there is overwritten)
    assert lay([0xFFFF, 0, 0x0010, 0x8020], [0x8010, 0x8030, 0xFFFF], 0, 8) == [
        0xFFFF, 0, 0x8010, 0x8030, 0, 0, 0, 0]
    # index 0 goes to the indx0 key; the default moves after it
    assert lay([0xFFFF, 0x8010], [0x8010, 0xFFFF], 0x8010, 4) == [0x8010, 0xFFFF, 0, 0]
    # no room after the highest index: the first free one
    assert lay([0xFFFF, 0, 0, 0x8001], [0x8001, 0x8002, 0xFFFF], 0, 4) == [0xFFFF, 0x8002, 0, 0x8001]
    # no room at all: left out
    assert lay([0xFFFF, 0x8001], [0x8001, 0x8002, 0xFFFF], 0, 2) == [0xFFFF, 0x8001]


def test_enforcement_off_facing_a_host_is_a_verify_defect():
    """ibsim keeps no PartitionEnforcementInbound/Outbound bit; the simulator does, and a
    switch port facing a host that lets every P_Key through is a defect with partitions."""
    from smagent import verify
    from smagent.sim.dataplane import Packet
    t = _sim()
    cas = _ca_ports(t.sim)
    (an, ap), (bn, bp) = cas[1], cas[2]
    conf = partitions.parse(f"a=0x10 : {an.port_guids[ap]:#x}=full ;\n")
    sweep.sweep(t, sweep.SweepOptions(partitions=conf))
    assert verify.verify(t, partitions=conf).ok
    sw, sp = bn.peers[bp]
    sw.pi[sp].partition_enforcement_inbound = 0
    # b's table gains a's key behind the SM's back: only the switch port stopped it
    bn.pkeys[bp][5] = 0x10 | FULL
    lid = an.lid_range(ap)[0]
    assert t.sim.trace((bn.name, bp), lid, packet=Packet(pkey=0x10 | FULL)).delivered
    report = verify.verify(t, partitions=conf)
    off = report.defects["partition_enforcement_off"]
    assert off["count"] == 1 and off["examples"][0]["off"] == ["inbound"]
    assert off["examples"][0]["facing"] == f"{bn.name}[{bp}]"
    sweep.sweep(t, sweep.SweepOptions(partitions=conf))  # the sweep turns it back on
    assert sw.pi[sp].partition_enforcement_inbound == 1
    assert "partition_enforcement_off" not in verify.verify(t, partitions=conf).defects
