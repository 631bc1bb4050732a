"""What the report's "Fetches saved" count costs the dupefilter, per ``request_seen`` call.

    python benchmarks/bench_saved_fetches.py            # 60,000 calls, each URL once and each ten times
    python benchmarks/bench_saved_fetches.py --quick    # seconds; the smoke test runs this

``BloomDupeFilter`` with ``CanonicalRequestFingerprinter`` is built from a crawler as
Scrapy builds it and asked about ``--calls`` requests: once with the count (what the
add-on's report sets up: :class:`scrapy_dedup.seen.baseline.SavedFetches`) and once
without, each the best of three runs, in process CPU time. With every URL new, each
call computes Scrapy's fingerprint of the request (the plain key); when each URL
recurs ten times, as links found again do, nine calls in ten stop at the raw key.
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scrapy import Request, Spider  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

from scrapy_dedup.dupefilters import BloomDupeFilter  # noqa: E402
from scrapy_dedup.seen.baseline import SavedFetches  # noqa: E402


class _Spider(Spider):
    name = "bench"


def per_call_us(calls: int, recurrence: int, counting: bool) -> float:
    if "twisted.internet.reactor" not in sys.modules:  # Scrapy 2.13's get_crawler wants one installed
        from scrapy.utils.reactor import install_reactor

        install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    crawler = get_crawler(_Spider, {"REQUEST_FINGERPRINTER_CLASS": "scrapy_dedup.CanonicalRequestFingerprinter",
                                    "DEDUP_BLOOM_CAPACITY": 1_000_000})
    crawler._apply_settings()
    dupefilter = BloomDupeFilter.from_crawler(crawler)
    dupefilter.saved_fetches = SavedFetches() if counting else None
    distinct = calls // recurrence
    requests = [Request(f"http://example.com/a/{i % distinct}?x={i % distinct}&utm_source=z") for i in range(calls)]
    started = time.process_time()
    for request in requests:
        dupefilter.request_seen(request)
    return (time.process_time() - started) / calls * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=60_000)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.calls = 2_000
    logging.disable(logging.WARNING)
    print(f"bench_saved_fetches: {args.calls:,} request_seen calls, best of 3, CPU time")
    print(f"{'each URL':>10} {'without (us)':>13} {'with (us)':>10} {'cost (us)':>10}")
    for recurrence in (1, 10):
        without = min(per_call_us(args.calls, recurrence, False) for _ in range(3))
        with_count = min(per_call_us(args.calls, recurrence, True) for _ in range(3))
        print(f"{recurrence:>9}x {without:13.1f} {with_count:10.1f} {with_count - without:+10.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
