"""Responses of every kind the content layer meets, under each setting that changes their path (real crawls).

A site serving JSON, PDF and image bytes, empty bodies, unknown charsets, 204/304/404/500 pages a
callback asked for, redirects within a canonical key and to another domain, a ``dont_redirect``
3xx, ``dont_filter`` refetches and ``verbatim_url`` requests, crawled in drop and tag mode, with
and without ``DEDUP_DROP_DUPLICATE_RESPONSES``, ``DEDUP_PARAGRAPHS`` and boilerplate learning.
The truth: every response whose content is not an earlier page's reaches the spider and its item
is exported; the one other-domain copy is kept once; no ERROR, no spider exception.
"""
from __future__ import annotations

import random
from typing import Any
from urllib.parse import urlsplit

import pytest
import scrapy
from pytest_twisted import inlineCallbacks

from tests import textgen
from tests.contentsite import template
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite, Page

pytestmark = pytest.mark.crawl


def _article(seed: int, words: int = 300) -> str:
    return " ".join(textgen.article_words(random.Random(seed), words))


def _html(seed: int) -> str:
    return template(_article(seed), title=f"Article {seed}")


PNG = b"\x89PNG\r\n\x1a\n" + bytes(random.Random(1).randbytes(3000))
PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n" + bytes(random.Random(2).randbytes(3000))


def routes(port: int) -> dict[tuple[str, str], Page]:
    other = f"http://other.test:{port}"
    return {
        ("shop.test", "/a/1"): Page(_html(1)),
        ("shop.test", "/json"): Page('{"items": [1, 2, 3], "next": null}', content_type="application/json"),
        ("shop.test", "/ld+json"): Page('{"@context": "https://schema.org"}', content_type="application/ld+json"),
        ("shop.test", "/pdf"): Page(PDF, content_type="application/pdf"),
        ("shop.test", "/png"): Page(PNG, content_type="image/png"),
        ("shop.test", "/png-as-html"): Page(PNG),
        ("shop.test", "/empty"): Page(b""),
        ("shop.test", "/empty-no-type"): Page(b"", content_type=""),
        ("shop.test", "/unknown-charset"): Page(_html(2).encode(), content_type="text/html; charset=x-nope"),
        ("shop.test", "/latin1-as-utf8"): Page(_html(3).replace("a", "\u00e4").encode("latin-1", "replace")),
        ("shop.test", "/no-content"): Page(b"", status=204),
        ("shop.test", "/not-modified"): Page(b"", status=304),
        ("shop.test", "/missing"): Page(_html(4), status=404),
        ("shop.test", "/broken"): Page(_html(5), status=500),
        # a redirect within the canonical key (strip_trailing_slash), one to another domain's copy of /a/1
        ("shop.test", "/dir"): Page(b"", status=301, headers={"Location": "/dir/"}),
        ("shop.test", "/dir/"): Page(_html(6)),
        ("shop.test", "/moved"): Page(b"", status=302, headers={"Location": f"{other}/copy-of-a1"}),
        ("other.test", "/copy-of-a1"): Page(_html(1)),
        ("shop.test", "/kept-3xx"): Page(_html(7), status=301, headers={"Location": "/a/1"}),
        ("shop.test", "/refetched"): Page(_html(8)),
    }


#: path -> Request kwargs the spider uses for it
REQUESTS: dict[str, dict[str, Any]] = {
    "/no-content": {"meta": {"handle_httpstatus_all": True}},
    "/not-modified": {"meta": {"handle_httpstatus_all": True}},
    "/missing": {"meta": {"handle_httpstatus_list": [404]}},
    "/broken": {"meta": {"handle_httpstatus_list": [500]}},
    "/kept-3xx": {"meta": {"dont_redirect": True, "handle_httpstatus_list": [301]}},
}
#: requested a second time: with dont_filter, and under a tracking parameter with verbatim_url
AGAIN = [("/refetched", {"dont_filter": True}), ("/a/1?utm_source=x", {"meta": {"verbatim_url": True}})]

#: the paths whose items must be exported (each once, but /refetched: twice, a dont_filter refetch)
MUST_EXPORT = {"/json", "/ld+json", "/pdf", "/png", "/png-as-html", "/empty", "/empty-no-type", "/unknown-charset",
               "/latin1-as-utf8", "/no-content", "/not-modified", "/missing", "/broken", "/dir/", "/kept-3xx",
               "/refetched"}


class ResponsesSpider(scrapy.Spider):
    name = "adversary_responses"
    base = ""

    async def start(self):
        for request in self._requests():
            yield request

    def start_requests(self):  # Scrapy 2.13
        yield from self._requests()

    def _requests(self):
        yield scrapy.Request(self.base + "/a/1", priority=10)  # first: its copies come later
        for host, path in routes(0):
            if host == "shop.test" and path not in ("/a/1", "/dir/"):
                yield scrapy.Request(self.base + path, **REQUESTS.get(path, {}))
        for path, kwargs in AGAIN:
            yield scrapy.Request(self.base + path, priority=-10, **kwargs)

    def parse(self, response):
        parts = urlsplit(response.url)
        yield {"url": response.url, "host": parts.hostname, "path": parts.path, "status": response.status,
               "query": parts.query}


