"""The `smagent` command line: the root group, its global options, and the commands of
`smagent.commands` registered on it. Nothing else lives here; imports point
cli -> commands -> api.

A command's module is imported when that command runs (or when help lists it), not at
start-up: `smagent sweep` loads the sweep and not the table, report or daemon commands.

Exit codes (stable; `smagent.errors`): 0 ok, 1 a check found defects, 2 bad input
(nothing sent), 3 fabric or transport failure, 4 refused for safety (another SM is
MASTER), 70 internal error (a bug: please report it), 130 interrupted.
"""
from __future__ import annotations

import gc
import importlib

import click

from smagent.commands.common import Context, SmagentGroup, guid_arg, key_arg, log_to_stderr
from smagent.errors import (  # noqa: F401 - the documented codes, importable from here
    EXIT_BAD_INPUT, EXIT_DEFECTS, EXIT_FABRIC, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_SAFETY,
)


GC_THRESHOLD = 20000  # allocations between two young-generation collections (Python's default: 700)
ONE_SHOT_WITHOUT_GC = frozenset({"sweep", "plan", "apply", "verify", "discover"})  # see `main`

# command name -> (module in smagent.commands, attribute): imported on first use
COMMANDS = {
    "decode": ("decode_cmd", "decode"), "query": ("query_cmd", "query"), "topology": ("topology_cmd", "topology"),
    "discover": ("discover_cmd", "discover"), "sweep": ("sweep_cmd", "sweep"), "plan": ("sweep_cmd", "plan_cmd"),
    "apply": ("sweep_cmd", "apply_cmd"),
    "lft": ("backup_cmd", "lft"),  # tables_cmd's group, with backup and restore attached
    "mft": ("tables_cmd", "mft"), "rft": ("rft_cmd", "rft_group"), "verify": ("verify_cmd", "verify"),
    "report": ("report_cmd", "report"), "run": ("run_cmd", "run"), "status": ("status_cmd", "status"),
    "partitions": ("partitions_cmd", "partitions"),
    "sa": ("sa_cmd", "sa"),
    "counters": ("perf_cmd", "counters"), "health": ("perf_cmd", "health"),
    "paths": ("paths_cmd", "paths"), "trace": ("trace_cmd", "trace"),
    "snapshot": ("snapshot_cmd", "snapshot"), "diff": ("diff_cmd", "diff"),
    "whatif": ("whatif_cmd", "whatif"), "drain": ("drain_cmd", "drain"),
    "undrain": ("drain_cmd", "undrain"),
}


def _restore_gc(enabled: bool, threshold: tuple) -> None:
    gc.unfreeze()
    gc.set_threshold(*threshold)
    if enabled:
        gc.enable()


def _print_version(ctx, param, value) -> None:
    if value and not ctx.resilient_parsing:
        import smagent
        click.echo(f"smagent {smagent.__version__}")
        ctx.exit()


class LazyGroup(SmagentGroup):
    """The root group: commands from `COMMANDS`, each module imported when needed. Global
    options may also follow the subcommand (`smagent sweep -v`): they are moved before it,
    unless the subcommand has an option of that name itself (`query --port` is query's)."""

    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def parse_args(self, ctx, args):
        return super().parse_args(ctx, hoist_global_options(self, ctx, list(args)))

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, attr = COMMANDS[name]
        return getattr(importlib.import_module(f"smagent.commands.{module}"), attr)


def _options(command: click.Command) -> dict[str, click.Option]:
    """Every option name of a command and of the commands nested in it -> the option."""
    out = {name: p for p in command.params if isinstance(p, click.Option) for name in p.opts + p.secondary_opts}
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            out.update(_options(sub))
    return out


def _takes_value(opt: click.Option) -> bool:
    return not (opt.is_flag or opt.count)


def _subcommand_at(root: click.Group, args: list[str]) -> int | None:
    """The index of the subcommand's name among the root's arguments (None: none)."""
    own = _options(root)
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return i + 1 if i + 1 < len(args) else None
        if not a.startswith("-") or a == "-":
            return i
        opt = own.get(a)
        i += 2 if opt is not None and _takes_value(opt) else 1
    return None


