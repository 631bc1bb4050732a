"""DEDUP_REDIS_FLUSH_ON_START starts a fresh crawl: it deletes the Redis content state too (the content index,
its boilerplate tables, the paragraph seen set), on one real redis-server and on a real three-node Redis Cluster,
and nothing else."""
from __future__ import annotations


import pytest
import redis
from pytest_twisted import inlineCallbacks

from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite
from tests.support.redis_server import free_port
from tests.test_crawl_paragraphs import ADDON, FIELD, PAGES, SITE, PagesSpider, expected_fields, host_path

PREFIX = "dedup:paragraphs:content"  # DEDUP_REDIS_INDEX_KEY for PagesSpider
#: keys of others that a flush must leave alone (one starts with the index key's text)
OTHERS = ("dedup:paragraphs:contentious", "other:key")


def settings_for(url: str, cluster: bool) -> dict:
    settings = {**ADDON, "DEDUP_CONTENT_BACKEND": "redis", "DEDUP_REDIS_URL": url, "DEDUP_PARAGRAPHS": True,
                "DEDUP_PARAGRAPHS_FIELD": FIELD, "DEDUP_PARAGRAPHS_CAPACITY": 10_000, "DEDUP_BOILERPLATE": True,
                "DUPEFILTER_CLASS": "scrapy_dedup.RedisDupeFilter", "CONCURRENT_REQUESTS": 1,
                "DEDUP_CONTENT_ACTION": "log"}
    if cluster:
        settings["DEDUP_REDIS_PARAMS"] = {"redis_cls": "redis.cluster.RedisCluster"}
    return settings


def keys_of(nodes: list[redis.Redis]) -> list[set[str]]:
    return [{k.decode() for k in node.keys("*")} for node in nodes]


@inlineCallbacks
def _flush_deletes_the_content_state(url: str, nodes: list[redis.Redis], cluster: bool):
    client = redis.cluster.RedisCluster.from_url(url) if cluster else redis.Redis.from_url(url)
    for key in OTHERS:
        client.set(key, b"kept")
    settings = settings_for(url, cluster)
    with LocalSite(SITE) as site:
        urls = [site.url(h, p) for h, p in PAGES]
        yield run_crawl(PagesSpider, settings, start_urls=urls)
        written = set().union(*keys_of(nodes)) - set(OTHERS)
        # the state the flush must delete, as the crawl wrote it
        assert any(":boilerplate:" in k for k in written), written
        assert any(k.startswith(f"{{{PREFIX}:paragraphs:") for k in written), written  # the filter's shards
        assert f"{{{PREFIX}}}:meta" in written, written
        if cluster:
            assert sum(bool(node_keys - set(OTHERS)) for node_keys in keys_of(nodes)) > 1  # spread over nodes
        fresh = yield run_crawl(PagesSpider, {**settings, "DEDUP_REDIS_FLUSH_ON_START": True}, start_urls=urls)
    # every page judged as in a first crawl: each item kept, its blocks new unless an earlier page of this crawl
    # had them (without the flush, every block is the first crawl's: duplicate_share 1.0 for a.test)
    order = [host_path(item["url"]) for item in fresh.items]
    assert sorted(order) == sorted(PAGES)
    assert {host_path(i["url"]): i[FIELD] for i in fresh.items} == expected_fields(order)
    stats = fresh.stats.get_stats()
    # no page a duplicate of the first crawl's (pages that are near duplicates of each other aside)
    assert stats.get("dedup/content/exact", 0) == 0, stats
    assert "dedup/paragraphs/store_errors" not in stats
    # the keys of the first crawl's state are gone (rewritten ones aside): the paragraph filter has the second
    # crawl's blocks only, checked by the field above; the others' keys stay
    assert all(client.get(key) == b"kept" for key in OTHERS)
    client.close()


@pytest.mark.crawl
@inlineCallbacks
def test_flush_on_start_deletes_the_content_index_boilerplate_and_paragraphs(redis_url, redis_server):
    yield _flush_deletes_the_content_state(redis_url, [redis_server.client()], cluster=False)


@pytest.mark.redis
@pytest.mark.crawl
@inlineCallbacks
def test_flush_on_start_deletes_the_content_state_on_every_cluster_node(redis_cluster):
    for node in redis_cluster:
        node.client().flushall()
    url = f"redis://127.0.0.1:{redis_cluster[0].port}/0"
    yield _flush_deletes_the_content_state(url, [node.client() for node in redis_cluster], cluster=True)


