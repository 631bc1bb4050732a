"""What a shared store does while Redis is unreachable (``DEDUP_REDIS_ON_ERROR``); no Scrapy imports.

Why a policy object: a crawl that runs for days will see Redis restart, fail
over or drop connections. Each Redis call of the dupefilters goes through
:meth:`RedisErrorPolicy.call`, which decides, in one place:

* ``retry`` (the default): retried with exponential backoff (0.05 s doubling up
  to 5 s) for at most ``retry_seconds`` from the start of the outage (a
  dupefilter answers synchronously: the crawl waits), then the policy *gives
  up* (:class:`RedisUnavailable`, :attr:`~RedisErrorPolicy.gave_up`) and the
  caller closes the spider with :data:`CLOSE_REASON`.
* ``fail_open``: :class:`RedisUnavailable` at once (the caller treats the
  request as unseen: fetched, never lost); while the outage lasts Redis is
  probed only after growing pauses, so a host that makes each attempt wait for
  the connect timeout does not stall every request. The same once ``retry``
  gave up.

What counts as an outage is :func:`transient_kind`'s; at start-up anything else
(a wrong password, a certificate that does not verify, a key of another type)
is raised at once, and once running (:attr:`RedisErrorPolicy.running`) every
Redis error is an outage, so none escapes to Scrapy (which would drop the
request). Each attempt is bounded by the socket timeouts :func:`call_timeout`
derives from the policy. One ERROR line when an outage starts (at most one a
minute), one INFO line when it ends, counters in ``dedup/redis/*``; secrets
never shown. docs/reliability.md ("What happens when Redis goes away") gives
every error, its kind and what it does at start-up and during the crawl.
"""
from __future__ import annotations

import logging
import re
import time
from typing import Any, Callable, Iterable, Protocol, TypeVar

from scrapy_dedup._util.redis_conn import mask_url

logger = logging.getLogger(__name__)

T = TypeVar("T")

ON_ERROR_CHOICES = ("retry", "fail_open")
#: the reason the spider is closed with when ``retry`` gives up
CLOSE_REASON = "dedup_redis_unavailable"
BACKOFF_START = 0.05
BACKOFF_CAP = 5.0
#: outages that start within this many seconds of the last logged one are counted, not logged
LOG_EVERY = 60.0


class RedisStartupError(RuntimeError):
    """A Redis component could not start (the dupefilters, the content index): refused credentials, a key of
    another type, Redis down at start-up where that is not an outage to wait out. Kept beside the outage
    policy, which decides what is an outage. No secret inside.
    """


class RedisUnavailable(ConnectionError):
    """Redis could not be reached and the policy says not to wait (longer); the message has no secret."""


class _Stats(Protocol):
    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None: ...


#: the server's error codes (the first word of its reply) that waiting may cure, by what they mean.
#: redis-py maps some to classes (OOM, READONLY, LOADING, ...); the others arrive as a plain
#: ``ResponseError`` whose message starts with the code (or, from a Lua script on Redis < 7, has it
#: after ``@user_script:<line>:``).
TRANSIENT_CODES: dict[str, str] = {
    # the server answers but refuses writes: an outage for a store that must write
    "OOM": "refuses writes", "MISCONF": "refuses writes", "READONLY": "refuses writes",
    "NOREPLICAS": "refuses writes",
    # busy for a while: loading its data set, or running a long script
    "LOADING": "busy", "BUSY": "busy",
    # a cluster (or a replica's link to its primary) being reconfigured
    "CLUSTERDOWN": "reconfiguring", "MASTERDOWN": "reconfiguring", "TRYAGAIN": "reconfiguring",
}
_KIND_WORDS = {"unreachable": "is unavailable", "refuses writes": "answers but refuses writes",
               "busy": "answers but is busy", "reconfiguring": "is being reconfigured"}
#: the code of a configuration or data error: refused at start-up; after it, still an outage under the policy
WRONG_TYPE = "WRONGTYPE"

_TRANSIENT_CLASSES: tuple[tuple[tuple[type[BaseException], ...], str], ...] = ()
_PERMANENT: tuple[type[BaseException], ...] = ()
_REDIS_ERRORS: tuple[type[BaseException], ...] = ()


