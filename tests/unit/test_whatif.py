"""`smagent whatif` (issue 40 item 3): what a failure would do under the engine, from the
simulator or a snapshot, with no SMP sent: on the bundled fabric (2 spines, 4 leaves, 8 hosts,
one of them dual-ported) the figures follow from its shape."""
from __future__ import annotations

import json

import pytest

import smagent
from smagent.errors import BadInput


def _whatif(*fail, **kw):
    with smagent.connect("sim") as s:
        return s.whatif(list(fail), **kw)


def test_losing_a_spine_loses_no_pair_and_reroutes_some():
    w = _whatif("S1")
    assert w.pairs == 72 and w.lost == 0 and w.with_failed == 0 and w.rerouted > 0
    assert w.credit_loops == 0 and w.hottest_before["link"]
    # the default, auto, is reported as the engine it chose, never as "auto"
    assert w.engine in ("ftree", "dfsssp", "updn")


def test_losing_both_spines_leaves_only_pairs_on_one_leaf():
    w = _whatif("S1", "S2", routing="updn")
    # 9 CA ports; each leaf holds 2 or 3 of them: only pairs within a leaf survive
    assert w.lost == 60 and w.pairs == 72 and w.examples and w.engine == "updn"


def test_a_leaf_takes_its_hosts_with_it():
    w = _whatif("L1")
    assert w.with_failed > 0 and w.lost == 0


def test_a_cable():
    w = _whatif("S1[1]")
    assert w.lost == 0 and w.rerouted > 0 and [str(f) for f in w.failures] == ["S1[1]"]


def test_from_a_snapshot_as_on_the_fabric(tmp_path, cli):
    snap = tmp_path / "fabric.erf"
    with smagent.connect("sim") as s:
        s.sweep()
        s.snapshot(snap)
    r = cli("whatif", "--fail", "S1", "--from", str(snap), "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["lost"] == 0 and doc["rerouted"] > 0 and doc["failures"] == ["S1"]


@pytest.mark.parametrize("fail, words", [("nosuch", "nosuch"), ("S1[x]", "NODE[PORT]"), ("S1[30]", "no cable")])
def test_bad_names_are_refused(cli, fail, words):
    r = cli("whatif", "--fail", fail)
    assert r.exit_code == 2 and words in r.output


def test_a_live_transport_is_refused_before_any_smp():
    class Live:
        name = "umad"
    s = smagent.api.Session.__new__(smagent.api.Session)
    s._open = lambda: Live()  # type: ignore[method-assign]
    with pytest.raises(BadInput, match="snapshot"):
        s.whatif(["S1"])
