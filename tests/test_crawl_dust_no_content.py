"""A learning crawl (``DEDUP_DUST_LEARN``) where many or all responses give the learner no content.

An exploration whose response names no page (not a page, unreadable, too short, the content index away)
checked nothing: ``abandon_exploration`` gives its values back to its rules' budgets, so the next URL that
carries them is explored. These crawls check that this cannot turn into a loop: the crawl ends (a watchdog
stops it otherwise, and the test fails instead of hanging the suite), every distinct page is fetched, no URL
is explored or fetched twice, and the abandoned explorations are counted.

The site is tests/dustsite.py (88 pages behind DUST variants); the faults: the site answering tiny pages or
non-HTML after the first pages, the content layer's store failing on every call after the first pages, and
the real Redis content index stopped mid-crawl.
"""
from __future__ import annotations

import time
from collections import Counter

import pytest
import scrapy
from pytest_twisted import inlineCallbacks
from scrapy import signals
from scrapy.crawler import CrawlerRunner
from twisted.internet import reactor

from scrapy_dedup.content.engine import MemoryContentStore
from scrapy_dedup.url.learner import OnlineDustLearner
from tests import dustsite
from tests.support.crawl import BASE_SETTINGS
from tests.support.localsite import LocalSite, Page, install_loopback_resolver
from tests.support.redis_server import RedisServer

#: a crawl of this site takes a few seconds; a loop would go on until the watchdog stops it
WATCHDOG_SECONDS = 120
#: responses read normally before the fault: enough for rules to be learned and explored
HEALTHY_RESPONSES = 25

LEARNING = {"ADDONS": {"scrapy_dedup.Addon": 0}, "CONCURRENT_REQUESTS": 4, "DEDUP_DUST_LEARN": True,
            "DEDUP_DUST_LEARN_EVERY": 5}


class SiteSpider(scrapy.Spider):
    """Follows every link of the site (of HTML pages: a text/plain answer has none)."""

    name = "dustsite-no-content"

    def parse(self, response):
        yield {"url": response.url}
        if isinstance(response, scrapy.http.HtmlResponse):
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href)


def _degrading_router(fault: str):
    """The site's pages; after ``HEALTHY_RESPONSES`` answers, each page still carries its links (so the
    crawl reaches everything) but no text the content layer reads: ``tiny`` (a few words: too short) or
    ``non_html`` (the links as plain text lines, which the spider follows by hand), for every page; or
    ``variant_tiny``: tiny for every form of a page but the first one fetched (what an exploration fetches)."""
    answered = Counter()
    first_form: dict[str, str] = {}

    def route(host: str, path_qs: str) -> Page | None:
        page = dustsite.router(host, path_qs)
        if page is None:
            return None
        answered["n"] += 1
        name = dustsite.page_of(path_qs)
        first = first_form.setdefault(name, path_qs)
        if answered["n"] <= HEALTHY_RESPONSES or (fault == "variant_tiny" and path_qs == first):
            return page
        links = [] if "print=1" in path_qs else dustsite._links(name)
        if fault in ("tiny", "variant_tiny"):
            anchors = "".join(f'<a href="{href}">x</a>' for href in links)
            return Page(f"<html><body><main><p>{name}</p></main><aside>{anchors}</aside></body></html>")
        return Page("\n".join([name, *links]), content_type="text/plain; charset=utf-8")

    return route


class PlainLinksSpider(SiteSpider):
    """SiteSpider, following the plain-text answers' lines too."""

    def parse(self, response):
        if isinstance(response, scrapy.http.HtmlResponse):
            yield from super().parse(response)
            return
        yield {"url": response.url}
        for line in response.text.splitlines()[1:]:
            yield response.follow(line)


@inlineCallbacks
def _watched_crawl(spidercls, settings, on_response=None, **spider_kwargs):
    """Crawl until it closes, or until the watchdog stops it (``crawler.timed_out``); return the crawler."""
    install_loopback_resolver()
    runner = CrawlerRunner({**BASE_SETTINGS, **settings})
    crawler = runner.create_crawler(spidercls)
    crawler.items = []
    crawler.signals.connect(lambda item, **kw: crawler.items.append(item), signal=signals.item_scraped, weak=False)
    if on_response is not None:
        crawler.signals.connect(on_response, signal=signals.response_received, weak=False)
    crawler.timed_out = False

    def stop():
        crawler.timed_out = True
        crawler.stop()

    watchdog = reactor.callLater(WATCHDOG_SECONDS, stop)
    started = time.monotonic()
    try:
        yield crawler.crawl(**spider_kwargs)
    finally:
        if watchdog.active():
            watchdog.cancel()
    crawler.seconds = time.monotonic() - started
    return crawler


@pytest.fixture
def explorations(monkeypatch):
    """Every URL the learner decided to explore, in order (a URL twice would be a loop)."""
    explored: list[str] = []
    should_explore = OnlineDustLearner.should_explore

    def recording(self, url, key, **kwargs):
        decided = should_explore(self, url, key, **kwargs)
        if decided:
            explored.append(url)
        return decided

    monkeypatch.setattr(OnlineDustLearner, "should_explore", recording)
    return explored


