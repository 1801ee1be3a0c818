"""Types are part of the API (issue 16 item 6): mypy with its default settings passes on
both packages, both ship py.typed, the session's public methods are annotated, and what
they return are the stable classes of `mad.attributes` and `smagent.sweep`."""
from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
import tomllib
import typing
from pathlib import Path

import pytest

import smagent
from mad import attributes as A
from mad.layout import LayoutValue, ZEROS, layout
from construct import BitsInteger
from smagent import discovery
from smagent.planning import lidassign as lids, multicast
from smagent.api import ApplyResult, Session
from smagent.fdb.lft import BlockChange
from smagent.fdb.mft import MftChange
from smagent.fdb.rft import RftChange
from smagent.fdb.tops import SwitchInfoChange
from smagent.linkconf import TableChange
from smagent.verify import Report
from smagent.sweep import PortChange, SweepResult

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_passes_with_default_settings(tmp_path):
    """What CI enforces: `python3 -m mypy mad smagent`, the project's pyproject.toml the only
    configuration (it only says construct, yaml and networkx ship no types). The cache goes to a
    temporary directory, never the repository or $HOME."""
    run = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy-cache"), "mad", "smagent"],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Success: no issues found" in run.stdout


def test_mypy_configuration_disables_no_check():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    mypy = conf["tool"]["mypy"]
    assert set(mypy) == {"overrides"}  # no global option: mypy's defaults
    for o in mypy["overrides"]:
        assert set(o) == {"module", "ignore_missing_imports"}, o  # no ignore_errors, no disabled codes
        assert set(o["module"]) <= {"construct", "construct.*", "yaml", "networkx"}


def test_both_packages_ship_py_typed():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data = conf["tool"]["setuptools"]["package-data"]
    for pkg in ("mad", "smagent"):
        assert (ROOT / pkg / "py.typed").is_file()
        assert "py.typed" in data[pkg]
    assert "mypy" in " ".join(conf["project"]["optional-dependencies"]["test"])


def test_session_public_methods_are_annotated():
    missing = []
    for name, fn in vars(Session).items():
        if name.startswith("_") or not callable(fn):
            continue
        sig = inspect.signature(fn)
        if sig.return_annotation is inspect.Signature.empty:
            missing.append(f"{name} -> ?")
        missing += [f"{name}({p.name})" for p in list(sig.parameters.values())[1:]
                    if p.annotation is inspect.Parameter.empty and p.kind not in (p.VAR_KEYWORD,)]
    sig = inspect.signature(smagent.connect)
    missing += [f"connect({p.name})" for p in sig.parameters.values() if p.annotation is inspect.Parameter.empty]
    assert not missing, missing
    returns = {n: inspect.signature(getattr(Session, n)).return_annotation
               for n in ("discover", "plan", "verify", "query", "sweep")}
    assert returns == {"discover": "Topology", "plan": "SweepResult", "verify": "Report", "query": "Attribute",
                       "sweep": "SweepResult"}


def test_result_types_are_real_types_with_docstrings():
    hints = typing.get_type_hints(SweepResult)
    assert hints["topology"] is discovery.Topology
    assert hints["lid_plan"] is lids.LidPlan
    assert hints["multicast"] == multicast.MulticastPlan | None
    assert hints["switch_changes"] == list[SwitchInfoChange]
    assert hints["port_changes"] == list[PortChange]
    for cls in (SweepResult, PortChange, SwitchInfoChange, BlockChange, MftChange, RftChange, TableChange,
                ApplyResult, discovery.Topology, discovery.DNode, lids.LidPlan, multicast.MulticastPlan, Report):
        assert cls.__doc__ and not cls.__doc__.startswith(cls.__name__ + "("), cls  # not dataclass's default


def test_query_returns_stable_attribute_classes():
    with smagent.connect() as f:
        f.sweep()
        ni = f.query("nodeinfo", 0)
        pi = f.query("portinfo", 0, port=1)
        sw = f.query("switchinfo", "0,1")
        portinfos = f.read_portinfos()
    assert type(ni) is A.NodeInfo and isinstance(ni, A.Attribute)
    assert isinstance(sw, A.SwitchInfo) and isinstance(pi, A.PortInfo)
    # an IntEnum: the name where the API decodes it, still equal to the wire value
    assert pi.port_state is A.PortState.ACTIVE and pi.port_state == 4
    assert {type(p.port_state) for p in portinfos.values()} == {A.PortState}
    assert A.PortInfo.LAYOUT.encode(pi) == A.PortInfo.LAYOUT.encode(dataclasses.replace(pi, port_state=4))


def test_attribute_classes_are_the_module_names_and_decode_to_themselves():
    for cls in (A.NodeInfo, A.PortInfo, A.PortInfoExtSpeeds, A.SwitchInfo, A.LinearForwardingTable, A.SMInfo,
                A.Notice, A.NodeDescription, A.P_KeyTable, A.SLtoVLMappingTable, A.VLArbitrationTable,
                A.RandomForwardingTable, A.MulticastForwardingTable):
        value = A.decode_attribute(cls.ATTR_ID, bytes(64), (1 << 31) if cls is A.PortInfoExtSpeeds else 0)
        assert type(value) is cls and cls.__module__ == "mad.attributes"
        assert cls.decode(bytes(64)) == value == cls()
    assert issubclass(A.PortInfoExtSpeeds, A.PortInfo)


def test_a_declared_class_must_match_its_layout():
    with pytest.raises(TypeError, match=r"\['b', 'c'\] differ"):
        @layout("a" / BitsInteger(8), "b" / BitsInteger(8))
        class Wrong(LayoutValue):
            a: int = 0
            c: int = 0
    with pytest.raises(TypeError, match="declared bytes, the layout holds int"):
        @layout("a" / BitsInteger(8))
        class WrongType(LayoutValue):
            a: bytes = ZEROS
