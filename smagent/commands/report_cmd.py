"""`smagent report OUTPUT`: a picture of the fabric, each link coloured by its load
relative to the ideal.

The fabric is drawn as itself (`commands/report_picture.py` over `smagent.commands.report_layout`): a fat
tree as levels, a torus or mesh as its grid, anything else in layers; each link coloured
by load / ideal (1, balanced, neutral), the worst links labelled, big trees drawn by
pods and groups. The loads come from `smagent.verify.balance`: routes per link from the tables
read from the fabric (the global transport options: a live fabric, the simulator, a
replay fixture) or from a saved `smagent verify --json` output (``--from-json``, which
keeps every link's load).

Needs matplotlib (``pip install 'smagent[report]'``). Exit codes: 0 written, 1 nothing
to draw (the fabric routes no CA-to-CA pair: unrouted, or no CAs; nothing is written, as
`verify` exits 1 on such a fabric), 2 bad input (extension, JSON file, matplotlib
missing), 3 fabric failure.
"""
from __future__ import annotations

import datetime
import json
import os
import sys

import click

from smagent.config import files as paths
from smagent.commands.common import emit_json, progress_of
from smagent.errors import EXIT_DEFECTS, BadInput

FORMATS = {".png": "png", ".svg": "svg"}


@click.command("report")
@click.argument("output", type=click.Path(dir_okay=False))
@click.option("--from-json", "from_json", type=click.Path(dir_okay=False), default=None,
              help="A saved `smagent verify --json` output; without it the fabric is read.")
@click.option("--name", "fabric_name", default=None,
              help="The fabric's name in the title (default: the topology, fixture or JSON file's name).")
@click.option("--engine", default=None, help="The routing engine named in the title (the tables do not say).")
@click.option("--counters", "use_counters", is_flag=True,
              help="Load from traffic, not routes: each switch port's PortXmitData (64-bit where the agent has "
                   "PortCountersExtended), totals, or with --interval the bytes sent during it (needs umad).")
@click.option("--interval", type=click.FloatRange(0.1, 3600), default=None,
              help="With --counters: read twice, this many seconds apart, and draw the difference.")
@click.option("--title", default=None, help="Title of the picture (default: fabric, engine, time, pairs).")
@click.option("--json", "as_json", is_flag=True, help="Print what was written and the figures drawn as one JSON object.")
@click.pass_obj
def report(obj, output, from_json, fabric_name, engine, use_counters, interval, title, as_json):
    """Draw the fabric into OUTPUT (.png or .svg): fat trees as levels, tori and meshes as
    their grid, anything else in layers, each link coloured by its load relative to the
    ideal, the worst labelled; prints the maximum against the ideal. Exit 0 written, 1
    nothing to draw (no route between CAs: sweep first; nothing written), 2 bad input or
    matplotlib missing, 3 fabric failure."""
    fmt = FORMATS.get(os.path.splitext(output)[1].lower())
    if fmt is None:
        raise BadInput(f"{output}: the picture is written as PNG or SVG; name it *.png or *.svg")
    try:
        import matplotlib
        matplotlib.use("Agg")
        from matplotlib import pyplot  # noqa: F401
    except ImportError:
        raise BadInput("smagent report needs matplotlib: pip install 'smagent[report]'") from None
    paths.check_output(output, "OUTPUT")  # before the fabric is read
    if use_counters and from_json:
        raise BadInput("--counters reads the fabric's counters and --from-json draws a saved verify: give one")
    if interval is not None and not use_counters:
        raise BadInput("--interval is the time between two counter reads: it goes with --counters")
    if from_json:
        figures = _load(from_json)
        source = os.path.basename(from_json)
    elif use_counters:
        figures = _measure_counters(obj, interval, as_json)
        source = "fabric's counters"
    else:
        figures = _measure(obj, as_json)
        source = "fabric"
    if not figures["routes"]:
        _nothing_to_draw(figures, output, fmt, source, as_json)
    unit = figures.get("unit", "routes")
    if unit == "bytes":
        engine = engine or ("PortXmitData" + (f" over {interval:g} s" if interval else " totals"))
    name = fabric_name or _default_name(obj, from_json)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    title = title or (f"{name} - {engine or 'engine not named'} - {when}\n"
                      + (f"{figures['pairs']:,} CA-to-CA pairs, " if unit == "routes" else "bytes sent, ")
                      + f"{figures['links']:,} switch-to-switch links")
    try:
        shown = draw(figures, output, fmt, title, unit)
    except OSError as e:
        raise BadInput(f"{output}: {e.strerror or e}") from None
    if as_json:
        emit_json({"output": output, "format": fmt, "drawn": shown, "balance": figures}, rows=_rows())
    else:
        click.echo(f"wrote {output}: {_summary(figures, shown)}")


def _rows() -> tuple:
    from smagent.verify.balance import ROWS
    return ROWS


