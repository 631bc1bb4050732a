"""``DedupExtension``: the crawl's content state and signals, and the crawl-end duplication report.

One Scrapy extension per crawl holds what the content components share: each response's
reading (``content/pages.py``, remembered weakly per response object), the page judge with
its engine and store (``content/judge.py``, ``content/stores/``), the crawl's counts, logs
(``crawl_log.py``), paragraph flow (``paragraph_flow.py``), Redis state (``redis_content.py``)
and checkpoints. ``ContentFingerprintMiddleware``, ``NearDuplicatePipeline`` and
``DustLearningMiddleware`` reach it with ``crawler.get_extension(DedupExtension)``
(extensions are built before middlewares and pipelines). The store is built when the
first of them asks for it, so the extension alone opens no connection, and its report
then says the content layer is not enabled.

A response is read once, whoever asks first (DUST learning, a downloader middleware, sees it before
the spider middleware), and judged once: the verdict, taken by ``ContentFingerprintMiddleware``,
reuses the reading. ``DuplicationReportExtension`` is the same class under its former name.
"""
from __future__ import annotations

import dataclasses
import logging
import time
import weakref
from collections import Counter
from typing import TYPE_CHECKING, Any, cast

from scrapy import Request, signals
from scrapy.http import Response, TextResponse
from scrapy.utils.job import job_dir

from scrapy_dedup.clock import Clock, start_clock
from scrapy_dedup.content.boilerplate import BoilerplateJudge, BoilerplateLearner, BoilerplateRule, host_of
from scrapy_dedup.content.boilerplate import Judgement as BoilerplateJudgement
from scrapy_dedup.content.engine import ContentDeduplicator, ContentFingerprint, Verdict
from scrapy_dedup.content.extract import ExtractionPolicy
from scrapy_dedup.content.judge import PageJudge, PageVerdict
from scrapy_dedup.content.pages import PageReader, PageReading, extraction_policies
from scrapy_dedup.content.paragraphs import ParagraphDeduplicator
from scrapy_dedup.content.params import ParamError
from scrapy_dedup.content.report import bucket_canary, content_stats, paragraph_lines, url_lines
from scrapy_dedup.content.representative import parse_timestamp
from scrapy_dedup.content.stores import open_store
from scrapy_dedup.crawl_log import ClusterCanary, JsonLines, audit_record, crawl_log_record, redirect_record
from scrapy_dedup.jobdir import CHECKPOINT_NAME, IndexCheckpoint, disk_full_reported  # noqa: F401 (its former home)
from scrapy_dedup.paragraph_flow import (  # noqa: F401 (PARAGRAPHS_CHECKPOINT_NAME: its former home)
    PARAGRAPHS_CHECKPOINT_NAME, CrawlParagraphs, check_paragraphs_field)
from scrapy_dedup.redis_content import RedisContentState, StoreCalls, index_key
from scrapy_dedup.responses import KeptRequests, declared_canonical, source_of
from scrapy_dedup.settings import DedupConfigError, read_settings, refusing_start
from scrapy_dedup.url.preference import url_preference
from scrapy_dedup._util.redis_policy import RedisUnavailable, secrets_of

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.spiders import Spider
    from typing_extensions import Self

logger = logging.getLogger(__name__)

EXTENSION_PATH = "scrapy_dedup.extensions.DedupExtension"


