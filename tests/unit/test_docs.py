"""Every shell command of README.md and docs/guide/*.md runs, so none can rot
(tests/support/doc_commands.py says how lines are read and marked): the ``smagent`` lines
without ``--transport umad`` here, in process on the simulator, block by block in a scratch
directory (with examples/ and fixtures/ beside them, SMAGENT_STATE_DIR there); the live ones
in tests/live/test_docs_live.py. Every relative link of README.md and docs/ names a file."""
import re
import shutil

import pytest

from doc_commands import NOT_RUN, REPO, all_commands, beside_run, blocks

COMMANDS = all_commands()
SERVED = beside_run(COMMANDS)
SIM_BLOCKS = {k: [c for c in v if c.not_run is None and not c.live and c.is_smagent and c not in SERVED]
              for k, v in blocks(COMMANDS).items()}
SIM_BLOCKS = {k: v for k, v in SIM_BLOCKS.items() if v}


def test_the_docs_have_commands():
    assert len(COMMANDS) > 40
    assert any(c.live for c in COMMANDS)


@pytest.mark.parametrize("cmd", COMMANDS, ids=str)
def test_every_line_is_run_or_marked_with_a_reason_that_holds(cmd):
    if cmd.not_run is not None:
        assert cmd.not_run in NOT_RUN, f"{cmd}: unknown reason {cmd.not_run!r} (known: {sorted(NOT_RUN)})"
        assert NOT_RUN[cmd.not_run](cmd), f"{cmd}: the reason {cmd.not_run!r} does not hold for this line"
    elif not cmd.is_smagent:
        # other programs (ibsim, diags), pipes and && run only in a block the live test runs whole
        block = blocks(COMMANDS)[(cmd.doc, cmd.block)]
        assert any(c.live for c in block), f"{cmd}: not an smagent command, in a block with no live line"


@pytest.mark.parametrize("key", sorted(SIM_BLOCKS), ids=lambda k: f"{k[0]}:{k[1]}")
def test_sim_block_runs_as_written(key, cli, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    for d in ("examples", "fixtures"):
        (work / d).symlink_to(REPO / d)
    for f in (REPO / "examples").iterdir():  # the files a line names without examples/ in front
        shutil.copy(f, work / f.name)
    monkeypatch.chdir(work)
    monkeypatch.setenv("SMAGENT_STATE_DIR", str(work / "state"))
    for cmd in SIM_BLOCKS[key]:
        r = cli(*cmd.argv, catch_exceptions=False)
        assert r.exit_code == cmd.exit_code, (
            f"{cmd}\nexit {r.exit_code}, the doc says {cmd.exit_code}\nstdout: {r.stdout[-2000:]}\nstderr: {r.stderr[-2000:]}")


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _markdown_files():
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")), REPO / "bench" / "RESULTS.md"]


def _anchors(path):
    out = set()
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


@pytest.mark.parametrize("doc", _markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(doc):
    bad = []
    for target in LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            bad.append(f"{target}: no file {dest}")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            bad.append(f"{target}: no heading #{anchor} in {dest.name}")
    assert not bad, "\n".join(bad)


def test_systemd_unit_agrees_with_itself_and_the_cli():
    """contrib/smagent.service: its ExecStart parses as `smagent run`'s options, it does not
    stop OpenSM (its comment and the guide say the two run side by side on different ports),
    no placeholder Documentation=, a refusal (exit 4) is not retried."""
    import shlex

    import click

    from smagent.cli import main
    unit = (REPO / "contrib" / "smagent.service").read_text()
    keys = dict(line.split("=", 1) for line in unit.splitlines() if "=" in line and not line.startswith("#"))
    assert "Conflicts" not in keys and "Documentation" not in keys
    assert "4" in keys["RestartPreventExitStatus"].split()
    argv = shlex.split(keys["ExecStart"])[1:]
    at = argv.index("run")
    globals_ = {o for p in main.params for o in p.opts}
    assert all(a in globals_ for a in argv[:at] if a.startswith("-")), argv[:at]
    run = main.get_command(click.Context(main), "run")
    assert isinstance(run, click.Command)
    run.make_context("run", argv[at + 1:])  # raises click.UsageError on an unknown option
    guide = (REPO / "docs" / "guide" / "running-the-sm.md").read_text()
    assert "contrib/smagent.service" in guide and "opensm.service" in guide


def test_api_guide_example_runs(tmp_path, monkeypatch, capsys):
    """docs/guide/api.md's first python block, as written, with the desired state its text
    names."""
    text = (REPO / "docs" / "guide" / "api.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SMAGENT_STATE_DIR", str(tmp_path / "state"))
    shutil.copy(REPO / "examples" / "desired.yaml", "desired.yaml")
    exec(compile(code, "docs/guide/api.md", "exec"), {})
    out = capsys.readouterr().out
    assert out.split()[0] in ("4", "PortState.ACTIVE", "ACTIVE"), out  # L1's uplink after the sweep
    assert (tmp_path / "plan.erf").exists() and (tmp_path / "fabric.erf").exists()


PATH_REF = re.compile(r"`((?:smagent|mad|tests|bench|examples|fixtures|contrib|scripts|docs)/[\w/.\-]*\w)`")
NAME_REF = re.compile(r"`(smagent(?:\.\w+)+)`")


@pytest.mark.parametrize("doc", _markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_named_file_and_module_exists(doc):
    """A path the docs name in backticks exists, and a dotted `smagent.x.y` imports (a module,
    or a name in one), so a re-homed module cannot leave the docs behind."""
    import importlib
    text = doc.read_text()
    bad = [p for p in PATH_REF.findall(text) if not (REPO / p).exists() and not any(ch in p for ch in "*")]
    for name in NAME_REF.findall(text):
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
                break
            except ImportError:
                continue
        for attr in parts[i:]:
            obj = getattr(obj, attr, None)
            if obj is None:
                bad.append(name)
                break
    assert not bad, ", ".join(bad)
