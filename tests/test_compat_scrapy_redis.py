"""scrapy-redis 0.9.1's tests, re-expressed with our dupefilters and queue substituted.

Follows rmax/scrapy-redis v0.9.1: ``tests/test_dupefilter.py``, ``tests/test_queue.py``,
``tests/test_connection.py`` and the ``DupeFilterTest``, ``PriorityQueueTest``,
``SchedulerTest`` and ``ConnectionTest`` classes of ``tests/test_scrapy_redis.py``
(0.9.1 has no ``tests/test_scheduler.py``: its scheduler tests live there). Same
expectations, our code: scrapy-redis's real ``Scheduler`` builds our dupefilter
(``DUPEFILTER_CLASS``) and our ``AckPriorityQueue`` (``SCHEDULER_QUEUE_CLASS``), against
the session's real redis-server, never a mock. Left out: the FIFO and LIFO queue tests
(``AckPriorityQueue`` is a priority queue only), ``get_redis``/``from_settings`` of
scrapy-redis's own connection module, and ``tests/test_spiders.py`` (scrapy-redis's spider
itself, mocked; a real ``RedisSpider`` crawl with ours checks that they work together).

Where our documented behaviour differs, the test says which upstream expectation it
replaces and why.
"""
from __future__ import annotations

import json
import logging
from collections import Counter

import pytest
import redis
from pytest_twisted import inlineCallbacks
from scrapy import Request, Spider, signals
from scrapy.utils.test import get_crawler
from scrapy_redis import picklecompat
from scrapy_redis.scheduler import Scheduler
from scrapy_redis.spiders import RedisSpider

from scrapy_dedup.dupefilters import BloomDupeFilter, RedisBloomDupeFilter, RedisDupeFilter
from scrapy_dedup.redis_queue import AckPriorityQueue
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite
from tests.test_crawl_dupefilters import PAGES, LinkSpider, link_graph

# scrapy-redis 0.9.1 itself passes the deprecated spider= argument to stats; not ours to fix
# (and calls Spider.log(), deprecated in Scrapy 2.19)
pytestmark = [
    pytest.mark.filterwarnings("ignore:Passing a 'spider' argument:scrapy.exceptions.ScrapyDeprecationWarning"),
    pytest.mark.filterwarnings(r"ignore:Spider\.log\(\) is deprecated:scrapy.exceptions.ScrapyDeprecationWarning"),
]

LOGGER = "scrapy_dedup.dupefilters"
CLASSES = {"bloom": BloomDupeFilter, "redis": RedisDupeFilter, "redis_bloom": RedisBloomDupeFilter}
QUEUE_KEY = "compat:%(spider)s:requests"


class MySpider(Spider):
    name = "myspider"

    def parse(self, response):
        pass


@pytest.fixture(params=list(CLASSES))
def kind(request) -> str:
    return request.param


@pytest.fixture
def settings(kind, redis_url) -> dict:
    """A scrapy-redis project's settings with one of our dupefilters and our queue; the Redis ones use the
    scrapy-redis server (``REDIS_URL``), as a project that switches only these two settings does."""
    return {"REDIS_URL": redis_url, "DUPEFILTER_CLASS": CLASSES[kind], "DEDUP_BLOOM_CAPACITY": 10_000,
            "SCHEDULER_QUEUE_CLASS": AckPriorityQueue, "SCHEDULER_QUEUE_KEY": QUEUE_KEY}


def open_spider(settings: dict) -> Spider:
    crawler = get_crawler(MySpider, settings_dict=settings)
    spider = MySpider.from_crawler(crawler)
    crawler.spider = spider
    return spider


def close_spider(spider: Spider) -> None:
    """What the engine does after ``Scheduler.close``: our dupefilter and queue finish on ``spider_closed``."""
    spider.crawler.signals.send_catch_log(signals.spider_closed, spider=spider, reason="finished")


def our_keys(client) -> set[str]:
    """Every key our queue and dupefilter hold, bar the queue's per-crawl marker (not a request)."""
    return {k.decode() for k in client.keys("*")} - {QUEUE_KEY % {"spider": MySpider.name} + ":marker"}


# --- tests/test_dupefilter.py, DupeFilterTest ---------------------------------------------------

def test_request_seen(settings):
    spider = open_spider(settings)
    df = settings["DUPEFILTER_CLASS"].from_spider(spider)  # as scrapy-redis's Scheduler.open builds it
    req = Request("http://example.com")
    assert not df.request_seen(req)
    assert df.request_seen(req)
    assert not df.request_seen(Request("http://example.com", method="POST"))
    assert df.request_seen(req)
    assert not df.request_seen(Request("http://example2.com"))
    df.close("nothing")


