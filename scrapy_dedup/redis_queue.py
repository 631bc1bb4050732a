"""A scrapy-redis request queue that survives ``kill -9``: popped requests stay in Redis until handled.

Why: scrapy-redis's queues delete a request from Redis when the scheduler pops
it; a process killed while downloading or parsing it has already marked it
seen, so neither it nor the pages only it links to are ever crawled.
:class:`AckPriorityQueue` is scrapy-redis's ``PriorityQueue`` with
acknowledgements (the "reliable queue" pattern):

* ``pop`` moves the request, in one Lua script, into this process's in-flight
  sorted set (same score); it leaves that set when Scrapy's engine is done with
  it (:mod:`scrapy_dedup.engine_hook`: its links pushed, its items through the
  pipelines). Any earlier moment loses pages: ``request_left_downloader`` comes
  before the response is parsed, and Scrapy 2.19 schedules a callback's requests
  after its output generator has ended.
* each process (``host:pid:token``) refreshes an ``alive`` key; a starting
  process, and each live one at each heartbeat, puts the in-flight requests of
  dead processes back into the queue, atomically; a graceful close puts back
  its own.
* paired with scrapy_dedup's ``RedisDupeFilter`` or ``RedisBloomDupeFilter`` on
  the same server and database (:meth:`AckPriorityQueue.pair`), a new request
  is marked seen and queued by one script (:meth:`~AckPriorityQueue.mark_and_push`):
  no kill can leave it seen but not queued. Otherwise one WARNING says so.
* Redis unavailable: requests are *held* in the process and queued once it
  answers; an outage longer than ``DEDUP_REDIS_RETRY_SECONDS`` closes the spider
  (``dedup_redis_unavailable``, under either ``DEDUP_REDIS_ON_ERROR``: without
  Redis the queue has no request to give). A server that lost the crawl's data
  (the marker key ``<queue key>:marker`` gone) closes it with
  ``dedup_redis_data_lost``; one that restarted with an older state gets this
  process's in-flight set resynced. So the queue needs a Redis with AOF.

The promise: after a hard kill and a restart no request is lost; one in flight
at the kill is fetched again (at least once). docs/reliability.md gives the
whole account: each fault, its log line and stats, and the tests that show it.

Use (scrapy-redis's scheduler, or :class:`AckScheduler`, the same without its PING at start)::

    SCHEDULER = "scrapy_dedup.redis_queue.AckScheduler"
    SCHEDULER_PERSIST = True
    SCHEDULER_QUEUE_CLASS = "scrapy_dedup.redis_queue.AckPriorityQueue"

Single Redis node (or Redis Cluster with a ``{hash tag}`` in
``SCHEDULER_QUEUE_KEY``: the scripts touch the queue and the in-flight set; for
the one-step push, the same tag in ``DEDUP_REDIS_KEY`` and a Bloom filter in one key).
"""
from __future__ import annotations

import importlib
import logging
import os
import socket
import time
import uuid
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.utils.misc import load_object

try:
    from scrapy_redis import connection, defaults
    from scrapy_redis.queue import PriorityQueue
    from scrapy_redis.scheduler import Scheduler
except ImportError as exc:  # not a dependency of the package: the queue's own extra
    raise ImportError(f"scrapy_dedup.redis_queue (AckPriorityQueue, AckScheduler) needs scrapy-redis, which is not "
                      f"installed ({exc}): pip install scrapy-dedup[queue]") from None

from scrapy_dedup.clock import Clock, start_clock
from scrapy_dedup.dupefilters import PairableDupeFilter
from scrapy_dedup.engine_hook import close_spider_soon, on_request_done, scheduler_dupefilter
from scrapy_dedup._util.redis_access import PROBE_TTL, probe_key
from scrapy_dedup._util.redis_policy import (
    CLOSE_REASON, describe, is_transient, secrets_of,
)
from scrapy_dedup._util.redis_startup import check_at_start
from scrapy_dedup.settings import logged_already, read_settings, refusing_start

if TYPE_CHECKING:
    from scrapy.http import Request

logger = logging.getLogger(__name__)

#: seconds a process's ``alive`` key lives without a refresh
ALIVE_TTL = 30

# KEYS: queue, in-flight set of the worker, the crawl's marker; ARGV: the marker's value at start.
# -1 (nothing popped) if the marker is gone or another: the server lost its data since (see _lost_data).
_POP = """
if redis.call('GET', KEYS[3]) ~= ARGV[1] then return -1 end
local r = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #r == 0 then return false end
redis.call('ZREM', KEYS[1], r[1])
redis.call('ZADD', KEYS[2], r[2], r[1])
return r[1]
"""

# KEYS: queue, in-flight set of the worker, workers set, alive key; ARGV: worker id, "force"
# Puts the in-flight requests back unless the worker is alive (or "force": it is known dead / it is us).
_REQUEUE = """
if ARGV[2] ~= 'force' and redis.call('EXISTS', KEYS[4]) == 1 then return -1 end
local n = redis.call('ZCARD', KEYS[2])
if n > 0 then
  redis.call('ZUNIONSTORE', KEYS[1], 2, KEYS[1], KEYS[2], 'AGGREGATE', 'MIN')
  redis.call('DEL', KEYS[2])
end
redis.call('SREM', KEYS[3], ARGV[1])
redis.call('DEL', KEYS[4])
return n
"""