def test_flush_on_start_leaves_nothing_of_the_content_state(redis_url, redis_client):
    """Opened with the flush, the content state holds nothing of before, and the others' keys are left alone."""
    from scrapy.utils.test import get_crawler

    from scrapy_dedup.extensions import DedupExtension

    settings = settings_for(redis_url, cluster=False)
    block = b"a block digest of twenty bytes"
    first = DedupExtension(get_crawler(PagesSpider, settings)).open_content()
    first.paragraphs.seen.add(block)
    first.close()
    table = f"{{{PREFIX}}}:boilerplate:a.test:counts"
    redis_client.hset(table, "1", 5)  # a host's table, as the learner writes it
    redis_client.hset(f"{{{PREFIX}}}:keys", "1", "http://a.test/1")  # a kept page
    for key in OTHERS:
        redis_client.set(key, b"kept")
    fresh = DedupExtension(get_crawler(PagesSpider, {**settings, "DEDUP_REDIS_FLUSH_ON_START": True})).open_content()
    assert block not in fresh.paragraphs.seen
    assert len(fresh.store) == 0
    fresh.close()
    assert not redis_client.exists(table, f"{{{PREFIX}}}:keys")
    assert all(redis_client.get(key) == b"kept" for key in OTHERS)


def test_flush_on_start_with_redis_away_refuses_to_start_naming_the_setting():
    """The state cannot be deleted: judged against the previous crawl's index, pages would be dropped. (Redis
    unreachable at start fails the start anyway: the flush's own refusal is for a Redis that went away since.)"""
    from scrapy.utils.test import get_crawler

    from scrapy_dedup.dupefilters import RedisStartupError
    from scrapy_dedup.extensions import DedupExtension

    settings = {**settings_for(f"redis://:s3cret@127.0.0.1:{free_port()}/0", cluster=False),
                "DEDUP_REDIS_FLUSH_ON_START": True, "DEDUP_REDIS_STARTUP_SECONDS": 0.5}
    with pytest.raises(RedisStartupError, match="cannot reach Redis.*DEDUP_REDIS_URL") as raised:
        DedupExtension(get_crawler(PagesSpider, settings)).open_content()
    assert "s3cret" not in str(raised.value)


def test_persist_false_deletes_the_content_state_at_close(redis_url, redis_client):
    """DEDUP_REDIS_PERSIST=False deletes the content state with the crawl, as it deletes the dupefilter's keys."""
    from scrapy.utils.test import get_crawler

    from scrapy_dedup.extensions import DedupExtension

    settings = {**settings_for(redis_url, cluster=False), "DEDUP_REDIS_PERSIST": False}
    for key in OTHERS:
        redis_client.set(key, b"kept")
    extension = DedupExtension(get_crawler(PagesSpider, settings)).open_content()
    extension.paragraphs.seen.add(b"a block digest of twenty bytes")
    redis_client.hset(f"{{{PREFIX}}}:keys", "1", "http://a.test/1")  # a kept page
    assert any(PREFIX in k.decode() for k in redis_client.keys("*"))
    extension.close()
    assert not [k for k in redis_client.keys("*") if PREFIX in k.decode() and k.decode() not in OTHERS]
    assert all(redis_client.get(key) == b"kept" for key in OTHERS)


def test_persist_false_with_redis_gone_at_close_warns_and_keeps_the_keys(redis_server, caplog):
    """Redis gone by the close: one WARNING, the policy's error counter, no exception out of the close."""
    from scrapy.utils.test import get_crawler

    from scrapy_dedup.extensions import DedupExtension
    from tests.support.redis_server import RedisServer

    server = RedisServer().start()
    try:
        settings = {**settings_for(server.url, cluster=False), "DEDUP_REDIS_PERSIST": False}
        extension = DedupExtension(get_crawler(PagesSpider, settings)).open_content()
    finally:
        server.stop()
    extension.close()
    assert "could not delete it at close (DEDUP_REDIS_PERSIST=False)" in caplog.text
    assert extension.crawler.stats.get_value("dedup/content/redis_errors", 0) >= 1
