"""The `smagent` command line: the root group, its global options, and the commands of
`smagent.commands` registered on it. Nothing else lives here; imports point
cli -> commands -> api.

Exit codes (stable; `smagent.errors`): 0 ok, 1 a check found defects, 2 bad input
(nothing sent), 3 fabric or transport failure, 4 refused for safety (another SM is
MASTER), 70 internal error (a bug: please report it), 130 interrupted.
"""
from __future__ import annotations

import click

from smagent.commands import backup_cmd, decode_cmd, discover_cmd, query_cmd, rft_cmd, sweep_cmd, tables_cmd
from smagent.commands import report_cmd, run_cmd, status_cmd, topology_cmd, verify_cmd
from smagent.commands.common import Context, SmagentGroup, int_arg, log_to_stderr
from smagent.errors import (  # noqa: F401 - the documented codes, importable from here
    EXIT_BAD_INPUT, EXIT_DEFECTS, EXIT_FABRIC, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_SAFETY,
)


@click.group(cls=SmagentGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="smagent")
@click.option("--transport", type=click.Choice(["sim", "umad", "replay"]), default="sim", show_default=True,
              envvar="SMAGENT_TRANSPORT", help="How to reach the fabric.")
@click.option("--ca", default=None, help="umad: CA name (default: libibumad's choice).")
@click.option("--port", "port", type=int, default=None, help="umad: CA port number.")
@click.option("--topology", type=click.Path(dir_okay=False), default=None,
              help="sim: topology file (ibsim net file or ibnetdiscover output); default: bundled.")
@click.option("--fixture", type=click.Path(dir_okay=False), default=None, help="replay: recorded capture.")
@click.option("--record", type=click.Path(dir_okay=False), default=None,
              help="Write every SMP sent and received to this capture (ERF, opens in Wireshark).")
@click.option("--window", type=click.IntRange(1, 256), default=8, show_default=True, help="SMPs in flight.")
@click.option("--timeout", type=click.IntRange(1, 60000), default=200, show_default=True, help="Per-SMP timeout, ms.")
@click.option("--retries", type=click.IntRange(0, 100), default=3, show_default=True, help="Retries per SMP.")
@click.option("--mkey", default="0", callback=int_arg,
              help="M_Key for every SMP (with --mkey-file: for the nodes the file does not name).")
@click.option("--mkey-file", "mkey_file", type=click.Path(dir_okay=False), default=None,
              help="M_Keys per node: lines 'GUID MKEY' (node or port GUID, hex) and 'default MKEY'; "
                   "see smagent.mkeys.")
@click.option("--debug", is_flag=True, help="On an internal error, print the traceback (also: SMAGENT_DEBUG=1).")
@click.option("-v", "--verbose", count=True,
              help="Log to stderr: -v phases, discovery and SMPs given up (INFO), -vv every retry (DEBUG).")
@click.pass_context
def main(ctx, debug, verbose, **opts):
    """smagent: discover, route and program an InfiniBand subnet over SMPs."""
    ctx.obj = Context(**opts)
    ctx.call_on_close(ctx.obj.close)
    ctx.call_on_close(log_to_stderr(verbose))


for _cmd in (decode_cmd.decode, query_cmd.query, topology_cmd.topology, discover_cmd.discover, sweep_cmd.sweep,
             sweep_cmd.plan_cmd, sweep_cmd.apply_cmd, tables_cmd.lft, tables_cmd.mft, rft_cmd.rft_group,
             verify_cmd.verify, report_cmd.report, run_cmd.run, status_cmd.status):
    main.add_command(_cmd)
for _cmd in backup_cmd.backup_commands:  # lft backup/restore attach to `lft` themselves
    main.add_command(_cmd)


if __name__ == "__main__":  # pragma: no cover
    main()