def _default_name(obj, from_json) -> str:
    if from_json:
        return os.path.splitext(os.path.basename(from_json))[0]
    o = obj.opts
    given = o.get("topology") if o["transport"] == "sim" else o.get("fixture") if o["transport"] == "replay" else None
    if given:
        return os.path.splitext(os.path.basename(given))[0]
    if o["transport"] == "umad":
        return _live_name(obj)
    return {"sim": "bundled simulator fabric"}.get(o["transport"], "fabric")


def _live_name(obj) -> str:
    """A live fabric by what names it to an admin: its subnet prefix, seen from which host
    and port (two Gets of the local port: its NodeDescription and PortInfo)."""
    session = obj.session()
    t = session.transport
    try:
        host = session.query("nodedesc", "0").node_string
        local = t.local_port()
        prefix = session.query("portinfo", "0", port=local.port).gid_prefix
    except Exception:  # noqa: BLE001 - a name for a title: the transport's own words will do
        return t.describe()
    return f"subnet {prefix:#018x} from {host} ({t.describe()})"


def _summary(b: dict, shown: dict) -> str:
    """max/ideal in words: the worst link against its group's ideal."""
    worst = shown["worst"]
    ideal = (f"ideal {b['ideal']:,}" if not shown.get("grid_ideals") else
             "ideal per dimension {:,} (x) and {:,} (y)".format(*shown["grid_ideals"]))
    unit = b.get("unit", "routes")
    text = f"{shown['kind']} layout, {shown['nodes']} nodes, {shown['lines']} lines; max {b['max']:,} {unit} per link, {ideal}"
    if worst is not None:
        text += f"; worst link {worst[3]}: {worst[1]:,}/{worst[2]:,} = {worst[0]:.2f} x ideal"
    return text


def _nothing_to_draw(figures: dict, output: str, fmt: str, source: str, as_json: bool) -> None:
    """No route between CAs: an empty chart would look like a balanced fabric. Say so, write
    nothing, exit 1 (a defect found, as `verify` reports it)."""
    why = f"; {figures['levels_note']}" if figures.get("levels_note") else ""
    if figures.get("unit") == "bytes":
        message = (f"nothing to draw: the {source} show no data sent over a switch-to-switch link; "
                   f"{output} not written")
    else:
        message = (f"nothing to draw: the {source} routes no CA-to-CA pair (0 routes{why}); is it swept "
                   f"(smagent sweep)? {output} not written")
    if as_json:
        emit_json({"output": None, "format": fmt, "balance": figures, "problems": [message]})
    click.echo(f"Error: {message}", err=True)  # as every other command's error line
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
    if not all(isinstance(b.get(k), list) for k in ("switches", "link_loads")):
        raise BadInput(f"{path}: the balance figures have no per-link loads (saved by an older smagent); "
                       "run `smagent verify --json` again")
    try:
        for s in b["switches"]:
            str(s[0]), str(s[1]), int(s[2])
        for r in b["link_loads"]:
            str(r[0]), int(r[1]), str(r[2]), int(r[3]), float(r[4]), float(r[5])
    except (TypeError, ValueError, IndexError):
        raise BadInput(f"{path}: a switch or link_loads record is malformed; "
                       "give the output of `smagent verify --json`") from None
    known = {s[0] for s in b["switches"]}
    stray = next((r for r in b["link_loads"] if r[0] not in known or r[2] not in known), None)
    if stray is not None:
        raise BadInput(f"{path}: link_loads names a switch the switches list lacks: {stray}")
    return b


def _measure_counters(obj, interval: float | None, as_json: bool) -> dict:
    """Figures whose loads are the bytes each switch port sent (PortXmitData x 4): totals,
    or the difference of two reads ``interval`` seconds apart (a counter cleared in
    between counts from zero)."""
    import time

    from smagent.verify import balance
    from smagent import perf
    from smagent.commands.perf_cmd import _perf_session
    data = next(c for c in perf.COUNTERS if c.iba == "PortXmitData")
    session = _perf_session(obj)
    with progress_of(obj, "report", as_json):
        first = session.health(every_port=True)
        sent = _sent(first, data)
        if interval:
            time.sleep(interval)
            then, sent = sent, _sent(perf.sweep(obj.transport(), session.topology, every_port=True), data)
            sent = {k: v - then[k] if v >= then.get(k, 0) else v for k, v in sent.items()}
    return balance.from_counters(session.topology, sent)


def _sent(health, data) -> dict:
    return {(r.node_guid, r.port): (r.value(data) or 0) * data.scale for r in health.readings}


def _measure(obj, as_json: bool = False) -> dict:
    with progress_of(obj, "report", as_json):
        return obj.session().verify(mcast=False).balance


def draw(b: dict, output: str, fmt: str, title: str, unit: str = "routes") -> dict:
    """Write the picture; returns what it shows (`report_picture.figure`)."""
    import matplotlib
    from matplotlib import pyplot as plt

    from smagent.commands.report_picture import figure
    fig, shown = figure(b, title, unit)
    try:
        # the same figures give the same file: no date, ids from a fixed salt
        with matplotlib.rc_context({"svg.hashsalt": "smagent"}):
            fig.savefig(output, format=fmt, dpi=110, metadata={"Date": None} if fmt == "svg" else None)
    finally:
        plt.close(fig)
    return shown
