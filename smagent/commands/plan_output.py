"""How `sweep --dry-run` and `plan FILE` print a plan (issue 28): the text summarised by
kind and switch when large (`smagent.sweep.plansummary`), the JSON one compact record
per line (`smagent.sweep.planjson`), the per-entry view on demand (``--detail``,
``--lids A-B``) and the whole listing streamed to a file as JSON lines (``--plan-file``)."""
from __future__ import annotations

import json
from typing import Iterable

import click

from smagent.config import files as paths
from smagent.errors import BadInput

PLAN_OPTIONS = (
    click.option("--detail", is_flag=True,
                 help="The plan entry by entry: every Set's line (text), one record per changed LFT entry, "
                      "MFT entry, PortInfo field and link table (--json); default: large text plans by kind and "
                      "switch, JSON records per LFT block, MFT block and position, port and group of equal link "
                      "tables (README)."),
    click.option("--lids", "lid_range", metavar="A-B", default=None,
                 help="--json: the LFT entries of LIDs A..B only, one record each (the other tables as usual)."),
    click.option("--plan-file", type=click.Path(dir_okay=False), default=None,
                 help="Also write every change of the plan entry by entry (the --detail records) to FILE, "
                      "one JSON record per line, streamed."),
)


def plan_options(fn):
    for opt in reversed(PLAN_OPTIONS):
        fn = opt(fn)
    return fn


def parse_lids(text: str | None) -> tuple[int, int] | None:
    """``--lids A-B`` (or one LID) as (first, last); BadInput naming the problem."""
    if text is None:
        return None
    a, _, b = text.partition("-")
    try:
        lo, hi = int(a, 0), int(b or a, 0)
    except ValueError:
        raise BadInput(f"--lids {text!r}: not a LID range (e.g. 1-64, 0x10-0x20)") from None
    if not 0 <= lo <= hi <= 0xBFFF:
        raise BadInput(f"--lids {text!r}: not a range of unicast LIDs (0..0xBFFF, first <= last)")
    return lo, hi


def check_plan_options(plan_file: str | None, lid_range: str | None) -> tuple[int, int] | None:
    """Before the first SMP: the output file can be written, the LID range parses."""
    if plan_file:
        paths.check_output(plan_file, "--plan-file")
    return parse_lids(lid_range)


def write_plan_file(r, path: str) -> int:
    """Every record of ``r``'s plan with detail, one per line, as they are made; the count."""
    n = 0
    try:
        with open(path, "w", encoding="utf-8") as f:
            for rec in r.plan_records(detail=True):
                f.write(json.dumps(rec, separators=(",", ":")) + "\n")
                n += 1
    except OSError as e:
        raise BadInput(f"--plan-file {path}: {e.strerror or e}") from None
    return n


def emit_with_plan(summary: dict, key: str, records: Iterable[dict]) -> None:
    """``summary`` as `emit_json` prints it, with ``key`` last: a list of ``records``
    one compact record per line, each printed as it is made (never the whole text)."""
    head = json.dumps({k: v for k, v in summary.items() if k != key}, indent=2)
    click.echo(head[:-2] + f",\n  {json.dumps(key)}: [" if head != "{}" else f"{{\n  {json.dumps(key)}: [", nl=False)
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    sep, chunk = "\n    ", []
    for rec in records:
        chunk.append(sep + dumps(rec))
        sep = ",\n    "
        if len(chunk) == 2048:  # written in chunks: half a million records a plan
            click.echo("".join(chunk), nl=False)
            chunk = []
    click.echo("".join(chunk) + ("\n  ]\n}" if sep != "\n    " else "]\n}"))


def text_plan(r, detail: bool) -> list[str]:
    """The plan as text: every Set's line when small or asked for, else the summary."""
    from smagent.sweep import plansummary
    if detail or r.sets_planned <= plansummary.SUMMARY_OVER:
        return r.plan_lines()
    return list(plansummary.summary_lines(r))
