"""SimhashIndex: recall guarantee, check-and-insert under threads, persistence, compactness."""
from __future__ import annotations

import os
import random
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_dedup.content.index import IndexFileError, SimhashIndex

CONFIGS = [
    # (threshold, bands, bits): classic banding, wider keys, large threshold, 128 bits, blocks straddling bit 64
    (3, 4, 64),
    (2, 4, 64),
    (0, 4, 64),
    (6, 8, 64),
    (3, 4, 128),
    (5, 7, 128),
    (1, 3, 128),
]


def flip(fp: int, positions) -> int:
    for p in positions:
        fp ^= 1 << p
    return fp


def brute_force(entries, fp, threshold):
    return sorted(((fp ^ f).bit_count(), k) for k, f in entries if (fp ^ f).bit_count() <= threshold)


def populated(threshold, bands, bits, n=3000, seed=0):
    """Random fingerprints plus clusters of near ones (distances 1..threshold+2) around some of them."""
    rng = random.Random(seed)
    index = SimhashIndex(threshold, bands, bits)
    entries = []
    for key in range(n):
        if key % 10 == 0 or not entries:
            fp = rng.getrandbits(bits)
        else:
            fp = flip(entries[-1][1], rng.sample(range(bits), rng.randint(1, threshold + 2)))
        index.add(key, fp)
        entries.append((key, fp))
    return index, entries, rng


def test_refuses_configurations_that_break_the_guarantee():
    with pytest.raises(ValueError, match="bands \\(3\\) must be greater than threshold \\(3\\)"):
        SimhashIndex(threshold=3, bands=3)
    approximate = SimhashIndex(threshold=3, bands=3, allow_approximate=True)
    assert not approximate.exact_recall and approximate.tables == 3
    assert SimhashIndex().exact_recall and SimhashIndex().tables == 4
    assert SimhashIndex(threshold=2, bands=4).tables == 6  # C(4, 2)
    with pytest.raises(ValueError, match="tables"):
        SimhashIndex(threshold=10, bands=20)
    for bad in (dict(bits=32), dict(threshold=-1), dict(bands=0), dict(bands=65)):
        with pytest.raises(ValueError):
            SimhashIndex(**bad)


def test_rejects_bad_fingerprints_and_keys():
    index = SimhashIndex()
    with pytest.raises(ValueError):
        index.add(1, 1 << 64)
    with pytest.raises(ValueError):
        index.add(1, -1)
    with pytest.raises(ValueError):
        index.add(1 << 63, 5)
    with pytest.raises(TypeError):
        index.add(1, 1.5)  # type: ignore[arg-type]
    assert len(index) == 0


@pytest.mark.parametrize("threshold, bands, bits", CONFIGS)
def test_query_equals_brute_force(threshold, bands, bits):
    index, entries, rng = populated(threshold, bands, bits)
    probes = [flip(f, rng.sample(range(bits), rng.randint(0, threshold + 1))) for _, f in rng.sample(entries, 300)]
    probes += [rng.getrandbits(bits) for _ in range(50)]
    for fp in probes:
        expected = brute_force(entries, fp, threshold)
        assert sorted((d, k) for k, d in index.query(fp)) == expected


@pytest.mark.parametrize("threshold, bands, bits", CONFIGS)
def test_recall_guarantee_under_random_flips(threshold, bands, bits):
    @settings(max_examples=80, deadline=None)
    @given(st.integers(0, 2**bits - 1), st.data())
    def check(fp, data):
        index = SimhashIndex(threshold, bands, bits)
        rng = random.Random(fp)
        for key in range(200):  # background noise in the same buckets' neighbourhood
            index.add(key, rng.getrandbits(bits))
        index.add(1000, fp)
        count = data.draw(st.integers(0, threshold))
        positions = data.draw(st.lists(st.integers(0, bits - 1), min_size=count, max_size=count, unique=True))
        probe = flip(fp, positions)
        assert (1000, count) in index.query(probe)
        match = index.add_if_new(2000, probe)
        assert match is not None and match[1] <= count

    check()


def test_query_orders_closest_then_oldest():
    index = SimhashIndex(threshold=3)
    index.add(1, 0b111)
    index.add(2, 0b1)
    index.add(3, 0b11)
    index.add(4, 0b1)
    assert index.query(0) == [(2, 1), (4, 1), (3, 2), (1, 3)]


