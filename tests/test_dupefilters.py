"""Scrapy 2.19's tests/test_dupefilters.py re-expressed for our three dupefilters.

Each test runs for BloomDupeFilter, RedisDupeFilter and RedisBloomDupeFilter
(the Redis ones against a real redis-server), building the filter the way
Scrapy does: through the scheduler, from a crawler.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import subprocess

import pytest
import pytest_twisted
from scrapy import signals
from scrapy.core.scheduler import Scheduler
from scrapy.http import Request
from scrapy.spiders import Spider
from scrapy.utils.python import to_bytes
from scrapy.utils.test import get_crawler
from twisted.internet import reactor
from twisted.internet.task import deferLater

from scrapy_dedup.dupefilters import BloomDupeFilter, RedisBloomDupeFilter, RedisDupeFilter
from scrapy_dedup.seen.bloom import BloomSeenSet, CheckpointError
from scrapy_dedup.seen.journal import MAGIC
from scrapy_dedup.settings import DedupConfigError
from tests.support.lossy_proxy import LossyProxy
from tests.support.redis_server import RedisServer

LOGGER = "scrapy_dedup.dupefilters"
KINDS = ["bloom", "redis", "redis_bloom"]
CLASSES = {"bloom": BloomDupeFilter, "redis": RedisDupeFilter, "redis_bloom": RedisBloomDupeFilter}


class SimpleSpider(Spider):
    name = "simple"


@pytest.fixture(params=KINDS)
def kind(request) -> str:
    return request.param


@pytest.fixture
def base_settings(kind, request) -> dict:
    settings = {"DUPEFILTER_CLASS": CLASSES[kind], "DEDUP_BLOOM_CAPACITY": 100_000}
    if kind != "bloom":
        settings["DEDUP_REDIS_URL"] = request.getfixturevalue("redis_url")
    return settings


def get_dupefilter(*, crawler=None, settings=None, open=True):
    """Scrapy's helper: the scheduler builds the dupefilter from the crawler."""
    if crawler is None:
        crawler = get_crawler(SimpleSpider, settings_dict=settings)
    scheduler = Scheduler.from_crawler(crawler)
    dupefilter = scheduler.df
    if open:
        dupefilter.open()
    return dupefilter


def test_df_from_crawler_scheduler(kind, base_settings):
    class FromCrawler(CLASSES[kind]):
        @classmethod
        def from_crawler(cls, crawler):
            df = super().from_crawler(crawler)
            df.method = "from_crawler"
            return df

    crawler = get_crawler(SimpleSpider, settings_dict={**base_settings, "DUPEFILTER_DEBUG": True,
                                                       "DUPEFILTER_CLASS": FromCrawler})
    scheduler = Scheduler.from_crawler(crawler)
    assert isinstance(scheduler.df, CLASSES[kind])
    assert scheduler.df.debug
    assert scheduler.df.method == "from_crawler"
    assert scheduler.df.fingerprinter is crawler.request_fingerprinter


def test_filter(base_settings):
    dupefilter = get_dupefilter(settings=base_settings)
    r1 = Request("http://scrapytest.org/1")
    r2 = Request("http://scrapytest.org/2")
    r3 = Request("http://scrapytest.org/2")

    assert not dupefilter.request_seen(r1)
    assert dupefilter.request_seen(r1)

    assert not dupefilter.request_seen(r2)
    assert dupefilter.request_seen(r3)

    assert dupefilter.close("finished") is None


def test_open_and_close_return_none_not_coroutines(base_settings):
    dupefilter = get_dupefilter(settings=base_settings, open=False)
    assert dupefilter.open() is None
    assert dupefilter.close("finished") is None
    assert dupefilter.close("finished") is None  # closing twice is harmless


def test_dupefilter_path(kind, base_settings, tmp_path):
    """Persistence across two crawler instances: JOBDIR for the Bloom, the persistent key for Redis."""
    r1 = Request("http://scrapytest.org/1")
    r2 = Request("http://scrapytest.org/2")
    settings = {**base_settings, "JOBDIR": str(tmp_path)}

    df = get_dupefilter(settings=settings, open=False)
    try:
        df.open()
        assert not df.request_seen(r1)
        assert df.request_seen(r1)
    finally:
        df.close("finished")

    df2 = get_dupefilter(settings=settings, open=False)
    assert df != df2
    try:
        df2.open()
        assert df2.request_seen(r1)
        assert not df2.request_seen(r2)
        assert df2.request_seen(r2)
    finally:
        df2.close("finished")
    if kind == "bloom":
        assert (tmp_path / "seen.bloom").exists()


