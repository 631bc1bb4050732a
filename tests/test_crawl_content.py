"""Real crawls of a local site with known content duplicates, with the add-on or pieces enabled by hand."""
from __future__ import annotations

import json
import logging
import re
from collections import Counter

import pytest
import scrapy
from pytest_twisted import inlineCallbacks

from tests.contentsite import ContentSite
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite, Page

pytestmark = pytest.mark.crawl

ADDON = {"ADDONS": {"scrapy_dedup.Addon": 0}}


class PageSpider(scrapy.Spider):
    name = "pages"

    def parse(self, response):
        yield {"url": response.url}


class HtmlItemSpider(scrapy.Spider):
    """Yields the page's HTML in the item, for DEDUP_CONTENT_FIELD."""

    name = "htmlitems"

    def parse(self, response):
        yield {"url": response.url, "html": response.text}


def paths_of(items, host=None):
    from urllib.parse import urlsplit

    return sorted(urlsplit(i["url"]).path for i in items if host is None or urlsplit(i["url"]).hostname == host)


def test_the_fixture_holds_what_it_claims():
    """By the engine's default decision rule (simhash candidates verified by sketches), the edited
    pages of the test site are near duplicates of their products, and no two siblings are."""
    from scrapy_dedup.content.engine import ContentDeduplicator
    from tests.contentsite import edited_text, product_text, sibling_text

    for i in range(3, 5):
        assert product_text(i) != edited_text(i)
        dedup = ContentDeduplicator.in_memory()
        assert dedup.check("https://t.test/p", product_text(i)).kind == "unique"
        assert dedup.check("https://t.test/e", edited_text(i)).kind == "near"
    for i in range(4):  # every pair of siblings, in both orders
        for j in range(4):
            if i != j:
                dedup = ContentDeduplicator.in_memory()
                assert dedup.check("https://t.test/a", sibling_text(i)).kind == "unique"
                assert dedup.check("https://t.test/b", sibling_text(j)).kind == "unique", (i, j)


def assert_one_of_each_pair_kept(kept: list[str], site: ContentSite) -> None:
    for path, (kind, _, _) in site.paths.items():
        if kind in ("exact", "near"):
            original = "/p/" + path.rsplit("/", 1)[1]
            assert (path in kept) != (original in kept), (path, original, kept)


@inlineCallbacks
def test_addon_drops_exact_and_near_duplicates_keeps_siblings_and_degenerate_pages(caplog):
    site_def = ContentSite()
    caplog.set_level(logging.INFO)
    with LocalSite(site_def) as site:
        crawler = yield run_crawl(PageSpider, ADDON, start_urls=site_def.urls(site, "shop.test"))
    stats = crawler.stats.get_stats()
    kept = paths_of(crawler.items)
    n_exact, n_near = site_def.count("exact"), site_def.count("near")
    n_unique, n_degenerate = site_def.count("unique"), site_def.count("degenerate")
    # every sibling and every degenerate page survives; of each duplicate pair exactly one
    assert all(f"/sib/{i}" in kept for i in range(4))
    assert all(f"/denied/{i}" in kept for i in range(3))
    assert_one_of_each_pair_kept(kept, site_def)
    assert len(kept) == n_unique + n_degenerate
    assert stats["item_dropped_reasons_count/ExactDuplicateItem"] == n_exact
    assert stats["item_dropped_reasons_count/NearDuplicateItem"] == n_near
    # the report's numbers, in stats and in the log
    assert stats["dedup/content/total"] == len(site_def.paths)
    assert stats["dedup/content/exact"] == n_exact
    assert stats["dedup/content/near"] == n_near
    assert stats["dedup/content/unique"] == n_unique
    assert stats["dedup/content/degenerate"] == n_degenerate
    assert stats["dedup/content/clusters"] == n_exact + n_near  # each duplicate pairs with its own original
    assert stats["dedup/content/largest_cluster"] == 2
    report = [r.getMessage() for r in caplog.records if "duplication report" in r.getMessage()]
    assert len(report) == 1
    assert re.search(rf"Exact duplicates:\s+{n_exact}\s", report[0])
    assert re.search(rf"Near duplicates:\s+{n_near}\s", report[0])
    assert "URL layer:" in report[0] and "Content layer:" in report[0]
    # each dropped duplicate is one line at DEDUP_DUPLICATE_LOG_LEVEL (DEBUG by default: not in this INFO log)
    assert not [r for r in caplog.records if r.getMessage().startswith("Dropped")]


