"""Redis killed (SIGKILL) in the middle of a real crawl, then restarted: DEDUP_REDIS_ON_ERROR.

Every test crawls :class:`tests.reliabilitysite.LinkedSite` (a real HTTP
server) with a Redis dupefilter and the Redis content index on a redis-server
of its own, kills that server after a few pages and restarts it on the same
port. What is counted: pages fetched (each path, with repeats), pages lost
(never fetched), items kept, log lines, and the ``dedup/redis/*`` stats.
"""
from __future__ import annotations

import logging
import threading
from collections import Counter

import pytest
from pytest_twisted import inlineCallbacks

from scrapy_dedup._util.redis_policy import CLOSE_REASON, RedisErrorPolicy, RedisUnavailable
from tests.reliabilitysite import LinkedSite, LinkedSpider
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.redis

FILTERS = {
    "exact": "scrapy_dedup.RedisDupeFilter",
    "bloom": "scrapy_dedup.RedisBloomDupeFilter",
}


@pytest.fixture
def own_redis(redis_server):  # redis_server: skips (or fails under CI) without redis-server
    # appendfsync always: what Redis acknowledged survives a SIGKILL, as with a production AOF setup
    server = RedisServer(extra_args=("--appendonly", "yes", "--appendfsync", "always")).start()
    yield server
    server.stop()


def kill(server: RedisServer) -> None:
    server.proc.kill()  # SIGKILL: no shutdown, connections reset
    server.proc.wait()
    server.proc = None


def killer(server: RedisServer, after: int, down_for: float | None = None, restart_at: int | None = None):
    """A spider hook that kills Redis at the ``after``-th response and restarts it ``down_for`` s later
    (from a thread: the crawl may be waiting) or at the ``restart_at``-th response (in the crawl's thread:
    Redis is surely back while pages remain)."""
    seen = {"n": 0}

    def on_response(spider, response):
        seen["n"] += 1
        if seen["n"] == after:
            kill(server)
            if down_for is not None:
                threading.Timer(down_for, server.start).start()
        if seen["n"] == restart_at:
            server.start()

    return on_response


def settings_for(server: RedisServer, flt: str, **extra):
    return {
        "ADDONS": {"scrapy_dedup.Addon": 0},
        "DUPEFILTER_CLASS": FILTERS[flt],
        "DEDUP_REDIS_URL": server.url,
        "DEDUP_CONTENT_BACKEND": "redis",
        "DEDUP_BLOOM_CAPACITY": 100_000,
        "CONCURRENT_REQUESTS": 2,
        **extra,
    }


def outcome(site: LocalSite, linked: LinkedSite, crawler):
    hits = Counter(path for _, path in site.fetched())
    fetched = {p for p in linked.paths if hits[p]}
    return {
        "lost": sorted(set(linked.paths) - fetched),
        "fetched_twice": sorted(p for p in linked.paths if hits[p] > 1),
        "kept": {item["path"] for item in crawler.items},
    }


def report(name: str, result: dict, stats: dict) -> None:
    """One line of counts per crawl (``pytest -s`` shows them; docs/reliability.md quotes them)."""
    redis_stats = {k: v for k, v in sorted(stats.items()) if k.startswith(("dedup/redis/", "dedup/content/store"))}
    print(f"\n[reliability] {name}: lost={len(result['lost'])} fetched_twice={len(result['fetched_twice'])} "
          f"items_kept={len(result['kept'])} finish_reason={stats.get('finish_reason')} {redis_stats}")


def assert_no_item_lost(linked: LinkedSite, kept: set[str]) -> None:
    """Every page without a near copy has its item; of each (page, near copy) pair at least one is kept
    (exactly one when the content index judged both; both when the outage left one unjudged)."""
    paired = {p for pair in linked.pairs() for p in pair}
    assert {p for p in linked.paths if p not in paired} <= kept
    assert [pair for pair in linked.pairs() if not set(pair) & kept] == []


