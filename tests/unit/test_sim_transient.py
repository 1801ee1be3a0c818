"""The CLI's `--transport sim` builds a fresh fabric every run (issue 16 item 2): every
write says, on stderr and in its JSON, that the change is gone when smagent exits; a
generated topology can be written from Python and loaded again."""
import json
import subprocess
import sys

import pytest

import smagent
from smagent.model import netfile, topogen
from smagent.commands.common import SIM_TRANSIENT


def _smagent(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "smagent.cli", *args], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)


def test_a_write_in_a_subprocess_says_it_is_lost_and_it_is(tmp_path):
    before = _smagent(tmp_path, "lft", "show", "0,1", "--json")
    assert before.returncode == 0 and SIM_TRANSIENT not in before.stderr
    old = {e["lid"]: e["port"] for e in json.loads(before.stdout)["routes"]}
    port = 2 if old.get(3) != 2 else 3
    r = _smagent(tmp_path, "lft", "set", "0,1", "3", str(port), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["lost_on_exit"] is True and doc["plan"]
    assert r.stderr.count(SIM_TRANSIENT) == 1
    after = _smagent(tmp_path, "lft", "show", "0,1", "--json")
    assert {e["lid"]: e["port"] for e in json.loads(after.stdout)["routes"]} == old  # the note was true


@pytest.mark.parametrize("args", [
    ("sweep",), ("lft", "set", "0,1", "3", "2"), ("mft", "set", "0,1", "0xc001", "1"),
    ("apply", "DESIRED"),
])
def test_every_write_says_so_and_a_dry_run_does_not(cli, tmp_path, args):
    desired = tmp_path / "d.yaml"
    desired.write_text("lft:\n  - {switch: '0,1', lid: 4, port: 2}\n")  # H2's LID, on L1's port 2 (not L1's own LID 3)
    args = [str(desired) if a == "DESIRED" else a for a in args]
    r = cli(*args, "--json")
    assert r.exit_code == 0, r.output
    assert r.json()["lost_on_exit"] is True and SIM_TRANSIENT in r.stderr
    if args[0] != "apply":
        d = cli(*args, "--dry-run", "--json")
        assert d.exit_code == 0 and "lost_on_exit" not in d.json() and SIM_TRANSIENT not in d.stderr
    plain = cli(*args)
    assert SIM_TRANSIENT in plain.stderr and SIM_TRANSIENT not in plain.stdout


def test_a_generated_topology_written_from_python_loads_again(tmp_path):
    fab = topogen.fat_tree_2(4)
    path = tmp_path / "ft4.net"
    netfile.save(fab, path)
    assert netfile.load(path) == fab
    with smagent.connect("sim", topology=path) as f:
        topo = f.discover()
    assert len(topo.switches()) == len(fab.switches()) and len(topo.cas()) == len(fab.cas())
    with smagent.connect("sim", topology=fab) as f:  # or the Fabric itself, no file at all
        assert len(f.discover().nodes) == len(topo.nodes)
    with pytest.raises(smagent.BadInput, match="topology file .*does not exist"):
        netfile.save(fab, tmp_path / "no" / "ft4.net")
