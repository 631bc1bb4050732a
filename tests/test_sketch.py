"""The verification stage: bottom-k sketches, the decision rule, the LSH candidate tables, persistence."""
from __future__ import annotations

import random

import numpy as np
import pytest

from scrapy_dedup.content.engine import ContentDeduplicator, ContentFingerprinter, MemoryContentStore, VerifyRule
from scrapy_dedup.content.index import IndexFileError, SimhashIndex
from scrapy_dedup.content.simhash import hamming, simhash_and_shingle_hashes, simhash_words, words
from scrapy_dedup.content.sketch import (
    SketchStore,
    _np_lsh_keys,
    lsh_keys,
    make_sketch,
    resemblance,
)
from tests.textgen import article_words, edit_words


def shingle_set(text: str, k: int = 5) -> set[tuple[str, ...]]:
    w = words(text)
    return {tuple(w[i : i + k]) for i in range(len(w) - k + 1)}


def decide(first: str, second: str, **kw) -> str:
    dedup = ContentDeduplicator.in_memory(**kw)
    assert dedup.check("https://t.test/1", first).kind == "unique"
    return dedup.check("https://t.test/2", second).kind


@pytest.mark.parametrize("bits", [64, 128])
def test_one_pass_gives_the_same_simhash_and_every_distinct_shingle(bits):
    text = " ".join(article_words(random.Random(bits), 300)) + " the end the end the end"
    tokens = words(text)
    fp, hashes = simhash_and_shingle_hashes(tokens, 5, bits)
    assert fp == simhash_words(tokens, 5, bits)
    assert len(hashes) == len(np.unique(hashes)) == len(shingle_set(text))


def test_sketch_is_the_sorted_bottom_k_of_the_top_32_bits():
    rng = np.random.default_rng(3)
    hashes = np.unique(rng.integers(0, 2**64, 5000, dtype=np.uint64))
    sketch = make_sketch(hashes, 64)
    expected = sorted(set((int(h) >> 32) for h in hashes))[:64]
    assert list(sketch.ints) == expected and sketch.shingles == len(hashes)
    assert type(sketch).from_bytes(sketch.to_bytes()) == sketch
    assert len(sketch.to_bytes()) == 4 + 4 * 64


def test_resemblance_is_exact_when_the_union_fits_in_the_sketch():
    a = np.arange(0, 40, dtype=np.uint64) << np.uint64(32)
    b = np.arange(10, 60, dtype=np.uint64) << np.uint64(32)
    r = resemblance(make_sketch(a, 64), make_sketch(b, 64), 64)
    assert r.jaccard == 30 / 60 and r.only_a == pytest.approx(10) and r.only_b == pytest.approx(20)


def test_resemblance_estimate_is_close_on_large_sets():
    rng = np.random.default_rng(5)
    errors = []
    for _ in range(200):
        common = rng.integers(0, 2**64, 900, dtype=np.uint64)
        a = np.concatenate([common, rng.integers(0, 2**64, 100, dtype=np.uint64)])
        b = np.concatenate([common, rng.integers(0, 2**64, 100, dtype=np.uint64)])
        errors.append(resemblance(make_sketch(a), make_sketch(b), 64).jaccard - 900 / 1100)
    assert abs(np.mean(errors)) < 0.01 and np.std(errors) < 0.06


# -- the decision rule on pages -----------------------------------------------------------------
@pytest.mark.parametrize("length", [60, 150, 400, 1500])
@pytest.mark.parametrize("edits", [1, 2])
def test_edits_of_one_or_two_words_are_near_duplicates(length, edits):
    rng = random.Random(length * 10 + edits)
    for _ in range(5):
        a = article_words(rng, length)
        assert decide(" ".join(a), " ".join(edit_words(a, rng, edits))) == "near"


@pytest.mark.parametrize("own", [12, 16, 24])
def test_templated_siblings_with_a_dozen_words_of_their_own_are_kept(own):
    rng = random.Random(own)
    shared = " ".join(article_words(rng, 200))
    siblings = [f"{' '.join(article_words(rng, own))}. {shared}" for _ in range(6)]
    for i in range(len(siblings)):
        for j in range(len(siblings)):
            if i != j:
                assert decide(siblings[i], siblings[j]) == "unique", (i, j)


