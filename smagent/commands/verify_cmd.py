"""`smagent verify`: read every switch's forwarding tables and trace every source to every
LID (see `smagent.verify` for the rules and the defect classes).

Exit codes: 0 no defect, 1 defects found (each class printed with its count and
examples; what did not answer is the defect class `unreached`, and the rest is
verified), 3 the fabric could not be read at all (the local port, a transport failure).
Warnings (degraded links, links running below what both ends can) are listed but do
not change the exit code: traffic flows, only slower, and a configured MTU/VL cap
looks the same.
With --json the defects are structured: per class a count and examples with fields;
the warnings likewise under "warnings".
"""
from __future__ import annotations

import sys

import click

from smagent.commands.common import emit_json, progress_of
from smagent.errors import EXIT_DEFECTS, EXIT_OK

ORDER = ("unreached", "unreachable", "dead_end", "loop", "misdelivered", "cdg_cycle", "inactive_port", "no_lid",
         "duplicate_lid", "rft_overlap", "mcast", "link_mtu_mismatch", "link_vl_mismatch", "sl_unmapped",
         "no_default_partition", "partition_leak", "partition_blocked", "partition_enforcement_off", "imbalance",
         "degraded_link", "link_below_capability")
TITLES = {
    "unreached": "parts of the fabric that did not answer (verified around)",
    "unreachable": "(source, LID) pairs not delivered",
    "dead_end": "places where packets are discarded (switch, LID)",
    "loop": "routing loops (LID, cycle of switches)",
    "misdelivered": "routes ending at a port that does not own the LID",
    "cdg_cycle": "channel dependency graph has a cycle: credit-loop deadlock risk",
    "inactive_port": "linked ports not ACTIVE",
    "no_lid": "linked ports without a LID",
    "duplicate_lid": "LIDs claimed by more than one port",
    "rft_overlap": "RFT entries matching one LID with different ports (the switch may pick either)",
    "mcast": "multicast delivery problems",
    "link_mtu_mismatch": "links whose ends run different MTUs (NeighborMTU)",
    "link_vl_mismatch": "links whose ends run different VLs (OperationalVLs)",
    "sl_unmapped": "hops on data paths where an SL maps to VL15 or a VL the link does not run (SL2VL)",
    "no_default_partition": "end ports without the default partition 0xffff (P_Key block 0)",
    "partition_leak": "pairs the P_Key tables let talk without a shared partition (or only limited-limited)",
    "partition_blocked": "pairs the partitions allow but the P_Key tables block",
    "partition_enforcement_off": "switch ports facing a host that do not enforce partitions (with partitions)",
    "imbalance": "a switch-to-switch link loaded above --max-imbalance times its ideal",
    "degraded_link": "links running below the width or speed both ends support",
    "link_below_capability": "links whose MTU or VLs are below what both ends support",
}


@click.command()
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object: ok, summary, defects (per class: count, examples with fields).")
@click.option("--no-mcast", is_flag=True, help="Do not read the multicast tables (fewer SMPs).")
@click.option("--examples", type=click.IntRange(0, 1000), default=5, show_default=True,
              help="Examples shown per defect class.")
@click.option("--partitions", "partitions_file", type=click.Path(dir_okay=False), default=None,
              help="OpenSM's partitions.conf: check every pair of CA ports' P_Key tables against it "
                   "(partition_leak, partition_blocked) instead of the default partition.")
@click.option("--path-sls", type=click.Path(dir_okay=False), default=None,
              help="The SL of every path, as a dfsssp sweep left it in <state dir>/path_sls: credit "
                   "loops count only where their channels share a VL (default: <state dir>/path_sls if "
                   "a sweep left one, else every path on SL 0).")
@click.option("--qos-policy", "qos_policy_file", type=click.Path(dir_okay=False), default=None,
              help="A QoS policy (see sweep): its SLs by destination (and its default, without "
                   "--path-sls) over the paths' SLs for the credit-loop check.")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None,
              help="Where a dfsssp sweep left path_sls, read when --path-sls is not given (default: "
                   "the state directory, on a live fabric).")
@click.option("--max-imbalance", type=click.FloatRange(min=0, min_open=True), default=None, metavar="RATIO",
              help="A defect (exit 1) when a switch-to-switch link carries more than RATIO times the ideal load "
                   "of its tree level (routes spread perfectly); the hottest link and its ratio are printed always.")
