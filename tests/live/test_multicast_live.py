"""Multicast on ibsim: after `smagent --transport umad sweep`, infiniband-diags' `ibroute -M`
shows every group's ports on every switch of its tree, PortMask positions > 0 included
(a 36-port switch with members on ports 17, 20 and 35); a group file with two groups
works; a second sweep sends no Set."""
import json
import re

import pytest

from fabrics import big_switch_fabric
from ibsim_harness import ibsim_available, skip_reason
from smagent.model import netfile
from smagent.sweep import planjson

pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]

NO_SETS = {"portinfo": 0, "switchinfo": 0, "lft_blocks": 0, "mft_blocks": 0, "rft_blocks": 0,
           "sl2vl": 0, "vlarb": 0, "pkeys": 0, "guids": 0}


def ibroute_mft(sim, lid: int) -> dict[int, set[int]]:
    """MLID -> ports as infiniband-diags shows them, read two ways that must agree:
    `ibroute -M -n LID` (one 16-bit PortMask per position, position 0 first, 4 hex
    digits each) and `ibroute -M LID` (an 'x' under each port's column)."""
    out = sim.run(["ibroute", "-M", "-n", str(lid)]).stdout
    by_mask = {}
    for m in re.finditer(r"^(0x[0-9a-fA-F]{4})\s+([0-9a-fA-F]+)\s*$", out, re.M):
        hexes = m.group(2)
        ports = set()
        for pos in range(len(hexes) // 4):
            mask = int(hexes[4 * pos:4 * pos + 4], 16)
            ports |= {16 * pos + b for b in range(16) if mask >> b & 1}
        by_mask[int(m.group(1), 16)] = ports
    lines = sim.run(["ibroute", "-M", str(lid)]).stdout.splitlines()
    (head,) = [line for line in lines if line.lstrip().startswith("Ports:")]
    first = head.index(":") + 2  # port p's digit sits at first + 2 * p
    by_grid = {}
    for line in lines:
        if re.match(r"^0x[0-9a-fA-F]{4}\s", line):
            by_grid[int(line[:6], 16)] = {(c - first) // 2 for c, ch in enumerate(line) if ch == "x" and c >= first}
    assert by_mask == by_grid, (by_mask, by_grid)
    return by_mask


def switch_lids(sim) -> dict[str, int]:
    disc = netfile.loads(sim.run(["ibnetdiscover"]).stdout, "ibnetdiscover")
    return {n.description: n.lid(0) for n in disc.switches()}


def port_guid(sim, name):
    disc = netfile.loads(sim.run(["ibnetdiscover"]).stdout, "ibnetdiscover")
    (n,) = [n for n in disc.cas() if n.description == name]
    return n.port_guid(1)


@pytest.fixture
def big(ibsim, tmp_path):
    net = tmp_path / "big.net"
    net.write_text(netfile.dumps(big_switch_fabric()))
    return ibsim(net)


def test_default_group_positions_above_zero(big):
    sim = big
    dry = json.loads(sim.smagent("sweep", "--dry-run", "--json").stdout)
    mft = [c for rec in dry["plan"] for c in planjson.expand(rec) if c["table"] == "MFT"]
    # Big: positions 0 (ports 1, 36 is position 2) 1 (17, 20) 2 (35, 36); Small: position 0
    assert dry["sets"]["mft_blocks"] == 4, mft
    assert {"switch": "Big", "block": 0, "position": 2, "mlid": "0xc000", "old": [], "new": [35, 36]}.items() \
        <= next(c for c in mft if (c["switch"], c["position"]) == ("Big", 2)).items(), mft
    s = json.loads(sim.smagent("sweep", "--json").stdout)
    assert s["problems"] == [] and s["sets"]["mft_blocks"] == 4
    assert s["multicast"] == [{"mlid": "0xc000", "members": 6, "root": "Big", "switches": 2}]
    lids = switch_lids(sim)
    assert ibroute_mft(sim, lids["Big"]) == {0xC000: {1, 17, 20, 35, 36}}
    assert ibroute_mft(sim, lids["Small"]) == {0xC000: {1, 2, 3}}
    again = json.loads(sim.smagent("sweep", "--json").stdout)
    assert again["sets"] == NO_SETS and again["problems"] == [], again
    # ibsim's SwitchInfo: MulticastFDBTop 0 and no IsMulticastFDBTopSupported on port 0,
    # so the sweep leaves MulticastFDBTop alone
    out = sim.run(["smpquery", "switchinfo", str(lids["Big"])]).stdout
    assert re.search(r"^MulticastFDBTop:\.+0x0000$", out, re.M), out


def test_group_file_two_groups(big, tmp_path):
    sim = big
    h20, h35, g3 = (port_guid(sim, n) for n in ("H20", "H35", "G3"))
    groups = tmp_path / "groups.txt"
    groups.write_text(f"# two groups\n0xC000 all\n0xC001 0x{h20:016x} 0x{h35:016x}  # two on Big\n"
                      f"0xC005 0x{h35:016x} 0x{g3:016x}\n")
    s = json.loads(sim.smagent("sweep", "--mcast-groups", str(groups), "--json").stdout)
    assert s["problems"] == [], s
    lids = switch_lids(sim)
    assert ibroute_mft(sim, lids["Big"]) == {0xC000: {1, 17, 20, 35, 36}, 0xC001: {20, 35}, 0xC005: {35, 36}}
    assert ibroute_mft(sim, lids["Small"]) == {0xC000: {1, 2, 3}, 0xC005: {1, 3}}
    again = json.loads(sim.smagent("sweep", "--mcast-groups", str(groups), "--json").stdout)
    assert again["sets"] == NO_SETS, again
    # dropping a group keeps its entries (reported) unless pruning; pruning clears them
    # (stale entries below the highest group are read)
    groups.write_text("0xC005 all\n")
    s = json.loads(sim.smagent("sweep", "--mcast-groups", str(groups), "--json").stdout)
    assert s["problems"] == [] and set(s["multicast_kept"]) == {"0xc000", "0xc001"}, s
    assert ibroute_mft(sim, lids["Big"])[0xC001] == {20, 35}
    s = json.loads(sim.smagent("sweep", "--mcast-groups", str(groups), "--prune-multicast", "--json").stdout)
    assert s["problems"] == []
    assert ibroute_mft(sim, lids["Big"]) == {0xC005: {1, 17, 20, 35, 36}}
    assert ibroute_mft(sim, lids["Small"]) == {0xC005: {1, 2, 3}}


def test_bad_group_file_exit_2_sends_nothing(big, tmp_path):
    sim = big
    groups = tmp_path / "groups.txt"
    groups.write_text("0xC000 all\n0xC400 all\n")  # ibsim's MulticastFDBCap is 1024: 0xC000..0xC3FF
    r = sim.smagent("sweep", "--mcast-groups", str(groups), check=False)
    assert r.returncode == 2 and "groups.txt:2" in r.stderr and "MulticastFDBCap" in r.stderr, r.stderr
    out = sim.run(["smpquery", "-D", "portinfo", "0", "1"]).stdout
    assert re.search(r"^Lid:\.+0$", out, re.M), "nothing may be sent after bad input"
    groups.write_text("0xC000 all\n0xC001 garbage\n")
    r = sim.smagent("sweep", "--mcast-groups", str(groups), check=False)
    assert r.returncode == 2 and "groups.txt:2" in r.stderr, r.stderr
