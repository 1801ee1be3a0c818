"""`smagent counters` (one port's counters, as perfquery) and `smagent health` (every
port's error counters against thresholds, as ibqueryerrors; a Prometheus textfile).
Both speak Performance Management (class 0x04) and so need a live fabric (umad)."""
from __future__ import annotations

import sys

import click

from smagent.commands.common import check_output, emit_json
from smagent.errors import EXIT_DEFECTS, EXIT_OK


def _perf_session(obj):
    from smagent.transport.umad import PERF_CLIENT
    return obj.session(classes=[PERF_CLIENT])


@click.command()
@click.argument("target", required=False)
@click.option("--port", "portnum", type=click.IntRange(0, 255), default=None,
              help="Port (255: every port summed, where AllPortSelect is supported); default: the port the "
                   "target's LID belongs to (a switch: 0).")
@click.option("--reset", is_flag=True, help="Clear the counters after reading them (perfquery -r).")
@click.option("--extended", "-x", is_flag=True, help="PortCountersExtended: 64-bit data and packet counters.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: lid, port, capability_mask, counters.")
@click.pass_obj
def counters(obj, target, portnum, reset, extended, as_json):
    """Read one port's Performance Management counters, as perfquery does: TARGET is a
    LID, a DR path, a node or port GUID or a node description (default: the local port).

    --reset clears them after the read (a PerfSet). Counters are statistics, not
    configuration: a reset is neither backed up nor journalled (it cannot be undone)."""
    r = _perf_session(obj).counters(target, port=portnum, extended=extended, reset=reset)
    if as_json:
        from mad import perfmgt
        from smagent import perf
        additional = perfmgt.has_extended_errors(r.capability_mask2)  # the 64-bit error counters, perfquery -x's
        emit_json({"lid": r.lid, "port": r.port, "capability_mask": r.capability_mask,
                   "extended": extended, "reset": reset, "counters": perf.iba_names(r.counters, additional=additional)})
    else:
        from smagent import perf
        click.echo(perf.text(r))


@click.command()
@click.option("--threshold", "thresholds", multiple=True, metavar="NAME=N",
              help="An error counter's threshold (IBA name, e.g. SymbolErrorCounter=5); repeatable. "
                   "Defaults as ibqueryerrors': 10 for SymbolErrorCounter, 100 for PortXmitDiscards, ...")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: ok, summary, erring ports, thresholds.")
@click.option("--prometheus", "prom", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Also write every port's counters to FILE in the Prometheus text format (textfile "
                   "collector), atomically; every port is then read one by one.")
@click.pass_obj
def health(obj, thresholds, as_json, prom):
    """Read the error counters of every linked port of every node and report, like
    ibqueryerrors, the ports over a threshold: node, port, link and the remote end.
    Switches that support AllPortSelect are read as one sum first, their ports one by one
    only when the sum is over a threshold. Exit 0 clean, 1 when any port is over a
    threshold or could not be read (listed), 3 on a fabric failure."""
    from smagent import perf
    limits = perf.parse_thresholds(thresholds)
    check_output(prom, "--prometheus")
    report = _perf_session(obj).health(limits, every_port=prom is not None)
    if prom:  # atomically (the collector never reads half a file); a late failure is BadInput
        from smagent.perf import metrics
        from smagent.config import files as paths
        paths.write_text(prom, metrics.prometheus_text(report), "--prometheus")
    if as_json:
        emit_json({"ok": not (report.erring or report.unanswered), "summary": _summary(report),
                   "erring": [r.to_json() for r in report.erring], "unanswered": report.unanswered,
                   "thresholds": report.thresholds})
    else:
        click.echo("\n".join(render(report)))
    sys.exit(EXIT_DEFECTS if report.erring or report.unanswered else EXIT_OK)


def _summary(report) -> dict:
    return {"ports_read": len(report.readings), "ports_erring": len(report.erring),
            "nodes_erring": len({r.node_guid for r in report.erring}), "unanswered": len(report.unanswered),
            "gmps": report.gmps}


def render(report) -> list[str]:
    """ibqueryerrors-like text: per erring node its ports, the counters over and the link."""
    out: list[str] = []
    by_node: dict[int, list] = {}
    for r in report.erring:
        by_node.setdefault(r.node_guid, []).append(r)
    for guid, ports in by_node.items():
        out.append(f'Errors for {guid:#018x} "{ports[0].node}"')
        for r in ports:
            over = " ".join(f"[{k} == {v}]" for k, v in r.exceeded.items())
            out.append(f"   port {r.port} (LID {r.lid}): {over}")
            far = (f'{r.remote_guid:#018x} port {r.remote_port} "{r.remote}"' if r.remote_guid is not None
                   else "nothing")
            out.append(f"       link: {r.link or '?'} ==> {far}")
    for u in report.unanswered:
        out.append(f"no answer: {u}")
    s = _summary(report)
    out.append(f"## Summary: {s['ports_read']} ports read, {s['ports_erring']} over a threshold on "
               f"{s['nodes_erring']} nodes, {s['unanswered']} without an answer ({s['gmps']} GMPs)")
    return out