@pytest.mark.parametrize("action", ["tag", "log"])
@inlineCallbacks
def test_tag_and_log_modes_keep_every_item(action):
    site_def = ContentSite()
    with LocalSite(site_def) as site:
        crawler = yield run_crawl(PageSpider, {**ADDON, "DEDUP_CONTENT_ACTION": action},
                                  start_urls=site_def.urls(site, "shop.test"))
    assert paths_of(crawler.items) == sorted(site_def.paths)
    tagged = [i for i in crawler.items if "dedup" in i]
    if action == "tag":
        assert len(tagged) == site_def.count("exact") + site_def.count("near")
        for item in tagged:
            assert item["dedup"]["kind"] in ("exact", "near")
            assert item["dedup"]["kept_url"].startswith("http://shop.test")
            assert item["dedup"]["cluster"]
    else:
        assert tagged == []
    assert crawler.stats.get_value("dedup/content/exact") == site_def.count("exact")


@inlineCallbacks
def test_per_domain_content_override_applies_to_one_host_only():
    site_def = ContentSite()
    settings = {**ADDON, "DEDUP_CONTENT_POLICIES": {"b.test": {"min_words": 1000}}}
    with LocalSite(site_def) as site:
        crawler = yield run_crawl(PageSpider, settings,
                                  start_urls=site_def.urls(site, "a.test") + site_def.urls(site, "b.test"))
    stats = crawler.stats.get_stats()
    # on b.test every page is now below min_words: degenerate, never a duplicate, always kept
    assert paths_of(crawler.items, "b.test") == sorted(site_def.paths)
    # a.test is judged with the default policy
    assert len(paths_of(crawler.items, "a.test")) == site_def.count("unique") + site_def.count("degenerate")
    assert stats["dedup/content/degenerate"] == len(site_def.paths) + site_def.count("degenerate")
    assert stats["dedup/content/exact"] == site_def.count("exact")


@inlineCallbacks
def test_drop_duplicate_responses_skips_the_callback():
    site_def = ContentSite()
    settings = {**ADDON, "DEDUP_DROP_DUPLICATE_RESPONSES": True}
    with LocalSite(site_def) as site:
        crawler = yield run_crawl(PageSpider, settings, start_urls=site_def.urls(site, "shop.test"))
    stats = crawler.stats.get_stats()
    n_dup = site_def.count("exact") + site_def.count("near")
    assert len(crawler.items) == len(site_def.paths) - n_dup
    assert stats.get("dedup/content/dropped_responses/exact", 0) == site_def.count("exact")
    assert stats.get("dedup/content/dropped_responses/near", 0) == site_def.count("near")
    # the callbacks never ran, so the pipeline had nothing to drop
    assert "item_dropped_count" not in stats


@inlineCallbacks
def test_content_field_mode_without_the_middleware():
    site_def = ContentSite()
    settings = {"ITEM_PIPELINES": {"scrapy_dedup.NearDuplicatePipeline": 300},
                "EXTENSIONS": {"scrapy_dedup.DuplicationReportExtension": 500},
                "DEDUP_CONTENT_FIELD": "html"}
    with LocalSite(site_def) as site:
        crawler = yield run_crawl(HtmlItemSpider, settings, start_urls=site_def.urls(site, "shop.test"))
    stats = crawler.stats.get_stats()
    assert len(crawler.items) == site_def.count("unique") + site_def.count("degenerate")
    assert stats["dedup/content/exact"] == site_def.count("exact")
    assert stats["dedup/content/near"] == site_def.count("near")


@inlineCallbacks
def test_extraction_errors_of_item_fields_reach_the_report(caplog, monkeypatch):
    """An item whose DEDUP_CONTENT_FIELD HTML cannot be extracted (an injected fault of the extractor:
    a bad selector is refused at start-up, and page_text takes any bytes) is kept and counted once,
    where the report reads it: the report's "Extraction errors" line and
    dedup/content/extraction_errors agree (the pipeline used to count them in stats only, and the
    report left the line out)."""
    from scrapy_dedup.content import pages

    real_extract = pages.extract_text

    def broken_extractor(source, *args, **kwargs):  # an item's HTML (a string), not a response's parsed tree
        if isinstance(source, (str, bytes)):
            raise RuntimeError("extractor fault")
        return real_extract(source, *args, **kwargs)

    monkeypatch.setattr(pages, "extract_text", broken_extractor)
    site_def = ContentSite()
    settings = {**ADDON, "DEDUP_CONTENT_FIELD": "html"}
    with caplog.at_level(logging.INFO):
        with LocalSite(site_def) as site:
            crawler = yield run_crawl(HtmlItemSpider, settings, start_urls=site_def.urls(site, "shop.test"))
    errors = crawler.stats.get_value("dedup/content/extraction_errors")
    assert errors == len(site_def.paths) == len(crawler.items)
    report = next(r.getMessage() for r in caplog.records if "duplication report" in r.getMessage())
    assert re.search(rf"Extraction errors:\s+{errors}$", report, re.M), report


