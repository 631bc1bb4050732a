"""One crawler process of the concurrency tests: ``python -m tests.reliability_worker SITE_URL OUT.json SETTINGS_JSON``.

Crawls :class:`tests.reliabilitysite.LinkedSite` at ``SITE_URL`` with
:class:`scrapy.crawler.CrawlerProcess` (its own reactor, its own process) and
writes the kept items' paths and the stats to ``OUT.json``. Several of these
run at once against one Redis (or one Redis Cluster) in the tests.
"""
from __future__ import annotations

import json
import os
import sys
import time

from scrapy import signals
from scrapy.crawler import CrawlerProcess

from tests.reliabilitysite import LinkedSpider
from tests.support.crawl import BASE_SETTINGS


def main(site_url: str, out: str, settings_json: str) -> None:
    settings = {**BASE_SETTINGS, "LOG_LEVEL": "WARNING", **json.loads(settings_json)}
    process = CrawlerProcess(settings, install_root_handler=True)
    crawler = process.create_crawler(LinkedSpider)
    kept: list[str] = []
    crawler.signals.connect(lambda item, **kw: kept.append(item["path"]), signal=signals.item_scraped, weak=False)
    process.crawl(crawler, start_urls=[site_url])
    # a start barrier: every process is imported and configured before any crawls, so they truly race
    open(out + ".ready", "w").close()
    go = os.path.join(os.path.dirname(out), "go")
    deadline = time.monotonic() + 60
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.01)
    process.start()
    stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, float, str))}
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"kept": kept, "stats": stats}, f)


if __name__ == "__main__":
    main(*sys.argv[1:4])
