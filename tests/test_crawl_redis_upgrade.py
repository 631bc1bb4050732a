"""A Redis content index written by an earlier version (another key layout) is refused when the crawl opens.

Redis keys outlive a crawl, so an upgrade meets the index the previous version
wrote, its stored config naming that version's layout. It used to be refused only
when a page was judged: every page then failed, was kept unjudged (duplicates
included) and the crawl ran to its end. Now the crawl stops before fetching,
saying what is stored, what this version needs and what to do.
"""
from __future__ import annotations

import pytest
import scrapy
from pytest_twisted import inlineCallbacks

from scrapy_dedup.content.redis_index import RedisContentStore
from scrapy_dedup.settings import DedupConfigError
from tests.contentsite import ContentSite
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite

pytestmark = [pytest.mark.crawl, pytest.mark.redis]


class PageSpider(scrapy.Spider):
    name = "pages"

    def parse(self, response):
        yield {"url": response.url}


KEY = "dedup:pages:content"  # DEDUP_REDIS_INDEX_KEY's default for this spider
META = "{%s}:meta" % KEY  # where both stores keep their config
# the config as scrapy-dedup's layout 1 wrote it (default bits, bands and sketch size)
ONE_SLOT_LAYOUT_1 = "bits=64;bands=4;layout=1;sketch=256"
SHARDED_LAYOUT_1 = "bits=64;bands=4;layout=sharded1;sketch=256"


def refused(message: str, stored: str, wanted: str) -> None:
    assert f"DEDUP_REDIS_INDEX_KEY {KEY!r}" in message
    assert f"written with {stored}; this crawl needs {wanted}" in message
    assert "DEDUP_REDIS_FLUSH_ON_START" in message and ").clear()" in message  # the way to start over


@inlineCallbacks
def test_an_index_of_the_earlier_layout_stops_the_crawl_at_start(redis_url, redis_client):
    redis_client.hset(META, mapping={"config": ONE_SLOT_LAYOUT_1, "seq": 40})
    settings = {"ADDONS": {"scrapy_dedup.Addon": 0}, "DEDUP_CONTENT_BACKEND": "redis", "DEDUP_REDIS_URL": redis_url}
    site_def = ContentSite()
    with LocalSite(site_def) as site:
        with pytest.raises(DedupConfigError) as refusal:
            yield run_crawl(PageSpider, settings, start_urls=site_def.urls(site, "shop.test"))
        assert site.fetched() == []  # no page fetched, none judged
        refused(str(refusal.value), ONE_SLOT_LAYOUT_1, "bits=64;bands=4;layout=2;sketch=256")
        assert "layout 1" in str(refusal.value) and "layout 2" in str(refusal.value)
        assert redis_client.hget(META, "config").decode() == ONE_SLOT_LAYOUT_1  # the old index left as it was
        # the way out the message gives: delete the index's keys, then the crawl judges every page
        RedisContentStore.from_url(redis_url, KEY).clear()
        crawler = yield run_crawl(PageSpider, settings, start_urls=site_def.urls(site, "shop.test"))
    stats = crawler.stats.get_stats()
    assert "dedup/content/store_errors" not in stats
    assert stats["dedup/content/exact"] == site_def.count("exact")
    assert stats["dedup/content/near"] == site_def.count("near")


@inlineCallbacks
def test_an_index_of_other_settings_names_them(redis_url, redis_client):
    redis_client.hset(META, "config", "bits=64;bands=4;layout=2;sketch=128")
    settings = {"ADDONS": {"scrapy_dedup.Addon": 0}, "DEDUP_CONTENT_BACKEND": "redis", "DEDUP_REDIS_URL": redis_url}
    with pytest.raises(DedupConfigError, match="DEDUP_FINGERPRINT_BITS, DEDUP_BANDS and DEDUP_SKETCH_SIZE") as refusal:
        yield run_crawl(PageSpider, settings, start_urls=[])
    refused(str(refusal.value), "bits=64;bands=4;layout=2;sketch=128", "bits=64;bands=4;layout=2;sketch=256")
    # the same settings as the index's: accepted
    crawler = yield run_crawl(PageSpider, {**settings, "DEDUP_SKETCH_SIZE": 128}, start_urls=[])
    assert crawler.stats.get_value("finish_reason") == "finished"


@inlineCallbacks
def test_a_sharded_index_of_the_earlier_layout_stops_the_crawl_at_start(redis_cluster):  # noqa: F811
    import redis

    url = f"redis://127.0.0.1:{redis_cluster[0].port}/0"
    client = redis.cluster.RedisCluster.from_url(url)
    client.flushall()
    client.hset(META, "config", SHARDED_LAYOUT_1)
    settings = {"ADDONS": {"scrapy_dedup.Addon": 0}, "DEDUP_CONTENT_BACKEND": "redis", "DEDUP_REDIS_URL": url,
                "DEDUP_REDIS_PARAMS": {"redis_cls": "redis.cluster.RedisCluster"}}
    site_def = ContentSite()
    with LocalSite(site_def) as site:
        with pytest.raises(DedupConfigError) as refusal:
            yield run_crawl(PageSpider, settings, start_urls=site_def.urls(site, "shop.test"))
        assert site.fetched() == []
    refused(str(refusal.value), SHARDED_LAYOUT_1, "bits=64;bands=4;layout=sharded2;sketch=256")
    assert client.hget(META, "config").decode() == SHARDED_LAYOUT_1
    client.close()
