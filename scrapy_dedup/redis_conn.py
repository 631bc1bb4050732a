"""Redis connections shared by the seen sets and the content index (no Scrapy imports).

Every log line and exception message that names a Redis server goes through
:func:`mask_url`, so a password in ``DEDUP_REDIS_URL`` never reaches a log.
"""
from __future__ import annotations

import importlib
from typing import Any
from urllib.parse import urlsplit, urlunsplit

SUPPORTED_SCHEMES = ("redis", "rediss", "unix")


def mask_url(url: str) -> str:
    """Return ``url`` with any password replaced by ``***``.

    ``redis://user:secret@host:6379/0`` -> ``redis://user:***@host:6379/0``;
    a ``password=`` query parameter is masked too.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable redis url>"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user, sep, _password = userinfo.partition(":")
        netloc = f"{user}:***@{hostport}" if sep else f"***@{hostport}"
        # A bare "secret@host" is a password in redis-py's parsing.
        if not sep and user:
            netloc = f"***@{hostport}"
    query = parts.query
    if "password=" in query:
        query = "&".join(
            "password=***" if q.startswith("password=") else q for q in query.split("&")
        )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def validate_url(url: str, setting: str = "DEDUP_REDIS_URL") -> str:
    """Check that ``url`` is a Redis URL redis-py can open; raise ``ValueError`` naming ``setting``."""
    if not isinstance(url, str) or not url:
        raise ValueError(f"{setting} must be a redis://, rediss:// or unix:// URL, got {url!r}")
    scheme = urlsplit(url).scheme.lower()
    if scheme not in SUPPORTED_SCHEMES:
        raise ValueError(
            f"{setting} must start with redis://, rediss:// or unix://, got {mask_url(url)!r}"
        )
    return url


def _load_class(path_or_class: Any) -> Any:
    if isinstance(path_or_class, str):
        module, _, name = path_or_class.rpartition(".")
        return getattr(importlib.import_module(module), name)
    return path_or_class


#: socket timeouts of a client without a time bound (``connect(timeout=None)``)
SOCKET_TIMEOUT = 30.0
SOCKET_CONNECT_TIMEOUT = 10.0


def connect(url: str, params: dict[str, Any] | None = None, *, timeout: float | None = None) -> Any:
    """Open a client for ``url``.

    ``params`` are passed to the client's ``from_url``; the special key
    ``redis_cls`` (a class or dotted path, e.g. ``"redis.cluster.RedisCluster"``)
    chooses the client class, as scrapy-redis's ``REDIS_PARAMS`` does.

    ``timeout`` bounds one call: ``socket_timeout`` and ``socket_connect_timeout``
    default to at most that many seconds (30 and 10 otherwise). Unless ``params``
    say otherwise, the client makes one attempt per call: the caller's policy
    (:mod:`scrapy_dedup.redis_policy`) retries. Why: redis-py 6+ retries a failed
    call itself (10 times in redis-py 8, with backoff), so against a hung server one
    call blocked for 11 socket timeouts, and no outage budget could hold.
    Values set in ``params`` or in the URL's query always win.
    """
    import redis  # imported here so that importing the core stays cheap
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    params = dict(params or {})
    cls = _load_class(params.pop("redis_cls", redis.Redis))
    bound = float("inf") if timeout is None else max(float(timeout), 0.001)
    params.setdefault("socket_timeout", min(SOCKET_TIMEOUT, bound))
    params.setdefault("socket_connect_timeout", min(SOCKET_CONNECT_TIMEOUT, bound))
    params.setdefault("health_check_interval", 30)
    if not {"retry", "retry_on_timeout", "retry_on_error"} & params.keys():
        params["retry"] = Retry(NoBackoff(), 0)
    validate_url(url)
    return cls.from_url(url, **params)


# --- a fast lane for the per-request command ----------------------------------------------

def bulk(value: bytes) -> bytes:
    """One RESP bulk string."""
    return b"$%d\r\n%s\r\n" % (len(value), value)


def command_prefix(*fixed: bytes | str | int, trailing: int = 1) -> bytes:
    """The RESP encoding of a command's first arguments, ``trailing`` more bulk strings to follow.

    A per-request command such as ``SADD key <fingerprint>`` only changes in its
    last argument, so its head is encoded once: ``prefix + bulk(fingerprint)``.
    """
    parts = [b"*%d\r\n" % (len(fixed) + trailing)]
    for arg in fixed:
        if isinstance(arg, int):
            arg = str(arg)
        parts.append(bulk(arg.encode() if isinstance(arg, str) else arg))
    return b"".join(parts)


class PinnedConnection:
    """One connection taken from a ``redis.Redis`` client's pool and kept, for pre-encoded commands.

    Why: a dupefilter sends one command per new request and waits for the
    answer. redis-py spends 40-100 µs of Python per command (pool checkout,
    argument encoding, its retry wrapper, response callbacks, observability
    hooks) where the loopback round trip itself costs 10-20 µs; most of a
    Redis dupefilter's time went there (``benchmarks/bench_seen.py``). This
    sends bytes encoded once (:func:`command_prefix`) on one connection and
    reads the reply with the connection's own parser; everything else (AUTH,
    TLS, unix sockets, ``SELECT``, health checks, reconnecting after an error)
    is still the connection's own code.

    A connection the server has closed meanwhile (a restart, ``CLIENT KILL``,
    an idle ``timeout``) is noticed *before* the command is sent (the socket
    reads as closed) and replaced, so such a command is never half-done. What
    it does not do is retry after sending: a command may have run even though
    its reply was lost, so the error is raised as redis-py's exception (the
    connection is dropped, the next call reconnects) and the caller's policy
    (:mod:`scrapy_dedup.redis_policy`) decides. Clients without
    a plain connection pool (``RedisCluster``) get ``None`` from :meth:`of`
    and keep using their commands. Calls are serialized by a lock, so sharing a
    store between threads is safe, if not parallel.
    """

    def __init__(self, pool: Any):
        import threading

        from redis.exceptions import ConnectionError as RedisConnectionError

        self._closed_error = RedisConnectionError
        self.pool = pool
        self._conn: Any = None
        self._pid = 0
        self._lock = threading.Lock()

    @classmethod
    def of(cls, client: Any) -> "PinnedConnection | None":
        """A pinned connection for ``client``, or ``None`` where it has no plain connection pool."""
        pool = getattr(client, "connection_pool", None)
        if pool is None or not hasattr(pool, "get_connection") or not hasattr(pool, "release"):
            return None
        return cls(pool)

    def _connection(self) -> Any:
        import os

        if self._conn is None or self._pid != os.getpid():  # after a fork, the parent's socket is not ours
            self._conn = None
            try:
                conn = self.pool.get_connection()
            except TypeError:  # redis-py < 5.3 wants a command name
                conn = self.pool.get_connection("_")
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    def _ready(self) -> Any:
        """The connection, replaced first if the server closed it (nothing is due, so readable means closed)."""
        conn = self._connection()
        try:
            stale = conn.can_read(timeout=0)
        except self._closed_error:
            stale = True
        if stale:
            conn.disconnect()  # send_packed_command connects again (AUTH, SELECT, TLS as configured)
        return conn

    def execute(self, command: bytes) -> Any:
        """Send one pre-encoded command and return its reply (errors raised as redis-py's exceptions)."""
        with self._lock:
            conn = self._ready()
            conn.send_packed_command([command])
            return conn.read_response()

    def execute_many(self, commands: list[bytes]) -> list[Any]:
        """Send pre-encoded commands in one write and return their replies, in order (a pipeline).

        Any error, even one command's error reply, drops the connection: replies
        still unread would otherwise answer the next call.
        """
        with self._lock:
            conn = self._ready()
            conn.send_packed_command([b"".join(commands)])
            try:
                return [conn.read_response() for _ in commands]
            except BaseException:
                conn.disconnect()
                raise

    def release(self) -> None:
        """Give the connection back to its pool (the next :meth:`execute` takes one again)."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                self.pool.release(conn)
