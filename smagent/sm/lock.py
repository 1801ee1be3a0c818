"""One SM per port: the lock `smagent run` holds while it runs, and the IsSM check.

The control socket lives in the state directory, so deleting that directory (or giving
another ``--state-dir``) let a second daemon start on the same port: two MASTERs. The
lock does not live there: it is an flock on ``smagent-<CA>-<port>-<port GUID>.lock`` in a
runtime directory ($SMAGENT_RUNTIME_DIR, else /run/smagent; the GUID because ibsim's
nodes all show the same CA name), holding the daemon's pid. The kernel drops the flock
when the process dies, so a crash leaves no stale lock, only a file.

The lock only sees smagents using the same runtime directory. Any other SM process on the
port (OpenSM, or an smagent with another runtime directory) holds the port's issm device,
which sets PortInfo.CapabilityMask.IsSM: `claim_port` reads it (libibumad's view of the
port, which ibsim's umad2sim also keeps: it sets and clears IsSM as a client opens and
closes the issm device) before we open the device, and refuses.

Both refusals are `SafetyRefusal` (exit 4) naming the port (and the pid holding the lock).
"""
from __future__ import annotations

import dataclasses
import fcntl
import os

from mad.attributes import CAP_IS_SM
from smagent.errors import BadInput, SafetyRefusal

RUNTIME_ENV = "SMAGENT_RUNTIME_DIR"
RUNTIME_DEFAULT = "/run/smagent"


class PortTaken(SafetyRefusal):
    """Another SM runs on this port (exit 4): nothing was sent."""


def runtime_dir() -> str:
    """$SMAGENT_RUNTIME_DIR, else /run/smagent."""
    return os.environ.get(RUNTIME_ENV) or RUNTIME_DEFAULT


def lock_path(ca: str, port: int, guid: int, directory: str | None = None) -> str:
    safe_ca = "".join(c if c.isalnum() or c in "-_." else "_" for c in ca)
    return os.path.join(directory or runtime_dir(), f"smagent-{safe_ca}-{port}-{guid:016x}.lock")


@dataclasses.dataclass
class PortLock:
    """The held lock; `release` (or the process's end) frees it."""
    path: str
    fd: int

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # the flock goes with the last descriptor
            self.fd = -1


def acquire(ca: str, port: int, guid: int, directory: str | None = None) -> PortLock:
    """Take the lock of (ca, port) or raise `PortTaken` naming the pid that holds it.
    A runtime directory that cannot be made or written is BadInput."""
    path = lock_path(ca, port, guid, directory)
    try:
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise BadInput(f"lock file {path}: {e.strerror or e} (set ${RUNTIME_ENV} to a writable directory)") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise PortTaken(f"another smagent daemon (pid {holder}) is the SM on CA {ca} port {port} "
                        f"(it holds {path}): one SM per port") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return PortLock(path, fd)


def claim_port(ca: str | None, port: int | None, directory: str | None = None,
               lib_path: str | None = None) -> PortLock:
    """Before `smagent run` opens the issm device of the umad port (ca, port) (None:
    libibumad's choice): take its lock, then refuse if IsSM is already set there. Opens
    the umad port only to read it (as any one-shot command does)."""
    from smagent.transport.umad_lib import UmadPort
    probe = UmadPort(ca, port, lib_path)
    try:
        info = probe.local_port_info()
    finally:
        probe.close()
    lock = acquire(info.ca, info.port, info.port_guid, directory)
    if info.capability_mask & CAP_IS_SM:
        lock.release()
        raise PortTaken(f"another SM (OpenSM, or an smagent with another ${RUNTIME_ENV}) already runs on CA "
                        f"{info.ca} port {info.port}: its PortInfo.CapabilityMask has IsSM set; one SM per port")
    return lock
