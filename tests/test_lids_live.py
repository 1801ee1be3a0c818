"""LIDs stay with their ports across port resets (issue 11 item 2): without --lid-file a
sweep keeps them in the state directory (STATE_DIR/guid2lid, OpenSM's format).

The reset, on ibsim's console: Hca3's link goes away (Unlink: it keeps its LID, as a
host that is rebooting) while Hca4's port is reset (Clear + ReLink: it comes back INIT
with LID 0). Without the file, the sweep in between hands Hca4 the lowest free LID,
which is Hca3's; Hca3 then returns with its old LID and one of the two has moved."""
import re
from pathlib import Path

import pytest

from ibsim_harness import ibsim_available, skip_reason
from smagent import lids, netfile, topogen

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