def _check(crawler, site, explored, label):
    fetched = site.fetched()
    _, pages = dustsite.waste(fetched)
    stats = crawler.stats.get_stats()
    dust = {k.split("/", 2)[2]: v for k, v in stats.items() if k.startswith("dedup/dust/")}
    print(f"{label}: {crawler.seconds:.1f} s, {len(fetched)} fetches of {len(pages)} distinct pages, "
          f"{len(explored)} explorations, {dust}")
    assert not crawler.timed_out, f"the crawl did not end within {WATCHDOG_SECONDS} s ({len(fetched)} fetches)"
    assert pages == dustsite.distinct_pages(), sorted(dustsite.distinct_pages() - pages)
    twice = sorted(url for url, n in Counter(explored).items() if n > 1)
    assert not twice, twice
    repeated = sorted(path for path, n in Counter(path for _, path in fetched).items() if n > 1 and path != "/")
    assert not repeated, repeated  # ("/": Scrapy's start request is not filtered)
    # what it abandoned is counted: every exploration was judged or abandoned (cancelled ones included)
    judged = stats.get("dedup/dust/explore_agreed", 0) + stats.get("dedup/dust/explore_violations", 0)
    assert len(explored) == stats.get("dedup/dust/explored", 0)
    assert judged + stats.get("dedup/dust/explore_abandoned", 0) == len(explored), stats
    return stats


@pytest.fixture
def site_of_88_pages():
    dustsite.configure(list_pages=20)
    yield
    dustsite.configure()


@pytest.mark.crawl
@pytest.mark.parametrize("fault, explore", [("tiny", 1.0), ("non_html", 1.0), ("variant_tiny", 0.05),
                                            ("variant_tiny", 1.0)])
@inlineCallbacks
def test_a_learning_crawl_whose_pages_turn_unreadable_ends_and_explores_each_url_once(
        site_of_88_pages, explorations, fault, explore):
    settings = {**LEARNING, "DEDUP_DUST_EXPLORE": explore}
    with LocalSite(_degrading_router(fault)) as site:
        crawler = yield _watched_crawl(PlainLinksSpider, settings, start_urls=[site.url(dustsite.HOST)])
        stats = _check(crawler, site, explorations, f"{fault}, explore {explore}")
    assert stats.get("dedup/dust/activated", 0) >= 1  # rules were learned on the healthy pages
    if explore == 1.0:
        assert stats.get("dedup/dust/explore_abandoned", 0) >= 1  # and explored on unreadable ones


@pytest.mark.crawl
@pytest.mark.parametrize("explore", [0.05, 1.0])
@inlineCallbacks
def test_a_learning_crawl_whose_content_store_fails_every_call_ends_and_explores_each_url_once(
        site_of_88_pages, explorations, monkeypatch, explore):
    calls = Counter()
    check_and_add = MemoryContentStore.check_and_add

    def failing(self, url, fp):
        calls["n"] += 1
        if calls["n"] > HEALTHY_RESPONSES:
            raise RuntimeError("content index failure (injected)")
        return check_and_add(self, url, fp)

    monkeypatch.setattr(MemoryContentStore, "check_and_add", failing)
    settings = {**LEARNING, "DEDUP_DUST_EXPLORE": explore}
    with LocalSite(dustsite.router) as site:
        crawler = yield _watched_crawl(SiteSpider, settings, start_urls=[site.url(dustsite.HOST)])
        stats = _check(crawler, site, explorations, f"store failing, explore {explore}")
    assert calls["n"] > HEALTHY_RESPONSES  # the fault was met
    assert stats.get("dedup/content/store_errors", 0) >= 1 or stats.get("dedup/content/errors", 0) >= 1, stats
    assert stats.get("dedup/dust/activated", 0) >= 1


@pytest.fixture
def own_redis(redis_server):  # redis_server: skips (or fails under CI) without redis-server
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.mark.crawl
@pytest.mark.redis
@inlineCallbacks
def test_a_learning_crawl_whose_redis_content_index_stops_ends_and_explores_each_url_once(
        site_of_88_pages, explorations, own_redis):
    seen = Counter()

    def stop_redis(response, request, spider):
        seen["n"] += 1
        if seen["n"] == HEALTHY_RESPONSES:
            own_redis.stop()

    settings = {**LEARNING, "DEDUP_CONTENT_BACKEND": "redis", "DEDUP_REDIS_URL": own_redis.url,
                "DEDUP_REDIS_ON_ERROR": "fail_open", "DEDUP_DUST_EXPLORE": 1.0}
    with LocalSite(dustsite.router) as site:
        crawler = yield _watched_crawl(SiteSpider, settings, on_response=stop_redis,
                                       start_urls=[site.url(dustsite.HOST)])
        stats = _check(crawler, site, explorations, "Redis content index stopped")
    assert own_redis.proc is None  # the fault was met
    assert stats.get("dedup/content/store_errors", 0) >= 1, stats
    assert stats.get("dedup/dust/activated", 0) >= 1
