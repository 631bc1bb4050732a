"""``DedupExtension``: the crawl's content state, and the crawl-end duplication report.

One Scrapy extension per crawl holds what the content components share: the
extraction policies, the fingerprints of responses (remembered weakly per response
object), the content engine and its store, the audit and crawl logs, the
checkpoints. ``ContentFingerprintMiddleware``, ``NearDuplicatePipeline`` and
``DustLearningMiddleware`` reach it with ``crawler.get_extension(DedupExtension)``
(extensions are built before middlewares and pipelines). The store (memory or
Redis) is built when the first of them asks for it, so the extension alone opens
no connection, and its report then says the content layer is not enabled.

A response is fingerprinted once, whoever asks first (DUST learning, a downloader
middleware, sees it before the spider middleware), and judged once: the verdict,
taken by ``ContentFingerprintMiddleware``, reuses the fingerprint.

``DuplicationReportExtension`` is the same class under its former name.
"""
from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import weakref
from collections import Counter, OrderedDict
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from lxml import etree
from scrapy import Request, signals
from scrapy.http import Response, TextResponse
from scrapy.utils.job import job_dir
from w3lib.url import safe_url_string

from scrapy_dedup.clock import Clock, start_clock
from scrapy_dedup.content.boilerplate import BoilerplateJudge, BoilerplateLearner, BoilerplateRule
from scrapy_dedup.content.judge import PageJudge, PageVerdict, memory_store
from scrapy_dedup.content.boilerplate import Judgement as BoilerplateJudgement
from scrapy_dedup.content.engine import (
    ContentDeduplicator,
    ContentFingerprint,
    ContentFingerprinter,
    Verdict,
    verify_rule_from_settings,
)
from scrapy_dedup.content.extract import POLICY_KEYS, ExtractionPolicy, extract_text
from scrapy_dedup.content.paragraphs import ParagraphCheck, ParagraphDeduplicator, text_blocks
from scrapy_dedup.content.structured import SNIFF_BYTES, looks_binary, structured_kind
from scrapy_dedup.jobdir import disk_full_reported, report_disk_full
from scrapy_dedup._util.files import set_aside, where_kept
from scrapy_dedup._util.redis_access import missing_permissions, speaks_tls
from scrapy_dedup._util.redis_conn import delete_matching, glob_escape, mask_url
from scrapy_dedup._util.redis_policy import RedisErrorPolicy, RedisStartupError, RedisUnavailable, describe, \
    is_transient, secrets_of
from scrapy_dedup.content.report import format_percent
from scrapy_dedup.content.representative import parse_timestamp
from scrapy_dedup.settings import DedupConfigError, DedupSettings, logged_already, read_settings, unallocatable_bloom
from scrapy_dedup.url.policy import DomainMap

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.spiders import Spider
    from typing_extensions import Self

logger = logging.getLogger(__name__)

EXTENSION_PATH = "scrapy_dedup.extensions.DedupExtension"
CHECKPOINT_NAME = "dedup-content.idx"
#: the paragraph seen set (local Bloom filter) in JOBDIR: a resumed crawl does not emit its blocks again
PARAGRAPHS_CHECKPOINT_NAME = "dedup-paragraphs.bloom"
#: fingerprints remembered by text digest: an exact duplicate's text (a mirror, a tracking or
#: session variant the URL layer could not fold) is not tokenized and hashed again. A few KB each.
FINGERPRINT_CACHE_SIZE = 512


def _pct(part: int, whole: int) -> str:
    return format_percent(part, whole)


def extraction_policies(cfg: DedupSettings) -> DomainMap[ExtractionPolicy]:
    """The crawl's extraction policy per host: ``DEDUP_STRIP_*``, ``DEDUP_MIN_WORDS``, ``DEDUP_MAX_BYTES``,
    overridden per domain by ``DEDUP_CONTENT_POLICIES``."""
    default = ExtractionPolicy.from_values({key: getattr(cfg, key) for key in POLICY_KEYS})
    per_domain = {}
    for domain, overrides in cfg.content_policies.items():
        policy = per_domain[domain] = default.overridden(overrides, f"DEDUP_CONTENT_POLICIES[{domain!r}]")
        if policy.min_words < cfg.shingle_size:
            raise DedupConfigError(
                f"DEDUP_CONTENT_POLICIES: min_words ({policy.min_words}) must be at least "
                f"DEDUP_SHINGLE_SIZE ({cfg.shingle_size})"
            )
    return DomainMap(default, per_domain)


class _JsonLines:
    """An append-only JSON Lines file, flushed per line (a crawl may be killed at any time)."""

    def __init__(self, path: str):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed at spider close

    def write(self, record: dict[str, Any]) -> None:
        self.file.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()


@dataclass
class _ResponsePage:
    """What one response gave, remembered weakly per response object until it is judged."""

    url: str
    #: why it has no fingerprint: ``skipped_non_text``, ``skipped_non_html`` or ``extraction_errors``
    skipped: str | None = None
    policy: ExtractionPolicy | None = None
    fingerprint: ContentFingerprint | None = None
    #: the main text cut at block elements, when its host learns boilerplate
    blocks: list[str] | None = None
    #: its <title> (with its blocks; None without one): a near match across two titles is not taken
    title: str | None = None
    truncated: bool = False
    judged: bool = False
    verdict: Verdict | None = None
    #: the page its URL serves at the URL-level strictness when not its verdict's cluster (content/judge.py)
    url_page: str | None = None
    #: its blocks checked for repeats (paragraph dedup on for its host), once judged
    paragraphs: ParagraphCheck | None = None


