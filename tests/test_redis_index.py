"""RedisSimhashIndex / RedisContentStore against a real redis-server (no mocks)."""
from __future__ import annotations

import multiprocessing
import random
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scrapy_dedup.content.index import SimhashIndex
from scrapy_dedup.content.redis_index import RedisContentStore, RedisSimhashIndex, hash_tagged

pytestmark = pytest.mark.redis


def flip(fp: int, positions) -> int:
    for b in positions:
        fp ^= 1 << b
    return fp


def brute_force(stored: list[tuple[int, int]], fp: int, threshold: int) -> set[tuple[int, int]]:
    return {(k, bin(f ^ fp).count("1")) for k, f in stored if bin(f ^ fp).count("1") <= threshold}


@pytest.fixture
def index(redis_url):
    return RedisSimhashIndex.from_redis(redis_url, "test:%s:content" % "spider", threshold=3, bands=4)


def test_same_results_as_memory_index_on_random_data(redis_url):
    rnd = random.Random(42)
    redis_idx = RedisSimhashIndex.from_redis(redis_url, "cmp", threshold=3, bands=4)
    mem_idx = SimhashIndex(threshold=3, bands=4)
    base = [rnd.getrandbits(64) for _ in range(300)]
    stored = []
    for i, fp in enumerate(base):
        # clusters of close fingerprints, so that queries meet several matches
        for j in range(3):
            f = flip(fp, rnd.sample(range(64), rnd.randint(0, 3)))
            key = i * 10 + j
            redis_idx.add(key, f)
            mem_idx.add(key, f)
            stored.append((key, f))
    assert len(redis_idx) == len(mem_idx) == len(stored)
    for fp in base[:150] + [rnd.getrandbits(64) for _ in range(50)]:
        q = flip(fp, rnd.sample(range(64), rnd.randint(0, 4)))
        got = redis_idx.query(q)
        assert set(got) == brute_force(stored, q, 3)
        assert sorted(got) == sorted(mem_idx.query(q))
        # closest first
        assert [d for _, d in got] == sorted(d for _, d in got)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(fp=st.integers(0, 2**64 - 1), flips=st.sets(st.integers(0, 63), max_size=3),
       noise=st.lists(st.integers(0, 2**64 - 1), max_size=20))
def test_recall_guarantee_under_bit_flips(index, redis_client, fp, flips, noise):
    redis_client.flushall()
    for i, other in enumerate(noise):
        index.add(f"noise-{i}", other)
    index.add("page", fp)
    near = flip(fp, flips)
    assert ("page", len(flips)) in index.query(near)
    match = index.add_if_new("copy", near)
    assert match is not None and match[1] <= len(flips)


def test_add_if_new_keeps_closest_then_oldest(index):
    fp = 0x0123456789ABCDEF
    assert index.add_if_new("a", fp) is None
    assert index.add_if_new("far", flip(fp, range(0, 60, 6))) is None  # 10 bits away: new
    assert index.add_if_new("b", flip(fp, [1])) == ("a", 1)
    assert len(index) == 2  # "b" was a duplicate, not stored
    index.add("c", flip(fp, [2, 3]))
    index.add("d", flip(fp, [5]))
    assert index.query(flip(fp, [5])) == [("d", 0), ("a", 1), ("c", 3)]
    assert index.add_if_new("e", flip(fp, [7])) == ("a", 1)  # a and ... d is 2 away; a wins
    assert index.add_if_new("f", flip(fp, [40, 41, 42, 43])) is None  # 4 bits: beyond threshold


def test_int_and_str_keys_stay_apart(index):
    index.add(7, 0)
    index.add("7", 2**64 - 1)
    assert index.query(0) == [(7, 0)]
    assert index.query(2**64 - 1) == [("7", 0)]


def test_persistence_across_instances_and_config_mismatch(redis_url):
    first = RedisSimhashIndex.from_redis(redis_url, "persist", threshold=3, bands=4)
    for i in range(50):
        first.add(f"https://example.test/{i}", (i * 0x9E3779B97F4A7C15) % 2**64)
    import redis

    other_client = redis.Redis.from_url(redis_url)  # a second connection, as another process would have
    second = RedisSimhashIndex.from_redis(other_client, "persist", threshold=3, bands=4)
    assert len(second) == 50
    fp = (17 * 0x9E3779B97F4A7C15) % 2**64
    assert second.add_if_new("https://example.test/copy", flip(fp, [3])) == ("https://example.test/17", 1)
    wrong = RedisSimhashIndex.from_redis(other_client, "persist", threshold=3, bands=5)
    with pytest.raises(ValueError, match="bands=4"):
        wrong.add_if_new("x", 1)
    other_client.close()


