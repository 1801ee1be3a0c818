"""`smagent query` on ibsim against smpquery (infiniband-diags) on the same fabric:
NodeInfo, NodeDescription, PortInfo and SwitchInfo over 0..3 hops of directed route,
then LID-routed once a sweep has assigned LIDs. Field names are mapped with the same
table the golden-vector tests use (smpquery's names -> the IBA snake_case names)."""
import json
import pathlib
import re

import pytest

from ibsim_harness import ibsim_available, skip_reason
from smpquery_names import SMPQUERY

pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]

NET = pathlib.Path(__file__).parents[1] / "vectors" / "ibsim-36port.net"  # SM on the CA H1
# (DR path, is switch, ports to read PortInfo of)
PATHS = [("0", False, [1]), ("0,1", True, [0, 1, 33]), ("0,1,33", True, [0, 7, 2]), ("0,1,33,2", False, [1])]
ATTR = {"nodeinfo": "NodeInfo", "nodedesc": "NodeDescription", "portinfo": "PortInfo", "switchinfo": "SwitchInfo"}
_LINE = re.compile(r"^([A-Za-z0-9 ]+?):\.*(.*)$")


def smpquery_values(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            continue
        key, val = m.group(1).strip(), m.group(2).strip()
        try:
            out[key] = int(val, 0)
        except ValueError:
            out[key] = val
    return out


def compare(attr: str, ours: dict, smpq_text: str) -> int:
    table = SMPQUERY[ATTR[attr]]
    theirs = smpquery_values(smpq_text)
    checked = 0
    for key, val in theirs.items():
        spec = table.get(key)
        if spec is None:
            continue
        name, conv = spec
        assert ours[name] == conv(val), f"{attr} {key}: smpquery {val!r} -> {conv(val)!r}, smagent {ours[name]!r}"
        checked += 1
    return checked


def query(sim, attr, target, *extra):
    r = sim.smagent("query", attr, target, "--json", *extra, check=False)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["value"]


def test_query_matches_smpquery_dr_then_lid(ibsim, tmp_path):
    sim = ibsim(NET)
    total = 0
    for path, is_switch, ports in PATHS:
        for attr in ("nodeinfo", "nodedesc") + (("switchinfo",) if is_switch else ()):
            total += compare(attr, query(sim, attr, path), sim.run(["smpquery", "-D", attr, path]).stdout)
        for p in ports:
            ours = query(sim, "portinfo", path, "--port", str(p))
            total += compare("portinfo", ours, sim.run(["smpquery", "-D", "portinfo", path, str(p)]).stdout)
    assert total > 150  # every field smpquery prints, over 4 nodes and 3 hops
    # LIDs through a sweep, then the same reads LID-routed through the programmed LFTs
    r = sim.smagent("sweep", "--json", check=False)
    assert r.returncode == 0, r.stderr
    lids = {}
    for path, is_switch, ports in PATHS:
        lids[path] = query(sim, "portinfo", path, "--port", "0" if is_switch else str(ports[0]))["lid"]
        assert lids[path] > 0
    for path, is_switch, ports in PATHS:
        lid = str(lids[path])
        for attr in ("nodeinfo", "nodedesc") + (("switchinfo",) if is_switch else ()):
            total += compare(attr, query(sim, attr, lid), sim.run(["smpquery", attr, lid]).stdout)
        p = str(ports[-1])
        compare("portinfo", query(sim, "portinfo", lid, "--port", p), sim.run(["smpquery", "portinfo", lid, p]).stdout)
