"""The report's "Fetches saved" against an actual plain-Scrapy crawl of the same site.

A local site links each of its pages under URL variants: tracking parameters, a session ID
and, with ``strip_trailing_slash`` on, a trailing slash (variants scrapy-dedup merges), and
also a reordered query and a fragment (variants Scrapy's own fingerprint merges too). Every
variant serves its page, whose links are the same whatever the variant. The site counts
every fetch it serves. A crawl with Scrapy's defaults and a crawl with the add-on run on it:
``dedup/url/saved`` must be the difference of their fetch counts, and the report must credit
no switch Scrapy's fingerprint applies anyway (``drop_fragment``, ``sort_query``).
"""
from __future__ import annotations

import logging
from urllib.parse import parse_qsl, urlsplit

import pytest
import scrapy
from pytest_twisted import inlineCallbacks

from scrapy_dedup.seen.baseline import SavedFetches
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite, Page

PAGES = 12


def variants(i: int) -> list[str]:
    """Links to page ``i``: its plain URL first in some pages, a variant first in others (crawl order varies)."""
    plain = f"/p/{i}?a=1&b=2"
    links = [
        f"/p/{i}?a=1&b=2&utm_source=mail",   # strip_tracking
        f"/p/{i};jsessionid=ABCDEF0123456789?a=1&b=2",  # strip_session
        f"/p/{i}/?a=1&b=2",                  # strip_trailing_slash (switched on below)
        f"/p/{i}?b=2&a=1",                   # sort_query: Scrapy's fingerprint sorts the query too
        f"/p/{i}?a=1&b=2#reviews",           # drop_fragment: Scrapy's fingerprint drops it too
    ]
    return [plain, *links] if i % 2 else [*links, plain]


def router(host: str, path: str) -> Page | None:
    if host != "site.test":
        return None
    parts = urlsplit(path)
    segments = parts.path.split(";", 1)[0].strip("/").split("/")
    if segments == [""] or segments == ["start"]:
        return Page("".join(f'<a href="{href}">x</a>' for i in range(PAGES) for href in variants(i)))
    if len(segments) == 2 and segments[0] == "p" and segments[1].isdigit() and int(segments[1]) < PAGES:
        i = int(segments[1])
        query = dict(parse_qsl(parts.query))
        if {k: v for k, v in query.items() if not k.startswith("utm_")} != {"a": "1", "b": "2"}:
            return None
        # the same links from every variant of a page: a plain crawl finds nothing more through a variant
        return Page(f"<h1>page {i}</h1><p>{'words ' * 30}</p><a href='/'>home</a>"
                    + "".join(f'<a href="{href}">x</a>' for href in variants((i + 1) % PAGES)))
    return None


class LinkSpider(scrapy.Spider):
    name = "saved_fetches"

    def parse(self, response):
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)


@inlineCallbacks
def crawl(settings: dict):
    with LocalSite(router) as site:
        crawler = yield run_crawl(LinkSpider, settings, start_urls=[site.url("site.test", "/start")])
    return len(site.fetched()), crawler


@pytest.mark.crawl
@inlineCallbacks
def test_fetches_saved_is_what_a_plain_scrapy_crawl_fetched_more(caplog):
    caplog.set_level(logging.INFO)
    plain_fetches, plain = yield crawl({})
    ours_fetches, ours = yield crawl({"ADDONS": {"scrapy_dedup.Addon": 0},
                                      "DEDUP_URL_POLICY": {"strip_trailing_slash": True}})
    stats = ours.stats.get_stats()
    # the site's own count: the start page, the home page, each page once with the add-on
    assert ours_fetches == 2 + PAGES
    # Scrapy's own fingerprint merges the query order and the fragment, not the other three variants
    assert plain_fetches == 2 + PAGES * 4
    assert stats["dedup/url/saved"] == plain_fetches - ours_fetches
    # the switches credited: those that changed a saved request's URL; never what Scrapy does anyway
    saved_by = {k.rsplit("/", 1)[1]: v for k, v in stats.items() if k.startswith("dedup/url/saved/")}
    assert set(saved_by) <= {"strip_tracking", "strip_session", "strip_trailing_slash"}
    assert all(0 < v <= stats["dedup/url/saved"] for v in saved_by.values())
    # links found again (the home page links every variant again) are filtered by both: not saved
    assert stats["dupefilter/filtered"] > stats["dedup/url/saved"]
    assert plain.stats.get_value("dupefilter/filtered") > 0
    report = next(r.getMessage() for r in caplog.records if "duplication report" in r.getMessage())
    assert f"Fetches saved:           {plain_fetches - ours_fetches}  (" in report


def test_saved_fetches_counts_refused_requests_new_to_the_plain_filter_only():
    """(raw key, plain key, refused here): a refused variant new to the plain filter is saved once; a link found
    again (the same raw key) or a variant the plain filter merges too (the same plain key) is not."""
    asked: list[bytes] = []
    saved = SavedFetches(start_capacity=2)  # past its capacity at once: the counts hold after growth

    def check(raw: bytes, plain: bytes, refused: bool) -> bool:
        return saved.check(raw, lambda: asked.append(raw) or plain, refused)

    assert not check(b"a", b"A", refused=False)      # fetched
    assert check(b"a?utm", b"A?utm", refused=True)   # a variant only we merge: saved
    assert not check(b"a#x", b"A", refused=True)     # a variant the plain filter merges too
    assert not check(b"a?utm", b"A?utm", refused=True)  # the same variant found again
    assert not check(b"a", b"A", refused=True)       # a link found again
    assert check(b"b/", b"B/", refused=True)         # saved: the plain filter would have fetched it
    assert not check(b"b/#y", b"B/", refused=True)   # then its plain twin is not saved again
    assert saved.saved == 2
    assert asked == [b"a", b"a?utm", b"a#x", b"b/", b"b/#y"]  # the plain key computed once per raw key


def test_the_plain_fingerprint_is_scrapys_default_byte_for_byte():
    from scrapy import Request
    from scrapy.utils.request import fingerprint

    from scrapy_dedup.dupefilters import plain_fingerprinter
    from scrapy_dedup.fingerprinter import CanonicalRequestFingerprinter

    plain = plain_fingerprinter(CanonicalRequestFingerprinter())
    assert plain is not None
    for request in (Request("http://a.test/x?b=2&a=1#f"), Request("http://a.test/%7Ex/ü?q=a b"),
                    Request("http://a.test/p", method="POST", body=b"k=v")):
        assert plain(request) == fingerprint(request)
