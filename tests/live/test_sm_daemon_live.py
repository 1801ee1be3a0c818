"""`smagent run` on ibsim: MASTER as `sminfo` sees it, a cut link repaired from its trap
with no manual step (every host pair traced by ibtracert), ReLink restoring the original
routes (ibroute), light sweeps that send only Gets, and OpenSM as the other SM in both
priority orders: exactly one MASTER, handover both ways, the standby taking over when the
master is killed.

How ibsim plays (docs/PITFALLS.md): SMInfo requests and traps go to the client that opened the
issm device; Trap 128 on Unlink/ReLink goes to a switch's MasterSMLID; two SMs need
different nodes (SIM_HOST). OpenSM runs with a scratch OSM_CACHE_DIR/OSM_TMP_DIR and a
config file with a 1 s SMInfo polling interval and 2 retries (ours likewise), so a
takeover is seconds, not OpenSM's default ~50 s.
"""
import os
import re
import signal
import time

import pytest

from ibsim_harness import ibsim_available, skip_reason
from sm_harness import (Daemon, OpenSM, converge, needs_opensm, procs, routes, sminfo_at,  # noqa: F401 (procs: a fixture)
                        walk_all_pairs, wiring)
from smagent.model import netfile, topogen

pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]


@pytest.mark.parametrize("shape,cut", [("ft2", ("L0", 3)), ("ft3", ("A0", 3))])
def test_master_repairs_a_cut_link_and_relink_restores(tmp_path, ibsim, procs, shape, cut):
    fabric = topogen.fat_tree_2(4) if shape == "ft2" else topogen.fat_tree_3(4)
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(fabric))
    sim = ibsim(net, console=True)
    d = Daemon(sim, "--sweep-interval", "1")
    procs.append(d)
    s = d.wait(lambda s: s["state"] == "MASTER" and s["sweeps"] >= 1, what="MASTER")
    assert "SMINFO_MASTER" in sim.run(["sminfo"]).stdout
    assert s["master_guid"] == s["guid"]
    switches, before = walk_all_pairs(sim)

    # a light sweep with nothing changed: SwitchInfo Gets only, one per switch (and the audit's)
    s1 = d.wait(lambda s: s["counters"]["light_sweeps"] >= 1, what="a light sweep")
    s2 = d.wait(lambda s: s["counters"]["light_sweeps"] >= s1["counters"]["light_sweeps"] + 2,
                what="two more light sweeps")
    assert s2["sweeps"] == s1["sweeps"]
    assert s2["counters"]["light_sweep_gets"] == len(fabric.switches())
    served = (s2["counters"]["sminfo_gets_answered"] - s1["counters"]["sminfo_gets_answered"])
    audited = s2["audit"]["reads"] - s1["audit"]["reads"]  # its share of Gets: one every few light sweeps
    assert s2["smps_sent"] - s1["smps_sent"] == served + audited + len(fabric.switches()) * (
        s2["counters"]["light_sweeps"] - s1["counters"]["light_sweeps"])

    sim.unlink(*cut)
    d.wait(lambda s: s["counters"]["repairs"] >= 1 and s["counters"]["traps"] >= 1, what="repair after Unlink")
    _, after_cut = walk_all_pairs(sim)
    assert after_cut != before  # the routes over the cut link moved

    sim.relink(*cut)
    s = d.wait(lambda s: s["counters"]["repairs"] >= 2, what="repair after ReLink")
    assert s["last_sweep"]["problems"] == 0
    assert routes(sim, switches) == before
    assert d.stop() == 0  # SIGTERM: a clean exit
    log = d.logtext()
    assert "trap: trap 128 (link_state_change)" in log and "state: DISCOVERING -> MASTER" in log
    assert "signal SIGTERM: stopping" in log and "stopped" in log


@needs_opensm
def test_opensm_higher_joins_takes_over_and_we_take_back_when_it_dies(tmp_path, ibsim, procs):
    """smagent (priority 1) is MASTER; OpenSM (priority 5) comes up: smagent hands over and
    stands by; OpenSM is killed: smagent takes over."""
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net, console=True)
    d = Daemon(sim, "--priority", "1", "--poll-interval", "1", "--poll-retries", "2", "--sweep-interval", "2")
    procs.append(d)
    d.wait(lambda s: s["state"] == "MASTER", what="MASTER")
    osm = OpenSM(sim, "H7", 5, tmp_path / "osm")
    procs.append(osm)
    converge(sim, d, "H0", "H7", "H7")
    s = d.status()
    assert s["state"] == "STANDBY" and s["counters"]["handovers_sent"] == 1
    assert "state: MASTER -> STANDBY (handed over to SM" in d.logtext()
    osm.stop()
    d.wait(lambda s: s["state"] == "MASTER", timeout=15, what="takeover")  # 1 s polls, 2 retries
    assert d.status()["counters"]["poll_failures"] >= 3
    converge(sim, d, "H0", "H7", "H0")


