"""`smagent run --metrics ADDR:PORT`: the Prometheus endpoint. A small HTTP server in its
own thread answers GET /metrics with text the daemon's thread finished before (its
published status and the last counter sweep's port metrics, `smagent.perf.metrics`), so a
scrape never waits for a sweep and never reads a half-updated structure."""
from __future__ import annotations

import http.server
import socket
import threading
from typing import Callable

from smagent.errors import BadInput

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def parse_listen(text: str) -> tuple[str, int]:
    """"ADDR:PORT" ("127.0.0.1:9683", "[::1]:9683", ":9683" for every address) -> (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise BadInput(f"--metrics {text!r}: expected ADDR:PORT with a port 1-65535 (e.g. 127.0.0.1:9683)")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host or "0.0.0.0", int(port)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class MetricsServer:
    def __init__(self, listen: str, render: Callable[[], str]):
        host, port = parse_listen(listen)
        render_ = render

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (the http.server spelling)
                if self.path.split("?")[0] not in ("/metrics", "/"):
                    self.send_error(404, "only /metrics here")
                    return
                body = render_().encode()
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # scrapes are not events: no log line each
                pass

        try:
            self.httpd = (_Server6 if ":" in host else _Server)((host, port), Handler)
        except OSError as e:
            raise BadInput(f"--metrics {listen}: cannot listen there: {e.strerror or e}") from None
        self.address = self.httpd.server_address
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="smagent-metrics", daemon=True)
        self._thread.start()

    def close(self) -> None:
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join(5)
        self.httpd.server_close()


__all__ = ["MetricsServer", "parse_listen", "CONTENT_TYPE"]
