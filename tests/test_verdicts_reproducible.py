"""The crawl's verdicts, fingerprints and clusters are the same in every process, for the same pages in the
same order: Python's ``hash()`` of a str or bytes is keyed per process (``PYTHONHASHSEED``), so nothing
the judge decides may rest on it.

The corpus is generated: one host whose pages carry, beside their own paragraphs, short blocks drawn from
a pool (related links, tags, teasers), so that the host's block table (at the smallest
``DEDUP_BOILERPLATE_CAPACITY``) is full and evicts among blocks of equal count last seen on the same page:
which of them stay, and so which become boilerplate and what text is fingerprinted, used to follow the
blocks' per-process hashes. Each run judges the pages with the crawl's own extension, in a fresh
interpreter, and the crawl logs (``DEDUP_LOG_FILE``) are compared line by line.
"""
from __future__ import annotations

import os
import random
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HASH_SEEDS = ("1", "2", "3")

_WORDS = ("river stone cloud market garden window paper signal engine harbor lantern meadow copper silver "
          "forest canyon planet rocket violin marble thunder pepper falcon island bridge castle desert "
          "spring winter summer autumn shadow mirror ladder pocket basket candle orange purple yellow").split()


def corpus(seed: int = 5, pages: int = 90, pool: int = 160, picks: int = 24) -> list[tuple[str, bytes]]:
    """(url, html) in crawl order: each page two paragraphs of its own, ``picks`` short blocks of a ``pool``
    shared by the host (drawn unevenly: some recur often), and every fifth page again under another URL with
    a sixth of its short blocks others (a near duplicate once the recurring ones are learnt)."""
    rng = random.Random(seed)
    phrases = [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 7))) for _ in range(pool)]
    weights = [1.0 / (1 + i) ** 0.7 for i in range(pool)]
    out = []
    for n in range(pages):
        own = ["<p>" + " ".join(rng.choice(_WORDS) + str(rng.randint(0, 999)) for _ in range(90)) + "</p>"
               for _ in range(2)]

        def page(chosen: list[str], n: int = n, own: list[str] = own) -> bytes:
            items = "".join(f"<li>{phrase}</li>" for phrase in chosen)
            return (f"<html><head><title>Page {n}</title></head><body><main>{''.join(own)}"
                    f"<ul>{items}</ul></main></body></html>").encode()

        chosen = rng.choices(phrases, weights, k=picks)
        out.append((f"http://site.test/page/{n}", page(chosen)))
        if n % 5 == 4:
            chosen[: picks // 6] = rng.choices(phrases, weights, k=picks // 6)
            out.append((f"http://site.test/page/{n}?from=list", page(chosen)))
    return out


def write_crawl_log(path: str) -> None:
    """Judge :func:`corpus` with the crawl's extension (as ``ContentFingerprintMiddleware`` asks it); its crawl
    log to ``path``."""
    from scrapy.http import HtmlResponse, Request
    from scrapy.utils.test import get_crawler

    from scrapy_dedup.extensions import DedupExtension

    if "twisted.internet.reactor" not in sys.modules:  # Scrapy 2.13's get_crawler wants one installed
        from scrapy.utils.reactor import install_reactor

        install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    crawler = get_crawler(settings_dict={"DEDUP_LOG_FILE": path, "DEDUP_BOILERPLATE_CAPACITY": 64,
                                         "EXTENSIONS": {"scrapy_dedup.DedupExtension": 500}})
    extension = crawler.get_extension(DedupExtension).open_content()
    for url, html in corpus():
        extension.verdict_for_response(HtmlResponse(url, body=html, request=Request(url),
                                                    headers={"Content-Type": "text/html; charset=utf-8"}))
    extension.close()


def test_verdicts_fingerprints_and_clusters_do_not_depend_on_the_process(tmp_path):
    logs = []
    for hash_seed in HASH_SEEDS:
        path = tmp_path / f"log-{hash_seed}.jsonl"
        subprocess.run([sys.executable, "-c", f"from tests.test_verdicts_reproducible import write_crawl_log; "
                        f"write_crawl_log({str(path)!r})"], cwd=ROOT, check=True,
                       env={**os.environ, "PYTHONHASHSEED": hash_seed})
        logs.append(path.read_text().splitlines())
    first = logs[0]
    # the material is what it is meant to be: some pages matched as duplicates
    assert len(first) == len(corpus())
    assert any('"kind": "near"' in line or '"kind": "exact"' in line for line in first)
    for hash_seed, log in zip(HASH_SEEDS[1:], logs[1:]):
        differing = [n for n, (a, b) in enumerate(zip(first, log)) if a != b]
        assert len(log) == len(first) and not differing, (
            f"PYTHONHASHSEED={HASH_SEEDS[0]} and {hash_seed}: {len(differing)} of {len(first)} lines differ, "
            f"first at line {differing[0] + 1 if differing else '?'}")
