"""`smagent trace SRC DST`: ibtracert's hop-by-hop route, from the switches' LFTs read
by directed route, without the SA (`smagent.verify.trace`). The text is ibtracert's
(``-n``: its simple format), so what parses ibtracert parses ours. A route that is not
delivered prints the hops it made and the reason, and exits 1 (a defect found);
ibtracert prints only "Failed to get route information" and exits 255."""
from __future__ import annotations

import sys

import click

from smagent.commands.common import emit_json
from smagent.errors import EXIT_DEFECTS


@click.command()
@click.argument("src")
@click.argument("dst")
@click.option("-n", "--no-info", "simple", is_flag=True, help="ibtracert -n's simple format: GUIDs and ports only.")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object: source, dlid, delivered, hops (out_port and the port entered), destination, "
                   "error, smps.")
@click.pass_obj
def trace(obj, src, dst, simple, as_json):
    """The route from SRC to DST as ibtracert prints it, hop by hop, read from the
    switches' LFTs (discovery, then one LFT block per switch on the way). SRC, DST: a LID
    (5, 0x5), a DR path (0,1,3), a node or port GUID or a node description; a CA named by
    node starts at (or is reached at the LID of) its first port with a LID. Exit 0
    delivered, 1 not delivered (the hops so far and why), 2 bad input, 3 fabric failure."""
    t = obj.session().trace(src, dst)
    if as_json:
        emit_json(t.as_json())
    else:
        click.echo("\n".join(t.lines(simple)))
    if t.error:
        click.echo(f"error: {t.error}", err=True)
        sys.exit(EXIT_DEFECTS)