def test_the_crawlers_fingerprinter_is_asked_for_each_request(settings):
    """Replaces ``test_overridable_request_fingerprinter`` (``df.request_fingerprint`` is called with
    the request): ours fingerprint with ``crawler.request_fingerprinter``, so the hook is
    ``REQUEST_FINGERPRINTER_CLASS``; a subclass overriding ``request_fingerprint`` is refused at
    start-up (tests/test_compat_scrapy_dupefilters.py)."""
    asked = []

    class RecordingFingerprinter:
        def fingerprint(self, request):
            asked.append(request)
            return request.url.encode().ljust(20, b"\0")[:20]

    spider = open_spider({**settings, "REQUEST_FINGERPRINTER_CLASS": RecordingFingerprinter})
    df = settings["DUPEFILTER_CLASS"].from_spider(spider)
    req = Request("http://example.com")
    assert not df.request_seen(req)
    assert asked == [req]
    df.close("finished")


@pytest.mark.parametrize("kind", ["redis", "redis_bloom"])
def test_clear_deletes_the_keys(settings, redis_client):
    """``test_clear_deletes`` expects ``DEL <key>``: here every Redis key the filter wrote is gone."""
    df = settings["DUPEFILTER_CLASS"].from_spider(open_spider(settings))
    df.request_seen(Request("http://example.com"))
    assert redis_client.exists(*df.store.data_keys())
    df.clear()
    assert not our_keys(redis_client)
    df.close("finished")


@pytest.mark.parametrize("kind", ["redis", "redis_bloom"])
@pytest.mark.parametrize("persist", [True, False])
def test_close_keeps_the_key_unless_told_not_to(settings, persist, redis_client):
    """Replaces ``test_close_calls_clear`` (scrapy-redis's filter deletes its key at every ``close()``).
    Ours keep it by default (``DEDUP_REDIS_PERSIST``), so a crawl under Scrapy's own scheduler, which
    closes its dupefilter, can be resumed; with scrapy-redis's scheduler, ``SCHEDULER_PERSIST = False``
    still flushes it through ``clear()`` (test_scheduler_flushes_at_close_unless_persist)."""
    df = settings["DUPEFILTER_CLASS"].from_spider(open_spider({**settings, "DEDUP_REDIS_PERSIST": persist}))
    df.request_seen(Request("http://example.com"))
    keys = df.store.data_keys()
    df.close("finished")
    df.close("foo")  # twice: harmless
    assert redis_client.exists(*keys) == (len(keys) if persist else 0)


@pytest.mark.parametrize("debug, lines", [(False, 1), (True, 5)])
def test_log_dupes(settings, debug, lines, caplog):
    spider = open_spider({**settings, "DUPEFILTER_DEBUG": debug})
    df = settings["DUPEFILTER_CLASS"].from_spider(spider)
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        for _ in range(5):
            df.log(Request("http://example"), spider)
    assert len([r for r in caplog.records if r.name == LOGGER and r.levelname == "DEBUG"]) == lines
    assert spider.crawler.stats.get_value("dupefilter/filtered") == 5
    df.close("finished")


# --- tests/test_dupefilter.py TestFromMethods, tests/test_connection.py, ConnectionTest -----------

class OwnClient(redis.Redis):
    """A client class a project names in REDIS_PARAMS["redis_cls"]."""


@pytest.fixture
def unchecked(monkeypatch):
    """``from_crawler`` without its start-up check of Redis (which fails the start when Redis does not answer):
    the tests below name servers that do not exist, to see which one the filter would use."""
    from scrapy_dedup.dupefilters import _RedisDupeFilter

    monkeypatch.setattr(_RedisDupeFilter, "_require_reachable", lambda self: None)


