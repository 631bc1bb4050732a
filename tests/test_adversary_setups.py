"""The add-on's pieces enabled one by one, in pairs, and beside the user's own classes (real crawls).

docs/usage.md's piece-by-piece setup lets a project enable any component alone. Whatever subset is
enabled, a crawl of a site with tracking-parameter variants and content duplicates either
refuses to start with an error naming what to add, or runs with no ERROR and every unique
page's item exported; and a piece does what it is for whenever it is on (URL variants not
fetched under the canonical fingerprinter, duplicate items dropped with the three content
pieces). The user's own DUPEFILTER_CLASS / REQUEST_FINGERPRINTER_CLASS / SCHEDULER, set in
settings.py, in the spider or on the command line, around the add-on, keep their documented
order: the user's dupefilter and scheduler win, a user's fingerprinter becomes ours' fallback.
"""
from __future__ import annotations

import itertools
import logging
from typing import Any
from urllib.parse import urlsplit

import pytest
import scrapy
from pytest_twisted import inlineCallbacks
from scrapy.core.scheduler import Scheduler
from scrapy.dupefilters import RFPDupeFilter

from scrapy_dedup.settings import DedupConfigError
from tests.contentsite import ContentSite
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite

pytestmark = pytest.mark.crawl

#: every piece of the add-on, as docs/usage.md's setup writes it (setting, value)
PIECES: dict[str, tuple[str, Any]] = {
    "dupefilter": ("DUPEFILTER_CLASS", "scrapy_dedup.dupefilters.BloomDupeFilter"),
    "fingerprinter": ("REQUEST_FINGERPRINTER_CLASS", "scrapy_dedup.fingerprinter.CanonicalRequestFingerprinter"),
    "extension": ("EXTENSIONS", {"scrapy_dedup.extensions.DedupExtension": 500}),
    "outermost": ("EXTENSIONS", {"scrapy_dedup.fingerprinter.OutermostCanonicalFingerprinter": -1000}),
    "middleware": ("SPIDER_MIDDLEWARES", {"scrapy_dedup.middlewares.ContentFingerprintMiddleware": 950}),
    "pipeline": ("ITEM_PIPELINES", {"scrapy_dedup.pipelines.NearDuplicatePipeline": 200}),
    "redirects": ("DOWNLOADER_MIDDLEWARES", {"scrapy_dedup.middlewares.CanonicalRedirectMiddleware": 650}),
    "dust-learning": ("DOWNLOADER_MIDDLEWARES", {"scrapy_dedup.dust_learning.DustLearningMiddleware": 100}),
    "log-formatter": ("LOG_FORMATTER", "scrapy_dedup.logformatter.DedupLogFormatter"),
}
#: what a content piece needs to start (else a start-up error naming it)
NEEDS = {"middleware": {"extension"}, "pipeline": {"extension", "middleware"}, "dust-learning": {"extension"}}
#: DUST learning without a canonical fingerprinter is refused at start-up naming the setting (dust_learning.py),
#: before it would ask for the extension
FINGERPRINTERS = {"fingerprinter", "outermost"}

TRACKED = "?utm_source=newsletter&utm_medium=email"


class ItemPerPageSpider(scrapy.Spider):
    """Start requests that go through the dupefilter (Scrapy's own start_urls requests skip it)."""

    name = "adversary_setups"
    start_urls: list[str] = []

    async def start(self):
        for url in self.start_urls:
            yield scrapy.Request(url)

    def start_requests(self):  # Scrapy 2.13 still calls it when start() is not the only one defined
        for url in self.start_urls:
            yield scrapy.Request(url)

    def parse(self, response):
        yield {"url": response.url, "path": urlsplit(response.url).path}


def settings_of(pieces: tuple[str, ...]) -> dict[str, Any]:
    settings: dict[str, Any] = {"DEDUP_DUST_LEARN": "dust-learning" in pieces}
    for piece in pieces:
        name, value = PIECES[piece]
        settings[name] = {**settings.get(name, {}), **value} if isinstance(value, dict) else value
    return settings


@inlineCallbacks
def crawl(settings: dict[str, Any], site_def: ContentSite):
    with LocalSite(site_def) as site:
        urls = site_def.urls(site, "shop.test")
        urls += [site.url("shop.test", path + TRACKED) for path in site_def.paths]  # each page twice
        crawler = yield run_crawl(ItemPerPageSpider, settings, start_urls=urls)
        fetched = [path for _, path in site.fetched()]
    return crawler, fetched


def check(crawler, fetched: list[str], site_def: ContentSite, *, url_layer: bool, content_layer: bool) -> None:
    stats = crawler.stats.get_stats()
    errors = {k: v for k, v in stats.items() if k.startswith("spider_exceptions") or k == "log_count/ERROR"}
    assert not errors, errors
    assert stats["finish_reason"] == "finished"
    exported = [item["path"] for item in crawler.items]
    degenerate = {p for p, (kind, _, _) in site_def.paths.items() if kind == "degenerate"}
    for path, (kind, _, _) in site_def.paths.items():
        if kind in ("unique", "degenerate") and not path.startswith("/p/"):
            assert path in exported, path  # never lost
    tracked_fetched = [p for p in fetched if "utm_source" in p]
    if url_layer:
        assert tracked_fetched == [], tracked_fetched
    else:
        assert len(tracked_fetched) == len(site_def.paths)
    duplicates = {p for p, (kind, _, _) in site_def.paths.items() if kind in ("exact", "near")}
    if content_layer:  # one item per page (a degenerate page's item per fetch: never judged), one of each pair
        judged = [p for p in exported if p not in degenerate]
        assert len(judged) == len(set(judged)) == len(site_def.paths) - len(duplicates) - len(degenerate)
    else:
        assert len(exported) == len(fetched)