# Mark a request's fingerprint seen and, only if it was new (or ARGV[4] is '1'), queue the request: one
# step, so no kill can leave a request seen but not queued. Data only through KEYS/ARGV.
# KEYS: the seen set, the queue; ARGV: fingerprint, score, serialized request, force.
_PUSH_IF_ADDED = """
if added == 1 or ARGV[4] == '1' then
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
end
return added
"""
_MARK_SET_AND_PUSH = "local added = redis.call('SADD', KEYS[1], ARGV[1])\n" + _PUSH_IF_ADDED

# The same for a Bloom filter shard: ARGV[1] is the key's bit positions, little-endian uint32 each,
# set in one BITFIELD (as RedisBloomSeenSet.add does); new if any of those bits was 0.
_MARK_BITS_AND_PUSH = """
local packed = ARGV[1]
local args = {}
for i = 1, #packed, 4 do
  local b1, b2, b3, b4 = string.byte(packed, i, i + 3)
  local n = #args
  args[n + 1] = 'SET'
  args[n + 2] = 'u1'
  args[n + 3] = b1 + b2 * 256 + b3 * 65536 + b4 * 16777216
  args[n + 4] = 1
end
local old = redis.call('BITFIELD', KEYS[1], unpack(args))
local added = 0
for i = 1, #old do
  if old[i] == 0 then
    added = 1
    break
  end
end
""" + _PUSH_IF_ADDED

# KEYS: queue, in-flight set of this worker; ARGV: score, request, score, request, ... this process has in flight.
# Makes the in-flight set exactly that, after the server came back with an older state (its persistence file):
# a request this process has in flight goes (back) into the set and out of the queue; any other member was
# acknowledged in writes the server lost, and its links may be lost with them: it goes back into the queue.
_RESYNC = """
local mine = {}
for i = 1, #ARGV, 2 do
  mine[ARGV[i + 1]] = true
  redis.call('ZREM', KEYS[1], ARGV[i + 1])
  redis.call('ZADD', KEYS[2], ARGV[i], ARGV[i + 1])
end
local back = 0
local members = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = 1, #members, 2 do
  if not mine[members[i]] then
    redis.call('ZADD', KEYS[1], members[i + 1], members[i])
    redis.call('ZREM', KEYS[2], members[i])
    back = back + 1
  end
end
return back
"""

# KEYS: the crawl's marker; ARGV: a new random value. The value in force: the first process's, or this new one.
_MARKER = """
redis.call('SET', KEYS[1], ARGV[1], 'NX')
return redis.call('GET', KEYS[1])
"""

#: seconds between two attempts to queue the requests held during a Redis outage
HELD_RETRY_SECONDS = 1.0

#: the reason the spider is closed with when the queue's Redis server lost its data during the crawl
DATA_LOST_REASON = "dedup_redis_data_lost"

#: worker ids of this process's open queues: a record with this host and PID but another id is of a dead
#: process whose PID this one got again (a container restarted with the same hostname; PID 1 images)
_LIVE_WORKERS: set[str] = set()