def _error_classes() -> tuple[tuple[tuple[tuple[type[BaseException], ...], str], ...], tuple[type[BaseException], ...]]:
    """(((classes, kind), ...) of transient errors, permanent classes); redis is imported lazily.

    Permanent classes are looked at first: redis-py derives refused credentials from
    ``ConnectionError``. ``MovedError``/``AskError`` are not transient: a cluster client
    follows those redirections itself, so one reaching us means a plain client talks to
    a cluster node (a configuration error); a redirection storm a cluster client cannot
    settle ends in ``ClusterError``, which is transient.
    """
    global _TRANSIENT_CLASSES, _PERMANENT, _REDIS_ERRORS
    if not _TRANSIENT_CLASSES:
        from redis import exceptions as e

        def found(*names: str) -> tuple[type[BaseException], ...]:
            return tuple(getattr(e, n) for n in names if hasattr(e, n))

        _PERMANENT = found("AuthenticationError", "AuthorizationError", "ExternalAuthProviderError",
                           "NoPermissionError", "MovedError", "AskError")
        _TRANSIENT_CLASSES = (
            (found("OutOfMemoryError", "ReadOnlyError"), "refuses writes"),
            (found("BusyLoadingError"), "busy"),
            (found("ClusterDownError", "MasterDownError", "TryAgainError", "ClusterError",
                   "SlotNotCoveredError"), "reconfiguring"),
            ((e.ConnectionError, e.TimeoutError, ConnectionError, TimeoutError), "unreachable"),
        )
        _REDIS_ERRORS = (e.RedisError, *found("RedisClusterException"))
    return _TRANSIENT_CLASSES, _PERMANENT


def server_error_code(exc: BaseException) -> str:
    """The server's error code of a reply redis-py raised as a plain ``ResponseError`` (``MISCONF``...), or ``""``."""
    message = str(exc)
    if "of pipeline caused error: " in message:  # redis-py prefixes a pipelined command's error with the command
        message = message.split("of pipeline caused error: ", 1)[1]
    inner = re.search(r"@user_script:\s*\d+:\s*-?([A-Z]+) ", message)
    if message.startswith("ERR ") and inner:  # Redis < 7 wraps a script's error: "ERR Error running script ... -OOM"
        return inner.group(1)
    first = message.split(" ", 1)[0]
    return first if first.isalpha() and first.isupper() else ""


def transient_kind(exc: BaseException) -> str | None:
    """What a transient error means ("unreachable", "refuses writes", "busy", "reconfiguring"), or None.

    Transient means waiting may cure it: a dead, hung or restarting server, a dropped
    connection, a server out of memory (``maxmemory`` with ``noeviction``), one whose
    snapshots fail (``MISCONF``), a read-only replica, a data set loading, a script
    running, a cluster failing over. By exception class and, for the replies redis-py
    leaves as a plain ``ResponseError``, by the server's error code. Refused
    credentials, a TLS certificate that does not verify, a missing permission, a key
    holding another type, a plain client on a cluster node and every other error are
    not: they are configuration errors (see :func:`is_transient`).
    """
    import ssl

    transient, permanent = _error_classes()
    if isinstance(exc, permanent) or isinstance(exc, RedisUnavailable):
        return None
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(exc):
        return None
    for classes, kind in transient:
        if isinstance(exc, classes):
            return kind
    if isinstance(exc, _REDIS_ERRORS):
        return TRANSIENT_CODES.get(server_error_code(exc))
    return None


def is_transient(exc: BaseException) -> bool:
    """True for errors that waiting may cure (see :func:`transient_kind`)."""
    return transient_kind(exc) is not None


def is_redis_error(exc: BaseException) -> bool:
    """An error of the Redis client or server (not a bug of ours)."""
    _error_classes()
    return isinstance(exc, _REDIS_ERRORS) and not isinstance(exc, RedisUnavailable)


#: the longest one Redis call may block under ``fail_open`` (and in the content index, which always
#: fails open): a probe of a hung server costs this much, once per pause between probes
FAIL_OPEN_CALL_SECONDS = 1.0
#: no call is cut shorter than this under ``retry``: a healthy but loaded server can pause that long
MIN_CALL_SECONDS = 1.0


def call_timeout(mode: str, retry_seconds: float) -> float:
    """The longest one Redis call should block (socket and connect timeouts) under a policy.

    ``retry``: a third of ``DEDUP_REDIS_RETRY_SECONDS`` (at least :data:`MIN_CALL_SECONDS`), so
    the attempts and pauses of one outage add up to about the budget, not to a multiple of a
    30 s socket timeout. ``fail_open``: :data:`FAIL_OPEN_CALL_SECONDS`, so a hung server costs
    the crawl a short pause per probe. Timeouts set in ``DEDUP_REDIS_PARAMS`` win.
    """
    if mode == "retry":
        return max(MIN_CALL_SECONDS, float(retry_seconds) / 3)
    return FAIL_OPEN_CALL_SECONDS


