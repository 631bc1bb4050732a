"""AckPriorityQueue: popped requests stay in Redis until acknowledged; dead processes' requests come back."""
from __future__ import annotations

import os
import socket
import uuid

import pytest
import scrapy
from pytest_twisted import inlineCallbacks
from scrapy import Request, Spider, signals
from scrapy.utils.test import get_crawler

from scrapy_dedup.redis_queue import AckPriorityQueue
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite, Page
from tests.support.redis_server import RedisServer, free_port

KEY = "%(spider)s:requests"


def make_queue(redis_client, settings=None) -> AckPriorityQueue:
    crawler = get_crawler(Spider, settings or {})
    spider = Spider.from_crawler(crawler, name="q")
    return AckPriorityQueue(redis_client, spider, KEY)


def close(queue: AckPriorityQueue) -> None:
    queue._spider_closed(queue.spider, "finished")


def urls(queue: AckPriorityQueue, redis_client) -> list[str]:
    from scrapy_redis import picklecompat

    return sorted(picklecompat.loads(d)["url"] for d in redis_client.zrange(queue.key, 0, -1))


class RecordingQueue(AckPriorityQueue):
    """AckPriorityQueue writing every push, acknowledgement and scraped item, in order, to ``crawler.queue_log``."""

    def __init__(self, server, spider, key, serializer=None):
        super().__init__(server, spider, key, serializer)
        self.log = spider.crawler.queue_log = []
        spider.crawler.signals.connect(self._item_scraped, signal=signals.item_scraped)

    def _item_scraped(self, item, **kwargs):
        self.log.append(("item", item["url"]))

    def push(self, request):
        self.log.append(("push", request.url))
        super().push(request)

    def ack(self, request):
        if id(request) in self._pending:
            self.log.append(("ack", request.url))
        super().ack(request)


class AckSpider(scrapy.Spider):
    """Follows links, asks for a redirect, and meets two download errors, one with an errback that yields a request."""

    name = "ack"

    def __init__(self, site_url: str = "", dead_url: str = "", **kwargs):
        super().__init__(**kwargs)
        self.site_url, self.dead_url = site_url, dead_url

    async def start(self):  # Scrapy >= 2.13
        for request in self.start_requests():
            yield request

    def start_requests(self):
        yield Request(self.site_url + "/")

    def parse(self, response):
        yield {"url": response.url}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)
        if response.url.endswith("/list"):
            yield Request(self.dead_url + "/rescue", errback=self.rescue)
            yield Request(self.dead_url + "/gone")  # no errback: logged, nothing produced

    def rescue(self, failure):
        yield Request(self.site_url + "/rescued")


