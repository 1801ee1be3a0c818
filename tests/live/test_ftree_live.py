"""The ftree engine on ibsim: `sweep --routing ftree` on a small damaged 3-level fat tree
(LMC 1), `verify` clean with balance figures, and ibtracert (reading the switches
itself) following sampled CA pairs the way verify traced them: delivered, up then down
(deadlock-free by construction), along the exit ports the LFTs hold."""
import random
import re

import pytest

from ibsim_harness import ibsim_available, skip_reason
from smagent.model import netfile, topogen
from routing_harness import _parse_lfts, start, verify_json

pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]

LEVEL = {"L": 1, "A": 2, "S": 3}
HOP = re.compile(r'\[(\d+)\] -> (?:switch|ca) port \{0x([0-9a-f]+)\}\[(\d+)\] lid (\d+)-\d+ "([^"]*)"')


def test_ftree_sweep_verify_and_ibtracert(tmp_path):
    fabric = topogen.variant(topogen.fat_tree_3(4), drop_links=[(("L0", 3), ("A0", 1))])
    with start(tmp_path, fabric, "ftree") as sim:
        sim.smagent("sweep", "--routing", "ftree", "--lmc", "1")
        rc, doc = verify_json(sim)
        assert rc == 0 and doc["ok"], doc["defects"]
        b = doc["balance"]
        assert b["pairs"] == 16 * 2 * 15 and [lv["name"] for lv in b["levels"]] == \
            ["1->2 up", "2->1 down", "2->3 up", "3->2 down"]
        lfts = _parse_lfts(sim.run(["dump_lfts"]).stdout)
        disc = netfile.loads(sim.run(["ibnetdiscover"]).stdout, "ibnetdiscover")
        lids = sorted(lid for n in disc.cas() for p, _peer in disc.connected_ports(n)
                      for lid in range(n.lid(p), n.lid(p) + 2))
        pairs = random.Random(15).sample([(a, b) for a in lids for b in lids if a // 2 != b // 2], 40)
        for src, dst in pairs:
            r = sim.run(["ibtracert", str(src), str(dst)], check=False)
            assert r.returncode == 0, f"ibtracert {src} {dst}: {r.stdout}{r.stderr}"
            hops = HOP.findall(r.stdout)
            switches = [(int(g, 16), name) for _out, g, _in, _lid, name in hops[:-1]]
            levels = [LEVEL[name[0]] for _g, name in switches]
            peak = levels.index(max(levels))
            assert levels[:peak + 1] == sorted(levels[:peak + 1]) and \
                levels[peak:] == sorted(levels[peak:], reverse=True), (src, dst, r.stdout)
            # each switch's exit port (the next hop's "[out]") is its LFT entry for dst
            for (g, _name), nxt in zip(switches, hops[1:]):
                assert lfts[g][dst] == int(nxt[0]), (src, dst, r.stdout)
