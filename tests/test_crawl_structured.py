"""A real crawl of HTML pages mixed with JSON endpoints, a feed, a stylesheet and a script.

The structured responses are skipped before extraction and counted once each in
``dedup/content/skipped_non_html``: no WARNING per response, no extraction error, one
INFO line per crawl. The HTML pages (and a plain-text document) are still deduplicated.
"""
from __future__ import annotations

import json
import logging

import pytest
import scrapy
from pytest_twisted import inlineCallbacks

from tests.contentsite import ContentSite, product_text
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite, Page

pytestmark = pytest.mark.crawl

ADDON = {"ADDONS": {"scrapy_dedup.Addon": 0}, "EXTENSIONS": {"scrapy_dedup.DuplicationReportExtension": 500}}

PRODUCTS = [{"id": i, "name": f"kettle {i}", "description": product_text(i)[:200]} for i in range(3)]
JSON_ENDPOINTS = {
    "/api/products": Page(json.dumps(PRODUCTS), content_type="application/json"),
    "/api/products/0": Page(json.dumps(PRODUCTS[0]), content_type="application/json; charset=utf-8"),
    # the same answer twice: structured responses are never judged duplicates of each other
    "/api/products/0?fields=all": Page(json.dumps(PRODUCTS[0]), content_type="application/json; charset=utf-8"),
    "/api/schema": Page(json.dumps({"@context": "https://schema.org", "@type": "Product"}),
                        content_type="application/ld+json"),
    "/legacy/products.php": Page(json.dumps(PRODUCTS), content_type="text/html; charset=utf-8"),  # PHP's default
    "/api/plain": Page(json.dumps({"ok": True, "items": PRODUCTS}), content_type="text/plain"),
}
OTHER_STRUCTURED = {
    "/feed.xml": Page('<?xml version="1.0"?><rss version="2.0"><channel><title>Shop news</title>'
                      "<item><title>New kettle</title></item></channel></rss>", content_type="application/rss+xml"),
    "/static/site.css": Page("body { color: #333 } .banner { display: none }", content_type="text/css"),
    "/static/app.js": Page("window.shop = { cart: [] };", content_type="application/javascript"),
}
# Plain text is fingerprinted like a page: a document mirrored on two paths is an exact duplicate.
DOCUMENT = "Kettle manual. " + product_text(5)
TEXT_DOCUMENTS = {
    "/docs/manual.txt": Page(DOCUMENT, content_type="text/plain; charset=utf-8"),
    "/mirror/manual.txt": Page(DOCUMENT, content_type="text/plain"),
}


class PageSpider(scrapy.Spider):
    name = "pages"

    def parse(self, response):
        yield {"url": response.url}


@inlineCallbacks
def test_json_and_other_structured_responses_are_counted_not_warned_and_pages_still_deduplicated(caplog):
    site_def = ContentSite(products=4, copies=2, edits=1, siblings=0, denied=1)
    extra = {**JSON_ENDPOINTS, **OTHER_STRUCTURED, **TEXT_DOCUMENTS}

    def route(host, path):
        return extra.get(path) or site_def(host, path)

    caplog.set_level(logging.INFO)
    with LocalSite(route) as site:
        start_urls = site_def.urls(site, "shop.test") + [site.url("shop.test", path) for path in extra]
        crawler = yield run_crawl(PageSpider, ADDON, start_urls=start_urls)
    stats = crawler.stats.get_stats()
    ours = [r for r in caplog.records if r.name.startswith("scrapy_dedup")]

    structured = len(JSON_ENDPOINTS) + len(OTHER_STRUCTURED)
    assert stats["dedup/content/skipped_non_html"] == structured
    assert not stats.get("dedup/content/extraction_errors")
    assert not stats.get("dedup/content/skipped_non_text")
    assert [r.getMessage() for r in ours if r.levelno >= logging.WARNING] == []
    first = [r for r in ours if "dedup/content/skipped_non_html" in r.getMessage() and r.levelno == logging.INFO]
    assert len(first) == 1  # once per crawl, not once per response
    # the pages are deduplicated as before; the plain-text mirror is an exact duplicate of the manual
    assert stats["dedup/content/exact"] == site_def.count("exact") + 1
    assert stats["dedup/content/near"] == site_def.count("near")
    assert stats["dedup/content/fingerprinted"] == len(site_def.paths) + len(TEXT_DOCUMENTS)
    # nothing structured is lost: every one of its items is kept
    kept = {item["url"].split(str(site.port), 1)[1] for item in crawler.items}
    assert set(JSON_ENDPOINTS) | set(OTHER_STRUCTURED) <= kept
    assert len(crawler.items) == len(start_urls) - site_def.count("exact") - site_def.count("near") - 1
    # the crawl-end report prints the count next to the other skipped one
    report = [r.getMessage() for r in caplog.records if "duplication report" in r.getMessage()]
    assert len(report) == 1
    assert any(line.split()[:3] == ["Skipped", "non-HTML:", str(structured)] for line in report[0].splitlines())



@pytest.mark.parametrize("codec", ["rot13", "base64", "hex", "undefined"])
def test_a_response_scrapy_cannot_decode_is_fingerprinted_from_its_bytes(tmp_path, codec):
    """A response whose encoding is a codec that is no text encoding: Scrapy's ``.text`` and ``.selector``
    raise; the content layer reads the bytes with its own decoder (which falls back as if undeclared).

    (In a crawl, Scrapy's MetaRefreshMiddleware reads ``response.text`` first and fails the download
    itself, "Error downloading ... LookupError": that page is lost by Scrapy before any component sees
    it. A response built by a downloader middleware or a handler with such an encoding reaches us.)
    """
    from scrapy.http import HtmlResponse
    from scrapy.utils.test import get_crawler

    from scrapy_dedup.extensions import DedupExtension

    crawler = get_crawler(settings_dict={"EXTENSIONS": {"scrapy_dedup.DedupExtension": 500}})
    layer = crawler.get_extension(DedupExtension).open_content()
    body = f"<html><body><main><p>{product_text(7)}</p></main></body></html>".encode()
    first = HtmlResponse("http://shop.test/a", body=body, encoding=codec)
    second = HtmlResponse("http://shop.test/b", body=body, encoding=codec)
    # the premise: Scrapy cannot decode it (each codec fails its own way: LookupError, TypeError, ...)
    with pytest.raises(Exception):  # noqa: B017
        first.text  # noqa: B018
    assert layer.verdict_for_response(first).kind == "unique"
    assert layer.verdict_for_response(second).kind == "exact"
    assert layer.events["extraction_errors"] == 0
    layer.close()
