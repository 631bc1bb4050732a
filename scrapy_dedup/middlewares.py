"""Spider middleware: fingerprint each response once, before the spider parses it.

The decision (unique, exact or near duplicate, degenerate) is taken in
``process_spider_input``, so that ``DEDUP_DROP_DUPLICATE_RESPONSES`` can stop a
duplicate page before its callback runs (its links are then not followed
either). Every item the callback yields gets the response's decision here, in
``process_spider_output``, the one place where an item and its response meet:
with ``NearDuplicatePipeline`` enabled, ``DEDUP_CONTENT_ACTION`` is applied to it
at once (dropped, tagged, or passed on). Why here and not in the pipeline: a
pipeline sees only the item object, and Scrapy lets every earlier pipeline return
another object (``return dict(item)``) and every later spider middleware filter or
replace items, so no identity of the object (``id()``, a weak map: plain dicts
cannot be weakly referenced) reliably leads back to its response. A dropped item
goes the way of one a pipeline drops: Scrapy's log formatter, the
``item_dropped`` signal and so ``item_dropped_count`` /
``item_dropped_reasons_count/<class>``.

:class:`CanonicalRedirectMiddleware`, a downloader middleware, keeps redirects between URLs of
one canonical key from losing their page, and sends a request for a URL of the DUST alias
table to the alias target (see its docstring).
"""
from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.utils.log import logformatter_adapter
from w3lib.url import safe_url_string

from scrapy_dedup.extensions import DedupExtension
from scrapy_dedup.logformatter import duplicate_log_entry, formatter_logs_duplicates_itself
from scrapy_dedup.pipelines import DuplicateAction, DuplicateItem, ParagraphsField, pipeline_enabled
from scrapy_dedup.url.canonical import Canonicalizer
from scrapy_dedup.url.mining import safe_parts
from scrapy_dedup.url.policy import SWITCHES, UrlPolicy

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.spiders import Spider
    from typing_extensions import Self

logger = logging.getLogger(__name__)


class DuplicateResponse(IgnoreRequest):
    """A response whose page was already seen, dropped before parsing (DEDUP_DROP_DUPLICATE_RESPONSES)."""


class ContentFingerprintMiddleware:
    """For ``SPIDER_MIDDLEWARES``: content fingerprints of responses, decided once per response."""

    def __init__(self, crawler: "Crawler"):
        extension = DedupExtension.of(crawler, "ContentFingerprintMiddleware")
        cfg = extension.cfg
        if cfg.content_field:
            # Items carry their own content: the pipeline fingerprints them, responses are left alone.
            raise NotConfigured  # (no message: an intended state, not worth a warning)
        self.content = extension.open_content()
        self.drop_duplicates = cfg.drop_duplicate_responses
        self.stats = crawler.stats
        self.crawler = crawler
        #: the pipeline's action, applied here (None: the pipeline is off, items pass unjudged)
        self.decide = DuplicateAction(crawler, cfg) if pipeline_enabled(crawler) else None
        self.paragraphs_field = ParagraphsField.of(crawler, cfg)

    @classmethod
    def from_crawler(cls, crawler: "Crawler") -> "Self":
        return cls(crawler)

    def process_spider_input(self, response: "Response", spider: "Spider | None" = None) -> None:
        verdict = self.content.verdict_for_response(response)
        if self.drop_duplicates and verdict is not None and verdict.kind in ("exact", "near"):
            if verdict.is_refetch:
                # The same request fetched again (a dont_filter request, a page in flight when a crawl was
                # killed and fetched again on resume): whether its links were followed the first time is
                # unknown, so it is parsed, as its items are kept (DuplicateAction), rather than risk losing
                # every page only it links to.
                self.stats.inc_value("dedup/content/refetch_parsed")
                return
            self.stats.inc_value(f"dedup/content/dropped_responses/{verdict.kind}")
            raise DuplicateResponse(
                f"{verdict.kind} duplicate of {verdict.kept_url} (distance {verdict.distance})"
            )

    async def process_spider_output(
        self, response: "Response", result: AsyncIterator[Any], spider: "Spider | None" = None
    ) -> AsyncIterator[Any]:
        verdict = self.content.verdict_for_response(response)
        decide, field = self.decide, self.paragraphs_field
        unique_text = self.content.paragraph_text_of(response) if field is not None else None
        async for obj in result:
            if field is not None and obj is not None and not isinstance(obj, Request):
                field.fill(obj, unique_text)
            if decide is not None and obj is not None and not isinstance(obj, Request):
                try:
                    obj = decide.apply(obj, verdict)
                except DuplicateItem as exc:
                    self._dropped(obj, exc, response)
                    continue
            yield obj

    def _dropped(self, item: Any, exc: DuplicateItem, response: "Response") -> None:
        """What Scrapy's scraper does with an item a pipeline drops: log it (one line), send ``item_dropped``."""
        spider = self.crawler.spider
        formatter = self.crawler.logformatter
        if formatter_logs_duplicates_itself(formatter):  # the project's own LOG_FORMATTER decides
            assert spider is not None  # items flow only while the spider runs
            logkws = formatter.dropped(item, exc, response, spider)
        else:
            logkws = duplicate_log_entry(exc, exc.log_level)
        if logkws is not None:
            logger.log(*logformatter_adapter(logkws), extra={"spider": spider, "item": item})
        self.crawler.signals.send_catch_log(signal=signals.item_dropped, item=item, response=response,
                                            spider=spider, exception=exc)

    def process_spider_exception(
        self, response: "Response", exception: Exception, spider: "Spider | None" = None
    ) -> Iterable[Any] | None:
        if isinstance(exception, DuplicateResponse):
            logger.debug("Ignoring duplicate response %s: %s", response, exception)
            return []
        return None


