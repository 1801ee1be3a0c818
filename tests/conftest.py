"""Shared fixtures. The ones for running smagent and ibsim:

* ``cli(*args, input=None, catch_exceptions=False, command=None, **invoke_kw)`` runs the
  click app in-process (click.testing.CliRunner) with ``SMAGENT_STATE_DIR`` under the
  test's tmp_path (nothing touches $HOME) and ``SMAGENT_TRANSPORT=sim`` (not the host's CA).
  Returns a `CliResult`: click's Result (``exit_code``, ``stdout``, ``stderr``,
  ``output``, ``exception``) plus ``json()``, the one JSON document on stdout.
  ``command`` invokes another click command than ``smagent.cli.main``.
* ``replay(fixture, *args, record=None, **cli_kw)``: ``cli`` with ``--transport replay
  --fixture FIXTURE [--record RECORD]``.
* ``live_cli(*args, sim=None, check=False, timeout=600, **run_kw)`` runs
  ``python -m smagent.cli`` as a subprocess. With ``sim`` (an ibsim from the ``ibsim``
  fixture) it is ``--transport umad ARGS`` with ibsim's env, cwd = its scratch dir and
  its state dir, i.e. ``sim.smagent(...)``; without, ARGS in a scratch dir of the test
  with its own state dir. Returns a CompletedProcess (``returncode``, ``stdout``,
  ``stderr``) plus ``json()``; with ``check`` a non-zero exit fails the test.
* ``ibsim(netfile, extra_args=(), console=False, tmpdir=None)`` starts one ibsim
  (tests/support/ibsim_harness.IbSim: unique IBSIM_SOCKNAME, scratch dir, ``-n`` unless
  ``console``) and stops it at teardown, killing only its own process group. Skips
  the test when ibsim is not installed.
"""
import json
import os
import pathlib
import sys

import pytest
from click.testing import CliRunner

# the shared helpers of tests/unit and tests/live (no test file imports another)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "support"))
from ibsim_harness import IbSim, client_env, ibsim_available, run_smagent, skip_reason

VECTORS = pathlib.Path(__file__).parent / "vectors"


@pytest.fixture(scope="session")
def vectors():
    """Every golden vector, by name."""
    out = {}
    for f in sorted(VECTORS.glob("*.jsonl")):
        for line in f.read_text().splitlines():
            v = json.loads(line)
            out[v["name"]] = v
    return out


def _leaf_spine(hosts, host_ports, leaves, spines):
    """A Fabric with hosts H0.. (``host_ports`` ports), 8-port leaves L0.. and spines S0..,
    no cables yet."""
    from smagent.model.fabric import Fabric
    f = Fabric()
    for h in range(hosts):
        f.add_node(name=f"H{h}", node_type="Hca", num_ports=host_ports)
    for prefix, count in (("L", leaves), ("S", spines)):
        for i in range(count):
            f.add_node(name=f"{prefix}{i}", node_type="Switch", num_ports=8)
    return f


def _fat_tree_2_dual_damaged(cuts=((1, 0), (4, 0), (6, 2))):
    """fat_tree_2(8)'s switches (8 leaves, 4 spines) with 16 dual-port hosts, host port 1
    on an even leaf and port 2 on the next (odd) leaf, and the leaf-spine cables ``cuts``
    ((leaf, spine), ...) missing: by default S0 lost L1 and L4, S2 lost L6."""
    f = _leaf_spine(16, 2, 8, 4)
    for h in range(16):
        pair, i = divmod(h, 4)
        f.connect(f"H{h}", 1, f"L{2 * pair}", i + 1)
        f.connect(f"H{h}", 2, f"L{2 * pair + 1}", i + 1)
    for leaf in range(8):
        for s in range(4):
            if (leaf, s) not in cuts:
                f.connect(f"L{leaf}", 5 + s, f"S{s}", leaf + 1)
    return f


def _parallel_cables():
    """Leaves L0, L1 reach S0 on ports 5, 6 and S1 on port 7; L2, L3 reach S0 on port 5
    and S1 on ports 6, 7: the same candidate ports, towards neighbours in another
    pattern, so an LMC answer must not be shared between the two kinds."""
    f = _leaf_spine(16, 1, 4, 2)
    for h in range(16):
        f.connect(f"H{h}", 1, f"L{h // 4}", h % 4 + 1)
    nxt = {"S0": 1, "S1": 1}
    for leaf in range(4):
        spines = ("S0", "S0", "S1") if leaf < 2 else ("S0", "S1", "S1")
        for j, spine in enumerate(spines):
            f.connect(f"L{leaf}", 5 + j, spine, nxt[spine])
            nxt[spine] += 1
    return f


