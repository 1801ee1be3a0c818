"""Logging (issue 16 item 10): the `smagent` logger hierarchy (sweep phases at INFO,
retries at DEBUG, SMPs given up at WARNING), the progress callback, the CLI's -v, and
a library that never prints."""
import ast
import logging
import pathlib
import subprocess
import sys
import textwrap

import smagent

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_sweep_logs_each_phase_at_info(caplog):
    with caplog.at_level(logging.INFO, logger="smagent"):
        with smagent.connect("sim") as f:
            r = f.sweep()
    sweep = [rec for rec in caplog.records if rec.name == "smagent.sweep"]
    assert all(rec.levelno == logging.INFO for rec in sweep)
    logged = [rec.getMessage().split(":")[0].removeprefix("phase ") for rec in sweep]
    assert logged[:-1] == list(r.phases)  # one line per phase, in order, then the summary
    assert logged[-1] == "sweep" and f"{r.sets_planned} Sets planned" in sweep[-1].getMessage()
    disc = [rec for rec in caplog.records if rec.name == "smagent.discovery"]
    assert len(disc) == 1 and f"discovered {len(r.topology.nodes)} nodes" in disc[0].getMessage()
    assert not [rec for rec in caplog.records if rec.levelno >= logging.WARNING]


def test_retries_at_debug_and_giving_up_at_warning(caplog):
    with caplog.at_level(logging.DEBUG, logger="smagent"):
        with smagent.connect("sim", retries=2, timeout_ms=5) as f:
            try:
                f.query("nodeinfo", "0,1,7,7,7")
            except smagent.FabricFailure:
                pass
            stats = f.stats
    recs = [rec for rec in caplog.records if rec.name == "smagent.transport"]
    retries = [rec for rec in recs if rec.levelno == logging.DEBUG]
    gave_up = [rec for rec in recs if rec.levelno == logging.WARNING]
    assert [rec.getMessage().rsplit(": ", 1)[1] for rec in retries] == ["timed out, retry 1 of 2",
                                                                        "timed out, retry 2 of 2"]
    assert len(gave_up) == 1 and "no response after 3 tries" in gave_up[0].getMessage()
    assert stats["retries"] == 2 and stats["timeouts"] == 3


def test_the_library_never_prints():
    """Not even the WARNING of an SMP given up: logging's last-resort handler would print
    it if the package had no handler of its own (a subprocess: pytest installs its own)."""
    script = textwrap.dedent("""
        import smagent
        with smagent.connect("sim", retries=0, timeout_ms=5) as f:
            f.sweep(dry_run=True)
            try:
                f.query("nodeinfo", "0,1,7,7,7")
            except smagent.FabricFailure:
                pass
            assert f.stats["timeouts"] == 1
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def test_no_print_in_the_library_source():
    """print(), click.echo and sys.stdout/stderr writes live in the CLI layer only."""
    offenders = []
    for path in sorted((ROOT / "smagent").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("smagent/commands/") or rel == "smagent/cli.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = ast.unparse(f)
            if (name in ("print", "click.echo", "click.secho", "sys.stdout.write", "sys.stderr.write")
                    or any(isinstance(k.value, ast.Attribute) and ast.unparse(k.value) in ("sys.stderr", "sys.stdout")
                           for k in node.keywords)):
                offenders.append(f"{rel}:{node.lineno}: {name}")
    assert offenders == []


def test_progress_callback_gets_every_phase_as_it_starts():
    seen = []
    with smagent.connect("sim") as f:
        r = f.sweep(progress=lambda phase: seen.append((phase, f.stats["sent"])))
    assert [p for p, _ in seen] == list(r.phases)
    assert seen[0] == ("discover", 0)  # called before the phase's first SMP
    assert [n for _, n in seen] == sorted(n for _, n in seen)


def test_cli_verbose_maps_to_levels(cli):
    quiet = cli("sweep", "--dry-run")
    assert quiet.exit_code == 0 and "smagent.sweep" not in quiet.stderr
    one = cli("-v", "sweep", "--dry-run")
    assert one.exit_code == 0 and "INFO smagent.sweep: phase discover:" in one.stderr
    assert "DEBUG" not in one.stderr
    two = cli("-vv", "--retries", "1", "--timeout", "5", "query", "nodeinfo", "0,1,7,7")
    assert two.exit_code == 3
    assert "DEBUG smagent.transport: SubnGet(NodeInfo, modifier 0x0) to DR 0,1,7,7: timed out, retry 1 of 1" \
        in two.stderr
    assert "WARNING smagent.transport:" in two.stderr
    assert logging.getLogger("smagent").level == logging.NOTSET  # undone when the command ends
