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
            # headers and body go out in separate writes: without TCP_NODELAY, Nagle's
            # algorithm and the client's delayed ACK add ~40 ms to every response
            disable_nagle_algorithm = True

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


class SiteProcess:
    """The example site served by a child process (``python -m demosite serve --port 0``).

    For crawls whose CPU time is measured (the demo, the benchmarks): a server
    thread inside the crawling process would share its interpreter lock and add
    its own rendering time to the crawl's. The child writes its port on its first
    output line and exits when its stdin closes, so it never outlives this object.
    """

    def __init__(self, port: int = 0, *, seed: int = SEED):
        import subprocess
        import sys
        from pathlib import Path

        self._proc = subprocess.Popen(
            [sys.executable, "-m", "demosite", "serve", "--port", str(port), "--seed", str(seed), "--watch-stdin"],
            cwd=str(Path(__file__).resolve().parent.parent), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True,
        )
        line = self._proc.stdout.readline()
        if not line.startswith("serving"):
            self.stop()
            raise RuntimeError(f"the example site did not start: {line!r}")
        self.port = int(line.split("127.0.0.1:", 1)[1].split(";", 1)[0])
        self.pid = self._proc.pid

    def url(self, host: str, target: str = "/") -> str:
        return f"http://{host}:{self.port}{target}"

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=10)
            except Exception:  # noqa: BLE001 - a stuck child must not outlive us
                self._proc.kill()
                self._proc.wait()
        if self._proc.stdout:
            self._proc.stdout.close()

    def __enter__(self) -> "SiteProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
