"""The queue in Redis (scrapy-redis's scheduler with AckPriorityQueue) in real crawls, when Redis or a worker fails.

* Redis stopped and never restarted: the crawl ends, under ``fail_open`` too,
  with the reason ``dedup_redis_unavailable`` (before: it waited forever).
* Redis restarted without persistence mid-crawl: the crawl ends with the reason
  ``dedup_redis_data_lost`` (before: ``finished``, with the queued pages gone);
  with AOF the same restart loses nothing and the crawl finishes.
* A worker restarted with the dead one's hostname and PID (``docker restart``,
  PID-1 images): the dead one's in-flight requests are put back at start
  (before: taken for a live worker's until its ``alive`` key expired, after a
  short crawl had ended). The dead process's records are left as such a process
  leaves them: written by a real queue, or by a real crawl killed with SIGKILL,
  and given this test process's PID.

Counted on the HTTP server: pages lost (never fetched) and fetched twice.
"""
from __future__ import annotations

import logging
import os
import signal
import socket
import uuid
from collections import Counter

import pytest
from pytest_twisted import inlineCallbacks
from scrapy import Request
from scrapy.utils.test import get_crawler

from tests.faultcrawl import FollowSpider, ResumeSite
from tests.reliabilitysite import LinkedSite, LinkedSpider
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite
from tests.support.redis_server import RedisServer
from tests.test_fault_resume import CrawlProcess, in_flight_paths, redis_scheduler_settings, wait_for_hits

pytestmark = [pytest.mark.redis, pytest.mark.crawl,
              pytest.mark.filterwarnings("ignore::scrapy.exceptions.ScrapyDeprecationWarning")]  # scrapy-redis

HOST = "127.0.0.1"
#: a crawl that waits for Redis longer than this is taken as hung (generous: the budget below is 2 s)
HANG_BOUND = 120.0


@pytest.fixture
def plain_redis(redis_server):  # redis_server: skips (or fails under CI) without redis-server
    """A redis-server of its own without persistence (no RDB, no AOF): a restart comes back empty."""
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture
def aof_redis(redis_server):
    server = RedisServer(extra_args=("--appendonly", "yes", "--appendfsync", "always")).start()
    yield server
    server.stop()


def queue_settings(server: RedisServer, **extra) -> dict:
    return {
        "ADDONS": {"scrapy_dedup.Addon": 0},
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "SCHEDULER_PERSIST": True,
        "SCHEDULER_QUEUE_CLASS": "scrapy_dedup.redis_queue.AckPriorityQueue",
        "REDIS_URL": server.url,
        "DUPEFILTER_CLASS": "scrapy_dedup.RedisDupeFilter",
        "DEDUP_REDIS_URL": server.url,
        "DEDUP_CONTENT_BACKEND": "redis",
        "CONCURRENT_REQUESTS": 2,
        **extra,
    }


def at_response(after: int, action):
    """A spider hook running ``action()`` at the ``after``-th response, and arming a watchdog at the first:
    the spider is closed with reason ``hung`` if the crawl is still running HANG_BOUND seconds later."""
    seen = {"n": 0}

    def on_response(spider, response):
        import time

        seen["n"] += 1
        if seen["n"] == 1:
            from twisted.internet import reactor

            from scrapy_dedup.engine_hook import close_spider_soon

            spider.watchdog = reactor.callLater(HANG_BOUND, close_spider_soon, spider.crawler, "hung")
        if seen["n"] == after:
            spider.acted_at = time.monotonic()
            action()

    return on_response


def disarm(crawler) -> None:
    watchdog = getattr(crawler.spider, "watchdog", None)
    if watchdog is not None and watchdog.active():
        watchdog.cancel()


def kill(server: RedisServer) -> None:
    server.proc.kill()  # SIGKILL: no shutdown, connections reset
    server.proc.wait()
    server.proc = None


