"""False positives of the local Bloom filter after growth: the new hashing, the old one, pybloom-live.

    python benchmarks/bench_bloom_rate.py --quick                 # seconds; the smoke test runs this
    python benchmarks/bench_bloom_rate.py                          # the grid of docs/reliability.md
    python benchmarks/bench_bloom_rate.py --capacities 1000 --loads 100 --rates 1e-6 --seeds 10 --probes 2000000
    python benchmarks/bench_bloom_rate.py --memory                 # BloomDupeFilter's memory by crawl size

``--memory`` fills the local filter as ``BloomDupeFilter`` builds it with 2,000 and
1,000,000 URLs (``--memory-keys``) at ``DEDUP_BLOOM_ERROR_RATE = 1e-6``, each
sized three ways: unset (it starts at 100,000 URLs and grows), sized for the crawl
(``DEDUP_BLOOM_CAPACITY`` = the URLs), and the former default (10,000,000), and
prints its memory, its slices and the false-positive rate measured on ``--probes``
new keys (with the same bound as below).

For each capacity, error rate and load (keys added, as a multiple of the
capacity), each filter is filled with random 20-byte keys (what a SHA-1
fingerprinter yields) and asked about ``--probes`` other random keys: the share
answered "seen" is its false-positive rate, summed over ``--seeds`` runs and
printed per 100,000 new keys with its ratio to the configured rate (the bound
``BloomSeenSet`` promises, also after growth). Filters, all in the same run on
the same keys:

* ``ours``: :class:`scrapy_dedup.seen.bloom.BloomSeenSet` as it is.
* ``ours, version 1 hashing``: the same filter with every slice on one
  double-hashing progression from the key's digest (what version 1 did; the
  bits are sized as now, 0.07% more than then).
* ``pybloom-live BloomFilter``: a plain filter (independent salted hashes; it
  does not grow, so at 1x only).
* ``pybloom-live ScalableBloomFilter``: its growing filter (``--pybloom-max-keys``
  bounds the keys it is filled with: it hashes at 4-7 us a key).

The bound row says where the configured rate lies within the binomial spread of
the probes: a measured count above ``rate * probes + 3 sigma`` is printed
"ABOVE".
"""
from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scrapy_dedup.seen.base import KeyHashing  # noqa: E402
from scrapy_dedup.seen.bloom import START_CAPACITY, BloomSeenSet, _Slice  # noqa: E402


class VersionOneBloom(BloomSeenSet):
    """``BloomSeenSet`` with version 1's hashing: one progression from the key's digest in every slice."""

    def _new_slice(self, index: int) -> _Slice:
        new = super()._new_slice(index)
        return _Slice(new.capacity, new.error_rate, new.nbits, new.hashes,
                      hashing=KeyHashing(new.nbits, new.hashes, 1, None))


def keys(seed: int, count: int) -> list[bytes]:
    blob = random.Random(seed).randbytes(20 * count)
    return [blob[i:i + 20] for i in range(0, 20 * count, 20)]