@pytest.mark.parametrize("settings, named", [
    ({"DEDUP_STRIP_SELECTORS": ["div[["]}, "DEDUP_STRIP_SELECTORS"),
    ({"DEDUP_CONTENT_POLICIES": {"shop.test": {"strip_selectors": [".ok", "p::nope("]}}},
     r"DEDUP_CONTENT_POLICIES\['shop.test'\]"),
])
@inlineCallbacks
def test_a_bad_strip_selector_fails_at_start_up_naming_the_setting(settings, named):
    """It used to be accepted and then fail on every page, each page kept unjudged as an extraction error."""
    with pytest.raises(ValueError, match=rf"{named}.*invalid CSS selector"):
        yield run_crawl(PageSpider, {**ADDON, **settings}, start_urls=[])


@inlineCallbacks
def test_pipeline_without_fingerprints_fails_at_start_up_naming_what_to_add(caplog):
    settings = {"ITEM_PIPELINES": {"scrapy_dedup.NearDuplicatePipeline": 300}}
    with pytest.raises(ValueError, match="SPIDER_MIDDLEWARES.*ContentFingerprintMiddleware.*DEDUP_CONTENT_FIELD"):
        yield run_crawl(PageSpider, settings, start_urls=[])


EXTENSION_MISSING = {
    "middleware": {"SPIDER_MIDDLEWARES": {"scrapy_dedup.middlewares.ContentFingerprintMiddleware": 950}},
    "pipeline": {"ITEM_PIPELINES": {"scrapy_dedup.NearDuplicatePipeline": 300}, "DEDUP_CONTENT_FIELD": "html"},
    "dust learning": {"DOWNLOADER_MIDDLEWARES": {"scrapy_dedup.dust_learning.DustLearningMiddleware": 100},
                      "REQUEST_FINGERPRINTER_CLASS": "scrapy_dedup.CanonicalRequestFingerprinter",
                      "DEDUP_DUST_LEARN": True},
}


@pytest.mark.parametrize("component", EXTENSION_MISSING)
@inlineCallbacks
def test_a_content_component_without_the_extension_fails_at_start_up_naming_it(component):
    with pytest.raises(ValueError, match=r"EXTENSIONS = \{'scrapy_dedup\.extensions\.DedupExtension': 500\}"):
        yield run_crawl(PageSpider, EXTENSION_MISSING[component], start_urls=[])


@pytest.mark.parametrize("extensions", [{"scrapy_dedup.DuplicationReportExtension": 500},
                                        {"scrapy_dedup.extensions.DuplicationReportExtension": 0},
                                        {"scrapy_dedup.DedupExtension": 500}])
def test_the_add_on_and_an_explicit_extension_entry_make_one_instance(extensions):
    from scrapy.utils.test import get_crawler

    from scrapy_dedup import DedupExtension, DuplicationReportExtension

    assert DuplicationReportExtension is DedupExtension
    crawler = get_crawler(settings_dict={**ADDON, "EXTENSIONS": extensions})
    assert [type(e) for e in crawler.extensions.middlewares].count(DedupExtension) == 1


def test_the_extension_alone_opens_no_content_store_and_reports_the_layer_off():
    from scrapy.utils.test import get_crawler

    from scrapy_dedup import DedupExtension

    # a Redis content index nobody listens to: building the store would log or fail
    crawler = get_crawler(settings_dict={"EXTENSIONS": {"scrapy_dedup.DedupExtension": 500},
                                         "DEDUP_CONTENT_BACKEND": "redis", "DEDUP_REDIS_URL": "redis://127.0.0.1:9/0"})
    extension = crawler.get_extension(DedupExtension)
    assert extension.store is None
    assert extension.content_lines() == [
        "Content layer: not enabled (add NearDuplicatePipeline / ContentFingerprintMiddleware)"]
    assert not [key for key in crawler.stats.get_stats() if key.startswith("dedup/content/")]


