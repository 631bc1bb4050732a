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
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Hashable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy import Request, signals
from scrapy.exceptions import DontCloseSpider, IgnoreRequest, NotConfigured
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.log import logformatter_adapter
from w3lib.url import safe_url_string

from scrapy_dedup.content.paragraphs import page_blocks_held, strictly_nested
from scrapy_dedup.content.keeper import Action, Group, ItemKeeper, Outcome
from scrapy_dedup.content.sketch import Sketch, resemblance
from scrapy_dedup.engine_hook import internal, on_close_start
from scrapy_dedup.url.preference import url_preference
from scrapy_dedup.extensions import DedupExtension
from scrapy_dedup.duplicates import (  # noqa: F401 (the meta keys re-exported: their former home)
    ALIAS_META,
    RELEASE_META,
    SAME_KEY_REDIRECT_META,
    UNJOURNALED_META,
    DuplicateAction,
    DuplicateItem,
    ParagraphsField,
    duplicate_log_entry,
    pipeline_enabled,
)
from scrapy_dedup.jobdir import uses_scrapys_scheduler
from scrapy_dedup.logformatter import formatter_logs_duplicates_itself
from scrapy_dedup.url.canonical import Canonicalizer, safe_parts
from scrapy_dedup.url.policy import SWITCHES, UrlPolicy
from scrapy_dedup.url.views import is_view, names_other_resource, names_other_selection, page_key

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.spiders import Spider
    from typing_extensions import Self

    from scrapy_dedup.content.engine import Verdict

logger = logging.getLogger(__name__)

