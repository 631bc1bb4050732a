"""A real local HTTP server for crawl tests, dispatching on the Host header.

Host names under the reserved ``.test`` TLD (RFC 2606) are resolved to
127.0.0.1 by :class:`LoopbackResolver`, installed on the Twisted reactor by the
crawl fixtures, so tests can use realistic multi-host sites
(``www.shop.test``, ``eu.shop.test``) on one loopback port.
"""
from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


@dataclass
class Page:
    body: bytes | str
    status: int = 200
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)

    def encoded(self) -> bytes:
        return self.body.encode("utf-8") if isinstance(self.body, str) else self.body


# (host without port, path with query) -> Page or None (404)
Router = Callable[[str, str], "Page | None"]


class LocalSite:
    """Serve ``router`` on 127.0.0.1 on a free port; count every request by (host, path)."""

    def __init__(self, router: Router | dict[tuple[str, str], Page], *, record_headers: bool = False):
        self.router: Router = (lambda host, path: router.get((host, path))) if isinstance(router, dict) else router
        self.hits: Counter[tuple[str, str]] = Counter()
        # with record_headers: every request as received, (host, path, headers), for tests about
        # what a request carried (off by default: long crawls would keep every header)
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.record_headers = record_headers
        self.lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                host = (self.headers.get("Host") or "").rsplit(":", 1)[0].lower()
                with site.lock:
                    site.hits[(host, self.path)] += 1
                    if site.record_headers:
                        site.requests.append((host, self.path, dict(self.headers.items())))
                page = site.router(host, self.path)
                if page is None:
                    page = Page("<html><body><h1>Not found</h1></body></html>", status=404)
                body = page.encoded()
                self.send_response(page.status)
                self.send_header("Content-Type", page.content_type)
                self.send_header("Content-Length", str(len(body)))
                for name, value in page.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:  # keep test output quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, host: str, path: str = "/") -> str:
        return f"http://{host}:{self.port}{path}"

    def __enter__(self) -> "LocalSite":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def fetched(self) -> list[tuple[str, str]]:
        """Every (host, path) fetched, with repeats."""
        with self.lock:
            return list(self.hits.elements())


def install_loopback_resolver() -> None:
    """Resolve every ``*.test`` name to 127.0.0.1 on the running reactor (idempotent)."""
    from twisted.internet import reactor
    from twisted.internet.interfaces import IResolverSimple
    from zope.interface import implementer

    current = reactor.resolver
    if getattr(current, "_dedup_loopback", False):
        return

    @implementer(IResolverSimple)
    class LoopbackResolver:
        _dedup_loopback = True

        def getHostByName(self, name, timeout=()):  # noqa: N802 - Twisted's interface
            from twisted.internet import defer

            if name == "localhost" or name.endswith(".test"):
                return defer.succeed("127.0.0.1")
            return current.getHostByName(name, timeout)

    reactor.installResolver(LoopbackResolver())