@inlineCallbacks
def test_non_text_and_binary_responses_are_skipped_and_counted():
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40
    pages = {
        "/img.png": Page(png, content_type="image/png"),
        "/fake.html": Page(png, content_type="text/html"),  # binary served as text/html
        "/empty.html": Page(b"", content_type="text/html"),
        "/bad-charset.html": Page(b"<html><body><main>" + b"caf\xe9 \xff\xfe " * 50 + b"</main></body></html>",
                                  content_type="text/html; charset=utf-8"),
    }
    with LocalSite(lambda host, path: pages.get(path)) as site:
        crawler = yield run_crawl(PageSpider, ADDON, start_urls=[site.url("shop.test", p) for p in pages])
    stats = crawler.stats.get_stats()
    assert len(crawler.items) == len(pages)  # nothing is lost
    assert stats["dedup/content/skipped_non_text"] == 2
    assert stats["dedup/content/fingerprinted"] == 2  # empty (degenerate) and the broken charset page
    assert "log_count/ERROR" not in stats


@inlineCallbacks
def test_audit_file_and_crawl_log(tmp_path):
    site_def = ContentSite()
    audit, log = tmp_path / "audit.jsonl", tmp_path / "crawl.jsonl"
    settings = {**ADDON, "DEDUP_AUDIT_FILE": str(audit), "DEDUP_LOG_FILE": str(log)}
    with LocalSite(site_def) as site:
        yield run_crawl(PageSpider, settings, start_urls=site_def.urls(site, "shop.test"))
    audit_rows = [json.loads(line) for line in audit.read_text().splitlines()]
    assert len(audit_rows) == site_def.count("exact") + site_def.count("near")
    for row in audit_rows:
        assert set(row) >= {"url", "kept_url", "distance", "kind", "cluster"}
        assert row["kind"] in ("exact", "near")
        if row["kind"] == "exact":  # (a near duplicate may have distance 0 too: same simhash, other words)
            assert row["distance"] == 0
    log_rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(log_rows) == len(site_def.paths)
    for row in log_rows:
        assert set(row) >= {"request_url", "url", "canonical_url", "exact_hash", "simhash", "words"}
    # the same main text gives the same exact hash, whatever the chrome
    by_path = {row["url"].split(str(site.port))[1]: row for row in log_rows}
    assert by_path["/copy/0"]["exact_hash"] == by_path["/p/0"]["exact_hash"]
    assert by_path["/edit/3"]["exact_hash"] != by_path["/p/3"]["exact_hash"]


@inlineCallbacks
def test_addon_yields_to_user_settings():
    settings = {**ADDON, "DUPEFILTER_CLASS": "scrapy.dupefilters.RFPDupeFilter",
                "ITEM_PIPELINES": {"tests.test_crawl_content.UpperPipeline": 100},
                "DEDUP_CONTENT_ACTION": "tag"}
    site_def = ContentSite(products=2, copies=1, edits=0, siblings=0, denied=0)
    with LocalSite(site_def) as site:
        crawler = yield run_crawl(PageSpider, settings, start_urls=site_def.urls(site, "shop.test"))
    assert crawler.settings["DUPEFILTER_CLASS"] == "scrapy.dupefilters.RFPDupeFilter"
    assert not any(key.startswith("dedup/seen/") for key in crawler.stats.get_stats())  # not our dupefilter
    pipelines = crawler.settings.getdict("ITEM_PIPELINES")
    assert "tests.test_crawl_content.UpperPipeline" in pipelines  # the user's dict kept ...
    assert len(pipelines) == 2  # ... and ours merged in
    assert all(i.get("upper") for i in crawler.items)
    assert sum(1 for i in crawler.items if "dedup" in i) == 1


@inlineCallbacks
def test_dedup_enabled_false_turns_everything_off():
    site_def = ContentSite(products=2, copies=1, edits=0, siblings=0, denied=0)
    with LocalSite(site_def) as site:
        crawler = yield run_crawl(PageSpider, {**ADDON, "DEDUP_ENABLED": False},
                                  start_urls=site_def.urls(site, "shop.test"))
    assert len(crawler.items) == 3
    assert not any(k.startswith("dedup/") for k in crawler.stats.get_stats())


class UpperPipeline:
    def process_item(self, item, spider=None):
        item["upper"] = True
        return item


@inlineCallbacks
def test_template_canaries_warn_on_a_cluster_and_a_bucket_past_the_threshold(caplog):
    """Pages that are the same apart from a few words of their own: the canaries speak up."""
    from tests.contentsite import SHARED_DESCRIPTION, template

    # 12 pages that differ by one word: one big near-duplicate cluster, and (kept with
    # verification off) one bucket of the index holding all of them
    pages = {f"/t/{i}": Page(template(f"{SHARED_DESCRIPTION} item{i}", title="T")) for i in range(12)}
    caplog.set_level(logging.INFO)
    with LocalSite(lambda host, path: pages.get(path)) as site:
        crawler = yield run_crawl(PageSpider, {**ADDON, "DEDUP_CANARY_SIZE": 5, "DEDUP_CONTENT_ACTION": "log"},
                                  start_urls=[site.url("shop.test", p) for p in pages])
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("cluster" in w and "DEDUP_CANARY_SIZE" in w for w in warnings), warnings
    assert crawler.stats.get_value("dedup/content/canary_warnings") == 1
    assert crawler.stats.get_value("dedup/content/largest_cluster") == 12


