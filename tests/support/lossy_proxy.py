"""A real TCP proxy in front of a server that can lose a reply after the server has acted on the request.

Why: the fault that matters for a check-and-insert ("was this key new?") is a
command that reached Redis and ran, whose reply never came back (a network
drop, a failover). Killing the server cannot produce it (the command is then
not run); this proxy can: :meth:`drop_next_reply` makes it close the client's
connection when the next bytes from the server arrive, instead of forwarding
them.
"""
from __future__ import annotations

import socket
import threading


class LossyProxy:
    def __init__(self, target_host: str, target_port: int):
        self.target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._drops = 0
        self.dropped = 0
        self._lock = threading.Lock()
        self._stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def drop_next_reply(self) -> None:
        """Close the connection that receives the next reply, without forwarding it."""
        with self._lock:
            self._drops += 1

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, replies: bool) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if replies:
                    with self._lock:
                        drop = self._drops > 0
                        if drop:
                            self._drops -= 1
                            self.dropped += 1
                    if drop:
                        break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()

    def close(self) -> None:
        self._stopped = True
        self._listener.close()
