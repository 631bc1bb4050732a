"""Real crawls of a local two-host site whose links carry tracking parameters, session IDs and
escape variants: with the canonical fingerprinter each page is fetched once; a per-domain policy
turning ``strip_tracking`` off fetches that host's tracking variants again, the other host stays
collapsed. A baseline crawl with Scrapy's own fingerprinter shows the variants are real."""
from __future__ import annotations

import posixpath
from collections import Counter
from urllib.parse import parse_qsl, unquote, urlsplit

import pytest
import scrapy
from pytest_twisted import inlineCallbacks

from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite, Page

TOKEN = "0123456789ABCDEF0123456789ABCDEF"
HOSTS = ("shop.test", "news.test")

# links on every host's home page: variants of /item?id=1 and /item?id=2, and of the home page
VARIANT_LINKS = [
    "/item?id=1",
    "/item?id=1&utm_source=mail",
    "/item?utm_medium=social&id=1",
    f"/item;jsessionid={TOKEN}?id=1",
    "/%69tem?id=1",
    "/item?id=1#reviews",
    "/./x/../item?id=2&fbclid=abc",
    "/item?id=2",
    "/?utm_campaign=home",
]
TRACKING_VARIANTS_OF_ITEM_1 = 2  # utm_source=mail, utm_medium=social


def logical_page(path: str) -> tuple[str, str]:
    """What the server serves for a raw request path (its own reading, independent of the package)."""
    parts = urlsplit(path)
    clean = posixpath.normpath(unquote(parts.path.split(";", 1)[0])) if parts.path not in ("", "/") else "/"
    item_id = dict(parse_qsl(parts.query)).get("id", "")
    return clean, item_id


def make_router(port_holder: dict):
    def router(host: str, path: str) -> Page | None:
        if host not in HOSTS:
            return None
        page, item_id = logical_page(path)
        if page == "/start" and host == HOSTS[0]:  # start URLs are dont_filter: link home from here
            return Page('<a href="/">home</a>')
        other = HOSTS[1] if host == HOSTS[0] else HOSTS[0]
        if page == "/":
            links = VARIANT_LINKS + [f"http://{other}:{port_holder['port']}/?utm_source=partner"]
            return Page("".join(f'<a href="{href}">x</a>' for href in links))
        if page == "/item" and item_id in ("1", "2"):
            return Page(f'<h1>{host} item {item_id}</h1><a href="/">home</a><a href="/?utm_source=back">home</a>')
        return None

    return router


class LinkSpider(scrapy.Spider):
    name = "url_variants"

    def parse(self, response):
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)


def fetches_per_page(site: LocalSite) -> Counter:
    return Counter((host, logical_page(path)) for host, path in site.fetched())


@inlineCallbacks
def crawl(settings: dict):
    holder: dict = {}
    with LocalSite(make_router(holder)) as site:
        holder["port"] = site.port
        crawler = yield run_crawl(LinkSpider, settings, start_urls=[site.url("shop.test", "/start")])
    return site, crawler


FINGERPRINTER = {"REQUEST_FINGERPRINTER_CLASS": "scrapy_dedup.CanonicalRequestFingerprinter"}
PAGES = {(host, page) for host in HOSTS for page in (("/", ""), ("/item", "1"), ("/item", "2"))} | {
    ("shop.test", ("/start", ""))}


@pytest.mark.crawl
@inlineCallbacks
def test_scrapy_default_fetches_the_variants():
    site, _ = yield crawl({})
    per_page = fetches_per_page(site)
    assert set(per_page) == PAGES
    assert per_page[("shop.test", ("/item", "1"))] > 1  # the variants are real for Scrapy's fingerprinter


@pytest.mark.crawl
@inlineCallbacks
def test_each_page_fetched_once_with_the_canonical_fingerprinter():
    site, crawler = yield crawl(FINGERPRINTER)
    per_page = fetches_per_page(site)
    assert set(per_page) == PAGES
    assert all(count == 1 for count in per_page.values()), per_page
    stats = crawler.stats
    assert stats.get_value("dedup/url/rule/strip_tracking") > 0
    assert stats.get_value("dedup/url/rule/strip_session") > 0
    assert stats.get_value("dedup/url/canonicalized") > 0
    assert stats.get_value("dupefilter/filtered") > 0


@pytest.mark.crawl
@inlineCallbacks
def test_per_domain_policy_without_strip_tracking_fetches_that_hosts_variants():
    site, _ = yield crawl({**FINGERPRINTER, "DEDUP_URL_POLICIES": {"shop.test": {"strip_tracking": False}}})
    per_page = fetches_per_page(site)
    assert set(per_page) == PAGES
    # shop.test: the plain item 1 plus each tracking variant (session and escape variants still collapse)
    assert per_page[("shop.test", ("/item", "1"))] == 1 + TRACKING_VARIANTS_OF_ITEM_1
    assert per_page[("shop.test", ("/item", "2"))] == 2  # plain, and the fbclid variant
    assert per_page[("shop.test", ("/", ""))] > 1
    # news.test keeps the default policy: everything collapsed
    for page in (("/", ""), ("/item", "1"), ("/item", "2")):
        assert per_page[("news.test", page)] == 1, per_page


@pytest.mark.crawl
@inlineCallbacks
def test_report_counts_filtered_requests_per_switch(caplog):
    """Requests filtered because a switch rewrote their URL are counted per switch, in stats and the report."""
    import logging

    caplog.set_level(logging.INFO)
    site, crawler = yield crawl({"ADDONS": {"scrapy_dedup.Addon": 0}})
    stats = crawler.stats.get_stats()
    assert stats["dedup/url/filtered/strip_tracking"] >= TRACKING_VARIANTS_OF_ITEM_1
    assert stats["dedup/url/filtered/strip_session"] >= 1
    assert stats["dedup/url/filtered/drop_fragment"] >= 1
    # never more than the duplicates filtered in all
    per_switch = [v for k, v in stats.items() if k.startswith("dedup/url/filtered/")]
    assert max(per_switch) <= stats["dupefilter/filtered"]
    report = next(r.getMessage() for r in caplog.records if "duplication report" in r.getMessage())
    # the report credits the switches with the fetches they saved, never with what Scrapy filters anyway
    saved_by = next(line for line in report.splitlines() if "Saved by:" in line)
    assert f"strip_tracking {stats['dedup/url/saved/strip_tracking']}" in saved_by
    assert "drop_fragment" not in saved_by and "dedup/url/saved/drop_fragment" not in stats
    assert 0 < max(v for k, v in stats.items() if k.startswith("dedup/url/saved/")) <= stats["dedup/url/saved"]
