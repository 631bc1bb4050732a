#!/usr/bin/env python
"""The crawl's verdicts on bench_quality.py's corpus, and "same page" at the URL-level strictness against its truth.

A real Scrapy crawl with the add-on (``DEDUP_LOG_FILE`` on, one request at a time, in the corpus's crawl order)
over every page of ``quality_corpus.build_corpus`` served by a local HTTP server. Printed: the verdicts by kind,
and of the duplicate verdicts (a page in another page's cluster), how many the URL-level strictness joins to
their kept page (what a mined or learned DUST rule may merge) and how many it keeps apart, each split by the
corpus's ground truth (same group or not). ``--compare OLD_LOG`` compares the verdicts with a log written by
another version of the code (kind, cluster, hashes per page; URLs compared without their port), which is how
a restructuring is shown not to change the crawl's verdicts::

    python benchmarks/bench_same_page.py --log new.jsonl
    python benchmarks/bench_same_page.py --log new.jsonl --compare old.jsonl   # old.jsonl: the same, other code
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import quality_corpus as qc  # noqa: E402


def _key(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return (parts.hostname or "", parts.path + (f"?{parts.query}" if parts.query else ""))


def crawl(pages: list, log: str) -> None:
    import scrapy
    from scrapy.utils.reactor import install_reactor

    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from twisted.internet import defer, reactor

    from tests.support.crawl import run_crawl
    from tests.support.localsite import LocalSite, Page

    by_key = {_key(p.url): p for p in pages}

    class CorpusSpider(scrapy.Spider):
        name = "corpus"
        base = ""

        async def start(self):
            for page in pages:
                host, path = _key(page.url)
                yield scrapy.Request(self.base.replace("HOST", host) + path, dont_filter=True)

        def parse(self, response):
            yield {"url": response.url}

    failure: list[BaseException] = []

    @defer.inlineCallbacks
    def run():
        try:
            with LocalSite(lambda host, path: Page(by_key[(host, path)].html) if (host, path) in by_key
                           else None) as site:
                CorpusSpider.base = site.url("HOST").rstrip("/")
                yield run_crawl(CorpusSpider, {"ADDONS": {"scrapy_dedup.Addon": 0}, "CONCURRENT_REQUESTS": 1,
                                               "LOG_LEVEL": "ERROR", "DEDUP_LOG_FILE": log})
        except BaseException as exc:  # reported after the reactor stopped
            failure.append(exc)
        finally:
            reactor.stop()

    reactor.callWhenRunning(run)
    reactor.run()
    if failure:
        raise failure[0]


def read_log(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(re.sub(r"(\.test):\d{2,5}", r"\1", line)) for line in f]  # the port varies per run


def url_pages(records: list[dict]) -> dict[str, str]:
    """URL -> its page at the URL-level strictness, as mine-dust reads the log."""
    from scrapy_dedup.url.mining import same_page_evidence

    kept_normal: dict[str, str] = {}
    out: dict[str, str] = {}
    for r in records:
        if not r.get("cluster"):
            continue
        if r.get("kind") == "unique" and "normal_hash" in r:
            kept_normal[r["cluster"]] = r["normal_hash"]
        if r.get("page"):
            out[r["url"]] = r["page"]
        else:
            same = same_page_evidence(r["kind"], r.get("basis"), r.get("normal_hash"), kept_normal.get(r["cluster"]))
            out[r["url"]] = r["cluster"] if same else r["url"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-source", type=int, default=60, help="originals per template (default 60)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--log", default="same_page_crawl.jsonl", help="the crawl log written (replaced)")
    ap.add_argument("--compare", metavar="OLD_LOG", help="a log of the same crawl by other code")
    args = ap.parse_args()
    if not qc.ensure_sources(install=False):
        sys.exit("bench_same_page: the Debian documentation packages are not installed (see quality_corpus.py)")
    pages = qc.build_corpus(args.per_source, seed=args.seed, install=False, live_per_source=args.per_source // 2)
    if os.path.exists(args.log):
        os.remove(args.log)
    crawl(pages, args.log)
    records = read_log(args.log)
    truth = {_key(p.url): p.group for p in pages}
    print(f"corpus: seed {args.seed}, {len(pages)} pages; verdicts: {dict(Counter(r['kind'] for r in records))}")
    pages_at_url = url_pages(records)
    counts: Counter = Counter()
    for r in records:
        url, cluster = r["url"], r.get("cluster")
        if not cluster or cluster == url:
            continue
        joined = pages_at_url[url] == cluster
        same = truth[_key(url)] == truth[_key(cluster)]
        counts[("joined" if joined else "apart", "same group" if same else "other group")] += 1
    print("duplicate verdicts at the URL-level strictness: "
          + ", ".join(f"{a} ({b}): {n}" for (a, b), n in sorted(counts.items())))
    if args.compare:
        old = read_log(args.compare)
        if [r["url"] for r in old] != [r["url"] for r in records]:
            print("compare: the two logs are not of the same pages in the same order")
            return 1
        fields = ("kind", "cluster", "exact_hash", "simhash", "words")
        changed = Counter(f for a, b in zip(old, records) for f in fields if a.get(f) != b.get(f))
        old_pages = url_pages(old)
        moved = sum(old_pages[u] != pages_at_url[u] for u in pages_at_url)
        print(f"compare: {len(records)} pages; verdict fields changed: {dict(changed) or 'none'}; "
              f"pages at the URL-level strictness changed: {moved}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