def hoist_global_options(root: click.Group, ctx: click.Context, args: list[str]) -> list[str]:
    """``smagent SUBCOMMAND ... --global-option [VALUE] ...`` -> the global options (and
    their values) moved before SUBCOMMAND; everything else, in order, stays where it was.
    An option the subcommand (or a command nested in it) has itself stays its own, and
    nothing after ``--`` moves. Help options never move (``sweep -h`` is sweep's help).
    ``--json`` given before SUBCOMMAND moves after it, where the subcommand has one."""
    at = _subcommand_at(root, args)
    if at is None or args[at] not in COMMANDS:
        return args
    sub = root.get_command(ctx, args[at])
    if sub is None:
        return args
    theirs = _options(sub)
    if "--json" in args[:at] and "--json" in theirs:  # `smagent --json sweep`: the command's own --json
        args = [a for a in args[:at] if a != "--json"] + [args[at], "--json"] + args[at + 1:]
        at -= 1
    glob = {n: o for n, o in _options(root).items() if n not in ("-h", "--help")}
    moved: list[str] = []
    rest: list[str] = []
    i = at + 1
    while i < len(args):
        a = args[i]
        if a == "--":
            rest += args[i:]
            break
        name = a.split("=", 1)[0] if a.startswith("--") else a
        if name in theirs:
            n = 2 if _takes_value(theirs[name]) and "=" not in a else 1
            rest += args[i:i + n]
        elif name in glob or (len(a) > 2 and a[0] == "-" and a[1] != "-" and set(a[1:]) == {"v"}
                              and "-v" in glob and "-v" not in theirs):
            n = 2 if name in glob and _takes_value(glob[name]) and "=" not in a else 1
            moved += args[i:i + n]
        else:
            n = 1
            rest += args[i:i + n]
        i += n
    return args[:at] + moved + [args[at]] + rest


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Print smagent's version and exit.")
@click.option("--transport", type=click.Choice(["sim", "umad", "replay"]), default=None, show_envvar=True,
              envvar="SMAGENT_TRANSPORT",
              help="How to reach the fabric: umad (libibumad: an HCA, or ibsim through umad2sim), sim (the "
                   "built-in simulator) or replay.  [default: umad where libibumad lists a CA, else sim "
                   "with a note; `run` takes sim only when asked]")
@click.option("--ca", default=None, help="umad: CA name (default: libibumad's choice).")
@click.option("--port", "port", type=int, default=None, help="umad: CA port number.")
@click.option("--port-guid", "port_guid", default=None, callback=guid_arg,
              help="umad: the local port by its port GUID (as OpenSM's -g), instead of --ca/--port.")
@click.option("--topology", type=click.Path(dir_okay=False), default=None,
              help="sim: topology file (ibsim net file or ibnetdiscover output); default: bundled.")
@click.option("--fixture", type=click.Path(dir_okay=False), default=None, help="replay: recorded capture.")
@click.option("--record", type=click.Path(dir_okay=False), default=None,
              help="Write every SMP sent and received to this capture (ERF, opens in Wireshark).")
@click.option("--window", type=click.IntRange(1, 256), default=32, show_default=True,
              help="SMPs in flight at most: the transport starts at 8 and widens while every SMP is answered, "
                   "halving on a timeout or busy answer (not below 8).")
@click.option("--timeout", type=click.IntRange(1, 60000), default=200, show_default=True, help="Per-SMP timeout, ms.")
@click.option("--retries", type=click.IntRange(0, 100), default=3, show_default=True, help="Retries per SMP.")
@click.option("--mkey", default="0", callback=key_arg,
              help="M_Key for every SMP (with --mkey-file: for the nodes the file does not name).")
@click.option("--mkey-file", "mkey_file", type=click.Path(dir_okay=False), default=None,
              help="M_Keys per node: lines 'GUID MKEY' (node or port GUID, hex) and 'default MKEY'; "
                   "see smagent.config.mkeys.")
@click.option("--node-name-map", "node_name_map", type=click.Path(dir_okay=False), default=None,
              envvar="SMAGENT_NODE_NAME_MAP", show_envvar=True,
              help="Call nodes by the names of this ib-node-name-map file (as the diags' and OpenSM's "
                   "--node-name-map), in every output: text, JSON, metrics, report, logs.")
@click.option("--debug", is_flag=True, help="On an internal error, print the traceback (also: SMAGENT_DEBUG=1).")
@click.option("-v", "--verbose", count=True,
              help="Log to stderr: -v phases, discovery and SMPs given up (INFO), -vv every retry (DEBUG).")
@click.pass_context
def main(ctx, debug, verbose, **opts):
    """smagent: discover, route and program an InfiniBand subnet over SMPs.

    The options here may come before or after the command (`smagent -v sweep`, `smagent
    sweep -v`); where a command has an option of the same name (`query --port`), after
    the command it is the command's.
    """
    # A sweep allocates a few objects per SMP and frees almost all of them by reference
    # counting; the cyclic collector, run every 700 allocations by default, would spend
    # about a tenth of a sweep's CPU walking the modules and the topology (its full
    # passes grow with the fabric: 11,664 hosts, several seconds). Never over what
    # start-up imported (it lives as long as the process); a one-shot command runs
    # without it (its few cycles die with the process); the daemon (`run`) collects,
    # less often.
    # (Restored when the command ends: a caller may run `main` in its own process.)
    was_enabled, threshold = gc.isenabled(), gc.get_threshold()
    gc.freeze()
    if ctx.invoked_subcommand in ONE_SHOT_WITHOUT_GC:
        gc.disable()
    else:
        gc.set_threshold(GC_THRESHOLD, *threshold[1:])
    ctx.call_on_close(lambda: _restore_gc(was_enabled, threshold))
    ctx.obj = Context(**opts)  # no --transport: umad where a CA is listed (Context.opts)
    ctx.call_on_close(ctx.obj.close)
    ctx.call_on_close(log_to_stderr(verbose))


if __name__ == "__main__":  # pragma: no cover
    main()
