"""A local stand-in for the Zyte API HTTP endpoint, for crawls through scrapy-zyte-api.

scrapy-zyte-api's download handler POSTs a JSON request (``{"url": ..., "httpResponseBody":
true, ...}``) to ``ZYTE_API_URL + "extract"``; this server answers every such request with a
small HTML page in the documented response shape (``url``, ``statusCode``, base64
``httpResponseBody``, ``httpResponseHeaders``) and records each request body, so a test sees
exactly which (URL, parameters) the crawl sent. No network, no account.
"""
from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ZyteApiStub:
    """Serve on 127.0.0.1 on a free port; ``api_url`` is the value for ``ZYTE_API_URL``."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                query = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                with stub.lock:
                    stub.requests.append(query)
                html = f"<html><body><h1>{query['url']}</h1></body></html>".encode()
                body = json.dumps({
                    "url": query["url"],
                    "statusCode": 200,
                    "httpResponseBody": base64.b64encode(html).decode(),
                    "httpResponseHeaders": [{"name": "Content-Type", "value": "text/html; charset=utf-8"}],
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:  # keep test output quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.api_url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "ZyteApiStub":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
