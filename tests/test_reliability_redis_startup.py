"""A Redis that cannot be reached when the crawl starts: a bounded wait, one ERROR line, the documented reason.

Real Scrapy crawls of a real local site, with the Redis URL (a password in it)
pointing at a loopback port nobody listens on, for both Redis dupefilters under
Scrapy's scheduler and for ``AckPriorityQueue`` under scrapy-redis's. Before,
the dupefilter waited ``DEDUP_REDIS_RETRY_SECONDS`` and raised from its
``open()`` inside Scrapy's engine start, which logged a cascade of tracebacks
and closed with the reason ``shutdown``; the queue raised redis-py's
``ConnectionError`` from the same place.
"""
from __future__ import annotations

import logging
import time

import pytest
from pytest_twisted import inlineCallbacks

from scrapy_dedup._util.redis_policy import CLOSE_REASON
from tests.reliabilitysite import LinkedSite, LinkedSpider
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite
from tests.support.redis_server import free_port

pytestmark = [pytest.mark.crawl]

PASSWORD = "St4rt-Pa55w0rd-91b3"

SETUPS = {
    "exact": {"DUPEFILTER_CLASS": "scrapy_dedup.RedisDupeFilter", "URL_SETTING": "DEDUP_REDIS_URL"},
    "bloom": {"DUPEFILTER_CLASS": "scrapy_dedup.RedisBloomDupeFilter", "URL_SETTING": "DEDUP_REDIS_URL",
              "DEDUP_BLOOM_CAPACITY": 100_000},
    "queue": {"SCHEDULER": "scrapy_dedup.redis_queue.AckScheduler", "SCHEDULER_PERSIST": True,
              "SCHEDULER_QUEUE_CLASS": "scrapy_dedup.redis_queue.AckPriorityQueue",
              "DUPEFILTER_CLASS": "scrapy_dedup.RedisDupeFilter", "URL_SETTING": "REDIS_URL"},
}


@pytest.mark.parametrize("setup", list(SETUPS))
@pytest.mark.filterwarnings("ignore:Passing a 'spider' argument:scrapy.exceptions.ScrapyDeprecationWarning")  # scrapy-redis
@inlineCallbacks
def test_an_unreachable_redis_at_start_closes_the_spider_with_one_error_line(setup, caplog):
    if setup == "queue":
        pytest.importorskip("scrapy_redis")
    caplog.set_level(logging.DEBUG)
    settings = dict(SETUPS[setup])
    url_setting = settings.pop("URL_SETTING")
    settings.update({"ADDONS": {"scrapy_dedup.Addon": 0}, "DEDUP_REDIS_STARTUP_SECONDS": 2,
                     url_setting: f"redis://:{PASSWORD}@127.0.0.1:{free_port()}/0"})
    started = time.monotonic()
    with LocalSite(LinkedSite(pages=3, near=0)) as site:
        crawler = yield run_crawl(LinkedSpider, settings, start_urls=[site.url("site.test")])
        assert not site.hits  # nothing was fetched
    assert time.monotonic() - started < 20
    assert crawler.stats.get_value("finish_reason") == CLOSE_REASON
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].name.startswith("scrapy_dedup"), [r.getMessage() for r in errors]
    line = errors[0].getMessage()
    assert "redis://:***@127.0.0.1" in line and url_setting in line and "DEDUP_REDIS_STARTUP_SECONDS" in line
    assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
    assert PASSWORD not in "\n".join(r.getMessage() for r in caplog.records)
    assert PASSWORD not in repr(crawler.stats.get_stats())
