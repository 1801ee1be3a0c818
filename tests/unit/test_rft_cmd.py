"""`smagent rft show|set` on the simulator (ibsim has no RFT): the seed's chassis switch
after a sweep, an entry set and removed by hand, limits refused before any Set, and the
data plane follows what was set."""
import json

import pytest

from fabrics import chassis_fabric
from smagent import api
from smagent.model import netfile
from smagent.sim import trace
from smagent.transport.sim import SimTransport
from smagent import sweep as sweepmod


def test_show_after_sweep_and_set_by_hand(cli, tmp_path, monkeypatch):
    fab = chassis_fabric()
    t = SimTransport(fab)
    r = sweepmod.sweep(t, sweepmod.SweepOptions())
    assert r.problems == []
    # the CLI over the same in-process fabric, through the root group (where errors become exit codes)
    monkeypatch.setattr("smagent.cli.Context.session", lambda self: api.Session(t))

    out = cli("rft", "show", "C", "--json")
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    ports = {e["port"] for e in doc["entries"]}
    assert ports <= set(range(0, 9)) and len(doc["entries"]) >= 6  # one per TCA (and C's own LID)
    assert doc["default_port"] == 8  # the seed's chassis: the fabric port is the default
    t2 = next(n for n in r.topology.cas() if n.description == "T2")
    lid2 = r.lid_plan.lids[t2.port_guids[1]]
    # send T2's LID to C itself (port 0) instead: the data plane must follow
    out = cli("rft", "set", "C", str(lid2), "0", "--json")
    assert out.exit_code == 4 and "unreachable" in out.output, out.output  # refused: T2 would be cut off
    out = cli("rft", "set", "C", str(lid2), "0", "--json", "--allow-defects")
    assert out.exit_code == 1, out.output  # written; the defects it leaves are reported
    assert out.json()["sets"]["rft_blocks"] >= 1 and out.json()["plan_defects"]["unreachable"]["count"] > 0
    tr = trace(t.sim, ("H1", 1), lid2)
    assert tr.outcome != "delivered" or tr.dest != ("T2", 1)
    # the same again: nothing to change, no Set
    again = cli("rft", "set", "C", str(lid2), "0", "--json", "--allow-defects")
    assert json.loads(again.output)["plan"] == []
    # a fresh sweep repairs it
    assert sweepmod.sweep(t, sweepmod.SweepOptions()).problems == []
    assert trace(t.sim, ("H1", 1), lid2).dest == ("T2", 1)
    # limits: LIDsPerPort is 1 on C, so a second LID out of port 1 is refused, nothing sent
    def sets():
        return sum(v for k, v in t.stats.by_kind.items() if k.startswith("SubnSet"))
    before = sets()
    bad = cli("rft", "set", "C", str(lid2), "1")
    assert bad.exit_code == 2 and "LIDsPerPort" in bad.output, bad.output
    assert sets() == before  # refused before any Set


@pytest.mark.parametrize("args, needle", [
    (["rft", "set", "C", "0xC000", "1"], "unicast"),
    (["rft", "set", "C", "3", "1", "--lmc", "2"], "aligned"),
    (["rft", "set", "C", "4", "300"], "not a port"),
    (["rft", "show", "H1"], "not a switch"),
])
def test_rft_bad_input(live_cli, tmp_path, args, needle):
    net = tmp_path / "chassis.net"
    net.write_text(netfile.dumps(chassis_fabric()))
    r = live_cli("--topology", net, *args)
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr


def test_rft_on_an_lft_switch_is_refused(live_cli, tmp_path):
    from smagent.model import topogen
    net = tmp_path / "2sw.net"
    net.write_text(netfile.dumps(topogen.two_switch()))
    r = live_cli("--topology", net, "rft", "show", "Switch1")
    assert r.returncode == 2 and "no random forwarding table" in r.stderr


def test_lft_commands_pass_over_an_rft_only_switch(cli, tmp_path, monkeypatch):
    """A fabric with an RFT-only switch (C, LinearFDBCap 0) next to an LFT switch (F): an
    LFT Get to C fails (0x800c), so `lft dump` and `lft backup` read no LFT block of C
    (`fdb.lft.lft_blocks_to_read`), dump and save F's whole table, and `lft show C`
    is refused as bad input."""
    from smagent.fdb import lft as linear
    from smagent.sim import trace
    fab = chassis_fabric()
    fab.node("F").caps.clear()  # F: the default LFT switch
    t = SimTransport(fab)
    r = sweepmod.sweep(t, sweepmod.SweepOptions())
    t3 = next(n for n in r.topology.cas() if n.description == "T3")
    assert r.problems == [] and trace(t.sim, ("H1", 1), r.lid_plan.lids[t3.port_guids[1]]).dest == ("T3", 1)
    c = next(n for n in r.topology.switches() if n.description == "C")
    f = next(n for n in r.topology.switches() if n.description == "F")
    assert list(linear.lft_blocks_to_read(c.switch_info)) == []
    assert list(linear.lft_blocks_to_read(f.switch_info)) == [0]
    monkeypatch.setattr("smagent.cli.Context.session", lambda self: api.Session(t))
    lft_gets = lambda: sum(v for k, v in t.stats.by_kind.items() if k == "SubnGet(LinearForwardingTable)")
    dump = cli("lft", "dump")
    assert dump.exit_code == 0, dump.output
    assert "(F):" in dump.output and "(C):" not in dump.output
    routed = [line for line in dump.output.splitlines() if line.startswith("0x")]
    assert len(routed) == len(r.lid_plan.lids)  # every LID: the CA ports and both switches
    out = tmp_path / "lft.bak"
    gets = lft_gets()
    bak = cli("lft", "backup", "-o", str(out))
    assert bak.exit_code == 0, bak.output
    assert lft_gets() - gets == 1  # F's one block; none to C
    assert "saved 1 switch " in bak.output and "(F):" in out.read_text() and "(C):" not in out.read_text()
    back = cli("lft", "restore", str(out), "--json")
    assert back.exit_code == 0 and json.loads(back.output)["plan"] == [], back.output
    show = cli("lft", "show", "C")
    assert show.exit_code == 2 and "no linear forwarding table" in show.output, show.output