def test_decisions_around_the_absolute_limit_are_those_of_the_exact_sets_while_the_union_fits():
    # Random pairs with 6-16 own shingles a side (the limit is 10) on short pages: while the two
    # pages have at most 256 distinct shingles together the sketch decides as the exact sets do,
    # so no pair 1-6 shingles above the limit is ever merged (merge rate 0) and none at or under
    # it is ever kept apart. A smaller sketch fails this: an odd sketch of 384 bits merged
    # 12-17% of the pairs with 12-13 own shingles a side (benchmarks/bench_sketch_limit.py).
    rng = np.random.default_rng(17)
    rule = VerifyRule()
    decided = {True: 0, False: 0}
    for _ in range(600):
        own_a, own_b = (int(x) for x in rng.integers(6, 17, 2))
        common = int(rng.integers(60, 256 - own_a - own_b + 1))
        shared = rng.integers(0, 2**64, common, dtype=np.uint64)
        a = np.concatenate([shared, rng.integers(0, 2**64, own_a, dtype=np.uint64)])
        b = np.concatenate([shared, rng.integers(0, 2**64, own_b, dtype=np.uint64)])
        truth = min(own_a, own_b) <= rule.max_diff and common / (common + own_a + own_b) >= rule.min_jaccard
        sa, sb = make_sketch(a), make_sketch(b)
        assert rule.accepts(resemblance(sa, sb, 256), sa.shingles, sb.shingles) == truth, (common, own_a, own_b)
        decided[truth] += 1
    assert min(decided.values()) >= 150  # both sides of the limit were drawn often


@pytest.mark.parametrize("length", [80, 300, 1200])
def test_a_generated_at_line_or_another_footer_text_is_a_near_duplicate(length):
    rng = random.Random(length)
    main = " ".join(article_words(rng, length))
    generated = f"{main} Page generated on 2026-03-14 at 12:31:07 UTC in 0.0412 seconds"
    footer_a = f"{main} Copyright 2024 The Example Project and contributors. Privacy policy | Terms of use"
    footer_b = f"{main} Copyright 2025 The Example Project. All rights reserved. Contact us | Careers | Donate"
    assert decide(main, generated) == "near"
    assert decide(generated, main) == "near"
    assert decide(main, footer_a) == "near"
    # one footer text REPLACED by another of 14+ words: near on long pages (the relative clause); on
    # short pages it is exactly what a templated sibling looks like, and it is kept (documented limit)
    assert decide(footer_a, footer_b) == ("near" if length >= 300 else "unique")


def test_verification_accepts_beyond_the_threshold_and_rejects_within_it():
    rng = random.Random(11)
    fpr = ContentFingerprinter()
    # an edit that moves the simhash past the 3-bit threshold is still found (recall)
    found = 0
    for _ in range(40):
        a = article_words(rng, 300)
        b = edit_words(a, rng, 2)
        d = hamming(fpr.fingerprint(" ".join(a)).simhash, fpr.fingerprint(" ".join(b)).simhash)
        if d > 3:
            dedup = ContentDeduplicator.in_memory()
            dedup.check("https://t.test/a", " ".join(a))
            verdict = dedup.check("https://t.test/b", " ".join(b))
            assert verdict.kind == "near" and verdict.distance == d
            assert decide(" ".join(a), " ".join(b), verify=None) == "unique"  # the plain rule misses it
            found += 1
    assert found >= 5
    # two short siblings within the threshold are told apart (precision)
    shared = " ".join(article_words(rng, 200))
    within = 0
    x = f"{' '.join(article_words(rng, 16))}. {shared}"
    for _ in range(3000):
        y = f"{' '.join(article_words(rng, 16))}. {shared}"
        if within < 3 and hamming(fpr.fingerprint(x).simhash, fpr.fingerprint(y).simhash) <= 3:
            within += 1
            assert decide(x, y) == "unique"
            assert decide(x, y, verify=None) == "near"
    assert within >= 1