def restart(server: RedisServer) -> None:
    server.stop()
    server.start()


def counts(site: LocalSite, paths: list[str]) -> dict:
    hits: Counter[str] = Counter()
    for (_, path), n in site.hits.items():
        hits[path.split("?")[0]] += n
    return {"lost": sorted(p for p in paths if not hits[p]), "twice": sorted(p for p in paths if hits[p] > 1)}


def records(caplog, level: int = logging.ERROR) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= level]


def report(name: str, result: dict, stats: dict, caplog) -> None:
    queue = {k: v for k, v in sorted(stats.items()) if k.startswith("dedup/queue/")}
    errors = Counter(f"{r.name}: {r.getMessage()[:60]}" for r in records(caplog))
    print(f"\n[queue] {name}: lost={len(result['lost'])} fetched_twice={len(result['twice'])} "
          f"finish_reason={stats.get('finish_reason')} errors={len(records(caplog))} {dict(errors)} "
          f"tracebacks={len([r for r in caplog.records if r.exc_info])} {queue}")


@pytest.mark.parametrize("on_error", ["fail_open", "retry"])
@inlineCallbacks
def test_redis_gone_for_good_ends_the_crawl_with_the_documented_reason(plain_redis, on_error, caplog):
    """Redis SIGKILLed at the 8th response and never restarted. Before: under ``fail_open`` the crawl never
    ended (pop None, len the last count, every engine tick). Asserted: it ends, before the hang bound, with
    ``dedup_redis_unavailable``, one ERROR line of the queue saying what is left in Redis and in the process,
    and no traceback."""
    caplog.set_level(logging.INFO)
    linked = LinkedSite(pages=30, near=5, delay=0.01, entry_links_all=False)
    with LocalSite(linked) as site:
        crawler = yield run_crawl(
            LinkedSpider, queue_settings(plain_redis, DEDUP_REDIS_ON_ERROR=on_error, DEDUP_REDIS_RETRY_SECONDS=2),
            start_urls=[site.url("site.test")], on_response=at_response(8, lambda: kill(plain_redis)))
    import time

    disarm(crawler)
    stats = crawler.stats.get_stats()
    report(f"Redis gone for good, {on_error}", counts(site, linked.paths), stats, caplog)
    print(f"[queue] closed {time.monotonic() - crawler.spider.acted_at:.1f} s after the kill")  # not asserted
    assert stats["finish_reason"] == "dedup_redis_unavailable"
    assert not [r for r in caplog.records if r.exc_info], "a traceback reached the log"
    queue_errors = [r.getMessage() for r in records(caplog) if r.name == "scrapy_dedup.redis_queue"
                    and "closing the spider" in r.getMessage()]
    if on_error == "fail_open" or stats.get("dedup/queue/gave_up"):
        assert len(queue_errors) == 1, queue_errors
        assert "queued request(s)" in queue_errors[0] and "held in this process" in queue_errors[0]
    else:  # retry: the dupefilter's wait may have given up first (its own ERROR line)
        assert queue_errors == []


@inlineCallbacks
def test_redis_restarted_without_persistence_ends_the_crawl_as_data_lost(plain_redis, caplog):
    """Redis stopped and started again, without RDB or AOF, at the 8th response: the queue, the seen set and
    the in-flight sets are gone. Before: the crawl ended ``finished`` with the queued pages never fetched.
    Asserted: ``dedup_redis_data_lost``, one ERROR line, ``dedup/queue/data_lost``, no traceback."""
    caplog.set_level(logging.INFO)
    linked = LinkedSite(pages=30, near=5, delay=0.01, entry_links_all=False)
    with LocalSite(linked) as site:
        crawler = yield run_crawl(LinkedSpider, queue_settings(plain_redis), start_urls=[site.url("site.test")],
                                  on_response=at_response(8, lambda: restart(plain_redis)))
    disarm(crawler)
    stats = crawler.stats.get_stats()
    report("Redis restarted without persistence", counts(site, linked.paths), stats, caplog)
    assert stats["finish_reason"] == "dedup_redis_data_lost"
    assert stats["dedup/queue/data_lost"] == 1
    errors = [r.getMessage() for r in records(caplog)]
    assert len(errors) == 1 and "lost the queue's data" in errors[0], errors
    assert "restarted" in errors[0] and "appendonly yes" in errors[0]
    assert not [r for r in caplog.records if r.exc_info], "a traceback reached the log"