@pytest.mark.parametrize("cls", [RedisDupeFilter, RedisBloomDupeFilter])
@pytest.mark.parametrize("given, host, port, db, password", [
    ({"REDIS_URL": "redis://foo:bar@localhost:9001/42"}, "localhost", 9001, 42, "bar"),
    ({"REDIS_HOST": "localhost", "REDIS_PORT": 9001}, "localhost", 9001, 0, None),
    ({"REDIS_HOST": "baz", "REDIS_PORT": 1337, "REDIS_URL": "redis://foo:bar@localhost:9001/42"},
     "localhost", 9001, 42, "bar"),  # REDIS_URL takes precedence over REDIS_HOST/REDIS_PORT
    ({"REDIS_HOST": "baz", "REDIS_PORT": 1337, "REDIS_URL": None}, "baz", 1337, 0, None),
    ({}, "localhost", 6379, 0, None),
    # ours only: DEDUP_REDIS_URL wins over scrapy-redis's settings
    ({"DEDUP_REDIS_URL": "redis://127.0.0.1:7000/3", "REDIS_URL": "redis://localhost:9001/42"},
     "127.0.0.1", 7000, 3, None),
])
def test_from_crawler_reads_scrapy_redis_connection_settings(cls, given, host, port, db, password, unchecked):
    """``from_crawler`` takes its server from the settings and
    ``DUPEFILTER_DEBUG``; the key is ours (``DEDUP_REDIS_KEY``, ``dedup:<spider>:seen``) where
    scrapy-redis's starts with ``dupefilter:`` (below)."""
    crawler = get_crawler(MySpider, settings_dict={**given, "DUPEFILTER_DEBUG": True, "DEDUP_BLOOM_CAPACITY": 10_000})
    df = cls.from_crawler(crawler)
    kwargs = df.server.connection_pool.connection_kwargs
    assert (kwargs["host"], kwargs["port"], kwargs["db"], kwargs.get("password")) == (host, port, db, password)
    assert df.debug
    assert df.key == "dedup:myspider:seen"


@pytest.mark.parametrize("cls", [RedisDupeFilter, RedisBloomDupeFilter])
@pytest.mark.parametrize("redis_cls", [OwnClient, f"{__name__}.OwnClient"])
def test_redis_params_choose_the_client_class(cls, redis_cls, unchecked):
    crawler = get_crawler(MySpider, settings_dict={"REDIS_PARAMS": {"redis_cls": redis_cls},
                                                   "DEDUP_BLOOM_CAPACITY": 10_000})
    assert isinstance(cls.from_crawler(crawler).server, OwnClient)


@pytest.mark.parametrize("cls", [RedisDupeFilter, RedisBloomDupeFilter])
@pytest.mark.parametrize("given, db", [
    ({}, 5),
    ({"REDIS_HOST": "127.0.0.1", "REDIS_PORT": 7000}, 5),
    ({"REDIS_URL": "redis://localhost:9001/42"}, 42),  # a database in the URL wins, in scrapy-redis too
])
def test_redis_params_db_applies_as_in_scrapy_redis(cls, given, db, unchecked):
    """``REDIS_PARAMS = {"db": 5}`` with ``REDIS_HOST``/``REDIS_PORT`` (or neither) is database 5 for
    scrapy-redis's connection (``redis.Redis(host=..., port=..., db=5)``), so for ours too: the
    dupefilter must share the queue's database."""
    crawler = get_crawler(MySpider, settings_dict={**given, "REDIS_PARAMS": {"db": 5}, "DEDUP_BLOOM_CAPACITY": 10_000})
    assert cls.from_crawler(crawler).server.connection_pool.connection_kwargs["db"] == db


@pytest.mark.parametrize("kind", ["redis", "redis_bloom"])
def test_scheduler_dupefilter_key_names_scrapy_redis_filter_only(settings, redis_client):
    """scrapy-redis's filter takes its key from ``SCHEDULER_DUPEFILTER_KEY`` (``%(spider)s:dupefilter``).
    Ours keep theirs (``DEDUP_REDIS_KEY``): they store 20-byte binary fingerprints where that key holds
    scrapy-redis's 40-character hex ones, so sharing it would let neither filter recognise the other's
    members. A project's old key is left untouched."""
    redis_client.sadd("myspider:dupefilter", "0" * 40)
    spider = open_spider({**settings, "SCHEDULER_DUPEFILTER_KEY": "%(spider)s:dupefilter"})
    scheduler = Scheduler.from_crawler(spider.crawler)
    scheduler.open(spider)
    assert scheduler.enqueue_request(Request("http://example.com"))
    assert scheduler.df.key == "dedup:myspider:seen"
    assert redis_client.smembers("myspider:dupefilter") == {b"0" * 40}
    scheduler.close("finished")
    close_spider(spider)


# --- tests/test_queue.py, PriorityQueueTest, QueueTestMixin.test_clear ----------------------------

@pytest.fixture
def queue(redis_client):
    spider = open_spider({})
    spider.parse_method = lambda x: x
    q = AckPriorityQueue(redis_client, spider, "key")
    yield q
    q._spider_closed(spider, "finished")