def test_rule_parameters_are_validated():
    with pytest.raises(ValueError):
        VerifyRule(jaccard=0)
    with pytest.raises(ValueError):
        VerifyRule(jaccard=0.8, min_jaccard=0.9)
    with pytest.raises(ValueError):
        MemoryContentStore(sketch_size=0, verify=VerifyRule())
    with pytest.raises(ValueError, match="sketch"):
        ContentDeduplicator(ContentFingerprinter(sketch_size=32), MemoryContentStore(sketch_size=64))


# -- the LSH tables and the store ---------------------------------------------------------------
def test_store_keys_tables_and_growth():
    rng = np.random.default_rng(1)
    store, sketches = SketchStore(64), []
    for i in range(6000):  # past two head-table growths
        sk = make_sketch(rng.integers(0, 2**64, int(rng.integers(1, 300)), dtype=np.uint64), 64) if i % 9 else None
        sketches.append(sk)
        assert store.add(sk) == i
    keys = _np_lsh_keys(np.frombuffer(store._values, dtype=np.uint32), np.frombuffer(store._lengths, dtype=np.uint16))
    for i, sk in enumerate(sketches):
        assert store.get(i) == sk
        if sk is not None:
            assert [int(k) for k in keys[i]] == lsh_keys(sk)
            assert i in store.candidates(sk)
    # packed: each page holds only its own values (none without a sketch), plus length and count,
    # plus one 8-byte start per 256 pages
    values = sum(len(sk) for sk in sketches if sk is not None)
    assert values < 6000 * 64
    assert store.nbytes_sketches == 4 * values + 6000 * (2 + 4) + 8 * -(-6000 // 256)


def test_persistence_round_trip_keeps_the_sketches(tmp_path):
    rng = random.Random(2)
    texts = [" ".join(article_words(rng, 300)) for _ in range(30)]
    dedup = ContentDeduplicator.in_memory()
    for i, t in enumerate(texts):
        assert dedup.check(f"https://t.test/{i}", t).kind == "unique"
    path = tmp_path / "store.idx"
    dedup.store.save(path)
    loaded = MemoryContentStore.load(path)
    assert len(loaded) == 30 and loaded.sketches is not None
    for i in range(30):
        assert loaded.sketches.get(i) == dedup.store.sketches.get(i)
    resumed = ContentDeduplicator.in_memory()
    resumed.store.load_into(path)
    edited = " ".join(edit_words(texts[7].split(), rng, 2))
    assert resumed.check("https://t.test/e", edited).kept_url == "https://t.test/7"
    with pytest.raises(ValueError, match="sketch size"):
        MemoryContentStore(sketch_size=32, verify=VerifyRule()).load_into(path)
    # a store saved without sketches loads into a verifying store (plain rule for its pages)
    plain = ContentDeduplicator.in_memory(verify=None)
    plain.check("https://t.test/p", texts[0])
    plain.store.save(path)
    resumed = ContentDeduplicator.in_memory()
    resumed.store.load_into(path)
    assert resumed.check("https://t.test/q", texts[0] + " x").kind == "near"
    # damage is detected
    data = path.read_bytes()
    path.write_bytes(data[:-3])
    with pytest.raises(IndexFileError):
        MemoryContentStore.load(path)


def test_add_many_in_chunks_equals_one_by_one():
    rnd = random.Random(4)
    fps = [rnd.getrandbits(64) for _ in range(9000)]
    one, chunked = SimhashIndex(3, 4), SimhashIndex(3, 4)
    for i, fp in enumerate(fps):
        one.add(i, fp)
    for start in range(0, len(fps), 700):
        chunked.add_many(range(start, min(start + 700, len(fps))), fps[start : start + 700])
    for fp in fps[::50] + [f ^ 0b1011 for f in fps[::97]]:
        assert one.query(fp) == chunked.query(fp)
        assert one.query_radius(fp, 12) == chunked.query_radius(fp, 12)


def test_packed_store_writes_the_fixed_slot_file_layout_and_reads_it_back():
    """In memory a page takes only its own values; the file keeps ``size`` slots per page (older files load)."""
    import io
    import struct

    from scrapy_dedup.content.index import read_exactly

    rng = np.random.default_rng(5)
    store, sketches = SketchStore(32), []
    for i in range(2600):  # more than two chunks of 1,024 pages, blocks of 256
        n = int(rng.integers(1, 80))
        sk = make_sketch(rng.integers(0, 2**64, n, dtype=np.uint64), 32) if i % 7 else None
        sketches.append(sk)
        store.add(sk)
    out = io.BytesIO()
    store.write_to(out)
    expected = bytearray(struct.pack("<IQ", 32, 2600))
    expected += b"".join(struct.pack("<H", len(sk) if sk else 0) for sk in sketches)
    expected += b"".join(struct.pack("<I", sk.shingles if sk else 0) for sk in sketches)
    for sk in sketches:
        ints = list(sk.ints) if sk else []
        expected += struct.pack(f"<{32}I", *(ints + [0] * (32 - len(ints))))
    assert out.getvalue() == bytes(expected)
    loaded = SketchStore.read_from(io.BytesIO(bytes(expected)), read_exactly)
    assert len(loaded) == 2600 and loaded.nbytes_sketches == store.nbytes_sketches
    for i, sk in enumerate(sketches):
        assert loaded.get(i) == sk
        if sk is not None:
            assert i in loaded.candidates(sk)
    assert loaded.add(sketches[1]) == 2600 and loaded.get(2600) == sketches[1]


def _merged_resemblance(a, b, size: int) -> tuple[int, int]:
    """The definition: walk the union of the two sorted sketches, the first ``size`` values, counting those of
    both (matches) and all (taken)."""
    va, vb = a.ints, b.ints
    i = j = taken = matches = 0
    while taken < size and (i < len(va) or j < len(vb)):
        if j >= len(vb) or (i < len(va) and va[i] < vb[j]):
            i += 1
        elif i >= len(va) or vb[j] < va[i]:
            j += 1
        else:
            matches, i, j = matches + 1, i + 1, j + 1
        taken += 1
    return matches, taken


@pytest.mark.parametrize("a, b, size, expected", [
    ([1, 2, 3], [1, 2, 3], 8, (3, 3)),  # the union fits: exact
    ([1, 2, 3], [4, 5, 6], 8, (0, 6)),
    ([1, 3, 5, 7], [1, 2, 5, 9], 3, (1, 3)),  # U = 1 2 3: only 1 is of both
    ([1, 3, 5, 7], [1, 2, 5, 9], 4, (2, 4)),  # U = 1 2 3 5
    ([10, 20], [5, 10, 15, 20], 3, (1, 3)),  # U = 5 10 15
    ([0, 2**32 - 1], [2**32 - 1], 2, (1, 2)),  # the extremes of 32 bits
])
def test_resemblance_counts_the_first_size_values_of_the_union(a, b, size, expected):
    from scrapy_dedup.content.sketch import Sketch

    sa, sb = Sketch.from_ints(a, 100), Sketch.from_ints(b, 90)
    matches, taken = expected
    assert _merged_resemblance(sa, sb, size) == expected
    assert resemblance(sa, sb, size).jaccard == matches / taken


def test_resemblance_is_the_merge_of_the_sorted_sketches_on_drawn_pairs():
    # the numpy merge against the walk over the union, on sketches of every fill, near and far pairs
    rng = np.random.default_rng(11)
    for trial in range(400):
        n = int(rng.choice([3, 40, 300, 3000]))
        base = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
        other = base.copy()
        changed = int(rng.integers(0, n + 1))
        other[rng.choice(n, changed, replace=False)] = rng.integers(0, 2**64 - 1, size=changed, dtype=np.uint64)
        other = other[: int(rng.integers(1, n + 1))] if trial % 3 == 0 else other
        size = int(rng.choice([16, 64, 256]))
        sa, sb = make_sketch(base, size), make_sketch(other, size)
        matches, taken = _merged_resemblance(sa, sb, size)
        r = resemblance(sa, sb, size)
        assert r.jaccard == matches / taken
        common = r.jaccard * (sa.shingles + sb.shingles) / (1 + r.jaccard)
        assert (r.only_a, r.only_b) == (sa.shingles - common, sb.shingles - common)
