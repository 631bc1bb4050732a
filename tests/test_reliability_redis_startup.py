"""A Redis that cannot be reached when the crawl starts: a start-up failure, under either outage policy.

Real Scrapy crawls of a real local site, with the Redis URL (a password in it) pointing at a
loopback port nobody listens on: the start fails after ``DEDUP_REDIS_STARTUP_SECONDS`` with one
ERROR line naming the masked server and the setting its URL came from, nothing is fetched, and
``scrapy crawl`` exits with a non-zero status. For every Redis component: the Redis content index
(``DEDUP_CONTENT_BACKEND = "redis"``), both Redis dupefilters, scrapy-redis's scheduler and
``AckScheduler``/``AckPriorityQueue``, under ``retry`` and ``fail_open``.

Before, the content index started without a word and kept every page unjudged; the dupefilters
closed the spider with ``dedup_redis_unavailable`` under ``retry`` and crawled alone under
``fail_open``; the queue closed the spider: all with exit status 0. scrapy-redis's scheduler
exited 1 under redis-py's traceback, with no line of ours.
"""
from __future__ import annotations

import logging
import time

import pytest
import scrapy
from pytest_twisted import inlineCallbacks

from tests.reliabilitysite import LinkedSite, LinkedSpider
from tests.support.crawl import refusal_in, run_crawl
from tests.support.localsite import LocalSite, Page
from tests.support.redis_server import free_port
from tests.test_startup_errors import project, scrapy_crawl

pytestmark = [pytest.mark.crawl]

PASSWORD = "St4rt-Pa55w0rd-91b3"
POLICIES = ["retry", "fail_open"]

#: each component's own start-up check, without the add-on (whose content index would be checked first)
SETUPS = {
    "exact": {"DUPEFILTER_CLASS": "scrapy_dedup.RedisDupeFilter", "URL_SETTING": "DEDUP_REDIS_URL"},
    "bloom": {"DUPEFILTER_CLASS": "scrapy_dedup.RedisBloomDupeFilter", "URL_SETTING": "DEDUP_REDIS_URL",
              "DEDUP_BLOOM_CAPACITY": 100_000},
    "queue": {"SCHEDULER": "scrapy_dedup.redis_queue.AckScheduler", "SCHEDULER_PERSIST": True,
              "SCHEDULER_QUEUE_CLASS": "scrapy_dedup.redis_queue.AckPriorityQueue",
              "DUPEFILTER_CLASS": "scrapy_dedup.RedisDupeFilter", "URL_SETTING": "REDIS_URL"},
}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("setup", list(SETUPS))
@pytest.mark.filterwarnings("ignore:Passing a 'spider' argument:scrapy.exceptions.ScrapyDeprecationWarning")  # scrapy-redis
@inlineCallbacks
def test_an_unreachable_redis_at_start_fails_the_start_in_one_error_line(setup, policy, caplog):
    caplog.set_level(logging.DEBUG)
    settings = dict(SETUPS[setup])
    url_setting = settings.pop("URL_SETTING")
    settings.update({"DEDUP_REDIS_STARTUP_SECONDS": 1, "DEDUP_REDIS_ON_ERROR": policy,
                     url_setting: f"redis://:{PASSWORD}@127.0.0.1:{free_port()}/0"})
    started = time.monotonic()
    with LocalSite(LinkedSite(pages=3, near=0)) as site, pytest.raises(Exception) as failed:
        yield run_crawl(LinkedSpider, settings, start_urls=[site.url("site.test")])
    refused = refusal_in(failed.value)  # (Scrapy's own error closing the engine may come after it)
    assert not site.hits  # nothing was fetched
    assert time.monotonic() - started < 20
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].name.startswith("scrapy_dedup"), [r.getMessage() for r in errors]
    line = errors[0].getMessage()
    assert line == str(refused)
    assert "redis://:***@127.0.0.1" in line and f"(from {url_setting})" in line, line
    assert "DEDUP_REDIS_STARTUP_SECONDS" in line and "under either DEDUP_REDIS_ON_ERROR" in line, line
    assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
    assert PASSWORD not in "\n".join(r.getMessage() for r in caplog.records)


