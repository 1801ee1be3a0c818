"""`smagent run` with no --routing on a small torus on ibsim (issue 36: minhop's credit
loops left such a fabric dark, every sweep refused): auto routes it with dfsssp, every
host gets its LID (ibnetdiscover), the SA answers (saquery), a PathRecord carries a layer's
SL, and `status` and the log name the engine and why."""
import re

import pytest

from ibsim_harness import ibsim_available, skip_reason
from sm_harness import Daemon, procs  # noqa: F401 (procs: a fixture)
from smagent.model import netfile, topogen

pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]


def saquery(sim, *args) -> str:
    """saquery's output; tried again when it dies of a signal (issue 36 item 8: under
    umad2sim a resent segment of an earlier answer can crash the next client)."""
    for _ in range(3):
        r = sim.run(["saquery", *args], check=False)
        if r.returncode >= 0:
            assert r.returncode == 0, r.stderr
            return r.stdout
    raise AssertionError(f"saquery {' '.join(args)} crashed three times: {r.stderr}")


def test_run_without_routing_brings_up_a_torus(tmp_path, ibsim, procs):
    fabric = topogen.torus_2d(5, 3, 1)  # its odd rings need two layers
    net = tmp_path / "torus.net"
    net.write_text(netfile.dumps(fabric))
    sim = ibsim(net)
    d = Daemon(sim, "--sweep-interval", "0")
    procs.append(d)
    s = d.wait(lambda s: s["state"] == "MASTER" and s["sweeps"] >= 1, timeout=60, what="MASTER and a sweep")
    assert s["sweeps_failed"] == 0, s["last_error"]
    assert s["routing"]["engine"] == "dfsssp" and "layers" in s["routing"]["reason"], s["routing"]
    assert "; routing: dfsssp (" in d.logtext()
    ca_lids = [int(m) for m in re.findall(r'^\[\d+\]\(\w+\)\s+"S-\w+"\[\d+\].*# lid (\d+) lmc',
                                          sim.run(["ibnetdiscover"]).stdout, re.M)]
    assert len(ca_lids) == len(fabric.cas()) and all(ca_lids), ca_lids  # every host port has its LID
    nodes = saquery(sim, "-N")  # our SA answers (under umad2sim saquery sees one segment)
    assert "NodeRecord dump" in nodes and "NodeDescription" in nodes, nodes
    sls = set()
    for dlid in sorted(ca_lids)[1:]:  # a PathRecord to every other host (one MAD each)
        out = saquery(sim, "-p", "--slid", str(min(ca_lids)), "--dlid", str(dlid))
        m = re.search(r"^\s*sl\.+0x([0-9a-f]+)", out, re.M)
        assert m, out
        sls.add(int(m.group(1), 16))
    assert len(sls) > 1, "the paths ride more than one layer (SL)"
    assert d.stop() == 0
