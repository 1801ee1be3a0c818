"""Desired-state files: shape checks, resolution against a discovered fabric, every
problem listed at once."""
import pytest

import smagent
from smagent import desired


@pytest.fixture(scope="module")
def topo():
    with smagent.connect("sim") as f:
        return f.discover()


def write(tmp_path, text, name="state.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_yaml_and_json_forms(tmp_path, topo):
    sw = topo.switches()[0]
    ca = topo.cas()[0]
    y = write(tmp_path, f"""
routing: updn
lmc: 1
lft:
  - {{switch: {sw.description}, lid: 5, port: 1}}
multicast:
  - {{mlid: 0xC001, members: [{ca.description}]}}
switches:
  {sw.guid:#018x}: {{default_port: 1}}
""")
    ds = desired.load(y)
    assert ds.routing == "updn" and ds.lmc == 1
    r = desired.resolve(ds, topo)
    assert r.static_lft == {sw.guid: {5: 1}}
    assert r.groups[0xC001] == {(ca.guid, p) for p in ca.lid_ports()}
    assert r.switch_settings == {sw.guid: {"default_port": 1}}
    j = write(tmp_path, '{"routing": "minhop", "lft": [{"switch": "%s", "lid": "0x10", "port": 2}]}' % sw.description,
              "state.json")
    assert desired.resolve(desired.load(j), topo).static_lft == {sw.guid: {16: 2}}


def test_every_shape_problem_listed(tmp_path):
    p = write(tmp_path, """
routing: fastest
lmc: 9
colour: blue
lft:
  - {switch: S1, lid: 0xC000, port: 1}
  - {switch: S1, lid: 5}
multicast:
  - {mlid: 0xBFFF, members: [H1]}
switches:
  S1: {linear_fdb_top: lots, bogus: 1}
""")
    with pytest.raises(desired.DesiredStateError) as ei:
        desired.load(p)
    text = str(ei.value)
    for needle in ("routing: 'fastest'", "lmc: 9", "unknown key 'colour'", "lid 49152", "expected {switch, lid, port}",
                   "0xC000-0xFFFE", "linear_fdb_top: 'lots'", "unknown component 'bogus'"):
        assert needle in text, needle
    assert len(ei.value.problems) == 8


def test_every_fabric_problem_listed(tmp_path, topo):
    sw = topo.switches()[0]
    ca = topo.cas()[0]
    p = write(tmp_path, f"""
lft:
  - {{switch: NoSuchSwitch, lid: 5, port: 1}}
  - {{switch: {sw.description}, lid: 5, port: 99}}
  - {{switch: {ca.description}, lid: 5, port: 1}}
multicast:
  - {{mlid: 0xC001, members: [{sw.description}, nobody]}}
switches:
  {sw.description}: {{default_port: 77}}
""")
    with pytest.raises(desired.DesiredStateError) as ei:
        desired.resolve(desired.load(p), topo)
    text = str(ei.value)
    for needle in ("no node 'NoSuchSwitch'", "port 99 does not exist", "is a channel adapter", "is a switch",
                   "no node 'nobody'", "77 does not exist"):
        assert needle in text, needle


def test_unreadable_and_invalid_yaml(tmp_path):
    with pytest.raises(desired.DesiredStateError, match="cannot read"):
        desired.load(tmp_path / "missing.yaml")
    with pytest.raises(desired.DesiredStateError, match="not valid YAML"):
        desired.load(write(tmp_path, "lft: [unclosed"))
