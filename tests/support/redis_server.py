"""A real redis-server on loopback, started and stopped by the tests.

Tests that involve Redis talk to this server, never to a mock. Under CI=true a
missing redis-server binary is an error, never a silent skip.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PortTaken(RuntimeError):
    """redis-server could not bind its port: another process holds it."""


class RedisServer:
    """One redis-server process; ``stop()`` / ``start()`` simulate an outage on the same port."""

    def __init__(self, port: int | None = None, *, password: str | None = None,
                 extra_args: tuple[str, ...] = ()):
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server not found: install Debian's 'redis-server' package")
        self.binary = binary
        #: a port of our choosing may be taken by another process between free_port() and the server's bind
        #: (tests run in parallel workers, other suites on the machine): the first start then takes another
        self._port_given = port is not None
        self.port = port or free_port()
        self.password = password
        self.extra_args = extra_args
        self.dir = Path(tempfile.mkdtemp(prefix="dedup-redis-"))
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """The server's URL, the password percent-escaped (as a password with '/', '#', '?' or '@' must be)."""
        from urllib.parse import quote

        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> "RedisServer":
        for _ in range(4):
            try:
                return self._start()
            except PortTaken:
                if self._port_given or self._started_once:  # a restart keeps its port: the clients' URL
                    raise
                self.port = free_port()
        return self._start()

    _started_once = False

    def _start(self) -> "RedisServer":
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", str(self.dir),
                "--daemonize", "no", "--loglevel", "warning", *self.extra_args]
        if self.password:
            args += ["--requirepass", self.password]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                error = self.proc.stderr.read().decode(errors="replace")
                # (redis-server says why on stdout, not kept: the port is asked instead)
                raise (RuntimeError if _port_pair_free(self.port, bus=False) else PortTaken)(
                    f"redis-server exited: {error}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                    sock.sendall(b"PING\r\n" if not self.password else
                                 f"AUTH {self.password}\r\nPING\r\n".encode())
                    if b"PONG" in sock.recv(100) or self.password:
                        self._started_once = True
                        return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start within 10 s")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def client(self):
        import redis

        return redis.Redis.from_url(self.url)


def _port_pair_free(port: int, bus: bool = True) -> bool:
    for p in (port, port + 10000) if bus else (port,):  # a cluster node also listens on its bus port, +10000
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", p))
            except OSError:
                return False
    return True


def cluster_ports(n: int) -> list[int]:
    import random

    ports: list[int] = []
    while len(ports) < n:
        port = random.randint(20000, 29999)
        if port not in ports and _port_pair_free(port):
            ports.append(port)
    return ports


def _cluster_node(attempts: int = 4) -> RedisServer:
    """One cluster-enabled redis-server on a free port pair (another one, should a parallel process take it)."""
    for attempt in range(attempts):
        try:
            return RedisServer(cluster_ports(1)[0], extra_args=(
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", "5000")).start()
        except PortTaken:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def start_cluster(nodes: int = 3) -> list[RedisServer]:
    """A real Redis Cluster of ``nodes`` primaries on loopback (``redis-cli --cluster create``), once it is ok."""
    servers: list[RedisServer] = []
    try:
        for _ in range(nodes):
            servers.append(_cluster_node())
        subprocess.run(["redis-cli", "--cluster", "create", *[f"127.0.0.1:{n.port}" for n in servers],
                        "--cluster-replicas", "0", "--cluster-yes"],
                       check=True, capture_output=True, timeout=60)
        deadline = time.monotonic() + 30
        while True:
            states = [subprocess.run(["redis-cli", "-p", str(n.port), "cluster", "info"], capture_output=True,
                                     text=True, timeout=10).stdout for n in servers]
            if all("cluster_state:ok" in s for s in states):
                return servers
            if time.monotonic() > deadline:
                raise RuntimeError(f"cluster did not become ok: {states}")
            time.sleep(0.2)
    except BaseException:
        for server in servers:
            server.stop()
        raise


def redis_required() -> bool:
    return os.environ.get("CI", "").lower() == "true" or bool(os.environ.get("DEDUP_REQUIRE_REDIS"))
