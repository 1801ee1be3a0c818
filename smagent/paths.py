"""File and path arguments, checked before the first SMP (issue 11 item 3): an input is
read whole, an output's directory must exist and be writable, a state directory must
be writable or creatable. Each failure is a `BadInput` naming the option and the path,
so nothing has been sent when it is refused.
"""
from __future__ import annotations

import os

from smagent.errors import BadInput


def _why(e: OSError) -> str:
    return e.strerror or str(e)


def read_text(path, what: str = "file", *, errors: str = "strict") -> str:
    """The whole text of an input file, or BadInput naming it (missing, unreadable, not UTF-8)."""
    p = os.fspath(path)
    try:
        with open(p, encoding="utf-8", errors=errors) as f:
            return f.read()
    except UnicodeDecodeError as e:
        raise BadInput(f"{what} {p}: not a UTF-8 text file (byte {e.start})") from None
    except OSError as e:
        raise BadInput(f"{what} {p}: {_why(e)}") from None


def check_output(path, what: str = "output") -> None:
    """``path`` can be written: not a directory, its directory exists and is writable, and
    an existing file is writable. Nothing is created."""
    p = os.fspath(path)
    if os.path.isdir(p):
        raise BadInput(f"{what} {p}: is a directory")
    parent = os.path.dirname(os.path.abspath(p))
    if not os.path.isdir(parent):
        raise BadInput(f"{what} {p}: directory {parent} does not exist")
    if os.path.exists(p) and not os.access(p, os.W_OK):
        raise BadInput(f"{what} {p}: not writable")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise BadInput(f"{what} {p}: directory {parent} is not writable")


def check_state_dir(path, what: str = "--state-dir") -> None:
    """``path`` is a writable directory, or can be made one: its nearest existing
    ancestor is a writable directory."""
    p = os.path.abspath(os.fspath(path))
    if os.path.exists(p):
        if not os.path.isdir(p):
            raise BadInput(f"{what} {path}: not a directory")
        if not os.access(p, os.W_OK | os.X_OK):
            raise BadInput(f"{what} {path}: not writable")
        return
    up = p
    while not os.path.exists(up):
        up = os.path.dirname(up)
    if not os.path.isdir(up) or not os.access(up, os.W_OK | os.X_OK):
        raise BadInput(f"{what} {path}: cannot be created ({up} is not a writable directory)")


def write_text(path, text: str, what: str = "output") -> None:
    """Write an output file; an OSError becomes BadInput naming it (the caller checked the
    path before the first SMP, so this is a rare late failure: a full disk)."""
    p = os.fspath(path)
    try:
        with open(p, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise BadInput(f"{what} {p}: {_why(e)}") from None


def default_state_dir() -> str:
    """Where backups, the apply journal and the LID file live: $SMAGENT_STATE_DIR, else
    $XDG_STATE_HOME/smagent, else ~/.local/state/smagent."""
    if os.environ.get("SMAGENT_STATE_DIR"):
        return os.environ["SMAGENT_STATE_DIR"]
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "smagent")
