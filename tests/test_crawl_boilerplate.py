"""Real crawls of a local templated site (plain-<div> chrome, a per-fetch "generated at" line, templated
siblings) with per-host boilerplate learning on, and off for comparison."""
from __future__ import annotations

from urllib.parse import urlsplit

import pytest
import scrapy
from pytest_twisted import inlineCallbacks
from scrapy import signals
from scrapy.exceptions import DontCloseSpider

from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite, Page
from tests.templatedsite import TemplatedSite, shared_share

pytestmark = pytest.mark.crawl

ADDON = {"ADDONS": {"scrapy_dedup.Addon": 0}}
HOST = "docs.test"


class TwoPhaseSpider(scrapy.Spider):
    """Fetches ``first`` URLs, then, when idle, the ``then`` URLs (refetches after the warm-up)."""

    name = "twophase"

    def __init__(self, first=(), then=(), **kw):
        super().__init__(**kw)
        self.first, self.then = list(first), list(then)

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider._idle, signal=signals.spider_idle)
        return spider

    async def start(self):
        for url in self.first:
            yield scrapy.Request(url)

    def start_requests(self):  # Scrapy < 2.13 spelling, unused on 2.13+
        for url in self.first:
            yield scrapy.Request(url)

    def _idle(self, spider):
        if self.then:
            urls, self.then = self.then, []
            for url in urls:
                self.crawler.engine.crawl(scrapy.Request(url))
            raise DontCloseSpider

    def parse(self, response):
        yield {"url": response.url}


def kept_paths(crawler) -> list[str]:
    return sorted(urlsplit(i["url"]).path for i in crawler.items)


def test_the_templated_site_holds_what_it_claims():
    """Siblings share 80-90% of their words; without learning the default engine keeps every refetch
    (the per-fetch line alone keeps the texts apart), so the crawl tests below can fail."""
    from scrapy_dedup.content.engine import ContentDeduplicator
    from scrapy_dedup.content.text import page_text

    site = TemplatedSite()
    texts = {p: page_text(site.html(p)) for p in site.first_paths()}
    siblings = [t for p, t in texts.items() if p.startswith("/sib/")]
    shares = [shared_share(a, b) for a in siblings for b in siblings if a is not b]
    assert 0.80 <= min(shares) and max(shares) <= 0.90, (min(shares), max(shares))
    dedup = ContentDeduplicator.in_memory()
    for path, text in texts.items():
        assert dedup.check(path, text).kind == "unique"
    assert all(dedup.check(p, page_text(site.html(p))).kind == "unique" for p in site.refetch_paths())


@inlineCallbacks
def test_learning_drops_refetches_with_a_per_fetch_line_and_keeps_siblings():
    site_def = TemplatedSite()
    with LocalSite(site_def) as site:
        crawler = yield run_crawl(TwoPhaseSpider, {**ADDON, "DEDUP_BOILERPLATE": True},
                                  first=[site.url(HOST, p) for p in site_def.first_paths()],
                                  then=[site.url(HOST, p) for p in site_def.refetch_paths()])
    stats = crawler.stats.get_stats()
    kept = kept_paths(crawler)
    assert kept == sorted(site_def.first_paths())  # every article and every sibling kept, every refetch dropped
    dropped = stats.get("item_dropped_reasons_count/ExactDuplicateItem", 0) + stats.get(
        "item_dropped_reasons_count/NearDuplicateItem", 0)
    assert dropped == len(site_def.refetch_paths())
    # the stats of learning: the header, the generated line and the footer learnt; pages judged without them
    assert stats[f"dedup/content/boilerplate/blocks/{HOST}"] >= 3
    assert stats["dedup/content/boilerplate/warmup"] == 10  # DEDUP_BOILERPLATE_WARMUP_PAGES
    assert stats["dedup/content/boilerplate/reduced"] >= len(site_def.refetch_paths())
    assert stats["dedup/content/boilerplate/rechecked"] >= 10  # the warm-up pages, stored again at its end


