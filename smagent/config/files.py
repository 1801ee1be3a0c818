"""File and path arguments, checked before the first SMP (issue 11 item 3): an input is
read whole, an output's directory must exist and be writable, a state directory must
be writable or creatable. Each failure is a `BadInput` naming the option and the path,
so nothing has been sent when it is refused.
"""
from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from smagent.config import atomicfile
from smagent.errors import BadInput, FileProblems

class StateDir:
    """The state directory and its files, by name: the one place their names are spelled.
    ``StateDir(root).guid2lid`` is the path; the class attributes are the names."""
    GUID2LID = "guid2lid"  # the LIDs, kept across runs (OpenSM's name and format)
    JOURNAL = "apply.journal"  # the apply in progress (smagent.fdb.journal)
    JOURNALS = "journals"  # finished (and superseded) journals, next to the live one
    BACKUPS = "backups"  # what applies overwrote (smagent.fdb.backup)
    CONTROL_SOCKET = "control.sock"  # the running SM's control socket (smagent.sm.control)
    PATH_SLS = "path_sls"  # the SL of every path a VL-layering engine chose (smagent.planning.pathsl)
    GUID2MKEY = "guid2mkey"  # the M_Keys this SM set, by node GUID (OpenSM's name; mode 0600)
    DRAINED = "drained"  # what the running SM keeps drained (smagent.config.drainfile)

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)

    @property
    def guid2lid(self) -> Path:
        return self.root / self.GUID2LID

    @property
    def journal(self) -> Path:
        return self.root / self.JOURNAL

    @property
    def journals(self) -> Path:
        return self.root / self.JOURNALS

    @property
    def backups(self) -> Path:
        return self.root / self.BACKUPS

    @property
    def path_sls(self) -> Path:
        return self.root / self.PATH_SLS

    @property
    def control_socket(self) -> Path:
        return self.root / self.CONTROL_SOCKET

    @property
    def guid2mkey(self) -> Path:
        return self.root / self.GUID2MKEY

    @property
    def drained(self) -> Path:
        return self.root / self.DRAINED


STATE_KEEP_ENV = "SMAGENT_STATE_KEEP"
STATE_KEEP_DEFAULT = 20  # backups and finished apply journals kept in the state directory


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


# the largest state file read (guid2lid of 49,151 LIDs is ~2.5 MB; a journal of a full
# fabric's blocks is larger): anything bigger is not one we wrote
STATE_FILE_MAX = 256 << 20


class NotAStateFile(BadInput):
    """A state file that is not a regular file (a device, a FIFO, a directory; a symlink
    to one) or is larger than `STATE_FILE_MAX`: never read (a guid2lid linked to
    /dev/zero would grow the reader without limit)."""


def check_state_file(path, what: str = "state file", limit: int = STATE_FILE_MAX) -> None:
    """`NotAStateFile` unless ``path`` is a regular file of at most ``limit`` bytes
    (FileNotFoundError when absent): for a reader that opens it itself."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise NotAStateFile(f"{what} {os.fspath(path)}: {_kind(st.st_mode)}, not a regular file; not read")
    if st.st_size > limit:
        raise NotAStateFile(f"{what} {os.fspath(path)}: larger than {limit >> 20} MiB; not read")


def _kind(mode: int) -> str:
    return ("a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode)
            else "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a directory" if stat.S_ISDIR(mode) else "not a regular file")


def read_state_bytes(path, what: str = "state file", limit: int = STATE_FILE_MAX) -> bytes:
    """The bytes of a state file, read only when it is a regular file of at most
    ``limit`` bytes; `NotAStateFile` otherwise, FileNotFoundError when absent, BadInput
    when unreadable. Opened without blocking (a FIFO does not hang the reader) and
    checked on the open file (no race with a rename)."""
    p = os.fspath(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise BadInput(f"{what} {p}: {_why(e)}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotAStateFile(f"{what} {p}: {_kind(st.st_mode)}, not a regular file; not read")
        data = f.read(limit + 1)  # a file growing while read stops here too
    if len(data) > limit:
        raise NotAStateFile(f"{what} {p}: larger than {limit >> 20} MiB; not read")
    return data


def read_state_text(path, what: str = "state file", *, errors: str = "strict",
                    limit: int = STATE_FILE_MAX) -> str:
    """`read_state_bytes` as UTF-8 text (BadInput when it is not, with ``errors="strict"``)."""
    data = read_state_bytes(path, what, limit)
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as e:
        raise BadInput(f"{what} {os.fspath(path)}: not a UTF-8 text file (byte {e.start})") from None


def read_config(path, error: type[FileProblems]) -> tuple[str, str]:
    """(the path, its whole text) of a configuration file read before any SMP is sent, or
    ``error(path, ["cannot read: ..."])``."""
    p = os.fspath(path)
    try:
        with open(p, encoding="utf-8") as f:
            return p, f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise error(p, [f"cannot read: {getattr(e, 'strerror', None) or e}"]) from None


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
    state_keep()  # a bad retention setting is refused here too, before the first SMP
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
        atomicfile.write_text(p, text)  # never half a file, even on a full disk
    except OSError as e:
        raise BadInput(f"{what} {p}: {_why(e)}") from None


def default_state_dir() -> str:
    """Where backups, the apply journal and the LID file live: $SMAGENT_STATE_DIR, else
    $XDG_STATE_HOME/smagent, else ~/.local/state/smagent."""
    if os.environ.get("SMAGENT_STATE_DIR"):
        return os.environ["SMAGENT_STATE_DIR"]
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "smagent")


def state_keep() -> int:
    """How many backups and finished apply journals the state directory keeps:
    $SMAGENT_STATE_KEEP (a whole number >= 1), else 20. A bad value is a BadInput."""
    raw = os.environ.get(STATE_KEEP_ENV, "").strip()
    if not raw:
        return STATE_KEEP_DEFAULT
    try:
        n = int(raw, 10)
    except ValueError:
        n = 0
    if n < 1:
        raise BadInput(f"{STATE_KEEP_ENV}={raw!r}: a whole number of files to keep, at least 1, expected")
    return n


def stamp() -> str:
    """A file-name stamp that sorts by creation time and differs between processes."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{time.monotonic_ns() % 10**6:06d}"


def keep_newest(directory, pattern: str, keep: int, protect=()) -> list[Path]:
    """Delete the files of ``directory`` matching ``pattern`` but the newest ``keep``
    (by modification time, then name) and those in ``protect``; returns what was deleted.
    A file that vanishes meanwhile (another smagent pruning) is not an error."""
    keep_set = {Path(p).resolve() for p in protect if p}
    try:
        files = [(f.stat().st_mtime_ns, f.name, f) for f in Path(directory).glob(pattern) if f.is_file()]
    except OSError:
        return []
    files.sort(reverse=True)
    gone = []
    for _mtime, _name, f in files[keep:]:
        if f.resolve() in keep_set:
            continue
        try:
            f.unlink()
            gone.append(f)
        except FileNotFoundError:
            pass
    return gone
