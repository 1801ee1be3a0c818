"""Requests served while the daemon's thread computes.

A sweep of a large fabric spends long stretches in pure computation (routing, the port and
link-table plans, the plan check) without touching the transport, so nothing would read
the requests that arrive meanwhile: an SA PathRecord Get, another SM's SMInfo Get. Inside
`BusyServer.serving()` a second thread looks every `PERIOD_S`, whenever the daemon's thread
is not using the transport, and hands what came to the same handlers (`on_request`,
`answer_at_once`) the loop would (`Transport.serve_queued`; a late answer to an SMP of the
sweep counts as late, as `execute` would count it). The SA answers from the snapshot it was last given, never
from the sweep in progress (the daemon publishes one only after the sweep returns).

One thread at a time uses the transport (a `UmadPort` reuses one buffer each way): the
transport owns a re-entrant lock that each of its entry points (`execute`, `poll`,
`receive`, `serve_queued`: `transport.base.one_thread`) holds; the serving thread only ever tries it, so the
daemon's thread never waits for more than one look. Python hands the GIL to the serving
thread at least every switch interval of a computation (`SWITCH_INTERVAL_S` while
serving), so an answer waits about `PERIOD_S` plus that, and what the OS scheduler adds.
A garbage collection holds the GIL throughout, so meanwhile the collector's young passes
are kept small (`SERVING_GC_THRESHOLD`) and its full pass, over the whole heap, waits
until the body is done (on a 1,024-host fabric the daemon's passes took 25-37 ms each).
Who owns what: every handler runs inside a transport entry point, so under the transport's
lock, whichever thread it runs on; handlers therefore never run at once, and what they change
(events, `Counters`, the SA's own state) needs no lock of its own among them. The daemon's
thread owns the sweep's state; the handlers touch nothing the sweep uses (the sweep options'
alias GUIDs and groups are replaced whole, never changed in place), and the loop reads
what they changed after the sweep. The tuning pays (bench/serving_tuning.py: p95 answer
16-20 ms tuned vs 59-80 ms with Python's defaults) and is restored on exit, exceptions too."""
from __future__ import annotations

import contextlib
import gc
import logging
import sys
import threading

from smagent.transport.base import Transport

log = logging.getLogger("smagent.sm")

PERIOD_S = 0.005  # how often the serving thread looks for requests while the daemon computes
SWITCH_INTERVAL_S = 0.001  # meanwhile, a computation hands the GIL over this soon (Python's default: 5 ms)
# meanwhile, the collector's thresholds: young passes over at most ~1,000 and ~10,000
# objects (about 1 ms), and no full pass (a threshold never reached)
SERVING_GC_THRESHOLD = (1000, 10, 1 << 30)


class BusyServer:
    def __init__(self, transport: Transport, period_s: float = PERIOD_S):
        self.t, self.period_s = transport, period_s
        self.lock = transport.lock  # the transport's own (`transport.base.one_thread`)

    @contextlib.contextmanager
    def serving(self):
        """Requests are served from a second thread while the body runs; the thread has
        ended (and so handles nothing) once this has returned."""
        done = threading.Event()
        thread = threading.Thread(target=self._run, args=(done,), name="smagent-serve", daemon=True)
        interval, threshold = sys.getswitchinterval(), gc.get_threshold()
        sys.setswitchinterval(min(interval, SWITCH_INTERVAL_S))
        gc.set_threshold(*SERVING_GC_THRESHOLD)
        thread.start()
        try:
            yield
        finally:
            sys.setswitchinterval(interval)
            gc.set_threshold(*threshold)
            done.set()
            thread.join()  # at most one period and one look

    def _run(self, done: threading.Event) -> None:
        while not done.wait(self.period_s):
            if not self.lock.acquire(blocking=False):
                continue  # the daemon's thread is using the transport: it serves as it goes
            try:
                if not done.is_set():
                    self.t.serve_queued()
            except Exception as e:  # noqa: BLE001 - a defect must not end the serving for good
                log.error("serving requests during a sweep: %s: %s", type(e).__name__, e)
            finally:
                self.lock.release()