@needs_opensm
def test_we_join_higher_opensm_hands_over_and_opensm_takes_back_when_we_die(tmp_path, ibsim, procs):
    """OpenSM (priority 1) is MASTER; smagent (priority 5) comes up: OpenSM hands over to it
    (SubnSet(SMInfo) HANDOVER, smagent acknowledges); smagent is killed: OpenSM takes over."""
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net, console=True)
    osm = OpenSM(sim, "H7", 1, tmp_path / "osm")
    procs.append(osm)
    deadline = time.monotonic() + 20
    while "SMINFO_MASTER" not in sminfo_at(sim, "H7"):
        assert time.monotonic() < deadline, "OpenSM never MASTER"
        time.sleep(0.3)
    d = Daemon(sim, "--priority", "5", "--poll-interval", "1", "--poll-retries", "2", "--sweep-interval", "2")
    procs.append(d)
    converge(sim, d, "H0", "H7", "H0")
    s = d.status()
    assert s["counters"]["handovers_received"] >= 1, d.logtext()[-3000:]
    assert "HANDOVER from" in d.logtext()
    assert "Handing over mastership" in osm.log.read_text(errors="replace") or \
        "HANDOVER" in d.logtext()
    d.stop(signal.SIGKILL)  # the master dies (its issm closes with it: IsSM clears)
    # OpenSM's own takeover (polls lost, then its discovery): 30 s, as the bring-up's 25
    converge(sim, d, "H0", "H7", "H7", timeout=30, osm=osm)


def _wait_log(d, text: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in d.logtext():
        assert d.proc.poll() is None, f"smagent run exited {d.proc.returncode}: {d.logtext()[-3000:]}"
        assert time.monotonic() < deadline, f"{text!r} not logged in {timeout} s: {d.logtext()[-3000:]}"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def ft3_1024(tmp_path_factory):
    """The full k=16 3-level fat tree: 1,024 hosts, 320 switches (its net file and ibsim's size flags)."""
    fabric = topogen.fat_tree_3(16)
    net = tmp_path_factory.mktemp("ft3") / "fabric.net"
    net.write_text(netfile.dumps(fabric))
    return net, netfile.ibsim_size_args(fabric)


def test_status_answers_within_a_second_during_the_bring_up_sweep(tmp_path, ibsim, procs, ft3_1024):
    """The daemon serves its control socket between the rounds of its sweep: every status
    asked while the bring-up sweep of 1,024 hosts runs answers within 1 s."""
    from smagent.sm import control
    net, size = ft3_1024
    sim = ibsim(net, extra_args=size)
    d = Daemon(sim, "--sweep-interval", "0")
    procs.append(d)
    _wait_log(d, "sweep (became MASTER): started")
    assert d.status()["activity"] == "sweep (became MASTER)"  # `smagent status --json` itself, mid-sweep
    path, seen, slowest = control.socket_path(d.state), [], 0.0
    while "sweep (became MASTER): " not in d.logtext().split("started", 1)[-1]:  # until the sweep's end is logged
        t0 = time.monotonic()
        s = control.query(path, timeout=5.0)
        slowest = max(slowest, time.monotonic() - t0)
        seen.append(s.get("activity"))
        time.sleep(0.05)
    assert "sweep (became MASTER)" in seen, seen  # asked while the sweep ran, and it said so
    assert slowest < 1.0, f"slowest status answer {slowest:.3f} s over {len(seen)} asked"
    assert d.wait(lambda s: s["sweeps"] == 1)["state"] == "MASTER"


def test_sigterm_during_the_bring_up_sweep_ends_the_daemon_within_a_second(tmp_path, ibsim, procs, ft3_1024):
    net, size = ft3_1024
    sim = ibsim(net, extra_args=size)
    d = Daemon(sim, "--sweep-interval", "0")
    procs.append(d)
    _wait_log(d, "sweep (became MASTER): started")
    time.sleep(0.3)  # well inside the sweep: its discovery alone takes longer
    proc = d.proc
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGTERM)
    rc = proc.wait(10)
    took = time.monotonic() - t0
    log = d.logtext()
    assert rc == 0, log[-3000:]
    assert "stop: sweep (became MASTER) abandoned" in log and "sweeps: 1" not in log
    assert took < 1.0, f"the daemon took {took:.3f} s to stop; log:\n{log[-2000:]}"