def test_refuses_configurations_that_lose_recall(redis_client):
    with pytest.raises(ValueError, match="bands"):
        RedisSimhashIndex(redis_client, "p", threshold=4, bands=4)
    approx = RedisSimhashIndex(redis_client, "p", threshold=4, bands=4, allow_approximate=True)
    assert approx.threshold == 4
    with pytest.raises(ValueError):
        RedisSimhashIndex(redis_client, "p", bits=32)
    idx = RedisSimhashIndex(redis_client, "p")
    with pytest.raises(ValueError):
        idx.add("k", 1 << 64)
    with pytest.raises(TypeError):
        idx.add(1.5, 1)


def test_128_bit_fingerprints(redis_url):
    rnd = random.Random(7)
    idx = RedisSimhashIndex.from_redis(redis_url, "wide", threshold=6, bands=8, bits=128)
    fps = [rnd.getrandbits(128) for _ in range(200)]
    for i, fp in enumerate(fps):
        idx.add(i, fp)
    for i, fp in enumerate(fps[:50]):
        q = flip(fp, rnd.sample(range(128), 6))
        assert idx.query(q) == [(i, 6)]
        assert idx.add_if_new(f"c{i}", q) == (i, 6)
    assert idx.add_if_new("new", flip(fps[0], range(0, 128, 9))) is None  # 15 bits apart


def test_every_key_shares_one_hash_slot_and_gets_the_ttl(redis_url, redis_client):
    from redis.crc import key_slot

    idx = RedisSimhashIndex.from_redis(redis_url, "dedup:spider:content", ttl=600)
    store = RedisContentStore(idx)
    for i in range(30):
        store.check_and_add(f"https://example.test/{i}",
                            SimpleNamespace(exact=bytes([i]) * 16, simhash=random.Random(i).getrandbits(64), words=100))
    names = list(redis_client.scan_iter(match="*"))
    assert len(names) > 10
    assert {key_slot(n) for n in names} == {key_slot(b"{dedup:spider:content}")}
    assert all(n.startswith(b"{dedup:spider:content}:") for n in names)
    assert all(0 < redis_client.ttl(n) <= 600 for n in names)
    assert hash_tagged("a{b}c") == "a{b}c"
    idx.clear()
    assert list(redis_client.scan_iter(match="*")) == []


def test_content_store_exact_then_near_then_unique(redis_url):
    store = RedisContentStore.from_redis(redis_url, "store")
    fp = SimpleNamespace(exact=b"e" * 16, simhash=0xDEADBEEF, words=200)
    assert store.check_and_add("https://a.test/1", fp) == ("unique", None, None)
    assert store.check_and_add("https://a.test/1?utm=x", fp) == ("exact", "https://a.test/1", 0)
    near = SimpleNamespace(exact=b"f" * 16, simhash=0xDEADBEEF ^ 0b101, words=200)
    assert store.check_and_add("https://a.test/2", near) == ("near", "https://a.test/1", 2)
    other = SimpleNamespace(exact=b"g" * 16, simhash=~0xDEADBEEF & (2**64 - 1), words=200)
    assert store.check_and_add("https://a.test/3", other) == ("unique", None, None)
    assert len(store) == 2


# -- processes racing -------------------------------------------------------------------------
GROUPS = 40


def _race_worker(url: str, worker: int, barrier, results, use_store: bool) -> None:
    rnd = random.Random(1000 + worker)
    if use_store:
        target = RedisContentStore.from_redis(url, "race")
    else:
        target = RedisSimhashIndex.from_redis(url, "race")
    base = random.Random(99)
    groups = [base.getrandbits(64) for _ in range(GROUPS)]
    barrier.wait()
    wins = []
    for g, fp in enumerate(groups):
        mine = flip(fp, [rnd.randrange(64)])  # within 1 bit of the group: pairwise within 2
        key = f"w{worker}-g{g}"
        if use_store:
            kind, _, _ = target.check_and_add(key, SimpleNamespace(exact=f"{g}-{worker}".encode(),
                                                                   simhash=mine, words=100))
            new = kind == "unique"
        else:
            new = target.add_if_new(key, mine) is None
        if new:
            wins.append(g)
    results.put((worker, wins))


@pytest.mark.parametrize("use_store", [False, True], ids=["add_if_new", "check_and_add"])
def test_exactly_one_process_wins_each_group(redis_url, use_store):
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(4)
    results = ctx.Queue()
    procs = [ctx.Process(target=_race_worker, args=(redis_url, w, barrier, results, use_store))
             for w in range(4)]
    for p in procs:
        p.start()
    collected = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    wins = [g for _, won in collected for g in won]
    assert sorted(wins) == list(range(GROUPS))  # every group kept exactly once
    index = RedisSimhashIndex.from_redis(redis_url, "race")
    assert len(index) == GROUPS