#: request meta key of a request sent to its alias target (the URL it was for)
ALIAS_META = "dedup_dust_alias_of"
#: request meta key of a request whose redirect stays within its canonical key (``dont_filter`` set here)
SAME_KEY_REDIRECT_META = "dedup_same_key_redirect"


class CanonicalRedirectMiddleware:
    """For ``DOWNLOADER_MIDDLEWARES`` (order 650: it sees a response before ``RedirectMiddleware``, 600):
    redirects between URLs of one canonical key, and the DUST alias table.

    A request takes its URL's canonical key in the dupefilter. When the server redirects it
    to a URL of the same key (``/old/a`` -> ``/a`` under a DUST rule, ``/a`` -> ``/a/`` when
    the trailing slash is stripped), the redirected request would be dropped as already
    seen and the page lost: the request is marked ``dont_filter`` before
    ``RedirectMiddleware`` copies that flag to the redirected request (its key is the one
    this request already took). Counted in ``dedup/url/redirect_same_key``.

    A request for a URL of the alias table (``DEDUP_DUST_RULES``, mined from redirects) is
    sent to the alias target at once (no redirect hop), past the dupefilter for the same
    reason; counted in ``dedup/dust/alias_requests``. Off (NotConfigured) without
    ``CanonicalRequestFingerprinter``.
    """

    def __init__(self, crawler: "Crawler"):
        canonicalizer = getattr(crawler.request_fingerprinter, "canonicalizer", None)
        if canonicalizer is None:
            raise NotConfigured
        # the fingerprinter's policies and (live) rules, in a canonicalizer of its own: the online
        # learner's may decide to explore on each call, which a redirect check must not trigger
        self.canonicalizer = Canonicalizer(canonicalizer.policies, dust_rules=canonicalizer.dust)
        self.rules = canonicalizer.dust
        switches_off: dict[str, Any] = {name: False for name in SWITCHES}
        self.safe = Canonicalizer(UrlPolicy(**switches_off))
        self.stats = crawler.stats

    @classmethod
    def from_crawler(cls, crawler: "Crawler") -> "Self":
        return cls(crawler)

    def process_request(self, request: Request, spider: "Spider | None" = None) -> Request | None:
        if self.rules is None or not self.rules.aliases or ALIAS_META in request.meta:
            return None
        parts = safe_parts(self.safe, request.url)
        if parts is None:
            return None
        host_rules = self.rules.for_host(parts[0])
        if host_rules is None or not host_rules.aliases:
            return None
        target = host_rules.alias_of(parts[1], parts[2])
        if target is None or target == parts[1:]:  # no alias, or the request is for the target itself
            return None
        path, query = target
        scheme, _, rest = request.url.partition("://")
        authority = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
        url = f"{scheme}://{authority}{path}" + (f"?{query}" if query else "")
        self.stats.inc_value("dedup/dust/alias_requests")
        logger.debug("DUST alias: %s is %s; requesting it directly", request.url, url)
        return request.replace(url=url, dont_filter=True, meta={**request.meta, ALIAS_META: request.url})

    def process_response(self, request: Request, response: "Response", spider: "Spider | None" = None) -> Any:
        location = response.headers.get("Location") if 300 <= response.status < 400 else None
        if location and not request.dont_filter:
            try:
                target = response.urljoin(safe_url_string(location.decode("latin-1")))
                same = self.canonicalizer.canonicalize(target) == self.canonicalizer.canonicalize(request.url)
            except ValueError:  # RedirectMiddleware decides what to do with a Location it cannot use
                same = False
            if same:
                request.dont_filter = True  # copied to the redirected request by RedirectMiddleware
                request.meta[SAME_KEY_REDIRECT_META] = True  # (so is this: the flag is ours, not the spider's)
                self.stats.inc_value("dedup/url/redirect_same_key")
        return response
