"""The command line as its help and its users see it (issue item 8): every --json says what
it prints, defaults are values (not Python names), global options may follow the command,
and the routing choices are the same everywhere."""
import json

import pytest
from click.testing import CliRunner

from smagent import cli


def _commands(group, prefix=()):
    ctx = cli.main.make_context("smagent", ["decode", "00"], resilient_parsing=True)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if hasattr(cmd, "list_commands"):
            yield from _commands(cmd, prefix + (name,))
        else:
            yield prefix + (name,), cmd


def test_every_json_option_says_what_it_prints():
    missing = [" ".join(path) for path, cmd in _commands(cli.main)
               for p in cmd.params if "--json" in getattr(p, "opts", []) and not p.help]
    assert missing == []


def test_help_shows_values_not_python_names():
    for path, _cmd in _commands(cli.main):
        r = CliRunner().invoke(cli.main, [*path, "--help"], terminal_width=200)
        assert r.exit_code == 0, (path, r.output)
        assert "smagent.sweep." not in r.output and "{default}" not in r.output, (path, r.output)
    out = CliRunner().invoke(cli.main, ["sweep", "--help"], terminal_width=200).output
    from smagent.sweep import SweepOptions
    assert f"(default: {SweepOptions().repair_passes})" in out


def test_run_and_sweep_offer_the_same_engines():
    for cmd in ("run", "sweep"):
        out = CliRunner().invoke(cli.main, [cmd, "--help"], terminal_width=200).output
        assert "ftree" in out and "updn:GUID" in out and "file:" in out, (cmd, out)


@pytest.mark.parametrize("given, hoisted", [
    (["sweep", "-v"], ["-v", "sweep"]),
    (["sweep", "--dry-run", "-vv", "--timeout", "300"], ["-vv", "--timeout", "300", "sweep", "--dry-run"]),
    (["sweep", "--timeout=300"], ["--timeout=300", "sweep"]),
    (["query", "portinfo", "0", "--port", "1"], ["query", "portinfo", "0", "--port", "1"]),  # query's own --port
    (["--transport", "replay", "lft", "show", "0,1", "--fixture", "f.erf"],
     ["--transport", "replay", "--fixture", "f.erf", "lft", "show", "0,1"]),
    (["sweep", "--lid-file", "--timeout"], ["sweep", "--lid-file", "--timeout"]),  # a value, not an option
    (["decode", "--", "-v"], ["decode", "--", "-v"]),
    (["sweep", "-h"], ["sweep", "-h"]),
    (["nosuch", "-v"], ["nosuch", "-v"]),
    (["--json", "sweep", "--dry-run"], ["sweep", "--json", "--dry-run"]),  # the command's own --json
    (["--json", "-v", "discover"], ["-v", "discover", "--json"]),
])
def test_global_options_after_the_command_move_before_it(given, hoisted):
    ctx = cli.main.make_context("smagent", ["decode", "00"], resilient_parsing=True)
    assert cli.hoist_global_options(cli.main, ctx, list(given)) == hoisted


def test_sweep_v_logs_like_v_sweep():
    after = CliRunner().invoke(cli.main, ["sweep", "--dry-run", "-v"])
    before = CliRunner().invoke(cli.main, ["-v", "sweep", "--dry-run"])
    assert after.exit_code == before.exit_code == 0, after.output
    assert "INFO smagent.sweep: phase discover" in after.stderr
    assert [line.split(":")[0] for line in after.stderr.splitlines()] == \
        [line.split(":")[0] for line in before.stderr.splitlines()]
    quiet = CliRunner().invoke(cli.main, ["sweep", "--dry-run"])
    assert "INFO" not in quiet.stderr


def test_json_before_the_command_is_the_commands():
    r = CliRunner().invoke(cli.main, ["--json", "sweep", "--dry-run"])
    assert r.exit_code == 0 and json.loads(r.stdout)["dry_run"] is True
