"""A real HTTP server for the example site: loopback only, one port, dispatching on the Host header."""
from __future__ import annotations

import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .app import DemoSite
from .catalog import SEED


class SiteServer:
    """Serve :class:`DemoSite` on ``127.0.0.1:port`` (0: a free port) in a background thread.

    Every request is counted by ``(host, target)`` in :attr:`hits`, so tests and the
    demo can tell how many fetches reached the site. Use as a context manager, or
    call :meth:`start` / :meth:`stop`.
    """

    def __init__(self, port: int = 0, *, seed: int = SEED, dynamic: bool = True, host: str = "127.0.0.1"):
        self.hits: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "DemoSite/1.0"

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                host = (self.headers.get("Host") or "").rsplit(":", 1)[0].lower()
                with server._lock:
                    server.hits[(host, self.path)] += 1
                response = server.site.handle(host, self.path)
                self.send_response(response.status)
                self.send_header("Content-Type", response.content_type)
                self.send_header("Content-Length", str(len(response.body)))
                for name, value in response.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(response.body)

            def log_message(self, *args) -> None:  # the crawl log is enough
                pass

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.port: int = self.httpd.server_address[1]
        self.site = DemoSite(self.port, seed=seed, dynamic=dynamic)
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="demosite", daemon=True)

    def url(self, host: str, target: str = "/") -> str:
        return self.site.url(host, target)

    def start(self) -> "SiteServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "SiteServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def fetches(self) -> int:
        with self._lock:
            return sum(self.hits.values())
