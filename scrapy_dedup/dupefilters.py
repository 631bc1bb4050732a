"""``DUPEFILTER_CLASS`` adapters over the seen-key stores of :mod:`scrapy_dedup.seen`.

* :class:`BloomDupeFilter` - a local Bloom filter, checkpointed into ``JOBDIR``.
* :class:`RedisDupeFilter` - an exact Redis set shared by every process of a
  spider (a drop-in for scrapy-redis's ``RFPDupeFilter``).
* :class:`RedisBloomDupeFilter` - a Bloom filter in Redis bitmaps, shared.

All three keep Scrapy's dupefilter contract (``from_crawler``, ``request_seen``,
``open``/``close``, ``log`` with Scrapy's messages and stats, ``DUPEFILTER_DEBUG``)
and fingerprint with ``crawler.request_fingerprinter``. Under scrapy-redis's
scheduler, which builds them with ``from_spider``, never calls ``open``/``close``
and calls ``clear()`` to flush, they start on first use and do their close work
on ``spider_closed`` too (docs/seen-stores.md compares them).
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol, TypeVar, runtime_checkable

from scrapy import signals
from scrapy.dupefilters import BaseDupeFilter
from scrapy.utils.job import job_dir
from scrapy.utils.request import referer_str

from scrapy_dedup.clock import Clock, start_clock
from scrapy_dedup.engine_hook import close_spider_soon, closing_reason, stop_at_start
from scrapy_dedup.fingerprinter import (
    CanonicalRequestFingerprinter,
    class_path,
    crawl_generation,
    scrapy_shape_fingerprint,
)
from scrapy_dedup.jobdir import JobdirFrontier, check_generation, is_disk_full, uses_scrapys_scheduler
from scrapy_dedup._util.files import atomic_write, set_aside, where_kept
from scrapy_dedup._util.redis_access import PROBE_SUFFIXES, PROBE_TTL, missing_permissions, probe_key
from scrapy_dedup._util.redis_conn import connect, mask_url
from scrapy_dedup._util.redis_policy import (  # RedisStartupError: importable from here too
    CLOSE_REASON,
    RedisErrorPolicy,
    RedisStartupError,
    RedisUnavailable,
    call_timeout,
    describe,
    is_redis_error,
    is_transient,
    secrets_of,
)
from scrapy_dedup._util.redis_startup import check_at_start
from scrapy_dedup.seen.base import SeenSet
from scrapy_dedup.seen.baseline import SavedFetches
from scrapy_dedup.seen.bloom import START_CAPACITY, BloomSeenSet, CheckpointError
from scrapy_dedup.seen.redis import RedisBloomSeenSet, RedisSeenSet
from scrapy_dedup.settings import (
    DedupConfigError,
    DedupSettings,
    logged_already,
    read_settings,
    refusing_start,
    start_failed,
    unallocatable_bloom,
)
from scrapy_dedup.url.generation import Generation, GenerationChanged
from scrapy_dedup.url.generation import check as generation_check

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request
    from scrapy.spiders import Spider
    from scrapy.statscollectors import StatsCollector
    from scrapy.utils.request import RequestFingerprinterProtocol

logger = logging.getLogger(__name__)

T = TypeVar("T")
CHECKPOINT_FILE = "seen.bloom"
#: fingerprints answered "new" during a Redis outage and not yet in Redis, kept in JOBDIR for the next run
UNCONFIRMED_FILE = "redis-unconfirmed.fps"


class _SeenDupeFilter(BaseDupeFilter):
    """What the three filters share: fingerprinting, counting, logging, closing once."""

    #: short name of the store in log lines
    kind = "seen set"

    def __init__(self, store: SeenSet, *, fingerprinter: RequestFingerprinterProtocol | None = None,
                 debug: bool = False, stats: StatsCollector | None = None):
        if fingerprinter is None:
            from scrapy.utils.request import RequestFingerprinter

            fingerprinter = RequestFingerprinter()
        self.store = store
        self.fingerprinter = fingerprinter
        self.debug = debug
        self.stats = stats
        self.logdupes = True
        self.logger = logger
        self.checked = 0
        self.new = 0
        self._closed = False
        #: what writes this crawl's fingerprints (set by from_crawler; the Redis filters check it at start)
        self.generation: Generation | None = None
        #: the kill-safe JOBDIR journal (Scrapy's scheduler with JOBDIR: :mod:`scrapy_dedup.jobdir`), None otherwise
        self.frontier: JobdirFrontier | None = None
        #: seconds between two runs of :meth:`_on_clock` while the spider is open (``DEDUP_CHECKPOINT_SECONDS``)
        self.clock_seconds = 0.0
        self._clock: Clock | None = None
        #: the fetches this filter saved against Scrapy's own (set by from_crawler when the fingerprinter is ours)
        self.saved_fetches: SavedFetches | None = None
        self.plain_fingerprint: Callable[[Request], bytes] | None = None
        self._saved_request: Request | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Any:
        with refusing_start(crawler):
            return cls._from_crawler(crawler)

    @classmethod
    def _from_crawler(cls, crawler: Crawler) -> Any:
        if hasattr(cls, "request_fingerprint"):  # RFPDupeFilter's old hook (scrapy-redis's too): never called here
            raise DedupConfigError(
                f"{cls.__qualname__} defines request_fingerprint(), which scrapy_dedup's dupefilters never call: "
                "put that logic in a fingerprinter and set REQUEST_FINGERPRINTER_CLASS to it (the add-on keeps it "
                "as the fallback of CanonicalRequestFingerprinter)")
        cfg = read_settings(crawler.settings)
        generation = crawl_generation(crawler.request_fingerprinter, learning=bool(cfg.dust_learn))
        jobdir = job_dir(crawler.settings)
        if jobdir:  # before anything in JOBDIR is read: its fingerprints are of one generation
            check_generation(jobdir, generation, accept=cfg.accept_new_generation,
                             stores=(CHECKPOINT_FILE, UNCONFIRMED_FILE))
        dupefilter = cls._from_settings(crawler, cfg)
        dupefilter.generation = generation
        if dupefilter.frontier is None:
            dupefilter.frontier = _frontier(crawler)
        dupefilter.clock_seconds = cfg.checkpoint_seconds
        dupefilter.plain_fingerprint = plain_fingerprinter(dupefilter.fingerprinter)
        if dupefilter.plain_fingerprint is None:
            warn_without_canonical_fingerprints(dupefilter.kind, dupefilter.fingerprinter)
        elif _writes_the_report(crawler):  # (the count costs Scrapy's fingerprint of each new URL: for the report)
            dupefilter.saved_fetches = SavedFetches()
            dupefilter._set("dedup/url/saved", 0)  # the report's line: present, even when nothing was saved
        crawler.signals.connect(dupefilter._spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(dupefilter._spider_closed, signal=signals.spider_closed)
        return dupefilter

    @classmethod
    def from_spider(cls, spider: Spider) -> Any:
        """scrapy-redis's scheduler builds its dupefilter this way."""
        return cls.from_crawler(spider.crawler)

    @classmethod
    def _from_settings(cls, crawler: Crawler, cfg: DedupSettings) -> Any:
        raise NotImplementedError

    #: Whether the store's marks outlive the process (Redis): then a request is journaled *before* it is
    #: marked, so no kill leaves it seen and unrecorded (and withdrawn if the store says "seen"). A local
    #: filter's marks die with the process and come back from the journal: only new requests are journaled.
    journal_before_mark = True

    def request_seen(self, request: Request) -> bool:
        fingerprint = self.fingerprinter.fingerprint(request)
        self.checked += 1
        frontier = self.frontier
        if frontier is None:
            new = self._add(fingerprint, request)
        elif frontier.take_readmission(fingerprint) is not None:  # pending when a killed run ended: once more
            frontier.admit(request, fingerprint)
            new = True
        elif self.journal_before_mark:
            seq = frontier.admit(request, fingerprint)
            if frontier.disk_full:  # not journaled: must not be marked seen either
                return self._held_back()
            new = self._add(fingerprint, request)
            if not new:
                frontier.withdraw(request, seq)
        else:
            new = self._add(fingerprint, request)
            if new:
                frontier.admit(request, fingerprint)
        if frontier is not None and frontier.disk_full:
            return self._held_back()
        if new:
            self.new += 1
        if self.saved_fetches is not None:
            self._compare_with_plain(request, refused=not new)
        if self.stats is not None:  # kept current: a reader at spider_closed may come before our close
            self.stats.set_value("dedup/seen/checked", self.checked)
            self.stats.set_value("dedup/seen/new", self.new)
        return not new

    def _compare_with_plain(self, request: Request, refused: bool) -> None:
        """Whether Scrapy's own filter would have fetched this refused request: then it is a fetch saved
        (``dedup/url/saved``), credited in :meth:`log` to the switches that changed its URL."""
        plain = self.plain_fingerprint
        assert self.saved_fetches is not None and plain is not None
        raw = scrapy_shape_fingerprint(request.method, request.url, request.body)
        if self.saved_fetches.check(raw, lambda: plain(request), refused):
            self._saved_request = request
            self._set("dedup/url/saved", self.saved_fetches.saved)

    def _add(self, fingerprint: bytes, request: Request) -> bool:
        return self.store.add(fingerprint)

    def _held_back(self) -> bool:
        """JOBDIR's disk is full and the spider closing: a request that cannot be journaled is not scheduled (the
        response that led to it stays pending in the journal, so the next run finds it again)."""
        self._count("dedup/jobdir/held_back_disk_full")
        return True

    def open(self) -> None:
        """Scrapy's scheduler opens its dupefilter once the engine has a slot: the frontier's hook is set then
        (a Scrapy without it stops the start-up here, naming what it lacks)."""
        if self.frontier is not None:
            self.frontier.watch_engine()
        return None

    def close(self, reason: str) -> None:
        """Write the stats and release the store, once (also reached via ``spider_closed``)."""
        if self._closed:
            return None
        self._closed = True
        if self._clock is not None:
            self._clock.stop()
        try:
            self._close_store(reason)
        finally:
            self._write_stats(final=True)
        if self.frontier is not None:  # last, once the store is saved: Scrapy wrote its queue state before
            self.frontier.close()
        return None

    def _spider_opened(self, spider: Spider) -> None:
        if self.clock_seconds and self._clock is None and self._has_clock_work():
            self._clock = start_clock(self.clock_seconds, self._on_clock, name=f"{self.kind}: the periodic "
                                      "checkpoint (DEDUP_CHECKPOINT_SECONDS)", stats=self.stats)

    def _has_clock_work(self) -> bool:
        return self.frontier is not None

    def _on_clock(self) -> None:
        """A store that keeps each fingerprint itself (Redis) compacts the JOBDIR journal on the clock."""
        if self.frontier is not None:
            self.frontier.compact()

    def _spider_closed(self, spider: Spider, reason: str) -> None:
        self.close(reason)

    def _close_store(self, reason: str) -> None:
        self.store.close()

    def clear(self) -> None:
        """Forget every fingerprint (scrapy-redis's scheduler calls this to flush)."""
        self.store.clear()

    def _write_stats(self, final: bool = False) -> None:
        if self.stats is None:
            return
        self.stats.set_value("dedup/seen/checked", self.checked)
        self.stats.set_value("dedup/seen/new", self.new)
        if final:
            for name, measure in (("size_bytes", self.store.size_bytes),
                                  ("estimated_false_positive_rate", self.store.estimated_false_positive_rate)):
                try:
                    value = self._measure(measure)
                except Exception as exc:  # a Redis outage at close must not hide the crawl's result
                    self.logger.warning("%s: could not measure %s: %s", self.kind, name,
                                        describe(exc, self._secrets()))
                    continue
                if value is not None:
                    self.stats.set_value(f"dedup/seen/{name}", value)

    def _measure(self, measure: Callable[[], T]) -> T | None:
        """One measurement of the store for the stats at close (None: skipped)."""
        return measure()

    def _count(self, name: str, n: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(name, n)

    def _set(self, name: str, value: Any) -> None:
        if self.stats is not None:
            self.stats.set_value(name, value)

    def _secrets(self) -> tuple[str, ...]:
        """What an exception text must not show (the Redis filters: the password and its pieces)."""
        return ()

    def log(self, request: Request, spider: Spider) -> None:
        """Scrapy's ``RFPDupeFilter.log``: the same messages and the ``dupefilter/filtered`` stat."""
        if self.debug:
            msg = "Filtered duplicate request: %(request)s (referer: %(referer)s)"
            args = {"request": request, "referer": referer_str(request)}
            self.logger.debug(msg, args, extra={"spider": spider})
        elif self.logdupes:
            msg = (
                "Filtered duplicate request: %(request)s"
                " - no more duplicates will be shown"
                " (see DUPEFILTER_DEBUG to show all duplicates)"
            )
            self.logger.debug(msg, {"request": request}, extra={"spider": spider})
            self.logdupes = False
        stats = self.stats if self.stats is not None else spider.crawler.stats
        stats.inc_value("dupefilter/filtered")
        # Which canonicalization switches made this URL a duplicate (for the crawl-end report).
        fired = getattr(self.fingerprinter, "fired_switches", None)
        if fired is not None:
            for switch in fired(request):
                stats.inc_value(f"dedup/url/filtered/{switch}")
            if request is self._saved_request:  # a fetch Scrapy's own filter would have made: what saved it
                for switch in fired(request):
                    if switch not in PLAIN_SCRAPY_DOES_TOO:
                        stats.inc_value(f"dedup/url/saved/{switch}")
        self._saved_request = None


#: URLs a Redis Bloom filter is sized for when DEDUP_BLOOM_CAPACITY is unset (it is allocated whole, in Redis)
REDIS_BLOOM_CAPACITY = 10_000_000
#: canonicalization switches whose change Scrapy's own fingerprint makes too (w3lib's canonicalize_url sorts the
#: query and drops the fragment): never credited with a saved fetch
PLAIN_SCRAPY_DOES_TOO = frozenset({"sort_query", "drop_fragment"})


def plain_fingerprinter(fingerprinter: Any) -> Callable[[Request], bytes] | None:
    """The fingerprint the crawl would identify a request by without scrapy-dedup: the fingerprinter ours wraps
    (the project's, kept as its fallback) on the request as it is, else Scrapy's default. None when the crawl's
    fingerprinter is not ours: then nothing is canonicalized, and there is nothing to compare."""
    if not isinstance(fingerprinter, CanonicalRequestFingerprinter):
        return None
    while isinstance(fingerprinter, CanonicalRequestFingerprinter):
        fingerprinter = fingerprinter.fallback
    if fingerprinter is not None:
        return fingerprinter.fingerprint
    from w3lib.url import canonicalize_url

    # Scrapy's default fingerprint (scrapy.utils.request.fingerprint), byte for byte, without its per-request cache
    return lambda request: scrapy_shape_fingerprint(request.method, canonicalize_url(request.url), request.body)


def _writes_the_report(crawler: Crawler) -> bool:
    """Whether the crawl has the extension that writes the crawl-end report (the add-on enables it)."""
    from scrapy_dedup.extensions import DedupExtension

    try:
        return crawler.get_extension(DedupExtension) is not None
    except RuntimeError:  # a crawler whose extensions were never built (a filter used on its own)
        return False


def warn_without_canonical_fingerprints(kind: str, fingerprinter: Any) -> None:
    """One WARNING at start: a dupefilter of ours whose fingerprinter is not ours canonicalizes nothing."""
    logger.warning(
        "%s: REQUEST_FINGERPRINTER_CLASS is %s, not scrapy_dedup.CanonicalRequestFingerprinter: requests are "
        "fingerprinted by their URL as it is, so URL variants are fetched again. Set REQUEST_FINGERPRINTER_CLASS "
        "= 'scrapy_dedup.CanonicalRequestFingerprinter' (it wraps the one set now: "
        "DEDUP_FALLBACK_REQUEST_FINGERPRINTER_CLASS), or use ADDONS = {'scrapy_dedup.Addon': 0}",
        kind, class_path(type(fingerprinter)))


class BloomDupeFilter(_SeenDupeFilter):
    """A local Bloom filter of request fingerprints, checkpointed into ``JOBDIR``.

    ``DEDUP_BLOOM_CAPACITY`` and ``DEDUP_BLOOM_ERROR_RATE`` size it (it grows
    past the capacity with the overall error rate still bounded). With
    ``JOBDIR`` set, the filter is saved atomically to ``JOBDIR/seen.bloom`` at
    close and every ``DEDUP_CHECKPOINT_SECONDS`` while requests arrive, and
    read back at start-up. A truncated or corrupt checkpoint is logged at
    ERROR, counted in ``dedup/seen/checkpoint_errors`` and, by
    ``DEDUP_BLOOM_ON_CORRUPT``, either stops the start-up (``fail``, the
    default: an empty filter would silently refetch the whole crawl) or
    starts empty with the bad file kept aside (``empty``; left in place, as the log line says, where it
    cannot be renamed: the next checkpoint replaces it).
    """

    kind = "BloomDupeFilter"
    journal_before_mark = False
    store: BloomSeenSet

    def __init__(self, path: str | None = None, debug: bool = False, *,
                 capacity: int | None = None, error_rate: float = 1e-6,
                 checkpoint_seconds: float = 300.0, on_corrupt: str = "fail",
                 fingerprinter: RequestFingerprinterProtocol | None = None,
                 stats: StatsCollector | None = None, frontier: JobdirFrontier | None = None):
        self.path = Path(path, CHECKPOINT_FILE) if path else None
        self.stats = stats  # (for the load's counter: set again below)
        store = self._load(capacity, error_rate, on_corrupt)
        logger.info("%s: local Bloom filter of %s (it grows with the crawl; DEDUP_BLOOM_CAPACITY sizes it)",
                    self.kind, store.describe())
        super().__init__(store, fingerprinter=fingerprinter, debug=debug, stats=stats)
        self.frontier = frontier
        if frontier is not None and frontier.fingerprints:
            # Admitted since the checkpoint was written (a killed run): seen, whatever the checkpoint says.
            added = sum(store.add(fp) for fp in frontier.fingerprints)
            if added:
                self._count("dedup/jobdir/fingerprints_replayed", added)
        self.clock_seconds = checkpoint_seconds

    @classmethod
    def _from_settings(cls, crawler: Crawler, cfg: DedupSettings) -> "BloomDupeFilter":
        jobdir = job_dir(crawler.settings)
        frontier = _frontier(crawler)  # compacted after each checkpoint (the filter holds what the journal drops)
        try:
            return cls(jobdir, crawler.settings.getbool("DUPEFILTER_DEBUG"),
                       capacity=cfg.bloom_capacity, error_rate=cfg.bloom_error_rate,
                       checkpoint_seconds=cfg.checkpoint_seconds, on_corrupt=cfg.bloom_on_corrupt,
                       fingerprinter=crawler.request_fingerprinter, stats=crawler.stats, frontier=frontier)
        except (MemoryError, OverflowError):  # the filter is allocated whole at start: too large for this machine
            raise unallocatable_bloom("DEDUP_BLOOM_CAPACITY", cfg.bloom_capacity or START_CAPACITY,
                                      "DEDUP_BLOOM_ERROR_RATE", cfg.bloom_error_rate) from None

    def _load(self, given_capacity: int | None, error_rate: float, on_corrupt: str) -> BloomSeenSet:
        capacity = given_capacity or START_CAPACITY  # none given: start small and grow with the crawl
        if self.path is None or not self.path.exists():
            return BloomSeenSet(capacity, error_rate)
        try:
            store = BloomSeenSet.load(self.path)
        except CheckpointError as exc:
            self._count("dedup/seen/checkpoint_errors")
            if on_corrupt == "empty":
                logger.error("%s; starting with an EMPTY filter as DEDUP_BLOOM_ON_CORRUPT='empty' says "
                             "(pages already crawled will be fetched again); %s", exc,
                             where_kept(self.path, set_aside(self.path)))
                return BloomSeenSet(capacity, error_rate)
            logger.error("%s. Refusing to start with an empty filter, which would fetch every page of "
                         "the crawl again: restore the file, or delete it or set "
                         "DEDUP_BLOOM_ON_CORRUPT='empty' to start over.", exc)
            logged_already(exc)
            raise
        if (store.capacity if given_capacity else None, store.error_rate) != (given_capacity, error_rate):
            logger.warning("%s: the checkpoint %s was made with DEDUP_BLOOM_CAPACITY=%d and "
                           "DEDUP_BLOOM_ERROR_RATE=%g; continuing with those (a filter cannot be resized "
                           "without its keys), not with the configured %d and %g",
                           self.kind, self.path, store.capacity, store.error_rate, capacity, error_rate)
        logger.info("%s: resumed %d fingerprints from %s", self.kind, len(store), self.path)
        return store

    def _has_clock_work(self) -> bool:
        return self.path is not None

    def _on_clock(self) -> None:
        self.checkpoint()

    def checkpoint(self) -> None:
        """Save the filter to ``JOBDIR`` now if it changed (atomic: a crash keeps the previous file)."""
        if self.path is None or not self.store.dirty or (self.frontier is not None and self.frontier.disk_full):
            return  # (a full disk: the last checkpoint and the journal hold every fingerprint, see JobdirFrontier)
        started = time.monotonic()
        try:
            self.store.save(self.path)
        except OSError as exc:
            if self.frontier is None or not is_disk_full(exc):
                raise
            self.frontier.disk_is_full(exc)  # the previous checkpoint stays (atomic_write)
            return
        if self.frontier is not None:  # every fingerprint the journal holds is in the saved filter now
            self.frontier.compact()
        self._write_stats()
        logger.debug("%s: checkpoint of %d fingerprints written to %s in %.2fs",
                     self.kind, len(self.store), self.path, time.monotonic() - started)

    def _close_store(self, reason: str) -> None:
        self.checkpoint()
        logger.info("%s at close: %s", self.kind, self.store.describe())

    def clear(self) -> None:
        self.store.clear()
        self.checkpoint()


#: the reason a running crawl is closed with when the start-up of its Redis dupefilter or queue is refused (a
#: permission, TLS, ...)
REFUSED_REASON = "dedup_redis_refused"


def _frontier(crawler: Crawler) -> JobdirFrontier | None:
    """The crawl's frontier journal: with JOBDIR and Scrapy's own scheduler, whose disk queue it makes kill-safe."""
    jobdir = job_dir(crawler.settings)
    if not jobdir or not uses_scrapys_scheduler(crawler):
        return None
    return JobdirFrontier(crawler, jobdir)


class PairedQueue(Protocol):
    """What a Redis dupefilter needs of the queue it is paired with
    (:class:`scrapy_dedup.redis_queue.AckPriorityQueue`)."""

    def mark_and_push(self, request: Request, fingerprint: bytes, force: bool = False) -> bool:
        """Mark ``fingerprint`` seen and, if it was new (or ``force``), queue ``request``: one Redis script."""

    def hold(self, request: Request, fingerprint: bytes | None = None) -> None:
        """Keep ``request`` in the process until Redis answers again (then marked and queued)."""

    def holds(self, fingerprint: bytes) -> bool:
        """Whether a request with this fingerprint is held (it counts as seen)."""


@runtime_checkable
class PairableDupeFilter(Protocol):
    """What :class:`~scrapy_dedup.redis_queue.AckPriorityQueue` needs of the scheduler's dupefilter to mark a
    request seen and queue it in one Redis script; checked once, when the queue pairs."""

    #: the Redis client: the queue pairs only with a dupefilter on its own server and database
    server: Any
    #: which of the queue's scripts writes the mark: ``"set"`` (``SADD``) or ``"bloom"`` (``BITFIELD``)
    script_kind: str

    def pair_queue(self, queue: PairedQueue) -> None:
        """From now on, hand each new request to ``queue.mark_and_push``."""

    def seen_keys(self) -> list[str]:
        """The Redis key(s) the script may write (one hash slot with the queue's key on Redis Cluster)."""

    def script_args(self, fingerprint: bytes) -> tuple[str, bytes]:
        """``(key, argument)``: what the script needs to mark ``fingerprint`` seen."""

    def confirmed(self, fingerprint: bytes) -> None:
        """The script marked ``fingerprint`` seen: remember it locally."""

    def forget_cached(self) -> None:
        """Forget the fingerprints known locally: the server rolled back, and may have lost them."""


class _RedisDupeFilter(_SeenDupeFilter):
    """Redis connection, key, start-up report, persistence; every Redis call goes through :meth:`_redis`.

    Outages follow ``DEDUP_REDIS_ON_ERROR`` (:mod:`scrapy_dedup._util.redis_policy`).
    A request met while Redis is unreachable and the policy does not (or no
    longer) wait is treated as unseen: scheduled, never lost; its fingerprint is
    kept here (a link met again is still filtered) and written to Redis when it
    is back, or, when ``retry`` gave up and the spider closes, kept in
    ``JOBDIR/redis-unconfirmed.fps`` for the next run (docs/reliability.md).
    """

    store: RedisSeenSet | RedisBloomSeenSet

    def __init__(self, crawler: Crawler, cfg: DedupSettings):
        self.key = key = self._redis_key(crawler, cfg)
        self.server = server = connect(cfg.redis_url, cfg.redis_params,
                                       timeout=call_timeout(cfg.redis_on_error, cfg.redis_retry_seconds))
        super().__init__(self._store(server, key, cfg), fingerprinter=crawler.request_fingerprinter,
                         debug=crawler.settings.getbool("DUPEFILTER_DEBUG"), stats=crawler.stats)
        self.url = cfg.redis_url
        #: the setting the URL came from (DEDUP_REDIS_URL, scrapy-redis's REDIS_URL, ..., or "default")
        self.url_source = cfg.source_of("DEDUP_REDIS_URL")
        self.persist = cfg.redis_persist
        self.flush_on_start = cfg.redis_flush_on_start
        self.accept_new_generation = cfg.accept_new_generation
        #: the generation record is still to be written (Redis refused writes at start)
        self._generation_pending = False
        self.policy = RedisErrorPolicy(cfg.redis_on_error, cfg.redis_retry_seconds, name=self.kind, url=cfg.redis_url,
                                       secrets=secrets_of(cfg.redis_url, cfg.redis_params), stats=crawler.stats,
                                       key=key)
        self.crawler = crawler
        jobdir = job_dir(crawler.settings)
        self.unconfirmed_path = Path(jobdir, UNCONFIRMED_FILE) if jobdir else None
        self.startup_seconds = cfg.redis_startup_seconds
        self._started = False
        self._opening = False  # (True inside open(): a refusal there fails Scrapy's start of the crawl)
        #: Redis could not be reached at start: the spider is being closed, every request is refused
        self._refused = False
        #: fingerprints answered "new" while Redis was unreachable, not yet written to Redis
        self._unconfirmed: set[bytes] = set()
        self._close_requested = False
        self._measure_failed = False
        #: the scheduler queue that marks a fingerprint seen and queues its request in one Redis script
        #: (:class:`scrapy_dedup.redis_queue.AckPriorityQueue` on the same server), or None
        self.atomic_queue: PairedQueue | None = None

    @classmethod
    def _from_settings(cls, crawler: Crawler, cfg: DedupSettings) -> Any:
        dupefilter = cls(crawler, cfg)
        dupefilter._require_reachable()
        return dupefilter

    def _require_reachable(self) -> None:
        """Redis answers within ``DEDUP_REDIS_STARTUP_SECONDS``, or the crawl cannot start (under either policy).

        Checked where the filter is built (``from_crawler``; scrapy-redis's scheduler: ``from_spider``, in its
        ``open``), inside Scrapy's start of the crawl: a :class:`RedisStartupError` there fails the start, so
        ``scrapy crawl`` exits with status 1, as for a configuration error (one ERROR line, logged here).
        """
        check_at_start(self.server, self.url, secrets=self.policy.secrets, what=self.kind,
                       wait_seconds=self.startup_seconds, log=logger, key_setting="DEDUP_REDIS_KEY",
                       url_setting=self.url_source, logged=logged_already)

    @staticmethod
    def _store(server: Any, key: str, cfg: DedupSettings) -> SeenSet:
        """The seen set of this filter class in Redis at ``key``."""
        raise NotImplementedError

    @staticmethod
    def _redis_key(crawler: Crawler, cfg: DedupSettings) -> str:
        spider = getattr(crawler, "spider", None)
        name = getattr(spider, "name", None) or getattr(crawler.spidercls, "name", None) or "default"
        return cfg.redis_key % {"spider": name}  # a template settings.py checked

    def _secrets(self) -> tuple[str, ...]:
        return self.policy.secrets

    def _redis(self, call: Callable[..., T], *args: Any) -> T:
        """The one place Redis is called from, under the outage policy (may raise :class:`RedisUnavailable`)."""
        return self.policy.call(call, *args)

    def _add(self, fingerprint: bytes, request: Request) -> bool:
        if not self._started:
            self._start()
        queue = self.atomic_queue
        if (fingerprint in self._unconfirmed or fingerprint in self.store.cache
                or (queue is not None and queue.holds(fingerprint))):
            return False  # known here without asking Redis (and no sign of whether Redis is up)
        errors_before = self.policy.errors
        try:
            if self._close_requested:  # closing for want of Redis: no more attempts, each could block
                raise RedisUnavailable(CLOSE_REASON)
            new = self._write(fingerprint, request, False)
            if not new and self.policy.errors != errors_before:
                # An attempt failed before this answer: it may have reached Redis and added the key
                # before the reply was lost, so "seen" may be our own first attempt. Fetch it: a
                # possible duplicate fetch during an outage, never a page lost to it. (Paired with the
                # queue, push it anyway: the same bytes, no second entry if it is still queued.)
                if queue is not None:
                    self._write(fingerprint, request, True)
                new = True
                self._count("dedup/redis/retried_seen_kept")
        except RedisUnavailable:
            if queue is None:
                self._unconfirmed.add(fingerprint)
            else:
                queue.hold(request, fingerprint)  # marked and queued together when Redis answers again
            self._count("dedup/redis/fail_open")
            if self.policy.gave_up:
                self._close_spider()
            return True
        if queue is not None:
            self.confirmed(fingerprint)
        if self._generation_pending:  # Redis took a write: the record goes with it
            try:
                self._record_generation()
            except Exception as exc:  # (non-transient: the next write tries again; never out of request_seen)
                logger.debug("%s: generation record not written: %s", self.kind, describe(exc, self._secrets()))
        if self._unconfirmed:
            self._replay()
        return new

    def _write(self, fingerprint: bytes, request: Request, force: bool) -> bool:
        """Add the fingerprint in Redis, under the outage policy; paired, also queue the request in one step."""
        if self.atomic_queue is None:
            return self._redis(self.store.add, fingerprint)
        return self._redis(self.atomic_queue.mark_and_push, request, fingerprint, force)

    # --- marking seen and queueing in one step (set up by scrapy_dedup.redis_queue.AckPriorityQueue) ---

    def pair_queue(self, queue: PairedQueue) -> None:
        """Let ``queue`` mark each new fingerprint seen and push its request in one Redis script from now on
        (no kill between ``request_seen`` and ``push`` can lose the request: :mod:`scrapy_dedup.redis_queue`).
        The answer to the scheduler, the log and every stat stay what they were."""
        self.atomic_queue = queue

    # :class:`PairableDupeFilter`: what the paired queue's script needs of the store

    @property
    def script_kind(self) -> str:
        return self.store.script_kind

    def seen_keys(self) -> list[str]:
        return list(getattr(self.store, "shard_keys", [self.store.key]))

    def script_args(self, fingerprint: bytes) -> tuple[str, bytes]:
        return self.store.script_args(fingerprint)

    def confirmed(self, fingerprint: bytes) -> None:
        self.store.confirmed(fingerprint)

    def forget_cached(self) -> None:
        self.store.cache.clear()

    def _replay(self) -> None:
        """Write the fingerprints answered "new" during the outage to Redis (stops at the next failure)."""
        replayed = 0
        for fingerprint in list(self._unconfirmed):
            try:
                self._redis(self.store.add, fingerprint)
            except RedisUnavailable:
                break
            self._unconfirmed.discard(fingerprint)
            replayed += 1
        if replayed:
            self._count("dedup/redis/replayed", replayed)

    def _close_spider(self) -> None:
        """Ask the engine to close the spider with ``dedup_redis_unavailable`` (once, outside this call)."""
        if not self._close_requested:
            self._close_requested = close_spider_soon(self.crawler, CLOSE_REASON)

    def open(self) -> None:
        super().open()
        if not self._started:
            self._opening = True
            self._start()
        return None

    def _spider_opened(self, spider: Spider) -> None:
        if not self._started:  # scrapy-redis's scheduler never calls open(): start before the first request
            try:
                self._start()
            except RedisStartupError:  # told; the crawl is closed before it fetches anything (_start)
                return
        super()._spider_opened(spider)

    def _start(self) -> None:
        """Flush if asked, prepare the store, say how much the key holds (once); clear errors at start-up.

        Redis answered when the filter was built (:meth:`_require_reachable`). Gone again since,
        under ``retry`` (the policy gives up while the store is prepared), the start is refused
        (:meth:`_refuse_start`); under ``fail_open`` it is an outage like any other, and the crawl
        starts. Refused credentials and other configuration errors stop the start-up with
        :class:`RedisStartupError` (masked URL, no password), logged first: Scrapy's own tracebacks
        of a start-up that failed follow it (see docs/reliability.md).
        """
        self._started = True
        try:
            self._start_or_raise()
        except RedisStartupError as exc:
            logger.error("%s", exc)
            logged_already(exc)
            if not self._opening:  # the crawl runs (scrapy-redis's scheduler never calls open), and a raise would
                # end one request or signal handler only: refuse every request and close the crawl
                self._refused = True
                stop_at_start(self.crawler, REFUSED_REASON)
            else:  # raised out of the engine's start: the crawl fails to start
                start_failed(self.crawler)
            raise

    def _start_or_raise(self) -> None:
        try:
            if self._unreachable_at_start():
                return
            self._start_checked()
        except RedisUnavailable as exc:
            if self.policy.mode == "retry":
                self._refuse_start(f"{exc} (DEDUP_REDIS_RETRY_SECONDS={self.policy.retry_seconds:g})")
                return
        except Exception as exc:
            if is_transient(exc) or not is_redis_error(exc):
                raise
            hint = f"check {self.url_source} and DEDUP_REDIS_PARAMS (password, TLS options)"
            if type(exc).__name__ in ("MovedError", "AskError"):
                hint = ("DEDUP_REDIS_URL is a node of a Redis Cluster: set DEDUP_REDIS_PARAMS = "
                        "{'redis_cls': 'redis.cluster.RedisCluster'}")
            raise RedisStartupError(
                f"{self.kind}: cannot use Redis at {mask_url(self.url)} ({describe(exc, self.policy.secrets)}); "
                f"{hint}") from None
        # From here on every Redis error is an outage under the policy: none may escape request_seen.
        self.policy.running = True

    def _unreachable_at_start(self) -> bool:
        """True when the queue already found its Redis unreachable (and said so) and closes the crawl: a request
        marked seen here could not be queued there."""
        if closing_reason(self.crawler) == CLOSE_REASON:
            self._refused = self._close_requested = True
            return True
        return False

    def _refuse_start(self, why: str) -> None:
        """Redis went away between the filter's build and its start (the policy gave up while the store was
        prepared): inside ``open`` a :class:`RedisStartupError` (the start fails, as :meth:`_require_reachable`'s);
        started later (scrapy-redis's scheduler never calls ``open``), one ERROR line, then the spider closes
        before fetching anything, since a raise there would end one request or signal handler only.

        Meanwhile every request is refused (counted in ``dedup/redis/refused_at_start``,
        not marked seen anywhere, not journaled): only start requests can arrive, and the
        next run makes them again. Without an engine (a filter used on its own) it raises.
        """
        if self._opening:
            raise RedisStartupError(f"{self.kind}: {why}; the crawl cannot start")
        self._refused = self._close_requested = True
        self._set("dedup/redis/unavailable_at_start", 1)
        if not stop_at_start(self.crawler, CLOSE_REASON):
            raise RedisStartupError(f"{self.kind}: {why}; the crawl cannot start")
        logger.error("%s: %s; closing the spider with reason %r before it fetches anything", self.kind, why,
                     CLOSE_REASON)

    def request_seen(self, request: Request) -> bool:
        if not self._started:
            self._start()
        if self._refused:  # closing at start: nothing may be queued (see _refuse_start)
            self._count("dedup/redis/refused_at_start")
            return True
        return super().request_seen(request)

    def log(self, request: Request, spider: Spider) -> None:
        if not self._refused:  # a refused request is no duplicate (counted in dedup/redis/refused_at_start)
            super().log(request, spider)

    def _start_checked(self) -> None:
        where = f"Redis key {self.key!r} at {mask_url(self.url)} (from {self.url_source})"
        self._refuse_missing_permissions()
        if self.flush_on_start:
            self._redis(self.store.clear)
            self._redis(self.server.delete, self.generation_key)
            # the keys really cleared (a Bloom filter's shards and layout, what wrote them)
            keys = [*self.store.data_keys(), self.generation_key]
            logger.info("%s: Redis key(s) %s at %s deleted at start (DEDUP_REDIS_FLUSH_ON_START)", self.kind,
                        ", ".join(map(repr, keys)), mask_url(self.url))
        wrong = self._redis(self.store.wrong_types)
        if wrong:
            found = ", ".join(f"{key!r} holds a {kind}, not a {want}" for key, kind, want in wrong)
            raise RedisStartupError(
                f"{self.kind}: at {mask_url(self.url)} the Redis key {found} (written by another program or "
                "another dupefilter class?): use another DEDUP_REDIS_KEY, delete the key, or set "
                "DEDUP_REDIS_FLUSH_ON_START=True to start over")
        self._redis(self._prepare)
        held = self._redis(len, self.store)
        self._check_generation(held > 0)
        self._load_unconfirmed()
        held = held or self._redis(len, self.store)  # (what the previous run's outage left, written now)
        if held:
            logger.info("%s: %s already holds %s fingerprints; those requests will be skipped as seen. "
                        "To start fresh set DEDUP_REDIS_FLUSH_ON_START=True or another DEDUP_REDIS_KEY.",
                        self.kind, where, f"about {held}" if isinstance(self.store, RedisBloomSeenSet) else held)
        else:
            logger.info("%s: %s is empty; fingerprints will be shared by every process using it.",
                        self.kind, where)

    def _prepare(self) -> None:
        pass

    def _refuse_missing_permissions(self) -> None:
        """Run every command the crawl will send, on probe keys shaped like the real ones (writes) or on the real
        ones (reads): one start-up error naming each one the Redis user may not run (``_util/redis_access.py``)."""
        writes = [("SET", self.generation_key, "probe"), *self._write_probes()]
        if self.store.ttl:
            writes += [("EXPIRE", key, PROBE_TTL) for _, key, *_ in list(writes)]
        if self.flush_on_start or not self.persist:
            writes += [("DEL", key) for _, key, *_ in list(writes)]
        probes = [(command, probe_key(key), *args) for command, key, *args in writes]
        probes += [("TYPE", key) for key in self.store.data_keys()] + [("GET", self.generation_key)]
        probes += self._read_probes()
        missing = self._redis(missing_permissions, self.server, probes, {key for _, key, *_ in probes
                                                                         if key.endswith(PROBE_SUFFIXES)})
        if missing:
            raise RedisStartupError(
                f"{self.kind}: the Redis user of {mask_url(self.url)} (from {self.url_source}) may not run what the "
                f"crawl needs: {'; '.join(missing)}. Grant it (ACL SETUSER) or use another user or DEDUP_REDIS_KEY")

    def _write_probes(self) -> list[tuple[Any, ...]]:
        """``(command, real key, *args)`` of each write the store makes (run on the key's probe key)."""
        return []

    def _read_probes(self) -> list[tuple[Any, ...]]:
        """``(command, key, *args)`` of each read the store makes (run on the real key)."""
        return []

    @property
    def generation_key(self) -> str:
        """The Redis key recording what wrote the seen set's fingerprints (:mod:`scrapy_dedup.url.generation`)."""
        return f"{self.key}:generation"

    def _check_generation(self, holds: bool) -> None:
        """Refuse to start on a seen set another generation wrote (one line, the start-up error), or record ours;
        ``holds``: the seen set holds fingerprints."""
        if self.generation is None:  # built without from_crawler: nothing to compare
            return
        recorded = self._redis(self.server.get, self.generation_key)
        try:
            write, warning = generation_check(
                self.generation, recorded, holds_keys=holds, accept=self.accept_new_generation,
                where=f"{self.kind}: Redis key {self.key!r} at {mask_url(self.url)}")
        except GenerationChanged as exc:
            raise RedisStartupError(str(exc)) from None
        if warning:
            logger.warning("%s", warning)
        if write:
            self._generation_pending = True
            self._record_generation()

    def _record_generation(self) -> None:
        """Write the generation record, one attempt outside the outage policy: a Redis that refuses writes now
        (full, read-only) gets it with the first fingerprint it takes (:meth:`_add`), never a set without one."""
        assert self.generation is not None
        try:
            self.server.set(self.generation_key, self.generation.to_json())
        except Exception as exc:
            if not is_transient(exc):
                raise
            return
        self._generation_pending = False

    def clear(self) -> None:
        if self._refused or closing_reason(self.crawler) == CLOSE_REASON:  # no Redis to flush
            return
        self._redis(self.store.clear)
        self._redis(self.server.delete, self.generation_key)  # an empty set takes the next crawl's generation
        self._unconfirmed.clear()

    def _close_store(self, reason: str) -> None:
        if self._refused or (not self._started and closing_reason(self.crawler) == CLOSE_REASON):
            # the start-up (ours or the queue's) said it all: nothing was recorded, nothing is left to write
            self.store.close()
            return
        try:
            if self._unconfirmed and not self.policy.gave_up:
                self.policy.probe_now()  # a last try, even within a pause between probes
                self._replay()
            if not self.persist:
                self._redis(self.store.clear)
                self._redis(self.server.delete, self.generation_key)
                logger.info("%s: deleted Redis key %r at close (DEDUP_REDIS_PERSIST=False)", self.kind, self.key)
        except RedisUnavailable as exc:
            if not self.policy.gave_up:  # after giving up the outage has had its lines
                logger.warning("%s: could not finish with Redis at close: %s", self.kind, exc)
        self._report_unrecorded(reason)
        self.store.close()

    def _report_unrecorded(self, reason: str) -> None:
        """Count (``dedup/redis/unrecorded``) and say in one line what the close leaves unrecorded in Redis.

        These are the requests let through as new while Redis could not record them
        (``fail_open``, or ``retry`` once it gave up) and not written to it since.
        Closing with ``dedup_redis_unavailable`` always gets the line, with its count.
        """
        unrecorded = len(self._unconfirmed)
        if not unrecorded and reason != CLOSE_REASON:
            return
        self._set("dedup/redis/unrecorded", unrecorded)
        where = self._save_unconfirmed() if unrecorded else ""
        if reason == CLOSE_REASON:
            logger.error("%s: spider closed with reason %r: %d requests were let through without being recorded in "
                         "Redis (dedup/redis/unrecorded)%s; the requests still queued were not fetched%s",
                         self.kind, CLOSE_REASON, unrecorded, where,
                         " (JOBDIR keeps them for the next run)" if self.unconfirmed_path is not None
                         else " (without JOBDIR they are dropped; set JOBDIR to resume a crawl)")
        else:
            logger.warning("%s: %d requests let through as new during the Redis outage were never recorded in "
                           "Redis (dedup/redis/unrecorded)%s", self.kind, unrecorded, where)

    def _save_unconfirmed(self) -> str:
        """Keep the fingerprints Redis never received in JOBDIR (atomically); say where, or what that costs."""
        if self.unconfirmed_path is None:
            return "; without JOBDIR they are forgotten: a later crawl may fetch those pages again"
        lines = "".join(f"{fp.hex()}\n" for fp in sorted(self._unconfirmed))
        old = self.unconfirmed_path.read_text() if self.unconfirmed_path.exists() else ""
        atomic_write(self.unconfirmed_path, lambda f: f.write((old + lines).encode("ascii")))
        return f"; their fingerprints are kept in {self.unconfirmed_path} and written to Redis when the next run starts"

    def _load_unconfirmed(self) -> None:
        """Write the previous run's unconfirmed fingerprints (JOBDIR) to Redis, then delete the file."""
        path = self.unconfirmed_path
        if path is None or not path.exists():
            return
        fingerprints = []
        for number, line in enumerate(path.read_text(encoding="ascii", errors="replace").splitlines(), 1):
            try:
                fingerprints.append(bytes.fromhex(line.strip()))
            except ValueError:
                logger.warning("%s: %s line %d is not a hex fingerprint; skipped", self.kind, path, number)
        for fingerprint in fingerprints:
            self._redis(self.store.add, fingerprint)
        path.unlink()
        self._count("dedup/redis/replayed", len(fingerprints))
        logger.info("%s: wrote %d fingerprints of the previous run's Redis outage from %s to Redis",
                    self.kind, len(fingerprints), path)

    def close(self, reason: str) -> None:
        """Close as every filter does, then the connection (last: the stats at close measure through it)."""
        try:
            super().close(reason)
        finally:
            self.server.close()

    def _measure(self, measure: Callable[[], T]) -> T | None:
        """Measured only while Redis answers, one attempt, once started: a size at close is not worth waiting
        out an outage."""
        if (not self._started or self.policy.down_since is not None or self._close_requested
                or self._measure_failed):  # (never started: scrapy-redis's scheduler never asked it)
            return None
        try:
            return measure()
        except Exception:
            self._measure_failed = True  # the next measurement would only wait for the same timeout
            raise


class RedisDupeFilter(_RedisDupeFilter):
    """An exact set of binary fingerprints in Redis, shared by every process of a spider.

    One ``SADD`` per request not yet confirmed by this process; a small local
    cache of confirmed fingerprints answers recurring links without a round
    trip. The key (``DEDUP_REDIS_KEY``, one per spider by default) is kept
    after the crawl unless ``DEDUP_REDIS_PERSIST`` is False.
    """

    kind = "RedisDupeFilter"

    @staticmethod
    def _store(server: Any, key: str, cfg: DedupSettings) -> RedisSeenSet:
        return RedisSeenSet(server, key, ttl=cfg.redis_ttl)

    def _write_probes(self) -> list[tuple[Any, ...]]:
        return [("SADD", self.key, "probe")]

    def _read_probes(self) -> list[tuple[Any, ...]]:
        return [("SCARD", self.key), ("SISMEMBER", self.key, "probe")]


class RedisBloomDupeFilter(_RedisDupeFilter):
    """A Bloom filter in Redis bitmaps, shared by every process of a spider.

    Sized by ``DEDUP_BLOOM_CAPACITY`` and ``DEDUP_BLOOM_ERROR_RATE`` and
    allocated in full at start-up (3.75 bytes per URL of capacity at 1e-6);
    one ``BITFIELD`` command per request not yet confirmed by this process,
    atomic across processes. ``DEDUP_REDIS_BLOOM_SHARDS`` splits it over several keys
    for Redis Cluster.
    """

    kind = "RedisBloomDupeFilter"
    store: RedisBloomSeenSet

    @staticmethod
    def _store(server: Any, key: str, cfg: DedupSettings) -> RedisBloomSeenSet:
        try:
            return RedisBloomSeenSet(server, key, cfg.bloom_capacity or REDIS_BLOOM_CAPACITY, cfg.bloom_error_rate,
                                     shards=cfg.redis_bloom_shards, ttl=cfg.redis_ttl)
        except ValueError as exc:
            raise DedupConfigError(str(exc)) from None

    def _write_probes(self) -> list[tuple[Any, ...]]:
        return [*(("BITFIELD", shard, "SET", "u1", 0, 1) for shard in self.store.shard_keys),
                ("HSET", self.store.meta_key, "probe", "1")]

    def _read_probes(self) -> list[tuple[Any, ...]]:
        return [*(probe for shard in self.store.shard_keys
                  for probe in (("BITFIELD_RO", shard, "GET", "u1", 0), ("BITCOUNT", shard))),
                ("HGETALL", self.store.meta_key)]

    def _prepare(self) -> None:
        self.store.prepare()
        logger.info("%s: Bloom filter of %d bits x %d shard(s), %d hashes, for %d URLs at %g (%d MiB of Redis)",
                    self.kind, self.store.shard_bits, self.store.shards, self.store.hashes,
                    self.store.capacity, self.store.error_rate,
                    self.store.shard_bits * self.store.shards // 8 // 2 ** 20)

    def _write_stats(self, final: bool = False) -> None:
        if self.stats is not None and self.store.refused:
            self.stats.set_value("dedup/seen/bloom_refused", self.store.refused)
        if final and self.stats is not None and self._started:
            try:
                held = self._measure(self.store.__len__)
                if held is not None and held > self.store.capacity:
                    logger.warning("%s: about %d fingerprints in a filter sized for %d: the false-positive "
                                   "rate is now above DEDUP_BLOOM_ERROR_RATE; raise DEDUP_BLOOM_CAPACITY "
                                   "for the next crawl (with a fresh key)", self.kind, held, self.store.capacity)
            except Exception:  # measured best-effort at close
                pass
        super()._write_stats(final)
