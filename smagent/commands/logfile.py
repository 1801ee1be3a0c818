"""The running SM's log file (``smagent run --log-file``) on a full disk."""
from __future__ import annotations

import logging

import click


class LogFile(logging.FileHandler):
    """The running SM's ``--log-file``: appended to (never replaced). A write that fails
    (a full disk) costs one line on stderr, not a traceback per log record; the lines
    wait in the buffer and are written once there is space."""

    failing = False

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self.stream is None:
                self.stream = self._open()
            self.stream.write(self.format(record) + self.terminator)
            self.stream.flush()
        except RecursionError:
            raise
        except Exception as e:  # noqa: BLE001 - what logging.Handler.emit tolerates too
            if not self.failing:
                why = e.strerror if isinstance(e, OSError) and e.strerror else e
                click.echo(f"smagent: log file {self.baseFilename}: {why}; log lines wait until it can be "
                           f"written", err=True)
            self.failing = True
            return
        self.failing = False

    def close(self) -> None:
        try:
            super().close()
        except OSError:  # the last lines could not be flushed: said on stderr already
            pass
