"""Issue 4 acceptance on ibsim: after `smagent sweep` (no OpenSM anywhere), the
infiniband-diags witnesses see a working subnet: every port has its LID in
ibnetdiscover, every switch's ibroute routes every LID, ibtracert succeeds between
adapter pairs; a second sweep sends no Set."""
import json
import random
import re

import pytest

from ibsim_harness import IbSim, ibsim_available, skip_reason
from smagent.model import netfile, topogen

pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]


def witness_checks(sim, fabric, pairs_sample=None):
    # ibnetdiscover: every port with a LID, every switch with a LID
    out = sim.run(["ibnetdiscover"]).stdout
    disc = netfile.loads(out, "ibnetdiscover")
    assert len(disc.switches()) == len(fabric.switches())
    assert len(disc.cas()) == len(fabric.cas())
    ca_lids = []
    for n in disc:
        if n.is_switch:
            assert n.lid(0), f"switch {n.description} has no LID"
        else:
            for p, _peer in disc.connected_ports(n):
                assert n.lid(p), f"{n.description} port {p} has no LID"
                ca_lids.append(n.lid(p))
    all_lids = sorted({n.lid(0) for n in disc.switches()} | set(ca_lids))
    assert len(all_lids) == len(disc.switches()) + len(ca_lids), "duplicate LIDs"
    # ibroute: every switch forwards every LID
    for sw in disc.switches():
        text = sim.run(["ibroute", str(sw.lid(0)), "0x1", str(max(all_lids))]).stdout
        routed = {int(m.group(1), 16) for m in re.finditer(r"^(0x[0-9a-f]+) (\d+) :", text, re.M)}
        missing = set(all_lids) - routed
        assert not missing, f"{sw.description}: ibroute shows no route to LIDs {sorted(missing)[:10]}"
    # ibtracert between adapter LIDs (LID-routed SMPs through the programmed LFTs)
    pairs = [(a, b) for a in ca_lids for b in ca_lids if a != b]
    if pairs_sample is not None and len(pairs) > pairs_sample:
        pairs = random.Random(7).sample(pairs, pairs_sample)
    for a, b in pairs:
        r = sim.run(["ibtracert", str(a), str(b)], check=False)
        assert r.returncode == 0, f"ibtracert {a} {b} failed: {r.stdout}{r.stderr}"
    return all_lids


def test_two_switch_sweep_then_witnesses(ibsim, tmp_path):
    fabric = topogen.two_switch()
    net = tmp_path / "2sw.net"
    net.write_text(netfile.dumps(fabric))
    sim = ibsim(net)
    dry = sim.smagent("sweep", "--dry-run", "--json")
    plan = json.loads(dry.stdout)
    assert plan["dry_run"] and plan["plan"]
    assert plan["sets"]["lft_blocks"] == 2
    r = sim.smagent("sweep", "--json")
    s = json.loads(r.stdout)
    assert s["problems"] == [] and s["unreachable"] == []
    assert s["sets"]["lft_blocks"] == 2
    witness_checks(sim, fabric)
    again = json.loads(sim.smagent("sweep", "--json").stdout)
    assert set(again["sets"].values()) == {0}, again  # a converged fabric: no Set of any kind


def test_dry_run_sends_no_set(ibsim, tmp_path):
    fabric = topogen.two_switch()
    net = tmp_path / "2sw.net"
    net.write_text(netfile.dumps(fabric))
    sim = ibsim(net)
    sim.smagent("sweep", "--dry-run")
    out = sim.run(["smpquery", "-D", "portinfo", "0", "1"]).stdout
    assert re.search(r"^Lid:\.+0$", out, re.M), out
    out = sim.run(["smpquery", "-D", "switchinfo", "0,1"]).stdout
    assert re.search(r"^LinearFdbTop:\.+0$", out, re.M), out


def test_lid_file_persists_lids(tmp_path):
    fabric = topogen.two_switch()
    net = tmp_path / "2sw.net"
    net.write_text(netfile.dumps(fabric))
    lidfile = tmp_path / "guid2lid"
    with IbSim(net, tmp_path / "run1") as sim:
        sim.smagent("sweep", "--lmc", "1", "--lid-file", str(lidfile))
        first = sim.run(["ibnetdiscover"]).stdout
    content = lidfile.read_text()
    assert re.search(r"^0x[0-9a-f]{16} 0x[0-9a-f]{4} 0x[0-9a-f]{4}$", content, re.M)
    with IbSim(net, tmp_path / "run2") as sim:  # a fresh fabric, same file: same LIDs
        sim.smagent("sweep", "--lmc", "1", "--lid-file", str(lidfile))
        second = sim.run(["ibnetdiscover"]).stdout
    lids = lambda t: sorted(re.findall(r'# "([^"]+)".*?lid (\d+)', t))
    assert lids(first) == lids(second)
    assert " lmc 1 " in second


@pytest.mark.parametrize("bad, needle", [
    (["--lmc", "9"], "LMC"),
])
def test_bad_sweep_input_exit_2(ibsim, tmp_path, bad, needle):
    fabric = topogen.two_switch()
    net = tmp_path / "2sw.net"
    net.write_text(netfile.dumps(fabric))
    sim = ibsim(net)
    r = sim.smagent("sweep", *bad, check=False)
    assert r.returncode == 2 and needle in r.stderr


def test_garbage_lid_file_exit_2(ibsim, tmp_path):
    fabric = topogen.two_switch()
    net = tmp_path / "2sw.net"
    net.write_text(netfile.dumps(fabric))
    lidfile = tmp_path / "guid2lid"
    lidfile.write_text("0x10 0x1 0x1\nthis is not a record\n")
    sim = ibsim(net)
    r = sim.smagent("sweep", "--lid-file", str(lidfile), check=False)
    assert r.returncode == 2 and "guid2lid:2" in r.stderr, r.stderr
    out = sim.run(["smpquery", "-D", "portinfo", "0", "1"]).stdout
    assert re.search(r"^Lid:\.+0$", out, re.M), "nothing may be sent after bad input"


def test_fat_tree_648_hosts(ibsim, tmp_path):
    fabric = topogen.fat_tree_2(36)
    assert len(fabric.cas()) == 648
    net = tmp_path / "ft648.net"
    net.write_text(netfile.dumps(fabric))
    sim = ibsim(net, extra_args=netfile.ibsim_size_args(fabric))
    s = json.loads(sim.smagent("sweep", "--json").stdout)
    assert s["problems"] == [] and s["unreachable"] == []
    assert s["nodes"] == 648 + 54
    witness_checks(sim, fabric, pairs_sample=400)  # ibtracert per pair: a sample (ibroute covers every entry)
    again = json.loads(sim.smagent("sweep", "--json").stdout)
    assert set(again["sets"].values()) == {0}, again