def _fat_tree_3_without(k=4, victim="A1"):
    """topogen.fat_tree_3(k) with the switch ``victim`` (an aggregation switch) gone."""
    from smagent.model import topogen
    from smagent.model.fabric import Fabric
    full, f = topogen.fat_tree_3(k), Fabric()
    for n in full:
        if n.name != victim:
            f.add_node(name=n.name, node_type=n.node_type, num_ports=n.num_ports)
    for a, b in full.links():
        if victim not in (a.node, b.node):
            f.connect(a.node, a.num, b.node, b.num)
    return f


@pytest.fixture(scope="session")
def irregular_fabrics():
    """Builders of irregular fabrics for the routing tests (damaged fat trees, where updn's
    roots need care: issue 11 item 8; parallel cables): {name: (builder, the names of
    the roots updn should choose automatically, or None)}."""
    return {
        "ft2_dual_damaged": (_fat_tree_2_dual_damaged, {"S1", "S3"}),
        "ft2_every_spine_damaged": (lambda: _fat_tree_2_dual_damaged(((1, 0), (3, 1), (5, 2), (7, 3))), None),
        "ft3_without_agg": (_fat_tree_3_without, {"S0", "S1"}),  # A1 fed cores S2, S3
        "ft3_8_without_agg": (lambda: _fat_tree_3_without(8, "A5"), None),
        "parallel_cables": (_parallel_cables, None),
    }


class CliResult:
    """click's Result of one in-process invocation, plus `json()`."""

    def __init__(self, result):
        self.result = result

    def __getattr__(self, name):
        return getattr(self.result, name)

    def __repr__(self):
        return f"<CliResult exit_code={self.result.exit_code}>"

    def json(self):
        return json.loads(self.result.stdout)


@pytest.fixture
def cli(tmp_path, monkeypatch):
    """Run `smagent ARGS` in-process; see the module docstring."""
    monkeypatch.setenv("SMAGENT_STATE_DIR", str(tmp_path / "smagent-state"))
    # the simulator, named: on a host with an HCA the default would be that (umad)
    monkeypatch.setenv("SMAGENT_TRANSPORT", "sim")

    def invoke(*args, input=None, catch_exceptions=False, command=None, **kw) -> CliResult:
        if command is None:
            from smagent.cli import main as command
        # catch_exceptions=False: an unexpected exception fails the test with its
        # traceback instead of passing as exit code 1
        res = CliRunner().invoke(command, [str(a) for a in args], input=input,
                                 catch_exceptions=catch_exceptions, **kw)
        return CliResult(res)

    return invoke


@pytest.fixture
def replay(cli):
    """Run `smagent ARGS` in-process on a recorded session; see the module docstring."""
    def invoke(fixture, *args, record=None, **kw) -> CliResult:
        rec = ["--record", record] if record is not None else []
        return cli("--transport", "replay", "--fixture", fixture, *rec, *args, **kw)

    return invoke


@pytest.fixture
def live_cli(tmp_path):
    """Run `python -m smagent.cli ARGS` as a subprocess; see the module docstring."""
    scratch = tmp_path / "cli-run"

    def run(*args, sim=None, check=False, timeout=600, **kw):
        if sim is not None:
            return sim.smagent(*args, check=check, timeout=timeout, **kw)
        scratch.mkdir(exist_ok=True)
        kw.setdefault("cwd", scratch)
        return run_smagent(args, env=client_env(os.environ, scratch / "smagent-state"), check=check,
                           timeout=timeout, **kw)

    return run


@pytest.fixture
def ibsim(tmp_path):
    """Start ibsim on a net file: ``sim = ibsim(path, extra_args=(), console=False)``;
    see the module docstring."""
    if not ibsim_available():
        pytest.skip(skip_reason())
    started: list[IbSim] = []

    def start(netfile, extra_args=(), console=False, tmpdir=None) -> IbSim:
        sim = IbSim(netfile, tmpdir or tmp_path / f"sim{len(started)}", extra_args, console=console)
        started.append(sim)
        sim.start()
        return sim

    yield start
    for sim in started:
        sim.stop()
