"""`smagent decode`: SMPs given as hex, or every MAD of a capture, decoded offline."""
from __future__ import annotations

import sys

import click

from mad import smp as smpcodec
from mad.errors import MadError
from smagent.commands import render
from smagent.commands.common import emit_json
from smagent.errors import BadInput


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


def _capture_mads(pcap_file: str) -> list[tuple[str, bytes]]:
    from smagent.transport.pcap import read_capture
    try:
        return [(f"record {i}", rec.mad) for i, rec in enumerate(read_capture(pcap_file), 1)]
    except MadError as e:  # a frame of the user's file that does not parse
        raise BadInput(f"{pcap_file}: {e}") from None


@click.command()
@click.argument("hexmad", required=False, metavar="[HEX | -]")
@click.option("--pcap", "pcap_file", type=click.Path(dir_okay=False), help="Decode every MAD of a capture (ERF type 21 or pcap).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON with the IBA snake_case names.")
@click.option("--show-keys", is_flag=True, help="Show M_Keys and SM_Keys (hidden by default).")
def decode(hexmad, pcap_file, as_json, show_keys):
    """Decode SMPs given as hex (one per line with '-' for stdin) or from a capture."""
    if bool(hexmad) == bool(pcap_file):
        raise BadInput("give exactly one of HEX, '-' (stdin) or --pcap FILE")
    items = _capture_mads(pcap_file) if pcap_file else [(f"line {n}", b) for n, b in _hex_lines(hexmad)]
    out = []
    for where, raw in items:
        try:
            s = smpcodec.decode(raw)
        except MadError as e:
            raise BadInput(f"{where}: {e}") from None
        out.append(render.smp_dict(s, show_keys) if as_json else render.smp_text(s, show_keys))
    if as_json:
        emit_json(out[0] if len(out) == 1 and not pcap_file else out)
    else:
        click.echo("\n\n".join(out))
