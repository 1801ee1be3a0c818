"""The audit of `smagent run` on ibsim (issue 40.4): an LFT entry cut with `smagent lft set`
behind the running SM's back is read back by the audit, counted, and written back
(ibroute is the witness)."""
import re

import pytest

from ibsim_harness import ibsim_available, skip_reason
from sm_harness import Daemon, procs  # noqa: F401 (procs: a fixture)
from smagent.model import netfile, topogen

pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]


def test_an_lft_entry_set_behind_the_daemons_back_is_repaired(tmp_path, ibsim, procs):
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net)
    d = Daemon(sim, "--sweep-interval", "1", "--audit-share", "50")  # a whole pass every light sweep
    procs.append(d)
    d.wait(lambda s: s["state"] == "MASTER" and s["sweeps"] >= 1 and s["last_sweep"]["ok"], what="MASTER")
    sw = re.search(r'"L0" base port 0 lid (\d+)', sim.run(["ibswitches"]).stdout).group(1)
    table = sim.run(["ibroute", sw]).stdout
    victim, port = next((int(a, 16), int(b)) for a, b in re.findall(r"^(0x[0-9a-f]+) (\d+) ", table, re.M)
                        if int(b) != 0 and int(a, 16) != 1)  # not LID 1: our own answers come back by it
    cut = sim.smagent("lft", "set", sw, victim, 255, "--force", "--allow-defects", check=False)
    assert cut.returncode in (0, 1), cut.stderr
    assert re.search(rf"^{victim:#06x} 255 ", sim.run(["ibroute", sw]).stdout, re.M) is None  # 255: not listed
    s = d.wait(lambda s: s["counters"]["drifts_repaired"] >= 1, timeout=30, what="the audit's repair")
    assert s["counters"]["drifts_found"] == 1 and "L0 LFT block" in s["audit"]["last"][0]
    assert re.search(rf"^{victim:#06x} {port:03d} ", sim.run(["ibroute", sw]).stdout, re.M)
    assert "audit: drift: L0 LFT block" in d.logtext()