def test_encode_decode_requests(queue):
    req = Request("http://example.com", callback=queue.spider.parse, meta={"foo": "bar"})
    out = queue._decode_request(queue._encode_request(req))
    assert (out.url, out.meta, out.callback) == (req.url, req.meta, req.callback)


def test_custom_serializer(redis_client):
    calls = Counter()

    class Serializer:
        @staticmethod
        def dumps(obj):
            calls["dumps"] += 1
            return obj

        @staticmethod
        def loads(obj):
            calls["loads"] += 1
            return obj

    spider = open_spider({})
    q = AckPriorityQueue(redis_client, spider, "key", serializer=Serializer)
    try:
        req = Request("http://example.com", callback=spider.parse, meta={"foo": "bar"})
        out = q._decode_request(q._encode_request(req))
        assert (out.url, out.meta, out.callback) == (req.url, req.meta, req.callback)
        assert calls == {"dumps": 1, "loads": 1}
    finally:
        q._spider_closed(spider, "finished")


def test_clear(queue):
    assert len(queue) == 0
    for i in range(10):  # distinct URLs: a priority queue keeps one copy of identical serialized requests
        queue.push(Request(f"http://example.com/?page={i}"))
    assert len(queue) == 10
    queue.clear()
    assert len(queue) == 0


def test_priority_order(queue):
    req1 = Request("http://example.com/page1", priority=100)
    req2 = Request("http://example.com/page2", priority=50)
    req3 = Request("http://example.com/page2", priority=200)
    for req in (req1, req2, req3):
        queue.push(req)
    assert [queue.pop().url, queue.pop(timeout=0).url, queue.pop(timeout=1).url] == [req3.url, req1.url, req2.url]


# --- SchedulerTest: scrapy-redis's Scheduler with our dupefilter and queue ---------------------------

def make_scheduler(settings: dict) -> tuple[Scheduler, Spider]:
    spider = open_spider({**settings, "SCHEDULER_FLUSH_ON_START": False, "SCHEDULER_PERSIST": False,
                          "SCHEDULER_SERIALIZER": "scrapy_redis.picklecompat"})
    return Scheduler.from_crawler(spider.crawler), spider


def test_scheduler(settings):
    scheduler, spider = make_scheduler(settings)
    assert not scheduler.persist  # default: no persist
    scheduler.open(spider)
    assert len(scheduler) == 0

    req = Request("http://example.com")
    assert scheduler.enqueue_request(req)
    assert scheduler.has_pending_requests()
    assert len(scheduler) == 1

    assert not scheduler.enqueue_request(req)  # the dupefilter in action
    assert len(scheduler) == 1
    assert spider.crawler.stats.get_value("dupefilter/filtered") == 1

    assert scheduler.next_request().url == req.url
    assert not scheduler.has_pending_requests()
    assert len(scheduler) == 0
    scheduler.close("finish")
    close_spider(spider)


def test_scheduler_persistent(settings, caplog):
    scheduler, spider = make_scheduler(settings)
    scheduler.persist = True
    with caplog.at_level(logging.DEBUG, logger=spider.name):
        scheduler.open(spider)
        assert not [r for r in caplog.records if r.name == spider.name]
        scheduler.enqueue_request(Request("http://example.com/page1"))
        scheduler.enqueue_request(Request("http://example.com/page2"))
        assert scheduler.has_pending_requests()
        scheduler.close("finish")

        scheduler.open(spider)
    assert [r.getMessage() for r in caplog.records if r.name == spider.name] == [
        "Resuming crawl (2 requests scheduled)"]
    assert len(scheduler) == 2

    scheduler.persist = False
    scheduler.close("finish")
    assert len(scheduler) == 0
    close_spider(spider)


def test_dont_filter_requests_bypass_the_dupefilter(settings):
    """Not an upstream test; scrapy-redis's ``enqueue_request`` contract: a ``dont_filter`` request is
    queued without asking the dupefilter (so neither marked seen nor logged as filtered)."""
    scheduler, spider = make_scheduler(settings)
    scheduler.open(spider)
    req = Request("http://example.com", dont_filter=True)
    assert scheduler.enqueue_request(req)
    assert scheduler.enqueue_request(req)
    stats = spider.crawler.stats
    assert stats.get_value("dupefilter/filtered") is None
    assert scheduler.df.checked == 0
    assert not scheduler.df.request_seen(Request("http://example.com"))  # never marked
    scheduler.close("finish")
    close_spider(spider)


