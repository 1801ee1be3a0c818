"""Convergence with default settings on a lossy fabric (issue 14): ibsim drops RATE % of
the packets entering every port of every switch (console ``Error "switch" RATE``), both
ways, so a directed-route SMP to a host two switch levels away crosses six lossy ports
(at 30 %, about one try in eight gets through; across a 3-level tree's core, one in
35). `smagent sweep` with no tuning must exit 0, and infiniband-diags
(tests/support/fabric_witness.py), run once the drops are cleared, must find every port with its LID and ACTIVE, and every pair of LIDs reachable
through the tables the switches hold; a dry run must plan no Set (every table reads
back as planned)."""
import json

import pytest

from fabric_witness import witness
from ibsim_harness import ibsim_available, skip_reason
from smagent.model import netfile, topogen

pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]


def lossy_sim(ibsim, tmp_path, fabric):
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(fabric))
    return ibsim(net, console=True)


def set_loss(sim, fabric, rate):
    for n in fabric.switches():
        sim.error(n.name, rate)


@pytest.mark.parametrize("levels,rate", [(2, 10), (2, 30), (3, 30)])
def test_default_sweep_converges_on_lossy_switches(ibsim, tmp_path, levels, rate):
    # 2 levels: 6 switches, 8 hosts. 3 levels: 20 switches, 16 hosts; a host across the
    # core is 5 switches away, so at 30 % a try gets through about once in 35 (0.7^10)
    fabric = topogen.fat_tree_2(4) if levels == 2 else topogen.fat_tree_3(4)
    sim = lossy_sim(ibsim, tmp_path, fabric)
    fresh = witness(sim)  # the witness sees an unconfigured fabric for what it is
    assert fresh.no_lid and fresh.not_active and not fresh.ok()
    set_loss(sim, fabric, rate)
    r = sim.smagent("sweep", "--json", check=False)
    s = json.loads(r.stdout)
    assert r.returncode == 0, (s["problems"], s["unreachable"], r.stderr[-2000:])
    assert s["problems"] == [] and s["unreachable"] == []
    assert s["losses"] > 0 and s["retries"] > 0 and s["passes"] >= 1 and s["discovery_passes"] >= 1
    assert s["loss_estimate"] > 0
    set_loss(sim, fabric, 0)
    w = witness(sim)
    assert w.ok(), (w.summary(), w.no_lid[:5], w.not_active[:5], w.unreachable[:5])
    assert len(w.lfts) == len(fabric.switches()) and len(w.lids) == len(fabric.nodes)
    plan = json.loads(sim.smagent("sweep", "--dry-run", "--json").stdout)
    assert all(v == 0 for v in plan["sets"].values()), plan["plan"][:10]