def test_a_whole_core_switch_unlinked_is_routed_around_before_any_light_sweep(tmp_path, ibsim, procs):
    """ibsim traps only the first port of an `Unlink S0`: the repair reads that neighbour,
    its light look finds the others' PortStateChange and reads them in the same repair, and
    S0, every link of it seen down, leaves the topology: one incremental repair, no full
    sweep (once: Sets to S0 unanswered, then a full sweep). `ReLink S0`: the walk from the
    ports that came up brings it back, again without a full sweep."""
    fabric = topogen.fat_tree_3(8)
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(fabric))
    sim = ibsim(net, console=True, extra_args=netfile.ibsim_size_args(fabric))
    d = Daemon(sim, "--sweep-interval", "60")
    procs.append(d)
    d.wait(lambda s: s["state"] == "MASTER" and s["sweeps"] >= 1, timeout=60, what="MASTER")
    walk_all_pairs(sim)
    for step, act in (("lost", sim.unlink), ("back", sim.relink)):
        before = d.status()["sweeps"]
        act("S0")
        s = d.wait(lambda s: s["sweeps"] > before and s["last_sweep"]["problems"] == 0 and not s["activity"],
                   timeout=30, what=f"a clean repair (S0 {step})")
        assert s["last_sweep"]["incremental"], (step, s["last_sweep"])
        walk_all_pairs(sim)
    assert "full sweep instead" not in d.logtext(), d.logtext()[-3000:]
    assert d.status()["counters"]["light_sweeps"] == 0 and s["sweeps_failed"] == 0


OPENSM_HEAVY_SWEEP_FT3_288 = 4030  # issue 30.5: OpenSM's SMPs for a host link cut on this tree


def test_a_hosts_link_cut_and_return_cost_a_tenth_of_opensms_heavy_sweep(tmp_path, ibsim, procs):
    """Issue 30.5: on the issue's 288-host 3-level tree a host's link cut and its return
    are each repaired incrementally (its LID's LFT entries, its group membership; the host
    back with the same LID, ARMED and ACTIVE) with fewer than 1/10 of OpenSM's 4,030 SMPs
    (once: a full sweep each, 3,154)."""
    fabric = topogen.fat_tree_3(36, hosts=288)
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(fabric))
    sim = ibsim(net, console=True, extra_args=netfile.ibsim_size_args(fabric))
    d = Daemon(sim, "--sweep-interval", "60")
    procs.append(d)
    d.wait(lambda s: s["state"] == "MASTER" and s["sweeps"] >= 1 and not s["activity"], timeout=90, what="MASTER")
    links, cas = wiring(sim)
    switches = sorted({s for s, _p in links})
    before = routes(sim, switches)
    sim.unlink("L0", 6)  # H5
    s = d.wait(lambda s: s["counters"]["repairs"] >= 1 and not s["activity"], timeout=30, what="repair after Unlink")
    cut = s["last_sweep"]
    assert cut["incremental"] and cut["ok"] and cut["problems"] == 0, cut
    assert cut["smps"] < OPENSM_HEAVY_SWEEP_FT3_288 / 10, cut
    _, cas_cut = wiring(sim)
    gone = set(cas) - set(cas_cut)
    assert len(gone) == 1
    _, cut_routes = walk_all_pairs(sim)
    assert all(cut_routes[sw].get(next(iter(gone))) is None for sw in switches)  # no route to it
    sim.relink("L0", 6)
    s = d.wait(lambda s: s["counters"]["repairs"] >= 2 and not s["activity"], timeout=30, what="repair after ReLink")
    back = s["last_sweep"]
    assert back["incremental"] and back["ok"] and back["problems"] == 0, back
    assert back["smps"] < OPENSM_HEAVY_SWEEP_FT3_288 / 10, back
    assert wiring(sim)[1] == cas  # the same LID again
    assert walk_all_pairs(sim) == (switches, before)
    assert d.status()["sweeps_failed"] == 0
    assert re.search(r"LinkState:\.+Active", sim.run(["smpquery", "portinfo", str(next(iter(gone))), "1"]).stdout)
    print(f"host link cut: {cut['smps']} SMPs, return: {back['smps']} SMPs (OpenSM: {OPENSM_HEAVY_SWEEP_FT3_288})")
