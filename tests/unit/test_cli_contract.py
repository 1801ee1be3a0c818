"""The scripting contract of the CLI: every command takes --json and then prints exactly
one JSON document on stdout; exit codes are the documented ones; shell completion works."""
import json
import subprocess
import sys

import click
from click.testing import CliRunner
import pytest

from smagent.cli import COMMANDS, EXIT_BAD_INPUT, EXIT_DEFECTS, EXIT_FABRIC, EXIT_OK, main


def _commands(cmd=main, path=()):
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            yield from _commands(sub, path + (name,))
    else:
        yield path, cmd


def test_every_command_takes_json():
    missing = [" ".join(p) for p, c in _commands() if not any("--json" in o.opts for o in c.params)]
    assert missing == []


def test_exit_codes_are_the_documented_ones():
    assert (EXIT_OK, EXIT_DEFECTS, EXIT_BAD_INPUT, EXIT_FABRIC) == (0, 1, 2, 3)


@pytest.mark.parametrize("args", [
    ("query", "nodeinfo", "0"), ("discover",), ("sweep", "--dry-run"), ("lft", "show", "0,1"),
    ("lft", "dump"), ("lft", "backup"), ("mft", "show", "0,1"), ("topology", "generate", "two-switch"),
    ("verify",),
])
def test_json_output_is_one_document(live_cli, args):
    r = live_cli(*args, "--json")
    assert r.returncode in (EXIT_OK, EXIT_DEFECTS), r.stderr
    json.loads(r.stdout)  # exactly one document: json.loads refuses trailing data


def test_shell_completion():
    env = {"_SMAGENT_COMPLETE": "bash_complete", "COMP_WORDS": "smagent sw", "COMP_CWORD": "1", "PATH": ""}
    r = subprocess.run([sys.executable, "-c", "from smagent.cli import main; main(prog_name='smagent')"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert "sweep" in r.stdout


def test_table_commands_take_guid_and_description_targets(live_cli):
    by_desc = json.loads(live_cli("lft", "show", "L1", "--json").stdout)["switch"]
    assert by_desc["description"] == "L1"
    by_guid = json.loads(live_cli("lft", "show", by_desc["guid"], "--json").stdout)["switch"]
    assert by_guid["guid"] == by_desc["guid"]
    r = live_cli("mft", "show", "S1", "--json")
    assert r.returncode == 0, r.stderr
    bad = live_cli("lft", "set", "NoSuchSwitch", "3", "1")
    assert bad.returncode == 2 and "NoSuchSwitch" in bad.stderr


@pytest.mark.parametrize("spec, needle", [("file:/nonexistent/dump", "routing file"), ("bogus", "unknown routing engine")])
def test_bad_routing_is_refused_before_any_smp(live_cli, tmp_path, spec, needle):
    cap = tmp_path / "rec.erf"
    r = live_cli("--record", str(cap), "sweep", "--routing", spec)
    assert r.returncode == EXIT_BAD_INPUT and needle in r.stderr
    assert not cap.exists() or cap.stat().st_size == 0


@pytest.mark.parametrize("args", [["discover"], ["decode", "--help"], ["sweep", "--dry-run"]])
def test_collector_settings_restored_after_a_command(args):
    """The CLI runs one-shot commands without the cyclic collector (smagent.cli.main):
    whoever runs `main` in its own process gets its collector back as it was."""
    import gc
    before = (gc.isenabled(), gc.get_threshold(), gc.get_freeze_count())
    r = CliRunner().invoke(main, args)
    assert r.exit_code in (0, 1), r.output
    assert (gc.isenabled(), gc.get_threshold(), gc.get_freeze_count()) == before


def test_commands_load_lazily():
    """A command imports its own module, not the other commands' (start-up time; shared helpers
    such as render may load); help lists all."""
    code = ("import sys, smagent.cli as c; from click.testing import CliRunner; "
            "r = CliRunner().invoke(c.main, ['decode', '--help']); assert r.exit_code == 0, r.output; "
            "print(sorted(m for m in sys.modules if m.startswith('smagent.commands.') and m.endswith('_cmd')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['smagent.commands.decode_cmd']", out
    r = CliRunner().invoke(main, ["--help"])
    assert r.exit_code == 0 and all(name in r.output for name in COMMANDS), r.output