class DedupExtension:
    """For ``EXTENSIONS``: the crawl's content state (shared by the content components) and the report."""

    def __init__(self, crawler: "Crawler"):
        self.crawler = crawler
        self.stats = crawler.stats
        self.cfg = cfg = read_settings(crawler.settings)
        self.policies = extraction_policies(cfg)
        # One fingerprinter per distinct min_words (degenerate pages are decided per host).
        self._fingerprinters: dict[int, ContentFingerprinter] = {}
        self._fingerprint_cache: OrderedDict[tuple[int, bytes], ContentFingerprint] = OrderedDict()
        self._cache_lock = threading.Lock()  # the pipeline's DEDUP_CONTENT_FIELD path may run in threads
        self._pages: "weakref.WeakKeyDictionary[Response, _ResponsePage]" = weakref.WeakKeyDictionary()
        # The content state proper, built by open_content() (None: no content component asked).
        self.engine: ContentDeduplicator | None = None
        self.store: Any = None
        #: the decision rule with per-host boilerplate learning (None: no host learns it)
        self.boilerplate: BoilerplateJudge | None = None
        #: paragraph-level exact dedup (None: no host has it on)
        self.paragraphs: ParagraphDeduplicator | None = None
        self._paragraph_policy: RedisErrorPolicy | None = None
        self._redis_policy: RedisErrorPolicy | None = None
        #: what only a crawl meets, beside the engine's page counts (see _write_stats)
        self.events: Counter[str] = Counter()
        self._cluster_sizes: Counter[str] = Counter()
        self._canary_warned: set[str] = set()
        self._structured_logged = False
        self.audit: _JsonLines | None = None
        self.crawl_log: _JsonLines | None = None
        #: the page judge (content/judge.py), built by open_content() with the engine
        self.judge: PageJudge | None = None
        #: a kept page's URL -> the fingerprint of the request that fetched it, when its URL alone does not
        #: identify that request (a fragment the crawl keeps, a POST): what tells a refetch (_same_request)
        self._kept_by_request: dict[str, bytes] = {}
        self._jobdir = job_dir(crawler.settings)
        self._checkpoint_loop: Clock | None = None  # every DEDUP_CHECKPOINT_SECONDS (memory index + JOBDIR)
        self._saved_pages = -1  # pages in the store at the last checkpoint (skip unchanged saves)
        self._closed = False
        self._store_failing = False
        crawler.signals.connect(self._spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(self.close, signal=signals.engine_stopped)
        #: requests the scheduler's dupefilter was asked about, and those it filtered, as the engine signals them:
        #: the report's URL counts with a dupefilter other than ours (scrapy-redis's counts no dupefilter/filtered)
        self.requests: Counter[str] = Counter()
        crawler.signals.connect(self._request_scheduled, signal=signals.request_scheduled)
        crawler.signals.connect(self._request_dropped, signal=signals.request_dropped)
        if self.cfg.log_file:  # every redirect the downloader got, before RedirectMiddleware follows it
            crawler.signals.connect(self._record_redirect, signal=signals.response_downloaded)

    @classmethod
    def from_crawler(cls, crawler: "Crawler") -> "Self":
        return cls(crawler)

    @classmethod
    def of(cls, crawler: "Crawler", component: str) -> "DedupExtension":
        """The crawl's extension, for ``component`` that needs it; a start-up error naming what to add if absent."""
        extension = crawler.get_extension(cls)
        if extension is None:
            raise DedupConfigError(
                f"{component} needs the scrapy-dedup extension, which holds the crawl's content state: add "
                f"EXTENSIONS = {{'{EXTENSION_PATH}': 500}} (or use ADDONS = {{'scrapy_dedup.Addon': 0}})"
            )
        return extension

    # --- the content state, built on first use ---

    def open_content(self) -> "DedupExtension":
        """Build the store, the engine and the logs if not yet built (a content component's start-up)."""
        if self.engine is None:
            cfg = self.cfg
            #: what redis-py's exception texts must not show (the password, and any piece of it)
            self._secrets = secrets_of(cfg.redis_url, cfg.redis_params) if cfg.content_backend == "redis" else ()
            self.store = self._build_store(cfg)
            self._redis_policy = self._store_policy(cfg)
            policies = (self.policies.default, *self.policies.per_domain.values())
            # the one page judge; the URL-level sameness kept when a crawl log or DUST learning reads it
            self.judge = PageJudge.from_params(
                cfg, self.store, boilerplate=False, min_words=self.policies.default.min_words,
                representative=cfg.representative, times_are_arrivals=not cfg.timestamp_field,
                url_sameness=bool(cfg.log_file) or cfg.dust_learn)
            self.engine = self.judge.engine
            self._fingerprinters.setdefault(self.policies.default.min_words, self.engine.fingerprinter)
            if any(p.boilerplate for p in policies):
                self.boilerplate = self.judge.boilerplate = BoilerplateJudge(self.engine,
                                                                             self._boilerplate_learner(cfg))
            if cfg.paragraphs_field and not any(p.paragraphs for p in policies):
                raise DedupConfigError("DEDUP_PARAGRAPHS_FIELD is set but paragraph dedup is off for every host: "
                                       "set DEDUP_PARAGRAPHS = True (or `paragraphs` in DEDUP_CONTENT_POLICIES)")
            if cfg.paragraphs_field and cfg.paragraphs_field in (cfg.content_field, cfg.tag_field):
                raise DedupConfigError(f"DEDUP_PARAGRAPHS_FIELD ({cfg.paragraphs_field!r}) must differ from "
                                       "DEDUP_CONTENT_FIELD and DEDUP_TAG_FIELD")
            if any(p.paragraphs for p in policies):
                self.paragraphs = self._paragraph_deduplicator(cfg)
            self.audit = _JsonLines(cfg.audit_file) if cfg.audit_file else None
            self.crawl_log = _JsonLines(cfg.log_file) if cfg.log_file else None
        return self

    def _fingerprinter_for(self, policy: ExtractionPolicy) -> ContentFingerprinter:
        fp = self._fingerprinters.get(policy.min_words)
        if fp is None:
            fp = self._fingerprinters[policy.min_words] = ContentFingerprinter(
                shingle_size=self.cfg.shingle_size, bits=self.cfg.fingerprint_bits, min_words=policy.min_words,
                sketch_size=self.cfg.sketch_size,
            )
        return fp

    def _boilerplate_learner(self, cfg: DedupSettings) -> BoilerplateLearner:
        """The per-host block tables: in this process, or shared through Redis with the Redis content index."""
        rule = BoilerplateRule.from_params(cfg)
        if cfg.content_backend != "redis":
            return BoilerplateLearner(rule)
        from scrapy_dedup.content.redis_boilerplate import RedisBlockTable, shared_salt, table_prefix

        client, key = self.store.index.client, self.store.index.prefix
        return BoilerplateLearner(rule, lambda host: RedisBlockTable(client, table_prefix(key, host), rule,
                                                                     cfg.redis_ttl),
                                  hash_key=lambda: shared_salt(client, key))

    def _paragraph_deduplicator(self, cfg: DedupSettings) -> ParagraphDeduplicator:
        """The blocks' seen set: a local Bloom filter, or with the Redis content index a Redis Bloom filter
        shared by the crawl's processes (under its own fail-open outage policy, as the content index)."""
        from scrapy_dedup.seen import BloomLayoutMismatch, BloomSeenSet, RedisBloomSeenSet

        if cfg.content_backend != "redis":
            try:
                seen_blocks = BloomSeenSet(cfg.paragraphs_capacity, cfg.paragraphs_error_rate)
            except (MemoryError, OverflowError):  # allocated whole at start: too large for this machine
                raise unallocatable_bloom("DEDUP_PARAGRAPHS_CAPACITY", cfg.paragraphs_capacity,
                                          "DEDUP_PARAGRAPHS_ERROR_RATE", cfg.paragraphs_error_rate) from None
            return ParagraphDeduplicator(seen_blocks, cfg.paragraphs_min_chars)
        key = self._paragraph_key()
        try:
            seen = RedisBloomSeenSet(self.store.index.client, key, cfg.paragraphs_capacity, cfg.paragraphs_error_rate,
                                     ttl=cfg.redis_ttl)
        except ValueError as exc:  # a filter too large for one Redis string
            raise DedupConfigError(f"DEDUP_PARAGRAPHS_CAPACITY: {exc}") from None
        self._paragraph_policy = RedisErrorPolicy(
            "fail_open", name="Paragraph seen set", url=cfg.redis_url, secrets=self._secrets, stats=self.stats,
            stats_prefix="dedup/paragraphs/redis_", key=key,
            fail_open_means="blocks are counted as new and items keep their whole text until it is back "
                            "(counted in dedup/paragraphs/store_errors)",
            mode_note="the paragraph seen set always fails open", log=logger)
        try:
            self._paragraph_policy.call(seen.prepare)  # the layout is checked (or written) now
        except RedisUnavailable:
            pass  # down at start: an outage like any other (the policy logged it); prepared on first use
        except BloomLayoutMismatch as exc:
            raise DedupConfigError(f"DEDUP_PARAGRAPHS_CAPACITY / DEDUP_PARAGRAPHS_ERROR_RATE: {exc}") from None
        self._paragraph_policy.running = True
        logger.info("Paragraph dedup: blocks of at least %d characters in a Redis Bloom filter, key %r",
                    cfg.paragraphs_min_chars, key)
        return ParagraphDeduplicator(seen, cfg.paragraphs_min_chars)

    def _paragraph_key(self) -> str:
        """The Redis key of the paragraph seen set: beside the content index's keys (not under its hash tag)."""
        return f"{self.store.index.prefix}:paragraphs"

    def _build_store(self, cfg: DedupSettings) -> Any:
        verify = verify_rule_from_settings(cfg)
        if cfg.content_backend == "redis":
            from scrapy_dedup.content.redis_index import RedisContentStore

            spider_name = getattr(self.crawler.spidercls, "name", None) or "spider"
            key = cfg.redis_index_key % {"spider": spider_name}
            store = RedisContentStore.from_url(
                cfg.redis_url, key, params=cfg.redis_params, threshold=cfg.hamming_threshold,
                bands=cfg.bands, bits=cfg.fingerprint_bits, ttl=cfg.redis_ttl,
                sketch_size=cfg.sketch_size, verify=verify,
            )
            logger.info("Content index in Redis at %s, key %r (%s)", mask_url(cfg.redis_url), key,
                        type(store).__name__)  # the layout: one slot, or sharded over a cluster's slots
            return store
        return memory_store(cfg)

    def _store_policy(self, cfg: DedupSettings) -> RedisErrorPolicy | None:
        """The outage policy of the Redis content index (None for the memory one): always ``fail_open``.

        Why a policy: a page met while Redis is away is kept unjudged either way, but
        without one every page would wait for a failing call (a hung server: the
        socket timeout, each page); with it Redis is probed after growing pauses
        and each outage is logged once.
        """
        if cfg.content_backend != "redis":
            return None
        policy = RedisErrorPolicy(
            "fail_open", name="Content index", url=cfg.redis_url, secrets=self._secrets,
            stats=self.stats, stats_prefix="dedup/content/redis_",
            fail_open_means="pages are kept without a duplicate check until it is back (counted in "
                            "dedup/content/store_errors)",
            mode_note="the content index always fails open", log=logger)
        reachable = self._check_redis(cfg)
        if cfg.redis_flush_on_start:
            self._flush_content_state(policy, cfg)
        if reachable:  # (unreachable: the first page's call checks it)
            self._check_index(policy, cfg)
        policy.running = True  # configuration errors were refused just now; from here on every error is an outage
        return policy

    def _check_redis(self, cfg: DedupSettings) -> bool:
        """Refused credentials or TLS fail at start-up (masked); whether Redis answered.

        The content index fails open (pages kept unchecked while Redis is away), so a
        server that is down at start is an outage like any other, not a start-up error;
        it is told (the policy's one line) when a page meets it. Not here: a Redis seen
        set on the same server closes the crawl at start with its own line, and no page comes.
        """
        index = self.store.index
        try:
            index.client.ping()
            probes = getattr(index, "permission_probes", None)  # (the sharded index: not probed yet)
            missing = missing_permissions(index.client, *probes()) if probes is not None else []
        except Exception as exc:
            if is_transient(exc):
                if cfg.redis_url.startswith("redis://") and speaks_tls(cfg.redis_url, timeout=2.0):
                    message = (f"content index: the server at {mask_url(cfg.redis_url)} speaks TLS: "
                               "DEDUP_REDIS_URL must start with rediss://")
                    logger.error("%s", message)
                    raise logged_already(RedisStartupError(message)) from None
                return False
            raise RedisStartupError(
                f"content index: cannot use Redis at {mask_url(cfg.redis_url)} ({describe(exc, self._secrets)}); "
                "check DEDUP_REDIS_URL and DEDUP_REDIS_PARAMS (password, TLS options)") from None
        if missing:
            message = (f"content index: the Redis user of {mask_url(cfg.redis_url)} may not run what the crawl "
                       f"needs: {'; '.join(missing)}. Grant it (ACL SETUSER) or use another user or "
                       "DEDUP_REDIS_INDEX_KEY")
            logger.error("%s", message)  # (Scrapy's lines of a start-up that failed follow)
            raise logged_already(RedisStartupError(message))
        return True

    def _flush_content_state(self, policy: RedisErrorPolicy, cfg: DedupSettings) -> None:
        """DEDUP_REDIS_FLUSH_ON_START: delete the crawl's content state in Redis before anything reads it.

        That is the content index (with the boilerplate tables and their salt, under its hash tag)
        and the paragraph seen set, found with SCAN on every node of a cluster. Redis unreachable
        now: the start is refused, since pages judged against the previous crawl's index would be
        dropped as its duplicates, the opposite of the fresh crawl asked for.
        """
        try:
            policy.call(self._delete_content_state)
        except RedisUnavailable as exc:
            raise RedisStartupError(
                f"DEDUP_REDIS_FLUSH_ON_START: cannot delete the content index {self.store.index.prefix!r} at "
                f"{mask_url(cfg.redis_url)} ({exc}); the crawl would judge its pages against the previous "
                "crawl's: start it again once Redis is back") from None
        logger.info("Content index %r, its boilerplate tables and paragraph seen set at %s deleted at start "
                    "(DEDUP_REDIS_FLUSH_ON_START)", self.store.index.prefix, mask_url(cfg.redis_url))

    def _delete_content_state(self) -> None:
        """Delete the crawl's content state in Redis: the content index (with the boilerplate tables and their
        salt, under its hash tag) and the paragraph seen set, SCAN on every node of a cluster."""
        paragraphs = glob_escape(self._paragraph_key())
        self.store.clear()
        # the filter's key, its layout, or its shards (each under a hash tag of its own): any layout left
        delete_matching(self.store.index.client, (paragraphs, paragraphs + ":*", f"\\{{{paragraphs}:*"))

    def _check_index(self, policy: RedisErrorPolicy, cfg: DedupSettings) -> None:
        """An index written with another config (an earlier version's key layout, other bits, bands or
        sketch size) stops the crawl now, naming what to change; judged page by page, every page would
        fail and be kept unjudged. Redis down at start: the first page's call checks it."""
        from scrapy_dedup.content.redis_index import ContentIndexMismatch, config_fields

        try:
            policy.call(self.store.check_config)
        except RedisUnavailable:
            return
        except ContentIndexMismatch as exc:
            stored, wanted = config_fields(exc.stored), config_fields(exc.wanted)
            where = f"DEDUP_REDIS_INDEX_KEY {exc.prefix!r} at {mask_url(cfg.redis_url)}"
            if stored.get("layout") != wanted.get("layout"):
                why = (f"its keys are in layout {stored.get('layout')} (written by an earlier scrapy-dedup, or by the "
                       f"other store: one slot or sharded over a cluster), this crawl reads and writes layout "
                       f"{wanted.get('layout')}{exc.hint}")
            else:
                why = ("use the DEDUP_FINGERPRINT_BITS, DEDUP_BANDS and DEDUP_SKETCH_SIZE of the processes "
                       "that wrote it")
            raise DedupConfigError(
                f"Content index: {where} holds an index written with {exc.stored}; this crawl needs {exc.wanted}: "
                f"{why}. To start over, delete the index's keys (RedisContentStore.from_url(<DEDUP_REDIS_URL>, "
                f"{exc.prefix!r}, params=<DEDUP_REDIS_PARAMS>).clear(), from scrapy_dedup.content.redis_index, or "
                "DEDUP_REDIS_FLUSH_ON_START=True for one start), or set DEDUP_REDIS_INDEX_KEY "
                "to a new key (the pages of the old index are then not found)") from None

    def _spider_opened(self, spider: "Spider") -> None:
        if self.engine is None or self.cfg.content_backend != "memory" or not self._jobdir:
            return
        path = Path(self._jobdir, CHECKPOINT_NAME)
        if path.exists():
            try:
                self.store.load_into(path)
                logger.info("Content index restored from %s (%d pages)", path, len(self.store))
                self.stats.set_value("dedup/content/restored", len(self.store))
                self._saved_pages = len(self.store)
            except Exception as exc:  # a corrupt checkpoint must not pass silently
                logger.error("Content index checkpoint %s is unreadable (%s): starting with an empty "
                             "content index; near duplicates of pages from the previous run will be kept "
                             "(%s)", path, exc, where_kept(path, set_aside(path)))
                self.stats.inc_value("dedup/content/checkpoint_errors")
        self._restore_paragraphs()
        if self.cfg.checkpoint_seconds:
            self._checkpoint_loop = start_clock(self.cfg.checkpoint_seconds, self.checkpoint,
                                                name="Content index checkpoint", stats=self.stats)

    def checkpoint(self) -> None:
        """Save the memory content index to ``JOBDIR`` now if it changed (atomic: temp file, fsync, rename).

        Called every ``DEDUP_CHECKPOINT_SECONDS`` and at close, so a crawl killed
        between two checkpoints loses at most that many seconds of kept pages (their
        near duplicates would be kept again on resume). A failed write is logged and
        counted, never raised: the crawl goes on.
        """
        if (self.engine is None or self.cfg.content_backend != "memory" or not self._jobdir
                or disk_full_reported(self.crawler)):  # (a full disk: the last checkpoint stays)
            return
        self._save_paragraphs()
        pages = len(self.store)
        if pages == self._saved_pages:
            return
        path = Path(self._jobdir, CHECKPOINT_NAME)
        try:
            self.store.save(path)
        except (OSError, ValueError) as exc:
            if report_disk_full(self.crawler, self._jobdir, exc):
                return
            logger.error("Could not checkpoint the content index to %s: %s", path, exc)
            self.stats.inc_value("dedup/content/checkpoint_errors")
            return
        self._saved_pages = pages
        self.stats.inc_value("dedup/content/checkpoints")

    def _restore_paragraphs(self) -> None:
        """The paragraph Bloom filter of the previous run from ``JOBDIR``; a bad file: logged, counted, kept
        aside, and the set starts empty (blocks of the previous run are then emitted again, never lost).

        A filter saved with another DEDUP_PARAGRAPHS_CAPACITY or DEDUP_PARAGRAPHS_ERROR_RATE is resumed
        with its own sizing, and a WARNING says so (as BloomDupeFilter does with its checkpoint): a Bloom
        filter cannot be resized without its blocks, and one that started anew would count every block
        of the previous run as new. It grows past its capacity, its error rate still bounded.
        """
        from scrapy_dedup.seen import BloomSeenSet, CheckpointError

        path = Path(self._jobdir or "", PARAGRAPHS_CHECKPOINT_NAME)
        if self.paragraphs is None or not path.exists():
            return
        try:
            seen = self.paragraphs.seen = BloomSeenSet.load(path)
        except CheckpointError as exc:
            logger.error("%s: starting with an empty paragraph seen set; blocks of the previous run count as new "
                         "(%s)", exc, where_kept(path, set_aside(path)))
            self.stats.inc_value("dedup/paragraphs/checkpoint_errors")
            return
        if (seen.capacity, seen.error_rate) != (self.cfg.paragraphs_capacity, self.cfg.paragraphs_error_rate):
            logger.warning("Paragraph seen set: the checkpoint %s was made with DEDUP_PARAGRAPHS_CAPACITY=%d and "
                           "DEDUP_PARAGRAPHS_ERROR_RATE=%g; continuing with those (a Bloom filter cannot be resized "
                           "without its blocks), not with the configured %d and %g; delete the file to start anew "
                           "(the previous run's blocks then count as new)", path, seen.capacity, seen.error_rate,
                           self.cfg.paragraphs_capacity, self.cfg.paragraphs_error_rate)
        logger.info("Paragraph seen set restored from %s (%d blocks)", path, len(seen))
        self.stats.set_value("dedup/paragraphs/restored", len(seen))

    def _save_paragraphs(self) -> None:
        """Checkpoint the local paragraph Bloom filter into ``JOBDIR`` if it changed (atomic); errors logged."""
        seen = self.paragraphs.seen if self.paragraphs is not None else None
        if seen is None or not getattr(seen, "dirty", False):
            return
        path = Path(self._jobdir or "", PARAGRAPHS_CHECKPOINT_NAME)
        try:
            seen.save(path)  # type: ignore[attr-defined]  # a BloomSeenSet: the memory backend's
        except (OSError, ValueError) as exc:
            logger.error("Could not checkpoint the paragraph seen set to %s: %s", path, exc)
            self.stats.inc_value("dedup/paragraphs/checkpoint_errors")

    # --- fingerprints of responses (DUST learning and the verdict share them) ---

    def fingerprint_of_response(self, response: Response) -> ContentFingerprint | None:
        """The fingerprint of a page's main text under its host's policy; None if not a page, not readable,
        or degenerate (too few words). Computed once per response object, whoever asks first."""
        page = self._page_of(response)
        fp = page.fingerprint
        if fp is None:
            return None
        assert page.policy is not None  # set with the fingerprint (_read_page)
        if self._fingerprinter_for(page.policy).is_degenerate(fp):
            return None
        return fp

    def _page_of(self, response: Response) -> _ResponsePage:
        page = self._pages.get(response)
        if page is None:
            page = self._pages[response] = self._read_page(response)
        return page

    def _read_page(self, response: Response) -> _ResponsePage:
        # JSON, XML feeds, CSS, JavaScript are data, not pages (content/structured.py says why). Asked of
        # every response: Scrapy makes some of them (``+json``) plain Responses, text all the same.
        page = _ResponsePage(response.url)
        kind = structured_kind(response.headers.get(b"Content-Type"), response.body[:SNIFF_BYTES])
        if looks_binary(response.body) or (kind is None and not isinstance(response, TextResponse)):
            page.skipped = "skipped_non_text"
            return page
        if kind is not None:
            if not self._structured_logged:  # once per crawl: a line per response would flood the log
                self._structured_logged = True
                logger.info("Structured responses (JSON, XML feeds, CSS, JavaScript, CSV) are not fingerprinted, "
                            "only counted in dedup/content/skipped_non_html (the first: %s at %s)",
                            kind, response.url)
            page.skipped = "skipped_non_html"
            return page
        page.policy = policy = self.policies.lookup(_host_of(response.url))
        assert isinstance(response, TextResponse)  # a kind-less non-text response returned above
        source, encoding = _source_of(response, policy)
        try:
            extraction = extract_text(source, policy, encoding=encoding, blocks=policy.needs_blocks)
        except Exception as exc:  # hostile markup never stops the crawl
            logger.warning("Could not extract text from %s (%s: %s); page not fingerprinted",
                           response.url, type(exc).__name__, exc)
            page.skipped = "extraction_errors"
            return page
        page.truncated = extraction.truncated
        page.blocks, page.title = extraction.blocks, extraction.title
        page.fingerprint = self._fingerprint(self._fingerprinter_for(policy), extraction.text)
        return page

    # --- verdicts ---

    def same_page_cluster(self, response: Response) -> str | None:
        """What page ``response``'s URL serves by its verdict, for DUST learning (None: not judged): the
        verdict's cluster, or the page's own URL where the page judge's URL-level sameness does not hold
        (``content/judge.py``: a match only of the texts less boilerplate, of whole texts not alike)."""
        verdict = self.verdict_for_response(response)
        if verdict is None or verdict.cluster is None:
            return None
        return self._page_of(response).url_page or verdict.cluster

    def verdict_for_response(self, response: Response) -> Verdict | None:
        """The verdict of ``response``, taken once (None for what is not judged: not a page, unreadable,
        the store away)."""
        page = self._page_of(response)
        if page.judged:
            return page.verdict
        page.judged = True
        engine = self.open_content().engine
        assert engine is not None  # open_content() built it
        if page.skipped == "skipped_non_text":
            engine.skip_non_text()
            self.stats.set_value("dedup/content/skipped_non_text", engine.report().skipped_non_text)
        elif page.skipped == "skipped_non_html":
            engine.skip_non_html()
            self.stats.set_value("dedup/content/skipped_non_html", engine.report().skipped_non_html)
        elif page.skipped:
            self._count(page.skipped)
        else:
            if page.truncated:
                self._count("truncated")
            # a page neither skipped nor unreadable has both (_read_page)
            assert page.fingerprint is not None and page.policy is not None
            declares = (_declared_canonical(response, page.policy.max_bytes)
                        if self.cfg.representative == "canonical" else None)
            page.verdict = self._judge(page.url, page.fingerprint, page.policy, response.request, page.blocks,
                                       declares=declares, page=page, title=page.title)
            if page.policy.paragraphs and page.blocks is not None:
                page.paragraphs = self._check_paragraphs(page.url, page.blocks)
        return page.verdict

    def paragraph_text_of(self, response: Response) -> str | None:
        """The main text of ``response`` less its repeated blocks (``DEDUP_PARAGRAPHS_FIELD``), judging it first
        if need be; None when its host has paragraph dedup off or it has no main text."""
        self.verdict_for_response(response)
        check = self._page_of(response).paragraphs
        return check.text if check is not None else None

    def _check_paragraphs(self, url: str, blocks: list[str]) -> ParagraphCheck:
        """The page's blocks checked for repeats and counted; with the seen set away, all taken as new."""
        assert self.paragraphs is not None  # built by open_content() when a policy has paragraphs on
        host = _host_of(url)
        try:
            if self._paragraph_policy is not None:
                check = self._paragraph_policy.call(self.paragraphs.check, host, blocks)
            else:
                check = self.paragraphs.check(host, blocks)
        except Exception as exc:  # Redis away (logged once by the policy) or any other fault: never a lost item
            self._count_paragraphs("store_errors")
            if not isinstance(exc, RedisUnavailable):
                logger.error("Paragraph seen set failed (%s); the blocks of %s are taken as new",
                             describe(exc, self._secrets), url)
            return ParagraphCheck(tuple(blocks), (False,) * len(blocks))
        self._write_paragraph_stats(host)
        return check

    def _count_paragraphs(self, name: str) -> None:
        self.events[f"paragraphs/{name}"] += 1
        self.stats.set_value(f"dedup/paragraphs/{name}", self.events[f"paragraphs/{name}"])

    def _write_paragraph_stats(self, host: str) -> None:
        """``dedup/paragraphs/*``: totals and the page's host, copied from the deduplicator's counts."""
        assert self.paragraphs is not None
        set_value = self.stats.set_value
        for prefix, counts in (("dedup/paragraphs/", self.paragraphs.total),
                               (f"dedup/paragraphs/host/{host or '-'}/", self.paragraphs.host_counts(host))):
            set_value(prefix + "blocks", counts.blocks)
            set_value(prefix + "duplicate_blocks", counts.duplicates)
            set_value(prefix + "short_blocks", counts.short)
            set_value(prefix + "duplicate_share", round(counts.duplicate_share, 4))

    def judge_content(self, url: str, value: Any, timestamp: Any = None) -> tuple[Verdict | None, str | None]:
        """The verdict of an item's content (``DEDUP_CONTENT_FIELD``): HTML extracted under the host's policy
        as a response is, anything else taken as the page's text; and that text less its repeated blocks when
        its host has paragraph dedup on (else None; the blocks of a plain text are its lines). ``timestamp``:
        the value of the item's ``DEDUP_TIMESTAMP_FIELD`` (``newest`` with that setting; else the fetch time)."""
        policy = self.policies.lookup(_host_of(url))
        dating: dict[str, Any] = {}
        if self.cfg.representative == "newest" and self.cfg.timestamp_field:
            dating = {"timestamp": self._timestamp_of(url, timestamp), "dated": True}
        if isinstance(value, (bytearray, memoryview)):  # bytes by another type: its bytes, not its repr
            value = bytes(value)
        if isinstance(value, (bytes, str)) and _looks_like_html(value):
            try:
                extraction = extract_text(value, policy, blocks=policy.needs_blocks)
            except Exception as exc:  # hostile markup never stops the crawl
                logger.warning("Could not extract text of the DEDUP_CONTENT_FIELD HTML of %s (%s: %s); item kept",
                               url, type(exc).__name__, exc)
                self._count("extraction_errors")
                return None, None
            if extraction.truncated:
                self._count("truncated")
            fingerprinter = self._fingerprinter_for(policy)
            verdict = self._judge(url, self._fingerprint(fingerprinter, extraction.text), policy, None,
                                  extraction.blocks, title=extraction.title, **dating)
            blocks = extraction.blocks
        else:
            text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
            verdict = self.check_text(url, text, policy, **dating)
            blocks = text_blocks(text) if policy.paragraphs else None
        if not policy.paragraphs or blocks is None:
            return verdict, None
        return verdict, self._check_paragraphs(url, blocks).text

    def check_text(self, url: str, text: str, policy: ExtractionPolicy | None = None,
                   request: Request | None = None, timestamp: float | None = None,
                   dated: bool = False) -> Verdict | None:
        """Fingerprint ``text`` (main text of the page at ``url``) and check it against the index.

        ``timestamp``: the page's time for ``newest``; None: the fetch time, unless ``dated`` (the
        page's own time was asked for and it has none: it ranks after the pages that have one).
        """
        policy = policy or self.policies.lookup(_host_of(url))
        return self._judge(url, self._fingerprint(self._fingerprinter_for(policy), text), policy, request,
                           timestamp=timestamp, dated=dated)

    def _timestamp_of(self, url: str, value: Any) -> float | None:
        """An item's ``DEDUP_TIMESTAMP_FIELD`` value in seconds; None when absent or unreadable (counted)."""
        try:
            return parse_timestamp(value)
        except ValueError as exc:  # the page still counts; among its cluster it ranks after the dated pages
            self._count("undated_items")
            if self.events["undated_items"] == 1:
                logger.warning("DEDUP_TIMESTAMP_FIELD of the item of %s is missing or unreadable (%s); such items "
                               "rank after the dated ones of their cluster (counted in dedup/content/undated_items)",
                               url, exc)
            return None

    def _judge(self, url: str, fp: ContentFingerprint, policy: ExtractionPolicy,
               request: Request | None, blocks: list[str] | None = None, *, timestamp: float | None = None,
               dated: bool = False, declares: str | None = None, page: _ResponsePage | None = None,
               title: str | None = None) -> Verdict | None:
        """The verdict of a page (``fp``: of its whole text); with its ``blocks`` and a host that learns
        boilerplate, taken by the boilerplate rule (``content/boilerplate.py``: ``BoilerplateJudge``).
        ``timestamp``/``dated``/``declares``: what the representative policy may look at (``check_text``);
        ``page``: the response's state, told whether the verdict rests on the text less boilerplate."""
        engine = self.open_content().engine
        assert engine is not None  # open_content() built it
        fingerprinter = self._fingerprinter_for(policy)
        degenerate = fingerprinter.is_degenerate(fp)
        if timestamp is None and not dated and self.cfg.representative == "newest":
            timestamp = time.time()  # the fetch time, near enough: a page is judged as soon as it arrives
        judge = self.judge
        assert judge is not None  # built with the engine
        try:
            if blocks is not None and policy.boilerplate and judge.boilerplate is not None and not degenerate:
                judged = self._call_store(judge.judge_blocks, url, blocks,
                                          fingerprint=lambda text: self._fingerprint(fingerprinter, text),
                                          degenerate=fingerprinter.is_degenerate, whole=fp,
                                          timestamp=timestamp, declares=declares, title=title)
                assert judged.judgement is not None  # the boilerplate rule's account
                self._count_boilerplate(url, judged.judgement)
            elif not degenerate:
                judged = self._call_store(judge.judge_text, url, fp, degenerate, timestamp=timestamp,
                                          declares=declares)
            else:
                judged = judge.judge_text(url, fp, degenerate, timestamp=timestamp, declares=declares)
        except RedisUnavailable:  # Redis is away (the policy logged it once): fail open, the item is kept
            self._count("store_errors")
            return None
        except Exception as exc:  # any other failure of the store: fail open too
            self._store_error(exc)
            return None
        if page is not None:
            page.url_page = None if judged.url_same else judged.url_page
        if request is not None:
            judged = dataclasses.replace(judged, verdict=self._same_request(judged.verdict, request))
        self._record(judged, request)
        return judged.verdict

    def _same_request(self, verdict: Verdict, request: Request) -> Verdict:
        """``verdict`` with ``same_request`` False when it matched a kept page of its URL that another request
        fetched: the page's URL lost what told the requests apart (Scrapy's response URL has no fragment)."""
        identity = self._request_identity(request)
        if verdict.kind == "unique":
            if identity is None:
                self._kept_by_request.pop(verdict.url, None)
            else:
                self._kept_by_request[verdict.url] = identity
        elif verdict.is_refetch and self._kept_by_request.get(verdict.url) != identity:
            verdict = dataclasses.replace(verdict, same_request=False)
            self._count("refetch_of_another_request")
        return verdict

    def _request_identity(self, request: Request) -> bytes | None:
        """None when the page's URL identifies ``request`` (a GET whose canonical URL keeps no fragment), else
        its request fingerprint."""
        fingerprinter = self.crawler.request_fingerprinter
        if request.method == "GET" and not request.body:
            canonical_url = getattr(fingerprinter, "canonical_url", None)
            if "#" not in request.url or canonical_url is None or "#" not in canonical_url(request):
                return None
        return fingerprinter.fingerprint(request)

    def _call_store(self, call: Any, *args: Any, **kwargs: Any) -> Any:
        """``call(*args, **kwargs)``, under the Redis outage policy when the content index is in Redis."""
        if self._redis_policy is not None:
            return self._redis_policy.call(lambda: call(*args, **kwargs))
        return call(*args, **kwargs)

    def _count_boilerplate(self, url: str, judgement: BoilerplateJudgement) -> None:
        """Stats of boilerplate learning: pages by state, guarded matches, re-checks, blocks learnt per host."""
        state = judgement.reduction.state
        if state != "whole":
            self._count(f"boilerplate/{state}")  # reduced: fingerprinted with boilerplate removed; warmup
        if judgement.guarded:
            self._count("boilerplate/guarded")
        if judgement.undecidable:  # counted in the report (dedup/content/undecidable), named there too
            logger.info("Undecidable page kept: %s (only its host's template is left once that is left out)", url)
        if judgement.rechecked:
            self._count("boilerplate/rechecked", judgement.rechecked)
        host = _host_of(url)
        learned = self.boilerplate.learner.blocks_learned(host) if self.boilerplate is not None else 0
        if learned:
            self.stats.set_value(f"dedup/content/boilerplate/blocks/{host or '-'}", learned)

    def _fingerprint(self, fingerprinter: ContentFingerprinter, text: str) -> ContentFingerprint:
        """``fingerprinter.fingerprint(text)``, remembered for the last ``FINGERPRINT_CACHE_SIZE`` texts.

        The fingerprint is a pure function of the text, so an exact duplicate's text (on a
        duplicate-rich crawl, most fetched duplicates) costs a 16-byte digest (a few
        microseconds) instead of tokenizing, hashing every word and shingle and sketching.
        """
        key = (id(fingerprinter), hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest())
        cache = self._fingerprint_cache
        with self._cache_lock:
            fp = cache.get(key)
            if fp is not None:
                cache.move_to_end(key)
                return fp
        fp = fingerprinter.fingerprint(text)
        with self._cache_lock:
            cache[key] = fp
            if len(cache) > FINGERPRINT_CACHE_SIZE:
                cache.popitem(last=False)
        return fp

    def _store_error(self, exc: Exception) -> None:
        """Content index unreachable: the page is kept unjudged (never dropped for an outage).

        Logged once per outage (the first error, then again after a success), counted always.
        """
        self._count("store_errors")
        if not self._store_failing:
            self._store_failing = True
            logger.error("Content index unavailable (%s); pages are kept without a duplicate "
                         "check until it is back (counted in dedup/content/store_errors)",
                         describe(exc, self._secrets))

    def _record(self, judged: PageVerdict, request: Request | None) -> None:
        verdict, fp = judged.verdict, judged.fingerprint
        if self._store_failing:
            self._store_failing = False
            logger.info("Content index is back; duplicate checks resumed")
        assert self.engine is not None  # a verdict came from it
        counts = self.engine.counts()
        self.stats.set_value(f"dedup/content/{verdict.kind}", counts[verdict.kind])
        self.stats.set_value("dedup/content/fingerprinted", sum(counts.values()))
        if self.crawl_log is not None:
            record = {
                "request_url": request.url if request is not None else verdict.url,
                "url": verdict.url,
                "canonical_url": self._canonical(request if request is not None else Request(verdict.url)),
                "exact_hash": _hex(fp.exact),
                "simhash": format(fp.simhash, "016x"),
                "words": fp.words,
                "kind": verdict.kind,
                # the engine's own sameness (exact, or near after verification): mine-dust judges by it
                "cluster": verdict.cluster,
            }
            if judged.basis is not None:  # the URL-level sameness does not hold with the kept page
                record["basis"] = judged.basis
                record["page"] = judged.url_page  # the page it serves at that strictness (mine-dust reads it)
            if judged.normal_hash is not None:
                record["normal_hash"] = judged.normal_hash
            # the URLs that redirected to this page (RedirectMiddleware's meta key): evidence for mine-dust
            redirects = request.meta.get("redirect_urls") if request is not None else None
            if redirects:
                record["redirect_urls"] = [u for u in redirects if isinstance(u, str)]
            self.crawl_log.write(record)
        if verdict.kind in ("exact", "near"):
            if self.audit is not None:
                self.audit.write({"url": verdict.url, "kept_url": verdict.kept_url, "distance": verdict.distance,
                                  "kind": verdict.kind, "cluster": verdict.cluster,
                                  "representative": verdict.representative})
            self._canary(verdict)

    def _record_redirect(self, response: Response, request: Request, spider: Any = None) -> None:
        """A crawl-log line for a redirect: ``mine-dust`` learns aliases from it, and the page it leads to
        may never be logged under this URL (its request is dropped when the page was already seen)."""
        location = response.headers.get("Location") if 300 <= response.status < 400 else None
        if self.crawl_log is None or not location:
            return
        try:
            target = response.urljoin(safe_url_string(location.decode("latin-1")))
        except ValueError:  # an unusable Location: RedirectMiddleware will not follow it either
            return
        self.crawl_log.write({"request_url": request.url, "url": target, "kind": "redirect",
                              "status": response.status})

    def _canonical(self, request: Request) -> str:
        """The URL key of ``request`` (the fingerprinter caches it per request: no second canonicalization)."""
        canonical = getattr(self.crawler.request_fingerprinter, "canonical_url", None)
        if canonical is None:
            return request.url
        try:
            return canonical(request)
        except Exception:  # an odd URL: log it as it is
            return request.url

    def _canary(self, verdict: Verdict) -> None:
        cluster = verdict.cluster or verdict.kept_url or ""
        self._cluster_sizes[cluster] += 1
        size = self._cluster_sizes[cluster] + 1  # the kept page
        if size > self.cfg.canary_size and cluster not in self._canary_warned:
            self._canary_warned.add(cluster)
            self._count("canary_warnings")
            logger.warning(
                "Duplicate cluster of %s has grown past %d pages (DEDUP_CANARY_SIZE): if these are "
                "different pages, the fingerprint is seeing boilerplate (add DEDUP_STRIP_SELECTORS for "
                "this site, or use DEDUP_CONTENT_ACTION='tag' to audit)", cluster, self.cfg.canary_size,
            )

    def _count(self, name: str, count: int = 1) -> None:
        """One more event only a crawl meets, in ``events`` and copied to its stat (see :meth:`_write_stats`)."""
        self.events[name] += count
        self.stats.set_value(f"dedup/content/{name}", self.events[name])

    def _write_stats(self) -> None:
        """Write every ``dedup/content/*`` stat from the one place each number is kept.

        The page kinds, clusters and skips are counted by the engine (its report: the
        numbers the offline audit computes the same way); what only a crawl meets
        (extraction and store errors, truncated bodies, canary warnings) in ``events``.
        The stats are a copy, never counted apart: after each page the numbers it
        changed are copied (so a stats reader at ``spider_closed`` that runs before this
        extension, or a mid-crawl look, sees them), and here, at the end, all of them
        with the report's derived numbers (total, clusters, ratios), which are not
        written per page (each costs a few microseconds). ``dedup/content/fingerprinted``
        is the report's total (every judged page).
        """
        assert self.engine is not None  # content_lines() asks only once it is built
        report = self.engine.report()
        values: dict[str, Any] = report.to_stats(prefix="dedup/content/")
        values["dedup/content/fingerprinted"] = report.total
        values.update((f"dedup/content/{name}", count) for name, count in self.events.items())
        races = getattr(self.store, "races_kept_twice", 0)  # a sharded Redis index: near duplicates kept in a race
        if races:
            values["dedup/content/near_kept_twice"] = races
        for key, value in values.items():
            self.stats.set_value(key, value)

    # --- crawl end: the report, then closing ---

    def _request_scheduled(self, request: Request, spider: Any = None) -> None:
        if not request.dont_filter:  # the schedulers (Scrapy's, scrapy-redis's) ask the dupefilter about it
            self.requests["checked"] += 1

    def _request_dropped(self, request: Request, spider: Any = None) -> None:
        self.requests["filtered"] += 1  # the scheduler refused it: its dupefilter had seen it

    def url_lines(self) -> list[str]:
        get = self.stats.get_value
        filtered = get("dupefilter/filtered", 0)
        seen = get("dedup/seen/checked")
        if seen is None:  # a dupefilter other than ours: the engine's count
            seen, filtered = self.requests["checked"], self.requests["filtered"]
        lines = [
            "URL layer:",
            f"  Requests seen:           {seen}",
            f"  Filtered as duplicates:  {filtered}  ({_pct(filtered, seen)})",
        ]
        lines += saved_fetch_lines(self.stats.get_stats())
        lines.append(f"  URLs canonicalized:      {get('dedup/url/canonicalized', 0)}")
        lines.append(f"  Unparsable URLs:         {get('dedup/url/unparsable', 0)}")
        return lines

    def content_lines(self) -> list[str]:
        if self.engine is None:
            return ["Content layer: not enabled (add NearDuplicatePipeline / ContentFingerprintMiddleware)"]
        self._write_stats()
        lines = ["Content layer:"]
        lines += ["  " + line for line in self.engine.report().to_text().splitlines()]
        bucket = self._bucket_canary()
        if bucket:
            lines.append(f"  WARNING: one index bucket holds {bucket} pages (template canary, see the log)")
        if self.events["extraction_errors"]:
            lines.append(f"  Extraction errors:     {self.events['extraction_errors']}")
        lines += self.paragraph_lines()
        return lines

    def paragraph_lines(self) -> list[str]:
        """The block-level ratio beside the page-level one (paragraph dedup on), and the hosts repeating most."""
        if self.paragraphs is None:
            return []
        total = self.paragraphs.total
        lines = [f"  Repeated blocks:       {total.duplicates} of {total.blocks}  "
                 f"({_pct(total.duplicates, total.blocks)}; blocks of at least {self.paragraphs.min_chars} "
                 f"characters, {total.short} shorter ones not counted)"]
        for host, counts in list(self.paragraphs.by_host())[:5]:
            if counts.duplicates:
                lines.append(f"    {host or '-'}: {counts.duplicates} of {counts.blocks} "
                             f"({_pct(counts.duplicates, counts.blocks)})")
        if self.events["paragraphs/store_errors"]:
            lines.append(f"  Pages whose blocks were taken as new (seen set away): "
                         f"{self.events['paragraphs/store_errors']}")
        return lines

    def _bucket_canary(self) -> int:
        """Size of an index bucket far above chance (0 if none): many pages share a fingerprint block.

        Random fingerprints spread evenly over the 2**(bits/bands) keys of a band; a
        bucket above DEDUP_CANARY_SIZE and 8 times the even share means many pages
        fingerprint alike: usually boilerplate (a template, a cookie wall) in the text.
        """
        largest = getattr(getattr(self.store, "index", None), "largest_bucket", None)
        if largest is None:
            return 0
        cfg = self.cfg
        size = largest()
        even_share = len(self.store) / 2 ** (cfg.fingerprint_bits // cfg.bands)
        if size <= max(cfg.canary_size, 8 * even_share):
            return 0
        self.stats.set_value("dedup/content/largest_bucket", size)
        logger.warning(
            "One bucket of the content index holds %d pages (DEDUP_CANARY_SIZE %d): many kept pages "
            "share a fingerprint block, usually because their text is mostly boilerplate; check "
            "DEDUP_STRIP_SELECTORS for the site, or audit with DEDUP_CONTENT_ACTION='tag'",
            size, cfg.canary_size,
        )
        return size

    def spider_closed(self, spider: "Spider", reason: str) -> None:
        lines = ["scrapy-dedup duplication report", *self.url_lines(), *self.content_lines()]
        logger.info("\n".join(lines), extra={"spider": spider})

    def close(self) -> None:
        if self._closed or self.engine is None:
            return
        self._closed = True
        if self._checkpoint_loop is not None:
            self._checkpoint_loop.stop()
        self.checkpoint()
        for sink in (self.audit, self.crawl_log):
            if sink is not None:
                sink.close()
        if self.paragraphs is not None:
            self.paragraphs.seen.close()  # gives back a Redis filter's pinned connection, before the client closes
        if self.cfg.content_backend == "redis" and not self.cfg.redis_persist:
            self._delete_content_state_at_close()
        self.store.close()

    def _delete_content_state_at_close(self) -> None:
        """DEDUP_REDIS_PERSIST=False: the content state goes with the crawl, as the dupefilter's keys do. Redis
        away now: a WARNING (the keys stay; nothing of this crawl is lost by that), counted by the policy in
        ``dedup/content/redis_errors``."""
        assert self._redis_policy is not None  # the Redis backend has one
        try:
            self._redis_policy.call(self._delete_content_state)
        except RedisUnavailable as exc:
            logger.warning("Content index %r: could not delete it at close (DEDUP_REDIS_PERSIST=False): %s; "
                           "its keys stay", self.store.index.prefix, exc)
            return
        logger.info("Content index %r, its boilerplate tables and paragraph seen set at %s deleted at close "
                    "(DEDUP_REDIS_PERSIST=False)", self.store.index.prefix, mask_url(self.cfg.redis_url))


#: the former name, kept for ``EXTENSIONS`` entries that use it (the same class: one instance per crawl)
DuplicationReportExtension = DedupExtension


def saved_fetch_lines(stats: dict[str, Any]) -> list[str]:
    """The report's fetches saved against Scrapy's own dupefilter, and the switches they are owed to
    (``dedup/url/saved``; absent when the dupefilter is not one of ours or the fingerprinter not ours)."""
    saved = stats.get("dedup/url/saved")
    if saved is None:
        return []
    lines = [f"  Fetches saved:           {saved}  (requests Scrapy's own dupefilter would have fetched)"]
    by_switch = sorted((key.rsplit("/", 1)[-1], value) for key, value in stats.items()
                       if key.startswith("dedup/url/saved/"))
    if by_switch:
        lines.append("  Saved by:                " + ", ".join(f"{name} {count}" for name, count in by_switch))
    return lines


def _source_of(response: TextResponse, policy: ExtractionPolicy) -> tuple[Any, str | None]:
    """What ``extract_text`` reads of a response, and its encoding: the tree Scrapy already parsed for the
    spider (not modified), or the bytes of a body longer than the policy's max_bytes (cut, not parsed
    whole) or of one Scrapy could not decode (a declared codec that is no text encoding: ours can)."""
    if len(response.body) > policy.max_bytes:
        return response.body, _encoding_of(response)
    try:
        return response.selector.root, None
    except Exception:
        return response.body, None


#: the page's rel="canonical" link in its head (rel is a list of tokens, matched case-insensitively);
#: compiled once, and a path from the root, not ``//``: about 30 microseconds a page, not 300
_CANONICAL_LINK = etree.XPath("/html/head/link[contains(concat(' ', normalize-space(translate(@rel, "
                              "'CANONICAL', 'canonical')), ' '), ' canonical ')]/@href")


def _declared_canonical(response: Response, max_bytes: int | None = None) -> str | None:
    """The absolute URL of the page's first ``rel="canonical"`` link, None when it has none (or is no HTML).

    Read from the tree Scrapy parsed for the spider (and the extraction); a body over the policy's
    ``max_bytes`` is not parsed whole for the extraction, nor for this: it declares nothing here.
    DUST learning reads the HTML head with it too (after the HTTP ``Link`` header), with no cap.
    """
    if not isinstance(response, TextResponse) or (max_bytes is not None and len(response.body) > max_bytes):
        return None
    try:
        hrefs = cast("list[Any]", _CANONICAL_LINK(response.selector.root))  # lxml-stubs: any XPath result type
        href = str(hrefs[0]).strip() if hrefs else ""
        return response.urljoin(safe_url_string(href)) if href else None
    except Exception:  # markup Scrapy cannot parse, or a link that is no URL: no declaration
        return None


def _looks_like_html(value: str | bytes) -> bool:
    head = value[:2048].lstrip()
    return head[:1] in ("<", b"<")


def _encoding_of(response: TextResponse) -> str | None:
    """The response's encoding as Scrapy reads it, or None where Scrapy's own lookup fails."""
    try:
        return response.encoding
    except Exception:
        return None


def _host_of(url: str) -> str:
    from urllib.parse import urlsplit

    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def _hex(value: Any) -> str:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, int):
        return format(value, "x")
    return str(value)
