"""`smagent drain` / `undrain` through the running SM's control socket on ibsim (issue 40
item 1): ibroute and ibtracert are the witnesses that every host pair is delivered and no
switch's LFT sends anything into the drained spine, also after the SM restarts from its
state directory; an undrain routes over it again."""
import re

import pytest

from ibsim_harness import ibsim_available, skip_reason
from sm_harness import Daemon, procs, routes, walk_all_pairs, wiring  # noqa: F401 (procs: a fixture)
from smagent.model import netfile, topogen

pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]


def _into(sim, lid: int) -> list:
    """LFT entries of the other switches whose exit leads to the switch at ``lid`` (its own
    table is not read: once drained, nothing routes to its LID either; DR still reaches it)."""
    links, _cas = wiring(sim)
    switches = sorted({s for s, _p in links} - {lid})
    lft = routes(sim, switches)
    return [(sw, dlid, port) for sw in switches for dlid, port in lft[sw].items()
            if dlid != lid and links.get((sw, port), (None,))[0] == lid]


def _trace(sim, a: int, b: int) -> str:
    return sim.run(["ibtracert", str(a), str(b)]).stdout


def _routed(d):
    return d.wait(lambda s: s["state"] == "MASTER" and s["sweeps"] >= 1 and s["last_sweep"]["ok"]
                  and s["activity"] is None, what="MASTER, routed")


def test_drain_through_the_running_sm_survives_a_restart_then_undrain(tmp_path, ibsim, procs):
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net)
    d = Daemon(sim, "--sweep-interval", "1")
    procs.append(d)
    _routed(d)
    s0 = int(re.search(r'"S0" base port 0 lid (\d+)', sim.run(["ibswitches"]).stdout).group(1))
    assert _into(sim, s0)  # routed over S0 before
    cas = wiring(sim)[1]
    pair = next((a, b) for a in cas for b in cas if a != b and '"S0"' in _trace(sim, a, b))
    r = sim.smagent("drain", "--state-dir", d.state, "S0")
    assert "safe to remove" in r.stdout and "until `smagent undrain`" in r.stdout
    assert _into(sim, s0) == []
    walk_all_pairs(sim, skip=[s0])  # every host pair delivered, ibtracert agrees
    assert '"S0"' not in _trace(sim, *pair)  # ibtracert: the pair that crossed S0 goes round it
    assert d.status()["drained"][0]["name"] == "S0"
    refused = sim.smagent("drain", "--state-dir", d.state, "S1", check=False)  # the last spine: leaves apart
    assert refused.returncode == 4 and "would cut off" in refused.stderr + refused.stdout
    d.stop()
    d2 = Daemon(sim, "--sweep-interval", "1")  # the same state directory
    procs.append(d2)
    s = _routed(d2)
    assert [e["name"] for e in s["drained"]] == ["S0"]
    assert _into(sim, s0) == []
    r = sim.smagent("undrain", "--state-dir", d2.state, "S0")
    assert r.stdout.startswith("undrained S0:")
    assert _into(sim, s0)  # routed over it again
    walk_all_pairs(sim)
    assert d2.status()["drained"] == []
