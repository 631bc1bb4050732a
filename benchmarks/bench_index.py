#!/usr/bin/env python
"""Content index: memory per page and queries per second, ours against the peers, one run.

Indexes compared at each size (100,000 and 1,000,000 stored pages by default):

* ``SimhashIndex(threshold=3, bands=4)`` (ours; 64-bit fingerprints, integer keys),
  built with ``add_many``;
* the ``simhash`` package's ``SimhashIndex(k=3)`` (64-bit, string ids as it requires);
* datasketch ``MinHashLSH(threshold=0.8, num_perm=128)`` holding ``LeanMinHash``
  signatures (what its near-duplicate search stores; it is fed random signatures).

Each (index, size) is built in a fresh child process, so memory is the growth of
the process's resident set (``/proc/self/statm``) while building, divided by the
number of pages: the whole structure as Python holds it, keys included, input
data excluded (it is generated in chunks and discarded). Queries: random
fingerprints (nearly all misses, the common case of a crawl) and near ones
(a stored fingerprint with up to 3 bits flipped, or a signature with 10% of its
values changed), each timed over a fixed number of calls or a time budget.

Usage::

    python benchmarks/bench_index.py                     # 100k and 1M, all three
    python benchmarks/bench_index.py --quick             # 20k, a few seconds
    python benchmarks/bench_index.py --sizes 100000 --only ours,simhash
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

CHUNK = 10_000
IMPLS = ("ours", "simhash", "datasketch")
LABELS = {
    "ours": "ours SimhashIndex(3, 4 bands)",
    "simhash": "simhash pkg SimhashIndex(k=3)",
    "datasketch": "datasketch MinHashLSH(0.8, 128p)",
}


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def fingerprints(n: int, seed: int):
    """Random 64-bit fingerprints in chunks of numpy uint64 (reproducible per chunk)."""
    import numpy as np

    for start in range(0, n, CHUNK):
        rng = np.random.default_rng([seed, start])
        yield start, rng.integers(0, 2**64, size=min(CHUNK, n - start), dtype=np.uint64, endpoint=False)


def signatures(n: int, seed: int):
    import numpy as np

    for start in range(0, n, CHUNK):
        rng = np.random.default_rng([seed, start, 1])
        yield start, rng.integers(0, 2**32, size=(min(CHUNK, n - start), 128), dtype=np.uint32)


def flip_bits(fp: int, rng, max_bits: int = 3) -> int:
    for b in rng.sample(range(64), rng.randint(1, max_bits)):
        fp ^= 1 << b
    return fp


def timed(fn, items, budget: float) -> tuple[float, float, int]:
    """Wall and CPU seconds per call over ``items`` (stops after ``budget`` wall seconds), calls made.

    CPU time (``time.process_time``) is what a query costs this single-threaded
    process; on a loaded, shared machine the wall figure also counts waiting for a core.
    """
    t0 = time.perf_counter()
    c0 = time.process_time()
    done = 0
    for item in items:
        fn(item)
        done += 1
        if done % 64 == 0 and time.perf_counter() - t0 > budget:
            break
    calls = max(done, 1)
    return (time.perf_counter() - t0) / calls, (time.process_time() - c0) / calls, done


def child(impl: str, n: int, queries: int, budget: float) -> dict:
    import random

    import numpy as np

    rnd = random.Random(5)
    seed = 11
    # every module imported and the first chunk generator warmed before measuring
    from datasketch import LeanMinHash, MinHashLSH  # noqa: F401
    from simhash import Simhash, SimhashIndex as PkgIndex  # noqa: F401

    from scrapy_dedup.content.index import SimhashIndex

    next(fingerprints(1, 0))
    before = rss_bytes()
    t0 = time.perf_counter()
    sample: list = []  # a few stored items for near queries
    if impl == "ours":
        index = SimhashIndex(threshold=3, bands=4)
        for start, chunk in fingerprints(n, seed):
            fps = chunk.tolist()
            index.add_many(range(start, start + len(fps)), fps)
            sample.extend(fps[:: max(1, CHUNK // 200)][:50])
        query = index.query
        make_near = lambda fp: flip_bits(fp, rnd)  # noqa: E731
        make_random = lambda: rnd.getrandbits(64)  # noqa: E731
        found = lambda q: bool(query(q))  # noqa: E731
    elif impl == "simhash":
        index = PkgIndex([], k=3)
        for start, chunk in fingerprints(n, seed):
            fps = chunk.tolist()
            for i, fp in enumerate(fps):
                index.add(str(start + i), Simhash(fp))
            sample.extend(fps[:: max(1, CHUNK // 200)][:50])
        query = lambda fp: index.get_near_dups(Simhash(fp))  # noqa: E731
        make_near = lambda fp: flip_bits(fp, rnd)  # noqa: E731
        make_random = lambda: rnd.getrandbits(64)  # noqa: E731
        found = lambda q: bool(query(q))  # noqa: E731
    elif impl == "datasketch":
        index = MinHashLSH(threshold=0.8, num_perm=128)
        for start, chunk in signatures(n, seed):
            for i, row in enumerate(chunk):
                index.insert(start + i, LeanMinHash(seed=1, hashvalues=row, scheme="affine32"), check_duplication=False)
            sample.extend(chunk[:: max(1, CHUNK // 200)][:50])
        qrng = np.random.default_rng(3)

        def make_near(sig):
            sig = sig.copy()
            pos = qrng.choice(128, size=13, replace=False)
            sig[pos] = qrng.integers(0, 2**32, size=13, dtype=np.uint32)
            return LeanMinHash(seed=1, hashvalues=sig, scheme="affine32")

        make_random = lambda: LeanMinHash(seed=1, hashvalues=qrng.integers(0, 2**32, size=128, dtype=np.uint32),  # noqa: E731
                                          scheme="affine32")
        query = index.query
        found = lambda q: bool(query(q))  # noqa: E731
    else:
        raise ValueError(impl)
    build_s = time.perf_counter() - t0
    grown = rss_bytes() - before
    del chunk
    randoms = [make_random() for _ in range(queries)]
    nears = [make_near(sample[i % len(sample)]) for i in range(queries)]
    per_random, cpu_random, n_random = timed(query, randoms, budget)
    per_near, cpu_near, n_near = timed(query, nears, budget)
    recall = sum(found(q) for q in nears[:200]) / min(200, len(nears))
    struct = getattr(index, "nbytes", None) if impl == "ours" else None
    return {"impl": impl, "n": n, "bytes_per_page": grown / n,
            "arrays_per_page": struct / n if isinstance(struct, int) else None, "build_s": build_s,
            "us_random": per_random * 1e6, "us_near": per_near * 1e6, "n_random": n_random,
            "cpu_us_random": cpu_random * 1e6, "cpu_us_near": cpu_near * 1e6,
            "n_near": n_near, "near_recall": recall}


def run_child(impl: str, n: int, queries: int, budget: float) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", impl, "--child-n", str(n),
           "--queries", str(queries), "--budget", str(budget)]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        return {"impl": impl, "n": n, "error": out.stderr.strip().splitlines()[-1:] or ["failed"]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="20,000 pages, few queries: a few seconds")
    ap.add_argument("--sizes", default="100000,1000000", help="comma-separated index sizes")
    ap.add_argument("--only", default=",".join(IMPLS), help=f"subset of {','.join(IMPLS)}")
    ap.add_argument("--queries", type=int, default=20_000, help="queries of each kind (default 20,000)")
    ap.add_argument("--budget", type=float, default=10.0, help="seconds at most per query kind")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--child-n", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:
        print(json.dumps(child(args.child, args.child_n, args.queries, args.budget)))
        return 0
    sizes = [20_000] if args.quick else [int(s) for s in args.sizes.split(",")]
    queries, budget = (300, 1.0) if args.quick else (args.queries, args.budget)
    impls = [i for i in args.only.split(",") if i]
    all_rows: list[dict] = []
    for size in sizes:
        rows = [run_child(impl, size, queries, budget) for impl in impls]
        all_rows.extend(rows)
        ours = next((r for r in rows if r["impl"] == "ours" and "error" not in r), None)
        print(f"\n{size:,} stored pages")
        print(f"{'index':<34} {'bytes/page':>10} {'build s':>8} {'random q/s':>11} {'us':>7} "
              f"{'near q/s':>9} {'us':>7} {'near found':>10} {'mem x ours':>10} {'ours q/s x':>10} "
              f"{'cpu us':>7} {'cpu near':>8}")
        for r in rows:
            if "error" in r:
                print(f"{LABELS[r['impl']]:<34} error: {r['error']}")
                continue
            mem_ratio = r["bytes_per_page"] / ours["bytes_per_page"] if ours else float("nan")
            speed_ratio = r["cpu_us_random"] / ours["cpu_us_random"] if ours else float("nan")
            print(f"{LABELS[r['impl']]:<34} {r['bytes_per_page']:10.1f} {r['build_s']:8.1f} "
                  f"{1e6 / r['us_random']:11,.0f} {r['us_random']:7.1f} {1e6 / r['us_near']:9,.0f} "
                  f"{r['us_near']:7.1f} {r['near_recall']:10.2f} {mem_ratio:10.2f} {speed_ratio:10.2f} "
                  f"{r['cpu_us_random']:7.1f} {r['cpu_us_near']:8.1f}")
    print("\n'mem x ours' = the row's bytes per page / ours; 'ours q/s x' = the row's CPU us per random query / ours.")
    print("q/s and 'us' are wall clock; 'cpu us'/'cpu near' are process CPU time per query "
          "(robust on a loaded machine).")
    print("Memory: growth of the child process's resident set while building, per page (keys included).")
    arrays = [r for r in all_rows if r.get("arrays_per_page")]
    for r in arrays:
        print(f"ours at {r['n']:,}: the index's own arrays (SimhashIndex.nbytes) are {r['arrays_per_page']:.1f} "
              "bytes per page (integer keys 0..n-1: no key column); the rest of the resident growth is "
              "allocator slack and build temporaries.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
