"""`smagent verify` on ibsim with one host port disabled (issue 11 item 7).

`ibportstate LID 1 disable` on a host's port: under ibsim the host stops answering while
its leaf's port stays Active/LinkUp, so discovery cannot reach it. verify used to stop
there (exit 3 "discovery did not reach everything"); now it verifies the rest, lists the
host's place as `unreached` and exits 1. ibnetdiscover, the witness, also reports the
rest of the fabric and misses the same host.
"""
import json

import pytest

from smagent.model import netfile, topogen

pytestmark = [pytest.mark.ibsim]


def test_disabled_host_port_is_unreached_rest_verified(tmp_path, ibsim):
    fabric = topogen.fat_tree_2(4)  # 6 switches, 8 hosts
    net = tmp_path / "ft4.net"
    net.write_text(netfile.dumps(fabric))
    sim = ibsim(net, extra_args=netfile.ibsim_size_args(fabric))
    r = sim.smagent("sweep", check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    disc = netfile.loads(sim.run(["ibnetdiscover"]).stdout, "ibnetdiscover")
    h5 = next(n for n in disc.cas() if n.description == "H5")
    leaf, leaf_port = next((disc.node(peer.node).description, peer.num) for _p, peer in disc.connected_ports(h5))
    sim.run(["ibportstate", str(h5.lid(1)), "1", "disable"])  # H5 falls silent; L2 keeps its port up

    r = sim.smagent("verify", check=False)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "defect unreached: 1 " in r.stdout
    assert f"(behind {leaf} port {leaf_port}): no response" in r.stdout, r.stdout
    r = sim.smagent("verify", "--json", check=False)
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert set(doc["defects"]) == {"unreached"}, doc["defects"]  # the rest of the fabric is clean
    (u,) = doc["defects"]["unreached"]["examples"]
    assert (u["node"], u["port"]) == (leaf, leaf_port) and "no response" in u["error"]
    s = doc["summary"]
    assert (s["switches"], s["ca_ports"], s["lids"], s["unreached"]) == (6, 7, 13, 1)
    assert s["pairs"] == 13 * 12 and s["pairs_unreachable"] == 0

    # the witness: ibnetdiscover sees the same fabric minus H5
    w = sim.run(["ibnetdiscover"], check=False)
    seen = netfile.loads(w.stdout, "ibnetdiscover")
    assert sorted(n.description for n in seen.cas()) == sorted(n.description for n in disc.cas() if n is not h5)
