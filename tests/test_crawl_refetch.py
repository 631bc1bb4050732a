"""What "the same URL fetched again" means to the item decision (real crawls).

A page whose content matches a kept page of its own URL is a refetch only when the same
request fetched it: its item is then kept (whether the first item was stored is unknown).
Scrapy's response URL has no fragment, so with ``drop_fragment: False`` ``/a/6`` and
``/a/6#x`` are two requests (two fingerprints) whose pages carry one URL: the second one's
item is a duplicate, not a refetch. A ``dont_filter`` request of the same URL is one.
"""
from __future__ import annotations

import random
from urllib.parse import urlsplit

import pytest
import scrapy
from pytest_twisted import inlineCallbacks

from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite, Page
from tests.textgen import article_words

pytestmark = pytest.mark.crawl

HOST = "frag.test"
ARTICLES = 12
SETTINGS = {"ADDONS": {"scrapy_dedup.Addon": 0},
            "ITEM_PIPELINES": {"scrapy_dedup.NearDuplicatePipeline": 300},
            "DEDUP_URL_POLICY": {"drop_fragment": False},
            "CONCURRENT_REQUESTS": 1}  # one page at a time: which of two variants is kept first is the test's


def router(host: str, path: str) -> Page | None:
    if host != HOST:
        return None
    if path == "/":
        links = "".join(f'<a href="/a/{n}">a</a><a href="/a/{n}#comments">c</a>' for n in range(ARTICLES))
        return Page(f"<html><body>{links}</body></html>")
    if path.startswith("/a/") and path[3:].isdigit() and int(path[3:]) < ARTICLES:
        text = " ".join(article_words(random.Random(int(path[3:])), 200))
        return Page(f"<html><body><article><h1>Article {path}</h1><p>{text}</p></article></body></html>")
    return None


class FragmentSpider(scrapy.Spider):
    name = "fragments"
    refetch: list[str] = []
    fragment_first = False

    def parse(self, response):
        if urlsplit(response.url).path == "/":
            for href in response.css("a::attr(href)").getall():
                first = ("#" in href) == self.fragment_first
                yield response.follow(href, callback=self.parse_article, priority=2 if first else 1)
            for path in self.refetch:  # the same request again, past the dupefilter, after every other
                yield response.follow(path, callback=self.parse_article, dont_filter=True)

    def parse_article(self, response):
        yield {"url": response.url}


@pytest.mark.parametrize("fragment_first", [False, True])
@inlineCallbacks
def test_a_kept_fragment_is_another_request_not_a_refetch(fragment_first):
    class Spider(FragmentSpider):
        pass

    Spider.fragment_first = fragment_first
    with LocalSite(router) as site:
        crawler = yield run_crawl(Spider, SETTINGS, start_urls=[site.url(HOST, "/")])
    fetched = sum(n for (host, path), n in site.hits.items() if path.startswith("/a/"))
    assert fetched == 2 * ARTICLES  # two requests a page (the switch is on), one path on the wire
    stats = crawler.stats.get_stats()
    urls = [item["url"] for item in crawler.items]
    assert sorted(urls) == sorted(set(urls)) and len(urls) == ARTICLES  # one item a page
    assert stats["dedup/items/exact_duplicates"] == ARTICLES
    assert stats.get("dedup/items/refetch_kept", 0) == 0
    assert stats["dedup/content/refetch_of_another_request"] == ARTICLES


@inlineCallbacks
def test_the_same_request_fetched_again_keeps_its_item():
    class Refetching(FragmentSpider):
        fragment_first = True  # /a/N#comments kept: its own request again is a refetch, /a/3 is not
        refetch = ["/a/3", "/a/5#comments"]

    with LocalSite(router) as site:
        crawler = yield run_crawl(Refetching, SETTINGS, start_urls=[site.url(HOST, "/")])
    stats = crawler.stats.get_stats()
    assert stats["dedup/items/refetch_kept"] == 1
    urls = [item["url"] for item in crawler.items]
    assert len(urls) == ARTICLES + 1 and urls.count(site.url(HOST, "/a/5")) == 2
    assert stats["dedup/items/exact_duplicates"] == ARTICLES + 1