def test_request_fingerprint(base_settings):
    """A custom REQUEST_FINGERPRINTER_CLASS changes what counts as a duplicate."""
    dupefilter = get_dupefilter(settings=base_settings)
    r1 = Request("http://scrapytest.org/index.html")
    r2 = Request("http://scrapytest.org/INDEX.html")

    assert not dupefilter.request_seen(r1)
    assert not dupefilter.request_seen(r2)

    dupefilter.close("finished")

    class RequestFingerprinter:
        def fingerprint(self, request):
            fp = hashlib.sha1()
            fp.update(to_bytes(request.url.lower()))
            return fp.digest()

    settings = {**base_settings, "REQUEST_FINGERPRINTER_CLASS": RequestFingerprinter,
                "DEDUP_REDIS_KEY": "case-insensitive:%(spider)s"}
    case_insensitive_dupefilter = get_dupefilter(settings=settings)

    assert not case_insensitive_dupefilter.request_seen(r1)
    assert case_insensitive_dupefilter.request_seen(r2)

    case_insensitive_dupefilter.close("finished")


def test_log(base_settings, caplog):
    settings = {**base_settings, "DUPEFILTER_DEBUG": False}
    crawler = get_crawler(SimpleSpider, settings_dict=settings)
    spider = SimpleSpider.from_crawler(crawler)
    dupefilter = get_dupefilter(crawler=crawler)

    r1 = Request("http://scrapytest.org/index.html")
    r2 = Request("http://scrapytest.org/index.html")

    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        dupefilter.log(r1, spider)
        dupefilter.log(r2, spider)

    assert crawler.stats.get_value("dupefilter/filtered") == 2
    messages = [(r.name, r.levelname, r.getMessage()) for r in caplog.records if r.name == LOGGER
                and r.levelname == "DEBUG"]
    assert messages == [(
        LOGGER, "DEBUG",
        "Filtered duplicate request: <GET http://scrapytest.org/index.html> - no more"
        " duplicates will be shown (see DUPEFILTER_DEBUG to show all duplicates)",
    )]
    dupefilter.close("finished")


def test_log_debug(base_settings, caplog):
    settings = {**base_settings, "DUPEFILTER_DEBUG": True}
    crawler = get_crawler(SimpleSpider, settings_dict=settings)
    spider = SimpleSpider.from_crawler(crawler)
    dupefilter = get_dupefilter(crawler=crawler)

    r1 = Request("http://scrapytest.org/index.html")
    r2 = Request("http://scrapytest.org/index.html", headers={"Referer": "http://scrapytest.org/INDEX.html"})

    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        dupefilter.log(r1, spider)
        dupefilter.log(r2, spider)

    assert crawler.stats.get_value("dupefilter/filtered") == 2
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelname == "DEBUG"]
    assert "Filtered duplicate request: <GET http://scrapytest.org/index.html> (referer: None)" in messages
    assert ("Filtered duplicate request: <GET http://scrapytest.org/index.html>"
            " (referer: http://scrapytest.org/INDEX.html)") in messages
    dupefilter.close("finished")


def test_stats_at_close(kind, base_settings):
    crawler = get_crawler(SimpleSpider, settings_dict=base_settings)
    dupefilter = get_dupefilter(crawler=crawler)
    for url in ["http://a.test/1", "http://a.test/2", "http://a.test/1", "http://a.test/3"]:
        dupefilter.request_seen(Request(url))
    dupefilter.close("finished")
    stats = crawler.stats
    assert stats.get_value("dedup/seen/checked") == 4
    assert stats.get_value("dedup/seen/new") == 3
    assert stats.get_value("dedup/seen/size_bytes") > 0
    rate = stats.get_value("dedup/seen/estimated_false_positive_rate")
    if kind == "redis":
        assert rate == 0.0
    else:
        assert 0.0 < rate < 1e-20  # 3 keys in a filter sized for 100,000