@pytest.mark.crawl
@pytest.mark.filterwarnings("ignore:Passing a 'spider' argument:scrapy.exceptions.ScrapyDeprecationWarning")  # scrapy-redis
@inlineCallbacks
def test_a_request_is_acknowledged_only_after_every_request_it_produced_was_pushed(redis_url, redis_client):
    """The acknowledgement comes after the outcome of the request was handled in full, whatever it was.

    A page's links, the target of a redirect, the request an errback yields, and
    the page's item must all be in the queue (or out of the pipelines) before
    the request leaves the in-flight set: a kill in between would lose them.
    """
    pages = {
        ("a.test", "/"): Page('<a href="/list">list</a> <a href="/old">old</a>'),
        ("a.test", "/list"): Page('<a href="/x">x</a> <a href="/y">y</a> <a href="/z">z</a>'),
        ("a.test", "/old"): Page("", status=302, headers={"Location": "/new"}),
        **{("a.test", path): Page(f"<p>{path}</p>") for path in ("/x", "/y", "/z", "/new", "/rescued")},
    }
    settings = {
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "SCHEDULER_PERSIST": True,
        "SCHEDULER_QUEUE_CLASS": "tests.test_redis_queue.RecordingQueue",
        "REDIS_URL": redis_url,
        "DUPEFILTER_CLASS": "scrapy_dedup.RedisDupeFilter",
        "DEDUP_REDIS_URL": redis_url,
        "LOG_LEVEL": "WARNING",
    }
    with LocalSite(pages) as site:
        base, dead = site.url("a.test").rstrip("/"), f"http://127.0.0.1:{free_port()}"  # nothing listens there
        crawler = yield run_crawl(AckSpider, settings, site_url=base, dead_url=dead)
    log = crawler.queue_log

    def when(event: str, url: str) -> int:
        assert (event, url) in log, (event, url, log)
        return log.index((event, url))

    produced = {  # request -> what its outcome must have put in the queue first
        "/": [base + "/list", base + "/old"],
        "/list": [base + p for p in ("/x", "/y", "/z")] + [dead + "/rescue", dead + "/gone"],
        "/old": [base + "/new"],  # RedirectMiddleware's request, scheduled by the engine
    }
    for parent, children in produced.items():
        for child in children:
            assert when("push", child) < when("ack", base + parent), (parent, child)
    assert when("push", base + "/rescued") < when("ack", dead + "/rescue")  # the errback's request
    for path in ("/", "/list", "/x", "/y", "/z", "/new", "/rescued"):  # the item left the pipelines first
        assert when("item", base + path) < when("ack", base + path), path
    acked = [url for event, url in log if event == "ack"]
    assert sorted(acked) == sorted(url for event, url in log if event == "push")  # each popped one, once
    assert dead + "/gone" in acked  # a download error without errback is acknowledged too
    # Nothing was put back at close (all acknowledged), nothing left in flight.
    assert redis_client.zcard("ack:requests") == 0
    assert list(redis_client.scan_iter(match="ack:requests:inflight:*")) == []


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


# --- marking seen and queueing in one step (the paired dupefilter) ---

DUPEFILTERS = ["scrapy_dedup.RedisDupeFilter", "scrapy_dedup.RedisBloomDupeFilter"]


def other_db(redis_url: str) -> str:
    """The same server, database 1: a dupefilter there cannot share a script with the queue (database 0)."""
    assert redis_url.endswith("/0")
    return redis_url[:-1] + "1"


class DupLinkSpider(scrapy.Spider):
    """Follows every link; the site links most pages several times, so the dupefilter filters a lot."""

    name = "duplinks"

    def __init__(self, site_url: str = "", **kwargs):
        super().__init__(**kwargs)
        self.site_url = site_url

    async def start(self):  # Scrapy >= 2.13
        for request in self.start_requests():
            yield request

    def start_requests(self):
        yield Request(self.site_url + "/")
        yield Request(self.site_url + "/", dont_filter=True)  # a dont_filter request: pushed as before

    def parse(self, response):
        yield {"url": response.url}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)


def dup_link_site() -> dict:
    pages = {("a.test", "/"): Page("".join(f'<a href="/p{i}">p{i}</a><a href="/p{i}?">again</a>' for i in range(8)))}
    for i in range(8):
        pages[("a.test", f"/p{i}")] = Page(f'<a href="/">home</a><a href="/p{(i + 1) % 8}">next</a>'
                                           f'<a href="/p{(i + 3) % 8}">other</a>')
    return pages