def wait_until_reachable(client: Any, seconds: float, *, sleep: Callable[[float], None] = time.sleep,
                         clock: Callable[[], float] = time.monotonic) -> BaseException | None:
    """PING ``client``'s server until it answers or ``seconds`` have passed; None if it answered.

    Why: a server that cannot be reached when the crawl starts is not an outage to
    wait out for ``DEDUP_REDIS_RETRY_SECONDS`` (nothing was crawled yet); the
    caller ends the crawl after this bounded wait. Each attempt runs on a
    short-lived client whose socket timeouts end with the wait, so a hung host
    cannot stretch it; pauses grow as an outage's (0.05 s doubling up to 5 s).
    Returns the last transient error; any other (refused credentials, a TLS
    certificate that does not verify) is raised at once: a configuration error.
    """
    deadline = clock() + seconds
    attempt = 0
    while True:
        left = max(deadline - clock(), 0.05)
        probe = _probe_client(client, left)
        try:
            probe.ping()
            return None
        except Exception as exc:
            if not is_transient(exc):
                raise
            error: BaseException = exc
        finally:
            if probe is not client:
                probe.close()
        pause = min(BACKOFF_START * 2 ** attempt, BACKOFF_CAP, deadline - clock())
        if pause <= 0:
            return error
        attempt += 1
        sleep(pause)


def _probe_client(client: Any, timeout: float) -> Any:
    """A client of the same server and options as ``client`` whose calls block at most ``timeout`` seconds
    (``client`` itself where it has no plain connection pool, e.g. a cluster client)."""
    pool: Any = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None)
    if not isinstance(kwargs, dict):
        return client
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    options = {**kwargs, "socket_timeout": timeout, "socket_connect_timeout": timeout, "retry": Retry(NoBackoff(), 0)}
    return redis.Redis(connection_pool=type(pool)(connection_class=pool.connection_class, **options))