def test_spider_closed_signal_closes_without_close_call(kind, base_settings, tmp_path):
    """scrapy-redis's scheduler never calls close(): the spider_closed signal does the close work."""
    from scrapy import signals

    crawler = get_crawler(SimpleSpider, settings_dict={**base_settings, "JOBDIR": str(tmp_path)})
    spider = SimpleSpider.from_crawler(crawler)
    dupefilter = CLASSES[kind].from_spider(spider)  # as scrapy_redis.scheduler.Scheduler.open does
    assert not dupefilter.request_seen(Request("http://a.test/1"))  # no open() call either
    crawler.signals.send_catch_log(signals.spider_closed, spider=spider, reason="finished")
    assert crawler.stats.get_value("dedup/seen/new") == 1
    if kind == "bloom":
        assert (tmp_path / "seen.bloom").exists()


def test_clear_forgets_everything(base_settings):
    dupefilter = get_dupefilter(settings=base_settings)
    request = Request("http://a.test/1")
    assert not dupefilter.request_seen(request)
    dupefilter.clear()  # scrapy-redis's scheduler flush
    assert not dupefilter.request_seen(request)
    dupefilter.close("finished")


# --- Bloom checkpoints (Scrapy's truncated-file test, re-expressed) ---------------------------

def _bloom_jobdir(tmp_path, urls) -> None:
    df = get_dupefilter(settings={"DUPEFILTER_CLASS": BloomDupeFilter, "JOBDIR": str(tmp_path),
                                  "DEDUP_BLOOM_CAPACITY": 10_000})
    for url in urls:
        df.request_seen(Request(url))
    df.close("finished")


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_corrupt_checkpoint_refuses_to_start_by_default(tmp_path, caplog, damage):
    _bloom_jobdir(tmp_path, [f"http://a.test/{i}" for i in range(100)])
    path = tmp_path / "seen.bloom"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 7] if damage == "truncate" else data[:-100] + b"\xff" + data[-99:])
    crawler = get_crawler(SimpleSpider, settings_dict={"DUPEFILTER_CLASS": BloomDupeFilter, "JOBDIR": str(tmp_path),
                                                       "DEDUP_BLOOM_CAPACITY": 10_000})
    with caplog.at_level(logging.ERROR, logger=LOGGER), pytest.raises(CheckpointError):
        Scheduler.from_crawler(crawler)
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1
    assert str(path) in errors[0] and "DEDUP_BLOOM_ON_CORRUPT" in errors[0]
    assert ("truncated" if damage == "truncate" else "checksum") in errors[0]
    assert crawler.stats.get_value("dedup/seen/checkpoint_errors") == 1
    assert path.exists()  # left alone for the user to restore


@pytest.mark.parametrize("damage", ["truncate", "unreadable"])
def test_corrupt_checkpoint_starts_empty_when_allowed(tmp_path, caplog, damage):
    _bloom_jobdir(tmp_path, ["http://a.test/1"])
    # Without the frontier journal (a JOBDIR from before it existed): with it, the request, still pending
    # in the queue of the run that admitted it, would stay seen (tests/test_fault_jobdir_kills.py).
    (tmp_path / "dedup-frontier.journal").unlink()
    path = tmp_path / "seen.bloom"
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:100])
    else:  # open() fails (a directory in its place: unreadable even for root, unlike a file of mode 000)
        path.unlink()
        path.mkdir()
    crawler = get_crawler(SimpleSpider, settings_dict={"DUPEFILTER_CLASS": BloomDupeFilter, "JOBDIR": str(tmp_path),
                                                       "DEDUP_BLOOM_CAPACITY": 10_000,
                                                       "DEDUP_BLOOM_ON_CORRUPT": "empty"})
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        df = get_dupefilter(crawler=crawler)
    assert not df.request_seen(Request("http://a.test/1"))  # empty: seen again as new
    assert crawler.stats.get_value("dedup/seen/checkpoint_errors") == 1
    assert any("EMPTY" in r.getMessage() for r in caplog.records if r.levelname == "ERROR")
    assert len(list(tmp_path.glob("seen.bloom.corrupt-*"))) == 1
    df.close("finished")
    assert len(BloomSeenSet.load(path)) == 1  # the new checkpoint is good again