def test_add_if_new_returns_the_closest_match_or_inserts():
    index = SimhashIndex(threshold=3)
    assert index.add_if_new(1, 0xFFFF) is None
    assert index.add_if_new(2, 0xFFFF ^ 0b111) == (1, 3)
    assert index.add_if_new(3, 0xFFFF ^ 0b1111) is None  # 4 bits away: new
    assert index.add_if_new(4, 0xFFFF ^ 0b1) == (1, 1)
    assert len(index) == 2
    assert [k for k, _ in index.items()] == [1, 3]


def test_concurrent_add_if_new_lets_exactly_one_of_a_duplicate_pair_in():
    rng = random.Random(7)
    index = SimhashIndex(threshold=3)
    groups = 60
    threads_per_group = 4
    bases = [rng.getrandbits(64) for _ in range(groups)]
    variants = [[flip(b, rng.sample(range(64), rng.randint(0, 1))) for _ in range(threads_per_group)] for b in bases]
    results: dict[tuple[int, int], object] = {}
    barrier = threading.Barrier(threads_per_group)

    def worker(t):
        for g in range(groups):
            barrier.wait()
            results[g, t] = index.add_if_new(g * 100 + t, variants[g][t])

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(threads_per_group)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for g in range(groups):
        outcomes = [results[g, t] for t in range(threads_per_group)]
        inserted = [t for t, r in enumerate(outcomes) if r is None]
        assert len(inserted) == 1, outcomes
        winner = g * 100 + inserted[0]
        assert all(r[0] == winner for r in outcomes if r is not None)
    assert len(index) == groups


def test_growth_and_bulk_insert_give_the_same_answers():
    rng = random.Random(3)
    fps = [rng.getrandbits(128) for _ in range(6000)]  # 32-bit blocks: head tables grow (rebuilds)
    one_by_one = SimhashIndex(threshold=3, bands=4, bits=128)
    for key, fp in enumerate(fps):
        one_by_one.add(key, fp)
    bulk = SimhashIndex(threshold=3, bands=4, bits=128)
    bulk.add_many(range(len(fps)), fps)
    assert list(bulk.items()) == list(one_by_one.items())
    for fp in rng.sample(fps, 200):
        probe = flip(fp, rng.sample(range(128), 3))
        expected = [(k, d) for d, k in brute_force(list(enumerate(fps)), probe, 3)]
        assert expected and one_by_one.query(probe) == bulk.query(probe) == expected


@pytest.mark.parametrize("threshold, bands, bits", [(3, 4, 64), (5, 7, 128)])
def test_persistence_round_trip(tmp_path, threshold, bands, bits):
    index, entries, rng = populated(threshold, bands, bits, n=2000)
    path = tmp_path / "content.idx"
    index.save(path)
    assert os.listdir(tmp_path) == ["content.idx"]  # no temp file left behind
    loaded = SimhashIndex.load(path)
    assert (loaded.threshold, loaded.bands, loaded.bits) == (threshold, bands, bits)
    assert list(loaded.items()) == list(index.items())
    for _, fp in rng.sample(entries, 100):
        probe = flip(fp, rng.sample(range(bits), threshold))
        assert loaded.query(probe) == index.query(probe)
    # the loaded index keeps working
    assert loaded.add_if_new(10**6, entries[5][1]) == (entries[5][0], 0)
    loaded.add(10**6 + 1, rng.getrandbits(bits))
    assert len(loaded) == len(index) + 1


def test_save_replaces_atomically_and_empty_index_round_trips(tmp_path):
    path = tmp_path / "x.idx"
    SimhashIndex().save(path)
    assert len(SimhashIndex.load(path)) == 0
    index = SimhashIndex()
    index.add(1, 42)
    index.save(path)
    assert list(SimhashIndex.load(path).items()) == [(1, 42)]


def test_damaged_files_are_refused(tmp_path):
    index, _, _ = populated(3, 4, 64, n=100)
    path = tmp_path / "x.idx"
    index.save(path)
    data = path.read_bytes()
    truncated = tmp_path / "t.idx"
    truncated.write_bytes(data[:-30])
    with pytest.raises(IndexFileError, match="truncated"):
        SimhashIndex.load(truncated)
    flipped = bytearray(data)
    flipped[200] ^= 1
    corrupt = tmp_path / "c.idx"
    corrupt.write_bytes(bytes(flipped))
    with pytest.raises(IndexFileError, match="checksum"):
        SimhashIndex.load(corrupt)
    other = tmp_path / "o.idx"
    other.write_bytes(b"not an index at all, just some bytes to read")
    with pytest.raises(IndexFileError, match="not a scrapy-dedup"):
        SimhashIndex.load(other)