@inlineCallbacks
def test_redis_restarted_with_aof_loses_nothing(aof_redis, caplog):
    """The same restart with ``appendonly yes`` (``appendfsync always``): the keys survive, nothing is
    detected, the crawl finishes with every page fetched once."""
    caplog.set_level(logging.INFO)
    linked = LinkedSite(pages=30, near=5, delay=0.01, entry_links_all=False)
    with LocalSite(linked) as site:
        crawler = yield run_crawl(LinkedSpider, queue_settings(aof_redis), start_urls=[site.url("site.test")],
                                  on_response=at_response(8, lambda: restart(aof_redis)))
    disarm(crawler)
    stats = crawler.stats.get_stats()
    result = counts(site, linked.paths)
    report("Redis restarted with AOF", result, stats, caplog)
    assert stats["finish_reason"] == "finished"
    assert result == {"lost": [], "twice": []}
    assert "dedup/queue/data_lost" not in stats
    assert records(caplog) == []


# --- a worker restarted under the dead one's hostname and PID ---

def follow_settings(redis_url: str) -> dict:
    return {**redis_scheduler_settings(redis_url), "ADDONS": {"scrapy_dedup.Addon": 0}, "LOG_LEVEL": "INFO"}


def give_our_pid(redis_client, token: str | None = None, key: str = "faultcrawl:requests") -> str:
    """Rename the one dead worker's records to this process's host and PID (with its token, or ``token``) and
    refresh its ``alive`` key: what a process with our PID that was killed just after its heartbeat leaves."""
    (dead,) = [w.decode() for w in redis_client.smembers(f"{key}:workers")]
    host, _, dead_token = dead.split(":", 2)
    token = token or dead_token
    assert host == socket.gethostname()
    ours = f"{host}:{os.getpid()}:{token}"
    if redis_client.exists(f"{key}:inflight:{dead}"):
        redis_client.rename(f"{key}:inflight:{dead}", f"{key}:inflight:{ours}")
    redis_client.delete(f"{key}:alive:{dead}")
    redis_client.set(f"{key}:alive:{ours}", 1, ex=30)
    redis_client.srem(f"{key}:workers", dead)
    redis_client.sadd(f"{key}:workers", ours)
    return ours


