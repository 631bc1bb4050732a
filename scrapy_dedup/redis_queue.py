"""A scrapy-redis request queue that survives ``kill -9``: popped requests stay in Redis until handled.

scrapy-redis's queues remove a request from Redis when the scheduler pops it.
If the process is then killed (SIGKILL, OOM killer, a lost machine) the
requests it was downloading or parsing are gone: they are in the dupefilter's
seen set, so no other page's link brings them back, and neither they nor the
links on them are ever crawled. A test showed it: with ``CONCURRENT_REQUESTS = 2``
a SIGKILL mid-crawl lost two pages (and so let their near duplicates be kept).

:class:`AckPriorityQueue` is scrapy-redis's ``PriorityQueue`` with
acknowledgements (the "reliable queue" pattern):

* ``pop`` moves the request, in one Lua script, from the queue into this
  process's in-flight sorted set (same score, so the same priority if it comes back);
* the request is acknowledged (removed from the in-flight set) when Scrapy's
  engine is done with it: its download ended, and the scraper has finished
  with its response or error (every request the callback or errback produced
  has been pushed, every item has left the pipelines), or the request a
  downloader middleware returned instead (redirect, retry) has been scheduled.
  That is the moment the engine removes it from its in-progress set, the same
  in Scrapy 2.13 and 2.19, and the queue acknowledges there;
* each process keeps an ``alive`` key with a TTL, refreshed every
  ``ttl/3`` seconds; a process starting, and each live process at each
  refresh, puts back into the queue the in-flight requests of processes that
  are dead (same host: PID gone; any host: ``alive`` key expired), atomically,
  so two processes never both take them back;
* a graceful close puts its own unacknowledged requests back.

Acknowledging earlier loses pages. An earlier version acknowledged at
``request_left_downloader`` unless a response had been received, but Scrapy
sends that signal before ``response_received``, so every request was
acknowledged as soon as its download ended, before its page was parsed: a kill
in that gap lost the page and every page only it links to (Scrapy 2.13, whose
scraper parses a response a reactor turn or two later, lost them in each test
run; 2.19 by luck of timing did not). Acknowledging at the end of the spider
middleware's output is too early as well: with the asyncio reactor, Scrapy 2.19
drains the callback's output into a queue and schedules its requests from
worker tasks, after the output generator has finished.

The promise: after a hard kill and a restart no request is lost; a request
that was in flight at the kill is fetched again (at least once, never "at most
once"). One window remains: scrapy-redis's scheduler marks a request seen
(dupefilter) and pushes it in two Redis calls, so a kill between the two loses
that one request (at most one per kill: the process schedules one request at a
time). Closing it needs the mark and the push in one Lua script, hence the seen
set and the queue on one Redis server, which neither scrapy-redis nor our
dupefilters (any server, exact set or Bloom) require.

Use (scrapy-redis's scheduler)::

    SCHEDULER = "scrapy_redis.scheduler.Scheduler"
    SCHEDULER_PERSIST = True
    SCHEDULER_QUEUE_CLASS = "scrapy_dedup.redis_queue.AckPriorityQueue"

(``AckMiddleware`` is no longer needed; it is kept, doing nothing, so settings
that name it still load.)

Single Redis node (or Redis Cluster with a ``{hash tag}`` in
``SCHEDULER_QUEUE_KEY``: the script touches the queue and the in-flight set).
"""
from __future__ import annotations

import logging
import os
import socket
import uuid
import weakref
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy_redis.queue import PriorityQueue

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request

logger = logging.getLogger(__name__)

#: seconds a process's ``alive`` key lives without a refresh
ALIVE_TTL = 30

