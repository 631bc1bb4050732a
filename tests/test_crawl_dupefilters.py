"""Real crawls of a local site with each of our dupefilters (and Redis ones shared by processes)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections import Counter

import pytest
import scrapy
from pytest_twisted import inlineCallbacks

from scrapy_dedup.dupefilters import BloomDupeFilter, RedisBloomDupeFilter, RedisDupeFilter
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite, Page

pytestmark = pytest.mark.crawl

PAGES = 40


def link_graph(host: str, path: str) -> Page | None:
    """40 pages, each linking to 6 others (many pages reached many times) and to itself."""
    if path == "/":
        number = 0
    elif path.startswith("/p/"):
        try:
            number = int(path[3:])
        except ValueError:
            return None
        if not 0 <= number < PAGES:
            return None
    else:
        return None
    targets = [(number * 7 + k * 3) % PAGES for k in range(1, 7)] + [number]
    links = " ".join(f'<a href="/p/{t}">{t}</a>' for t in targets)
    return Page(f"<html><body><p>page {number}</p>{links}</body></html>")


class LinkSpider(scrapy.Spider):
    name = "links"

    def parse(self, response):
        yield {"url": response.url}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)


def every_page_once(site: LocalSite) -> None:
    hits = Counter(path for _, path in site.fetched())
    expected = {"/", *(f"/p/{i}" for i in range(PAGES))}
    assert set(hits) == expected
    repeated = {path: n for path, n in hits.items() if n > 1}
    assert not repeated, f"fetched more than once: {repeated}"


def filter_settings(name: str, redis_url: str | None, **extra) -> dict:
    settings = {"DUPEFILTER_CLASS": {"bloom": BloomDupeFilter, "redis": RedisDupeFilter,
                                     "redis_bloom": RedisBloomDupeFilter}[name],
                "DEDUP_BLOOM_CAPACITY": 100_000}
    if redis_url:
        settings["DEDUP_REDIS_URL"] = redis_url
    settings.update(extra)
    return settings


@pytest.fixture(params=["bloom", "redis", "redis_bloom"])
def filter_name(request) -> str:
    return request.param


@pytest.fixture
def maybe_redis_url(filter_name, request) -> str | None:
    return request.getfixturevalue("redis_url") if filter_name != "bloom" else None


@inlineCallbacks
def test_every_page_fetched_once(filter_name, maybe_redis_url):
    with LocalSite(link_graph) as site:
        crawler = yield run_crawl(LinkSpider, filter_settings(filter_name, maybe_redis_url),
                                  start_urls=[site.url("site.test")])
    every_page_once(site)
    stats = crawler.stats
    assert stats.get_value("dupefilter/filtered") > PAGES  # the graph has many repeated links
    assert stats.get_value("dedup/seen/new") == PAGES  # "/" is a start URL (dont_filter), the rest are new once
    assert stats.get_value("dedup/seen/checked") == stats.get_value("dedup/seen/new") + stats.get_value(
        "dupefilter/filtered")


@inlineCallbacks
def test_canonical_fingerprinter_makes_url_variants_one_page(filter_name, maybe_redis_url):
    """With CanonicalRequestFingerprinter, tracking parameters and parameter order make no new fetch."""
    def variants(host, path):
        if path == "/":
            return Page('<a href="/a?x=1&y=2">a</a> <a href="/a?y=2&x=1">a2</a> '
                        '<a href="/a?x=1&y=2&utm_source=news">a3</a> <a href="/b">b</a>')
        if path.startswith(("/a", "/b")):
            return Page('<p>leaf</p><a href="/a?y=2&amp;x=1">a</a> <a href="/b">b</a>')
        return None

    settings = filter_settings(filter_name, maybe_redis_url, REQUEST_FINGERPRINTER_CLASS=(
        "scrapy_dedup.fingerprinter.CanonicalRequestFingerprinter"), DEDUP_URL_POLICY={"sort_query": True})
    with LocalSite(variants) as site:
        yield run_crawl(LinkSpider, settings, start_urls=[site.url("shop.test")])
    fetched = Counter(path for _, path in site.fetched())
    a_variants = {path: n for path, n in fetched.items() if path.startswith("/a")}
    assert sum(a_variants.values()) == 1, fetched
    assert fetched["/b"] == 1 and fetched["/"] == 1


@pytest.mark.redis
@pytest.mark.parametrize("name", ["redis", "redis_bloom"])
@inlineCallbacks
def test_second_run_with_the_same_key_fetches_nothing_already_seen(name, redis_url):
    settings = filter_settings(name, redis_url)
    with LocalSite(link_graph) as site:
        yield run_crawl(LinkSpider, settings, start_urls=[site.url("site.test")])
        first = Counter(site.fetched())
        crawler = yield run_crawl(LinkSpider, settings, start_urls=[site.url("site.test")])
        second = Counter(site.fetched()) - first
    assert sum(first.values()) == PAGES + 1
    assert second == Counter({("site.test", "/"): 1})  # only the start URL, which Scrapy never filters
    assert crawler.stats.get_value("dedup/seen/new") == 0


@inlineCallbacks
def test_bloom_jobdir_resume_does_not_refetch(tmp_path):
    settings = filter_settings("bloom", None, JOBDIR=str(tmp_path), CLOSESPIDER_PAGECOUNT=10,
                               CONCURRENT_REQUESTS=1)
    with LocalSite(link_graph) as site:
        first = yield run_crawl(LinkSpider, settings, start_urls=[site.url("site.test")])
        assert first.stats.get_value("finish_reason") == "closespider_pagecount"
        assert (tmp_path / "seen.bloom").exists()
        done = len(set(site.fetched()))
        resumed = yield run_crawl(LinkSpider, {**settings, "CLOSESPIDER_PAGECOUNT": 0},
                                  start_urls=[site.url("site.test")])
    assert done < PAGES
    hits = Counter(path for _, path in site.fetched())
    assert set(hits) == {"/", *(f"/p/{i}" for i in range(PAGES))}
    # "/" is a start URL (never filtered, so fetched by both runs); nothing else twice
    assert {path: n for path, n in hits.items() if n > 1} == {"/": 2}
    assert resumed.stats.get_value("dedup/seen/new") < PAGES


@pytest.mark.redis
@pytest.mark.parametrize("name", ["redis", "redis_bloom"])
# scrapy-redis 0.9.1 itself passes the deprecated spider= argument to stats; not ours to fix
@pytest.mark.filterwarnings("ignore:Passing a 'spider' argument:scrapy.exceptions.ScrapyDeprecationWarning")
@inlineCallbacks
def test_under_scrapy_redis_scheduler(name, redis_url, redis_client):
    """scrapy-redis's scheduler builds the filter with from_spider and never calls open/close."""
    settings = filter_settings(name, redis_url, SCHEDULER="scrapy_redis.scheduler.Scheduler",
                               REDIS_URL=redis_url, SCHEDULER_PERSIST=True)
    with LocalSite(link_graph) as site:
        crawler = yield run_crawl(LinkSpider, settings, start_urls=[site.url("site.test")])
    every_page_once(site)
    assert crawler.stats.get_value("dedup/seen/new") == PAGES  # written on spider_closed
    assert redis_client.keys("*dedup:links:seen*")  # our key(s), kept (DEDUP_REDIS_PERSIST)
    assert not redis_client.exists("links:dupefilter")  # scrapy-redis's own filter was not used


