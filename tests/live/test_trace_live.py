"""`smagent trace SRC DST` against ibtracert on ibsim (issue 39 item 7): the same text,
line for line, for routes between CAs and switches, in both formats; a route cut by an
LFT entry of 255 is reported (exit 1) where ibtracert fails."""
import pytest

from ibsim_harness import ibsim_available, skip_reason
from smagent.model import netfile, topogen

pytestmark = [pytest.mark.ibsim, pytest.mark.skipif(not ibsim_available(), reason=skip_reason())]


def test_trace_equals_ibtracert(ibsim, tmp_path):
    net = tmp_path / "2sw.net"
    net.write_text(netfile.dumps(topogen.two_switch()))
    sim = ibsim(net)
    sim.smagent("sweep")
    # LIDs after the sweep: Hca1 1, Switch1 2, Hca3 3, Switch2 4, Hca2 5, Hca4 6 (ibtracert names them all)
    for src, dst, extra in (("1", "5", ()), ("5", "1", ()), ("1", "3", ()), ("1", "4", ()), ("2", "6", ()),
                            ("1", "1", ()), ("3", "6", ("-n",))):
        theirs = sim.run(["ibtracert", *extra, src, dst]).stdout
        ours = sim.smagent("trace", *extra, src, dst).stdout
        assert ours == theirs, (src, dst, ours, theirs)
        assert theirs.count("\n") >= 2
    # named by description and by DR path: the same route as by LID
    assert sim.smagent("trace", "Hca1", "Hca2").stdout == sim.run(["ibtracert", "1", "5"]).stdout
    doc = sim.smagent("trace", "0", "Hca4", "--json").json()
    assert doc["delivered"] and [h["description"] for h in doc["hops"]] == ["Switch1", "Switch2", "Hca4"]
    # cut: Switch2 forwards Hca2's LID nowhere
    sim.smagent("lft", "set", "4", "5", "255", "--allow-defects", check=False)
    assert sim.run(["ibtracert", "1", "5"], check=False).returncode != 0
    r = sim.smagent("trace", "1", "5", check=False)
    assert r.returncode == 1 and "error: 'Switch2' drops LID 5: LFT entry 255 (no route)" in r.stderr, r.stderr
    assert r.stdout.splitlines()[-1].startswith('[3] -> switch port {') and "Switch2" in r.stdout
