"""`smagent status`: ask the running daemon (`smagent run`) over its control socket.

Exit codes: 0 it answered (also when stdout closes early, as under `| head -1`), 3 no
daemon answers at the state directory's socket.
"""
from __future__ import annotations

import json
import os
import sys

import click


def lines(s: dict) -> list[str]:
    """The text status: state, sweeps (failed ones too), the last error, the other SMs."""
    c = s.get("counters", {})
    out = [f"state: {s['state']}  priority: {s.get('priority')}  guid: {s.get('guid')}  "
           f"master: {s.get('master_guid')}"]
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
    for p in s.get("other_sms", []):
        out.append(f"other SM: {p['guid']} ({p['node']}, LID {p['lid']}) priority {p['priority']} {p['state']}")
    return out


@click.command("status")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None,
              help="The daemon's state directory (default as for run).")
@click.option("--json", "as_json", is_flag=True, help="The daemon's answer as one JSON document.")
def status(state_dir, as_json):
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
