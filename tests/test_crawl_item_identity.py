"""Item decisions survive whatever the other components of a project do to items (real crawls).

A page's decision is taken once per response; its items must get it whatever
object an earlier pipeline returns (Scrapy allows any), and an item another
spider middleware filters must not leave a decision behind for an unrelated
item. Each adversary below is one thing real projects do; every combination
is crawled, in ``drop`` and ``tag`` mode, against ground truth.
"""
from __future__ import annotations

import asyncio
import dataclasses
import gc
import itertools
from typing import Any
from urllib.parse import urlsplit

import pytest
import scrapy
from itemadapter import ItemAdapter
from pytest_twisted import inlineCallbacks

from tests.contentsite import ContentSite
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite

pytestmark = pytest.mark.crawl

#: pages whose items the filtering spider middleware removes (always-unique pages, so the truth is fixed)
FILTERED = {"/sib/1", "/sib/3", "/denied/0"}


class ManyItemsSpider(scrapy.Spider):
    """Two items per page (a page's decision must reach all of its items), dicts of fresh objects."""

    name = "identity"

    def parse(self, response):
        path = urlsplit(response.url).path
        yield {"url": response.url, "path": path, "part": 1}
        yield {"url": response.url, "path": path, "part": 2}


class CopyingPipeline:
    """``return dict(item)``: a new object, the old one freed (its id free for reuse)."""

    def process_item(self, item, spider=None):
        return dict(item)


@dataclasses.dataclass
class Record:
    url: str
    path: str
    part: int
    dedup: Any = None


class RebuildingPipeline:
    """A new object of another item type, built from the item's fields."""

    def process_item(self, item, spider=None):
        return Record(**ItemAdapter(item).asdict())


class SlowAsyncPipeline:
    """An async pipeline that waits a little (items of many responses interleave) and copies."""

    counter = itertools.count()

    async def process_item(self, item, spider=None):
        await asyncio.sleep((next(self.counter) % 5) * 0.002)
        gc.collect()  # free what can be freed now: ids of dead items are reused at once
        return dict(ItemAdapter(item).items())


class FilteringMiddleware:
    """A spider middleware after ours in the output chain that drops some items."""

    async def process_spider_output(self, response, result, spider=None):
        async for obj in result:
            if isinstance(obj, dict) and obj.get("path") in FILTERED:
                continue
            yield obj


class ReplacingMiddleware:
    """A spider middleware after ours that replaces every item with a copy."""

    async def process_spider_output(self, response, result, spider=None):
        async for obj in result:
            yield dict(obj) if isinstance(obj, dict) else obj


ADVERSARIES = {
    "copying-pipeline": {"ITEM_PIPELINES": {f"{__name__}.CopyingPipeline": 100}},
    "rebuilding-pipeline": {"ITEM_PIPELINES": {f"{__name__}.RebuildingPipeline": 100}},
    "slow-async-pipeline": {"ITEM_PIPELINES": {f"{__name__}.SlowAsyncPipeline": 100}},
    "filtering-middleware": {"SPIDER_MIDDLEWARES": {f"{__name__}.FilteringMiddleware": 500}},
    "replacing-middleware": {"SPIDER_MIDDLEWARES": {f"{__name__}.ReplacingMiddleware": 500}},
}


def _settings(names: tuple[str, ...], action: str) -> dict[str, Any]:
    settings: dict[str, Any] = {"ADDONS": {"scrapy_dedup.Addon": 0}, "DEDUP_CONTENT_ACTION": action,
                                "CONCURRENT_REQUESTS": 16, "ITEM_PIPELINES": {}, "SPIDER_MIDDLEWARES": {}}
    for name in names:
        for key, value in ADVERSARIES[name].items():
            settings[key] = {**settings[key], **value}
    return settings


COMBINATIONS = [(name,) for name in ADVERSARIES] + [
    ("copying-pipeline", "filtering-middleware"),
    ("slow-async-pipeline", "filtering-middleware", "replacing-middleware"),
    ("rebuilding-pipeline", "replacing-middleware"),
]


@pytest.fixture
def collect_this_tests_garbage_only():
    """SlowAsyncPipeline's gc.collect() scans the objects this test makes, not the whole session's heap: the
    older ones, no garbage of this crawl, are frozen meanwhile (in a test process that ran many tests before,
    each collection took a second of CPU)."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.mark.parametrize("action", ["drop", "tag"])
@pytest.mark.parametrize("adversaries", COMBINATIONS, ids="+".join)
@pytest.mark.usefixtures("collect_this_tests_garbage_only")
@inlineCallbacks
def test_every_item_gets_its_own_pages_decision(adversaries, action):
    site_def = ContentSite(products=30, copies=15, edits=8, siblings=6, denied=4)
    filtered = FILTERED if "filtering-middleware" in adversaries else set()
    with LocalSite(site_def) as site:
        crawler = yield run_crawl(ManyItemsSpider, _settings(adversaries, action),
                                  start_urls=site_def.urls(site, "shop.test"))
    exported = [ItemAdapter(item).asdict() for item in crawler.items]
    by_path: dict[str, list[dict]] = {}
    for item in exported:
        by_path.setdefault(item["path"], []).append(item)
    # every page's two items are exported together or not at all (same decision for both)
    assert all(sorted(i["part"] for i in items) == [1, 2] for items in by_path.values()), by_path
    tagged = {path for path, items in by_path.items() if all(i.get("dedup") for i in items)}
    untagged = {path for path, items in by_path.items() if not any(i.get("dedup") for i in items)}
    assert tagged | untagged == set(by_path)
    kept = untagged if action == "tag" else set(by_path)
    if action == "drop":
        assert not tagged
    # the truth: every always-unique page kept (but those the middleware filtered), exactly one per pair
    for path, (kind, _, _) in site_def.paths.items():
        if kind in ("exact", "near"):
            original = "/p/" + path.rsplit("/", 1)[1]
            assert (path in kept) != (original in kept), (path, original)
        elif not path.startswith("/p/"):
            assert (path in kept) == (path not in filtered), path
    assert not filtered & set(by_path)
    n_dup_pages = site_def.count("exact") + site_def.count("near")
    assert len(kept) == len(site_def.paths) - n_dup_pages - len(filtered)
    if action == "tag":
        assert len(tagged) == n_dup_pages
        for path in tagged:
            for item in by_path[path]:
                assert item["dedup"]["kind"] in ("exact", "near")
                assert urlsplit(item["dedup"]["kept_url"]).path != path
    stats = crawler.stats.get_stats()
    dropped = stats.get("item_dropped_count", 0)
    assert dropped == (2 * n_dup_pages if action == "drop" else 0)