@pytest.mark.crawl
@pytest.mark.parametrize("dupefilter", DUPEFILTERS, ids=["exact", "bloom"])
@pytest.mark.filterwarnings("ignore:Passing a 'spider' argument:scrapy.exceptions.ScrapyDeprecationWarning")
@inlineCallbacks
def test_one_step_mark_and_push_keeps_the_dupefilter_stats_and_log_of_two_calls(redis_url, dupefilter, caplog):
    """The same crawl with the dupefilter on the queue's database (one script per new request) and on another
    database (the scheduler's two calls): the same answers, stats and log lines; only the way differs."""
    import logging

    import redis

    runs = {}
    with LocalSite(dup_link_site()) as site:
        base = site.url("a.test").rstrip("/")
        for mode, dedup_url in (("one step", redis_url), ("two calls", other_db(redis_url))):
            client = redis.Redis.from_url(redis_url)
            client.flushall()  # both databases
            client.close()
            caplog.clear()
            settings = {
                "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
                "SCHEDULER_PERSIST": True,
                "SCHEDULER_QUEUE_CLASS": "scrapy_dedup.redis_queue.AckPriorityQueue",
                "REDIS_URL": redis_url,
                "DUPEFILTER_CLASS": dupefilter,
                "DUPEFILTER_DEBUG": True,
                "DEDUP_REDIS_URL": dedup_url,
                "DEDUP_BLOOM_CAPACITY": 10_000,
                "LOG_LEVEL": "DEBUG",
            }
            with caplog.at_level(logging.DEBUG):
                hits_before = sum(site.hits.values())
                crawler = yield run_crawl(DupLinkSpider, settings, site_url=base)
            stats = crawler.stats.get_stats()
            runs[mode] = {
                "stats": {k: stats.get(k) for k in ("dupefilter/filtered", "dedup/seen/checked", "dedup/seen/new",
                                                    "scheduler/enqueued/redis", "scheduler/dequeued/redis",
                                                    "item_scraped_count", "finish_reason")},
                "filtered_lines": sorted(r.getMessage() for r in caplog.records
                                         if r.getMessage().startswith("Filtered duplicate request")),
                "fetches": sum(site.hits.values()) - hits_before,
                "one_step": stats.get("dedup/queue/marked_and_pushed"),
                "info": [r.getMessage() for r in caplog.records if "marked seen and queued in one step" in r.getMessage()],
                "warning": [r.getMessage() for r in caplog.records
                            if r.levelno == logging.WARNING and "two Redis calls" in r.getMessage()],
            }
    one, two = runs["one step"], runs["two calls"]
    print(f"\none step: {one['stats']} marked_and_pushed={one['one_step']}\ntwo calls: {two['stats']}")
    assert one["stats"] == two["stats"]
    assert one["filtered_lines"] == two["filtered_lines"] and len(one["filtered_lines"]) == one["stats"]["dupefilter/filtered"]
    assert one["stats"]["dupefilter/filtered"] > 10  # the site links its pages several times
    assert one["stats"]["dedup/seen/new"] == 9  # "/" and /p0../p7 ("/p0?" is "/p0")
    assert one["fetches"] == two["fetches"] == 10  # each page once, "/" once more (the dont_filter start request)
    # the paired run did each new request's mark and push in one script, and said so; the other warned
    assert one["one_step"] == one["stats"]["dedup/seen/new"] and two["one_step"] is None
    assert len(one["info"]) == 1 and one["warning"] == []
    assert len(two["warning"]) == 1 and "not on the same Redis server and database" in two["warning"][0]
    assert two["info"] == []


def paired(redis_url: str, dupefilter_path: str, queue_url: str | None = None, **settings):
    """A queue (on ``queue_url``, default ``redis_url``) and a dupefilter on ``redis_url``, as a scheduler has them."""
    import redis
    from scrapy.utils.misc import load_object

    crawler = get_crawler(Spider, {"DEDUP_REDIS_URL": redis_url, "DEDUP_BLOOM_CAPACITY": 10_000, **settings})
    spider = Spider.from_crawler(crawler, name="q")
    dupefilter = load_object(dupefilter_path).from_crawler(crawler)
    queue = AckPriorityQueue(redis.Redis.from_url(queue_url or redis_url), spider, KEY)
    return queue, dupefilter


@pytest.mark.parametrize("dupefilter_path", DUPEFILTERS, ids=["exact", "bloom"])
def test_one_step_push_is_one_script_and_the_seen_answer_comes_from_it(redis_url, redis_client, dupefilter_path):
    queue, dupefilter = paired(redis_url, dupefilter_path)
    try:
        assert queue.pair(dupefilter)
        first = Request("http://a.test/x")
        assert dupefilter.request_seen(first) is False
        assert len(queue) == 1  # queued by request_seen's script, before the scheduler's push
        queue.push(first)  # the scheduler's push of the same request: nothing more
        assert len(queue) == 1
        again = Request("http://a.test/x")
        dupefilter.store.cache.clear()  # a process that never saw it: Redis answers, nothing is queued
        assert dupefilter.request_seen(again) is True and len(queue) == 1
        assert dupefilter.request_seen(Request("http://a.test/x")) is True  # now from the local cache
        queue.push(Request("http://a.test/x", dont_filter=True))  # dont_filter: pushed as always
        assert len(queue) == 2
        assert (dupefilter.checked, dupefilter.new) == (3, 1)
        assert queue.stats.get_value("dedup/queue/marked_and_pushed") == 1
    finally:
        close(queue)
        dupefilter.close("finished")


