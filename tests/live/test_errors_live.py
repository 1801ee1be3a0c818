"""Issue 11 item 3 on ibsim: a file argument that cannot be written is refused before the
first SMP (the fabric is left exactly as it was: ibnetdiscover sees no LID), with the
documented code and, with --json, one JSON document; a good one is then written."""
import json

import pytest

from smagent.model import netfile, topogen

pytestmark = [pytest.mark.ibsim]


def fabric_state(sim) -> str:
    """ibnetdiscover's view without its comment header (which carries a timestamp)."""
    return "\n".join(l for l in sim.run(["ibnetdiscover"]).stdout.splitlines() if not l.startswith("#"))


def test_unwritable_lid_file_and_state_dir_refused_before_any_smp(tmp_path, ibsim):
    net = tmp_path / "2sw.net"
    net.write_text(netfile.dumps(topogen.two_switch()))
    a_file = tmp_path / "plain"
    a_file.write_text("")
    sim = ibsim(net)
    before = fabric_state(sim)
    assert "lid 0 " in before or " lid 0" in before  # nothing has LIDs yet: the witness can see a sweep
    r = sim.smagent("sweep", "--lid-file", "/nonexistent/dir/g2l", "--json", check=False)
    assert r.returncode == 2, (r.stdout, r.stderr)
    doc = json.loads(r.stdout)
    assert doc["exit_code"] == 2 and "/nonexistent/dir" in doc["error"] and doc["problems"]
    r = sim.smagent("sweep", "--state-dir", str(a_file / "sub"), check=False)
    assert r.returncode == 2 and "--state-dir" in r.stderr, r.stderr
    assert fabric_state(sim) == before, "a refused sweep changed the fabric"

    g2l = tmp_path / "g2l"
    r = sim.smagent("sweep", "--lid-file", str(g2l), check=False)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert g2l.read_text().count("0x") >= 3 * 6  # every port's record written after the Sets
    assert fabric_state(sim) != before
