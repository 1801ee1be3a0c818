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
