"""Paragraph dedup's seen set: the exact set (the audit's default) against the Bloom filter (the crawl's, and
``scrapy-dedup report --paragraphs-bloom``), side by side in one run.

    python benchmarks/bench_paragraphs.py                    # 200,000 pages, about 2.4M blocks
    python benchmarks/bench_paragraphs.py --pages 1000000
    python benchmarks/bench_paragraphs.py --quick            # seconds; the smoke test runs this

The stream: pages of 6 to 18 blocks (a third of them under the length threshold), drawn from a pool of
shared paragraphs (a site's repeated blurbs, quotes, copied text: Zipf-distributed) and paragraphs of
their own, so that about half the counted blocks are repeats. Each contender checks the same pages, in
the same order, through :class:`~scrapy_dedup.content.paragraphs.ParagraphDeduplicator` (normalization,
hashing and the look-up: the whole per-page cost). Printed per contender: seconds, blocks checked per
second, the memory the seen set holds at the end (``tracemalloc``: every Python allocation made while it
filled, which includes the bit arrays of the Bloom filter), bytes per distinct block, and the repeats
found (the Bloom filter may find a few more: its false positives). Ratios are within this one run.
"""
from __future__ import annotations

import argparse
import gc
import random
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scrapy_dedup.content.paragraphs import ExactBlockSet, ParagraphDeduplicator  # noqa: E402
from scrapy_dedup.seen import BloomSeenSet  # noqa: E402

SYLLABLES = [a + b for a in "bdgklmnprstvz" for b in "aeiou"]


def word(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4)))


def paragraph(rng: random.Random) -> str:
    return " ".join(word(rng) for _ in range(rng.randint(8, 40)))


def pages(count: int, seed: int = 1) -> list[list[str]]:
    rng = random.Random(seed)
    pool = [paragraph(rng) for _ in range(max(100, count // 4))]
    shorts = ["Home", "Next", "Share", "Read more", "Log in", "Top"]
    out = []
    for _ in range(count):
        blocks = []
        for _ in range(rng.randint(6, 18)):
            draw = rng.random()
            if draw < 1 / 3:
                blocks.append(rng.choice(shorts))
            elif draw < 2 / 3:
                blocks.append(pool[min(int(rng.paretovariate(1.1)) - 1, len(pool) - 1)])
            else:
                blocks.append(paragraph(rng))
        out.append(blocks)
    return out


def run(name: str, make_set, stream: list[list[str]]) -> dict:
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    dedup = ParagraphDeduplicator(make_set())
    started = time.perf_counter()
    for i, blocks in enumerate(stream):
        dedup.check(f"site{i % 50}.test", blocks)
    elapsed = time.perf_counter() - started
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    total = dedup.total
    distinct = total.blocks - total.duplicates
    return {"name": name, "seconds": elapsed, "blocks": total.blocks, "repeats": total.duplicates,
            "distinct": distinct, "bytes": held, "per_block": held / max(distinct, 1),
            "rate": (total.blocks + total.short) / elapsed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=200_000)
    parser.add_argument("--quick", action="store_true", help="5,000 pages")
    args = parser.parse_args(argv)
    count = 5_000 if args.quick else args.pages
    stream = pages(count)
    expected = sum(len(p) for p in stream) * 2 // 3  # about: the counted blocks, sizing the Bloom filter
    results = [run("exact set", ExactBlockSet, stream),
               run("Bloom filter (1e-6)", lambda: BloomSeenSet(max(expected // 2, 1), 1e-6), stream)]
    print(f"{count} pages, {results[0]['blocks']} counted blocks, {results[0]['distinct']} distinct")
    print(f"{'seen set':<22}{'seconds':>9}{'blocks/s':>11}{'MB held':>9}{'B/distinct':>12}{'repeats':>10}")
    for r in results:
        print(f"{r['name']:<22}{r['seconds']:>9.2f}{r['rate']:>11.0f}{r['bytes'] / 1e6:>9.1f}"
              f"{r['per_block']:>12.1f}{r['repeats']:>10}")
    exact, bloom = results
    print(f"Bloom / exact: memory {bloom['bytes'] / exact['bytes']:.2f}x, "
          f"time {bloom['seconds'] / exact['seconds']:.2f}x, "
          f"extra repeats (false positives) {bloom['repeats'] - exact['repeats']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
