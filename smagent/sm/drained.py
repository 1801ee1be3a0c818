"""Drain and undrain against the running SM (issue 40 item 1): `smagent drain` / `smagent
undrain` reach the daemon through its control socket (`smagent.sm.control`); the loop does
the work (`handle`, from a `events.ControlCommand`), since a drain sends Sets.

The drained set lives in `Drained` and in ``STATE_DIR/drained`` (`smagent.config.drainfile`,
read whole at start: a damaged file stops the start, exit 2). Every sweep and repair gets it
as `SweepOptions.drained` and plans over the fabric without it; the audit reads only what
the known state holds, and the drained part is not in it, so nothing undoes a drain.

A drain plans against the daemon's known state (no SMP): the tables as they are and as the
reroute would leave them, compared pair by pair (`verify.whatif.compare`); a drain that would
cut off hosts not on the drained part, or take out the SM's own port, is refused before
anything is saved or sent (SafetyRefusal, exit 4). Then the set is saved, a repair routes
around it (written in the safe order, `fdb.apply`), and the tables of the switches cabled
into it are read back: no LFT or MFT entry may lead into it (`sweep.drain.prove`), the proof
a one-shot drain gives. An undrain drops it from the set and runs a full sweep (discovery: the part is back in
the topology) that routes over it again.
"""
from __future__ import annotations

import collections
import copy
import dataclasses
import logging
from concurrent.futures import Future
from typing import TYPE_CHECKING

from mad.attributes import SMState
from smagent import sweep as sweepmod
from smagent.config import drainfile
from smagent.errors import BadInput, FabricFailure, InternalError, SafetyRefusal, SmagentError
from smagent.sm import events
from smagent.sm.statemachine import state_name
from smagent.sweep import drain as drainmod, plancheck
from smagent.verify import whatif

if TYPE_CHECKING:
    from smagent.sm.duties import Duties

log = logging.getLogger("smagent.sm")

MAX_TARGETS = 256
MAX_TARGET_LEN = 256


class Drained:
    """The drained set of a daemon: what `SweepOptions.drained` gets, kept in the state
    directory (none without one: then it lasts as long as the process)."""

    def __init__(self, state_dir: str | None):
        self.state_dir = state_dir
        self.entries: tuple[drainfile.Entry, ...] = tuple(drainfile.load(state_dir)) if state_dir else ()
        if self.entries:
            log.info("drained (kept from %s): %s", state_dir, ", ".join(map(str, self.entries)))

    def replace(self, entries: list[drainfile.Entry]) -> None:
        """Save first (a write that fails changes nothing), then hold."""
        if self.state_dir:
            try:
                drainfile.save(self.state_dir, entries)
            except OSError as e:
                raise FabricFailure(f"cannot write the drained-set file in {self.state_dir}: "
                                    f"{e.strerror or e}; nothing was sent") from None
        self.entries = tuple(entries)

    def status(self) -> list[dict]:
        return [e.as_json() for e in self.entries]


def submit(queue: collections.deque[events.Event], command: str, args: dict) -> Future:
    """From the control socket (any thread): queue the command for the loop."""
    answer: Future = Future()
    queue.append(events.ControlCommand(command, args, answer))
    return answer


def handle(d: Duties, ev: events.ControlCommand) -> None:
    """In the loop, by the master duties ``d``: do the command, answer with its JSON (or
    the error and its exit code)."""
    out = {"error": f"the SM stopped before the {ev.command} finished", "exit": FabricFailure.exit_code}
    try:
        out = (drain if ev.command == "drain" else undrain)(d, ev.args)
    except SmagentError as e:
        out = {"error": str(e), "exit": e.exit_code}
    except Exception as e:  # noqa: BLE001 - a defect is answered and logged; the SM stays up
        log.exception("%s failed", ev.command)
        out = {"error": f"internal error: {type(e).__name__}: {e}", "exit": InternalError.exit_code}
    finally:  # also when Stopped (SIGTERM) unwinds through: the client hears why
        ev.answer.set_result(out)


def _targets(args: dict) -> list[str]:
    targets = args.get("targets")
    if (not isinstance(targets, list) or not targets or len(targets) > MAX_TARGETS
            or not all(isinstance(t, str) and 0 < len(t) <= MAX_TARGET_LEN for t in targets)):
        raise BadInput("name what to drain: NODE or NODE[PORT], one or more")
    return targets