@pytest.mark.parametrize("persist", [False, True])
def test_scheduler_flushes_at_close_unless_persist(settings, persist, redis_client):
    """``SchedulerTest``'s flush: with ``SCHEDULER_PERSIST = False`` nothing of the crawl is left in Redis
    once it closed (``len(scheduler) == 0``), also when it closes with a request still in flight (stopped
    early): ours keeps a popped request in Redis until the engine is done with it, and puts the
    unfinished ones back into the queue at close; the flush drops them too. With ``SCHEDULER_PERSIST``
    they are put back, and the seen set is kept."""
    scheduler, spider = make_scheduler(settings)
    scheduler.persist = persist
    scheduler.open(spider)
    spider.crawler.signals.send_catch_log(signals.spider_opened, spider=spider)
    for i in range(3):
        scheduler.enqueue_request(Request(f"http://example.com/{i}"))
    in_flight = scheduler.next_request()
    scheduler.close("shutdown")  # the engine closes the scheduler, then sends spider_closed
    close_spider(spider)
    queued = sorted(picklecompat.loads(d)["url"] for d in redis_client.zrange(QUEUE_KEY % {"spider": spider.name}, 0, -1))
    if persist:
        assert queued == [f"http://example.com/{i}" for i in range(3)]
        assert in_flight.url in queued
    else:
        assert queued == []
        assert our_keys(redis_client) == set()


def test_flush_on_start_forgets_the_last_run(settings):
    scheduler, spider = make_scheduler(settings)
    scheduler.persist = True
    scheduler.open(spider)
    scheduler.enqueue_request(Request("http://example.com/1"))
    scheduler.close("finish")
    close_spider(spider)

    scheduler, spider = make_scheduler(settings)
    scheduler.flush_on_start = True  # SCHEDULER_FLUSH_ON_START
    scheduler.open(spider)
    assert len(scheduler) == 0
    assert scheduler.enqueue_request(Request("http://example.com/1"))  # no longer seen
    scheduler.close("finish")
    close_spider(spider)


@pytest.mark.crawl
@inlineCallbacks
def test_a_crawl_under_scrapy_redis_closes_when_idle_and_leaves_nothing_behind(settings, redis_client):
    """A real crawl: every page fetched once, the spider closed as ``finished`` once the queue is empty
    (scrapy-redis's ``has_pending_requests``), and with ``SCHEDULER_PERSIST = False`` no key of the
    crawl left in Redis."""
    crawl_settings = {**settings, "SCHEDULER": "scrapy_redis.scheduler.Scheduler", "SCHEDULER_PERSIST": False}
    with LocalSite(link_graph) as site:
        crawler = yield run_crawl(LinkSpider, crawl_settings, start_urls=[site.url("site.test")])
    hits = Counter(path for _, path in site.fetched())
    assert set(hits) == {"/", *(f"/p/{i}" for i in range(PAGES))}
    assert max(hits.values()) == 1
    assert crawler.stats.get_value("finish_reason") == "finished"
    assert crawler.stats.get_value("dedup/seen/new") == PAGES
    assert {k.decode() for k in redis_client.keys("*")} <= {f"compat:{LinkSpider.name}:requests:marker"}


class RedisLinkSpider(RedisSpider):
    """LinkSpider fed by scrapy-redis: start URLs read from the ``<name>:start_urls`` list in Redis."""

    name = "redislinks"
    parse = LinkSpider.parse

    async def start(self):  # scrapy-redis 0.9.1 defines only start_requests(), which Scrapy 2.13 warns about
        for request in self.start_requests():
            yield request


@pytest.mark.crawl
@inlineCallbacks
def test_a_redis_spider_reads_its_start_urls_and_closes_after_its_idle_time(settings, redis_client):
    """scrapy-redis's ``RedisSpider`` with our dupefilter and queue: the start URL pushed to Redis is
    crawled, every page once, and the spider, kept open while idle (``DontCloseSpider``), closes as
    ``finished`` after ``MAX_IDLE_TIME_BEFORE_CLOSE`` with nothing more in Redis."""
    with LocalSite(link_graph) as site:
        redis_client.lpush(f"{RedisLinkSpider.name}:start_urls", json.dumps({"url": site.url("site.test")}))
        crawler = yield run_crawl(RedisLinkSpider, {**settings, "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
                                                    "MAX_IDLE_TIME_BEFORE_CLOSE": 1})
    hits = Counter(path for _, path in site.fetched())
    assert set(hits) == {"/", *(f"/p/{i}" for i in range(PAGES))}
    assert max(hits.values()) == 1
    assert crawler.stats.get_value("finish_reason") == "finished"
    assert not redis_client.exists(f"{RedisLinkSpider.name}:start_urls")
