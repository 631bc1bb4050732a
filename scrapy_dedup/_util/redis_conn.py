"""Redis connections shared by the seen sets and the content index (no Scrapy imports).

Every log line and exception message that names a Redis server goes through
:func:`mask_url`, so a password in ``DEDUP_REDIS_URL`` never reaches a log; texts of
redis-py's exceptions go through :func:`scrapy_dedup._util.redis_policy.describe`.
"""
from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from scrapy_dedup._util.redis_access import certificate_checks_off

logger = logging.getLogger(__name__)

SUPPORTED_SCHEMES = ("redis", "rediss", "unix")

#: what may stand before the userinfo: leading blanks, a scheme (or a typo of one: ``redis//``,
#: ``redis:/``, ``redis:``), and any slashes
_PREFIX = re.compile(r"[\x00-\x20]*(?:[A-Za-z][A-Za-z0-9+.\-]*(?=:|//))?:?/*")
#: ``password=`` / ``ssl_password=`` query values, up to the next ``&name=`` (a raw ``&`` may be in the value)
QUERY_SECRET = re.compile(r"(?i)(?<![A-Za-z0-9_])((?:ssl_)?password=).*?(?=&[A-Za-z_][A-Za-z0-9_]*=|\Z)", re.S)
#: a user name that is shown (not a secret) when the URL parses cleanly
_CLEAN_USER = re.compile(r"[^/?#@\[\]\s]+")


def userinfo_span(url: str) -> tuple[int, int] | None:
    """``(start, end)`` of the part of ``url`` that can be read as userinfo, or None if there is no ``@``.

    Why not ``urlsplit``: a password with an unescaped ``/``, ``?`` or ``#`` ends
    the netloc early, so ``urlsplit`` finds no password (and redis-py reads part
    of it as the host or the port). Everything from after ``scheme://`` (or the
    scheme's colon, or ``//``, when the URL has a typo) up to the *last* ``@`` of
    the whole string is taken as userinfo: it can only over-mask.
    """
    at = url.rfind("@")
    if at < 0:
        return None
    head = _PREFIX.match(url, 0, at)
    return (head.end() if head else 0), at


def mask_url(url: Any) -> str:
    """``url`` with whatever can be read as a password replaced by ``***``; never raises.

    ``redis://user:secret@host:6379/0`` -> ``redis://user:***@host:6379/0``;
    ``redis://secret@host`` -> ``redis://***@host`` (redis-py sends it as a user name,
    but it is often meant as a password); a malformed URL has its whole userinfo
    masked: ``redis://:pa/ss#wo?rd@host`` -> ``redis://:***@host``,
    ``redis//user:secret@host`` -> ``redis//***@host``; ``password=`` and
    ``ssl_password=`` query values are masked too. The user name is kept only where
    the URL parses cleanly (it is no secret, and it helps to see it).
    """
    try:
        if isinstance(url, (bytes, bytearray)):
            url = bytes(url).decode("utf-8", "replace")
        if not isinstance(url, str):
            return f"<{type(url).__name__}, not shown>"
        # query secrets first: an '@' in a "password=" value must not be taken for the end of a userinfo
        masked = QUERY_SECRET.sub(r"\1***", url)
        span = userinfo_span(masked)
        if span is None:
            return masked
        start, at = span
        userinfo = masked[start:at]
        user, sep, _ = userinfo.partition(":")
        # a bare "secret@host" may be meant as a password; a malformed URL's "user" may be part of one
        shown = f"{user}:***" if sep and shows_user(masked, userinfo) else "***"
        return masked[:start] + shown + masked[at:]
    except Exception:  # pragma: no cover - a last resort: a log line must never fail
        scheme = re.match(r"[A-Za-z][A-Za-z0-9+.\-]*(?=:)", url) if isinstance(url, str) else None
        return f"{scheme.group(0)}://***" if scheme else "***"


def shows_user(url: str, userinfo: str) -> bool:
    """True if the user name in ``userinfo`` (``user:password``) may be shown: it is empty, or
    ``urlsplit`` (so redis-py) reads the same userinfo and it holds no delimiter."""
    user = userinfo.partition(":")[0]
    if not user:
        return True
    if not _CLEAN_USER.fullmatch(user):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return bool(parts.scheme) and parts.netloc.rpartition("@")[0] == userinfo


