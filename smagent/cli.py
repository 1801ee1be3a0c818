"""The `smagent` command line: a thin layer of click commands.

Exit codes (stable): 0 ok, 1 a check found defects, 2 bad input, 3 fabric or
transport failure.
"""
from __future__ import annotations

import json
import sys

import click

from mad import smp as smpcodec
from mad.errors import MadError
from smagent import render

EXIT_OK, EXIT_DEFECTS, EXIT_BAD_INPUT, EXIT_FABRIC = 0, 1, 2, 3


class BadInput(click.ClickException):
    exit_code = EXIT_BAD_INPUT


class FabricFailure(click.ClickException):
    exit_code = EXIT_FABRIC


def _emit_json(obj) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=False))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="smagent")
def main():
    """smagent: discover, route and program an InfiniBand subnet over SMPs."""


# -- decode ------------------------------------------------------------------------
def _hex_lines(source: str):
    text = sys.stdin.read() if source == "-" else source
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip().replace(" ", "").replace(":", "")
        if not line or line.startswith("#"):
            continue
        if line.startswith(("0x", "0X")):
            line = line[2:]
        try:
            yield n, bytes.fromhex(line)
        except ValueError:
            raise BadInput(f"line {n}: not hexadecimal") from None


@main.command()
@click.argument("hexmad", required=False, metavar="[HEX | -]")
@click.option("--pcap", "pcap_file", type=click.Path(dir_okay=False), help="Decode every MAD of a capture (ERF type 21 or pcap).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON with the IBA snake_case names.")
def decode(hexmad, pcap_file, as_json):
    """Decode SMPs given as hex (one per line with '-' for stdin) or from a capture."""
    if bool(hexmad) == bool(pcap_file):
        raise BadInput("give exactly one of HEX, '-' (stdin) or --pcap FILE")
    items = []
    if pcap_file:
        from smagent.pcap import CaptureError, read_capture
        try:
            for i, rec in enumerate(read_capture(pcap_file), 1):
                items.append((f"record {i}", rec.mad))
        except (CaptureError, OSError) as e:
            raise BadInput(str(e)) from None
        except MadError as e:
            raise BadInput(f"{pcap_file}: {e}") from None
    else:
        items = [(f"line {n}", b) for n, b in _hex_lines(hexmad)]
    out = []
    for where, raw in items:
        try:
            s = smpcodec.decode(raw)
        except MadError as e:
            raise BadInput(f"{where}: {e}") from None
        out.append(render.smp_dict(s) if as_json else render.smp_text(s))
    if as_json:
        _emit_json(out[0] if len(out) == 1 and not pcap_file else out)
    else:
        click.echo("\n\n".join(out))


if __name__ == "__main__":  # pragma: no cover
    main()