@contextlib.contextmanager
def unrenamable(directory):
    """``directory`` with nothing renamable in it: read-only for a user, immutable (``chattr +i``) for root,
    who may rename in a read-only directory; skipped where neither holds."""
    probe = directory / "probe"
    probe.write_bytes(b"")
    if os.geteuid() == 0:
        locked = shutil.which("chattr") and subprocess.run(["chattr", "+i", str(directory)]).returncode == 0
        unlock = ["chattr", "-i", str(directory)]
    else:
        directory.chmod(0o555)
        locked, unlock = True, None
    try:
        try:
            os.replace(probe, directory / "probe2")
        except OSError:
            pass
        else:
            locked = False
        if not locked:
            pytest.skip("cannot make a directory whose files cannot be renamed here")
        yield directory
    finally:
        if unlock:
            subprocess.run(unlock)
        directory.chmod(0o755)


def test_corrupt_checkpoint_in_a_read_only_directory_starts_empty_when_allowed(tmp_path, caplog):
    """The bad file cannot be set aside: logged, counted, the start goes on (the next checkpoint replaces it)."""
    _bloom_jobdir(tmp_path, ["http://a.test/1"])
    # as in the test above, a journal without the request; one there, since none can be created in the directory
    (tmp_path / "dedup-frontier.journal").write_bytes(MAGIC)
    path = tmp_path / "seen.bloom"
    path.write_bytes(path.read_bytes()[:100])
    crawler = get_crawler(SimpleSpider, settings_dict={"DUPEFILTER_CLASS": BloomDupeFilter, "JOBDIR": str(tmp_path),
                                                       "DEDUP_BLOOM_CAPACITY": 10_000,
                                                       "DEDUP_BLOOM_ON_CORRUPT": "empty"})
    with unrenamable(tmp_path), caplog.at_level(logging.ERROR, logger=LOGGER):
        df = get_dupefilter(crawler=crawler)
        assert not df.request_seen(Request("http://a.test/1"))  # empty: seen again as new
        assert path.exists() and not list(tmp_path.glob("seen.bloom.corrupt-*"))
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "EMPTY" in errors[0] and f"cannot be renamed (a read-only directory?): it stays as " \
        f"{path}" in errors[0]
    assert crawler.stats.get_value("dedup/seen/checkpoint_errors") == 1
    df.close("finished")
    assert len(BloomSeenSet.load(path)) == 1  # the directory writable again: the checkpoint replaced the bad file


def test_resumed_checkpoint_keeps_its_own_sizing(tmp_path, caplog):
    _bloom_jobdir(tmp_path, ["http://a.test/1"])
    crawler = get_crawler(SimpleSpider, settings_dict={"DUPEFILTER_CLASS": BloomDupeFilter, "JOBDIR": str(tmp_path),
                                                       "DEDUP_BLOOM_CAPACITY": 50_000})
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        df = get_dupefilter(crawler=crawler)
    assert df.store.capacity == 10_000
    assert any("DEDUP_BLOOM_CAPACITY=10000" in r.getMessage() for r in caplog.records)
    assert df.request_seen(Request("http://a.test/1"))
    df.close("finished")


@pytest_twisted.inlineCallbacks
def test_periodic_checkpoint_on_the_clock_while_the_spider_is_open(tmp_path):
    crawler = get_crawler(SimpleSpider, settings_dict={"DUPEFILTER_CLASS": BloomDupeFilter, "JOBDIR": str(tmp_path),
                                                       "DEDUP_BLOOM_CAPACITY": 10_000, "DEDUP_CHECKPOINT_SECONDS": 0.05})
    df = get_dupefilter(crawler=crawler)
    crawler.signals.send_catch_log(signals.spider_opened, spider=Spider("clock"))
    path = tmp_path / "seen.bloom"
    for i in range(100):
        df.request_seen(Request(f"http://a.test/{i}"))
    yield deferLater(reactor, 0.2, lambda: None)
    assert len(BloomSeenSet.load(path)) == 100  # written by the clock, before close
    df.request_seen(Request("http://a.test/last"))
    df.close("finished")
    assert len(BloomSeenSet.load(path)) == 101
    assert not df._clock.running


# --- Redis specifics ----------------------------------------------------------------------------