class AckPriorityQueue(PriorityQueue):
    """scrapy-redis's priority queue whose popped requests stay in Redis until acknowledged."""

    def __init__(self, server: Any, spider: Any, key: str, serializer: Any = None):
        super().__init__(server, spider, key, serializer)
        crawler = spider.crawler
        cfg = read_settings(crawler.settings)
        #: how long Redis may stay unreachable before the spider is closed (under either DEDUP_REDIS_ON_ERROR:
        #: without Redis the queue has no request to give, so failing open is not possible for it)
        self.retry_seconds: float = cfg.redis_retry_seconds
        self.on_error: str = cfg.redis_on_error
        self.worker = new_worker_id()
        self.workers_key = f"{self.key}:workers"
        #: written once per crawl (the first process to start); if it goes, the server lost the crawl's keys
        self.marker_key = f"{self.key}:marker"
        self._pop = server.register_script(_POP)
        self._requeue = server.register_script(_REQUEUE)
        self._resync = server.register_script(_RESYNC)
        self._pending: dict[int, tuple[Request, bytes]] = {}
        self._closed = False
        self.crawler = crawler
        self.stats = crawler.stats
        self._secrets = _secrets_of_server(server, crawler.settings)
        self._mark_and_push = {"set": server.register_script(_MARK_SET_AND_PUSH),
                               "bloom": server.register_script(_MARK_BITS_AND_PUSH)}
        #: the scheduler's dupefilter once paired (see :meth:`pair`), else None
        self.dupefilter: PairableDupeFilter | None = None
        self._pairing_done = False
        #: the request the paired dupefilter has already queued or held: the scheduler's push of it does nothing
        self._handed: Request | None = None
        #: (fingerprint or None, serialized request, score) not yet in Redis because it was unreachable
        self._held: list[tuple[bytes | None, bytes, float]] = []
        self._held_fingerprints: set[bytes] = set()
        self._next_flush = 0.0
        #: Redis failed the last pop or length query (one WARNING per outage, not one per engine tick)
        self._unreachable = False
        self._last_length = 0
        #: monotonic time Redis stopped answering the queue, None while it answers
        self._down_since: float | None = None
        self._gave_up = False
        self._data_lost = False
        self._close_requested = False
        self._next_idle_check = 0.0
        #: acknowledgements Redis did not take (unreachable): serialized request -> score, retried once it answers
        self._ack_failed: dict[bytes, float] = {}
        # Redis answers and lets the queue's user run all it sends, or the crawl cannot start (before anything of
        # the queue is connected to the crawl): raised out of scrapy-redis's Scheduler.open
        require_usable(server, crawler, "AckPriorityQueue", probes=self.permission_probes())
        # acknowledge each popped request when Scrapy's engine is done with it (without an engine, a queue
        # used on its own, only by ack())
        on_request_done(crawler, self._engine_done,
                        who="AckPriorityQueue (use scrapy-redis's own SCHEDULER_QUEUE_CLASS instead)")
        self._heartbeat: Clock | None = None
        crawler.signals.connect(self._spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(self._spider_opened, signal=signals.spider_opened)
        self.marker = _text(server.register_script(_MARKER)(keys=[self.marker_key], args=[uuid.uuid4().hex]))
        self._run_id = _run_id(server)
        _LIVE_WORKERS.add(self.worker)
        server.set(self._alive_key(self.worker), 1, ex=ALIVE_TTL)
        server.sadd(self.workers_key, self.worker)
        self.reclaim_dead()
        self._heartbeat = start_clock(ALIVE_TTL / 3, self._beat, name="AckPriorityQueue: the heartbeat",
                                      stats=self.stats)

    def permission_probes(self) -> tuple[list[tuple[Any, ...]], list[str]]:
        """Every command the queue sends (:meth:`permission_probes_of`), for this queue's keys."""
        return self.permission_probes_of(self.key, self.worker)

    @classmethod
    def permission_probes_of(cls, key: str, worker: str) -> tuple[list[tuple[Any, ...]], list[str]]:
        """Every command a queue at ``key`` of ``worker`` sends (its scripts, and the commands they run), on probe
        keys shaped like its keys (writes) or on its keys (reads), and the probe keys: for ``missing_permissions``
        at start."""
        workers_key, marker_key = f"{key}:workers", f"{key}:marker"
        queue, inflight, workers, alive, marker = keys = [probe_key(k) for k in (
            key, f"{key}:inflight:{worker}", workers_key, f"{key}:alive:{worker}", marker_key)]
        probes: list[tuple[Any, ...]] = [
            ("SCRIPT", "LOAD", "return 1"),
            *(("EVALSHA", "0" * 40, 1, key) for key in keys),  # NOSCRIPT when allowed: no script runs
            ("ZADD", queue, 0, "probe"), ("ZRANGE", queue, 0, 0, "WITHSCORES"), ("ZREM", queue, "probe"),
            ("ZADD", inflight, 0, "probe"), ("ZCARD", inflight), ("ZRANGE", inflight, 0, -1, "WITHSCORES"),
            ("ZUNIONSTORE", queue, 2, queue, inflight, "AGGREGATE", "MIN"), ("ZREM", inflight, "probe"),
            ("SADD", workers, "probe"), ("SMEMBERS", workers), ("SREM", workers, "probe"),
            ("SET", alive, 1, "EX", PROBE_TTL), ("EXISTS", alive), ("SET", marker, "probe", "NX"), ("GET", marker),
            *(("DEL", key) for key in (alive, inflight, queue)),
            ("ZCARD", key), ("SMEMBERS", workers_key), ("GET", marker_key)]
        return probes, keys

    def _engine_done(self, request: "Request") -> None:
        if id(request) not in self._pending:
            return
        try:
            self.ack(request)
        except Exception as exc:  # Redis unreachable: the request stays in flight, so it is fetched again
            logger.warning("AckPriorityQueue: could not acknowledge %s (%s); after a restart it will be "
                           "fetched again", request, describe(exc, self._secrets))
            self._count("dedup/queue/ack_errors")

    def _alive_key(self, worker: str) -> str:  # (as permission_probes_of names them)
        return f"{self.key}:alive:{worker}"

    def _inflight_key(self, worker: str) -> str:
        return f"{self.key}:inflight:{worker}"

    def _count(self, name: str, n: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(name, n)

    def _flag(self, name: str) -> None:
        """A stat that says that something happened in this crawl (1), not how often."""
        if self.stats is not None:
            self.stats.set_value(name, 1)

    # --- marking seen and queueing in one step ---

    def _spider_opened(self, spider: Any) -> None:
        self._pair_once()  # the scheduler has built its dupefilter by now, and no request was scheduled yet

    def _pair_once(self) -> None:
        if self._pairing_done:
            return
        self._pairing_done = True
        dupefilter = scheduler_dupefilter(self.crawler)
        if dupefilter is not None:
            self.pair(dupefilter)

    def pair(self, dupefilter: Any) -> bool:
        """Mark seen and queue in one Redis script with ``dupefilter`` if it can be done; say so either way.

        Possible with scrapy_dedup's ``RedisDupeFilter`` or ``RedisBloomDupeFilter``
        on the same Redis server and database as the queue (on Redis Cluster: the
        seen key(s) in the queue key's hash slot). Otherwise the scheduler's two
        Redis calls stay, and one WARNING line says what that costs and how to avoid it.
        """
        self._pairing_done = True
        why_not = self._cannot_pair(dupefilter)
        if why_not is not None:
            logger.warning(
                "AckPriorityQueue: %s, so a request is marked seen and queued in two Redis calls: a SIGKILL "
                "between them loses that request (at most one per kill). To close the gap use scrapy_dedup's "
                "RedisDupeFilter or RedisBloomDupeFilter with DEDUP_REDIS_URL on the queue's server and database "
                "(REDIS_URL); on Redis Cluster give SCHEDULER_QUEUE_KEY and DEDUP_REDIS_KEY one {hash tag} and "
                "keep the Bloom filter in one key (DEDUP_REDIS_BLOOM_SHARDS=1).", why_not)
            return False
        dupefilter.pair_queue(self)
        self.dupefilter = dupefilter
        logger.info("AckPriorityQueue: %s and the queue %r share a Redis server: a new request is marked seen "
                    "and queued in one step (no kill can leave it seen but not queued)",
                    type(dupefilter).__name__, self.key)
        return True

    def _cannot_pair(self, dupefilter: Any) -> str | None:
        """Why the mark and the push cannot be one script, or None if they can."""
        if not isinstance(dupefilter, PairableDupeFilter) or dupefilter.script_kind not in self._mark_and_push:
            return f"the dupefilter {type(dupefilter).__name__} marks requests seen in a Redis call of its own"
        try:
            same = _same_server(self.server, dupefilter.server)
        except Exception as exc:
            return f"the dupefilter's and the queue's Redis servers could not be compared ({type(exc).__name__})"
        if not same:
            return (f"{type(dupefilter).__name__} (DEDUP_REDIS_URL) and the queue (REDIS_URL) are not on "
                    "the same Redis server and database")
        if _is_cluster(self.server):
            seen_keys = dupefilter.seen_keys()
            slots = {self.server.keyslot(name) for name in [self.key, *seen_keys]}
            if len(slots) > 1:
                return (f"on Redis Cluster the seen key(s) {seen_keys} and the queue {self.key!r} are in "
                        f"{len(slots)} different hash slots")
        return None

    def mark_and_push(self, request: "Request", fingerprint: bytes, force: bool = False) -> bool:
        """Add ``fingerprint`` to the paired dupefilter's store and, if it was new (or ``force``), queue
        ``request``, in one Lua script. True if the fingerprint was new.

        Called by the dupefilter's ``request_seen`` (under its ``DEDUP_REDIS_ON_ERROR``
        policy); the scheduler's ``push`` of the same request right after does nothing.
        """
        added = self._run_mark_and_push(fingerprint, -request.priority, self._encode_request(request), force)
        if added or force:
            self._handed = request
            self._count("dedup/queue/marked_and_pushed")
        return bool(added)

    def _run_mark_and_push(self, fingerprint: bytes, score: float, data: bytes, force: bool) -> int:
        """The one-step script with the paired dupefilter's key and argument for ``fingerprint``."""
        dupefilter: Any = self.dupefilter  # (a request with a fingerprint comes only from the paired dupefilter)
        seen_key, argument = dupefilter.script_args(fingerprint)
        return self._mark_and_push[dupefilter.script_kind](keys=[seen_key, self.key],
                                                          args=[argument, score, data, 1 if force else 0])

    def hold(self, request: "Request", fingerprint: bytes | None = None) -> None:
        """Keep ``request`` in this process until Redis answers again (it was unreachable), then queue it.

        With ``fingerprint`` it is marked seen and queued then in one step (only if
        still new: a process that marked it meanwhile also queued it).
        """
        self._hold(fingerprint, self._encode_request(request), -request.priority)
        self._handed = request

    def holds(self, fingerprint: bytes) -> bool:
        """True if a request with this fingerprint is held here, waiting for Redis (it counts as seen)."""
        return fingerprint in self._held_fingerprints

    def _hold(self, fingerprint: bytes | None, data: bytes, score: float) -> None:
        if not self._held:
            logger.warning("AckPriorityQueue: Redis is unavailable; new requests are held in this process and "
                           "queued when it answers again (counted in dedup/queue/held; a kill meanwhile loses them)")
        self._held.append((fingerprint, data, score))
        if fingerprint is not None:
            self._held_fingerprints.add(fingerprint)
        self._count("dedup/queue/held")

    def _flush_held(self, now: float | None = None) -> None:
        """Queue the held requests, in order, until Redis fails again (then wait HELD_RETRY_SECONDS)."""
        now = time.monotonic() if now is None else now
        if not self._held or now < self._next_flush:
            return
        queued = found_seen = 0
        dupefilter: Any = self.dupefilter  # a held request with a fingerprint was held by the paired dupefilter
        while self._held:
            fingerprint, data, score = self._held[0]
            try:
                if fingerprint is None:
                    self.server.execute_command("ZADD", self.key, score, data)
                elif not self._run_mark_and_push(fingerprint, score, data, False):
                    found_seen += 1
            except Exception as exc:
                if not is_transient(exc):
                    raise
                self._next_flush = now + HELD_RETRY_SECONDS
                break
            self._held.pop(0)
            if fingerprint is not None:
                self._held_fingerprints.discard(fingerprint)
                dupefilter.confirmed(fingerprint)
            queued += 1
        if queued:
            logger.info("AckPriorityQueue: %d request(s) held during the Redis outage are handled "
                        "(%d of them were meanwhile marked seen and queued by another process)", queued, found_seen)
            self._count("dedup/queue/held_queued", queued - found_seen)
            if found_seen:
                self._count("dedup/queue/held_found_seen", found_seen)

    # --- the queue ---

    def push(self, request: "Request") -> None:
        if request is self._handed:  # already queued (or held) together with its fingerprint
            self._handed = None
            return
        self._handed = None
        self._pair_once()
        if self._held:
            self._flush_held()
        data, score = self._encode_request(request), -request.priority
        if self._held:  # Redis still down: keep the order
            self._hold(None, data, score)
            return
        try:
            self.server.execute_command("ZADD", self.key, score, data)
        except Exception as exc:  # scrapy-redis lets it propagate into the engine: the request would be lost
            if not is_transient(exc):
                raise
            self._redis_failed(exc)
            self._hold(None, data, score)
        else:
            self._redis_answered()

    def pop(self, timeout: int = 0) -> "Request | None":
        """The next request, or None (also while Redis is unreachable: the queued ones wait there).

        Also None once the spider is being closed because Redis stayed away too long
        or lost the crawl's data (nothing more is taken out of the queue then).
        """
        if self._gave_up or self._data_lost:
            return None
        if self._held:
            self._flush_held()
        if self._ack_failed:
            self._retry_acks()
        try:
            data = self._pop(keys=[self.key, self._inflight_key(self.worker), self.marker_key], args=[self.marker])
        except Exception as exc:
            self._redis_failed(exc)
            return None
        request = None
        if isinstance(data, int):  # -1: the marker is gone, the server lost the crawl's keys
            self._lost_data()
        elif data:
            request = self._decode_request(data)
            self._pending[id(request)] = (request, data)  # before the check after an outage: it is in flight
        self._redis_answered()
        return request

    def __len__(self) -> int:
        """Requests queued in Redis plus those held here; while Redis is unreachable, at least 1.

        The scheduler asks this to decide whether the spider is idle: answering 0
        during an outage would close a crawl whose requests wait in Redis (as
        "finished"; the last count misses requests queued since, e.g. by the
        one-step push); an outage longer than ``DEDUP_REDIS_RETRY_SECONDS`` closes
        it with the reason ``dedup_redis_unavailable`` instead. Closing with a
        reason of its own, it is not idle either, or it would close as "finished" first.
        """
        try:
            self._last_length = super().__len__()
        except Exception as exc:
            self._redis_failed(exc)
        else:
            self._redis_answered()
            if not self._last_length and not self._held and self._idle_check():
                self._last_length = super().__len__()  # requests the check put back into the queue
        if self._gave_up or self._data_lost or self._down_since is not None:
            return max(1, self._last_length + len(self._held))
        return self._last_length + len(self._held)

    def _idle_check(self) -> bool:
        """The queue looks empty, so the spider may be about to close as "finished": first make sure the server
        did not lose or roll back the crawl's data since the last heartbeat (at most once a second). True if
        requests were put back into the queue."""
        now = time.monotonic()
        if now < self._next_idle_check:
            return False
        self._next_idle_check = now + 1.0
        return self._check_server() > 0

    def _redis_failed(self, exc: Exception) -> None:
        """A transient Redis error in pop, len or the heartbeat: counted, logged once per outage (the engine asks
        every tick), and the spider closed once the outage has lasted ``DEDUP_REDIS_RETRY_SECONDS``."""
        if not is_transient(exc):
            raise exc
        self._count("dedup/queue/redis_errors")
        if not self._unreachable:
            self._unreachable = True
            logger.warning("AckPriorityQueue: Redis is unavailable (%s); no request is popped until it answers "
                           "again, the queued ones wait in Redis (counted in dedup/queue/redis_errors); if it is "
                           "still unavailable after %g s (DEDUP_REDIS_RETRY_SECONDS) the spider is closed",
                           type(exc).__name__, self.retry_seconds)
        self._outage(exc)

    def _outage(self, exc: Exception) -> None:
        """Redis failed a queue call: note when the outage began; give up once it lasted the budget."""
        now = time.monotonic()
        if self._down_since is None:
            self._down_since = now
        if not self._gave_up and now - self._down_since >= self.retry_seconds:
            self._give_up(now - self._down_since, exc)

    def _give_up(self, seconds: float, exc: Exception) -> None:
        """Close the spider: without Redis the queue has no request to give, and waiting longer was not asked for.

        Under ``fail_open`` too: that policy lets the dupefilter answer without
        Redis; the queue cannot, and without a bound the crawl would wait forever
        (``pop`` None, ``len`` the last count) for a server that may never return.
        """
        self._gave_up = True
        self._flag("dedup/queue/gave_up")
        logger.error(
            "AckPriorityQueue: Redis at %s has been unavailable for %.1f s (%s; DEDUP_REDIS_RETRY_SECONDS=%g, "
            "under either DEDUP_REDIS_ON_ERROR, here %r): closing the spider with reason %r. Still in Redis: %d "
            "queued request(s) (the last count read) and %d in flight in this process (put back into the queue "
            "by the next start of the crawl); held in this process: %d (queued at close if Redis answers by then, "
            "otherwise lost: dedup/queue/held_lost)", _where(self.server), seconds, type(exc).__name__,
            self.retry_seconds, self.on_error, CLOSE_REASON, self._last_length, len(self._pending), len(self._held))
        self._request_close(CLOSE_REASON)

    def _redis_answered(self) -> None:
        if self._unreachable:
            self._unreachable = False
            self._down_since = None
            logger.info("AckPriorityQueue: Redis answers again; popping requests")
            self._retry_acks()
            self._check_server()  # a restart (with or without persistence) shows here first

    # --- a server that lost the crawl's data ---

    def _check_server(self) -> int:
        """Detect a server that lost the crawl's data (the marker key written at start is gone or was replaced),
        or that restarted with an older state (a new ``run_id``, the marker still there). Returns how many
        requests were put back into the queue."""
        if self._data_lost:
            return 0
        back = 0
        try:
            value = self.server.get(self.marker_key)
            if _text(value) != self.marker:
                self._lost_data()
                return 0
            run_id = _run_id(self.server)
            if run_id is not None and self._run_id is not None and run_id != self._run_id:
                back = self._restarted()
            if run_id is not None:
                self._run_id = run_id
        except Exception as exc:
            if not is_transient(exc):
                raise
            # unreachable again: checked at the next answer or heartbeat
        return back

    def _restarted(self) -> int:
        """The server restarted (or failed over) and kept the crawl's keys, from its AOF or RDB file or a replica.

        Those may lack its last writes (``appendfsync everysec``: about a second
        on a crash; an RDB snapshot: everything since it; a replica: its lag). A
        lost write is a suffix: requests acknowledged in it are back in this
        process's in-flight set, while the links they produced, pushed before
        their acknowledgement, are gone. So the in-flight set is made what this
        process really has in flight, and the rest goes back into the queue (fetched
        again); the paired dupefilter forgets its local cache, whose fingerprints
        may have been lost too (otherwise it would filter those links as seen).
        """
        back = self._resync_in_flight()
        if self.dupefilter is not None:  # on the same server, so it rolled back too
            self.dupefilter.forget_cached()
        self._count("dedup/queue/server_restarts")
        if back:
            self._count("dedup/queue/resynced", back)
        logger.warning("AckPriorityQueue: Redis at %s restarted and kept the crawl's keys; its last writes may be "
                       "lost (appendfsync everysec, RDB snapshots, a lagging replica), so %d request(s) "
                       "acknowledged in them are queued again (dedup/queue/resynced) and the seen set is asked "
                       "again for every link", _where(self.server), back)
        return back

    def _resync_in_flight(self) -> int:
        """Make this process's in-flight set in Redis what it really has in flight; how many went back to the queue.

        It also registers this process again: a server that came back with an
        older state may not know it (started after that state), and then no
        process would reclaim its requests if it died.
        """
        self.server.sadd(self.workers_key, self.worker)
        self.server.set(self._alive_key(self.worker), 1, ex=ALIVE_TTL)
        args: list[Any] = []
        for request, data in self._pending.values():
            args += [-request.priority, data]
        for data, score in self._ack_failed.items():  # done here, its acknowledgement not yet taken: ours too
            args += [score, data]
        return int(self._resync(keys=[self.key, self._inflight_key(self.worker)], args=args))

    def _lost_data(self) -> None:
        """The server no longer has the crawl's keys (restarted without persistence, FLUSHALL or FLUSHDB, a
        failover to an empty replica): say so, and close the spider rather than let it finish "successfully".

        Whatever was queued there, and the other processes' in-flight requests,
        are gone and cannot be told apart from requests never made. What this
        process still has, it puts back: its unfinished requests go into its
        in-flight set again (so the close queues them as always) and its held
        requests are queued as usual.
        """
        if self._data_lost:
            return
        self._data_lost = True
        self._flag("dedup/queue/data_lost")
        run_id = _run_id(self.server)
        if run_id is not None and self._run_id is not None and run_id != self._run_id:
            why = "the server restarted without the crawl's keys (no persistence, or a failover to an empty replica)"
        elif run_id is not None and self._run_id is not None:
            why = "the same server process no longer has them (FLUSHALL, FLUSHDB or the keys deleted)"
        else:
            why = "a restart without persistence, FLUSHALL/FLUSHDB, or a failover to an empty replica"
        try:
            self._resync_in_flight()  # the in-flight set is gone too: this process's unfinished requests go back
        except Exception as exc:
            if not is_transient(exc):
                raise
        logger.error(
            "AckPriorityQueue: Redis at %s lost the queue's data during the crawl (the key %r written at start is "
            "gone: %s). The requests queued there and those other processes had in flight are gone, so this crawl "
            "cannot end complete: closing the spider with reason %r (dedup/queue/data_lost). This process's %d "
            "unfinished and %d held request(s) are queued again at close. The queue needs a Redis with persistence "
            "(appendonly yes; see docs/seen-stores.md); to fetch what was lost, start the crawl again from its "
            "start URLs with an empty seen set (SCHEDULER_FLUSH_ON_START=True)", _where(self.server), self.marker_key,
            why, DATA_LOST_REASON, len(self._pending), len(self._held))
        self._request_close(DATA_LOST_REASON)

    def _request_close(self, reason: str) -> None:
        """Ask the engine to close the spider with ``reason`` (once; outside the current call, as the dupefilter
        does)."""
        if not self._close_requested:
            self._close_requested = close_spider_soon(self.crawler, reason)

    def ack(self, request: "Request") -> None:
        """The request's work is done (its links are queued): forget it in Redis too."""
        entry = self._pending.pop(id(request), None)
        if entry is not None and entry[0] is request:
            try:
                self.server.zrem(self._inflight_key(self.worker), entry[1])
            except Exception:
                self._ack_failed[entry[1]] = -request.priority  # done here: acknowledged when Redis answers
                raise

    def _retry_acks(self) -> None:
        """Send the acknowledgements Redis did not take, once the requests held meanwhile are in Redis (a
        request leaves the in-flight set only after what it produced is queued)."""
        if not self._ack_failed or self._held:
            return
        try:
            self.server.zrem(self._inflight_key(self.worker), *self._ack_failed)
        except Exception as exc:
            if not is_transient(exc):
                raise
            return
        self._ack_failed.clear()

    def in_flight(self) -> int:
        return len(self._pending)

    def clear(self) -> None:
        """scrapy-redis's flush (``SCHEDULER_PERSIST = False`` at close, ``SCHEDULER_FLUSH_ON_START``): the queue,
        and this process's in-flight and held requests too, which the close would otherwise put back into it."""
        super().clear()
        self.server.delete(self._inflight_key(self.worker))
        self._pending.clear()
        self._held.clear()
        self._held_fingerprints.clear()
        self._ack_failed.clear()

    # --- liveness and recovery ---

    def _beat(self) -> None:
        try:
            try:
                self.server.set(self._alive_key(self.worker), 1, ex=ALIVE_TTL)
            except Exception as exc:
                self._redis_failed(exc)  # counts toward giving up even when the engine does not ask the queue
                return
            if self._unreachable:
                self._redis_answered()  # checks the server
            else:
                self._check_server()
            self._flush_held()
            self._retry_acks()
            self.reclaim_dead()
        except Exception as exc:  # a Redis hiccup must not stop the heartbeat loop
            logger.warning("AckPriorityQueue: heartbeat failed (%s)", describe(exc, self._secrets))

    def reclaim_dead(self) -> int:
        """Put back the in-flight requests of dead processes; return how many came back."""
        back = 0
        host, pid = socket.gethostname(), os.getpid()
        for raw in self.server.smembers(self.workers_key):
            worker = _text(raw)
            if worker == self.worker:
                continue
            force = "force" if _dead_here(worker, host, pid) else ""
            n = self._requeue_of(worker, force)
            if n > 0:
                back += n
                logger.warning("AckPriorityQueue: %d request(s) in flight in the dead process %s put back "
                               "into the queue (they will be fetched again)", n, worker)
        if back:
            self._count("dedup/queue/reclaimed", back)
        return back

    def _requeue_of(self, worker: str, force: str) -> int:
        """Put ``worker``'s in-flight requests back into the queue unless it is alive (or ``force``)."""
        return self._requeue(keys=[self.key, self._inflight_key(worker), self.workers_key, self._alive_key(worker)],
                             args=[worker, force])

    def _spider_closed(self, spider: Any, reason: str) -> None:
        if self._closed:
            return
        self._closed = True
        _LIVE_WORKERS.discard(self.worker)  # from now on a record of ours left in Redis is a dead process's
        if self._heartbeat is not None:
            self._heartbeat.stop()
        if self._held:
            self._next_flush = 0.0
            try:
                self._flush_held()
            finally:
                if self._held:
                    logger.error("AckPriorityQueue: %d request(s) held during the Redis outage could not be "
                                 "queued before the spider closed (Redis still unavailable); they are lost "
                                 "(dedup/queue/held_lost)", len(self._held))
                    self._count("dedup/queue/held_lost", len(self._held))
        try:
            self._retry_acks()  # else the close would queue those finished requests again
            n = self._requeue_of(self.worker, "force")
        except Exception as exc:
            if not is_transient(exc):
                raise
            logger.warning("AckPriorityQueue: Redis unavailable at close (%s): the %d unfinished request(s) of "
                           "this process stay in its in-flight set in Redis, and the next start of the crawl "
                           "puts them back into the queue", type(exc).__name__, len(self._pending))
        else:
            if n > 0:
                logger.info("AckPriorityQueue: %d unfinished request(s) put back into the queue at close", n)
        self._pending.clear()
        # The scheduler (scrapy-redis) never closes its client, and its sockets would outlive the crawl;
        # the scheduler is done with it by now (it closes before spider_closed), and a later use reconnects.
        try:
            self.server.close()
        except Exception:  # pragma: no cover - closing a broken connection
            pass


class AckScheduler(Scheduler):
    """scrapy-redis's scheduler for :class:`AckPriorityQueue`, except for its check of Redis when built.

    Why: scrapy-redis's ``Scheduler.from_settings`` PINGs Redis once and lets redis-py's
    error escape, a traceback. Here Redis has ``DEDUP_REDIS_STARTUP_SECONDS`` to answer,
    and :class:`AckPriorityQueue`'s user must be allowed all the queue sends
    (:func:`require_usable`), or the start fails with one ERROR line. Checked when the
    scheduler is built, before Scrapy's engine gives it its slot: the failed start is that
    line alone (from ``open``, where scrapy-redis builds the queue, which checks again,
    Scrapy's own tracebacks of closing an engine that never opened would follow it).
    """

    @classmethod
    def from_crawler(cls, crawler: Any) -> "AckScheduler":
        scheduler = super().from_crawler(crawler)
        queue_cls, spider = load_object(scheduler.queue_cls), getattr(crawler, "spider", None)
        if spider is not None and isinstance(queue_cls, type) and issubclass(queue_cls, AckPriorityQueue):
            key = scheduler.queue_key % {"spider": spider.name}
            require_usable(scheduler.server, crawler, "AckPriorityQueue",
                           probes=AckPriorityQueue.permission_probes_of(key, new_worker_id()))
        else:
            require_usable(scheduler.server, crawler, "AckScheduler")
        return scheduler

    @classmethod
    def from_settings(cls, settings: Any) -> "AckScheduler":
        kwargs: dict[str, Any] = {"persist": settings.getbool("SCHEDULER_PERSIST"),
                                  "flush_on_start": settings.getbool("SCHEDULER_FLUSH_ON_START"),
                                  "idle_before_close": settings.getint("SCHEDULER_IDLE_BEFORE_CLOSE")}
        for name, setting in (("queue_key", "SCHEDULER_QUEUE_KEY"), ("queue_cls", "SCHEDULER_QUEUE_CLASS"),
                              ("dupefilter_key", "SCHEDULER_DUPEFILTER_KEY"), ("dupefilter_cls", "DUPEFILTER_CLASS"),
                              ("serializer", "SCHEDULER_SERIALIZER")):
            if settings.get(setting):
                kwargs[name] = settings.get(setting)
        dupefilter_cls = load_object(kwargs.get("dupefilter_cls", defaults.SCHEDULER_DUPEFILTER_CLASS))
        if not hasattr(dupefilter_cls, "from_spider"):
            kwargs["dupefilter"] = dupefilter_cls.from_settings(settings)
        if isinstance(kwargs.get("serializer"), str):
            kwargs["serializer"] = importlib.import_module(kwargs["serializer"])
        return cls(server=connection.from_settings(settings), **kwargs)


def _text(value: Any) -> Any:
    """A Redis reply as ``str`` whether or not the client decodes responses (None stays None)."""
    return value.decode() if isinstance(value, bytes) else value


def _run_id(client: Any) -> str | None:
    """The server's ``run_id`` (new at each start of the server), or None where INFO is refused or unknown."""
    try:
        return client.info("server")["run_id"]
    except Exception:  # INFO denied by an ACL, a cluster client, Redis unreachable: only used to explain
        return None


def _connection_kwargs(client: Any) -> dict[str, Any]:
    """The options of a client's plain connection pool ({} for a cluster client or another object)."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    return kwargs if isinstance(kwargs, dict) else {}


def _url_of(client: Any) -> str:
    """A URL of a client's plain server (no password; ``rediss://`` for a TLS connection), for the start-up check."""
    kwargs = _connection_kwargs(client)
    scheme = "rediss" if "SSL" in getattr(getattr(client, "connection_pool", None), "connection_class",
                                          type).__name__ else "redis"
    return f"{scheme}://{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}/{kwargs.get('db') or 0}"


def _where(client: Any) -> str:
    """``host:port/db`` (or the socket path) of a client, never its password."""
    kwargs = _connection_kwargs(client)
    place = kwargs.get("path") or f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}"
    return f"{place}/{kwargs.get('db') or 0}"


def new_worker_id() -> str:
    """Host, PID and a token of this start: the PID alone comes back after a container restart."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}"


def require_usable(server: Any, crawler: Any, what: str, probes: Any = None) -> None:
    """Redis answers within ``DEDUP_REDIS_STARTUP_SECONDS`` (and lets its user run the ``probes``; a TLS port
    named with ``redis://`` is named too), or the crawl cannot start, under either ``DEDUP_REDIS_ON_ERROR``: one
    ERROR line (the masked server, the setting its URL came from), then a :class:`RedisStartupError` inside
    Scrapy's start of the crawl, which fails (``scrapy crawl`` exits with status 1), as for a configuration
    error. ``what``: the component, named in the line."""
    settings = crawler.settings
    url = settings.get("REDIS_URL") or _url_of(server)
    with refusing_start(crawler):
        check_at_start(server, url, secrets=_secrets_of_server(server, settings), what=what, probes=probes,
                       wait_seconds=read_settings(settings).redis_startup_seconds, log=logger,
                       key_setting="SCHEDULER_QUEUE_KEY", logged=logged_already,
                       url_setting="REDIS_URL" if settings.get("REDIS_URL") else "REDIS_HOST/REDIS_PORT")


def _secrets_of_server(server: Any, settings: Any) -> tuple[str, ...]:
    """What the queue's log lines must not show: the password of scrapy-redis's ``REDIS_URL`` (and every
    piece of it), of ``REDIS_PARAMS``, and the one the client was given."""
    try:
        params = dict(settings.getdict("REDIS_PARAMS"))
    except (TypeError, ValueError):
        params = {}
    return tuple({*secrets_of(settings.get("REDIS_URL") or "", params), *secrets_of("", _connection_kwargs(server))})


def _is_cluster(client: Any) -> bool:
    return callable(getattr(client, "keyslot", None)) and callable(getattr(client, "get_nodes", None))


def _server_identity(client: Any) -> tuple[Any, ...]:
    """What tells two clients apart: the server's ``run_id`` and the database (the address if INFO is refused).

    ``run_id`` changes when the server restarts, so both clients are asked now;
    it also tells ``localhost`` and ``127.0.0.1`` (or a forwarded port) apart from a second server.
    """
    if _is_cluster(client):
        return ("cluster", frozenset(info.get("node_id") for info in client.cluster_nodes().values()))
    kwargs = _connection_kwargs(client)
    db = int(kwargs.get("db") or 0)
    run_id = _run_id(client)
    if run_id is not None:
        return ("run_id", run_id, db)
    return ("address", kwargs.get("path") or (kwargs.get("host"), kwargs.get("port")), db)  # INFO denied by an ACL


def _same_server(a: Any, b: Any) -> bool:
    ida, idb = _server_identity(a), _server_identity(b)
    if ida[0] == idb[0] == "cluster":
        return bool(ida[1] & idb[1])
    return ida == idb


def _dead_here(worker: str, host: str, pid: int) -> bool:
    """True when ``worker`` ran on this host and its process is gone.

    A worker id is ``host:pid:token``, the token new at each start of a queue.
    With this process's own PID, the PID says nothing: a container restarted
    (``docker restart``: same hostname, and the same PID, e.g. 1, for its first
    process) runs a new process under the dead one's PID. Such a record is alive
    only if it is one of this process's open queues; any other (another token,
    or an id without any) is a dead process's. Earlier versions wrote the same
    ``host:pid:token`` ids (with an 8-digit token), so their records are read as
    they are. Other PIDs of this host: dead when no process has that PID.
    """
    worker_host, _, rest = worker.partition(":")
    worker_pid = rest.partition(":")[0]
    if worker_host != host or not worker_pid.isdigit():
        return False
    if int(worker_pid) == pid:
        return worker not in _LIVE_WORKERS
    try:
        os.kill(int(worker_pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, another user's
        return False
    return False