@click.pass_obj
def verify(obj, as_json, no_mcast, examples, partitions_file, path_sls, qos_policy_file, state_dir, max_imbalance):
    """Trace every CA port and switch to every LID through the tables the switches hold:
    unreachable pairs, dead ends, loops, deadlock-prone channel dependency cycles and
    multicast delivery; links (MTU and VLs agree on both ends, every SL maps to a VL the
    link runs along every path, the default partition on every end port; degraded
    links listed as warnings); and how evenly routes load the switch-to-switch links (per tree
    level on a fat tree, hottest links named). Nodes that do not answer are listed (defect
    `unreached`) and the rest is verified. Exit 0 clean, 1 defects found, 3 fabric failure."""
    with progress_of(obj, "verify", as_json):
        report = obj.session().verify(mcast=not no_mcast, examples=examples, partitions=partitions_file,
                                      path_sls=path_sls, qos_policy=qos_policy_file, state_dir=state_dir,
                                      max_imbalance=max_imbalance)
    if as_json:
        from smagent.verify.balance import ROWS
        emit_json(report.as_json(), rows=ROWS)
    else:
        click.echo("\n".join(render(report) + render_balance(report.balance)))
    sys.exit(EXIT_OK if report.ok else EXIT_DEFECTS)


def render(report) -> list[str]:
    from smagent.commands.render import count
    s = report.summary
    mc = "" if s["mcast_groups"] is None else f", {count(s['mcast_groups'], 'multicast group')}"
    lost = f"; {s['unreached']} unreached" if s.get("unreached") else ""
    out = [f"# verify: {count(s['switches'], 'switch')}, {count(s['ca_ports'], 'CA port')}, "
           f"{count(s['lids'], 'LID')}{lost}; {count(s['pairs'], '(source, LID) pair')} traced; channel dependency "
           f"graph {count(s['channels'], 'channel')}, {count(s['dependencies'], 'dependency', 'dependencies')}{mc}",
           f"# read {count(s['smps'], 'SMP')} in {s['read_seconds']:.3f} s, checked in {s['check_seconds']:.3f} s"]
    if report.ok:
        out.append("ok: every source reaches every LID; no loops; channel dependency graph acyclic"
                   + ("" if s["mcast_groups"] is None else "; multicast groups deliver once to every member")
                   + _links_ok(s))
    out += _classes(report, report.defects, "defect") + _classes(report, report.warnings, "warning")
    return out


def _links_ok(s) -> str:
    if not s.get("links_checked"):
        return ""
    tables = f"; every SL maps to a data VL on {s['data_hops']} data hops; default partition on every end port" \
        if s.get("tables_checked") else ""
    return "; links agree on MTU and VLs" + tables


def _classes(report, classes: dict, word: str) -> list[str]:
    out = []
    for cls in ORDER + tuple(k for k in classes if k not in ORDER):
        d = classes.get(cls)
        if not d:
            continue
        out.append(f"{word} {cls}: {d['count']} {TITLES.get(cls, '')}")
        if cls == "unreachable" and "by_cause" in d:
            out.append("  by cause: " + ", ".join(f"{k} {v}" for k, v in d["by_cause"].items()))
        for e in report.texts.get(cls, ()):
            out.append(f"  {e}")
        if d["count"] > len(d["examples"]) and d["examples"]:
            out.append(f"  ... ({d['count'] - len(d['examples'])} more)")
    return out


def render_balance(b: dict) -> list[str]:
    """`smagent.verify.balance` figures as comment lines (scripts keep parsing the rest)."""
    out = [f"# balance: {b['routes']:,} routes of {b['pairs']:,} CA-to-CA pairs over {b['links']} switch-to-switch "
           f"links (directed): max {b['max']}, mean {b['mean']}, ideal {b['ideal']}"]
    if "levels_note" in b:
        out.append(f"#   no tree levels ({b['levels_note']})")
    for lv in b["levels"]:
        out.append(f"#   {lv['name']}: {lv['links']} links, {lv['routes']:,} routes, max {lv['max']}, "
                   f"ideal {lv['ideal']}")
    from smagent.verify.balance import worst_line
    worst = worst_line(b)
    if worst:
        out.append(f"# {worst}")
    if b["hottest"]:
        out.append("#   hottest: " + "; ".join(f"{h['link']} {h['routes']}" for h in b["hottest"][:5]))
    return out
