"""`smagent drain NODE|NODE[PORT] ...` and `smagent undrain ...`: route around what is to be
taken out, in an order that breaks no pair in flight, and prove no entry leads into it
(`smagent.sweep.drain`). When a daemon (`smagent run`) answers at the state directory's
control socket, it does the work and keeps the drain across sweeps and restarts
(`smagent.sm.drained`); else drain writes the tables itself and records the drain in the state
directory, which every later sweep honours, and undrain drops it and sweeps."""
from __future__ import annotations

import sys

import click

from smagent.commands.common import emit_json
from smagent.errors import EXIT_DEFECTS, EXIT_FABRIC, BadInput, SmagentError

STATE_DIR_HELP = ("The running SM's state directory, whose control socket is asked (default: $SMAGENT_STATE_DIR, "
                  "else as for run; asked without this option only with --transport umad).")


class Refused(SmagentError):
    """What the running SM answered instead of a result: its message and exit code."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.exit_code = code


def _daemon_socket(obj, state_dir):
    """The control socket of a daemon running for the state directory, or None."""
    from smagent.config.files import default_state_dir
    from smagent.sm import control
    if state_dir is None and obj.opts.get("transport") != "umad":
        return None  # the simulator and replays have no daemon of their own
    path = control.socket_path(state_dir or default_state_dir())
    return path if control.listening(path) else None


def _ask(path, command: str, args: dict) -> dict:
    """One command to the daemon; its error raised as the error it was (same exit code)."""
    from smagent.sm import control
    out = control.query(path, command, timeout=control.COMMAND_DEADLINE_S, args=args)
    if "error" in out:
        code = out.get("exit")
        raise Refused(f"the running SM: {out['error']}", code if code in (2, 3, 4, 70) else EXIT_FABRIC)
    return out


def _show(out: dict, as_json: bool) -> None:
    if as_json:
        emit_json({k: v for k, v in out.items() if k != "lines"})
    else:
        click.echo("\n".join(out["lines"]))


@click.command()
@click.argument("targets", nargs=-1, required=True, metavar="NODE|NODE[PORT]...")
@click.option("--routing", "engine", default=None, help="The engine to route with (default: the sweep's; "
              "one-shot only: a running SM drains with its own).")
@click.option("--dry-run", is_flag=True, help="Plan and check only: what would be rerouted; no Set.")
@click.option("--force", is_flag=True, help="Drain even if another SM is MASTER (one-shot).")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None, help=STATE_DIR_HELP)
@click.option("--json", "as_json", is_flag=True, help="One JSON document: what was drained, Sets, entries left.")
@click.pass_obj
def drain(obj, targets, engine, dry_run, force, state_dir, as_json):
    """Take switches, hosts or cables (NODE[PORT]: the cable on that port) out of the routes:
    every pair is routed around them with the engine, the new tables written so that no pair
    routable before and after breaks meanwhile, then every switch's tables are read back.
    With a running SM (`smagent run` for the state directory) the SM does it and keeps them
    drained across sweeps and restarts until `smagent undrain`; else smagent does it and
    records it in the state directory, so later sweeps keep routing around it. Exit 0: no LFT or MFT entry leads into them, safe to remove; 1:
    entries still do (listed); 4: the drain would cut off other hosts or the SM's own port
    (refused, nothing sent); 2 bad input; 3 the fabric or the SM failed."""
    sock = _daemon_socket(obj, state_dir)
    if sock is not None:
        if engine:
            raise BadInput("--routing: the running SM drains with the engine it routes with; drop --routing "
                           "(or change the SM's routing and reload it)")
        out = _ask(sock, "drain", {"targets": list(targets), "dry_run": dry_run})
        _show(out, as_json)
        if out.get("entries_left"):
            sys.exit(EXIT_DEFECTS)
        return
    session = obj.session()
    if state_dir:  # the drained set is kept there: later sweeps and a daemon started later honour it
        session.state_dir = state_dir
    r = session.drain(list(targets), routing=engine, dry_run=dry_run, force=force)
    if as_json:
        emit_json(r.as_json())
    else:
        click.echo("\n".join(r.lines()))
    if r.entries_left:
        sys.exit(EXIT_DEFECTS)


@click.command()
@click.argument("targets", nargs=-1, required=True, metavar="NODE|NODE[PORT]...")
@click.option("--state-dir", type=click.Path(file_okay=False), default=None, help=STATE_DIR_HELP)
@click.option("--json", "as_json", is_flag=True, help="One JSON document: what was undrained, Sets.")
@click.pass_obj
def undrain(obj, targets, state_dir, as_json):
    """Put drained switches, hosts or cables back into the routes. With a running SM: it
    drops them from its drained set and sweeps (routes cross them again). Without one: they
    are dropped from the state directory's drained set (if listed there) and a sweep routes
    over the whole fabric again. Exit 2: not drained / not found; 3 the fabric failed."""
    sock = _daemon_socket(obj, state_dir)
    if sock is not None:
        _show(_ask(sock, "undrain", {"targets": list(targets)}), as_json)
        return
    out = _one_shot_undrain(obj, list(targets), state_dir)
    _show(out, as_json)


def _one_shot_undrain(obj, targets: list[str], state_dir) -> dict:
    """No daemon: drop ``targets`` from the state directory's drained set, then sweep."""
    from smagent.config import drainfile
    from smagent.config.files import default_state_dir
    from smagent.sweep import drain as drainmod
    session = obj.session()
    topo = session.discover()  # Gets only: every name checked before the first Set
    found = [drainmod.target(t, topo, "undrain") for t in targets]
    root = state_dir or (default_state_dir() if obj.opts.get("transport") == "umad" else None)
    kept = drainfile.load(root) if root else []
    left = [e for e in kept if not any(e.guid == f.guid and e.port == f.port for f in found)]
    if root and len(left) != len(kept):
        drainfile.save(root, left)
    r = session.sweep(drained=tuple(left))  # what stays drained stays routed around
    what = ", ".join(map(str, found))
    sets = r.sets_planned
    return {"undrained": [str(f) for f in found], "sets": sets, "still_drained": [str(e) for e in left],
            "lines": [f"undrained {what}: a sweep routed over the whole fabric again ({sets} Sets)"]}
