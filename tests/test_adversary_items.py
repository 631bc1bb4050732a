"""Item types x content actions x the pipelines around ours (real crawls against ground truth).

Every item type itemadapter knows (dict, ``scrapy.Item``, dataclass, attrs; frozen or not; with
or without the fields the add-on writes) is yielded by a spider over a site with known
duplicates, under each ``DEDUP_CONTENT_ACTION``, with ``DEDUP_PARAGRAPHS_FIELD``, with
``DEDUP_CONTENT_FIELD`` (the pipeline judges), and beside pipelines that are async, return
Deferreds or copies. The truth: every unique page's item is exported; a duplicate page's item
is dropped in ``drop`` mode, kept (tagged where its type can take the field, else counted as
untaggable) otherwise; no ERROR line, no spider exception.
"""
from __future__ import annotations

import asyncio
import dataclasses
from typing import Any
from urllib.parse import urlsplit

import pytest
import scrapy
import attrs  # a dependency of Twisted, so of Scrapy: always there (never skipped)
from itemadapter import ItemAdapter
from pytest_twisted import inlineCallbacks

from tests.contentsite import ContentSite
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite


pytestmark = pytest.mark.crawl


class ItemWithFields(scrapy.Item):
    url = scrapy.Field()
    path = scrapy.Field()
    html = scrapy.Field()
    dedup = scrapy.Field()
    paragraphs = scrapy.Field()


class ItemWithoutFields(scrapy.Item):
    url = scrapy.Field()
    path = scrapy.Field()
    html = scrapy.Field()


@dataclasses.dataclass
class DataItem:
    url: str
    path: str
    html: str
    dedup: Any = None
    paragraphs: Any = None


@dataclasses.dataclass(frozen=True)
class FrozenDataItem:
    url: str
    path: str
    html: str
    dedup: Any = None
    paragraphs: Any = None


@dataclasses.dataclass
class BareDataItem:
    url: str
    path: str
    html: str


@attrs.define
class AttrsItem:
    url: str
    path: str
    html: str
    dedup: Any = None
    paragraphs: Any = None


@attrs.frozen
class FrozenAttrsItem:
    url: str
    path: str
    html: str
    dedup: Any = None
    paragraphs: Any = None


ITEM_TYPES: dict[str, Any] = {
    "dict": dict, "item": ItemWithFields, "item-without-fields": ItemWithoutFields, "dataclass": DataItem,
    "frozen-dataclass": FrozenDataItem, "dataclass-without-fields": BareDataItem, "attrs": AttrsItem,
    "frozen-attrs": FrozenAttrsItem,
}
#: which types can take a field the add-on writes (the others are passed on as they are, counted)
TAKES_FIELDS = {"dict", "item", "dataclass", "attrs"}


class TypedItemSpider(scrapy.Spider):
    name = "adversary_items"
    item_type: Any = dict

    def parse(self, response):
        yield self.item_type(url=response.url, path=urlsplit(response.url).path, html=response.text)


class AsyncPipeline:
    async def process_item(self, item, spider=None):
        await asyncio.sleep(0.001)
        return item


class DeferredPipeline:
    def process_item(self, item, spider=None):
        from twisted.internet import reactor
        from twisted.internet.defer import Deferred

        later: Deferred = Deferred()
        reactor.callLater(0.001, later.callback, item)
        return later


class CopyingPipeline:
    """A new object of the item's own type (what ``dict(item)`` is for dicts)."""

    def process_item(self, item, spider=None):
        if isinstance(item, dict):
            return dict(item)
        if isinstance(item, scrapy.Item):
            return item.copy()
        if dataclasses.is_dataclass(item):
            return dataclasses.replace(item)
        return attrs.evolve(item)


COMPANIONS = {"none": {}, "async-before": {f"{__name__}.AsyncPipeline": 100},
              "deferred-after": {f"{__name__}.DeferredPipeline": 300},
              "copying-before-and-after": {f"{__name__}.CopyingPipeline": 100, f"{__name__}.CopyingPipeline ": 300}}
MODES = {
    "drop": {"DEDUP_CONTENT_ACTION": "drop"},
    "tag": {"DEDUP_CONTENT_ACTION": "tag"},
    "log": {"DEDUP_CONTENT_ACTION": "log"},
    "tag+paragraphs-field": {"DEDUP_CONTENT_ACTION": "tag", "DEDUP_PARAGRAPHS": True,
                             "DEDUP_PARAGRAPHS_FIELD": "paragraphs"},
    "tag+content-field": {"DEDUP_CONTENT_ACTION": "tag", "DEDUP_CONTENT_FIELD": "html"},
    "drop+content-field": {"DEDUP_CONTENT_ACTION": "drop", "DEDUP_CONTENT_FIELD": "html"},
    # the shared content index (DEDUP_REDIS_URL added from the test's redis-server)
    "drop+redis": {"DEDUP_CONTENT_ACTION": "drop", "DEDUP_CONTENT_BACKEND": "redis"},
    "tag+paragraphs-field+redis": {"DEDUP_CONTENT_ACTION": "tag", "DEDUP_CONTENT_BACKEND": "redis",
                                   "DEDUP_PARAGRAPHS": True, "DEDUP_PARAGRAPHS_FIELD": "paragraphs"},
}


