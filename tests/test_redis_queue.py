"""AckPriorityQueue: popped requests stay in Redis until acknowledged; dead processes' requests come back."""
from __future__ import annotations

import socket

import pytest
from scrapy import Request, Spider
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from scrapy_dedup.redis_queue import AckPriorityQueue

ACK = {"SPIDER_MIDDLEWARES": {"scrapy_dedup.redis_queue.AckMiddleware": 0}}
KEY = "%(spider)s:requests"


def make_queue(redis_client, settings=ACK) -> AckPriorityQueue:
    crawler = get_crawler(Spider, settings)
    spider = Spider.from_crawler(crawler, name="q")
    return AckPriorityQueue(redis_client, spider, KEY)


def close(queue: AckPriorityQueue) -> None:
    queue._spider_closed(queue.spider, "finished")


def urls(queue: AckPriorityQueue, redis_client) -> list[str]:
    from scrapy_redis import picklecompat

    return sorted(picklecompat.loads(d)["url"] for d in redis_client.zrange(queue.key, 0, -1))


def test_without_its_middleware_it_refuses_to_start_naming_the_setting(redis_client):
    with pytest.raises(NotConfigured, match="SPIDER_MIDDLEWARES.*AckMiddleware"):
        make_queue(redis_client, {})


def test_pop_keeps_the_request_in_flight_until_ack(redis_client):
    queue = make_queue(redis_client)
    try:
        for i in range(3):
            queue.push(Request(f"http://a.test/{i}", priority=-i))
        first = queue.pop()
        assert first.url == "http://a.test/0"  # priority order as scrapy-redis's PriorityQueue
        assert len(queue) == 2 and redis_client.zcard(queue._inflight_key(queue.worker)) == 1
        queue.ack(first)
        assert redis_client.zcard(queue._inflight_key(queue.worker)) == 0
    finally:
        close(queue)


def test_graceful_close_puts_unacknowledged_requests_back(redis_client):
    queue = make_queue(redis_client)
    for i in range(3):
        queue.push(Request(f"http://a.test/{i}"))
    done, unfinished = queue.pop(), queue.pop()
    queue.ack(done)
    close(queue)
    assert urls(queue, redis_client) == sorted({"http://a.test/0", "http://a.test/1", "http://a.test/2"}
                                               - {done.url})
    assert unfinished.url in urls(queue, redis_client)
    assert not redis_client.exists(queue.workers_key)


def test_a_dead_process_requests_are_put_back_once(redis_client):
    dead = make_queue(redis_client)
    for i in range(4):
        dead.push(Request(f"http://a.test/{i}"))
    popped = [dead.pop(), dead.pop()]
    # Make it look like a process that died on this host: no such PID, heartbeat stopped.
    dead._heartbeat.stop()
    dead_id = f"{socket.gethostname()}:999999999:deadbeef"
    redis_client.rename(dead._inflight_key(dead.worker), dead._inflight_key(dead_id))
    redis_client.srem(dead.workers_key, dead.worker)
    redis_client.sadd(dead.workers_key, dead_id)
    redis_client.set(dead._alive_key(dead_id), 1, ex=30)  # alive key not expired yet: the PID decides
    first, second = make_queue(redis_client), make_queue(redis_client)
    try:
        assert len(first) == 4  # both came back when the first one started
        assert second.reclaim_dead() == 0  # and only once
        assert {r.url for r in popped} <= set(urls(first, redis_client))
        assert first.stats.get_value("dedup/queue/reclaimed") == 2
    finally:
        close(first)
        close(second)


def test_a_live_process_on_another_host_is_left_alone_until_its_heartbeat_expires(redis_client):
    queue = make_queue(redis_client)
    try:
        other = "elsewhere:1:cafe"
        inflight = queue._inflight_key(other)
        redis_client.zadd(inflight, {b"opaque request": 0})
        redis_client.sadd(queue.workers_key, other)
        redis_client.set(queue._alive_key(other), 1, ex=30)
        assert queue.reclaim_dead() == 0 and redis_client.zcard(inflight) == 1
        redis_client.delete(queue._alive_key(other))  # expired
        assert queue.reclaim_dead() == 1 and redis_client.zcard(inflight) == 0
    finally:
        close(queue)
