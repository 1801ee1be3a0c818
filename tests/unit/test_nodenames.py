"""Node-name maps in the ib-node-name-map format (smagent.config.nodenames): read as the
diags read them (C numbers, quoted or bare names, '#' comments, the first name of a GUID
kept), but a line of another form refuses the file, with its line number."""
from __future__ import annotations

import pytest

from smagent.config import nodenames
from smagent.errors import BadInput

MAP = """# a comment
0x0002c90300000001 "spine-1 (rack 4)"
  0x0002c90300000002   leaf-2   # trailing comment
0x0002c90300000001 "a second name for spine-1"
12 "decimal twelve"
010 "octal eight"
0x0002c90300000003
0x0002c90300000004 "has # inside"

"""


def test_the_format_as_the_diags_read_it():
    m = nodenames.parse(MAP, "map")
    assert m[0x0002C90300000001] == "spine-1 (rack 4)"  # the first name wins
    assert m[0x0002C90300000002] == "leaf-2   "  # a bare name runs up to the '#', as theirs does
    assert m[12] == "decimal twelve" and m[8] == "octal eight"
    assert 0x0002C90300000003 not in m  # a GUID without a name names nothing
    assert m[0x0002C90300000004] == "has # inside"
    assert m.name(0x99, "host\x01a") == "host a" and m.name(12, "ignored") == "decimal twelve"


@pytest.mark.parametrize("line, words", [
    ("zz12 name", "line 1: expected a node GUID"),
    ("0x12name", "line 1: expected a node GUID"),
    ('0x12 "open', "closing quote"),
    ("0x1ffffffffffffffff x", "wider than 64 bits"),
])
def test_a_bad_line_refuses_the_file(line, words):
    with pytest.raises(BadInput, match=words):
        nodenames.parse(line + "\n", "map")


def test_every_problem_at_once_and_a_missing_file(tmp_path):
    with pytest.raises(BadInput) as e:
        nodenames.parse("x\n0x1 a\ny\n", "map")
    assert "line 1" in str(e.value) and "line 3" in str(e.value)
    with pytest.raises(BadInput, match="cannot read"):
        nodenames.load(tmp_path / "absent")


def _map(tmp_path):
    p = tmp_path / "ib-node-name-map"
    p.write_text('0x0000000000200004 "spine-one"  # S1\n0x0000000000100000 "the SM host"\n')
    return str(p)


def test_the_map_names_nodes_in_every_output(cli, tmp_path):
    import json
    m = _map(tmp_path)
    r = cli("--node-name-map", m, "lft", "show", "spine-one")  # found by its mapped name ...
    assert r.exit_code == 0 and "(spine-one)" in r.stdout.splitlines()[0]
    assert "(spine-one)" in cli("--node-name-map", m, "lft", "show", "S1").stdout  # ... and by its own
    doc = json.loads(cli("--node-name-map", m, "discover", "--json").stdout)
    assert "spine-one" in json.dumps(doc) and "the SM host" in json.dumps(doc)
    r = cli("--node-name-map", m, "whatif", "--fail", "spine-one")
    assert r.exit_code == 0 and "if spine-one failed" in r.stdout
    r = cli("--node-name-map", m, "sweep", "--json")
    assert "spine-one" in r.stdout and '"S1"' not in r.stdout


def test_the_api_and_the_metrics_use_it(tmp_path):
    import smagent
    with smagent.connect("sim", node_name_map=_map(tmp_path)) as s:
        s.sweep()
        topo = s.discover()
        assert {n.description for n in topo.switches()} >= {"spine-one"}
        assert [n.node_description for n in topo.switches() if n.description == "spine-one"] == ["S1"]
        report = s.verify()
    assert any(sw[1] == "spine-one" for sw in report.balance["switches"])


def test_a_bad_map_is_refused_before_the_fabric_is_touched(cli, tmp_path):
    bad = tmp_path / "map"
    bad.write_text("0x1 ok\nnot a line\n")
    r = cli("--node-name-map", str(bad), "sweep")
    assert r.exit_code == 2 and "line 2" in r.output
