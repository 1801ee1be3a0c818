"""The running SM survives the requests it does not serve, live on ibsim: `ibping`,
`ibsysstat` (infiniband-diags' OpenIB vendor classes 0x32 and 0x33) and `vendstat`
(Mellanox's vendor class 0x0A) sent to its port from another node get an answer (the IBA
status "not supported"), and `smagent run` goes on answering SA queries. Before, umad2sim killed it at the first such MAD (a class no agent
on the port had registered), as it kills OpenSM."""
from __future__ import annotations

import os
import shutil
import subprocess

from sa_harness import SA_MARKS, lid_map, saquery, start_sa
from sm_harness import procs  # noqa: F401 (the fixture)
from smagent.model import netfile, topogen

pytestmark = SA_MARKS


def test_ibping_ibsysstat_and_vendstat_do_not_kill_the_sm(tmp_path, ibsim, procs):
    net = tmp_path / "fabric.net"
    net.write_text(netfile.dumps(topogen.fat_tree_2(4)))
    sim = ibsim(net)
    sm = start_sa(sim, tmp_path, procs)
    lid = str(lid_map(sim)[("H0", 1)])  # the SM's port: smagent runs on the default node, H0
    env = dict(sim.env, SIM_HOST="H3")
    path = os.pathsep.join([env.get("PATH", ""), "/usr/sbin", "/sbin"])
    for cmd in (["ibping", "-c", "2", "-L", lid], ["ibsysstat", lid], ["vendstat", "-N", lid]):
        r = subprocess.run([shutil.which(cmd[0], path=path) or cmd[0], *cmd[1:]], env=env, cwd=sim.cwd,
                           capture_output=True, text=True, timeout=60)
        assert sm.proc.poll() is None, f"{' '.join(cmd)} killed smagent run: {r.stderr[-500:]}"
        assert "timed out" not in (r.stdout + r.stderr), f"{' '.join(cmd)}: no answer\n{r.stdout}{r.stderr}"
    assert saquery(sim, "-c").returncode == 0  # still the SA
