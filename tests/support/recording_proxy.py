"""A real HTTP proxy on loopback that records every exchange it relays, for crawlers without a resolver hook.

wget (or any client with ``http_proxy``) sends its requests for ``http://shop.test:PORT/...``
here; the proxy forwards each one to the local site (127.0.0.1, the URL's port) with the
URL's Host header, and keeps what came back: the independent record of what the client
received, to check an archive the client wrote (a WARC) against.
"""
from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import NamedTuple
from urllib.parse import urlsplit


class Exchange(NamedTuple):
    url: str
    status: int
    headers: list  # [(name, value)] as the server sent them
    body: bytes


class RecordingProxy:
    """``with RecordingProxy() as proxy:`` then ``http_proxy=proxy.address``; ``proxy.exchanges`` in order."""

    def __init__(self) -> None:
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                parts = urlsplit(self.path)  # absolute form: http://host:port/path?query
                target = parts.path + (f"?{parts.query}" if parts.query else "") or "/"
                conn = http.client.HTTPConnection("127.0.0.1", parts.port or 80, timeout=30)
                try:
                    conn.request("GET", target, headers={"Host": parts.netloc, "Accept-Encoding": "identity"})
                    reply = conn.getresponse()
                    body = reply.read()
                    headers = [(k, v) for k, v in reply.getheaders()
                               if k.lower() not in ("connection", "keep-alive", "transfer-encoding", "server", "date")]
                finally:
                    conn.close()
                with proxy._lock:
                    proxy.exchanges.append(Exchange(self.path, reply.status, headers, body))
                self.send_response(reply.status)
                for name, value in headers:
                    if name.lower() != "content-length":
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address) -> None:  # a client that hung up: nothing to report
                pass

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.address = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "RecordingProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
