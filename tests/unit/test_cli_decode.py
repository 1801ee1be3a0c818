"""`smagent decode`: text, JSON, stdin, and bad input with exit status 2."""
import json

import pytest


def test_decode_json_switchinfo(live_cli, vectors):
    v = vectors["2sw4hca/pre_dr_switchinfo_presm/resp"]
    r = live_cli("decode", "--json", v["hex"])
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["attribute_name"] == "SwitchInfo"
    assert d["d"] == 1
    assert d["attribute"]["linear_fdb_cap"] == v["decoded"]["LinearFdbCap"]
    assert d["attribute"]["multicast_fdb_cap"] == v["decoded"]["McastFdbCap"]


def test_decode_text_stdin_many(live_cli, vectors):
    lines = "\n".join(vectors[n]["hex"] for n in ("2sw4hca/pre_dr_nodeinfo_sw0/resp", "2sw4hca/pre_dr_nodedesc_sw0/resp"))
    r = live_cli("decode", "-", input=lines)
    assert r.returncode == 0, r.stderr
    assert "node_type:" in r.stdout and "Switch (2)" in r.stdout
    assert "node_string:" in r.stdout and "Switch1" in r.stdout


@pytest.mark.parametrize("bad, needle", [
    ("abcd", "256"),
    ("zz", "not hexadecimal"),
    ("02" + "81" + "00" * 254, "base_version=2"),
    ("01" + "04" + "00" * 254, "mgmt_class=0x04"),
])
def test_decode_bad_input_exit_2(live_cli, bad, needle):
    r = live_cli("decode", bad)
    assert r.returncode == 2
    assert needle in r.stderr
    assert "Traceback" not in r.stderr