_POP = """
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


class AckPriorityQueue(PriorityQueue):
    """scrapy-redis's priority queue whose popped requests stay in Redis until acknowledged."""

    _by_crawler: "weakref.WeakKeyDictionary[Crawler, AckPriorityQueue]" = weakref.WeakKeyDictionary()

    def __init__(self, server: Any, spider: Any, key: str, serializer: Any = None):
        super().__init__(server, spider, key, serializer)
        crawler = spider.crawler
        self.worker = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.workers_key = f"{self.key}:workers"
        self._pop = server.register_script(_POP)
        self._requeue = server.register_script(_REQUEUE)
        self._pending: dict[int, tuple[Request, bytes]] = {}
        self._closed = False
        self.stats = crawler.stats
        self._watch_engine(crawler)
        server.set(self._alive_key(self.worker), 1, ex=ALIVE_TTL)
        server.sadd(self.workers_key, self.worker)
        self.reclaim_dead()
        from twisted.internet.task import LoopingCall

        self._heartbeat = LoopingCall(self._beat)
        self._heartbeat.start(ALIVE_TTL / 3, now=False)
        crawler.signals.connect(self._spider_closed, signal=signals.spider_closed)
        AckPriorityQueue._by_crawler[crawler] = self

    def _watch_engine(self, crawler: "Crawler") -> None:
        """Acknowledge each popped request when the engine removes it from its in-progress set.

        Scrapy has no signal for "this request is done". The engine's slot
        (``ExecutionEngine._slot``, built before the scheduler is opened) is told
        ``remove_request(request)`` once the request's download and the handling
        of its outcome have finished: the scraper is done with the response or
        failure (callback or errback output scheduled, items through the
        pipelines), or the request a downloader middleware returned has been
        scheduled. Same name and meaning in Scrapy 2.13 to 2.19. Without an
        engine (a queue used on its own) requests are acknowledged by :meth:`ack` only.
        """
        try:
            engine = getattr(crawler, "engine", None)
        except RuntimeError:  # Scrapy >= 2.14 raises when the crawl has not started
            engine = None
        if engine is None:
            return
        slot = getattr(engine, "_slot", None)
        remove = getattr(slot, "remove_request", None)
        if not callable(remove):
            raise NotConfigured(
                "AckPriorityQueue acknowledges a request when Scrapy's engine has finished with it "
                "(ExecutionEngine._slot.remove_request, Scrapy 2.13 to 2.19); this Scrapy version has no such "
                "hook, so acknowledging would be guesswork: use scrapy-redis's own SCHEDULER_QUEUE_CLASS"
            )

        def remove_request(request: "Request") -> None:
            try:  # first: removing the last request may close the spider, which puts back what is unacknowledged
                self._engine_done(request)
            finally:
                remove(request)

        slot.remove_request = remove_request

    def _engine_done(self, request: "Request") -> None:
        if id(request) not in self._pending:
            return
        try:
            self.ack(request)
        except Exception as exc:  # Redis unreachable: the request stays in flight, so it is fetched again
            logger.warning("AckPriorityQueue: could not acknowledge %s (%s: %s); after a restart it will be "
                           "fetched again", request, type(exc).__name__, exc)
            if self.stats is not None:
                self.stats.inc_value("dedup/queue/ack_errors")

    @classmethod
    def for_crawler(cls, crawler: "Crawler") -> "AckPriorityQueue | None":
        return cls._by_crawler.get(crawler)

    def _alive_key(self, worker: str) -> str:
        return f"{self.key}:alive:{worker}"

    def _inflight_key(self, worker: str) -> str:
        return f"{self.key}:inflight:{worker}"

    # --- the queue ---

    def pop(self, timeout: int = 0) -> "Request | None":
        data = self._pop(keys=[self.key, self._inflight_key(self.worker)])
        if not data:
            return None
        request = self._decode_request(data)
        self._pending[id(request)] = (request, data)
        return request

    def ack(self, request: "Request") -> None:
        """The request's work is done (its links are queued): forget it in Redis too."""
        entry = self._pending.pop(id(request), None)
        if entry is not None and entry[0] is request:
            self.server.zrem(self._inflight_key(self.worker), entry[1])

    def in_flight(self) -> int:
        return len(self._pending)

    # --- liveness and recovery ---

    def _beat(self) -> None:
        try:
            self.server.set(self._alive_key(self.worker), 1, ex=ALIVE_TTL)
            self.reclaim_dead()
        except Exception as exc:  # a Redis hiccup must not stop the heartbeat loop
            logger.warning("AckPriorityQueue: heartbeat failed (%s: %s)", type(exc).__name__, exc)

    def reclaim_dead(self) -> int:
        """Put back the in-flight requests of dead processes; return how many came back."""
        back = 0
        host = socket.gethostname()
        for raw in self.server.smembers(self.workers_key):
            worker = raw.decode() if isinstance(raw, bytes) else raw
            if worker == self.worker:
                continue
            force = "force" if _dead_here(worker, host) else ""
            n = self._requeue(keys=[self.key, self._inflight_key(worker), self.workers_key,
                                    self._alive_key(worker)], args=[worker, force])
            if n > 0:
                back += n
                logger.warning("AckPriorityQueue: %d request(s) in flight in the dead process %s put back "
                               "into the queue (they will be fetched again)", n, worker)
        if back and self.stats is not None:
            self.stats.inc_value("dedup/queue/reclaimed", back)
        return back

    def _spider_closed(self, spider: Any, reason: str) -> None:
        if self._closed:
            return
        self._closed = True
        if self._heartbeat.running:
            self._heartbeat.stop()
        n = self._requeue(keys=[self.key, self._inflight_key(self.worker), self.workers_key,
                                self._alive_key(self.worker)], args=[self.worker, "force"])
        if n > 0:
            logger.info("AckPriorityQueue: %d unfinished request(s) put back into the queue at close", n)
        self._pending.clear()


def _dead_here(worker: str, host: str) -> bool:
    """True when ``worker`` ran on this host and its process is gone."""
    worker_host, _, rest = worker.partition(":")
    pid = rest.partition(":")[0]
    if worker_host != host or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, another user's
        return False
    return False


class AckMiddleware:
    """No longer needed: :class:`AckPriorityQueue` acknowledges when the engine is done with a request.

    It used to acknowledge at the end of the spider's output, which Scrapy 2.19
    reaches before the requests of that output are scheduled (see the module
    docstring). Kept, doing nothing, so settings naming it still load.
    """

    @classmethod
    def from_crawler(cls, crawler: "Crawler") -> "AckMiddleware":
        return cls()
