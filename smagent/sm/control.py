"""The daemon's local control socket: a unix stream socket in the state directory. A client
sends one line (``status``, or ``drain``/``undrain`` followed by a JSON object of arguments),
the daemon answers one JSON document and closes. A command that needs the daemon's loop (a
drain sends Sets) is answered with a `Future` by the handler: the connection waits for it
(up to `COMMAND_DEADLINE_S`) while the others are served. The daemon
never blocks on it: `ControlServer.start` serves it from a thread of its own (so that a
sweep's long computations do not keep a client waiting), answering from the status the
daemon last published at a consistent point; `serve_pending` serves it in the caller's
thread instead (the tests' fake-clock loops). Every socket is non-blocking, a connection
is served a little at each call, and one that has not finished within `CLIENT_DEADLINE_S`
is closed (idle or slow clients cost the SM nothing). Every connection waiting is
accepted at once: when `MAX_CLIENTS` are open, the one idle longest (nothing sent yet) is
closed to make room, so a status is answered whatever other clients hold (a full listen
backlog would refuse every new client with EAGAIN)."""
from __future__ import annotations

import dataclasses
import json
from concurrent.futures import Future
import os
import select
import socket
import threading
import time
from pathlib import Path

from smagent.errors import FabricFailure

SOCKET_NAME = "control.sock"
COMMANDS = ("status", "drain", "undrain")
CLIENT_DEADLINE_S = 5.0  # a client has this long to send its line and read the answer
COMMAND_DEADLINE_S = 900.0  # a drain's reroute and read-back of every table, on a large fabric
MAX_LINE = 16384  # a command line longer than this is not one of ours
MAX_CLIENTS = 64  # connections held at once; past it, the one idle longest is closed


@dataclasses.dataclass
class _Client:
    sock: socket.socket
    deadline: float
    inbuf: bytes = b""
    outbuf: bytes | None = None  # the answer once the command line is in
    pending: Future | None = None  # the answer the daemon's loop is working out


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
        self.sock.listen(socket.SOMAXCONN)
        self.sock.setblocking(False)
        self.clients: list[_Client] = []
        self.clock = time.monotonic
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    @property
    def threaded(self) -> bool:
        return self._thread is not None

    def start(self, handler) -> None:
        """Serve from a thread until `close`; ``handler(command, args) -> dict | Future`` must be safe to
        call from that thread (the daemon's returns a published snapshot)."""
        def loop() -> None:
            while not self._stop.is_set():
                want_write = [c.sock for c in self.clients if c.outbuf]
                try:
                    select.select([self.sock, *(c.sock for c in self.clients)], want_write, [], 0.1)
                except (OSError, ValueError):
                    pass  # a socket closed under us: the next round drops it
                self.serve_pending(handler)
        self._thread = threading.Thread(target=loop, name="smagent-control", daemon=True)
        self._thread.start()

    def serve_pending(self, handler) -> int:
        """Accept what waits, read and write what each connection allows without
        waiting, answer each full command line (``handler(command, args)``), close
        what is done or past its deadline. Returns how many answers were completed."""
        now = self.clock()
        while True:
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break  # e.g. out of file descriptors: the client waits in the backlog
            conn.setblocking(False)
            if len(self.clients) >= MAX_CLIENTS:
                self._evict()
            self.clients.append(_Client(conn, now + CLIENT_DEADLINE_S))
        done = 0
        for c in list(self.clients):
            finished = self._advance(c, handler)
            if finished or now >= c.deadline:
                done += finished
                self.clients.remove(c)
                c.sock.close()
        return done

    def _evict(self) -> None:
        """Close the connection idle longest (nothing sent; else the oldest) to make room."""
        idle = [c for c in self.clients if not c.inbuf and c.outbuf is None]
        c = (idle or self.clients)[0]
        self.clients.remove(c)
        c.sock.close()

    def _advance(self, c: _Client, handler) -> bool:
        """One non-blocking step of one connection; True when its answer is sent."""
        try:
            if c.outbuf is None and c.pending is None:
                chunk = c.sock.recv(MAX_LINE)
                c.inbuf += chunk
                if b"\n" not in c.inbuf and chunk and len(c.inbuf) <= MAX_LINE:
                    return False
                line = c.inbuf.split(b"\n", 1)[0].decode(errors="replace").strip()
                answer = _answer(handler, line)
                if isinstance(answer, Future):
                    c.pending, c.deadline = answer, self.clock() + COMMAND_DEADLINE_S
                else:
                    c.outbuf = (answer + "\n").encode()
            if c.pending is not None:
                if not c.pending.done():
                    return False
                c.outbuf, c.pending = (json.dumps(c.pending.result()) + "\n").encode(), None
            assert c.outbuf is not None
            sent = c.sock.send(c.outbuf)
            c.outbuf = c.outbuf[sent:]
            return not c.outbuf
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            c.deadline = -1.0  # the client went away: its problem; closed now
            return False

    def close(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(5)
            self._thread = None
        for c in self.clients:
            c.sock.close()
        self.clients = []
        self.sock.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass


def parse_line(line: str) -> tuple[str, dict]:
    """``command [JSON object]`` -> (command, arguments); ValueError naming what is wrong."""
    command, _, rest = line.partition(" ")
    if command not in COMMANDS:
        raise ValueError(f"unknown command {command[:80]!r}")
    if not rest.strip():
        return command, {}
    try:
        args = json.loads(rest)
    except ValueError:
        raise ValueError(f"{command}: the arguments are not JSON") from None
    if not isinstance(args, dict):
        raise ValueError(f"{command}: the arguments must be a JSON object")
    return command, args


def _answer(handler, line: str) -> str | Future:
    try:
        command, args = parse_line(line)
    except ValueError as e:
        return json.dumps({"error": str(e), "exit": 2})
    try:
        out = handler(command, args)
        return out if isinstance(out, Future) else json.dumps(out)
    except Exception as e:  # noqa: BLE001 - a defect must not kill the thread that serves the socket
        return json.dumps({"error": f"internal error: {type(e).__name__}: {e}", "exit": 70})


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


def listening(path) -> bool:
    """Whether a daemon accepts connections at ``path`` (a socket left by a killed one does not)."""
    return Path(path).exists() and _listening(path)


def query(path, command: str = "status", timeout: float = 5.0, args: dict | None = None) -> dict:
    """Ask the daemon listening at ``path``; raises ControlError when none answers."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    line = command if args is None else f"{command} {json.dumps(args)}"
    try:
        s.connect(str(path))
        s.sendall(f"{line}\n".encode())
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
