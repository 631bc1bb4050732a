"""``ContentDeduplicator.pair_matches`` answers as a two-page store does (its definition), without building one.

The reference below is the definition: a fresh :class:`MemoryContentStore` of the store's parameters holding
``a``, asked about ``b``. Pairs are drawn around every branch of the store's rule: exact copies, distances on
both sides of the threshold and of the verification radius, candidates that only a bucket of the simhash or
sketch tables brings (counted: the test fails if the draw never reaches them), sketches cut at the store's
size, missing or empty sketches.
"""
from __future__ import annotations

import random
from dataclasses import replace

import pytest

from scrapy_dedup.content.engine import ContentDeduplicator, ContentFingerprint, ContentFingerprinter, \
    MemoryContentStore
from scrapy_dedup.content.sketch import Sketch, VerifyRule


def two_page_answer(engine: ContentDeduplicator, a: ContentFingerprint, b: ContentFingerprint) -> bool:
    store = engine.store
    size = getattr(store, "sketch_size", 0)
    pair = MemoryContentStore(store.threshold, store.bands, engine.fingerprinter.bits, store.allow_approximate,
                              sketch_size=size, verify=getattr(store, "verify", None) if size else None)
    pair.check_and_add("a", a)
    return pair.check_and_add("b", b)[0] != "unique"


def _flip(value: int, bits: int, count: int, rng: random.Random) -> int:
    for bit in rng.sample(range(bits), count):
        value ^= 1 << bit
    return value


def _variant(a: ContentFingerprint, bits: int, rng: random.Random) -> ContentFingerprint:
    """A fingerprint near ``a`` (or not): its simhash some bits away, its sketch partly replaced."""
    distance = rng.choice([0, 1, 2, 3, 4, 5, 8, 12, 16, 20, 21, 24, 40] + list(range(4, 21)))
    simhash = _flip(a.simhash, bits, distance, rng)
    sketch = a.sketch
    roll = rng.random()
    if roll < 0.08:
        sketch = None
    elif roll < 0.12:
        sketch = Sketch.from_ints((), 0)
    elif sketch is not None and sketch.ints:
        values = list(sketch.ints)
        for _ in range(rng.choice([0, 1, 3, 10, 30, 80, 200])):
            values[rng.randrange(len(values))] = rng.getrandbits(32)
        sketch = Sketch.from_ints(sorted(set(values)), max(1, sketch.shingles + rng.randint(-40, 40)))
    exact = a.exact if rng.random() < 0.05 else bytes(rng.getrandbits(8) for _ in range(16))
    return replace(a, simhash=simhash, sketch=sketch, exact=exact)


def _pages(fingerprinter: ContentFingerprinter, rng: random.Random, count: int) -> list[ContentFingerprint]:
    vocabulary = [f"w{i}" for i in range(3000)]
    return [fingerprinter.fingerprint(" ".join(rng.choice(vocabulary) for _ in range(rng.choice([30, 120, 600]))))
            for _ in range(count)]


@pytest.mark.parametrize("threshold, bands, bits, sketch_size, verify", [
    (3, 4, 64, 256, VerifyRule()),
    (0, 4, 64, 256, VerifyRule()),
    (2, 4, 64, 16, VerifyRule(radius=30, jaccard=0.7, min_jaccard=0.3, max_diff=200, long_page=20)),
    (3, 4, 128, 256, VerifyRule(radius=40)),
    (3, 4, 64, 256, None),
    # the store's banding, not a default one: an approximate index (bands <= threshold), more bands
    (4, 4, 64, 256, VerifyRule()),
    (3, 8, 64, 256, VerifyRule(radius=24)),
])
def test_pair_matches_is_the_two_page_store_answer(threshold, bands, bits, sketch_size, verify):
    rng = random.Random(threshold * 1000 + bands * 100 + bits + sketch_size)
    fingerprinter = ContentFingerprinter(bits=bits, sketch_size=sketch_size)
    store = MemoryContentStore(threshold, bands, bits, bands <= threshold, sketch_size=sketch_size, verify=verify)
    engine = ContentDeduplicator(fingerprinter, store)
    seen = {True: 0, False: 0}
    bucket_only = 0  # candidates beyond the threshold that only a chance bucket brings, then judged
    for a in _pages(fingerprinter, rng, 40):
        for _ in range(150):
            b = _variant(a, bits, rng)
            expected = two_page_answer(engine, a, b)
            assert engine.pair_matches(a, b) == expected, (a, b)
            seen[expected] += 1
            if (verify is not None and threshold < bin(a.simhash ^ b.simhash).count("1") <= verify.radius
                    and a.exact != b.exact):
                empty = MemoryContentStore(threshold, bands, bits, bands <= threshold, sketch_size=sketch_size,
                                           verify=verify)
                bucket_only += empty.index.bucket_mates(a.simhash, b.simhash) or (
                    a.sketch is not None and b.sketch is not None and empty.sketches.bucket_mates(a.sketch, b.sketch))
    assert seen[True] > 100 and seen[False] > 100
    if verify is not None:
        assert bucket_only > 10