@pytest.mark.redis
@pytest.mark.parametrize("cls", [RedisDupeFilter, RedisBloomDupeFilter])
def test_redis_open_logs_what_the_key_holds_with_the_password_masked(cls, caplog, tmp_path):
    server = RedisServer(password="s3cret-pw").start()
    try:
        settings = {"DUPEFILTER_CLASS": cls, "DEDUP_REDIS_URL": server.url, "DEDUP_BLOOM_CAPACITY": 10_000}
        with caplog.at_level(logging.INFO, logger=LOGGER):
            df = get_dupefilter(settings=settings)
            df.request_seen(Request("http://a.test/1"))
            df.request_seen(Request("http://a.test/2"))
            df.close("finished")
            df2 = get_dupefilter(settings=settings)
            df2.close("finished")
        text = "\n".join(r.getMessage() for r in caplog.records)
        assert "s3cret-pw" not in text
        assert "***" in text
        last = [r.getMessage() for r in caplog.records if "already holds" in r.getMessage()]
        assert len(last) == 1 and "dedup:simple:seen" in last[0] and "DEDUP_REDIS_FLUSH_ON_START" in last[0]
        assert " 2 fingerprints" in last[0]
    finally:
        server.stop()


@pytest.mark.redis
@pytest.mark.parametrize("cls", [RedisDupeFilter, RedisBloomDupeFilter])
def test_redis_key_template_persist_flush_and_ttl(cls, redis_url, redis_client):
    settings = {"DUPEFILTER_CLASS": cls, "DEDUP_REDIS_URL": redis_url, "DEDUP_BLOOM_CAPACITY": 10_000,
                "DEDUP_REDIS_KEY": "crawl:%(spider)s:fps", "DEDUP_REDIS_TTL": 3600}
    df = get_dupefilter(settings=settings)
    df.request_seen(Request("http://a.test/1"))
    df.close("finished")
    names = df.store.data_keys()
    assert all("crawl:simple:fps" in name for name in names)
    assert redis_client.exists(*names) == len(names)  # persisted by default
    assert all(0 < redis_client.ttl(name) <= 3600 for name in names)

    df = get_dupefilter(settings={**settings, "DEDUP_REDIS_FLUSH_ON_START": True})
    assert not df.request_seen(Request("http://a.test/1"))  # flushed at open
    df.close("finished")

    df = get_dupefilter(settings={**settings, "DEDUP_REDIS_PERSIST": False})
    assert df.request_seen(Request("http://a.test/1"))
    df.close("finished")
    assert not redis_client.keys("*crawl:*")


@pytest.mark.redis
@pytest.mark.parametrize("cls", [RedisDupeFilter, RedisBloomDupeFilter])
def test_a_lost_reply_never_loses_the_request(cls, redis_server, redis_url, redis_client):
    """The add ran in Redis but its reply was lost: the retry says "seen", yet the request is fetched."""
    proxy = LossyProxy("127.0.0.1", redis_server.port)
    settings = {"DUPEFILTER_CLASS": cls, "DEDUP_REDIS_URL": redis_url.replace(f":{redis_server.port}/",
                                                                              f":{proxy.port}/"),
                "DEDUP_BLOOM_CAPACITY": 10_000}
    try:
        df = get_dupefilter(settings=settings)
        assert not df.request_seen(Request("http://a.test/1"))
        proxy.drop_next_reply()
        assert not df.request_seen(Request("http://a.test/2"))  # Redis added it; the retry answered "seen"
        assert proxy.dropped == 1
        assert df.stats.get_value("dedup/redis/errors") == 1
        assert df.stats.get_value("dedup/redis/retried_seen_kept") == 1
        assert df.request_seen(Request("http://a.test/2"))  # from now on a plain duplicate
        other = get_dupefilter(settings={**settings, "DEDUP_REDIS_URL": redis_url})
        assert other.request_seen(Request("http://a.test/2"))  # it did reach Redis the first time
        assert not df.request_seen(Request("http://a.test/3"))
        assert df.stats.get_value("dedup/redis/retried_seen_kept") == 1
        other.close("finished")
        df.close("finished")
    finally:
        proxy.close()


@pytest.mark.redis
def test_redis_bloom_layout_mismatch_fails_naming_settings(redis_url):
    settings = {"DUPEFILTER_CLASS": RedisBloomDupeFilter, "DEDUP_REDIS_URL": redis_url}
    get_dupefilter(settings={**settings, "DEDUP_BLOOM_CAPACITY": 10_000}).close("finished")
    with pytest.raises(ValueError, match="DEDUP_BLOOM_CAPACITY"):
        get_dupefilter(settings={**settings, "DEDUP_BLOOM_CAPACITY": 20_000})