def _master(d: Duties, what: str):
    state = d.shared.sm.state
    if state != SMState.MASTER:
        raise SafetyRefusal(f"{what}: this SM is {state_name(state)}, not MASTER: {what} at the master SM; "
                            "nothing was sent")
    if d.known is None:  # the last sweep did not end clean: a fresh one first
        d.sweep(f"before a {what}")
    if d.known is None:
        raise FabricFailure(f"{what}: the fabric is not routed cleanly (see `smagent status`); nothing was changed")
    return d.known


def _already(d: Duties, text: str) -> drainfile.Entry | None:
    return next((e for e in d.drained.entries if text in (str(e), f"{e.guid:#018x}")
                 or (e.port is None and text == e.name)), None)


def _plan(d: Duties, known, drained, multicast: bool = False):
    """A plan against the known state with ``drained`` out: no SMP."""
    in_force = d.shared.opts.sweep
    opts = dataclasses.replace(in_force, dry_run=True, multicast=multicast, known=known, drained=tuple(drained),
                               routing_memory=copy.deepcopy(in_force.routing_memory), progress=None)
    return sweepmod.sweep(d.shared.t, opts)


def assess(d: Duties, known, texts: list[str]) -> tuple[list[whatif.Failure], whatif.WhatIf]:
    """What draining ``texts`` would do, refused if unsafe (SafetyRefusal, nothing sent)."""
    new = []
    for text in texts:
        if (e := _already(d, text)) is not None:
            raise BadInput(f"drain {text!r}: {e} is drained already")
        new.append(drainmod.target(text, known.topology))
    drainmod.refuse_own_port(known.topology, new)
    now = _plan(d, known, d.drained.entries)
    after = _plan(d, known, [*d.drained.entries, *(drainfile.Entry(f.guid, f.name, f.port) for f in new)])
    w = whatif.compare(plancheck.snapshot(now, planned=False), plancheck.snapshot(after, planned=True), new)
    drainmod.refuse_cutting_off(w)
    return new, w


def drain(d: Duties, args: dict) -> dict:
    known = _master(d, "drain")
    d.shared.activity = "planning a drain"
    try:
        with d.busy.serving():  # the SA answers while the two plans compute
            new, w = assess(d, known, _targets(args))
    finally:
        d.shared.activity = None
    if args.get("dry_run"):
        return _answer(drainmod.DrainResult(new, 0, w.rerouted, [], dry_run=True))
    what = ", ".join(map(str, new))
    d.drained.replace([*d.drained.entries, *(drainfile.Entry(f.guid, f.name, f.port) for f in new)])
    log.info("drain: %s (%d host pairs to reroute)", what, w.rerouted)
    d.known = None  # consumed, as a repair does: the sweep sets it again
    if d.sweep(f"drain {what}", known=known) is None:
        raise FabricFailure(f"drain {what}: the reroute failed ({_last_error(d)}); it stays "
                            "drained: the SM routes around it at its next sweep")
    sets = (d.last_sweep or {}).get("sets", 0)
    d.shared.activity = f"reading back the tables of the switches cabled into it (drain {what})"
    try:
        left = drainmod.prove(d.shared.t, known.topology, new)
    finally:
        d.shared.activity = None
    if left:
        log.warning("drain %s: %d entries still lead into it, e.g. %s", what, len(left), left[0])
    return _answer(drainmod.DrainResult(new, sets, w.rerouted, left, kept=True))


def _last_error(d: Duties) -> str:
    return (d.shared.last_error or {}).get("error", "?")


def _answer(r: drainmod.DrainResult) -> dict:
    return {**r.as_json(), "lines": r.lines()}


def undrain(d: Duties, args: dict) -> dict:
    texts = _targets(args)
    _master(d, "undrain")
    gone = []
    for text in texts:
        e = _already(d, text)
        if e is None:
            held = ", ".join(map(str, d.drained.entries)) or "nothing"
            raise BadInput(f"undrain {text!r}: not drained (drained: {held})")
        gone.append(e)
    what = ", ".join(map(str, gone))
    d.drained.replace([e for e in d.drained.entries if e not in gone])
    log.info("undrain: %s", what)
    # a full sweep: discovery puts the part back into the topology, the routes cross it again
    if d.sweep(f"undrain {what}") is None:
        raise FabricFailure(f"undrain {what}: the sweep failed ({_last_error(d)}); "
                            "it is no longer drained: the next sweep routes over it")
    sets = (d.last_sweep or {}).get("sets", 0)
    return {"undrained": [str(e) for e in gone], "sets": sets, "still_drained": [str(e) for e in d.drained.entries],
            "lines": [f"undrained {what}: {sets} Sets; routed over again"]
            + ([f"still drained: {', '.join(map(str, d.drained.entries))}"] if d.drained.entries else [])}


__all__ = ["Drained", "submit", "handle", "assess", "drain", "undrain"]