def measure(make, capacity: int, load: int, seeds: int, probes: int) -> tuple[int, int, float]:
    """(false positives, probes, seconds) summed over ``seeds`` runs."""
    hits = asked = 0
    began = time.perf_counter()
    for seed in range(seeds):
        bloom = make()
        add = bloom.add
        for key in keys(1000 + seed, capacity * load):
            add(key)
        probe = keys(10**6 + seed, probes)
        hits += sum(1 for key in probe if key in bloom)
        asked += probes
        del bloom
    return hits, asked, time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--capacities", type=int, nargs="+", default=[1000, 10_000, 100_000, 1_000_000, 10_000_000])
    parser.add_argument("--loads", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--rates", type=float, nargs="+", default=[1e-4])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--probes", type=int, default=1_000_000, help="new keys asked per seed")
    parser.add_argument("--max-keys", type=int, default=20_000_000,
                        help="skip a row whose filter would hold more keys (time and memory)")
    parser.add_argument("--pybloom-max-keys", type=int, default=200_000)
    parser.add_argument("--no-old", action="store_true", help="leave out the version 1 hashing")
    parser.add_argument("--memory", action="store_true", help="the memory rows instead (see above)")
    parser.add_argument("--memory-keys", type=int, nargs="+", default=[2_000, 1_000_000])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.capacities, args.loads, args.rates, args.seeds, args.probes = [1000], [1, 10], [1e-3], 1, 50_000
        args.pybloom_max_keys = 10_000
        args.memory_keys = [2_000, 200_000]
    if args.memory:
        return memory_rows(args.memory_keys, args.probes)
    try:
        from pybloom_live import BloomFilter, ScalableBloomFilter
    except ImportError:  # pragma: no cover - a required dependency of scrapy-dedup
        BloomFilter = ScalableBloomFilter = None
    print(f"bench_bloom_rate: {args.seeds} seed(s), {args.probes:,} new keys asked per seed; "
          f"false positives per 100,000 new keys (x: ratio to the configured rate)")
    print(f"{'capacity':>10} {'rate':>7} {'load':>5}  {'filter':34} {'fp/1e5':>9} {'x rate':>7} {'count':>7} "
          f"{'bound':>6} {'s':>6}")
    for rate in args.rates:
        for capacity in args.capacities:
            for load in args.loads:
                if capacity * load > args.max_keys:
                    continue
                filters = [("ours", lambda c=capacity, r=rate: BloomSeenSet(c, r))]
                if not args.no_old:
                    filters.append(("ours, version 1 hashing", lambda c=capacity, r=rate: VersionOneBloom(c, r)))
                if BloomFilter is not None and capacity * load <= args.pybloom_max_keys:
                    if load == 1:
                        filters.append(("pybloom-live BloomFilter",
                                        lambda c=capacity, r=rate: _PybloomBytes(BloomFilter(c, r))))
                    filters.append(("pybloom-live ScalableBloomFilter", lambda c=capacity, r=rate: _PybloomBytes(
                        ScalableBloomFilter(initial_capacity=c, error_rate=r))))
                for name, make in filters:
                    hits, asked, seconds = measure(make, capacity, load, args.seeds, args.probes)
                    measured = hits / asked
                    allowed = rate * asked + 3 * math.sqrt(asked * rate)
                    print(f"{capacity:10,} {rate:7.0e} {load:4}x  {name:34} {measured * 1e5:9.3f} "
                          f"{measured / rate:7.2f} {hits:7} {'ok' if hits <= allowed else 'ABOVE':>6} {seconds:6.0f}",
                          flush=True)
    return 0


def memory_rows(sizes: list[int], probes: int, rate: float = 1e-6) -> int:
    """The local filter's memory and measured false-positive rate by crawl size and sizing (``--memory``)."""
    print(f"bench_bloom_rate --memory: DEDUP_BLOOM_ERROR_RATE = {rate:g}, {probes:,} new keys asked")
    print(f"{'URLs':>10}  {'DEDUP_BLOOM_CAPACITY':24} {'MiB':>8} {'slices':>6} {'fp/1e6':>8} {'count':>6} {'bound':>6}")
    for size in sizes:
        for label, capacity in (("unset (starts 100,000)", START_CAPACITY), (f"{size:,} (the crawl)", size),
                                ("10,000,000 (former)", 10_000_000)):
            bloom = BloomSeenSet(capacity, rate)
            for key in keys(7, size):
                bloom.add(key)
            hits = sum(1 for key in keys(10**6 + 7, probes) if key in bloom)
            allowed = rate * probes + 3 * math.sqrt(probes * rate)
            print(f"{size:10,}  {label:24} {bloom.size_bytes() / 2**20:8.2f} {len(bloom.slices):6} "
                  f"{hits / probes * 1e6:8.3f} {hits:6} {'ok' if hits <= allowed else 'ABOVE':>6}", flush=True)
            del bloom
    return 0


class _PybloomBytes:
    """pybloom-live's filters with ``add`` answering "new" as ours does (its ``add`` answers "was there")."""

    def __init__(self, inner):
        self.inner = inner

    def add(self, key: bytes) -> bool:
        return not self.inner.add(key)

    def __contains__(self, key: bytes) -> bool:
        return key in self.inner


if __name__ == "__main__":
    sys.exit(main())
