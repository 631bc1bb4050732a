"""Boilerplate learning shared through Redis: processes on one real redis-server learn one template per host."""
from __future__ import annotations

import multiprocessing

import numpy as np
import pytest
import scrapy
from pytest_twisted import inlineCallbacks

from scrapy_dedup.content.boilerplate import BlockTable, BoilerplateRule

pytestmark = pytest.mark.redis

KEY = "test:boiler:content"
HOST = "docs.test"


def _judge(redis_url: str, key: str = KEY):
    from scrapy_dedup.content.boilerplate import BoilerplateJudge, BoilerplateLearner
    from scrapy_dedup.content.engine import ContentDeduplicator, ContentFingerprinter
    from scrapy_dedup.content.redis_boilerplate import RedisBlockTable, shared_salt, table_prefix
    from scrapy_dedup.content.redis_index import RedisContentStore

    store = RedisContentStore.from_url(redis_url, key)
    client, rule = store.index.client, BoilerplateRule()
    learner = BoilerplateLearner(rule, lambda host: RedisBlockTable(client, table_prefix(key, host), rule),
                                 hash_key=lambda: shared_salt(client, key))
    return BoilerplateJudge(ContentDeduplicator(ContentFingerprinter(), store), learner)


def _second_process(redis_url: str, paths: list[str], out) -> None:
    """Another process (spawned: its own Python hash seed) judges ``paths`` of the templated site."""
    from scrapy_dedup.content.text import page_blocks
    from tests.templatedsite import TemplatedSite

    site, judge = TemplatedSite(), _judge(redis_url)
    kinds = [judge.check(f"http://{HOST}{p}", page_blocks(site.html(p))).verdict.kind for p in paths]
    table = judge.learner.table(HOST)
    table.refresh()
    out.put((kinds, table.pages, sorted(int(h) for h in table.boilerplate)))


def test_two_processes_share_the_block_counts_and_agree(redis_url):
    """One process counts the site's first pages; another, started after, learnt nothing itself but judges
    the re-fetches (another per-fetch line each) as duplicates: the template it uses came from Redis."""
    from scrapy_dedup.content.text import page_blocks
    from tests.templatedsite import TemplatedSite

    site, judge = TemplatedSite(), _judge(redis_url)
    first = [judge.check(f"http://{HOST}{p}", page_blocks(site.html(p))).verdict.kind for p in site.first_paths()]
    assert first == ["unique"] * len(site.first_paths())
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_second_process, args=(redis_url, site.refetch_paths(), out))
    proc.start()
    kinds, pages, boilerplate = out.get(timeout=120)
    proc.join(30)
    # near, not exact: a re-fetch's whole text differs from its page's by the per-fetch line (only an exact
    # copy of the whole text is exact); its text less the template is its page's
    assert kinds == ["near"] * len(site.refetch_paths())
    mine = judge.learner.table(HOST)
    mine.refresh()
    assert pages == mine.pages == len(site.first_paths())  # duplicates are not counted
    assert boilerplate == sorted(int(h) for h in mine.boilerplate) and len(boilerplate) >= 3


def test_redis_table_counts_as_the_local_table_and_stays_capped(redis_client):
    from scrapy_dedup.content.redis_boilerplate import RedisBlockTable

    rule = BoilerplateRule(min_pages=3, capacity=64)
    shared, local = RedisBlockTable(redis_client, "t:{h}", rule), BlockTable(rule.capacity, rule.min_pages)
    rng = np.random.default_rng(1)
    for page in range(60):
        hashes = np.concatenate([np.array([1 << 63 | 7, 1 << 63 | 8], dtype=np.uint64),
                                 (rng.integers(1, 1 << 62, 20, dtype=np.uint64) | np.uint64(1 << 63))])
        grown_shared, grown_local = shared.add_page(hashes), local.add_page(hashes)
        if page == 2:
            assert sorted(grown_shared.tolist()) == sorted(grown_local.tolist()) == [1 << 63 | 7, 1 << 63 | 8]
    assert len(shared) <= 64 and shared.pages == 60
    probe = np.array([1 << 63 | 7, 1 << 63 | 8], dtype=np.uint64)
    assert shared.counts(probe).tolist() == [60, 60]  # a block on every page outranks the one-page blocks
    shared.refresh()
    assert shared.is_boilerplate(probe).all()


class PagesSpider(scrapy.Spider):
    name = "redisboiler"

    def parse(self, response):
        yield {"url": response.url}


@inlineCallbacks
def test_two_crawls_on_one_redis_agree(redis_url):
    """Two crawler processes of one spider (run one after the other here): the second fetches only the
    re-fetches, learns nothing of its own, and drops them all on the template the first one learnt."""
    from tests.support.crawl import run_crawl
    from tests.support.localsite import LocalSite
    from tests.templatedsite import TemplatedSite

    settings = {"ADDONS": {"scrapy_dedup.Addon": 0}, "DEDUP_CONTENT_BACKEND": "redis", "DEDUP_REDIS_URL": redis_url,
                "CONCURRENT_REQUESTS": 1, "DEDUP_BOILERPLATE": True}
    site_def = TemplatedSite()
    with LocalSite(site_def) as site:
        first = yield run_crawl(PagesSpider, settings, start_urls=[site.url(HOST, p) for p in site_def.first_paths()])
        second = yield run_crawl(PagesSpider, settings,
                                 start_urls=[site.url(HOST, p) for p in site_def.refetch_paths()])
    assert len(first.items) == len(site_def.first_paths())
    assert second.items == []
    stats = second.stats.get_stats()
    assert stats["dedup/content/exact"] + stats.get("dedup/content/near", 0) == len(site_def.refetch_paths())
    assert stats[f"dedup/content/boilerplate/blocks/{HOST}"] >= 3