def dedup_errors_logged(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.crawl
@pytest.mark.parametrize("flt", ["exact", "bloom"])
@inlineCallbacks
def test_retry_waits_for_redis_and_the_crawl_loses_nothing(own_redis, flt, caplog):
    caplog.set_level(logging.INFO, logger="scrapy_dedup")
    linked = LinkedSite(pages=30, near=5, delay=0.01, entry_links_all=False)
    with LocalSite(linked) as site:
        crawler = yield run_crawl(
            LinkedSpider, settings_for(own_redis, flt, DEDUP_REDIS_ON_ERROR="retry", DEDUP_REDIS_RETRY_SECONDS=30),
            start_urls=[site.url("site.test")], on_response=killer(own_redis, after=8, down_for=1.0))
    result = outcome(site, linked, crawler)
    stats = crawler.stats.get_stats()
    report(f"retry {flt}", result, stats)
    assert result["lost"] == []
    assert result["fetched_twice"] == []  # the crawl waited: every URL still went through Redis
    assert stats["finish_reason"] == "finished"
    assert stats["dedup/redis/outages"] == 1
    assert stats["dedup/redis/errors"] >= 1 and stats["dedup/redis/retries"] >= 1
    assert "dedup/redis/fail_open" not in stats
    assert_no_item_lost(linked, result["kept"])
    # one ERROR line per outage from the dupefilter, at most one from the content index; no traceback
    errors = dedup_errors_logged(caplog)
    assert [r.name for r in errors].count("scrapy_dedup._util.redis_policy") == 1
    assert len(errors) <= 2, [r.getMessage() for r in errors]
    assert not [r for r in caplog.records if r.exc_info], "a traceback reached the log"
    assert any("is back after" in r.getMessage() for r in caplog.records)


@pytest.mark.crawl
@pytest.mark.parametrize("flt", ["exact", "bloom"])
@inlineCallbacks
def test_fail_open_keeps_crawling_and_replays_fingerprints_when_redis_is_back(own_redis, flt, caplog):
    linked = LinkedSite(pages=30, near=5, delay=0.01, entry_links_all=False)
    with LocalSite(linked) as site:
        crawler = yield run_crawl(
            LinkedSpider, settings_for(own_redis, flt, DEDUP_REDIS_ON_ERROR="fail_open"),
            start_urls=[site.url("site.test")], on_response=killer(own_redis, after=8, restart_at=16))
    result = outcome(site, linked, crawler)
    stats = crawler.stats.get_stats()
    report(f"fail_open {flt}", result, stats)
    assert result["lost"] == []
    # what this process confirmed before, or answered during, the outage is remembered locally
    assert result["fetched_twice"] == []
    assert stats["finish_reason"] == "finished"
    assert stats["dedup/redis/fail_open"] >= 1
    # fail_open never waits, and probes Redis only now and then during the outage
    assert 1 <= stats["dedup/redis/errors"] <= stats["dedup/redis/fail_open"]
    assert "dedup/redis/retries" not in stats
    assert stats.get("dedup/redis/replayed", 0) == stats["dedup/redis/fail_open"]  # all written once back
    assert_no_item_lost(linked, result["kept"])
    errors = dedup_errors_logged(caplog)
    assert [r.name for r in errors].count("scrapy_dedup._util.redis_policy") == 1
    assert len(errors) <= 2, [r.getMessage() for r in errors]
    assert not [r for r in caplog.records if r.exc_info], "a traceback reached the log"


@pytest.mark.crawl
@inlineCallbacks
def test_retry_gives_up_closes_the_spider_and_a_jobdir_resume_loses_nothing(own_redis, tmp_path, caplog):
    linked = LinkedSite(pages=30, near=5, delay=0.01, entry_links_all=False)
    jobdir = str(tmp_path / "job")
    settings = settings_for(own_redis, "exact", DEDUP_REDIS_ON_ERROR="retry", DEDUP_REDIS_RETRY_SECONDS=0.5,
                            JOBDIR=jobdir)
    with LocalSite(linked) as site:
        first = yield run_crawl(LinkedSpider, settings, start_urls=[site.url("site.test")],
                                on_response=killer(own_redis, after=8, down_for=None))
        first_hits = Counter(path for _, path in site.fetched())
        assert first.stats.get_value("finish_reason") == CLOSE_REASON
        assert first.stats.get_value("dedup/redis/outages") == 1
        gave_up = [r for r in caplog.records if "giving up" in r.getMessage()]
        assert len(gave_up) == 1 and CLOSE_REASON in gave_up[0].getMessage()
        assert not [r for r in caplog.records if r.exc_info], "a traceback reached the log"
        unfetched = [p for p in linked.paths if not first_hits[p]]
        assert unfetched, "the first run should have stopped early"

        own_redis.start()  # Redis is back (its AOF kept what it acknowledged)
        # The resumed run gets a retry budget a loaded machine cannot exhaust: with 0.5 s a slow reply of a
        # healthy Redis (a call is bounded by a third of the budget) closed it early too, as designed.
        resumed = {**settings, "DEDUP_REDIS_RETRY_SECONDS": 30}
        second = yield run_crawl(LinkedSpider, resumed, start_urls=[site.url("site.test")])
    hits = Counter(path for _, path in site.fetched())
    assert [p for p in linked.paths if not hits[p]] == []  # nothing lost over the two runs
    twice = sorted(p for p in linked.paths if hits[p] > 1)
    print(f"\n[reliability] retry gives up: first run fetched {sum(1 for p in linked.paths if first_hits[p])}"
          f"/{len(linked.paths)} pages, finish_reason={first.stats.get_value('finish_reason')}, "
          f"fail_open={first.stats.get_value('dedup/redis/fail_open')}; resumed run: lost="
          f"{sum(1 for p in linked.paths if not hits[p])} fetched_twice={len(twice)} "
          f"replayed={second.stats.get_value('dedup/redis/replayed')}")
    assert twice == []
    assert second.stats.get_value("finish_reason") == "finished"


def test_policy_backoff_is_bounded_and_counts_every_attempt():
    """The backoff schedule itself, on a fake clock (no Redis needed to see the arithmetic)."""
    import redis

    now = [0.0]
    waits: list[float] = []

    def sleep(seconds):
        waits.append(seconds)
        now[0] += seconds

    class Stats(Counter):
        def inc_value(self, key, count=1, start=0):
            self[key] += count

    stats = Stats()
    policy = RedisErrorPolicy("retry", 2.0, url="redis://:hunter2@h:1/0", secrets=("hunter2",), stats=stats,
                              sleep=sleep, clock=lambda: now[0])

    def down():
        raise redis.exceptions.ConnectionError("Error 111 connecting with password hunter2")

    with pytest.raises(RedisUnavailable) as info:
        policy.call(down)
    assert "hunter2" not in str(info.value) and "***" in str(info.value)
    assert sum(waits) == pytest.approx(2.0)
    assert waits[:4] == [0.05, 0.1, 0.2, 0.4]
    assert max(waits) <= 5.0
    assert policy.gave_up
    assert stats["dedup/redis/errors"] == len(waits) + 1 and stats["dedup/redis/retries"] == len(waits)
    # after giving up: no more waiting, one attempt per call, still counted
    with pytest.raises(RedisUnavailable):
        policy.call(down)
    assert stats["dedup/redis/retries"] == len(waits)
    assert stats["dedup/redis/outages"] == 1


def test_fail_open_probes_a_down_redis_only_after_a_growing_pause():
    import redis

    now = [0.0]
    attempts = []
    policy = RedisErrorPolicy("fail_open", sleep=lambda s: pytest.fail("fail_open must not wait"),
                              clock=lambda: now[0])

    def down():
        attempts.append(now[0])
        raise redis.exceptions.TimeoutError("Timeout connecting to server")

    for _ in range(100):  # 100 requests over 10 s of fake time
        with pytest.raises(RedisUnavailable):
            policy.call(down)
        now[0] += 0.1
    gaps = [b - a for a, b in zip(attempts, attempts[1:])]
    assert len(attempts) < 15  # not one attempt per request
    assert gaps == sorted(gaps) and max(gaps) <= 5.0 + 0.1
    now[0] += 10  # past the next probe: Redis answers, the outage is over
    assert policy.call(lambda: "up") == "up" and policy.down_since is None
    assert policy.call(lambda: "again") == "again"


def test_policy_raises_refused_credentials_at_once():
    import redis

    policy = RedisErrorPolicy("retry", 60, sleep=lambda s: pytest.fail("must not wait"))

    def refused():
        raise redis.exceptions.AuthenticationError("invalid username-password pair")

    with pytest.raises(redis.exceptions.AuthenticationError):
        policy.call(refused)


def test_lua_scripts_are_reloaded_after_a_restart_empties_the_script_cache(own_redis):
    """NOSCRIPT after a restart: the content index's script is loaded again; the Bloom filter (no script) goes on."""
    from scrapy_dedup.content.engine import ContentFingerprinter
    from scrapy_dedup.content.redis_index import RedisContentStore
    from scrapy_dedup._util.redis_conn import connect
    from scrapy_dedup.seen.redis import RedisBloomSeenSet
    from tests.contentsite import edited_text, product_text

    client = connect(own_redis.url)
    bloom = RedisBloomSeenSet(client, "t:bloom", 10_000, 1e-6, cache_size=0)
    store = RedisContentStore.from_redis(client, "t:content")
    fingerprint = ContentFingerprinter().fingerprint
    assert bloom.add(b"a" * 20) is True
    assert store.check_and_add("http://x.test/1", fingerprint(product_text(1)))[0] == "unique"
    kill(own_redis)
    own_redis.start()
    assert client.info("memory")["number_of_cached_scripts"] == 0  # the restart emptied the script cache
    assert bloom.add(b"a" * 20) is False  # AOF kept the bits; the pinned connection was replaced
    assert bloom.add(b"b" * 20) is True
    assert store.check_and_add("http://x.test/2", fingerprint(edited_text(1)))[0] == "near"
    client.close()


def test_a_flapping_redis_is_logged_once_a_minute_and_counted_always(caplog):
    """One dead node of a cluster between live ones looks like many short outages: counted, not logged each."""
    import redis

    now = [0.0]
    policy = RedisErrorPolicy("fail_open", clock=lambda: now[0])

    def down():
        raise redis.exceptions.ConnectionError("Connection refused")

    with caplog.at_level(logging.INFO, logger="scrapy_dedup"):
        for _ in range(50):  # 50 outages in 50 s, each ended by a successful call
            with pytest.raises(RedisUnavailable):
                policy.call(down)
            now[0] += 1.0
            assert policy.call(lambda: "ok") == "ok"
        now[0] += 60
        with pytest.raises(RedisUnavailable):
            policy.call(down)
    lines = [r.getMessage() for r in caplog.records if r.name == "scrapy_dedup._util.redis_policy"]
    errors = [line for line in lines if "is unavailable" in line]
    assert policy.outages == 51 and policy.errors == 51
    assert len(errors) == 2
    assert "49 more short outages" in errors[1]
    assert len(lines) == 3  # the first outage's "back" line; the unlogged ones end silently


@pytest.mark.crawl
@pytest.mark.filterwarnings("ignore::scrapy.exceptions.ScrapyDeprecationWarning")  # scrapy-redis's scheduler
@pytest.mark.parametrize("on_error", ["retry", "fail_open"])
@inlineCallbacks
def test_queue_in_redis_waits_out_an_outage_without_a_traceback(own_redis, on_error, caplog):
    """scrapy-redis's scheduler with AckPriorityQueue: the engine asks the queue every tick; while Redis is
    down, pop answers None and len the last count (so the spider is not closed as idle), logged once."""
    caplog.set_level(logging.INFO)
    linked = LinkedSite(pages=30, near=5, delay=0.01, entry_links_all=False)
    with LocalSite(linked) as site:
        crawler = yield run_crawl(
            LinkedSpider, settings_for(own_redis, "exact", DEDUP_REDIS_ON_ERROR=on_error, DEDUP_REDIS_RETRY_SECONDS=30,
                                       SCHEDULER="scrapy_redis.scheduler.Scheduler", SCHEDULER_PERSIST=True,
                                       SCHEDULER_QUEUE_CLASS="scrapy_dedup.redis_queue.AckPriorityQueue",
                                       REDIS_URL=own_redis.url),
            start_urls=[site.url("site.test")], on_response=killer(own_redis, after=8, down_for=1.5))
    result = outcome(site, linked, crawler)
    stats = crawler.stats.get_stats()
    report(f"queue in redis, {on_error}", result, stats)
    assert result["lost"] == []
    assert result["fetched_twice"] == []
    assert stats["finish_reason"] == "finished"
    assert_no_item_lost(linked, result["kept"])
    assert not [r for r in caplog.records if r.exc_info], "a traceback reached the log"
    queue_warnings = [r for r in caplog.records if r.name == "scrapy_dedup.redis_queue" and r.levelno >= logging.WARNING]
    if on_error == "fail_open":  # the crawl went on, so the engine met the outage in the queue
        assert stats["dedup/queue/redis_errors"] >= 1
        assert len([r for r in queue_warnings if "no request is popped" in r.getMessage()]) == 1