#: what a release request fetches: nothing, with no download (Scrapy's ``data:`` handler), and not a page
RELEASE_URL = "data:application/octet-stream,"
#: released items go out before the pages waiting in the scheduler
RELEASE_PRIORITY = 1_000_000
#: a view (url/views.py) shows the page its URL names when its text lacks at most this share of the page's shingles
#: (an earlier revision that rewrote a sentence and added a note, a diff with the page below its table: the content
#: engine's resemblance rule cannot take them, their own text is a sibling's share on short pages) ...
VIEW_MISSING_SHARE = 0.25
#: ... or, on a short page, at most this many shingles (a rewritten sentence and an added note: two sentences of
#: about 24 words), and never half of the page: another view on the page's template (a git viewer's other commit,
#: a tree at another commit that changed a file) lacks what differs, its own text
VIEW_MISSING_EDIT = 48
#: ... and has no more text of its own (shingles not in the page) than the page has: a diff against a wholly
#: other text (a start page's installer text) shows that text too, a record of its own
VIEW_OWN_TEXT = 1.0
#: pages and views remembered by the page they name (url/views.py page_key), for the views' items: each
#: about a sketch (1 KB at the default size); a view of a page older than that is judged as before
VIEW_PAGES_KEPT = 4096
VIEWS_PER_PAGE = 16
#: kept pages whose URL has a query, remembered with their blocks (about 8 bytes a distinct block) for the
#: pages of the same script asked with another value of a parameter (url/views.py names_other_selection)
SELECTION_PAGES_KEPT = 4096


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
        #: drop mode: which member's items a cluster keeps (content/keeper.py; docs/items.md)
        self.keeper: ItemKeeper | None = None
        if self.decide is not None and self.decide.action == "drop" and not uses_scrapys_scheduler(crawler):
            # held items are sent on by requests whose callback is no spider method: a queue that must
            # serialize every request (scrapy-redis's) would refuse them
            logger.info("Item keeper off: SCHEDULER is not Scrapy's own; in drop mode the first page of a "
                        "cluster with an item keeps it (docs/items.md)")
        elif self.decide is not None and self.decide.action == "drop":
            self.keeper = ItemKeeper(cfg.hold_max_items, cfg.hold_max_bytes)
            self.sketch_size = cfg.sketch_size
            #: page key -> (cluster, URL, sketch) of the first page that is no view; -> views kept apart from it
            self._page_by_key: OrderedDict[str, tuple[Hashable, str, Sketch]] = OrderedDict()
            self._views_by_key: OrderedDict[str, list[tuple[Hashable, Sketch]]] = OrderedDict()
            #: URL -> the blocks of a kept page whose URL has a query (content/paragraphs.py page_blocks_held)
            self._blocks_by_url: OrderedDict[str, Any] = OrderedDict()
            #: the cluster of each response whose items went through the keeper (the signals name the response)
            self._cluster_of_response: weakref.WeakKeyDictionary[Response, Hashable] = weakref.WeakKeyDictionary()
            crawler.signals.connect(self._item_scraped, signal=signals.item_scraped)
            crawler.signals.connect(self._item_dropped, signal=signals.item_dropped)
            crawler.signals.connect(self._item_error, signal=signals.item_error)
            crawler.signals.connect(self._spider_idle, signal=signals.spider_idle)
            crawler.signals.connect(self._spider_closed, signal=signals.spider_closed)
            crawler.signals.connect(self._spider_opened, signal=signals.spider_opened)

    @classmethod
    def from_crawler(cls, crawler: "Crawler") -> "Self":
        return cls(crawler)

    def process_spider_input(self, response: "Response", spider: "Spider | None" = None) -> None:
        if _released_cluster(response) is not None:  # held items sent on: no page
            return
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
        if _released_cluster(response) is not None:  # held items sent on (their bookkeeping is done)
            async for obj in result:
                yield obj
            return
        verdict = self.content.verdict_for_response(response)
        decide, field = self.decide, self.paragraphs_field
        unique_text = self.content.paragraph_text_of(response) if field is not None else None
        member = self._member(verdict)
        shown, selection = None, False
        if member is not None:
            assert self.keeper is not None and verdict is not None  # (_member)
            self.keeper.page_open(member, first=verdict.kind == "unique")
            shown = self._page_shown(response, verdict, member)
            if shown is not None:  # a view of a page kept apart: its items are that page's duplicates
                verdict = replace(verdict, kind="near", kept_url=shown[1], cluster=str(shown[0]), distance=None)
            selection = shown is None and self._other_selection(response, verdict)
        try:
            async for obj in result:
                if field is not None and obj is not None and not isinstance(obj, Request):
                    field.fill(obj, unique_text)
                if member is not None and obj is not None and not isinstance(obj, Request):
                    assert verdict is not None
                    obj = self._keep(obj, verdict, verdict.cluster if shown is not None else member, response,
                                     other_selection=selection)
                    if obj is None:
                        continue
                elif decide is not None and obj is not None and not isinstance(obj, Request):
                    try:
                        obj = decide.apply(obj, verdict)
                    except DuplicateItem as exc:
                        self._dropped(obj, exc, response)
                        continue
                yield obj
        finally:
            if member is not None:
                assert self.keeper is not None
                self._carry_out(self.keeper.page_done(member), response)

    # --- drop mode: the item keeper (content/keeper.py) ---

    def _member(self, verdict: "Verdict | None") -> Hashable | None:
        """The cluster whose member ``verdict``'s page is, when the keeper decides its items (drop mode, a page
        in a cluster). The same URL fetched again is a member too: its items pass when its cluster has none
        yet, and are kept anyway otherwise (``DuplicateAction``: whether the first fetch's were stored is
        unknown after a resume)."""
        if self.keeper is None or verdict is None or verdict.cluster is None or verdict.kind == "degenerate":
            return None
        return verdict.cluster

    def _page_shown(self, response: "Response", verdict: "Verdict", cluster: Hashable) -> tuple[Hashable, str] | None:
        """Views and the page their URL names (url/views.py ``page_key``), kept apart by the content engine: an
        earlier revision or a diff is no near duplicate of its page by resemblance, yet shows it. For a view
        whose text holds the page's but for an edit (:data:`VIEW_MISSING_SHARE`), fetched after the page: the
        page's (cluster, URL), whose duplicates its items are. For the page (no view): the views of it fetched
        before, whose items are held, are joined to its cluster (``ItemKeeper.join``). URLs that are no view of
        another are never joined to another page: siblings on one template are judged by the engine alone."""

        def shows(view: Sketch, page: Sketch) -> bool:
            estimate = resemblance(view, page, self.sketch_size)
            missing = max(VIEW_MISSING_SHARE * page.shingles, min(VIEW_MISSING_EDIT, page.shingles / 2))
            return estimate.only_b <= missing and estimate.only_a <= VIEW_OWN_TEXT * page.shingles

        assert self.keeper is not None
        fp = self.content.fingerprint_of_response(response)
        sketch = fp.sketch if fp is not None else None
        if sketch is None or not self.sketch_size:
            return None
        url, key = verdict.url, page_key(verdict.url)
        if is_view(url):
            page = self._page_by_key.get(key)
            if page is not None:
                if page[0] != cluster and shows(sketch, page[2]):
                    self.stats.inc_value("dedup/items/views_joined")
                    return page[0], page[1]
                return None
            views = self._views_by_key.setdefault(key, [])
            self._views_by_key.move_to_end(key)
            if len(views) < VIEWS_PER_PAGE and all(known != cluster for known, _ in views):
                views.append((cluster, sketch))
            if len(self._views_by_key) > VIEW_PAGES_KEPT:
                self._views_by_key.popitem(last=False)
            return None
        if key in self._page_by_key:
            return None
        self._page_by_key[key] = (cluster, url, sketch)
        if len(self._page_by_key) > VIEW_PAGES_KEPT:
            self._page_by_key.popitem(last=False)
        for view_cluster, view_sketch in self._views_by_key.pop(key, ()):
            if view_cluster != cluster and shows(view_sketch, sketch):
                self.stats.inc_value("dedup/items/views_joined")
                self._carry_out(self.keeper.join(view_cluster, cluster, url, verdict), response)
        return None

    def _keep(self, item: Any, verdict: "Verdict", cluster: Hashable, response: "Response", *,
              other_selection: bool = False) -> Any:
        """The item to pass on now, or None (held back, or dropped as a duplicate); ``other_selection``: the page
        is another selection of the page it matched (:meth:`_other_selection`)."""
        assert self.keeper is not None and self.decide is not None
        url = verdict.url
        refetch = verdict.kept_url == url
        if refetch and not getattr(response.request, "dont_filter", True) and self.keeper.stored_here(cluster):
            # the same URL fetched again by a request that asked for no refetch (a link back to a start URL:
            # Scrapy's start requests skip the dupefilter, so the link passes it) after an item of its cluster
            # was stored in this process: a duplicate, known to be one (judged as one another request fetched:
            # DuplicateAction keeps a refetch because it cannot know; a dont_filter request keeps its item)
            self.stats.inc_value("dedup/items/refetch_dropped")
            try:
                return self.decide.apply(item, replace(verdict, same_request=False))
            except DuplicateItem as exc:
                self._dropped(item, exc, response)
                return None
        if refetch and self.keeper.has_item(cluster):
            # kept as before (DuplicateAction: whether the first fetch's items were stored is unknown), unless
            # this crawl knows the first fetch yielded none and another member's items passed instead
            adopted = self.keeper.adopted_by(cluster)
            try:
                return self.decide.apply(item, replace(verdict, kept_url=adopted) if adopted else verdict)
            except DuplicateItem as exc:
                self._dropped(item, exc, response)
                return None
        if other_selection or (verdict.kept_url and names_other_resource(url, verdict.kept_url)):
            # another resource of the page it matched (its source, its history; another window of a listing): an
            # item of its own, outside the cluster's bookkeeping (url/views.py)
            self.stats.inc_value("dedup/items/other_resource_kept")
            return item
        view = is_view(url) and not refetch  # (a refetch is kept in every mode: never held)
        outcome = self.keeper.offer(cluster, url, (view, *url_preference(url)), view, item, verdict, _size_of(item))
        self._cluster_of_response[response] = cluster
        self._carry_out(outcome, response)
        if outcome.action is Action.PASS:
            if self.keeper.closing and (view or verdict.is_duplicate):  # it could have been held: the crawl closes
                self.stats.inc_value("dedup/items/released_at_close")
            if verdict.is_duplicate:  # its cluster has no item (yet): this page's is it
                self.stats.inc_value("dedup/items/cluster_had_no_item")
            return item
        if outcome.action is Action.HOLD:
            self.stats.inc_value("dedup/items/held")
            return None
        try:
            return self.decide.apply(item, verdict)
        except DuplicateItem as exc:
            self._dropped(item, exc, response)
            return None

    def _other_selection(self, response: "Response", verdict: "Verdict") -> bool:
        """Whether a near duplicate is another selection of the kept page: the same script asked with another
        value of a parameter (url/views.py ``names_other_selection``) and a text that holds every block of the
        kept page's and more, or whose blocks are all the kept page's and fewer (content/paragraphs.py
        ``strictly_nested``): the last 100 changes of a wiki that holds 101 and the last 250. Remembers the
        blocks of each kept page whose URL has a query. A page edited in place (a sentence rewritten) is not
        nested; a page with a block added under another value of a parameter the default canonicalization
        does not know (``?ref=a``, ``?ref=b``) keeps a second item (a duplicate, never a loss)."""
        if verdict.kind not in ("unique", "near") or "?" not in verdict.url:
            return False
        kept_url = verdict.kept_url or ""
        if verdict.kind == "near" and not (kept_url in self._blocks_by_url
                                           and names_other_selection(verdict.url, kept_url)):
            return False
        blocks = self.content.page_of(response).blocks
        if blocks is None:
            return False
        if verdict.kind == "unique":
            self._blocks_by_url[verdict.url] = page_blocks_held(blocks)
            if len(self._blocks_by_url) > SELECTION_PAGES_KEPT:
                self._blocks_by_url.popitem(last=False)
            return False
        return strictly_nested(page_blocks_held(blocks), self._blocks_by_url[kept_url])

    def _carry_out(self, outcome: Outcome, response: "Response | None") -> None:
        """Drop the held items ``outcome`` supersedes; send on the groups it releases."""
        assert self.keeper is not None and self.decide is not None
        for held, kept_url, kept_verdict in outcome.drop:
            verdict = held.payload
            if not verdict.is_duplicate:  # a view: the page whose item passed matched it
                verdict = replace(verdict, kind=getattr(kept_verdict, "kind", "near"),
                                  distance=getattr(kept_verdict, "distance", None))
            self.stats.inc_value("dedup/items/superseded")
            try:
                self.decide.apply(held.item, replace(verdict, kept_url=kept_url))
            except DuplicateItem as exc:
                self._dropped(held.item, exc, response)
        for group in outcome.release:
            self._send(group)
        if self.keeper.overflowed:
            self.stats.set_value("dedup/items/released_over_bound", self.keeper.overflowed)

    def _send(self, group: Group) -> None:
        """The held items of ``group`` through the rest of the crawl, as if yielded now: a request answered
        without a download (``data:``), whose callback yields them (the later spider middlewares, the item
        pipelines, and the signals this keeper follows see them as any other items)."""
        self.stats.inc_value("dedup/items/released", len(group.items))
        assert self.crawler.engine is not None  # items flow only while the engine runs
        self.crawler.engine.crawl(Request(
            RELEASE_URL, callback=_yield_items, cb_kwargs={"items": [held.item for held in group.items]},
            dont_filter=True, priority=RELEASE_PRIORITY, meta={RELEASE_META: group.cluster, UNJOURNALED_META: True}))

    def _cluster_of(self, response: "Response | None") -> Hashable | None:
        if response is None:
            return None
        released = _released_cluster(response)
        return released if released is not None else self._cluster_of_response.get(response)

    def _item_scraped(self, item: Any, response: "Response | None" = None) -> None:
        cluster = self._cluster_of(response)
        if cluster is not None:
            assert self.keeper is not None
            self._carry_out(self.keeper.scraped(cluster), None)

    def _item_dropped(self, item: Any, response: "Response | None" = None,
                      exception: BaseException | None = None) -> None:
        if isinstance(exception, DuplicateItem):  # ours: the keeper decided it
            return
        self._item_lost(response)

    def _item_error(self, item: Any, response: "Response | None" = None) -> None:
        self._item_lost(response)

    def _item_lost(self, response: "Response | None") -> None:
        """An item that passed was dropped by a later pipeline, or failed in one: its cluster may need another."""
        cluster = self._cluster_of(response)
        if cluster is not None:
            assert self.keeper is not None
            self._carry_out(self.keeper.dropped(cluster), None)

    def _spider_idle(self) -> None:
        """The crawl's end: every item still held is sent on (its better member never came), and the crawl
        goes on until they have passed."""
        assert self.keeper is not None
        outcome = self.keeper.release_all()
        if not outcome.release:
            return
        items = sum(len(group.items) for group in outcome.release)
        self.stats.inc_value("dedup/items/released_at_end", items)
        logger.info("Released %d held items of %d clusters at the crawl's end: the page each was a view of, or "
                    "an item of its cluster that passed every pipeline, never came (dedup/items/released_at_end)",
                    items, len(outcome.release))
        self._carry_out(outcome, None)
        raise DontCloseSpider

    def _spider_opened(self) -> None:
        on_close_start(self.crawler, self._closing, who="The item keeper (drop mode)")

    def _closing(self, reason: str) -> None:
        """The crawl closes otherwise than by running out of requests (a ``CLOSESPIDER_*`` limit, a shutdown
        signal): no ``spider_idle`` will come, so what is held goes to the item pipelines now, straight (the
        engine takes no more requests; the spider middlewares after this one do not see these items), and
        the pages still in flight hold nothing (``ItemKeeper.release_all(closing=True)``)."""
        assert self.keeper is not None
        outcome = self.keeper.release_all(closing=True)
        if not outcome.release:
            return
        scraper = internal(self.crawler, "engine.scraper", who="The item keeper (drop mode)")
        start = getattr(scraper, "start_itemproc_async", None)  # Scrapy >= 2.14
        items = [held.item for group in outcome.release for held in group.items]
        self.stats.inc_value("dedup/items/released", len(items))
        self.stats.inc_value("dedup/items/released_at_close", len(items))
        for item in items:
            if start is not None:
                deferred_from_coro(start(item, response=None))
            else:  # Scrapy 2.13
                scraper.start_itemproc(item, response=None)

    def _spider_closed(self, reason: str = "") -> None:
        assert self.keeper is not None
        released = self.stats.get_value("dedup/items/released_at_close", 0)
        if released:
            logger.info("Released %d held items as the crawl closed (%s) before its end: the page each was a view "
                        "of never came (dedup/items/released_at_close)", released, reason)
        if self.keeper.held_items:
            self.stats.set_value("dedup/items/unreleased_at_close", self.keeper.held_items)
            logger.warning("%d held items were not released: the crawl closed (%s) before its end, when they "
                           "would have been (dedup/items/unreleased_at_close; DEDUP_HOLD_MAX_ITEMS bounds them)",
                           self.keeper.held_items, reason)

    def _dropped(self, item: Any, exc: DuplicateItem, response: "Response | None") -> None:
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


def _released_cluster(response: "Response") -> Hashable | None:
    """The cluster whose held items ``response`` sends on (a release request's), else None."""
    request = getattr(response, "request", None)
    return request.meta.get(RELEASE_META) if request is not None else None


async def _yield_items(response: "Response", items: list[Any]) -> AsyncIterator[Any]:
    """The callback of a release request: the held items it carries."""
    for item in items:
        yield item


def _size_of(item: Any) -> int:
    """About how many bytes ``item`` holds: its text and bytes fields' lengths, a few dozen for anything else."""
    try:
        values = list(ItemAdapter(item).values())
    except Exception:  # an item type ItemAdapter does not know: Scrapy would refuse it later
        return 64
    return 64 + sum(len(v) if isinstance(v, (str, bytes)) else 16 for v in values)




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