def test_a_dupefilter_on_another_database_is_not_paired_and_the_warning_says_how_to_fix_it(redis_url, caplog):
    queue, dupefilter = paired(redis_url[:-1] + "1", "scrapy_dedup.RedisDupeFilter", queue_url=redis_url)
    try:
        assert not queue.pair(dupefilter)
        assert dupefilter.atomic_queue is None
        warning = [r.getMessage() for r in caplog.records if "two Redis calls" in r.getMessage()]
        assert len(warning) == 1 and "DEDUP_REDIS_URL" in warning[0] and "{hash tag}" in warning[0]
    finally:
        close(queue)
        dupefilter.close("finished")


def test_a_dupefilter_that_only_looks_pairable_is_not_paired_and_the_warning_names_it(redis_client, caplog):
    """Pairing is checked once against PairableDupeFilter: before, pair_queue and a store's script_kind on the
    same server were enough, and the first one-step push then failed with an AttributeError."""
    from types import SimpleNamespace

    class LooksPairable:
        def __init__(self):
            self.server, self.store, self.paired = redis_client, SimpleNamespace(script_kind="set", key="k"), None

        def pair_queue(self, queue):
            self.paired = queue

    queue = make_queue(redis_client)
    try:
        foreign = LooksPairable()
        assert not queue.pair(foreign)
        assert foreign.paired is None and queue.dupefilter is None
        warning = [r.getMessage() for r in caplog.records if "two Redis calls" in r.getMessage()]
        assert len(warning) == 1 and "LooksPairable" in warning[0]
    finally:
        close(queue)


@pytest.mark.redis
def test_requests_scheduled_while_redis_is_down_are_held_and_queued_when_it_is_back(redis_server, redis_url):
    """fail_open: the paired dupefilter's script cannot run; the request counts as new, is held (never lost),
    and is marked seen and queued in one step once Redis answers; a plain push failing is held too."""
    import time

    from scrapy_dedup.redis_queue import HELD_RETRY_SECONDS

    queue, dupefilter = paired(redis_url, "scrapy_dedup.RedisDupeFilter", DEDUP_REDIS_ON_ERROR="fail_open")
    try:
        assert queue.pair(dupefilter)
        assert dupefilter.request_seen(Request("http://a.test/before")) is False
        redis_server.stop()
        during = Request("http://a.test/during")
        assert dupefilter.request_seen(during) is False  # fail open: fetched, never lost
        queue.push(during)  # handed over already: held, not pushed twice
        queue.push(Request("http://a.test/plain", dont_filter=True))  # a plain push during the outage
        assert dupefilter.request_seen(Request("http://a.test/during")) is True  # held: seen here meanwhile
        assert queue.stats.get_value("dedup/queue/held") == 2
        assert queue.stats.get_value("dedup/redis/fail_open") == 1
        redis_server.start()  # empty: the restarted server kept nothing
        time.sleep(HELD_RETRY_SECONDS + 0.1)
        queue.push(Request("http://a.test/after", dont_filter=True))
        assert queue.stats.get_value("dedup/queue/held_queued") == 2
        assert sorted(urls(queue, queue.server)) == ["http://a.test/after", "http://a.test/during",
                                                     "http://a.test/plain"]
        fingerprint = dupefilter.fingerprinter.fingerprint(Request("http://a.test/during"))
        assert queue.server.sismember(dupefilter.key, fingerprint)  # marked with its push
        assert not queue.holds(fingerprint)
    finally:
        if redis_server.proc is None or redis_server.proc.poll() is not None:
            redis_server.start()
        close(queue)
        dupefilter.close("finished")