@inlineCallbacks
def test_without_learning_the_refetches_are_kept():
    """The same crawl with DEDUP_BOILERPLATE off: the default engine keeps the refetches (what learning fixes)."""
    site_def = TemplatedSite()
    with LocalSite(site_def) as site:
        crawler = yield run_crawl(TwoPhaseSpider, {**ADDON, "DEDUP_BOILERPLATE": False},
                                  first=[site.url(HOST, p) for p in site_def.first_paths()],
                                  then=[site.url(HOST, p) for p in site_def.refetch_paths()])
    assert kept_paths(crawler) == sorted(site_def.first_paths() + site_def.refetch_paths())
    assert not [k for k in crawler.stats.get_stats() if k.startswith("dedup/content/boilerplate/")]


@pytest.mark.parametrize("default, for_host, learns", [(True, False, False), (False, True, True)])
@inlineCallbacks
def test_per_host_switch_overrides_the_global_setting(default, for_host, learns):
    site_def = TemplatedSite()
    with LocalSite(site_def) as site:
        crawler = yield run_crawl(
            TwoPhaseSpider, {**ADDON, "DEDUP_BOILERPLATE": default,
                             "DEDUP_CONTENT_POLICIES": {HOST: {"boilerplate": for_host}}},
            first=[site.url(HOST, p) for p in site_def.first_paths()],
            then=[site.url(HOST, p) for p in site_def.refetch_paths()])
    expected = site_def.first_paths() + ([] if learns else site_def.refetch_paths())
    assert kept_paths(crawler) == sorted(expected)


class PhasedSpider(scrapy.Spider):
    """Fetches each list of ``phases`` once the previous one is done (the crawl idle between them)."""

    name = "phased"

    def __init__(self, phases=(), **kw):
        super().__init__(**kw)
        self.phases = [list(urls) for urls in phases]

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider._idle, signal=signals.spider_idle)
        return spider

    async def start(self):
        for url in self.phases.pop(0):
            yield scrapy.Request(url)

    def start_requests(self):  # Scrapy < 2.13 spelling, unused on 2.13+
        for url in self.phases.pop(0):
            yield scrapy.Request(url)

    def _idle(self, spider):
        if self.phases:
            for url in self.phases.pop(0):
                self.crawler.engine.crawl(scrapy.Request(url))
            raise DontCloseSpider

    def parse(self, response):
        yield {"url": response.url}


def _words(seed: int, n: int) -> str:
    import random

    rng = random.Random(seed)  # letters only: the normal form sends every digit to 0
    return " ".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(6)) for _ in range(n))


@inlineCallbacks
def test_a_refetch_near_only_the_re_checked_text_of_its_page_is_dropped():
    """The page is fetched first (the host's warm-up: stored by its whole text, its rotating "related" lines in
    it), then 20 pages of the host (the warm-up ends, every related line becomes boilerplate: the page's
    re-check), then the page again under another URL, with other related lines and a per-fetch line of two
    ``<span>``s run together that is never learnt. By its text less boilerplate it is the page; it is near
    the page's re-checked text only, which the store must have kept although it was near the older one."""
    import random

    rng = random.Random(3)
    pool = [f"Related article {_words(300 + n, 3)}" for n in range(12)]

    def html(title: str, blocks: list[str]) -> str:
        return (f"<html><head><title>{title}</title></head><body>"
                + "".join(f"<div>{b}</div>" for b in blocks) + "</body></html>")

    content = [_words(9, 30), _words(10, 30)]
    pages = {"/page": html("The page", content + rng.sample(pool, 6))}
    for n in range(20):
        pages[f"/p{n}"] = html(f"Page {n}", [_words(400 + n, 40)] + rng.sample(pool, 6))
    glued = f"<span>Served by web {_words(500, 1)} in ms</span><span>page generated by worker {_words(501, 8)}</span>"
    pages["/page-again"] = html("The page", content + rng.sample(pool, 6) + [glued])
    with LocalSite({(HOST, path): Page(body) for path, body in pages.items()}) as site:
        crawler = yield run_crawl(PhasedSpider, {**ADDON, "DEDUP_BOILERPLATE": True}, phases=[
            [site.url(HOST, "/page")], [site.url(HOST, f"/p{n}") for n in range(20)], [site.url(HOST, "/page-again")]])
    stats = crawler.stats.get_stats()
    assert stats[f"dedup/content/boilerplate/blocks/{HOST}"] >= len(pool)  # (and "Page N", a number apart)
    assert kept_paths(crawler) == sorted(p for p in pages if p != "/page-again")
    assert stats.get("item_dropped_reasons_count/NearDuplicateItem", 0) == 1
