"""`smagent report OUTPUT`: a picture of how evenly routes load the links.

One panel per group of links between two tree levels (one direction), a histogram of
routes per link with the ideal and the maximum marked, and a panel naming the hottest
links. Histograms aggregate, so the picture stays readable at 11,664 hosts (46,656
directed links). The figures come from `smagent.balance`: read from the fabric (the
global transport options: a live fabric, the simulator, a replay fixture) or from a
saved `smagent verify --json` output (``--from-json``).

Needs matplotlib (``pip install 'smagent[report]'``). Exit codes: 0 written, 1 nothing
to draw (the fabric routes no CA-to-CA pair: unrouted, or no CAs; nothing is written, as
`verify` exits 1 on such a fabric), 2 bad input (extension, JSON file, matplotlib
missing), 3 fabric failure.
"""
from __future__ import annotations

import json
import math
import os
import sys

import click

from smagent import paths
from smagent.commands.common import emit_json, progress_of
from smagent.errors import EXIT_DEFECTS, BadInput

FORMATS = {".png": "png", ".svg": "svg"}


@click.command("report")
@click.argument("output", type=click.Path(dir_okay=False))
@click.option("--from-json", "from_json", type=click.Path(dir_okay=False), default=None,
              help="A saved `smagent verify --json` output; without it the fabric is read.")
@click.option("--title", default=None, help="Title of the picture (default: what was measured).")
@click.option("--json", "as_json", is_flag=True, help="Print what was written and the figures drawn as one JSON object.")
@click.pass_obj
def report(obj, output, from_json, title, as_json):
    """Draw the link-load distribution per tree level and the hottest links into OUTPUT
    (.png or .svg). Exit 0 written, 1 nothing to draw (no route between CAs: sweep
    first; nothing written), 2 bad input or matplotlib missing, 3 fabric failure."""
    fmt = FORMATS.get(os.path.splitext(output)[1].lower())
    if fmt is None:
        raise BadInput(f"{output}: the picture is written as PNG or SVG; name it *.png or *.svg")
    try:
        import matplotlib
        matplotlib.use("Agg")
        from matplotlib import pyplot  # noqa: F401
    except ImportError:
        raise BadInput("smagent report needs matplotlib: pip install 'smagent[report]'") from None
    if from_json:
        figures = _load(from_json)
        source = os.path.basename(from_json)
    else:
        figures = _measure(obj, as_json)
        source = "fabric"
    if not figures["routes"]:
        _nothing_to_draw(figures, output, fmt, source, as_json)
    try:
        draw(figures, output, fmt, title or f"Link load ({source}): {figures['pairs']:,} CA-to-CA pairs")
    except OSError as e:
        raise BadInput(f"{output}: {e.strerror or e}") from None
    if as_json:
        emit_json({"output": output, "format": fmt, "balance": figures})
    else:
        click.echo(f"wrote {output}: {len(figures['levels'])} link groups, max {figures['max']} routes per link, "
                   f"ideal {figures['ideal']}")


def _nothing_to_draw(figures: dict, output: str, fmt: str, source: str, as_json: bool) -> None:
    """No route between CAs: an empty chart would look like a balanced fabric. Say so, write
    nothing, exit 1 (a defect found, as `verify` reports it)."""
    why = f"; {figures['levels_note']}" if figures.get("levels_note") else ""
    message = (f"nothing to draw: the {source} routes no CA-to-CA pair (0 routes{why}); is it swept "
               f"(smagent sweep)? {output} not written")
    if as_json:
        emit_json({"output": None, "format": fmt, "balance": figures, "problems": [message]})
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_DEFECTS)


def _load(path: str) -> dict:
    text = paths.read_text(path, "--from-json")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}: not JSON ({e})") from None
    b = doc.get("balance") if isinstance(doc, dict) else None
    if not isinstance(b, dict) or not all(k in b for k in ("levels", "hottest", "max", "ideal", "pairs")):
        raise BadInput(f"{path}: no balance figures; give the output of `smagent verify --json`")
    return b


def _measure(obj, as_json: bool = False) -> dict:
    with progress_of(obj, "report", as_json):
        return obj.session().verify(mcast=False).balance


def draw(b: dict, output: str, fmt: str, title: str) -> None:
    """The picture: a histogram per link group, then the hottest links."""
    from matplotlib import pyplot as plt
    from matplotlib.ticker import MaxNLocator, StrMethodFormatter
    whole = StrMethodFormatter("{x:,.0f}")  # 204,120, not 2.0e5 or run-together digits
    levels = b["levels"]
    cols = 2 if len(levels) > 1 else 1
    rows = math.ceil(len(levels) / cols)
    fig = plt.figure(figsize=(12, 3.2 * rows + 4), layout="constrained")
    grid = fig.add_gridspec(rows + 1, cols, height_ratios=[3.2] * rows + [4])
    for n, lv in enumerate(levels):
        ax = fig.add_subplot(grid[n // cols, n % cols])
        loads = [h[0] for h in lv["histogram"]]
        counts = [h[1] for h in lv["histogram"]]
        right = max(lv["max"], lv["ideal"]) + 1
        step = max(1, math.ceil(right / 60))  # whole routes per bin, at most ~60 bins
        ax.hist(loads, bins=range(0, int(right) + step + 1, step), weights=counts, color="#4477aa")
        ax.set_xlim(0, right * 1.05)
        ax.xaxis.set_major_locator(MaxNLocator(6, integer=True))
        ax.xaxis.set_major_formatter(whole)
        ax.axvline(lv["ideal"], color="#228833", ls="--", lw=1.5, label=f"ideal {lv['ideal']}")
        ax.axvline(lv["max"], color="#cc3311", lw=1.5, label=f"max {lv['max']}")
        ax.set_title(f"{lv['name']}: {lv['links']:,} links, {lv['routes']:,} routes", fontsize=10)
        ax.set_xlabel("routes per link")
        ax.set_ylabel("links")
        ax.legend(fontsize=8, loc="upper left")
    ax = fig.add_subplot(grid[rows, :])
    hot = b["hottest"][::-1]
    ax.barh(range(len(hot)), [h["routes"] for h in hot], color="#cc3311")
    ax.set_yticks(range(len(hot)), [f"{h['link']}" + (f"  ({h['level']})" if h.get("level") else "") for h in hot],
                  fontsize=8)
    ax.axvline(b["ideal"], color="#228833", ls="--", lw=1.5, label=f"ideal {b['ideal']}")
    ax.xaxis.set_major_formatter(whole)
    ax.set_xlabel("routes")
    ax.set_title(f"hottest links (all links: max {b['max']}, mean {b['mean']})", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    fig.suptitle(title)
    fig.savefig(output, format=fmt)
    plt.close(fig)