@inlineCallbacks
def test_bucket_canary_warns_when_kept_pages_crowd_one_index_bucket(caplog):
    """Templated siblings are kept apart, but their fingerprints crowd one band bucket: warned."""
    from scrapy_dedup.content.simhash import simhash
    from scrapy_dedup.content.text import page_text
    from tests.contentsite import sibling_text, template

    pages = {f"/s/{i}": Page(template(sibling_text(i), title="S")) for i in range(30)}
    # the fixture's premise: some 16-bit band value is shared by more than 5 of the pages
    fps = [simhash(page_text(page.body)) for page in pages.values()]
    assert max(Counter((f >> (16 * b)) & 0xFFFF for f in fps).most_common(1)[0][1] for b in range(4)) > 5
    caplog.set_level(logging.INFO)
    with LocalSite(lambda host, path: pages.get(path)) as site:
        crawler = yield run_crawl(PageSpider, {**ADDON, "DEDUP_CANARY_SIZE": 5},
                                  start_urls=[site.url("shop.test", p) for p in pages])
    assert len(crawler.items) == 30  # siblings: all kept
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("bucket of the content index" in w for w in warnings), warnings
    assert crawler.stats.get_value("dedup/content/largest_bucket") > 5


@inlineCallbacks
def test_a_refetch_of_the_same_url_keeps_its_item():
    """Never lose data: the first fetch's item may not have been stored (a killed crawl)."""
    site_def = ContentSite(products=1, copies=0, edits=0, siblings=0, denied=0)
    with LocalSite(site_def) as site:
        # start URLs are dont_filter: the same URL twice is fetched twice, as on a resume
        crawler = yield run_crawl(PageSpider, {**ADDON, "CONCURRENT_REQUESTS": 1},
                                  start_urls=[site.url("shop.test", "/p/0")] * 2)
    stats = crawler.stats.get_stats()
    assert len(crawler.items) == 2, stats
    assert stats["dedup/items/refetch_kept"] == 1
    assert stats["dedup/content/exact"] == 1  # the second fetch was still redundant
    # ... and, as in the offline audit, one cluster of two pages (two fetches of one URL)
    assert stats["dedup/content/clusters"] == 1
    assert stats["dedup/content/largest_cluster"] == 2


class PromoHtmlSpider(scrapy.Spider):
    """Items carry their page's HTML; the two pages differ only in a promotion block."""

    name = "promo"

    def parse(self, response):
        yield {"url": response.url, "html": response.text}


@pytest.mark.parametrize("mode", ["content_field", "response"])
@inlineCallbacks
def test_strip_selectors_apply_to_item_fields_as_to_responses(mode):
    """With DEDUP_CONTENT_FIELD the item's HTML is extracted under the same policy as a response:
    two pages that differ only in a stripped block are exact duplicates (DEDUP_STRIP_SELECTORS used to be
    ignored on that path, so both were unique)."""
    from tests.contentsite import product_text

    def page(promo: str) -> Page:
        return Page(f'<html><body><main><p>{product_text(1)}</p><div class="promo">{promo}</div></main></body></html>')

    pages = {"/a": page("Spring sale: kettles half price " * 20), "/b": page("Free shipping this week " * 20)}
    settings = {**ADDON, "DEDUP_STRIP_SELECTORS": [".promo"], "CONCURRENT_REQUESTS": 1}
    if mode == "content_field":
        settings = {"ITEM_PIPELINES": {"scrapy_dedup.NearDuplicatePipeline": 300}, "DEDUP_CONTENT_FIELD": "html",
                    "EXTENSIONS": {"scrapy_dedup.DedupExtension": 500},
                    "DEDUP_STRIP_SELECTORS": [".promo"], "CONCURRENT_REQUESTS": 1}
    with LocalSite(lambda host, path: pages.get(path)) as site:
        crawler = yield run_crawl(PromoHtmlSpider, settings, start_urls=[site.url("shop.test", p) for p in pages])
    assert crawler.stats.get_value("dedup/content/exact") == 1
    assert len(crawler.items) == 1
