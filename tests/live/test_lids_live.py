"""LIDs stay with their ports across port resets (issue 11 item 2): without --lid-file a
sweep keeps them in the state directory (STATE_DIR/guid2lid, OpenSM's format).

The reset, on ibsim's console: Hca3's link goes away (Unlink: it keeps its LID, as a
host that is rebooting) while Hca4's port is reset (Clear + ReLink: it comes back INIT
with LID 0). Without the file, the sweep in between hands Hca4 the lowest free LID,
which is Hca3's; Hca3 then returns with its old LID and one of the two has moved."""
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ibsim_harness import ibsim_available, skip_reason
from sm_harness import wait_status
from smagent.planning import lidassign as lids

from smagent.model import netfile, topogen
pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]


def _lids(sim) -> dict:
    """Port GUID -> LID of every port discovery reaches (ports with a LID)."""
    out = {}
    for n in sim.smagent("discover", "--json").json()["nodes"]:
        for p, v in n["ports"].items():
            if v.get("lid"):
                out[(n["description"], p)] = v["lid"]
    return out


def _lid_of(sim, path: str) -> int:
    out = sim.run(["smpquery", "-D", "portinfo", path, "1"]).stdout
    return int(re.search(r"^Lid:\.+(\d+)$", out, re.M).group(1))


def test_every_port_keeps_its_lid_across_a_port_reset(ibsim, tmp_path):
    net = tmp_path / "2sw.net"
    net.write_text(netfile.dumps(topogen.two_switch()))
    sim = ibsim(net, console=True)
    sim.smagent("sweep")
    first = _lids(sim)
    assert len(first) == 6
    g2l = lids.load_guid2lid(Path(sim.env["SMAGENT_STATE_DIR"]) / "guid2lid")
    assert sorted(lo for lo, _hi in g2l.values()) == sorted(first.values())

    sim.unlink("Hca3", 1)
    sim.command('Clear "Hca4"[1]')
    sim.relink("Hca4", 1)
    assert _lid_of(sim, "0,1,3,2") == 0  # the reset took Hca4's LID
    s = sim.smagent("sweep", "--json").json()
    assert any("was not found; its LID stays reserved" in n for n in s["notes"]), s["notes"]
    assert _lids(sim) == {k: v for k, v in first.items() if k[0] != "Hca3"}

    sim.relink("Hca3", 1)
    sim.smagent("sweep")
    assert _lids(sim) == first


def test_lid_file_chooses_another_place(ibsim, tmp_path):
    net = tmp_path / "2sw.net"
    net.write_text(netfile.dumps(topogen.two_switch()))
    sim = ibsim(net)
    mine = tmp_path / "my-guid2lid"
    sim.smagent("sweep", "--lid-file", mine)
    assert len(lids.load_guid2lid(mine)) == 6
    assert not (Path(sim.env["SMAGENT_STATE_DIR"]) / "guid2lid").exists()


def _run_daemon(sim, state, log):
    """`smagent run` on this ibsim, in its own process group (stopped by the caller)."""
    return subprocess.Popen([sys.executable, "-m", "smagent.cli", "--transport", "umad", "run", "--state-dir",
                             str(state), "--log-file", str(log), "--sweep-interval", "1"],
                            env=sim.env, cwd=sim.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)


def _stop(proc) -> int:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            return proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.wait(15)


def test_daemon_routes_and_repairs_with_a_garbled_guid2lid(ibsim, tmp_path):
    """One bad line in STATE_DIR/guid2lid: the daemon warns naming the line, sweeps,
    repairs a cut link, and rewrites the file without the line (the old one kept aside)."""
    net = tmp_path / "2sw.net"
    net.write_text(netfile.dumps(topogen.two_switch()))
    sim = ibsim(net, console=True)
    state, log = tmp_path / "state", tmp_path / "run.log"
    state.mkdir()
    (state / "guid2lid").write_text("garbage !!!\n")
    proc = _run_daemon(sim, state, log)
    try:
        wait_status(proc, sim, state, log, lambda s: s["state"] == "MASTER" and s["sweeps"] >= 1, "a first sweep")
        sim.unlink("Hca3", 1)
        s = wait_status(proc, sim, state, log, lambda s: s["counters"]["repairs"] >= 1, "a repair")
        assert s["last_sweep"]["problems"] == 0
    finally:
        assert _stop(proc) == 0
    text = log.read_text()
    assert f"WARNING {state / 'guid2lid'}:1: not a guid2lid record" in text
    assert "failed" not in text, text
    table = lids.load_guid2lid(state / "guid2lid")
    assert table.problems == [] and len(table) == 6
    kept = list(state.glob("guid2lid.bad-*"))
    assert len(kept) == 1 and kept[0].read_text() == "garbage !!!\n"
