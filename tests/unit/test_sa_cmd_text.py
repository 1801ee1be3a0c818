"""`smagent sa`'s records as text and JSON are UTF-8 whatever bytes a NodeDescription holds:
the codec keeps bytes that are not UTF-8 as surrogates (so nothing is lost), and the command
shows them replaced, as `query nodedesc` does (found by tests/live/test_docs_live.py: under
umad2sim a multi-MAD NodeRecord table carries stray bytes, printed raw before)."""
import json

import pytest

from mad.sa_records import NodeRecord
from smagent.commands import sa_cmd


@pytest.mark.parametrize("as_json", [False, True])
def test_node_string_that_is_not_utf8_is_shown_replaced(as_json, capsysbinary):
    raw = b"H2 \x87\x7f"
    rec = NodeRecord(lid=4, node_string=raw.decode("utf-8", "surrogateescape"))
    sa_cmd._show([rec], as_json, "NodeRecord")
    out = capsysbinary.readouterr().out
    text = out.decode("utf-8")  # strict: raises on the raw 0x87 the old code wrote
    assert "H2 \ufffd\x7f" in (json.loads(text)["items"][0]["node_string"] if as_json else text)
