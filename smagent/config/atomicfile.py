"""Replacing a file so that a crash or a full disk never leaves half of it: the one
helper every state file and output file goes through (guid2lid, the apply journal's
begin record, backups, `paths.write_text`).

The new text goes to a temporary file in the same directory (a rename is atomic only
within one file system), is fsynced, then renamed over the old file, and the directory
is fsynced so that the rename itself survives a crash. On any failure the temporary file
is removed and the old file is untouched.

`no_space(e)`: whether an OSError means the disk cannot take more (full, over quota,
read-only): the errors a long-running SM degrades on instead of stopping
(`tolerate_full_disk`, `tolerated`: "LID file not written", "no backup written",
"journal not written" warnings, and routing goes on).
"""
from __future__ import annotations

import errno
import itertools
import logging
import os

NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
_serial = itertools.count()  # temporary names differ between the writes of one process


def no_space(e: BaseException) -> bool:
    """The disk is full, over quota or read-only."""
    return isinstance(e, OSError) and e.errno in NO_SPACE


def temp_name(path) -> str:
    """A temporary name next to ``path``, unique to this process and write; hidden and
    ending in ``.tmp`` so that no glob of the state directory picks it up."""
    p = os.fspath(path)
    head, name = os.path.split(os.path.abspath(p))
    return os.path.join(head, f".{name}.{os.getpid()}.{next(_serial)}.tmp")


def write_bytes(path, data: bytes, mode: int = 0o666) -> None:
    """Replace ``path`` with ``data`` atomically (see the module docstring). The mode is
    ``mode`` less the umask (0600 for a file of secrets: it never exists more open)."""
    p = os.path.realpath(os.fspath(path))  # a symlink's target is replaced, the link stays
    if os.path.exists(p) and not os.path.isfile(p):  # /dev/null, a FIFO: written, never replaced
        with open(p, "wb") as f:
            f.write(data)
        return
    tmp = temp_name(p)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(os.path.dirname(os.path.abspath(p)))


def write_text(path, text: str) -> None:
    """`write_bytes` of ``text`` in UTF-8."""
    write_bytes(path, text.encode("utf-8"))


def fsync_dir(directory) -> None:
    """Make a rename in ``directory`` durable; a file system that cannot fsync a
    directory (some network ones) is not an error."""
    try:
        fd = os.open(os.fspath(directory), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# -- a full disk under the running SM -----------------------------------------------------
# One-shot commands stop on a write that fails (their exit code says what was sent); the
# running SM must go on routing, so `smagent run` turns a full disk into warnings.
_tolerate = False


def tolerate_full_disk(on: bool = True) -> None:
    """From now on (until called with False), `tolerated` lets a full-disk error pass:
    `smagent run` sets it for its lifetime."""
    global _tolerate
    _tolerate = on


def tolerated(e: BaseException, what: str) -> bool:
    """Whether the write error ``e`` may be passed over (a full disk while tolerated); if
    so it is logged as the warning "``what``: <error> (<file>)" (``what``: "no backup
    written", ...). The caller re-raises otherwise."""
    if not (_tolerate and no_space(e)):
        return False
    assert isinstance(e, OSError)
    logging.getLogger("smagent.state").warning("%s: %s (%s)", what, e.strerror or e,
                                               e.filename or "the state directory")
    return True

