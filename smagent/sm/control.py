"""The daemon's local control socket: a unix stream socket in the state directory. A client
sends one line (``status``), the daemon answers one JSON document and closes. The daemon
never blocks on it: `ControlServer.serve_pending` is called between fabric events."""
from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from smagent.errors import FabricFailure

SOCKET_NAME = "control.sock"
COMMANDS = ("status",)


class ControlError(FabricFailure):
    """No daemon answers at the socket, another one holds it, or it answered nonsense."""


def socket_path(state_dir) -> Path:
    return Path(state_dir) / SOCKET_NAME


class ControlServer:
    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            # a live daemon accepts the connection (even mid-sweep, when it answers
            # later); a socket left by a killed one refuses it and is replaced
            if _listening(self.path):
                raise ControlError(f"another smagent daemon is running (it listens at {self.path})")
            self.path.unlink()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.bind(str(self.path))
        except OSError as e:  # e.g. a path longer than a unix socket allows (108 bytes)
            self.sock.close()
            raise ControlError(f"cannot listen at {self.path}: {e}") from None
        os.chmod(self.path, 0o600)  # the status is for the daemon's own user
        self.sock.listen(8)
        self.sock.setblocking(False)

    def serve_pending(self, handler) -> int:
        """Answer every connection already waiting; ``handler(command) -> dict``."""
        n = 0
        while True:
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return n
            n += 1
            with conn:
                conn.settimeout(1.0)
                try:
                    line = conn.makefile("r").readline().strip()
                    reply = handler(line) if line in COMMANDS else {"error": f"unknown command {line!r}"}
                    conn.sendall((json.dumps(reply) + "\n").encode())
                except OSError:
                    continue  # the client went away: its problem

    def close(self) -> None:
        self.sock.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass


def _listening(path) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1.0)
    try:
        s.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        s.close()


def query(path, command: str = "status", timeout: float = 5.0) -> dict:
    """Ask the daemon listening at ``path``; raises ControlError when none answers."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(str(path))
        s.sendall(f"{command}\n".encode())
        data = s.makefile("r").readline()
    except FileNotFoundError:
        raise ControlError(f"no smagent daemon: {path} does not exist") from None
    except (ConnectionRefusedError, socket.timeout, OSError) as e:
        raise ControlError(f"no smagent daemon answers at {path}: {e}") from None
    finally:
        s.close()
    try:
        return json.loads(data)
    except ValueError:
        raise ControlError(f"the daemon at {path} answered something that is not JSON: {data[:80]!r}") from None
