#!/usr/bin/env python
"""The crawl's verdicts on ``bench_quality.py``'s corpus, and whether they are the same in every process.

Each page of the corpus, in its crawl order, goes through the crawl's own judge: a ``DedupExtension`` built by
Scrapy from the given settings (default: the package's defaults), one ``HtmlResponse`` per page, the verdict
taken by ``verdict_for_response`` as ``ContentFingerprintMiddleware`` takes it. The crawl log
(``DEDUP_LOG_FILE``: each verdict, its fingerprints and cluster) is what is written out.

``--hash-seeds 1,2`` runs that in one subprocess per ``PYTHONHASHSEED`` value and compares their logs line by
line: for the same pages in the same order, the verdicts, fingerprints and clusters must not depend on the
process (Python's ``hash()`` of a str or bytes is keyed per process, and so is the iteration order of a set
of them). Exit status 1 when they differ.

Usage::

    python benchmarks/crawl_verdicts.py --out log.jsonl                  # one run, this process
    python benchmarks/crawl_verdicts.py --hash-seeds 1,2                  # two processes, compared
    python benchmarks/crawl_verdicts.py --hash-seeds 1,2 --per-source 60 --no-install
    python benchmarks/crawl_verdicts.py --tiny --hash-seeds 1,2,3          # the small generated corpus
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import quality_corpus as qc  # noqa: E402


def corpus(args: argparse.Namespace) -> list[qc.Page]:
    """``bench_quality.py``'s corpus at these sizes (the tiny generated one with ``--tiny`` or without the docs)."""
    sources = [] if args.tiny else qc.ensure_sources(install=not args.no_install)
    if not sources:
        return qc.tiny_corpus(args.seed)
    live = args.per_source // 2 if args.live_per_source is None else args.live_per_source
    return qc.build_corpus(args.per_source, seed=args.seed, install=False, sources=tuple(sources),
                           live_per_source=live, releases_per_project=args.releases_per_project)


def crawl_log(pages: list[qc.Page], log_file: str, settings: Optional[dict[str, Any]] = None) -> None:
    """Judge ``pages`` in order with the crawl's extension; its log goes to ``log_file``."""
    from scrapy.http import HtmlResponse, Request
    from scrapy.utils.test import get_crawler

    from scrapy_dedup.extensions import DedupExtension

    if "twisted.internet.reactor" not in sys.modules:  # Scrapy 2.13's get_crawler wants one installed
        from scrapy.utils.reactor import install_reactor

        install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    crawler = get_crawler(settings_dict={"DEDUP_LOG_FILE": log_file,
                                         "EXTENSIONS": {"scrapy_dedup.DedupExtension": 500}, **(settings or {})})
    extension = crawler.get_extension(DedupExtension).open_content()
    for page in pages:
        response = HtmlResponse(page.url, body=page.html, headers={"Content-Type": "text/html; charset=utf-8"},
                                request=Request(page.url))
        extension.verdict_for_response(response)
    extension.close()


def compare(seeds: list[str], argv: list[str]) -> int:
    """Run this script once per ``PYTHONHASHSEED`` in ``seeds``; 0 when their crawl logs are the same."""
    with tempfile.TemporaryDirectory() as tmp:
        logs = []
        for seed in seeds:
            out = os.path.join(tmp, f"log-{seed}.jsonl")
            start = os.times()
            subprocess.run([sys.executable, __file__, *argv, "--out", out], check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed})
            end = os.times()
            with open(out, encoding="utf-8") as f:
                logs.append(f.read().splitlines())
            print(f"PYTHONHASHSEED={seed}: {len(logs[-1])} lines, "
                  f"{end.children_user + end.children_system - start.children_user - start.children_system:.1f} "
                  f"s CPU (corpus built included)", flush=True)
        first, differing = logs[0], 0
        for seed, log in zip(seeds[1:], logs[1:]):
            diff = [(n, a, b) for n, (a, b) in enumerate(zip(first, log)) if a != b]
            differing += len(diff) + abs(len(first) - len(log))
            print(f"PYTHONHASHSEED={seeds[0]} vs {seed}: {len(diff)} of {min(len(first), len(log))} lines differ"
                  + (f", lengths {len(first)} and {len(log)}" if len(first) != len(log) else ""))
            for n, a, b in diff[:5]:
                changed = {k for k in set(json.loads(a)) | set(json.loads(b))
                           if json.loads(a).get(k) != json.loads(b).get(k)}
                print(f"  line {n + 1}: {json.loads(a)['url']}: {', '.join(sorted(changed))}")
    return 1 if differing else 0


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="write the crawl log here (one run in this process)")
    ap.add_argument("--hash-seeds", help="PYTHONHASHSEED values separated by commas: one subprocess each, compared")
    ap.add_argument("--per-source", type=int, default=120, help="originals per template (default 120)")
    ap.add_argument("--live-per-source", type=int, default=None, help="default per-source / 2")
    ap.add_argument("--releases-per-project", type=int, default=12)
    ap.add_argument("--seed", type=int, default=7, help="corpus seed (default 7)")
    ap.add_argument("--tiny", action="store_true", help="the tiny generated corpus (no Debian docs needed)")
    ap.add_argument("--no-install", action="store_true", help="never call apt-get for missing docs")
    args = ap.parse_args(argv)
    if args.hash_seeds:
        rest = [a for i, a in enumerate(argv)  # the same arguments, less --hash-seeds and its value
                if not a.startswith("--hash-seeds") and not (i and argv[i - 1] == "--hash-seeds")]
        return compare([s.strip() for s in args.hash_seeds.split(",")], rest)
    if not args.out:
        ap.error("give --out or --hash-seeds")
    pages = corpus(args)
    start = time.process_time()
    crawl_log(pages, args.out)
    print(f"{len(pages)} pages judged in {time.process_time() - start:.1f} s CPU", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
