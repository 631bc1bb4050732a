"""One log line per duplicate item, never the item (real crawls with items that carry the page's HTML)."""
from __future__ import annotations

import logging
import os

import pytest
import scrapy
from pytest_twisted import inlineCallbacks
from scrapy.logformatter import LogFormatter

from tests.contentsite import ContentSite
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite

pytestmark = pytest.mark.crawl

ADDON = {"ADDONS": {"scrapy_dedup.Addon": 0}}


class HtmlSpider(scrapy.Spider):
    name = "html"

    def parse(self, response):
        yield {"url": response.url, "html": response.text}


class ProjectFormatter(LogFormatter):
    """A project's own formatter with its own ``dropped``: it decides what the log shows."""

    def dropped(self, item, exception, response, spider):
        return {"level": logging.WARNING, "msg": "PROJECT dropped %(url)s", "args": {"url": item["url"]}}


@pytest.mark.parametrize("action,level", [("drop", "DEBUG"), ("drop", "INFO"), ("tag", "INFO"), ("log", "WARNING")])
@inlineCallbacks
def test_each_duplicate_is_one_short_line_at_the_chosen_level_and_no_line_holds_an_item(caplog, action, level):
    site_def = ContentSite()
    caplog.set_level(logging.DEBUG)
    settings = {**ADDON, "LOG_LEVEL": "DEBUG", "DEDUP_CONTENT_ACTION": action, "DEDUP_DUPLICATE_LOG_LEVEL": level}
    with LocalSite(site_def) as site:
        crawler = yield run_crawl(HtmlSpider, settings, start_urls=site_def.urls(site, "shop.test"))
    n_dup = site_def.count("exact") + site_def.count("near")
    verb = {"drop": "Dropped", "tag": "Tagged", "log": "Kept"}[action]
    lines = [r for r in caplog.records if r.getMessage().startswith(f"{verb} item of ")]
    assert len(lines) == n_dup
    assert {r.levelname for r in lines} == {level}
    for record in lines:
        message = record.getMessage()
        assert "duplicate http://shop.test" in message and "(of http://shop.test" in message
        assert "\n" not in message and "<html" not in message.lower()
    # no line of the whole log is over 4 KB, though every item carries a page of HTML
    longest = max(len(r.getMessage()) for r in caplog.records)
    assert longest < 4096, longest
    assert not any("<html" in r.getMessage().lower() and "Dropped" in r.getMessage() for r in caplog.records)
    if action == "drop":
        assert crawler.stats.get_value("item_dropped_count") == n_dup


@inlineCallbacks
def test_a_projects_own_log_formatter_is_kept_and_used_for_duplicates(caplog):
    site_def = ContentSite(products=3, copies=2, edits=0, siblings=0, denied=0)
    caplog.set_level(logging.INFO)
    settings = {**ADDON, "LOG_FORMATTER": f"{__name__}.ProjectFormatter"}
    with LocalSite(site_def) as site:
        crawler = yield run_crawl(HtmlSpider, settings, start_urls=site_def.urls(site, "shop.test"))
    assert type(crawler.logformatter) is ProjectFormatter
    project_lines = [r for r in caplog.records if r.getMessage().startswith("PROJECT dropped ")]
    assert len(project_lines) == 2 and {r.levelno for r in project_lines} == {logging.WARNING}


def test_the_formatter_cuts_kept_items_and_formats_lazily():
    from scrapy_dedup.logformatter import SCRAPED_ITEM_CHARS, DedupLogFormatter

    entry = DedupLogFormatter().scraped({"html": "x" * 50_000}, None, scrapy.Spider("s"))
    text = entry["msg"] % entry["args"]
    assert len(text) < SCRAPED_ITEM_CHARS + 200 and "more characters" in text
    assert os.linesep in entry["msg"]  # Scrapy's own message shape, only the item is shortened