@inlineCallbacks
def test_in_flight_requests_of_a_dead_process_with_our_pid_are_reclaimed_at_start(redis_url, redis_client):
    """A dead process with this host and PID (another token) had fetched ``/`` and ``/list/0`` and had
    ``/list/1`` and one article in flight; its records are written by a real queue and dupefilter. Before:
    our PID is alive and the dead one's ``alive`` key had not expired, so nothing came back, and the crawl
    ended at once: ``/list/1`` and every page after it in the chain never fetched. Asserted: each page
    the dead process had not fetched is fetched exactly once."""
    from scrapy_dedup import RedisDupeFilter
    from scrapy_dedup.redis_queue import AckPriorityQueue

    design = ResumeSite(delay=0.01)
    paths = design.paths()
    settings = follow_settings(redis_url)
    with LocalSite(design.route) as site:
        start = site.url(HOST, "/")
        crawler = get_crawler(FollowSpider, settings)
        spider = FollowSpider.from_crawler(crawler, start_url=start)
        dupefilter = RedisDupeFilter.from_crawler(crawler)
        queue = AckPriorityQueue(redis_client, spider, "%(spider)s:requests")
        fetched_by_dead = ["/", "/list/0"]
        produced = design.list_links(0)  # /list/1 and five articles, as /list/0's parse scheduled them
        for path in fetched_by_dead + produced:
            assert not dupefilter.request_seen(Request(site.url(HOST, path)))
        queue.push(Request(site.url(HOST, produced[0])))  # the next list: LIFO-like, taken first
        in_flight = [queue.pop()]
        for path in produced[1:]:
            queue.push(Request(site.url(HOST, path)))
        in_flight.append(queue.pop())
        assert in_flight[0].url.endswith("/list/1")
        dupefilter.close("killed")
        queue._heartbeat.stop()  # then it "dies": nothing of it runs any more
        # another process's token (the queue object that wrote the records is still open in this one)
        records_left = give_our_pid(redis_client, token=uuid.uuid4().hex)
        assert redis_client.zcard(f"faultcrawl:requests:inflight:{records_left}") == 2
        resumed = yield run_crawl(FollowSpider, settings, start_url=start)
    fetched = Counter(path for _, path in site.hits)
    print(f"\n[queue] dead process with our PID: in flight {sorted(r.url for r in in_flight)}; resumed run "
          f"fetched {sum(fetched.values())} of {len(paths) - 2}; reclaimed "
          f"{resumed.stats.get_value('dedup/queue/reclaimed')}")
    assert resumed.stats.get_value("dedup/queue/reclaimed") == 2
    assert fetched == Counter({path: 1 for path in paths if path not in fetched_by_dead})
    assert resumed.stats.get_value("finish_reason") == "finished"


@inlineCallbacks
def test_sigkill_then_a_restart_under_the_same_pid_loses_no_page(tmp_path, redis_url, redis_client):
    """A real crawl (its own process) SIGKILLed mid-crawl; its records are given this process's PID (a
    container restarted: same hostname, same PID); the crawl is resumed here. Before: the killed process's
    in-flight requests were never put back in a crawl shorter than its ``alive`` key's 30 s, and the chain
    after them was lost. Asserted: every page parsed by the spider in one run or the other, fetched twice
    only if in flight at the kill."""
    design = ResumeSite()
    paths = design.paths()
    settings = redis_scheduler_settings(redis_url)
    with LocalSite(design.route) as site:
        start = site.url(HOST, "/")
        first = CrawlProcess(tmp_path, "first", start, settings).start()
        wait_for_hits(site, len(paths) // 2, first)
        first.proc.send_signal(signal.SIGKILL)
        assert first.wait() == -signal.SIGKILL
        fetched_first = Counter(site.hits)
        in_flight = in_flight_paths(redis_client)
        give_our_pid(redis_client)
        resumed = yield run_crawl(FollowSpider, follow_settings(redis_url), start_url=start,
                                  parsed_file=str(first.parsed_file))
        fetched_all = Counter(site.hits)
    # lost: never parsed by the spider in either run (a page served just before the kill may never have
    # reached the spider: counted as fetched by the site, but its item and links are gone)
    lost = sorted(set(paths) - set(first.parsed()))
    twice = {path for (_, path), n in fetched_all.items() if n > 1}
    print(f"\n[queue] SIGKILL, resumed under the same PID: first run fetched {sum(fetched_first.values())} of "
          f"{len(paths)}; in flight at the kill {len(in_flight)}; lost {len(lost)}; fetched twice {len(twice)}; "
          f"reclaimed {resumed.stats.get_value('dedup/queue/reclaimed')}")
    assert in_flight, "the kill should land while a page is being served"
    assert lost == []
    assert {path for _, path in fetched_all} == set(paths)
    assert twice <= in_flight and max(fetched_all.values()) <= 2
    assert resumed.stats.get_value("dedup/queue/reclaimed") == len(in_flight)
    assert redis_client.zcard("faultcrawl:requests") == 0 and in_flight_paths(redis_client) == set()

