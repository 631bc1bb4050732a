"""A crawl in its own process, for the stop/resume and kill tests (``python -m tests.faultcrawl CONFIG``).

The test starts this script, signals it (SIGINT, SIGTERM, SIGKILL) while it
crawls a :class:`ResumeSite`, and starts it again with the same config. What
the test reads afterwards:

* ``kept_file``: one JSON line per item that left every pipeline (written and
  flushed per item, so it survives a SIGKILL up to the last whole line);
* ``parsed_file``: one line per response the spider's callback received (flushed per line);
* ``stats_file``: the crawler's stats at ``spider_closed`` (graceful stops only).

Start requests are ordinary requests (``dont_filter=False``): a resumed crawl
must not fetch the start page again either.
"""
from __future__ import annotations

import json
import random
import sys
from typing import Any

import scrapy
from scrapy import signals
from scrapy.crawler import CrawlerProcess

from tests import textgen


class ResumeSite:
    """An index, ``lists`` list pages in a chain, unique articles and their near-duplicates.

    List pages ``0 .. lists/2 - 1`` link the originals ``/a/<i>``; list pages
    ``lists/2 ..`` link one near duplicate ``/b/<i>`` of each (one word edited), so a
    crawl stopped half-way has kept originals whose near duplicates come after the stop.
    Every response is delayed by ``delay`` seconds so a signal lands mid-crawl.
    """

    def __init__(self, lists: int = 10, per_list: int = 5, delay: float = 0.05, seed: int = 11,
                 extra_links: int = 0):
        import time

        self.time = time
        self.lists, self.per_list, self.delay = lists, per_list, delay
        self.extra_links = extra_links  # links back to "/" on each article: dupefilter traffic, no new page
        rng = random.Random(seed)
        self.originals: dict[str, str] = {}
        self.near: dict[str, str] = {}
        originals = (lists // 2) * per_list
        for i in range(originals):
            words = textgen.article_words(rng, 220)
            self.originals[f"/a/{i}"] = " ".join(words)
            self.near[f"/b/{i}"] = " ".join(textgen.edit_words(words, rng, 1))

    def paths(self) -> list[str]:
        return ["/", *(f"/list/{k}" for k in range(self.lists)), *self.originals, *self.near]

    def list_links(self, k: int) -> list[str]:
        half = self.lists // 2
        ids = range((k % half) * self.per_list, (k % half + 1) * self.per_list)
        prefix = "/a/" if k < half else "/b/"
        nxt = [f"/list/{k + 1}"] if k + 1 < self.lists else []
        return nxt + [f"{prefix}{i}" for i in ids]  # the next list first: LIFO queues take the articles first

    def route(self, host: str, path: str):
        from tests.support.localsite import Page

        self.time.sleep(self.delay)
        if path == "/":
            return Page('<html><body><a href="/list/0">start</a></body></html>')
        if path.startswith("/list/"):
            k = int(path.rsplit("/", 1)[1])
            if k >= self.lists:
                return None
            links = "".join(f'<li><a href="{href}">{href}</a></li>' for href in self.list_links(k))
            return Page(f"<html><body><h1>List {k}</h1><ul>{links}</ul></body></html>")
        text = self.originals.get(path) or self.near.get(path)
        if text is None:
            return None
        back = '<a href="/">home</a>' * self.extra_links
        return Page(f"<html><head><title>Article</title></head><body><article><p>{text}</p></article>"
                    f"{back}</body></html>")


class FollowSpider(scrapy.Spider):
    name = "faultcrawl"

    def __init__(self, start_url: str = "", parsed_file: str = "", follow: str = "all", **kwargs: Any):
        super().__init__(**kwargs)
        self.start_url = start_url
        self.follow = follow  # "all" pages' links, or "index": only the start page's (big pages stay unparsed)
        self.parsed = open(parsed_file, "a", encoding="utf-8") if parsed_file else None  # noqa: SIM115

    async def start(self):  # Scrapy >= 2.13
        for request in self.start_requests():
            yield request

    def start_requests(self):
        yield scrapy.Request(self.start_url)  # not dont_filter: a resumed crawl skips it too

    def parse(self, response):
        if self.parsed is not None:  # every page the spider saw, flushed per line (survives SIGKILL)
            self.parsed.write(response.url + "\n")
            self.parsed.flush()
        if "/a/" in response.url or "/b/" in response.url or self.follow == "index":
            yield {"url": response.url}
        if self.follow == "all" or response.url == self.start_url:
            for href in response.css("a::attr(href)").getall():
                try:
                    yield response.follow(href)
                except ValueError:  # Scrapy refuses some hostile links itself (e.g. "http://[::1")
                    self.logger.info("Scrapy refused the link %r", href)


class KeptItems:
    """Append every item that left the pipelines to ``FAULTCRAWL_KEPT_FILE`` (flushed per line)."""

    def __init__(self, path: str):
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed at spider close

    @classmethod
    def from_crawler(cls, crawler):
        pipeline = cls(crawler.settings["FAULTCRAWL_KEPT_FILE"])
        crawler.signals.connect(pipeline.close, signal=signals.spider_closed)
        return pipeline

    def close(self, spider=None) -> None:
        self.file.close()

    def process_item(self, item, spider=None):
        self.file.write(json.dumps(dict(item)) + "\n")
        self.file.flush()
        return item


def _kill_between_seen_and_push_scheduler():
    """scrapy-redis's scheduler, SIGKILLing its own process at the point its two Redis calls used to leave open.

    For the request whose path is ``FAULTCRAWL_KILL_AFTER_SEEN`` it runs
    ``enqueue_request`` as scrapy-redis does up to the dupefilter's answer, and
    when that is "not seen" it kills the process before ``queue.push``: with the
    two-call path the request is then marked seen in Redis and not queued; with
    the one-step path (``AckPriorityQueue`` paired with the dupefilter) the answer
    came from the script that marked it and queued it. Built lazily: scrapy-redis
    is only needed by the tests that use it.
    """
    import os
    import signal as signals_module
    from urllib.parse import urlsplit

    from scrapy_redis.scheduler import Scheduler

    class KillBetweenSeenAndPush(Scheduler):
        @classmethod
        def from_crawler(cls, crawler):
            scheduler = super().from_crawler(crawler)
            scheduler.kill_path = crawler.settings.get("FAULTCRAWL_KILL_AFTER_SEEN")
            return scheduler

        def enqueue_request(self, request):
            if request.dont_filter or urlsplit(request.url).path != self.kill_path:
                return super().enqueue_request(request)
            if self.df.request_seen(request):
                self.df.log(request, self.spider)
                return False
            os.kill(os.getpid(), signals_module.SIGKILL)  # scrapy-redis would now call self.queue.push(request)

    return KillBetweenSeenAndPush


def __getattr__(name: str):  # "tests.faultcrawl.KillBetweenSeenAndPush" as a SCHEDULER setting
    if name == "KillBetweenSeenAndPush":
        return _kill_between_seen_and_push_scheduler()
    raise AttributeError(name)


def peak_rss_kb() -> int:
    """Peak resident memory of this process image (VmHWM: unlike ru_maxrss it does not count the
    parent's pages the child had between fork and exec)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def main(config_path: str) -> None:
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    settings = {
        "TELNETCONSOLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "RETRY_ENABLED": False,
        "COOKIES_ENABLED": False,
        "LOG_LEVEL": "INFO",
        "ADDONS": {"scrapy_dedup.Addon": 0},
        "ITEM_PIPELINES": {"tests.faultcrawl.KeptItems": 900},
        "FAULTCRAWL_KEPT_FILE": config["kept_file"],
        **config.get("settings", {}),
    }
    process = CrawlerProcess(settings, install_root_handler=True)
    crawler = process.create_crawler(FollowSpider)

    def dump_stats(spider, reason):
        with open(config["stats_file"], "w", encoding="utf-8") as out:
            stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, float, str))}
            json.dump({**stats, "finish_reason": reason, "peak_rss_kb": peak_rss_kb()}, out)

    crawler.signals.connect(dump_stats, signal=signals.spider_closed)
    process.crawl(crawler, start_url=config["start_url"], parsed_file=config.get("parsed_file", ""),
                  **config.get("spider_args", {}))
    process.start()


if __name__ == "__main__":
    main(sys.argv[1])