@inlineCallbacks
def crawl_items(item_type: str, mode: str, companions: str, redis_url: str | None = None):
    site_def = ContentSite(products=4, copies=2, edits=1, siblings=2, denied=1)
    pipelines = {path.strip(): order for path, order in COMPANIONS[companions].items()}
    if companions == "copying-before-and-after":  # one class at two orders: a subclass for the second
        pipelines = {f"{__name__}.CopyingPipeline": 100, f"{__name__}.CopyingAgainPipeline": 300}
    spider = type("Spider", (TypedItemSpider,), {"item_type": ITEM_TYPES[item_type]})
    settings = {"ADDONS": {"scrapy_dedup.Addon": 0}, "ITEM_PIPELINES": pipelines, **MODES[mode]}
    if redis_url:
        settings["DEDUP_REDIS_URL"] = redis_url
    with LocalSite(site_def) as site:
        crawler = yield run_crawl(spider, settings, start_urls=site_def.urls(site, "shop.test"))
    return site_def, crawler


class CopyingAgainPipeline(CopyingPipeline):
    pass


def check_truth(site_def: ContentSite, crawler, item_type: str, mode: str) -> None:
    stats = crawler.stats.get_stats()
    errors = {k: v for k, v in stats.items() if k.startswith("spider_exceptions") or k == "log_count/ERROR"}
    assert not errors, errors
    exported: dict[str, list[dict]] = {}
    for item in crawler.items:
        fields = ItemAdapter(item).asdict()
        exported.setdefault(fields["path"], []).append(fields)
    assert all(len(items) == 1 for items in exported.values()), exported.keys()
    duplicates = {p for p, (kind, _, _) in site_def.paths.items() if kind in ("exact", "near")}
    for path, (kind, _, _) in site_def.paths.items():
        if kind in ("exact", "near"):
            original = "/p/" + path.rsplit("/", 1)[1]
            if mode.startswith("drop"):  # one of the pair, whichever came first
                assert (path in exported) != (original in exported), (path, original, sorted(exported))
            else:
                assert path in exported and original in exported, (path, sorted(exported))
        elif not path.startswith("/p/"):
            assert path in exported, (path, sorted(exported))  # a unique page: never lost
    tagged = {p for p, items in exported.items() if items[0].get("dedup")}
    if mode.startswith("tag") and item_type in TAKES_FIELDS:
        assert tagged and tagged <= duplicates | {"/p/" + p.rsplit("/", 1)[1] for p in duplicates}
        assert len(tagged) == len(duplicates)
    elif mode.startswith("tag"):
        assert not tagged and stats.get("dedup/items/untaggable") == len(duplicates)
    else:
        assert not tagged
    if mode.startswith("tag+paragraphs-field"):
        filled = {p for p, items in exported.items() if items[0].get("paragraphs")}
        assert bool(filled) == (item_type in TAKES_FIELDS)


CASES = [(t, m, "none") for t in ITEM_TYPES for m in MODES if "redis" not in m]
SLOW_CASES = [(t, m, c) for t in ITEM_TYPES for m in ("drop", "tag", "tag+content-field") for c in COMPANIONS
              if c != "none"] + [(t, m, "none") for t in ITEM_TYPES for m in MODES if "redis" in m]


def _marks(mode: str, companions: str) -> list:
    marks = [pytest.mark.slow] + ([pytest.mark.redis] if "redis" in mode else [])
    if companions == "deferred-after":  # a Deferred from process_item is deprecated from Scrapy 2.14 on, still run
        marks.append(pytest.mark.filterwarnings("ignore::scrapy.exceptions.ScrapyDeprecationWarning"))
    return marks


@pytest.mark.parametrize(("item_type", "mode", "companions"),
                         CASES + [pytest.param(*case, marks=_marks(case[1], case[2])) for case in SLOW_CASES],
                         ids=lambda v: str(v))
@inlineCallbacks
def test_every_item_type_keeps_unique_pages_and_gets_its_pages_decision(item_type, mode, companions, request):
    redis_url = request.getfixturevalue("redis_url") if "redis" in mode else None
    site_def, crawler = yield crawl_items(item_type, mode, companions, redis_url)
    check_truth(site_def, crawler, item_type, mode)


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_a_content_field_of_bytes_by_any_type_is_judged_by_its_bytes(kind):
    """``DEDUP_CONTENT_FIELD`` given a bytearray or a memoryview: the same verdicts as for the same bytes (before,
    its repr was fingerprinted: ``bytearray(b'...')``, so an exact copy given as bytes was not found)."""
    from scrapy.utils.test import get_crawler

    from scrapy_dedup.extensions import DedupExtension

    html = b"<html><body><main><p>" + b" ".join(b"word%d" % i for i in range(80)) + b"</p></main></body></html>"
    extension = DedupExtension(get_crawler(scrapy.Spider, {"DEDUP_CONTENT_FIELD": "html"})).open_content()
    first, _ = extension.judge_content("http://a.test/1", kind(html))
    second, _ = extension.judge_content("http://a.test/2", html)
    assert first.kind == "unique"
    assert (second.kind, second.kept_url) == ("exact", "http://a.test/1")