def test_largest_bucket_reveals_a_shared_block():
    index = SimhashIndex()
    rng = random.Random(1)
    for key in range(500):
        index.add(key, rng.getrandbits(64))
    assert index.largest_bucket() < 10
    for key in range(500, 540):  # same low 16 bits: boilerplate-like
        index.add(key, (rng.getrandbits(48) << 16) | 0xBEEF)
    assert index.largest_bucket() >= 40


def test_compact_layout_at_default_settings():
    """Structure size per page with integer keys (no Python object per page)."""
    rng = random.Random(2)
    n = 200_000
    fps = [rng.getrandbits(64) for _ in range(n)]
    index = SimhashIndex()
    index.add_many(range(n), fps)
    assert index.positional_keys
    assert index.nbytes / n <= 32  # positional keys: 8 fingerprint + 4 tables x 4 + heads, no key column
    keyed = SimhashIndex()
    keyed.add_many(range(10, n + 10), fps)
    assert not keyed.positional_keys
    assert index.nbytes + 8 * n == keyed.nbytes  # other keys: one 8-byte column more


def test_positional_keys_switch_to_a_key_column_without_losing_earlier_keys(tmp_path):
    rng = random.Random(4)
    fps = [rng.getrandbits(64) for _ in range(3000)]
    index = SimhashIndex()
    index.add_many(range(1000), fps[:1000])
    for key in range(1000, 2000):
        assert index.add_if_new(key, fps[key]) is None
    assert index.positional_keys
    index.add(-7, fps[2000])  # not its position: the key column appears
    assert not index.positional_keys
    index.add_many([10**12 + i for i in range(999)], fps[2001:])
    expected = list(range(2000)) + [-7] + [10**12 + i for i in range(999)]
    assert [k for k, _ in index.items()] == expected
    assert [f for _, f in index.items()] == fps
    for key in (0, 1999, 2000, 2500):
        assert index.query(fps[key])[0] == (expected[key], 0)
    path = tmp_path / "k.idx"
    index.save(path)
    assert list(SimhashIndex.load(path).items()) == list(index.items())


def test_positional_index_file_has_no_key_column(tmp_path):
    rng = random.Random(6)
    fps = [rng.getrandbits(64) for _ in range(500)]
    positional, keyed = SimhashIndex(), SimhashIndex()
    positional.add_many(range(500), fps)
    keyed.add_many(range(1, 501), fps)
    positional.save(tmp_path / "p.idx")
    keyed.save(tmp_path / "k.idx")
    assert os.path.getsize(tmp_path / "k.idx") - os.path.getsize(tmp_path / "p.idx") == 8 * 500
    loaded = SimhashIndex.load(tmp_path / "p.idx")
    assert loaded.positional_keys and list(loaded.items()) == list(enumerate(fps))
    assert loaded.add_if_new(500, fps[3] ^ 0b101) == (3, 2)


def test_version_1_files_still_load(tmp_path):
    """A file in the first format (always a key column), written here byte by byte."""
    import hashlib
    import struct

    rng = random.Random(8)
    fps = [rng.getrandbits(64) for _ in range(300)]
    for keys in (list(range(300)), [5 * k + 1 for k in range(300)]):
        header = struct.pack("<8sHHHHHHQ", b"SDSIMIX\x00", 1, 64, 3, 4, 0, 0, len(fps))
        body = struct.pack(f"<{len(keys)}q", *keys) + struct.pack(f"<{len(fps)}Q", *fps)
        digest = hashlib.blake2b(header + body, digest_size=16).digest()
        path = tmp_path / "v1.idx"
        path.write_bytes(header + body + digest)
        loaded = SimhashIndex.load(path)
        assert list(loaded.items()) == list(zip(keys, fps))
        assert loaded.positional_keys == (keys == list(range(300)))
        assert loaded.query(fps[7] ^ 1) == [(keys[7], 1)]