def test_bad_settings_fail_at_start_naming_the_setting(redis_url):
    with pytest.raises(DedupConfigError, match="DEDUP_BLOOM_ERROR_RATE"):
        get_dupefilter(settings={"DUPEFILTER_CLASS": BloomDupeFilter, "DEDUP_BLOOM_ERROR_RATE": 2})
    with pytest.raises(DedupConfigError, match="DEDUP_REDIS_KEY"):
        get_dupefilter(settings={"DUPEFILTER_CLASS": RedisDupeFilter, "DEDUP_REDIS_URL": redis_url,
                                 "DEDUP_REDIS_KEY": "x:%(name)s"})
    with pytest.raises(DedupConfigError, match="DEDUP_REDIS_BLOOM_SHARDS"):
        get_dupefilter(settings={"DUPEFILTER_CLASS": RedisBloomDupeFilter, "DEDUP_REDIS_URL": redis_url,
                                 "DEDUP_BLOOM_CAPACITY": 10**10})


@pytest.mark.redis
@pytest.mark.parametrize("cls", [RedisDupeFilter, RedisBloomDupeFilter])
def test_the_flush_at_start_names_the_keys_it_really_deleted(cls, redis_url, redis_client, caplog):
    """A sharded Bloom filter lives in {key:i} strings and a layout hash, not in the key the setting names."""
    settings = {"DUPEFILTER_CLASS": cls, "DEDUP_REDIS_URL": redis_url, "DEDUP_BLOOM_CAPACITY": 10_000,
                "DEDUP_REDIS_BLOOM_SHARDS": 2}
    df = get_dupefilter(settings=settings)
    df.request_seen(Request("http://a.test/1"))
    df.close("finished")
    written = sorted(k.decode() for k in redis_client.keys("*"))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        df = get_dupefilter(settings={**settings, "DEDUP_REDIS_FLUSH_ON_START": True})
        df.request_seen(Request("http://a.test/2"))
        df.close("finished")
    line = [r.getMessage() for r in caplog.records if "deleted at start" in r.getMessage()]
    assert len(line) == 1
    assert all(repr(key) in line[0] for key in written), (written, line)


def test_the_local_bloom_filter_is_sized_to_the_crawl_and_says_its_memory(tmp_path, caplog):
    """Unset, DEDUP_BLOOM_CAPACITY no longer allocates 37 MiB for any crawl: the filter starts at 0.4 MiB and grows,
    its rate kept; given, it sizes the filter. Its memory is in the log at start and at close."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    df = get_dupefilter(settings={"DUPEFILTER_CLASS": BloomDupeFilter})
    assert df.store.size_bytes() < 2**20
    for i in range(250_000):  # past the start: it grows
        df.store.add(hashlib.sha1(b"%d" % i).digest())
    assert len(df.store.slices) > 1 and df.store.expected_false_positive_rate() < 1e-6
    df.close("finished")
    start, close = [r.getMessage() for r in caplog.records if "local Bloom filter" in r.getMessage()
                    or " at close: " in r.getMessage()]
    assert "0 keys, sized for 100,000 at 1e-06" in start and "0.4 MiB" in start and "DEDUP_BLOOM_CAPACITY" in start
    assert "250,000 keys" in close and "in 2 slices" in close and "MiB" in close
    sized = get_dupefilter(settings={"DUPEFILTER_CLASS": BloomDupeFilter, "DEDUP_BLOOM_CAPACITY": 2_000})
    assert sized.store.capacity == 2_000 and sized.store.size_bytes() < 10_000
    sized.close("finished")


def test_a_resumed_filter_of_the_default_sizing_does_not_warn(tmp_path, caplog):
    settings = {"DUPEFILTER_CLASS": BloomDupeFilter, "JOBDIR": str(tmp_path)}
    df = get_dupefilter(settings=settings)
    df.request_seen(Request("http://example.com/a"))
    df.close("finished")
    caplog.set_level(logging.WARNING, logger=LOGGER)
    again = get_dupefilter(settings=settings)
    assert again.request_seen(Request("http://example.com/a"))
    again.close("finished")
    assert not [r for r in caplog.records if "DEDUP_BLOOM_CAPACITY" in r.getMessage()]
