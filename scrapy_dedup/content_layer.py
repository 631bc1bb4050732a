"""The content layer of one crawl: shared by the middleware, the pipeline and the report.

The decision "is this page a duplicate?" is taken once per response by
:class:`~scrapy_dedup.middlewares.ContentFingerprintMiddleware` (remembered weakly
per response object) and applied to the response's items by the same middleware
as they leave the callback; nothing is kept per item.

One instance per crawler (:meth:`ContentLayer.for_crawler`).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
import weakref
from collections import Counter, OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.http import Response, TextResponse
from scrapy.utils.job import job_dir

from scrapy_dedup.content.engine import (
    ContentDeduplicator,
    ContentFingerprint,
    ContentFingerprinter,
    MemoryContentStore,
    Verdict,
    verify_rule_from_settings,
)
from scrapy_dedup.content.structured import SNIFF_BYTES, looks_binary, structured_kind
from scrapy_dedup.content.text import page_text
from scrapy_dedup.redis_conn import mask_url
from scrapy_dedup.redis_policy import RedisErrorPolicy, RedisUnavailable, describe, secrets_of
from scrapy_dedup.settings import CONTENT_OVERRIDABLE, DedupSettings, read_settings
from scrapy_dedup.url.policy import DomainMap

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

CHECKPOINT_NAME = "dedup-content.idx"
#: fingerprints remembered by text digest: an exact duplicate's text (a mirror, a tracking or
#: session variant the URL layer could not fold) is not tokenized and hashed again. A few KB each.
FINGERPRINT_CACHE_SIZE = 512


@dataclass(frozen=True)
class ExtractionPolicy:
    """How the main text of one host's pages is extracted (DEDUP_CONTENT_POLICIES can override)."""

    strip_tags: tuple[str, ...]
    strip_selectors: tuple[str, ...]
    min_words: int
    max_bytes: int

    @classmethod
    def from_settings(cls, cfg: DedupSettings, overrides: dict[str, Any] | None = None) -> "ExtractionPolicy":
        values = {
            "strip_tags": cfg.strip_tags,
            "strip_selectors": cfg.strip_selectors,
            "min_words": cfg.min_words,
            "max_bytes": cfg.max_bytes,
        }
        for key, value in (overrides or {}).items():
            setting = CONTENT_OVERRIDABLE[key.upper()]
            values[key.lower()] = setting.convert(value, f"DEDUP_CONTENT_POLICIES[{key!r}]")
        if values["min_words"] < cfg.shingle_size:
            raise ValueError(
                f"DEDUP_CONTENT_POLICIES: min_words ({values['min_words']}) must be at least "
                f"DEDUP_SHINGLE_SIZE ({cfg.shingle_size})"
            )
        return cls(**values)


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


