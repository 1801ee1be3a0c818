"""Repeated log lines, rate-limited and summarised: a trap flood (10,000 Trap 128s) must
not become 10,000 lines. `FloodFilter` sits on the daemon's log handler: lines are "alike"
when they come from the same format string at the same level (a trap's issuer LID or a
port number does not make a new kind of line); the first `BURST` of a kind in a `WINDOW_S`
window pass, the rest are counted, and when the window ends one line says how many were
left out ("N more like this in the last T s: ..."). `flush` (called from the daemon's loop)
writes the summaries of windows that have ended even when the flood stopped."""
from __future__ import annotations

import dataclasses
import logging
import threading
import time

BURST = 20  # lines of one kind written per window before the rest are counted
WINDOW_S = 10.0


@dataclasses.dataclass
class _Kind:
    start: float
    passed: int = 0
    held: int = 0  # left out since the window started
    sample: str = ""  # the last line left out, as it would have read


class FloodFilter(logging.Filter):
    def __init__(self, burst: int = BURST, window: float = WINDOW_S, clock=time.monotonic):
        super().__init__()
        self.burst, self.window, self.clock = burst, window, clock
        self.kinds: dict[tuple, _Kind] = {}
        self.suppressed = 0  # lines left out in all
        self._lock = threading.Lock()  # records come from the loop and the serving threads
        self._own = threading.local()  # set while this thread writes a summary: it passes

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(self._own, "on", False):
            return True
        key = (record.name, record.levelno, record.msg)
        now = self.clock()
        due = []
        with self._lock:
            k = self.kinds.get(key)
            if k is not None and now - k.start >= self.window:
                due.append((key, k))
                k = None
            if k is None:
                k = self.kinds[key] = _Kind(now)
            if k.passed < self.burst:
                k.passed += 1
                allow = True
            else:
                k.held += 1
                self.suppressed += 1
                k.sample = record.getMessage()
                allow = False
        self._summarise(due)
        return allow

    def flush(self) -> int:
        """Summaries of the windows that have ended; returns how many lines were written."""
        now = self.clock()
        with self._lock:
            due = [(key, k) for key, k in self.kinds.items() if now - k.start >= self.window]
            for key, _k in due:
                del self.kinds[key]
        return self._summarise(due)

    def _summarise(self, due) -> int:
        lines = 0
        for (name, level, _msg), k in due:
            if not k.held:
                continue
            self._own.on = True
            try:
                logging.getLogger(name).log(level, "%d more like this in the last %.0f s: %s", k.held,
                                            self.window, k.sample)
            finally:
                self._own.on = False
            lines += 1
        return lines
