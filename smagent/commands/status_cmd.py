"""`smagent status`: ask the running daemon (`smagent run`) over its control socket.

Exit codes: 0 it answered, 3 no daemon answers at the state directory's socket.
"""
from __future__ import annotations

import json

import click


@click.command("status")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None,
              help="The daemon's state directory (default as for run).")
@click.option("--json", "as_json", is_flag=True, help="The daemon's answer as one JSON document.")
def status(state_dir, as_json):
    """The running SM's state, priority, master GUID, sweeps, last change and counters."""
    from smagent.paths import default_state_dir
    from smagent.sm import control
    s = control.query(control.socket_path(state_dir or default_state_dir()))  # ControlError: exit 3
    if as_json:
        click.echo(json.dumps(s, indent=2))
        return
    c = s.get("counters", {})
    click.echo(f"state: {s['state']}  priority: {s.get('priority')}  guid: {s.get('guid')}  "
               f"master: {s.get('master_guid')}")
    last = s.get("last_sweep") or {}
    click.echo(f"sweeps: {s.get('sweeps', 0)} (repairs {c.get('repairs', 0)}), light sweeps "
               f"{c.get('light_sweeps', 0)} ({c.get('light_sweep_gets', 0)} Gets each), traps {c.get('traps', 0)}")
    if last:
        click.echo(f"last sweep: {last['why']}: {last['smps']} SMPs, {last['sets']} Sets, {last['seconds']} s")
    change = s.get("last_change")
    click.echo(f"last change: {change['what'] if change else 'none'}")
    click.echo(f"handovers: sent {c.get('handovers_sent', 0)}, received {c.get('handovers_received', 0)}; "
               f"SMInfo answered: {c.get('sminfo_gets_answered', 0)} Gets, {c.get('sminfo_sets_answered', 0)} Sets")
    for p in s.get("other_sms", []):
        click.echo(f"other SM: {p['guid']} ({p['node']}, LID {p['lid']}) priority {p['priority']} {p['state']}")