class DedupExtension:
    """For ``EXTENSIONS``: the crawl's content state (shared by the content components) and the report."""

    def __init__(self, crawler: "Crawler"):
        self.crawler = crawler
        self.stats = crawler.stats
        self.cfg = cfg = read_settings(crawler.settings)
        try:
            self.policies = extraction_policies(cfg)
        except ParamError as exc:
            raise DedupConfigError(str(exc)) from None
        #: reads each response's page once: its policy, main text, blocks, fingerprint (content/pages.py)
        self.reader = PageReader(cfg, self.policies)
        self._pages: "weakref.WeakKeyDictionary[Response, PageReading]" = weakref.WeakKeyDictionary()
        # The content state proper, built by open_content() (None: no content component asked).
        self.engine: ContentDeduplicator | None = None
        self.store: Any = None
        #: the decision rule with per-host boilerplate learning (None: no host learns it)
        self.boilerplate: BoilerplateJudge | None = None
        #: paragraph-level exact dedup (None: no host has it on), and its crawl-side flow (paragraph_flow.py)
        self.paragraphs: ParagraphDeduplicator | None = None
        self.paragraph_flow: CrawlParagraphs | None = None
        #: what only a crawl meets, beside the engine's page counts (content.report.content_stats)
        self.events: Counter[str] = Counter()
        self.canary = ClusterCanary(cfg.canary_size)
        self.audit: JsonLines | None = None
        self.crawl_log: JsonLines | None = None
        #: the page judge (content/judge.py), built by open_content() with the engine
        self.judge: PageJudge | None = None
        #: which request fetched each kept page, when its URL alone does not tell: what tells a refetch
        self.kept_requests = KeptRequests(crawler)
        self._jobdir = job_dir(crawler.settings)
        self._checkpoint_loop: Clock | None = None  # every DEDUP_CHECKPOINT_SECONDS (memory index + JOBDIR)
        self._index_checkpoint: IndexCheckpoint | None = None  # the memory index in JOBDIR (open_content)
        self._closed = False
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
            self.store = open_store(cfg, cfg.content_backend, url=cfg.redis_url, redis_params=cfg.redis_params,
                                    key=index_key(cfg, self.crawler.spidercls), ttl=cfg.redis_ttl)
            policies = (self.policies.default, *self.policies.per_domain.values())
            uses = {name: any(getattr(p, name) for p in policies) for name in ("boilerplate", "paragraphs")}
            with refusing_start(self.crawler):  # its start-up checks: a refusal's line before Scrapy's record of it
                self.redis_state = RedisContentState(cfg, self.store, self.stats, self._secrets, **uses) \
                    if cfg.content_backend == "redis" else None  # (its outage policy and deletion; None: in memory)
            #: every call that reaches the store: under the Redis outage policy; a failure fails open
            self.store_calls = StoreCalls(self.redis_state.policy if self.redis_state is not None else None,
                                          self._secrets, self._count)
            if cfg.content_backend == "memory" and self._jobdir:
                self._index_checkpoint = IndexCheckpoint(self.crawler, self.store, self._jobdir)
            # the one page judge; the URL-level sameness kept when a crawl log or DUST learning reads it
            self.judge = PageJudge.from_params(
                cfg, self.store, boilerplate=False, min_words=self.policies.default.min_words,
                representative=cfg.representative, times_are_arrivals=not cfg.timestamp_field,
                url_sameness=bool(cfg.log_file) or cfg.dust_learn, url_key=url_preference)
            self.engine = self.judge.engine
            self.reader.use(self.engine.fingerprinter)
            if any(p.boilerplate for p in policies):
                self.boilerplate = self.judge.boilerplate = BoilerplateJudge(self.engine, BoilerplateLearner(
                    BoilerplateRule.from_params(cfg), *(self.redis_state.block_tables() if self.redis_state else ())))
            check_paragraphs_field(cfg, policies)
            if any(p.paragraphs for p in policies):
                self.paragraph_flow = CrawlParagraphs(cfg, self.stats, self.events, secrets=self._secrets,
                                                      index=getattr(self.store, "index", None), jobdir=self._jobdir)
                self.paragraphs = self.paragraph_flow.dedup
            self.audit = JsonLines(cfg.audit_file) if cfg.audit_file else None
            self.crawl_log = JsonLines(cfg.log_file) if cfg.log_file else None
        return self

    def _spider_opened(self, spider: "Spider") -> None:
        if self._index_checkpoint is None:  # no content component, the Redis backend, or no JOBDIR
            return
        self._index_checkpoint.restore()
        if self.paragraph_flow is not None:
            self.paragraph_flow.restore()
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
        if self._index_checkpoint is None or disk_full_reported(self.crawler):  # (a full disk: the last stays)
            return
        if self.paragraph_flow is not None:
            self.paragraph_flow.save()
        self._index_checkpoint.save()

    # --- fingerprints of responses (DUST learning and the verdict share them) ---

    def fingerprint_of_response(self, response: Response) -> ContentFingerprint | None:
        """The fingerprint of a page's main text under its host's policy; None if not a page, not readable,
        or degenerate (too few words). Computed once per response object, whoever asks first."""
        page = self.page_of(response)
        fp = page.fingerprint
        if fp is None:
            return None
        assert page.policy is not None  # set with the fingerprint (PageReader.read)
        if self.reader.fingerprinter_for(page.policy).is_degenerate(fp):
            return None
        return fp

    def page_of(self, response: Response) -> PageReading:
        page = self._pages.get(response)
        if page is None:
            page = self._pages[response] = self.reader.read(
                response.url, response.headers.get(b"Content-Type"), response.body,
                is_text=isinstance(response, TextResponse),
                source=lambda policy: source_of(cast(TextResponse, response), policy))
        return page

    # --- verdicts ---

    def same_page_cluster(self, response: Response) -> str | None:
        """What page ``response``'s URL serves by its verdict, for DUST learning (None: not judged): the
        verdict's cluster, or the page's own URL where the page judge's URL-level sameness does not hold
        (``content/judge.py``: a match only of the texts less boilerplate, of whole texts not alike)."""
        verdict = self.verdict_for_response(response)
        if verdict is None or verdict.cluster is None:
            return None
        return self.page_of(response).url_page or verdict.cluster

    def verdict_for_response(self, response: Response) -> Verdict | None:
        """The verdict of ``response``, taken once (None for what is not judged: not a page, unreadable,
        the store away)."""
        page = self.page_of(response)
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
            # a page neither skipped nor unreadable has both (PageReader.read)
            assert page.fingerprint is not None and page.policy is not None
            declares = (declared_canonical(response, page.policy.max_bytes)
                        if self.cfg.representative == "canonical" else None)
            page.verdict = self._judge(page.url, page.fingerprint, page.policy, response.request, page.blocks,
                                       declares=declares, page=page, title=page.title)
            if page.policy.paragraphs and page.blocks is not None:
                page.paragraphs = self._paragraph_flow().check(page.url, page.blocks)
        return page.verdict

    def paragraph_text_of(self, response: Response) -> str | None:
        """The main text of ``response`` less its repeated blocks (``DEDUP_PARAGRAPHS_FIELD``), judging it first
        if need be; None when its host has paragraph dedup off or it has no main text."""
        self.verdict_for_response(response)
        check = self.page_of(response).paragraphs
        return check.text if check is not None else None

    def _paragraph_flow(self) -> CrawlParagraphs:
        assert self.paragraph_flow is not None  # built by open_content() when a policy has paragraphs on
        return self.paragraph_flow

    def judge_content(self, url: str, value: Any, timestamp: Any = None) -> tuple[Verdict | None, str | None]:
        """The verdict of an item's content (``DEDUP_CONTENT_FIELD``): HTML extracted under the host's policy
        as a response is, anything else taken as the page's text; and that text less its repeated blocks when
        its host has paragraph dedup on (else None; the blocks of a plain text are its lines). ``timestamp``:
        the value of the item's ``DEDUP_TIMESTAMP_FIELD`` (``newest`` with that setting; else the fetch time)."""
        dating: dict[str, Any] = {}
        if self.cfg.representative == "newest" and self.cfg.timestamp_field:
            dating = {"timestamp": self._timestamp_of(url, timestamp), "dated": True}
        page = self.reader.read_content(url, value)
        if page.skipped:  # hostile markup never stops the crawl: the item is kept
            self._count(page.skipped)
            return None, None
        if page.truncated:
            self._count("truncated")
        assert page.fingerprint is not None and page.policy is not None  # read, not skipped
        verdict = self._judge(url, page.fingerprint, page.policy, None, page.blocks, title=page.title, **dating)
        blocks = page.blocks if page.lines is None else page.lines
        if not page.policy.paragraphs or blocks is None:
            return verdict, None
        return verdict, self._paragraph_flow().check(url, blocks).text

    def check_text(self, url: str, text: str, policy: ExtractionPolicy | None = None,
                   request: Request | None = None, timestamp: float | None = None,
                   dated: bool = False) -> Verdict | None:
        """Fingerprint ``text`` (main text of the page at ``url``) and check it against the index.

        ``timestamp``: the page's time for ``newest``; None: the fetch time, unless ``dated`` (the
        page's own time was asked for and it has none: it ranks after the pages that have one).
        """
        policy = policy or self.policies.lookup(host_of(url))
        return self._judge(url, self.reader.fingerprint(self.reader.fingerprinter_for(policy), text), policy, request,
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
               dated: bool = False, declares: str | None = None, page: PageReading | None = None,
               title: str | None = None) -> Verdict | None:
        """The verdict of a page (``fp``: of its whole text); with its ``blocks`` and a host that learns
        boilerplate, taken by the boilerplate rule (``content/boilerplate.py``: ``BoilerplateJudge``).
        ``timestamp``/``dated``/``declares``: what the representative policy may look at (``check_text``);
        ``page``: the response's state, told whether the verdict rests on the text less boilerplate."""
        engine = self.open_content().engine
        assert engine is not None  # open_content() built it
        fingerprinter = self.reader.fingerprinter_for(policy)
        if timestamp is None and not dated and self.cfg.representative == "newest":
            timestamp = time.time()  # the fetch time, near enough: a page is judged as soon as it arrives
        assert self.judge is not None  # built with the engine
        try:
            judged = self.judge.judge_page(url, fp, fingerprinter, blocks, learns_boilerplate=policy.boilerplate,
                                           fingerprint=lambda text: self.reader.fingerprint(fingerprinter, text),
                                           call=self.store_calls.call, timestamp=timestamp, declares=declares,
                                           title=title, media=page.media if page is not None else None)
            if judged.judgement is not None:  # the boilerplate rule's account
                self._count_boilerplate(url, judged.judgement)
        except RedisUnavailable:  # Redis is away (the policy logged it once): fail open, the item is kept
            self._count("store_errors")
            return None
        except Exception as exc:  # any other failure of the store: fail open too
            self.store_calls.failed(exc)
            return None
        if page is not None:
            page.url_page = None if judged.url_same else judged.url_page
        if request is not None:
            verdict = self.kept_requests.same_request(judged.verdict, request)
            if verdict is not judged.verdict:  # a refetch of its URL, by another request
                self._count("refetch_of_another_request")
                judged = dataclasses.replace(judged, verdict=verdict)
        self._record(judged, request)
        return judged.verdict

    def _count_boilerplate(self, url: str, judgement: BoilerplateJudgement) -> None:
        """Stats of boilerplate learning: pages by state, guarded matches, re-checks, blocks learnt per host."""
        for name, count in judgement.counts().items():
            self._count(name, count)
        if judgement.undecidable:  # counted in the report (dedup/content/undecidable), named there too
            logger.info("Undecidable page kept: %s (only its host's template is left once that is left out)", url)
        host = host_of(url)
        learned = self.boilerplate.learner.blocks_learned(host) if self.boilerplate is not None else 0
        if learned:
            self.stats.set_value(f"dedup/content/boilerplate/blocks/{host or '-'}", learned)

    def _record(self, judged: PageVerdict, request: Request | None) -> None:
        verdict = judged.verdict
        self.store_calls.succeeded()
        assert self.engine is not None  # a verdict came from it
        counts = self.engine.counts()
        self.stats.set_value(f"dedup/content/{verdict.kind}", counts[verdict.kind])
        self.stats.set_value("dedup/content/fingerprinted", sum(counts.values()))
        if self.crawl_log is not None:
            url_key = self._canonical(request if request is not None else Request(judged.verdict.url))
            self.crawl_log.write(crawl_log_record(judged, request, url_key))
        if verdict.kind in ("exact", "near"):
            if self.audit is not None:
                self.audit.write(audit_record(verdict))
            if self.canary.grew(verdict):
                self._count("canary_warnings")

    def _record_redirect(self, response: Response, request: Request, spider: Any = None) -> None:
        """A crawl-log line for a redirect (``mine-dust`` learns aliases from it)."""
        record = redirect_record(response, request)
        if self.crawl_log is not None and record is not None:
            self.crawl_log.write(record)

    def _canonical(self, request: Request) -> str:
        """The URL key of ``request`` (the fingerprinter caches it per request: no second canonicalization)."""
        canonical = getattr(self.crawler.request_fingerprinter, "canonical_url", None)
        if canonical is None:
            return request.url
        try:
            return canonical(request)
        except Exception:  # an odd URL: log it as it is
            return request.url

    def _count(self, name: str, count: int = 1) -> None:
        """One more event only a crawl meets, in ``events`` and copied to its stat (content.report.content_stats)."""
        self.events[name] += count
        self.stats.set_value(f"dedup/content/{name}", self.events[name])

    # --- crawl end: the report, then closing ---

    def _request_scheduled(self, request: Request, spider: Any = None) -> None:
        if not request.dont_filter:  # the schedulers (Scrapy's, scrapy-redis's) ask the dupefilter about it
            self.requests["checked"] += 1

    def _request_dropped(self, request: Request, spider: Any = None) -> None:
        self.requests["filtered"] += 1  # the scheduler refused it: its dupefilter had seen it

    def url_lines(self) -> list[str]:
        return url_lines(self.stats.get_stats(), self.requests)

    def content_lines(self) -> list[str]:
        if self.engine is None:
            return ["Content layer: not enabled (add NearDuplicatePipeline / ContentFingerprintMiddleware)"]
        # every dedup/content/* stat from the one place each number is kept (content.report.content_stats)
        for key, value in content_stats(self.engine.report(), self.events, self.store).items():
            self.stats.set_value(key, value)
        lines = ["Content layer:"]
        lines += ["  " + line for line in self.engine.report().to_text().splitlines()]
        bucket = self._bucket_canary()
        if bucket:
            self.stats.set_value("dedup/content/largest_bucket", bucket)
            lines.append(f"  WARNING: one index bucket holds {bucket} pages (template canary, see the log)")
        if self.events["extraction_errors"]:
            lines.append(f"  Extraction errors:     {self.events['extraction_errors']}")
        if self.paragraphs is not None:
            lines += paragraph_lines(self.paragraphs, self.events["paragraphs/store_errors"])
        return lines

    def _bucket_canary(self) -> int:
        """:func:`~scrapy_dedup.content.report.bucket_canary` of the store's index (0: none, or no index)."""
        largest = getattr(getattr(self.store, "index", None), "largest_bucket", None)
        return 0 if largest is None else bucket_canary(largest(), len(self.store), self.cfg)

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
            assert self.redis_state is not None  # the Redis backend has one
            self.redis_state.delete_at_close()
        self.store.close()



#: the former name, kept for ``EXTENSIONS`` entries that use it (the same class: one instance per crawl)
DuplicationReportExtension = DedupExtension