# --- liveness under PID reuse (a container restarted with the same hostname and PID) ---

def as_dead_process(queue: AckPriorityQueue, redis_client, worker: str) -> None:
    """Leave ``queue``'s records in Redis as the process ``worker`` would have left them when it was killed:
    its in-flight set, its entry in the workers set, and an ``alive`` key refreshed just before it died."""
    queue._heartbeat.stop()
    redis_client.rename(queue._inflight_key(queue.worker), queue._inflight_key(worker))
    redis_client.srem(queue.workers_key, queue.worker)
    redis_client.delete(queue._alive_key(queue.worker))
    redis_client.sadd(queue.workers_key, worker)
    redis_client.set(queue._alive_key(worker), 1, ex=30)


@pytest.mark.redis
@pytest.mark.parametrize("token", [uuid.uuid4().hex, None], ids=["another-token", "older-format-without-token"])
def test_a_record_with_our_host_and_pid_but_not_our_token_is_a_dead_process_reclaimed_at_start(redis_client, token):
    """``docker restart`` (and PID-1 images): the new process has the dead one's hostname and PID. The PID
    is then alive (it is ours), and the dead one's ``alive`` key has not expired: only the token tells."""
    dead = make_queue(redis_client)
    for i in range(4):
        dead.push(Request(f"http://a.test/{i}"))
    popped = [dead.pop(), dead.pop()]
    worker = f"{socket.gethostname()}:{os.getpid()}" + (f":{token}" if token else "")
    as_dead_process(dead, redis_client, worker)
    fresh = make_queue(redis_client)
    try:
        assert fresh.stats.get_value("dedup/queue/reclaimed") == 2  # at its start
        assert {r.url for r in popped} <= set(urls(fresh, redis_client)) and len(fresh) == 4
        assert not redis_client.exists(fresh._inflight_key(worker), fresh._alive_key(worker))
        assert not redis_client.sismember(fresh.workers_key, worker)
    finally:
        close(fresh)


@pytest.mark.redis
def test_another_open_queue_of_this_process_is_alive(redis_client):
    """Two queues in one process (two crawlers of a CrawlerProcess) share host and PID: neither takes the
    other for dead; once one has closed, a record it left behind (Redis down at its close) is a dead one's."""
    first = make_queue(redis_client)
    first.push(Request("http://a.test/1"))
    taken = first.pop()
    second = make_queue(redis_client)
    try:
        assert second.reclaim_dead() == 0
        assert redis_client.zcard(first._inflight_key(first.worker)) == 1
        assert taken is not None
    finally:
        close(second)
    first._heartbeat.stop()
    first._closed = True  # as if its close had not reached Redis: its records stay, the process goes on
    from scrapy_dedup import redis_queue

    redis_queue._LIVE_WORKERS.discard(first.worker)
    third = make_queue(redis_client)
    try:
        assert third.stats.get_value("dedup/queue/reclaimed") == 1
    finally:
        close(third)


# --- a server that lost the crawl's data ---

def error_lines(caplog) -> list[str]:
    import logging

    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("scrapy_dedup")]


@pytest.mark.redis
@pytest.mark.parametrize("noticed_by", ["pop", "heartbeat"])
def test_a_flushed_server_is_detected_once_and_the_unfinished_requests_are_queued_again(redis_client, caplog, noticed_by):
    queue = make_queue(redis_client)
    try:
        for i in range(3):
            queue.push(Request(f"http://a.test/{i}"))
        unfinished = queue.pop()
        redis_client.flushall()  # what a restart without persistence leaves
        if noticed_by == "pop":
            assert queue.pop() is None
        else:
            queue._beat()
        assert queue.stats.get_value("dedup/queue/data_lost") == 1
        errors = error_lines(caplog)
        assert len(errors) == 1 and "lost the queue's data" in errors[0] and "dedup_redis_data_lost" in errors[0]
        assert "FLUSHALL" in errors[0]  # the same server process: not a restart
        queue._beat()
        assert queue.pop() is None  # nothing more is taken out of the queue, and no second line
        assert len(error_lines(caplog)) == 1
    finally:
        close(queue)
    assert urls(queue, redis_client) == [unfinished.url]  # put back at close, for the next run