def _expected_refusal(pieces: tuple[str, ...]) -> bool:
    # DEDUP_DUST_LEARN without the canonical fingerprinter is refused too (NEEDS: its extension; and a fingerprinter)
    learning_impossible = "dust-learning" in pieces and not FINGERPRINTERS & set(pieces)
    return learning_impossible or any(NEEDS.get(piece, set()) - set(pieces) for piece in pieces)


SINGLES = [(piece,) for piece in PIECES]
PAIRS = list(itertools.combinations(PIECES, 2))


@pytest.mark.parametrize("pieces", SINGLES + [pytest.param(p, marks=pytest.mark.slow) for p in PAIRS]
                         + [tuple(PIECES), ("extension", "middleware", "pipeline")], ids="+".join)
@inlineCallbacks
def test_any_subset_of_the_pieces_works_or_refuses_naming_what_to_add(pieces, caplog):
    site_def = ContentSite(products=3, copies=1, edits=1, siblings=2, denied=1)
    settings = settings_of(pieces)
    if _expected_refusal(pieces):
        with pytest.raises(DedupConfigError, match="add "):
            yield crawl(settings, site_def)
        return
    with caplog.at_level(logging.WARNING):
        crawler, fetched = yield crawl(settings, site_def)
    canonical = bool(FINGERPRINTERS & set(pieces))
    check(crawler, fetched, site_def, url_layer=canonical,
          content_layer={"extension", "middleware", "pipeline"} <= set(pieces))


class UserDupeFilter(RFPDupeFilter):
    """A project's own dupefilter: it must stay in force beside the add-on."""

    built = 0

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        type(self).built += 1


class UserFingerprinter:
    """A project's own fingerprinter: the add-on keeps it as its fallback (it still decides)."""

    def __init__(self, crawler=None):
        from scrapy.utils.request import RequestFingerprinter

        self.inner = RequestFingerprinter(crawler)
        self.calls = 0

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def fingerprint(self, request):
        self.calls += 1
        return self.inner.fingerprint(request)


class UserScheduler(Scheduler):
    """A project's own scheduler: the add-on leaves SCHEDULER alone."""

    built = 0

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        type(self).built += 1


@inlineCallbacks
def run_crawl_with_priority(spidercls, settings: dict[str, Any], name: str, value: Any, priority: str, **kwargs):
    """``run_crawl`` with one setting at ``priority`` ("cmdline": above the add-on's and the project's)."""
    from scrapy import signals
    from scrapy.crawler import CrawlerRunner
    from scrapy.settings import Settings

    from tests.support.crawl import BASE_SETTINGS
    from tests.support.localsite import install_loopback_resolver

    install_loopback_resolver()
    full = Settings({**BASE_SETTINGS, **settings})
    full.set(name, value, priority)
    crawler = CrawlerRunner(full).create_crawler(spidercls)
    crawler.items = []
    crawler.signals.connect(lambda item, **kw: crawler.items.append(item), signal=signals.item_scraped, weak=False)
    yield crawler.crawl(**kwargs)
    return crawler


USER_CLASSES = {
    "DUPEFILTER_CLASS": f"{__name__}.UserDupeFilter",
    "REQUEST_FINGERPRINTER_CLASS": f"{__name__}.UserFingerprinter",
    "SCHEDULER": f"{__name__}.UserScheduler",
}
WHERE = ("project", "spider", "cmdline")


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("name", list(USER_CLASSES))
@inlineCallbacks
def test_the_users_own_class_keeps_its_documented_place_beside_the_add_on(name, where):
    site_def = ContentSite(products=3, copies=1, edits=1, siblings=2, denied=1)
    built_before = {cls: cls.built for cls in (UserDupeFilter, UserScheduler)}
    value = USER_CLASSES[name]
    spidercls = ItemPerPageSpider
    settings: dict[str, Any] = {"ADDONS": {"scrapy_dedup.Addon": 0}}
    if where == "spider":
        spidercls = type("UserSpider", (ItemPerPageSpider,), {"custom_settings": {name: value}})
    else:
        settings[name] = value
    with LocalSite(site_def) as site:
        urls = site_def.urls(site, "shop.test") + [site.url("shop.test", p + TRACKED) for p in site_def.paths]
        if where == "cmdline":  # the value at cmdline priority, as `scrapy crawl -s NAME=...` sets it
            crawler = yield run_crawl_with_priority(spidercls, settings, name, value, "cmdline", start_urls=urls)
        else:
            crawler = yield run_crawl(spidercls, settings, start_urls=urls)
        fetched = [path for _, path in site.fetched()]
    stats = crawler.stats.get_stats()
    assert stats["finish_reason"] == "finished" and not stats.get("log_count/ERROR")
    from scrapy_dedup.fingerprinter import CanonicalRequestFingerprinter

    fingerprinter = crawler.request_fingerprinter
    assert isinstance(fingerprinter, CanonicalRequestFingerprinter)  # ours outermost in every case
    assert not [p for p in fetched if "utm_source" in p]  # so tracking variants are merged
    if name == "DUPEFILTER_CLASS":
        assert UserDupeFilter.built == built_before[UserDupeFilter] + 1
    if name == "SCHEDULER":
        assert UserScheduler.built == built_before[UserScheduler] + 1
    if name == "REQUEST_FINGERPRINTER_CLASS":
        assert isinstance(fingerprinter.fallback, UserFingerprinter) and fingerprinter.fallback.calls > 0
    duplicates = sum(1 for kind, _, _ in site_def.paths.values() if kind in ("exact", "near"))
    assert len(crawler.items) == len(site_def.paths) - duplicates
