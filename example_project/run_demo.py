#!/usr/bin/env python
"""The scrapy-dedup demo: serve the example site on loopback, crawl it, end with the report.

    python example_project/run_demo.py              # crawl with scrapy-dedup (the add-on in store/settings.py)
    python example_project/run_demo.py --no-dedup   # the same crawl with plain Scrapy, to compare
    python example_project/run_demo.py --output items.jsonl

The site (``demosite``) is generated from a fixed seed and served by a real HTTP
server on 127.0.0.1 (a free port), dispatching on the Host header; the spider's
``*.test`` host names resolve to 127.0.0.1 through ``store.resolver``. The crawl logs
at INFO and ends with scrapy-dedup's duplication report. Exit status: 0 when the
crawl finished, 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-dedup", action="store_true",
                        help="plain Scrapy: no scrapy-dedup add-on (for comparison and benchmarks)")
    parser.add_argument("--output", metavar="FILE", help="write the scraped items to FILE as JSON lines")
    parser.add_argument("--port", type=int, default=0,
                        help="port of the example site on 127.0.0.1 (default: a free one)")
    parser.add_argument("--site-in-thread", action="store_true",
                        help="serve the site from a thread of this process instead of a child process")
    parser.add_argument("--stats-json", metavar="FILE",
                        help="write the crawl's final stats to FILE as JSON, with run_demo/crawl_cpu_seconds: "
                             "the CPU time of the crawling process (without the site's, unless --site-in-thread), "
                             "and run_demo/spider_cpu_seconds: its CPU time from spider_opened to spider_closed")
    parser.add_argument("--dump-stats", action="store_true",
                        help="also log Scrapy's stats dump after the report (on by default with --no-dedup)")
    parser.add_argument("-s", "--set", metavar="NAME=VALUE", action="append", default=[],
                        help="override a setting, as with `scrapy crawl -s` (repeatable)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    output = Path(args.output).resolve() if args.output else None
    stats_json = Path(args.stats_json).resolve() if args.stats_json else None
    # Run as the Scrapy project in this directory: scrapy.cfg, store.settings, demosite.
    os.chdir(HERE)
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    os.environ["SCRAPY_SETTINGS_MODULE"] = "store.settings"

    from scrapy import signals
    from scrapy.crawler import CrawlerProcess
    from scrapy.utils.project import get_project_settings

    from demosite import SiteProcess, SiteServer, load

    settings = get_project_settings()
    if args.no_dedup:
        settings.set("ADDONS", {}, priority="cmdline")
        settings.set("DEDUP_ENABLED", False, priority="cmdline")
    if not args.no_dedup and not args.dump_stats:
        # the duplication report shows the numbers that matter; without the stats
        # dump it is the last block of the log
        settings.set("STATS_DUMP", False, priority="cmdline")
    if output is not None:
        settings.set("FEEDS", {str(output): {"format": "jsonlines", "overwrite": True, "encoding": "utf-8"}},
                     priority="cmdline")
    for pair in args.set:
        name, sep, value = pair.partition("=")
        if not sep:
            print(f"--set expects NAME=VALUE, got {pair!r}", file=sys.stderr)
            return 2
        settings.set(name.strip(), value, priority="cmdline")

    truth = load()
    # The site runs in a child process by default, so the crawl's CPU time is the crawl's own.
    with (SiteServer(args.port) if args.site_in_thread else SiteProcess(args.port)) as server:
        print(f"Example site on 127.0.0.1:{server.port}: {len(truth['pages'])} URLs on "
              f"{len(truth['hosts'])} hosts ({', '.join(truth['hosts'])}); what each holds: "
              f"example_project/demosite/truth.json; crawling {'without' if args.no_dedup else 'with'} scrapy-dedup",
              flush=True)
        cpu_start = time.process_time()
        process = CrawlerProcess(settings)
        crawler = process.create_crawler("store")
        # CPU time between spider_opened and spider_closed: the crawl itself, without
        # start-up (imports, component construction) and shutdown
        cpu_marks: dict[str, float] = {}

        def mark_opened(spider: object) -> None:
            cpu_marks["opened"] = time.process_time()

        def mark_closed(spider: object) -> None:
            cpu_marks["closed"] = time.process_time()

        crawler.signals.connect(mark_opened, signal=signals.spider_opened)
        crawler.signals.connect(mark_closed, signal=signals.spider_closed)
        process.crawl(crawler, port=server.port)
        process.start()
        crawl_cpu = time.process_time() - cpu_start
    stats = dict(crawler.stats.get_stats()) if crawler.stats else {}
    # CPU time of this (crawling) process only: the site runs in its own process
    stats["run_demo/crawl_cpu_seconds"] = round(crawl_cpu, 3)
    if "opened" in cpu_marks and "closed" in cpu_marks:
        stats["run_demo/spider_cpu_seconds"] = round(cpu_marks["closed"] - cpu_marks["opened"], 3)
    if stats_json is not None:
        stats_json.write_text(json.dumps(stats, indent=1, sort_keys=True, default=str) + "\n", encoding="utf-8")
    reason = stats.get("finish_reason")
    return 0 if reason == "finished" else 1


if __name__ == "__main__":
    sys.exit(main())