def validate_url(url: Any, setting: str = "DEDUP_REDIS_URL") -> str:
    """Check that ``url`` is a Redis URL redis-py reads as written; raise ``ValueError`` naming ``setting``.

    Every message shows the URL masked (:func:`mask_url`). Refused as well as a
    wrong scheme: an ``@`` after the host part (a password with an unescaped
    ``/``, ``?`` or ``#``, which redis-py would cut into a host, a port or a
    database, and connect somewhere with a piece of the password), control
    characters (``urllib`` silently drops tabs and newlines, so the password sent
    would not be the one written), a ``#`` (a Redis URL has no fragment: what
    follows would be dropped), a port that is not a number, and anything
    ``urlsplit`` refuses.
    """
    if not isinstance(url, str) or not url:
        got = "an empty string" if url == "" else f"a {type(url).__name__}"
        raise ValueError(f"{setting} must be a redis://, rediss:// or unix:// URL, got {got}")
    shown = repr(mask_url(url))
    if not url.startswith(tuple(f"{scheme}://" for scheme in SUPPORTED_SCHEMES)):
        typo = re.match(r"\s*(rediss?|unix)\b", url, re.IGNORECASE)
        hint = " (the scheme is written in lower case and followed by '://')" if typo else ""
        raise ValueError(f"{setting} must start with redis://, rediss:// or unix://, got {shown}{hint}")
    if re.search(r"[\x00-\x1f\x7f]", url):
        raise ValueError(f"{setting} contains a control character (tab, newline, ...): {shown}")
    rest = url.split("://", 1)[1]
    netloc_end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    if "@" in rest[netloc_end:]:
        raise ValueError(
            f"{setting} has an '@' after the host part ({shown}): a password or user name containing "
            "'/', '?', '#' or '@' must be percent-escaped ('/' as %2F, '?' as %3F, '#' as %23, '@' as %40, "
            "e.g. with urllib.parse.quote(password, safe='')), and so must an '@' in the path or a query value")
    if "#" in url:  # what follows it would be dropped, a piece of the password with it
        raise ValueError(f"{setting} has a '#' ({shown}): a Redis URL has no fragment, so a '#' in a password "
                         "or a query value must be percent-escaped as %23")
    try:
        parts = urlsplit(url)
        if parts.scheme != "unix":
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:  # its message would show the netloc, password included
        raise ValueError(f"{setting} is not a valid Redis URL (host or port unreadable): {shown}") from None
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
    (:mod:`scrapy_dedup._util.redis_policy`) retries. Why: redis-py 6+ retries a failed
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
    if certificate_checks_off(url, params) and mask_url(url) not in _UNVERIFIED_WARNED:
        _UNVERIFIED_WARNED.add(mask_url(url))
        logger.warning("Redis at %s: ssl_cert_reqs is 'none': the server's TLS certificate is not checked, so "
                       "anyone between this crawler and the server can read and change the crawl's state and the "
                       "password", mask_url(url))
    return cls.from_url(url, **params)


#: the masked URLs whose switched-off certificate checks were logged (once a process)
_UNVERIFIED_WARNED: set[str] = set()


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

    Why: redis-py spends 40-100 µs of Python per command where the loopback
    round trip costs 10-20 µs, and a dupefilter sends one command per new
    request (``benchmarks/bench_seen.py``). This sends bytes encoded once
    (:func:`command_prefix`) and reads the reply with the connection's own
    parser; AUTH, TLS, ``SELECT``, health checks and reconnecting stay the
    connection's own code. A connection the server closed meanwhile is replaced
    *before* the command is sent, so no command is half-done; an error after
    sending is raised (the command may have run) for the caller's policy to
    decide. Clients without a plain pool (``RedisCluster``) get ``None`` from
    :meth:`of`. Calls are serialized by a lock.
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


def glob_escape(text: str) -> str:
    """``text`` as a literal in a SCAN ``MATCH`` pattern (glob metacharacters and hash-tag braces escaped)."""
    return "".join("\\" + ch if ch in "*?[]\\{}" else ch for ch in text)


def delete_matching(client: Any, patterns: Iterable[str], batch_size: int = 500) -> None:
    """Delete every key that matches one of ``patterns``: SCAN (on every node of a cluster client), then DEL
    in batches, so a large index is removed without one huge command."""
    batch: list[Any] = []
    for pattern in patterns:
        for name in client.scan_iter(match=pattern, count=1000):
            batch.append(name)
            if len(batch) >= batch_size:
                client.delete(*batch)
                batch = []
    if batch:
        client.delete(*batch)