def test_content_store_gives_the_engine_the_same_verdicts_as_memory(redis_url):
    """C1's ContentDeduplicator over Redis decides exactly as over the in-memory store."""
    import sys
    from pathlib import Path

    from scrapy_dedup.content.engine import ContentDeduplicator, ContentFingerprinter
    from scrapy_dedup.content.text import page_text

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import quality_corpus

    pages = quality_corpus.tiny_corpus(seed=3)
    memory = ContentDeduplicator.in_memory()
    store = RedisContentStore.from_redis(redis_url, "engine:%s" % "tiny")
    shared = ContentDeduplicator(ContentFingerprinter(), store)
    kinds = set()
    for page in pages:
        text = page_text(page.html)
        a, b = memory.check(page.url, text), shared.check(page.url, text)
        assert (a.kind, a.kept_url, a.distance) == (b.kind, b.kept_url, b.distance), page.url
        kinds.add(a.kind)
    assert kinds == {"unique", "exact", "near", "degenerate"}
    assert memory.report() == shared.report()
    shared.close()


# -- the verification stage in Redis ------------------------------------------------------------
def _verification_pages():
    """Pages with edits beyond the simhash threshold, added lines, and templated siblings."""
    from tests.textgen import article_words, edit_words

    rng = random.Random(21)
    pages = []
    for n, length in enumerate((60, 150, 300, 900)):
        base = article_words(rng, length)
        pages.append((f"https://v.test/{n}", " ".join(base)))
        for e in range(3):
            pages.append((f"https://v.test/{n}/e{e}", " ".join(edit_words(base, rng, 2))))
        pages.append((f"https://v.test/{n}/g", " ".join(base) + " Page generated on 2026-03-14 at 12:31:07"))
    shared = " ".join(article_words(rng, 200))
    for s in range(5):
        pages.append((f"https://v.test/sib/{s}", f"{' '.join(article_words(rng, 14))}. {shared}"))
    rng.shuffle(pages)
    return pages


def test_verification_gives_the_same_verdicts_in_redis_as_in_memory(redis_url):
    from scrapy_dedup.content.engine import ContentDeduplicator, ContentFingerprinter

    memory = ContentDeduplicator.in_memory()
    shared = ContentDeduplicator(ContentFingerprinter(), RedisContentStore.from_redis(redis_url, "verify"))
    plain = ContentDeduplicator.in_memory(verify=None)
    kinds, beyond = [], 0
    for url, text in _verification_pages():
        a, b = memory.check(url, text), shared.check(url, text)
        assert (a.kind, a.kept_url, a.distance) == (b.kind, b.kept_url, b.distance), url
        kinds.append(a.kind)
        beyond += a.kind == "near" and a.distance > 3
        if "/sib/" in url:
            assert a.kind == "unique"
        plain.check(url, text)
    assert beyond >= 3  # the stage was exercised beyond the threshold, in both stores alike
    assert kinds.count("near") > plain.counts()["near"]
    # sketches are stored apart under the index's hash tag, packed (2-byte length, sketch) many to a
    # field: one per kept page
    client = shared.store.index.client
    records = 0
    for blob in client.hvals(shared.store.index.sketch_key):
        offset = 0
        while offset < len(blob):
            size = int.from_bytes(blob[offset:offset + 2], "big")
            records += size > 0
            offset += 2 + size
    assert records == kinds.count("unique")
    shared.close()


def test_verifying_and_plain_stores_refuse_to_share_one_index(redis_url):
    from types import SimpleNamespace as NS

    from scrapy_dedup.content.engine import ContentFingerprinter

    fp = ContentFingerprinter().fingerprint("alpha beta gamma delta epsilon zeta eta theta iota kappa " * 3)
    RedisContentStore.from_redis(redis_url, "mixed").check_and_add("https://a.test/", fp)
    with pytest.raises(ValueError, match="sketch=256"):
        RedisContentStore.from_redis(redis_url, "mixed", verify=None).check_and_add(
            "https://b.test/", NS(exact=b"x" * 16, simhash=fp.simhash, words=30))


def _verify_race_worker(url: str, worker: int, barrier, results) -> None:
    from scrapy_dedup.content.engine import ContentFingerprinter
    from tests.textgen import article_words, edit_words

    store = RedisContentStore.from_redis(url, "verify-race")
    fingerprinter = ContentFingerprinter()
    base = random.Random(5)
    groups = [article_words(base, 300) for _ in range(12)]
    rng = random.Random(500 + worker)
    fps = [fingerprinter.fingerprint(" ".join(edit_words(g, rng, 2))) for g in groups]
    barrier.wait()
    wins = [g for g, fp in enumerate(fps) if store.check_and_add(f"w{worker}-g{g}", fp)[0] == "unique"]
    results.put((worker, wins))


def test_exactly_one_process_wins_each_group_with_verification(redis_url):
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_verify_race_worker, args=(redis_url, w, barrier, results)) for w in range(4)]
    for p in procs:
        p.start()
    collected = [results.get(timeout=90) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert sorted(g for _, won in collected for g in won) == list(range(12))
