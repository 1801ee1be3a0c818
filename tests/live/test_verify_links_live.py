"""`smagent verify`'s link checks on ibsim: after `smagent --transport umad sweep` no link
defect is left (MTU and VLs agree, every SL maps to a data VL along every path, the
default partition on every end port), and a link cabled at 1X where both ends support
more (net-file port options `w=1` and, on the other end, `w=3`: 1X or 4X enabled, which
ibsim trains at 1X; as tests/unit/test_admin_view.py's ODD_NET) is listed as a
degraded_link warning, which does not change the exit code.
"""
import pytest

pytestmark = [pytest.mark.ibsim]

NET = """\
Switch\t4 "S0"
[1]\t"S1"[1]\tw=1
[3]\t"H0"[1]
[4]\t"H1"[1]

Switch\t4 "S1"
[1]\t"S0"[1]\tw=3
[3]\t"H2"[1]

Hca\t1 "H0"
[1]\t"S0"[3]

Hca\t1 "H1"
[1]\t"S0"[4]

Hca\t1 "H2"
[1]\t"S1"[3]
"""

LINK_DEFECTS = {"link_mtu_mismatch", "link_vl_mismatch", "sl_unmapped", "no_default_partition"}


def test_swept_fabric_has_no_link_defect_and_lists_the_1x_link(tmp_path, ibsim):
    net = tmp_path / "degraded.net"
    net.write_text(NET)
    sim = ibsim(net)
    r = sim.smagent("sweep", check=False, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    r = sim.smagent("verify", "--json", check=False, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = r.json()
    assert doc["ok"] and not LINK_DEFECTS & set(doc["defects"]), doc["defects"]
    s = doc["summary"]
    assert s["links_checked"] and s["tables_checked"] and s["data_hops"] > 0
    # ibsim reports 12X and QDR supported but trains every link at 4xSDR: all are listed,
    # the cabled-down one at 1X
    deg = doc["warnings"]["degraded_link"]
    assert deg["count"] == 4
    (one,) = [e for e in deg["examples"] if e["rate"].startswith("1x")]
    assert {one["port"], one["peer"]} == {"S0[1]", "S1[1]"} and "width 1X of 12X possible" in one["why"], one
    assert all("width 4X of 12X possible" in e["why"] for e in deg["examples"] if e is not one)
    r = sim.smagent("verify", check=False, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "warning degraded_link: 4 links running below the width or speed both ends support" in r.stdout
    assert "S0[1] - S1[1] (1xSDR): width 1X of 12X possible" in r.stdout
    assert "links agree on MTU and VLs; every SL maps to a data VL" in r.stdout