#: what each set-up adds to a project with the add-on (or takes away), and the setting its URL is in
PROJECT_SETUPS = {
    "content index": ('DEDUP_CONTENT_BACKEND = "redis"\n', "DEDUP_REDIS_URL"),
    "RedisDupeFilter": ('DUPEFILTER_CLASS = "scrapy_dedup.RedisDupeFilter"\n', "DEDUP_REDIS_URL"),
    "RedisBloomDupeFilter": ('DUPEFILTER_CLASS = "scrapy_dedup.RedisBloomDupeFilter"\n'
                             "DEDUP_BLOOM_CAPACITY = 100_000\n", "DEDUP_REDIS_URL"),
    "scrapy-redis scheduler": ('SCHEDULER = "scrapy_redis.scheduler.Scheduler"\n', "REDIS_URL"),
    "AckScheduler": ('SCHEDULER = "scrapy_dedup.redis_queue.AckScheduler"\nSCHEDULER_PERSIST = True\n'
                     'SCHEDULER_QUEUE_CLASS = "scrapy_dedup.redis_queue.AckPriorityQueue"\n', "REDIS_URL"),
    # without the add-on (whose content index, built with Scrapy's engine, is checked first): each one's own check
    "RedisDupeFilter alone": ('ADDONS = {}\nDUPEFILTER_CLASS = "scrapy_dedup.RedisDupeFilter"\n', "DEDUP_REDIS_URL"),
    "AckScheduler alone": ('ADDONS = {}\nSCHEDULER = "scrapy_dedup.redis_queue.AckScheduler"\n'
                           'SCHEDULER_QUEUE_CLASS = "scrapy_dedup.redis_queue.AckPriorityQueue"\n'
                           'DUPEFILTER_CLASS = "scrapy_dedup.RedisDupeFilter"\n', "REDIS_URL"),
}
PAGE = "<html><body><p>" + " ".join(f"word{i}" for i in range(80)) + "</p></body></html>"


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("setup", list(PROJECT_SETUPS))
def test_scrapy_crawl_exits_non_zero_when_redis_is_unreachable_at_start(tmp_path, setup, policy):
    lines, url_setting = PROJECT_SETUPS[setup]
    url = f"redis://:{PASSWORD}@127.0.0.1:{free_port()}/0"
    root = project(tmp_path, lines + f"{url_setting} = {url!r}\nDEDUP_REDIS_STARTUP_SECONDS = 1\n"
                                      f"DEDUP_REDIS_ON_ERROR = {policy!r}\n")
    with LocalSite({("127.0.0.1", "/"): Page(PAGE)}) as site:
        code, output = scrapy_crawl(root, "-a", f"start_url={site.url('127.0.0.1')}")
        assert not site.hits, output[-3000:]
    assert code != 0, output[-3000:]
    errors = [line for line in output.splitlines() if "] ERROR: " in line]
    assert len(errors) == 1 and "[scrapy_dedup" in errors[0], errors
    assert "cannot reach Redis at redis://:***@127.0.0.1" in errors[0] and f"(from {url_setting})" in errors[0]
    assert PASSWORD not in output
    ours = output.index(errors[0])
    assert "Traceback" not in output[:ours], output[-3000:]
    if scrapy.version_info < (2, 14):  # its `scrapy crawl` runs Twisted's CrawlerProcess, which prints its own
        assert "Traceback" not in output[ours:] or "Unhandled error in Deferred" in output[ours:]  # record after ours
    else:
        assert "Traceback" not in output, output[-3000:]


def test_the_same_project_with_redis_up_crawls_and_exits_zero(tmp_path, redis_url):
    """The control of the test above: the fleet's set-up (AckScheduler, the add-on) against a real redis-server."""
    lines, url_setting = PROJECT_SETUPS["AckScheduler"]
    root = project(tmp_path, lines + f"{url_setting} = {redis_url!r}\nDEDUP_REDIS_FLUSH_ON_START = True\n"
                                     "SCHEDULER_FLUSH_ON_START = True\n")
    with LocalSite({("127.0.0.1", "/"): Page(PAGE)}) as site:
        code, output = scrapy_crawl(root, "-a", f"start_url={site.url('127.0.0.1')}")
        assert sum(site.hits.values()) == 1, output[-3000:]
    assert code == 0, output[-3000:]
    assert "] ERROR: " not in output, output[-3000:]