@pytest.mark.redis
def test_flushing_the_queue_on_start_and_other_processes_starting_are_no_data_loss(redis_client, caplog):
    """scrapy-redis's SCHEDULER_FLUSH_ON_START clears the queue key right after the queue starts; a second
    process of the crawl finds the marker the first wrote."""
    first = make_queue(redis_client)
    first.clear()
    second = make_queue(redis_client)
    try:
        assert second.marker == first.marker
        first.push(Request("http://a.test/1"))
        assert first.pop() is not None and second.pop() is None
        first._beat()
        second._beat()
        assert first.stats.get_value("dedup/queue/data_lost") is None
        assert second.stats.get_value("dedup/queue/data_lost") is None
        assert error_lines(caplog) == []
    finally:
        close(first)
        close(second)


@pytest.mark.redis
def test_a_server_restarted_without_persistence_is_detected_as_a_restart(redis_server, redis_url, caplog):
    import redis

    client = redis.Redis.from_url(redis_url)
    queue = make_queue(client)
    try:
        queue.push(Request("http://a.test/1"))
        redis_server.stop()
        redis_server.start()  # the fixture's server has no RDB nor AOF: it comes back empty
        assert queue.pop() is None
        errors = error_lines(caplog)
        assert len(errors) == 1 and "the server restarted without the crawl's keys" in errors[0]
        assert queue.stats.get_value("dedup/queue/data_lost") == 1
    finally:
        close(queue)


# --- giving up when Redis stays away ---

@pytest.mark.redis
@pytest.mark.parametrize("on_error", ["fail_open", "retry"])
def test_the_queue_gives_up_after_the_retry_budget_and_closes_without_a_traceback(redis_server, redis_url, caplog,
                                                                                  on_error):
    import time

    import redis

    queue = make_queue(redis.Redis.from_url(redis_url),
                       {"DEDUP_REDIS_ON_ERROR": on_error, "DEDUP_REDIS_RETRY_SECONDS": 0.3})
    try:
        for i in range(3):
            queue.push(Request(f"http://a.test/{i}"))
        assert queue.pop() is not None and len(queue) == 2
        redis_server.stop()
        assert queue.pop() is None and len(queue) == 2  # waiting: the last count
        assert error_lines(caplog) == []
        time.sleep(0.4)
        assert queue.pop() is None
        errors = error_lines(caplog)
        assert len(errors) == 1, errors
        assert "closing the spider with reason 'dedup_redis_unavailable'" in errors[0]
        assert "2 queued request(s)" in errors[0] and "1 in flight in this process" in errors[0]
        assert queue.stats.get_value("dedup/queue/gave_up") == 1
        close(queue)  # Redis still down: the unfinished request stays in its in-flight set (a WARNING)
        assert len(error_lines(caplog)) == 1
    finally:
        if redis_server.proc is None:
            redis_server.start()


@pytest.mark.redis
def test_an_empty_queue_checks_the_server_before_the_spider_may_close_as_finished(redis_client, caplog):
    """At the crawl's end the queue is empty and the engine is about to close the spider as "finished": a loss
    since the last heartbeat must be found first, and the queue must not look idle while it closes."""
    queue = make_queue(redis_client)
    try:
        queue.push(Request("http://a.test/1"))
        assert queue.pop() is not None
        redis_client.flushall()
        assert len(queue) >= 1  # not idle: the spider is being closed with dedup_redis_data_lost
        assert queue.stats.get_value("dedup/queue/data_lost") == 1
        assert len(error_lines(caplog)) == 1
    finally:
        close(queue)


