"""`smagent snapshot FILE`: record every table any plan could read, for offline plans."""
from __future__ import annotations

import json

import click

from smagent.commands.common import check_output


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--mft-blocks", type=click.IntRange(1, 512), default=2, show_default=True,
              help="MFT blocks of 32 MLIDs read on every switch, from 0xC000 (more up to its MulticastFDBTop).")
@click.option("--json", "as_json", is_flag=True, help="One JSON document: what was read and what failed.")
@click.pass_obj
def snapshot(obj, file, mft_blocks, as_json):
    """Record one discovery and every table any plan could read (NodeInfo/Desc, PortInfo of
    every port, SwitchInfo, LFT/RFT/MFT, SL2VL, VLArb, P_Key, SMInfo) to FILE (ERF; .pcap:
    pcap). `--transport replay --fixture FILE` then plans, diffs and verifies offline."""
    check_output(file, "FILE")
    result = obj.session().snapshot(file, mft_blocks=mft_blocks)
    s = result.summary()
    if as_json:
        click.echo(json.dumps(s, indent=2))
    else:
        reads = ", ".join(f"{k} {v}" for k, v in sorted(s["reads"].items()))
        click.echo(f"{file}: {s['nodes']} nodes ({s['switches']} switches), {s['requests']} reads: {reads}")
    for line in result.failed[:5]:
        click.echo(f"note: {line}", err=True)
    if len(result.failed) > 5:
        click.echo(f"note: {len(result.failed) - 5} more reads failed (--json counts them)", err=True)
    for u in result.topology.unreachable:
        click.echo(f"warning: unreachable: {u}", err=True)
