"""Desired-state files: shape checks, resolution against a discovered fabric, every
problem listed at once."""
import pytest

import smagent
from smagent.sweep import desired


from smagent import routing
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
    assert ds.routing == routing.parse_spec("updn") and str(ds.routing) == "updn" and ds.lmc == 1
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


@pytest.mark.parametrize("spec", ["MINHOP", "updn", "Ftree:fallback=UPDN", "updn:0x1a,0x1b", "file:x.dump"])
def test_routing_is_read_by_the_clis_parser(spec):
    """One parser (routing.parse_spec) for --routing and the desired state: the same
    engines, the same case rules, the same typed result."""
    assert desired.parse({"routing": spec}).routing == routing.parse_spec(spec)


@pytest.mark.parametrize("spec, needle", [("dor", "unknown routing engine"), ("minhop:x", "takes no argument"),
                                          ("updn:banana", "is not a GUID"), ("file:", "needs the dump"),
                                          ("ftree:fallback=ftree", "the fallback is another engine"), (7, "unknown routing engine")])
def test_bad_routing_names_the_parsers_reason(spec, needle):
    with pytest.raises(desired.DesiredStateError) as ei:
        desired.parse({"routing": spec})
    assert f"routing: {spec!r}" in str(ei.value) and needle in str(ei.value), str(ei.value)
    with pytest.raises(routing.RoutingError, match=needle):
        routing.parse_spec(spec)  # the CLI's --routing says the same


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


def test_lmc_has_one_rule():
    """The LMC range is checked by one function (mad.forwarding.lmc_problem) wherever an
    LMC arrives: a desired state, the API's sweep options, the LID assignment."""
    from mad import forwarding as fw
    from smagent import api
    from smagent.planning import lidassign as lids
    assert [fw.lmc_problem(x) for x in (0, 7)] == [None, None]
    assert all(fw.lmc_problem(x) for x in (8, -1, True, "3", None))
    with pytest.raises(desired.DesiredStateError, match=r"lmc: 8: the LMC is 0\.\.7"):
        desired.parse({"lmc": 8})
    assert desired.parse({"lmc": "0x3"}).lmc == 3
    with pytest.raises(smagent.BadInput, match=r"lmc 9: the LMC is 0\.\.7"):
        api.sweep_options(None, lmc=9)
    with pytest.raises(lids.LidError, match=r"--lmc 8: the LMC is 0\.\.7"):
        lids.assign([], lmc=8)
