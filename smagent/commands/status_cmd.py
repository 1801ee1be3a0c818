"""`smagent status`: ask the running daemon (`smagent run`) over its control socket.

Exit codes: 0 it answered (also when stdout closes early, as under `| head -1`), 3 no
daemon answers at the state directory's socket. With ``--check`` (for monitoring): 1 when
the daemon holds MASTER but is not routing as planned (its last sweep failed or was
refused: the first line says so) or another SM is MASTER beside it under another SM_Key.
"""
from __future__ import annotations

import json
import os
import sys

import click

from smagent.errors import EXIT_DEFECTS


def lines(s: dict) -> list[str]:
    """The text status: state, sweeps (failed ones too), the last error, the other SMs."""
    c = s.get("counters", {})
    out = [f"state: {s['state']}  priority: {s.get('priority')}  guid: {s.get('guid')}  "
           f"master: {s.get('master_guid')}" + "".join(f"  {w}" for w in warnings(s))]
    if s.get("activity"):
        out.append(f"busy: {s['activity']}")
    out.append(f"sweeps: {s.get('sweeps', 0)} (repairs {c.get('repairs', 0)}), failed {s.get('sweeps_failed', 0)}, "
               f"light sweeps {c.get('light_sweeps', 0)} ({c.get('light_sweep_gets', 0)} Gets each), "
               f"traps {c.get('traps', 0)}" + (f" ({c['bad_m_keys']} bad M_Key)" if c.get("bad_m_keys") else ""))
    last = s.get("last_sweep") or {}
    if last.get("ok", True) and last:
        out.append(f"last sweep: {last['why']}: {last['smps']} SMPs, {last['sets']} Sets, {last['seconds']} s")
    elif last:
        out.append(f"last sweep: {last['why']}: FAILED after {last['smps']} SMPs, {last['seconds']} s: {last['error']}")
    if s.get("routing"):
        out.append(f"routing: {s['routing']['engine']} ({s['routing']['reason']})")
    err = s.get("last_error")
    if err:
        out.append(f"last error: {err['what']}: {err['error']} ({c.get('errors', 0)} errors in all)")
    change = s.get("last_change")
    out.append(f"last change: {change['what'] if change else 'none'}")
    out.append(f"handovers: sent {c.get('handovers_sent', 0)}, received {c.get('handovers_received', 0)}; "
               f"SMInfo answered: {c.get('sminfo_gets_answered', 0)} Gets, {c.get('sminfo_sets_answered', 0)} Sets")
    if s.get("drained"):  # kept out of every route until `smagent undrain`
        out.append("drained: " + ", ".join(e["name"] if e.get("port") is None else f"{e['name']}[{e['port']}]"
                                           for e in s["drained"]))
    out += _services(s)
    for p in s.get("other_sms", []):
        out.append(f"other SM: {p['guid']} ({p['node']}, LID {p['lid']}) priority {p['priority']} {p['state']}"
                   + ("" if p.get("peer", True) else " (another SM_Key: not a peer)"))
    config = s.get("config") or {}
    rl = config.get("reload")
    if rl:
        out.append(f"last reload: {rl['file']}: " + ("in force" if rl["ok"] else f"REFUSED: {rl['error']}"))
    if config.get("fell_back"):
        out.append("routing with the last good settings: those in force were refused")
    for problem in s.get("state_files_not_read", []):
        out.append(f"state file not read: {problem}")
    if s.get("log_lines_suppressed"):
        out.append(f"log lines left out as repeats: {s['log_lines_suppressed']}")
    return out


def _services(s: dict) -> list[str]:
    """The SA's and PerfMgr's lines: what they answered and counted, the ports erring."""
    out = []
    sa = s.get("sa") or {}
    if sa:
        out.append(f"SA: {sa.get('answered', 0)} requests answered, {sa.get('tables_pending', 0)} tables being made, "
                   f"{sa.get('tables_in_flight', 0)} in flight; {sa.get('groups', 0)} multicast groups, "
                   f"{sa.get('subscriptions', 0)} subscriptions, {sa.get('reports_sent', 0)} Reports sent")
    pm = s.get("perfmgr")
    if pm:
        last = pm.get("last") or {}
        when = f", last {last['ports_read']} ports in {last['seconds']} s" if last else ", no counter sweep yet"
        out.append(f"PerfMgr: every {pm.get('interval_s')} s, {pm.get('sweeps', 0)} sweeps{when}; "
                   f"{pm.get('erring', 0)} ports erring"
                   + (f", {last['unanswered']} agents not answering" if last.get("unanswered") else ""))
    return out


def warnings(s: dict) -> list[str]:
    """What a monitor must see at once (the first line; `--check` exits 1 on any)."""
    out = []
    if s.get("routed") is False:
        last = s.get("last_sweep") or {}
        out.append(f"NOT ROUTING: last sweep failed ({str(last.get('error', '?')).splitlines()[0]})")
    if s.get("state") == "MASTER":
        for p in s.get("other_sms", []):
            if p.get("state") == "MASTER" and not p.get("peer", True):
                out.append(f"SECOND MASTER: {p['guid']} ({p['node']}) under another SM_Key")
    return out


@click.command("status")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None,
              help="The daemon's state directory (default as for run).")
@click.option("--json", "as_json", is_flag=True, help="The daemon's answer as one JSON document.")
@click.option("--check", is_flag=True,
              help="For monitoring: exit 1 when a MASTER is not routing as planned or a second master is seen.")
def status(state_dir, as_json, check):
    """The running SM's state, priority, master GUID, sweeps, last change and counters."""
    from smagent.config.files import default_state_dir
    from smagent.sm import control
    s = control.query(control.socket_path(state_dir or default_state_dir()))  # ControlError: exit 3
    if "state" not in s:
        raise control.ControlError(f"the daemon answered with an error: {s.get('error', s)}")
    try:
        click.echo(json.dumps(s, indent=2) if as_json else "\n".join(lines(s)))
        sys.stdout.flush()
    except BrokenPipeError:
        # the reader went away (`| head -1`): not an error; stdout goes to /dev/null so
        # that the interpreter's own flush at exit does not fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if check and warnings(s):
        sys.exit(EXIT_DEFECTS)