@pytest.mark.redis
def test_a_server_rolled_back_to_its_last_snapshot_gets_the_in_flight_set_resynced(redis_server, caplog):
    """A restart that keeps the keys but not the last writes (an RDB snapshot here; appendfsync everysec or a
    lagging replica lose a shorter suffix). Before the snapshot ``/a`` and ``/b`` were queued and ``/a``
    popped; after it ``/b`` was popped, ``/a``'s page yielded ``/child`` (marked seen and queued in one step)
    and ``/a`` was acknowledged. The restarted server has ``/a`` in flight and ``/b`` queued, and knows no
    ``/child``. Before: ``/a`` stayed in the in-flight set until the close (its links lost for this run),
    ``/b`` was fetched twice, and the dupefilter's local cache filtered ``/child`` as seen."""
    import logging

    server = RedisServer().start()  # of its own: its snapshot file must not reach other tests
    queue, dupefilter = paired(server.url, "scrapy_dedup.RedisDupeFilter")
    client = server.client()
    try:
        assert queue.pair(dupefilter)
        for path in ("/a", "/b"):
            request = Request(f"http://a.test{path}")
            assert not dupefilter.request_seen(request)
            queue.push(request)
        a = queue.pop()
        client.save()  # the state the server will come back with
        b = queue.pop()
        child = Request("http://a.test/child")
        assert not dupefilter.request_seen(child)
        queue.push(child)
        queue.ack(a)
        server.proc.kill()  # a crash: back from the snapshot
        server.proc.wait()
        server.start()
        assert sorted(urls(queue, client)) == ["http://a.test/b"]  # the rolled-back state
        client.srem(queue.workers_key, queue.worker)  # as if this process had started after the snapshot
        with caplog.at_level(logging.WARNING):
            queue._beat()
        assert sorted(urls(queue, client)) == ["http://a.test/a"]  # /a again; /b is in flight here, not queued
        in_flight = client.zrange(queue._inflight_key(queue.worker), 0, -1)
        assert [queue._decode_request(d).url for d in in_flight] == [b.url]
        assert queue.stats.get_value("dedup/queue/server_restarts") == 1
        assert client.sismember(queue.workers_key, queue.worker)  # registered again: reclaimed if it dies
        assert queue.stats.get_value("dedup/queue/resynced") == 1
        assert queue.stats.get_value("dedup/queue/data_lost") is None
        assert dupefilter.request_seen(Request("http://a.test/child")) is False  # asked Redis, new there
        assert [r for r in caplog.records if "restarted and kept the crawl's keys" in r.getMessage()]
        assert error_lines(caplog) == []
    finally:
        close(queue)
        dupefilter.close("finished")
        client.close()
        server.stop()


@pytest.mark.redis
def test_an_acknowledgement_redis_did_not_take_is_sent_when_it_answers_again(redis_server):
    """An ack during an outage fails; once Redis (with AOF: it keeps its keys) answers, it is sent. Before:
    the finished request stayed in the in-flight set, and the close put it back into the queue, so the next
    run fetched it again."""
    server = RedisServer(extra_args=("--appendonly", "yes", "--appendfsync", "always")).start()
    queue = make_queue(server.client())
    try:
        queue.push(Request("http://a.test/done"))
        done = queue.pop()
        server.stop()
        import redis

        with pytest.raises(redis.exceptions.ConnectionError):
            queue.ack(done)
        server.start()
        assert queue.pop() is None  # Redis answers: the acknowledgement goes through first
        assert server.client().zcard(queue._inflight_key(queue.worker)) == 0
        close(queue)
        assert urls(queue, server.client()) == []  # nothing put back for the next run
    finally:
        server.stop()


def test_without_scrapy_redis_the_queue_module_names_the_extra_to_install(monkeypatch):
    """scrapy-redis is the queue extra, not a dependency: before, a bare ModuleNotFoundError for scrapy_redis."""
    import importlib
    import sys

    monkeypatch.setitem(sys.modules, "scrapy_redis", None)  # what import finds when it is not installed
    monkeypatch.delitem(sys.modules, "scrapy_dedup.redis_queue")
    with pytest.raises(ImportError, match=r"needs scrapy-redis.*pip install scrapy-dedup\[queue\]"):
        importlib.import_module("scrapy_dedup.redis_queue")