#: where urllib cuts a URL (components, userinfo, port), and where a query is cut into items as well:
#: a fragment of a password between two of these may be printed alone, as a host, a port, a path or a keyword
_CUTS = (re.compile(r"[/?#@:]+"), re.compile(r"[/?#@:&=;]+"))
#: fragments shorter than this are masked only where they stand alone (not inside a word or a number)
SHORT_FRAGMENT = 3


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret replaced by ``***`` (case-insensitively: urllib lowercases a host).

    Secrets shorter than :data:`SHORT_FRAGMENT` characters (such as a piece of a
    malformed password that redis-py read as a port) are replaced only where they
    stand alone, so that ``ss`` does not turn ``class`` into ``cla***``; one pass,
    longest first, so a replacement never uncovers another secret.
    """
    secrets = {s for s in secrets if s and s != "***"}
    long_ = sorted((s for s in secrets if len(s) >= SHORT_FRAGMENT), key=len, reverse=True)
    short = sorted((s for s in secrets if len(s) < SHORT_FRAGMENT), key=len, reverse=True)
    alternatives = [re.escape(s) for s in long_]
    if short:
        # alone: not next to a letter or digit, nor inside a dotted name or number ("127.0.0.1")
        alternatives.append(r"(?<!\w)(?<!\w\.)(?:%s)(?!\w|\.\w)" % "|".join(map(re.escape, short)))
    if not alternatives:
        return text
    return re.sub("|".join(alternatives), "***", text, flags=re.IGNORECASE)


def _fragments(secret: str) -> set[str]:
    """``secret``, its percent-decoded form, and every piece of either between two URL delimiters."""
    from urllib.parse import unquote, unquote_plus

    found = set()
    for form in {secret, unquote(secret), unquote_plus(secret)}:
        found.add(form)
        # A piece without a letter or digit ("!!") reveals next to nothing and would mangle punctuation.
        found.update(piece for cuts in _CUTS for piece in cuts.split(form)
                     if len(piece) >= SHORT_FRAGMENT or any(c.isalnum() for c in piece))
    return {f for f in found if f}


def secrets_of(url: Any, params: dict[str, Any] | None = None) -> tuple[str, ...]:
    """Every text of a Redis URL and client parameters that must be kept out of messages.

    That is the password, percent-decoded too, and also every fragment of it that
    redis-py may print: a password with an unescaped ``/``, ``?`` or ``#`` is cut
    by ``urlsplit``, and redis-py then names a piece of it as the host ("Error -2
    connecting to pa:6379") or the port ("Port could not be cast to integer value
    as 'ss'"). So the whole userinfo as :func:`~scrapy_dedup._util.redis_conn.mask_url`
    reads it (up to the last ``@``; also after ``urllib``'s removal of tabs and
    newlines), less a cleanly parsed user name, is cut at every delimiter urllib
    and redis-py cut at, and each piece is a secret; so are ``password=`` and
    ``ssl_password=`` query values and the ``password``/``ssl_password`` params.
    Never raises. Longest first.
    """
    from scrapy_dedup._util.redis_conn import QUERY_SECRET, shows_user, userinfo_span

    found: set[str] = set()
    if isinstance(url, (bytes, bytearray)):
        url = bytes(url).decode("utf-8", "replace")
    if isinstance(url, str):
        try:
            for text in {url, re.sub(r"[\t\r\n]", "", url)}:  # urllib drops tabs and newlines anywhere
                for match in QUERY_SECRET.finditer(text):
                    found |= _fragments(match.group(0)[len(match.group(1)):])
                # as mask_url reads it: an '@' in a query password is no end of a userinfo
                masked = QUERY_SECRET.sub(r"\1***", text)
                span = userinfo_span(masked)
                if span is not None:
                    userinfo = masked[span[0]:span[1]]
                    _, sep, password = userinfo.partition(":")
                    if sep:
                        found |= _fragments(password)
                    if not (sep and shows_user(masked, userinfo)):
                        # a bare "secret@host" is masked whole; a malformed URL's "user" may be part of a password
                        found |= _fragments(userinfo)
        except Exception:  # pragma: no cover - unreadable: the whole URL is the secret
            found.add(url)
    for name in ("password", "ssl_password"):
        value = (params or {}).get(name)
        if isinstance(value, (str, bytes)) and value:
            found.add(value if isinstance(value, str) else value.decode("utf-8", "replace"))
    found.discard("***")  # what mask_url put in place of a query password
    return tuple(sorted(found, key=lambda s: (-len(s), s)))


def describe(exc: BaseException, secrets: Iterable[str] = ()) -> str:
    """``"ClassName: message"`` with secrets removed: how every text of a redis-py exception is logged."""
    try:
        text = f"{type(exc).__name__}: {exc}"
    except Exception:  # an exception whose str() fails
        text = type(exc).__name__
    return redact(text, secrets)


class RedisErrorPolicy:
    """Runs Redis calls under ``DEDUP_REDIS_ON_ERROR``; counts and logs outages (see the module doc)."""

    #: what ``fail_open`` (and ``retry`` once it gave up) does with a call it cannot make, for the log line
    FAIL_OPEN_MEANS = "requests are treated as unseen (fetched, never lost) until it is back"

    def __init__(self, mode: str = "retry", retry_seconds: float = 60.0, *, name: str = "Redis",
                 url: str = "", secrets: Iterable[str] = (), stats: _Stats | None = None,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
                 key: str = "", stats_prefix: str = "dedup/redis/", fail_open_means: str = FAIL_OPEN_MEANS,
                 mode_note: str | None = None, log: logging.Logger | None = None):
        if mode not in ON_ERROR_CHOICES:
            raise ValueError(f"DEDUP_REDIS_ON_ERROR must be one of {ON_ERROR_CHOICES}, got {mode!r}")
        self.mode = mode
        self.retry_seconds = float(retry_seconds)
        self.name = name
        self.where = mask_url(url) if url else "Redis"
        self.secrets = tuple(secrets)
        self.stats = stats
        self.sleep = sleep
        self.clock = clock
        #: the Redis key(s) the calls work on, named when the server says a key holds another type
        self.key = key
        self.stats_prefix = stats_prefix
        self.fail_open_means = fail_open_means
        #: how the log line names the policy in force
        self.mode_note = mode_note or f"DEDUP_REDIS_ON_ERROR={mode!r}"
        #: the logger of the component the policy serves
        self.log = log or logger
        #: False during start-up, where configuration errors (refused credentials, a key of another
        #: type, a plain client on a cluster node) are raised at once to stop the crawl; True after
        #: it, where *every* Redis error is an outage under the policy, so a request is never lost
        #: to an error escaping ``request_seen`` (Scrapy would drop the request)
        self.running = False
        #: monotonic time the current outage started, None while Redis answers
        self.down_since: float | None = None
        self.gave_up = False
        self.errors = 0
        self.outages = 0
        self._last_logged: float | None = None
        self._unlogged_outages = 0
        self._outage_logged = False
        self._attempt = 0
        self._errors_this_outage = 0
        self._next_probe = 0.0
        self._probe_attempt = 0
        self._last_error = ""

    def _count(self, name: str, n: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(f"{self.stats_prefix}{name}", n)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``, retried under the policy; :class:`RedisUnavailable` when it says stop."""
        while True:
            if self.down_since is not None and not self._waits() and self.clock() < self._next_probe:
                raise RedisUnavailable(self._last_error)  # between two probes: no network attempt
            try:
                result = fn(*args)
            except Exception as exc:
                if not self.handles(exc):
                    raise
                self._failed(exc)
                delay = self._next_delay()
                if delay is None:
                    self._last_error = f"{self.name}: {self._what(exc)} ({describe(exc, self.secrets)})"
                    self._next_probe = self.clock() + min(BACKOFF_START * 2 ** self._probe_attempt, BACKOFF_CAP)
                    self._probe_attempt += 1
                    raise RedisUnavailable(self._last_error) from None
                self._count("retries")
                self.sleep(delay)
                continue
            if self.down_since is not None:
                self._recovered()
            return result

    def handles(self, exc: BaseException) -> bool:
        """Whether ``exc`` is an outage under the policy (else it is raised as it is)."""
        return is_transient(exc) or (self.running and is_redis_error(exc))

    def _what(self, exc: BaseException) -> str:
        """What went wrong, in words: "Redis at <url> is unavailable", "... answers but refuses writes", ..."""
        kind = transient_kind(exc)
        if kind is not None:
            return f"Redis at {self.where} {_KIND_WORDS[kind]}"
        if server_error_code(exc) == WRONG_TYPE:
            key = f" {self.key!r}" if self.key else ""
            return (f"the Redis key{key} at {self.where} holds a value of another type "
                    "(written by another program or another dupefilter class?)")
        return f"Redis at {self.where} answers with an error"

    def probe_now(self) -> None:
        """Let the next call reach Redis even within a pause between probes (e.g. a last try at close)."""
        self._next_probe = 0.0

    def _waits(self) -> bool:
        return self.mode == "retry" and not self.gave_up

    def _failed(self, exc: BaseException) -> None:
        self.errors += 1
        self._errors_this_outage += 1
        self._count("errors")
        if self.down_since is not None:
            return
        self.down_since = self.clock()
        self._attempt = 0
        self._probe_attempt = 0
        self.outages += 1
        self._count("outages")
        # A flapping server (or one dead node of a cluster, between calls to live ones) starts many short
        # outages: log at most one every LOG_EVERY seconds, and say how many went unlogged.
        now = self.down_since
        self._outage_logged = self._last_logged is None or now - self._last_logged >= LOG_EVERY
        if not self._outage_logged:
            self._unlogged_outages += 1
            return
        self._last_logged = now
        if self.mode == "retry" and not self.gave_up:
            then = f"retrying with backoff for up to {self.retry_seconds:g} s, then closing the spider"
        else:
            then = self.fail_open_means
        since = (f"; {self._unlogged_outages} more short outages since the last such line"
                 if self._unlogged_outages else "")
        self._unlogged_outages = 0
        prefix = self.stats_prefix
        self.log.error("%s: %s (%s); %s (%s; errors are counted in %serrors, outages in %soutages; "
                       "logged at most once a minute%s)", self.name, self._what(exc), describe(exc, self.secrets),
                       then, self.mode_note, prefix, prefix, since)

    def _next_delay(self) -> float | None:
        """Seconds to wait before the next attempt, or None to stop waiting (and maybe give up)."""
        if self.mode != "retry" or self.gave_up:
            return None
        assert self.down_since is not None
        left = self.down_since + self.retry_seconds - self.clock()
        if left <= 0:
            self.gave_up = True
            self.log.error("%s: Redis at %s still unavailable after %.1f s (DEDUP_REDIS_RETRY_SECONDS=%g): "
                           "giving up, the spider is closed with reason %r", self.name, self.where,
                           self.clock() - self.down_since, self.retry_seconds, CLOSE_REASON)
            return None
        delay = min(BACKOFF_START * 2 ** self._attempt, BACKOFF_CAP, left)
        self._attempt += 1
        return delay

    def _recovered(self) -> None:
        assert self.down_since is not None
        seconds = self.clock() - self.down_since
        if self._outage_logged:
            self.log.info("%s: Redis at %s is back after %.1f s (%d failed calls in this outage)",
                          self.name, self.where, seconds, self._errors_this_outage)
        self.down_since = None
        self._errors_this_outage = 0
        self._probe_attempt = 0
        self._next_probe = 0.0