MODES = {
    "drop": {},
    "tag": {"DEDUP_CONTENT_ACTION": "tag"},
    "drop-responses": {"DEDUP_DROP_DUPLICATE_RESPONSES": True},
    "paragraphs": {"DEDUP_PARAGRAPHS": True, "DEDUP_PARAGRAPHS_FIELD": "unique_text"},
    "boilerplate": {"DEDUP_BOILERPLATE": True},
    "crawl-log": {"DEDUP_LOG_FILE": "crawl.jsonl", "DEDUP_AUDIT_FILE": "audit.jsonl"},
}


@pytest.mark.parametrize("mode", list(MODES))
@inlineCallbacks
def test_every_kind_of_response_reaches_the_spider_and_its_item_is_kept(mode, tmp_path):
    settings = {"ADDONS": {"scrapy_dedup.Addon": 0}, "DEDUP_URL_POLICY": {"strip_trailing_slash": True},
                "CONCURRENT_REQUESTS": 1, **MODES[mode]}
    for name in ("DEDUP_LOG_FILE", "DEDUP_AUDIT_FILE"):
        if name in settings:
            settings[name] = str(tmp_path / settings[name])
    with LocalSite(lambda host, path: None) as site:
        table = routes(site.port)
        site.router = lambda host, path: table.get((host, path.split("?")[0]))
        spider = type("Spider", (ResponsesSpider,), {"base": site.url("shop.test").rstrip("/")})
        crawler = yield run_crawl(spider, settings)
    stats = crawler.stats.get_stats()
    errors = {k: v for k, v in stats.items() if k.startswith("spider_exceptions") or k == "log_count/ERROR"}
    assert not errors, errors
    exported = [(item["host"], item["path"]) for item in crawler.items]
    shop = [path for host, path in exported if host == "shop.test"]
    assert MUST_EXPORT <= set(shop), sorted(MUST_EXPORT - set(shop))
    assert shop.count("/refetched") == 2  # the same URL again: its item is kept (docs/usage.md: refetch_kept)
    # /a/1, its copy on other.test, and its verbatim tracking variant: one of them
    copies = [e for e in exported if e in (("shop.test", "/a/1"), ("other.test", "/copy-of-a1"))]
    if mode == "tag":
        assert len(copies) == 3
    else:
        assert copies == [("shop.test", "/a/1")]
    assert stats.get("dedup/content/skipped_non_html", 0) >= 2  # the two JSON bodies
    assert stats.get("dedup/content/skipped_non_text", 0) >= 3  # PDF, PNG, PNG served as HTML


class InFlightSpider(scrapy.Spider):
    """Fetches /hub; with ``follow`` its links, as the run killed before them could not."""

    name = "adversary_inflight"
    base = ""
    follow = False

    async def start(self):
        yield scrapy.Request(self.base + "/hub", dont_filter=True)  # how a resumed crawl re-issues an in-flight page

    def start_requests(self):  # Scrapy 2.13
        yield scrapy.Request(self.base + "/hub", dont_filter=True)

    def parse(self, response):
        yield {"url": response.url}
        if self.follow:
            yield from response.follow_all(css="a")


@pytest.mark.redis
@inlineCallbacks
def test_a_page_fetched_again_after_a_kill_is_parsed_and_its_links_followed(redis_url):
    """The shared content index remembers /hub from the run that was killed before /hub's links were
    followed; fetched again on resume, /hub must reach its callback, or /leaf (linked only there) is lost."""
    table = {("shop.test", "/hub"): Page(template(_article(20) + ' <a href="/leaf">leaf</a>')),
             ("shop.test", "/leaf"): Page(_html(21))}
    settings = {"ADDONS": {"scrapy_dedup.Addon": 0}, "DEDUP_DROP_DUPLICATE_RESPONSES": True,
                "DEDUP_CONTENT_BACKEND": "redis", "DEDUP_REDIS_URL": redis_url}
    with LocalSite(table) as site:
        base = site.url("shop.test").rstrip("/")
        first = type("Killed", (InFlightSpider,), {"base": base, "follow": False})  # judged, links never followed
        yield run_crawl(first, settings)
        resumed = type("Resumed", (InFlightSpider,), {"base": base, "follow": True, "name": InFlightSpider.name})
        crawler = yield run_crawl(resumed, settings)
        fetched = site.fetched()
    assert ("shop.test", "/leaf") in fetched
    assert crawler.stats.get_value("dedup/content/refetch_parsed") == 1
