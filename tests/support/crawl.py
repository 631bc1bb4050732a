"""Run a real Scrapy crawl in the test's reactor (pytest-twisted)."""
from __future__ import annotations

from typing import Any

import scrapy
from scrapy import signals
from scrapy.crawler import Crawler, CrawlerRunner
from twisted.internet.defer import inlineCallbacks

from tests.support.localsite import install_loopback_resolver

BASE_SETTINGS: dict[str, Any] = {
    "TELNETCONSOLE_ENABLED": False,
    "ROBOTSTXT_OBEY": False,
    "LOG_LEVEL": "INFO",
    "CONCURRENT_REQUESTS": 8,
    "DOWNLOAD_DELAY": 0,
    "RETRY_ENABLED": False,
    "COOKIES_ENABLED": False,
}


class LinkSpider(scrapy.Spider):
    """Yields an item per page and follows every link of it."""

    name = "links"

    def parse(self, response):
        yield {"url": response.url}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)


@inlineCallbacks
def run_crawl(spidercls, settings: dict[str, Any] | None = None, **spider_kwargs) -> Crawler:
    """Crawl with ``spidercls`` until it closes; return the crawler (stats, spider)."""
    install_loopback_resolver()
    runner = CrawlerRunner({**BASE_SETTINGS, **(settings or {})})
    crawler = runner.create_crawler(spidercls)
    crawler.items = []  # every item that left the pipelines, in order
    crawler.signals.connect(lambda item, **kw: crawler.items.append(item), signal=signals.item_scraped, weak=False)
    yield crawler.crawl(**spider_kwargs)
    return crawler


def refusal_in(error: BaseException | None) -> BaseException:
    """The start-up refusal of scrapy-dedup (``RedisStartupError``) in the chain of a failed crawl's exception.

    Refused where Scrapy builds the scheduler and its dupefilter (before its engine has a slot), the crawl fails
    with Scrapy's own error of closing that engine ("Engine slot not assigned"), ours as its context."""
    from scrapy_dedup._util.redis_policy import RedisStartupError

    while error is not None and not isinstance(error, RedisStartupError):
        error = error.__cause__ or error.__context__
    assert error is not None, "the crawl failed, but not for a RedisStartupError"
    return error