CHILD = textwrap.dedent("""
    import json, sys
    import scrapy
    from scrapy.crawler import CrawlerProcess

    class LinkSpider(scrapy.Spider):
        name = "links"
        def parse(self, response):
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href)

    settings = json.loads(sys.argv[1])
    process = CrawlerProcess(settings)
    process.crawl(LinkSpider, start_urls=json.loads(sys.argv[2]))
    process.start()
""")


@pytest.mark.redis
@pytest.mark.parametrize("name", ["redis", "redis_bloom"])
def test_two_processes_sharing_one_key_never_fetch_the_same_url_twice(name, redis_url):
    with LocalSite(link_graph) as site:
        settings = {"DUPEFILTER_CLASS": f"scrapy_dedup.dupefilters.{ {'redis': 'RedisDupeFilter', 'redis_bloom': 'RedisBloomDupeFilter'}[name]}",
                    "DEDUP_REDIS_URL": redis_url, "DEDUP_BLOOM_CAPACITY": 100_000, "LOG_LEVEL": "WARNING",
                    "TELNETCONSOLE_ENABLED": False, "CONCURRENT_REQUESTS": 4, "ROBOTSTXT_OBEY": False}
        base = f"http://127.0.0.1:{site.port}"
        children = [
            subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(settings), json.dumps([f"{base}{start}"])],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for start in ("/p/1", "/p/2")
        ]
        for child in children:
            _, err = child.communicate(timeout=120)
            assert child.returncode == 0, err.decode()[-2000:]
        hits = Counter(path for _, path in site.fetched())
    starts = {"/p/1", "/p/2"}
    reached = {f"/p/{i}" for i in range(PAGES)}
    assert set(hits) == reached
    # each start URL is fetched by its own process and maybe once more by the other (dont_filter);
    # every other page exactly once across both processes
    assert {path: n for path, n in hits.items() if n > 1 and path not in starts} == {}
    assert all(hits[s] <= 2 for s in starts)


@pytest.mark.parametrize("scrapy_redis_settings", ["url", "host-port"])
@inlineCallbacks
def test_a_scrapy_redis_project_switching_only_dupefilter_class_keeps_its_redis(redis_server, redis_url,
                                                                                 scrapy_redis_settings, caplog):
    """Only DUPEFILTER_CLASS changed: scrapy-redis's REDIS_URL (or REDIS_HOST/REDIS_PORT) is the server used,
    and the log line at open names the setting it came from."""
    import logging

    import redis

    caplog.set_level(logging.INFO)
    given = ({"REDIS_URL": redis_url} if scrapy_redis_settings == "url"
             else {"REDIS_HOST": "127.0.0.1", "REDIS_PORT": redis_server.port})
    settings = {"DUPEFILTER_CLASS": "scrapy_dedup.RedisDupeFilter", **given}
    with LocalSite(link_graph) as site:
        crawler = yield run_crawl(LinkSpider, settings, start_urls=[site.url("shop.test", "/")])
    assert crawler.stats.get_value("dedup/seen/new") == PAGES
    client = redis.Redis.from_url(redis_url)
    assert client.scard(f"dedup:{LinkSpider.name}:seen") == PAGES  # the fingerprints are in that server
    source = "REDIS_URL" if scrapy_redis_settings == "url" else "REDIS_HOST/REDIS_PORT"
    assert any(f"from {source}" in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
