"""`smagent plan FILE` / `apply FILE`: the desired state on the simulator and on ibsim.
A second apply sends no Set; invalid content is refused as a whole with every problem
listed and nothing sent (checked with a recording of the session)."""
import json
import pathlib
import re

import pytest

from ibsim_harness import ibsim_available, skip_reason
from smagent.model import netfile, topogen
from smagent.transport.pcap import read_capture

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "desired.yaml"


def test_example_plan_apply_converges_on_the_simulator(tmp_path):
    # the simulator's state lives in the process, so plan, apply and apply again run in one
    import smagent
    from smagent.sweep import desired
    from smagent import sweep
    ds = desired.load(EXAMPLE)
    with smagent.connect("sim") as fabric:
        opts = dict(lmc=ds.lmc, routing=ds.routing, desired=ds)
        first = fabric.sweep(dry_run=True, **opts)
        assert any("SubnSet(MulticastForwardingTable)" in p and "0xc001" in p for p in first.plan_lines())
        done = fabric.sweep(**opts)
        assert done.problems == []
        l1 = next(n for n in done.topology.switches() if n.description == "L1")
        assert fabric.query("lft", ",".join(map(str, l1.path)), block=0).ports[2] == 6  # the static entry
        again = fabric.sweep(**opts)
        assert again.sets_planned == 0


def test_plan_cli_on_the_simulator_and_bad_files(live_cli, tmp_path):
    r = live_cli("plan", str(EXAMPLE), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["plan"] and not doc.get("plan_defects")  # the example's static route is no black hole
    bad = tmp_path / "bad.yaml"
    bad.write_text("lft:\n  - {switch: NoSuch, lid: 2, port: 3}\n  - {switch: L1, lid: 0xC000, port: 1}\n"
                   "  - {switch: L1, lid: 2, port: 99}\nmulticast:\n  - {mlid: 0xBFFF, members: [H1]}\n")
    r = live_cli("--record", str(tmp_path / "a.erf"), "apply", str(bad))
    assert r.returncode == 2
    assert "0xC000-0xFFFE" in r.stderr and "lid 49152" in r.stderr  # shape problems, all listed
    assert not list(read_capture(tmp_path / "a.erf")) if (tmp_path / "a.erf").exists() else True
    bad.write_text("lft:\n  - {switch: NoSuch, lid: 2, port: 3}\n  - {switch: L1, lid: 2, port: 99}\n"
                   "switches:\n  H1: {default_port: 1}\n")
    r = live_cli("--record", str(tmp_path / "b.erf"), "apply", str(bad))
    assert r.returncode == 2
    for needle in ("no node 'NoSuch'", "port 99 does not exist", "is a channel adapter"):
        assert needle in r.stderr
    sent = [rec.mad for rec in read_capture(tmp_path / "b.erf")]
    assert sent and all(m[3] != 0x02 for m in sent)  # discovery Gets only: not one SubnSet


@pytest.mark.ibsim
@pytest.mark.skipif(not ibsim_available(), reason=skip_reason())
def test_apply_on_ibsim_shows_in_ibroute_and_converges(ibsim, tmp_path):
    fabric = topogen.two_switch()
    net = tmp_path / "2sw.net"
    net.write_text(netfile.dumps(fabric))
    state = tmp_path / "state.yaml"
    state.write_text("routing: updn\nlft:\n  - {switch: Switch1, lid: 60, port: 5}\n"
                     "multicast:\n  - {mlid: 0xC001, members: [Hca1, Hca2]}\n")
    sim = ibsim(net)
    r = sim.smagent("apply", state, "--json", "--state-dir", tmp_path / "st", check=False)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["left_after_apply"] == [] and s["sets"]["lft_blocks"] > 0
    sw1 = sim.run(["smpquery", "-D", "portinfo", "0,1", "0"]).stdout
    lid = int(re.search(r"^Lid:\.+(\d+)$", sw1, re.M).group(1))
    routes = sim.run(["ibroute", str(lid)]).stdout
    assert re.search(r"^0x003c 005 :", routes, re.M), routes  # LID 60 -> port 5, as the file says
    assert "0xc001" in sim.run(["ibroute", "-M", str(lid)]).stdout.lower()
    r = sim.smagent("apply", state, "--json", check=False)
    assert r.returncode == 0, r.stderr
    assert set(json.loads(r.stdout)["sets"].values()) == {0}
