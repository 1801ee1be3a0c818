"""The error contract: every error smagent means to raise is one of these, and carries
its exit code. The CLI turns them into a message and that code at one place
(`smagent.commands.common.SmagentGroup`); anything else that escapes is a bug and is
reported as `InternalError` (exit 70), never as bad input.

    exit  class            meaning
    0     -                ok
    1     -                a check ran and found defects (verify, apply's read-back): its
                           report is the output, so this code is an exit, not an exception
    2     BadInput         the input was refused; nothing was sent that could change a switch
    3     FabricFailure    the fabric or the transport failed (``changed``: the Sets already sent)
    4     SafetyRefusal    refused for safety before the first Set: another SM is MASTER
                           (--force overrides), or the planned tables would break the
                           fabric (smagent.sweep.PlanDefects; --allow-defects overrides)
    70    InternalError    a bug: an unexpected exception (EX_SOFTWARE); please report it
    130   Interrupted      Ctrl-C

Leaf module: it imports nothing from smagent, so every layer may import it.
`mad/` does not: its `MadError` is translated where the agent catches it (a target or
file a user gave: BadInput; a response from the fabric: a transport error).
"""
from __future__ import annotations

EXIT_OK = 0
EXIT_DEFECTS = 1
EXIT_BAD_INPUT = 2
EXIT_FABRIC = 3
EXIT_SAFETY = 4
EXIT_INTERNAL = 70  # sysexits.h EX_SOFTWARE
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it


class SmagentError(Exception):
    """Base of smagent's own errors. ``details()`` is what the CLI adds to its JSON error."""
    exit_code = EXIT_INTERNAL

    def details(self) -> dict:
        return {}


class BadInput(SmagentError, ValueError):
    """Input refused before anything that could change a switch was sent. ``problems``:
    every problem found (the message is the first one, or all of them)."""
    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str = "", problems: list[str] | None = None):
        if problems and not message:
            message = problems[0] if len(problems) == 1 else "nothing sent:\n  " + "\n  ".join(problems)
        super().__init__(message)
        self.problems = list(problems) if problems else [message]

    def details(self) -> dict:
        return {"problems": self.problems}


class FileProblems(BadInput):
    """A configuration file (or mapping) that cannot be used: every problem, with its line
    (the partitions file's and the QoS policy's errors)."""

    def __init__(self, source: str, problems: list[str]):
        super().__init__(f"{source}: {len(problems)} problem{'s' if len(problems) != 1 else ''}:\n  "
                         + "\n  ".join(problems), problems)


class _Changed:
    """Mixin: ``changed`` lists what had been sent that may have changed a node when the
    error happened ("SubnSet(PortInfo): 12 SMPs sent"); empty when no Set had been sent."""
    changed: list[str] = []

    def __str__(self) -> str:
        msg = super().__str__()
        if self.changed:
            msg += "\nSets already sent before the failure:\n  " + "\n  ".join(self.changed)
        return msg

    def details(self) -> dict:
        return {"changed": self.changed}


class FabricFailure(_Changed, SmagentError, RuntimeError):
    """The fabric or the transport failed (``changed``: see `_Changed`)."""
    exit_code = EXIT_FABRIC

    def __init__(self, message: str = "", changed: list[str] | None = None):
        super().__init__(message)
        self.changed = list(changed or [])


def after_sets(err: SmagentError, sets_sent: list[str]) -> SmagentError:
    """``err`` as it must be reported once ``sets_sent`` is not empty: "nothing sent"
    (BadInput) is no longer true, so it becomes a FabricFailure; a FabricFailure or an
    InternalError lists what was sent."""
    if not sets_sent:
        return err
    if isinstance(err, BadInput):
        return FabricFailure(f"{err} (after Sets were sent)", changed=sets_sent)
    if isinstance(err, (FabricFailure, InternalError)) and not err.changed:
        err.changed = sets_sent
    return err


class SafetyRefusal(SmagentError):
    """Refused for safety before the first Set (another subnet manager is MASTER, or the
    planned tables would break the fabric)."""
    exit_code = EXIT_SAFETY


class Interrupted(SmagentError):
    """Ctrl-C; the message says what is known of the Sets already sent."""
    exit_code = EXIT_INTERRUPTED


class InternalError(_Changed, SmagentError):
    """An unexpected exception: a bug in smagent, whatever its Python type."""
    exit_code = EXIT_INTERNAL

    def __init__(self, exc: BaseException, changed: list[str] | None = None):
        super().__init__(f"internal error: {type(exc).__name__}: {exc}; please report it "
                         f"(SMAGENT_DEBUG=1 or --debug shows the traceback)")
        self.original = exc
        self.changed = list(changed or [])

    def details(self) -> dict:
        return {"exception": type(self.original).__name__, "changed": self.changed}
