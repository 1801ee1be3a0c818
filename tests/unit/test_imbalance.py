"""`verify --max-imbalance RATIO` (issue 39 item 5): a switch-to-switch link loaded above
RATIO times the ideal of its group is the defect `imbalance` (exit 1); verify and the
sweep summary name the hottest link and its ratio. On the damaged 2-level tree, routed by
updn: the link down to the switch X hanging under leaf L0 carries every route to X's two
hosts, 62 routes against an ideal (the mean over its
switch-to-switch links: no tree levels here) of 31.69."""
import pytest

import smagent
from smagent.model import netfile, topogen

LINE = "hottest link L0[2] -> X[8]: 62 routes, 1.96 times its ideal 31.69"


@pytest.fixture
def damaged(tmp_path, monkeypatch):
    net = tmp_path / "damaged.net"
    net.write_text(netfile.dumps(topogen.damaged_fat_tree_2()))
    s = smagent.connect("sim", topology=net)
    monkeypatch.setattr("smagent.cli.Context.session", lambda self: s)
    return s


def test_sweep_names_the_hottest_link(cli, damaged):
    r = cli("sweep", "--routing", "updn")
    assert r.exit_code == 0, r.output
    assert f"# {LINE} (planned tables)" in r.stdout.splitlines()
    assert cli("sweep", "--routing", "updn", "--dry-run", "--json").json()["hottest_link"] == {
        "link": "L0[2] -> X[8]", "routes": 62, "ideal": 31.69, "ratio": 1.96, "level": None}


def test_verify_max_imbalance_makes_it_a_defect(cli, damaged):
    assert damaged.sweep(routing="updn").problems == []
    r = cli("verify")
    assert r.exit_code == 0 and f"# {LINE}" in r.stdout.splitlines(), r.output  # named, not a defect
    r = cli("verify", "--max-imbalance", "1.5")
    assert r.exit_code == 1, r.output
    assert "defect imbalance: 1 a switch-to-switch link loaded above --max-imbalance times its ideal" in r.stdout
    assert f"  {LINE}, above --max-imbalance 1.5" in r.stdout.splitlines()
    doc = cli("verify", "--max-imbalance", "1.5", "--json").json()
    assert doc["defects"]["imbalance"]["examples"][0]["ratio"] == 1.96 and not doc["ok"]
    assert cli("verify", "--max-imbalance", "2").exit_code == 0  # 1.96 is within
    bad = cli("verify", "--max-imbalance", "0")
    assert bad.exit_code == 2 and "--max-imbalance" in bad.output
    with pytest.raises(smagent.BadInput, match="max_imbalance"):
        damaged.verify(max_imbalance=-1)