class ContentLayer:
    """Fingerprints responses (or item fields), keeps the verdicts, counts, writes audit and crawl logs."""

    _instances: "weakref.WeakKeyDictionary[Crawler, ContentLayer]" = weakref.WeakKeyDictionary()
    _instances_lock = threading.Lock()

    @classmethod
    def existing(cls, crawler: "Crawler") -> "ContentLayer | None":
        """The crawl's layer if a component created it (the report must not create one)."""
        return cls._instances.get(crawler)

    @classmethod
    def for_crawler(cls, crawler: "Crawler") -> "ContentLayer":
        with cls._instances_lock:
            layer = cls._instances.get(crawler)
            if layer is None:
                layer = cls._instances[crawler] = cls(crawler)
            return layer

    def __init__(self, crawler: "Crawler"):
        self.crawler = crawler
        self.stats = crawler.stats
        self.cfg = cfg = read_settings(crawler.settings)
        default = ExtractionPolicy.from_settings(cfg)
        self.policies: DomainMap[ExtractionPolicy] = DomainMap(
            default,
            {domain: ExtractionPolicy.from_settings(cfg, overrides)
             for domain, overrides in cfg.content_policies.items()},
        )
        # One fingerprinter per distinct min_words (degenerate pages are decided per host).
        self._fingerprinters: dict[int, ContentFingerprinter] = {}
        self.fingerprinter = self._fingerprinter_for(default)
        #: what redis-py's exception texts must not show (the password, and any piece of it)
        self._secrets = secrets_of(cfg.redis_url, cfg.redis_params) if cfg.content_backend == "redis" else ()
        self.store = self._build_store(crawler, cfg)
        self._redis_policy = self._store_policy(cfg)
        self.engine = ContentDeduplicator(self.fingerprinter, self.store)
        self.counts: Counter[str] = Counter()
        self._fingerprint_cache: OrderedDict[tuple[int, bytes], ContentFingerprint] = OrderedDict()
        self._cache_lock = threading.Lock()  # the pipeline's DEDUP_CONTENT_FIELD path may run in threads
        self._response_verdicts: "weakref.WeakKeyDictionary[Response, Verdict | None]" = weakref.WeakKeyDictionary()
        self._cluster_sizes: Counter[str] = Counter()
        self._canary_warned: set[str] = set()
        self.audit = _JsonLines(cfg.audit_file) if cfg.audit_file else None
        self.crawl_log = _JsonLines(cfg.log_file) if cfg.log_file else None
        self._jobdir = job_dir(crawler.settings)
        self._checkpoint_loop: Any = None  # a LoopingCall every DEDUP_CHECKPOINT_SECONDS (memory index + JOBDIR)
        self._saved_pages = -1  # pages in the store at the last checkpoint (skip unchanged saves)
        self._closed = False
        self._store_failing = False
        crawler.signals.connect(self._spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.close, signal=signals.engine_stopped)

    # --- construction ---

    def _fingerprinter_for(self, policy: ExtractionPolicy) -> ContentFingerprinter:
        fp = self._fingerprinters.get(policy.min_words)
        if fp is None:
            fp = self._fingerprinters[policy.min_words] = ContentFingerprinter(
                shingle_size=self.cfg.shingle_size, bits=self.cfg.fingerprint_bits, min_words=policy.min_words,
                sketch_size=self.cfg.sketch_size,
            )
        return fp

    def _build_store(self, crawler: "Crawler", cfg: DedupSettings):
        verify = verify_rule_from_settings(cfg)
        if cfg.content_backend == "redis":
            from scrapy_dedup.content.redis_index import RedisContentStore

            spider_name = getattr(crawler.spidercls, "name", None) or "spider"
            key = cfg.redis_index_key % {"spider": spider_name}
            store = RedisContentStore.from_url(
                cfg.redis_url, key, params=cfg.redis_params, threshold=cfg.hamming_threshold,
                bands=cfg.bands, bits=cfg.fingerprint_bits, ttl=cfg.redis_ttl,
                sketch_size=cfg.sketch_size, verify=verify,
            )
            logger.info("Content index in Redis at %s, key %r", mask_url(cfg.redis_url), key)
            return store
        return MemoryContentStore(threshold=cfg.hamming_threshold, bands=cfg.bands, bits=cfg.fingerprint_bits,
                                  sketch_size=cfg.sketch_size, verify=verify)

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
            "fail_open", name="Content index", url=cfg.redis_url, secrets=secrets_of(cfg.redis_url, cfg.redis_params),
            stats=self.stats, stats_prefix="dedup/content/redis_",
            fail_open_means="pages are kept without a duplicate check until it is back (counted in "
                            "dedup/content/store_errors)",
            mode_note="the content index always fails open", log=logger)
        self._check_redis(policy, cfg)
        policy.running = True  # configuration errors were refused just now; from here on every error is an outage
        return policy

    def _check_redis(self, policy: RedisErrorPolicy, cfg: DedupSettings) -> None:
        """Refused credentials or TLS fail at start-up (masked); an unreachable server is an outage.

        The content index fails open (pages kept unchecked while Redis is away), so a
        server that is down at start is an outage like any other (the policy's one
        line), not a start-up error.
        """
        from scrapy_dedup.dupefilters import RedisStartupError

        try:
            policy.call(self.store.index.client.ping)
        except RedisUnavailable:
            pass
        except Exception as exc:
            raise RedisStartupError(
                f"content index: cannot use Redis at {mask_url(cfg.redis_url)} ({describe(exc, policy.secrets)}); "
                "check DEDUP_REDIS_URL and DEDUP_REDIS_PARAMS (password, TLS options)") from None

    def _spider_opened(self, spider) -> None:
        if self.cfg.content_backend == "memory" and self._jobdir:
            path = Path(self._jobdir, CHECKPOINT_NAME)
            if path.exists():
                try:
                    self.store.load_into(path)
                    logger.info("Content index restored from %s (%d pages)", path, len(self.store))
                    self.stats.set_value("dedup/content/restored", len(self.store))
                    self._saved_pages = len(self.store)
                except Exception as exc:  # a corrupt checkpoint must not pass silently
                    kept = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
                    try:  # keep the bad file for inspection: the next checkpoint must not overwrite it
                        os.replace(path, kept)
                    except OSError:
                        kept = path
                    logger.error("Content index checkpoint %s is unreadable (%s): starting with an empty "
                                 "content index; near duplicates of pages from the previous run will be kept "
                                 "(the bad file is kept as %s)", path, exc, kept)
                    self.stats.inc_value("dedup/content/checkpoint_errors")
            if self.cfg.checkpoint_seconds:
                from twisted.internet.task import LoopingCall

                self._checkpoint_loop = LoopingCall(self.checkpoint)
                self._checkpoint_loop.start(self.cfg.checkpoint_seconds, now=False)

    def checkpoint(self) -> None:
        """Save the memory content index to ``JOBDIR`` now if it changed (atomic: temp file, fsync, rename).

        Called every ``DEDUP_CHECKPOINT_SECONDS`` and at close, so a crawl killed
        between two checkpoints loses at most that many seconds of kept pages (their
        near duplicates would be kept again on resume). A failed write is logged and
        counted, never raised: the crawl goes on.
        """
        if self.cfg.content_backend != "memory" or not self._jobdir:
            return
        pages = len(self.store)
        if pages == self._saved_pages:
            return
        path = Path(self._jobdir, CHECKPOINT_NAME)
        try:
            self.store.save(path)
        except (OSError, ValueError) as exc:
            logger.error("Could not checkpoint the content index to %s: %s", path, exc)
            self.stats.inc_value("dedup/content/checkpoint_errors")
            return
        self._saved_pages = pages
        self.stats.inc_value("dedup/content/checkpoints")

    # --- the per-response decision ---

    def verdict_for_response(self, response: Response) -> Verdict | None:
        """Fingerprint ``response`` once and return its verdict (None for non-text responses)."""
        try:
            return self._response_verdicts[response]
        except KeyError:
            pass
        verdict = self._decide_response(response)
        self._response_verdicts[response] = verdict
        return verdict

    def _decide_response(self, response: Response) -> Verdict | None:
        # JSON, XML feeds, CSS, JavaScript are data, not pages (content/structured.py says why). Asked of
        # every response: Scrapy makes some of them (``+json``) plain Responses, text all the same.
        kind = structured_kind(response.headers.get(b"Content-Type"), response.body[:SNIFF_BYTES])
        if _looks_binary(response) or (kind is None and not isinstance(response, TextResponse)):
            self._count("skipped_non_text")
            self.engine.skip_non_text()
            return None
        if kind is not None:
            if not self.counts["skipped_non_html"]:  # once per crawl: a line per response would flood the log
                logger.info("Structured responses (JSON, XML feeds, CSS, JavaScript, CSV) are not fingerprinted, "
                            "only counted in dedup/content/skipped_non_html (the first: %s at %s)",
                            kind, response.url)
            self._count("skipped_non_html")
            self.engine.skip_non_html()
            return None
        host = _host_of(response.url)
        policy = self.policies.lookup(host)
        try:
            text = self._extract(response, policy)
        except Exception as exc:  # hostile markup never stops the crawl
            logger.warning("Could not extract text from %s (%s: %s); page not fingerprinted",
                           response.url, type(exc).__name__, exc)
            self._count("extraction_errors")
            return None
        return self.check_text(response.url, text, policy, request=response.request)

    def _extract(self, response: TextResponse, policy: ExtractionPolicy) -> str:
        if len(response.body) > policy.max_bytes:
            return self._text_under(policy, response.body, _encoding_of(response))
        try:
            root = response.selector.root  # the tree Scrapy already parsed for the spider (not modified)
        except Exception:  # Scrapy could not decode it (a declared codec that is no text encoding): our decoder can
            return self._text_under(policy, response.body)
        return self._text_under(policy, root)

    def text_of_html(self, html: str | bytes, url: str) -> str:
        """Main text of an HTML document (an item's field) under its host's extraction policy, as for a response."""
        return self._text_under(self.policies.lookup(_host_of(url)), html)

    def _text_under(self, policy: ExtractionPolicy, source: Any, encoding: str | None = None) -> str:
        """``page_text`` of a document (bytes, str or parsed tree) by ``policy``; a long one cut at its max_bytes."""
        if isinstance(source, (bytes, str)) and len(source) > policy.max_bytes:
            self._count("truncated")
            source = source[: policy.max_bytes]
        return page_text(source, strip_tags=policy.strip_tags, strip_selectors=policy.strip_selectors,
                         encoding=encoding)

    def check_text(self, url: str, text: str, policy: ExtractionPolicy | None = None,
                   request: Request | None = None) -> Verdict | None:
        """Fingerprint ``text`` (main text of the page at ``url``) and check it against the index."""
        policy = policy or self.policies.lookup(_host_of(url))
        fingerprinter = self._fingerprinter_for(policy)
        fp = self._fingerprint(fingerprinter, text)
        degenerate = fingerprinter.is_degenerate(fp)
        try:
            if self._redis_policy is not None and not degenerate:
                verdict = self._redis_policy.call(self.engine.check_fingerprint, url, fp, degenerate)
            else:
                verdict = self.engine.check_fingerprint(url, fp, degenerate=degenerate)
        except RedisUnavailable:  # Redis is away (the policy logged it once): fail open, the item is kept
            self._count("store_errors")
            return None
        except Exception as exc:  # any other failure of the store: fail open too
            self._store_error(url, exc)
            return None
        self._record(verdict, fp, request)
        return verdict

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

    def _store_error(self, url: str, exc: Exception) -> None:
        """Content index unreachable: the page is kept unjudged (never dropped for an outage).

        Logged once per outage (the first error, then again after a success), counted always.
        """
        self._count("store_errors")
        if not self._store_failing:
            self._store_failing = True
            logger.error("Content index unavailable (%s); pages are kept without a duplicate "
                         "check until it is back (counted in dedup/content/store_errors)",
                         describe(exc, self._secrets))

    def _record(self, verdict: Verdict, fp: ContentFingerprint, request: Request | None) -> None:
        if self._store_failing:
            self._store_failing = False
            logger.info("Content index is back; duplicate checks resumed")
        self._count("fingerprinted")
        self._count(verdict.kind)
        if self.crawl_log is not None:
            self.crawl_log.write({
                "request_url": request.url if request is not None else verdict.url,
                "url": verdict.url,
                "canonical_url": self._canonical(request if request is not None else Request(verdict.url)),
                "exact_hash": _hex(fp.exact),
                "simhash": format(fp.simhash, "016x"),
                "words": fp.words,
                "kind": verdict.kind,
            })
        if verdict.kind in ("exact", "near"):
            if self.audit is not None:
                self.audit.write({"url": verdict.url, "kept_url": verdict.kept_url, "distance": verdict.distance,
                                  "kind": verdict.kind, "cluster": verdict.cluster})
            self._canary(verdict)

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

    def _count(self, name: str) -> None:
        self.counts[name] += 1
        self.stats.inc_value(f"dedup/content/{name}")

    # --- crawl end ---

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._checkpoint_loop is not None and self._checkpoint_loop.running:
            self._checkpoint_loop.stop()
        self.checkpoint()
        for sink in (self.audit, self.crawl_log):
            if sink is not None:
                sink.close()
        self.store.close()


def _looks_binary(response: Response) -> bool:
    """A body served as text but mostly control bytes (an image, a zip): see :func:`looks_binary`."""
    return looks_binary(response.body)


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


