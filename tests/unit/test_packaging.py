"""The project as a user installs it: a wheel built from this tree, installed in a fresh
virtual environment outside the tree, runs as ``smagent`` and ``python -m smagent`` and
says its version (pyproject.toml's, the one source). Offline: the build uses the setuptools
and wheel already installed (the test extras), the venv sees the system's site-packages
for the dependencies: the site-packages of the interpreter running the tests (a venv's too: a
venv made with --system-site-packages would see the system's, not the venv's). A few seconds."""
import os
import pathlib
import site
import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def _run(args, cwd, **kw):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SMAGENT_TRANSPORT")}
    env["SMAGENT_TRANSPORT"] = "sim"  # the bundled fabric, even on a host with an HCA
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, **kw)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel of this tree, built once (offline, no build isolation)."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    src = tmp_path / "src"  # a copy: an in-tree build would leave build/ and egg-info behind
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    for pkg in ("smagent", "mad"):
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    r = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
              str(tmp_path / "dist"), str(src)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (whl,) = (tmp_path / "dist").glob("smagent-*.whl")
    return whl


def _see_our_dependencies(venv: pathlib.Path) -> None:
    """The new venv finds the dependencies where the running interpreter finds them, after its
    own site-packages: a path file, whose directories' own .pth files (an editable install of
    this tree among them) are not run, so smagent comes from the wheel."""
    ours = [p for p in site.getsitepackages() + [site.getusersitepackages()] if pathlib.Path(p).is_dir()]
    (target,) = (venv / "lib").glob("python*/site-packages")
    (target / "dependencies.pth").write_text("\n".join(ours) + "\n")


def test_wheel_installs_and_runs_outside_the_source_tree(tmp_path, wheel):
    whl = wheel
    assert whl.name.startswith(f"smagent-{VERSION}-")
    names = set(zipfile.ZipFile(whl).namelist())
    assert {"smagent/__main__.py", "smagent/data/default.net", "smagent/py.typed", "mad/py.typed"} <= names

    venv = tmp_path / "venv"
    r = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    _see_our_dependencies(venv)
    py, script = venv / "bin" / "python", venv / "bin" / "smagent"
    r = _run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index",
              str(whl)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr

    where = _run([str(py), "-c", "import smagent; print(smagent.__file__, smagent.__version__)"], cwd=tmp_path)
    assert where.stdout.split() == [str(venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
                                        / "site-packages" / "smagent" / "__init__.py"), VERSION], where
    for cmd in ([str(py), "-m", "smagent", "--version"], [str(script), "--version"]):
        r = _run(cmd, cwd=tmp_path)
        assert (r.returncode, r.stdout) == (0, f"smagent {VERSION}\n"), (cmd, r.stdout, r.stderr)
    # the bundled topology ships too: a command on the simulator works from the wheel
    r = _run([str(py), "-m", "smagent", "query", "nodedesc", "0", "--json"], cwd=tmp_path)
    assert r.returncode == 0 and "node_string" in r.stdout, r.stderr


def test_wheel_declares_the_mit_license(wheel):
    """MIT (the owner's decision): the SPDX expression in the metadata, the text shipped."""
    zf = zipfile.ZipFile(wheel)
    (meta,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
    lines = zf.read(meta).decode().splitlines()
    assert "License-Expression: MIT" in lines
    assert "License-File: LICENSE" in lines
    assert not [line for line in lines if line.startswith("Classifier: License ::")]  # PEP 639: the expression only
    (text,) = [n for n in zf.namelist() if n.endswith("licenses/LICENSE")]
    assert zf.read(text).decode().startswith("MIT License")


def test_version_from_a_source_tree_never_installed(mocker):
    """Without installed metadata the version is the source tree's pyproject.toml's."""
    from importlib import metadata

    import smagent
    mocker.patch.object(metadata, "version", side_effect=metadata.PackageNotFoundError("smagent"))
    assert smagent.__version__ == VERSION


def test_lazy_names_are_listed():
    import smagent
    assert {"connect", "Session", "__version__", "BadInput"} <= set(dir(smagent))
    assert set(smagent.__all__) <= set(dir(smagent))


def _newest_python() -> tuple[str, tuple[int, int]] | None:
    """The newest CPython on this machine above the one running the tests (on PATH, or
    under pyenv, as the project's machines have them), with its version."""
    found = {}
    roots = [pathlib.Path(os.environ.get("PYENV_ROOT", pathlib.Path.home() / ".pyenv")) / "versions"]
    candidates = [shutil.which(f"python3.{n}") for n in range(sys.version_info[1] + 1, 20)]
    candidates += [str(p) for root in roots if root.is_dir() for p in root.glob("3.*/bin/python3")]
    for exe in filter(None, candidates):
        r = subprocess.run([exe, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True, text=True)
        if r.returncode == 0:
            found[tuple(map(int, r.stdout.split()))] = exe
    newer = {v: exe for v, exe in found.items() if v > sys.version_info[:2]}
    return None if not newer else (newer[max(newer)], max(newer))


def test_wheel_installs_and_runs_on_the_newest_python(tmp_path, wheel):
    """pyproject.toml declares >= 3.11 and no upper bound: the newest Python the machine has
    installs the wheel with its dependencies from the package index (their lower bounds
    must have wheels there) and runs it. The oldest, 3.11, is the suite's own."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert declared == f">={sys.version_info[0]}.{sys.version_info[1]}", "the suite runs on the oldest Python"
    newest = _newest_python()
    if newest is None:
        pytest.skip("no Python newer than the suite's on this machine (the project's machines have pyenv's)")
    exe, version = newest
    venv = tmp_path / "venv"
    r = _run([exe, "-m", "venv", str(venv)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    py = venv / "bin" / "python"
    r = _run([str(py), "-m", "pip", "install", "-q", str(wheel)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for cmd in ([str(py), "-m", "smagent", "--version"], [str(venv / "bin" / "smagent"), "--version"]):
        r = _run(cmd, cwd=tmp_path)
        assert (r.returncode, r.stdout) == (0, f"smagent {VERSION}\n"), (version, cmd, r.stdout, r.stderr)
    r = _run([str(py), "-m", "smagent", "sweep", "--json"], cwd=tmp_path)
    assert r.returncode == 0 and '"problems": []' in r.stdout, (version, r.stdout[-500:], r.stderr[-2000:])
