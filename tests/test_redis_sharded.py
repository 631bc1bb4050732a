"""ShardedRedisContentStore: the content index spread over the slots of a Redis Cluster (real servers, no mocks).

The decision rule is the one-script store's (same verdicts on the same pages); the
guarantees across processes are the module doc's: an exact duplicate kept exactly
once, no page dropped as a duplicate of a page that is not stored, a double keep
under a race counted once.
"""
from __future__ import annotations

import multiprocessing
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from scrapy_dedup.content.engine import ContentDeduplicator, ContentFingerprinter
from scrapy_dedup.content.stores import RedisContentStore, ShardedRedisContentStore, open_redis_store, open_store
from tests.test_redis_index import _verification_pages
from tests.textgen import article_words, edit_words

pytestmark = pytest.mark.redis


@pytest.fixture
def cluster_url(redis_cluster):  # noqa: F811
    import redis

    url = f"redis://127.0.0.1:{redis_cluster[0].port}/0"
    client = redis.cluster.RedisCluster.from_url(url)
    client.flushall()
    client.close()
    return url


CLUSTER = {"redis_cls": "redis.cluster.RedisCluster"}


def _pages():
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import quality_corpus  # benchmarks/, put on the path above

    return ([(p.url, p.html) for p in quality_corpus.tiny_corpus(seed=3)],
            _verification_pages())


def test_a_cluster_client_gets_the_sharded_store_unless_the_prefix_names_its_slot(cluster_url, redis_url):
    sharded = open_redis_store(cluster_url, "dedup:s:content", params=CLUSTER)
    one_slot = open_redis_store(cluster_url, "{dedup:s}:content", params=CLUSTER)
    single = open_redis_store(redis_url, "dedup:s:content")
    assert isinstance(sharded, ShardedRedisContentStore)
    assert isinstance(one_slot, RedisContentStore) and isinstance(single, RedisContentStore)
    for store in (sharded, one_slot, single):
        store.close()
    with pytest.raises(ValueError, match="braces"):
        ShardedRedisContentStore(None, "a{b")


def test_open_store_is_the_one_factory_of_the_engines_stores(cluster_url, redis_url):
    from scrapy_dedup.content.engine import MemoryContentStore
    from types import SimpleNamespace

    from scrapy_dedup.content.params import ENGINE_PARAMS
    from scrapy_dedup.content.redis_index import RedisContentStore as FormerPath

    params = SimpleNamespace(**{param.key: param.default for param in ENGINE_PARAMS})
    assert isinstance(open_store(params), MemoryContentStore)
    single = open_store(params, "redis", url=redis_url, key="dedup:f:content", ttl=60)
    sharded = open_store(params, "redis", url=cluster_url, key="dedup:f:content", redis_params=CLUSTER)
    assert type(single) is FormerPath and isinstance(sharded, ShardedRedisContentStore)  # the old path re-exports
    assert (single.sketch_size, single.bits, sharded.bands) == (params.sketch_size, params.fingerprint_bits,
                                                                params.bands)
    single.close()
    sharded.close()
    with pytest.raises(ValueError, match="'memory', 'redis'"):
        open_store(params, "disk")


@pytest.mark.parametrize("where", ["one-node", "cluster"])
def test_same_verdicts_as_the_memory_store(where, redis_url, request):
    from scrapy_dedup.content.text import page_text

    if where == "cluster":
        store = open_redis_store(request.getfixturevalue("cluster_url"), "verdicts", params=CLUSTER)
    else:
        store = open_redis_store(redis_url, "verdicts", sharded=True)
    assert isinstance(store, ShardedRedisContentStore)
    memory = ContentDeduplicator.in_memory()
    shared = ContentDeduplicator(ContentFingerprinter(), store)
    corpus, verification = _pages()
    kinds = set()
    for url, text in [(u, page_text(h)) for u, h in corpus] + verification:
        a, b = memory.check(url, text), shared.check(url, text)
        assert (a.kind, a.kept_url, a.distance) == (b.kind, b.kept_url, b.distance), url
        kinds.add(a.kind)
    assert kinds == {"unique", "exact", "near", "degenerate"}
    assert memory.report() == shared.report()
    assert len(store) == memory.counts()["unique"]
    assert store.races() == 0 and store.races_kept_twice == 0  # one process: no race
    shared.close()


def test_keys_spread_over_the_nodes_get_the_ttl_and_clear_removes_them(cluster_url, redis_cluster):  # noqa: F811
    import redis
    from redis.crc import key_slot

    store = open_redis_store(cluster_url, "dedup:spread:content", params=CLUSTER, ttl=600)
    fingerprinter = ContentFingerprinter()
    rng = random.Random(8)
    for i in range(150):
        store.check_and_add(f"https://s.test/{i}", fingerprinter.fingerprint(" ".join(article_words(rng, 80))))
    assert len(store) == 150
    nodes = [redis.Redis(port=n.port) for n in redis_cluster]
    per_node = [node.keys("*") for node in nodes]
    names = [k for keys in per_node for k in keys]
    assert all(keys for keys in per_node)  # every node holds part of the index
    assert len({key_slot(k) for k in names}) > 500  # buckets, records, exact hashes: their own slots
    assert all(0 < node.ttl(k) <= 600 for node, keys in zip(nodes, per_node) for k in keys)
    other = open_redis_store(cluster_url, "dedup:spread:contents", params=CLUSTER)
    other.check_and_add("https://o.test/", fingerprinter.fingerprint(" ".join(article_words(rng, 80))))
    store.clear()
    left = [k for node in nodes for k in node.keys("*")]
    assert left and all(b"dedup:spread:contents" in k for k in left)  # only the other index's keys
    for node in nodes:
        node.close()
    store.close()
    other.close()


def test_the_one_slot_and_the_sharded_layouts_refuse_to_share_a_prefix(redis_url):
    fp = ContentFingerprinter().fingerprint(" ".join(article_words(random.Random(2), 80)))
    open_redis_store(redis_url, "mixed", sharded=True).check_and_add("https://a.test/", fp)
    with pytest.raises(ValueError, match="layout=sharded"):
        open_redis_store(redis_url, "mixed").check_and_add("https://b.test/", fp)
    # an index of the one-slot layout met by the sharded store (a crawl moved onto a cluster): the way out named
    open_redis_store(redis_url, "older").check_and_add("https://a.test/", fp)
    with pytest.raises(ValueError, match=r"DEDUP_REDIS_INDEX_KEY \('\{older\}'\)"):
        open_redis_store(redis_url, "older", sharded=True).check_and_add("https://b.test/", fp)


class _Interleaved:
    """A client whose ``hincrby`` (a sharded store takes its page id there, after reading) first runs ``meanwhile``:
    the other process's whole decision lands between this one's read and its write."""

    def __init__(self, client, meanwhile):
        self._client, self._meanwhile = client, meanwhile

    def hincrby(self, *args):
        meanwhile, self._meanwhile = self._meanwhile, None
        if meanwhile is not None:
            meanwhile()
        return self._client.hincrby(*args)

    def __getattr__(self, name):
        return getattr(self._client, name)


def test_a_race_of_two_near_duplicates_keeps_both_and_counts_it_once(redis_url, redis_client):
    fingerprinter = ContentFingerprinter()
    words = article_words(random.Random(4), 300)
    first = fingerprinter.fingerprint(" ".join(words))
    second = fingerprinter.fingerprint(" ".join(edit_words(words, random.Random(5), 2)))
    other = open_redis_store(redis_client, "race2", sharded=True)
    answers = []
    racing = open_redis_store(
        _Interleaved(redis_client, lambda: answers.append(other.check_and_add("https://b.test/", second))),
        "race2", sharded=True)
    assert racing.check_and_add("https://a.test/", first) == ("unique", None, None)
    assert answers == [("unique", None, None)]  # b decided while a was between its read and its write
    assert racing.races_kept_twice + other.races_kept_twice == 1 == other.races()
    # a third copy, decided alone, is a near duplicate of a kept page
    third = fingerprinter.fingerprint(" ".join(edit_words(words, random.Random(6), 2)))
    assert other.check_and_add("https://c.test/", third)[:2] in {("near", "https://a.test/"),
                                                                ("near", "https://b.test/")}


def test_a_race_of_two_exact_duplicates_keeps_one(redis_url, redis_client):
    fp = ContentFingerprinter().fingerprint(" ".join(article_words(random.Random(4), 300)))
    other = open_redis_store(redis_client, "race1", sharded=True)
    answers = []
    racing = open_redis_store(
        _Interleaved(redis_client, lambda: answers.append(other.check_and_add("https://b.test/", fp))),
        "race1", sharded=True)
    assert racing.check_and_add("https://a.test/", fp) == ("exact", "https://b.test/", 0)
    assert answers == [("unique", None, None)]
    assert len(other) == 1 and other.races() == 0
    assert redis_client.hlen("{race1:r:0}") == 1  # the loser's record was removed


# -- four processes racing on a real three-node cluster ---------------------------------------------------
GROUPS = 16
VARIANTS = 4  # near copies per group, the same in every process: each process decides every one of them


def _group_texts():
    base = random.Random(31)
    groups = [article_words(base, 320) for _ in range(GROUPS)]  # long pages: every two copies are near
    near = [[" ".join(edit_words(g, random.Random(1000 * i + v), 1)) for v in range(VARIANTS)]
            for i, g in enumerate(groups)]
    exact = [" ".join(article_words(base, 120)) for _ in range(GROUPS)]
    return near, exact


def _cluster_race_worker(url: str, worker: int, barrier: Any, results: Any) -> None:
    store = open_redis_store(url, "race4", params=CLUSTER)
    assert isinstance(store, ShardedRedisContentStore)
    fingerprinter = ContentFingerprinter()
    near, exact = _group_texts()
    answers = []
    for g in range(GROUPS):
        # every process, at the same moment: the group's exact page, then its near copies in its own order
        order = list(range(VARIANTS))
        random.Random(worker * 100 + g).shuffle(order)
        jobs = [(f"x{g}", f"https://x.test/{g}/w{worker}", exact[g])]
        jobs += [(f"n{g}", f"https://n.test/{g}/{v}", near[g][v]) for v in order]
        fps = [(group, page, fingerprinter.fingerprint(text)) for group, page, text in jobs]
        barrier.wait()
        for group, page, fp in fps:
            answers.append((group, page, *store.check_and_add(page, fp)))
    results.put((worker, answers, store.races_kept_twice))
    store.close()


def test_four_processes_on_a_three_node_cluster_keep_the_stated_guarantees(cluster_url, redis_url):
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_cluster_race_worker, args=(cluster_url, w, barrier, results)) for w in range(4)]
    for p in procs:
        p.start()
    collected = [results.get(timeout=180) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    answers = [a for _, got, _ in collected for a in got]
    kept = {page for _, page, kind, _, _ in answers if kind == "unique"}
    kept_per_group = {g: sorted({page for group, page, kind, _, _ in answers if group == g and kind == "unique"})
                      for g in {a[0] for a in answers}}
    # exact duplicates: one kept per group over the four processes
    assert all(len(kept_per_group[f"x{g}"]) == 1 for g in range(GROUPS)), kept_per_group
    # a dropped page names a kept page, of its own group
    dropped = [(group, page, kept_url) for group, page, kind, kept_url, _ in answers if kind != "unique"]
    assert all(kept_url in kept and kept_url in kept_per_group[group] for group, _, kept_url in dropped), dropped
    # a near copy decided twice (two processes) is kept at most once ...
    near_answers = [a for a in answers if a[0].startswith("n")]
    assert all(sum(1 for a in near_answers if a[1] == page and a[2] == "unique") <= 1
               for page in {a[1] for a in near_answers})
    # ... a group kept at most once per process (a process decides one page at a time, and reads its own keeps) ...
    assert all(len(kept_per_group[f"n{g}"]) <= 4 for g in range(GROUPS))
    # ... and every double keep of a group is a counted race: the pairs of kept copies of a group that are
    # near duplicates of each other (checked one pair at a time, on a fresh one-node index)
    fingerprinter = ContentFingerprinter()
    near, _ = _group_texts()
    text_of = {f"https://n.test/{g}/{v}": near[g][v] for g in range(GROUPS) for v in range(VARIANTS)}
    pairs = 0
    for g in range(GROUPS):
        group = kept_per_group[f"n{g}"]
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                judge = open_redis_store(redis_url, f"judge:{a}:{b}")
                judge.check_and_add(a, fingerprinter.fingerprint(text_of[a]))
                pairs += judge.check_and_add(b, fingerprinter.fingerprint(text_of[b]))[0] == "near"
                judge.close()
    counted = sum(races for _, _, races in collected)
    store = open_redis_store(cluster_url, "race4", params=CLUSTER)
    extra = sum(len(kept_per_group[f"n{g}"]) - 1 for g in range(GROUPS))
    assert pairs == sum(len(k) * (len(k) - 1) // 2 for g, k in kept_per_group.items() if g.startswith("n"))
    print(f"\n[reliability] sharded content index, 4 processes, 3-node cluster: {GROUPS} exact groups kept once "
          f"each, {GROUPS} near groups: {extra} extra keeps, {pairs} near pairs kept twice, "
          f"{counted} races counted, {store.races()} in the index")
    assert counted == store.races() == pairs
    assert len(store) == len(kept)
    store.close()



@pytest.mark.parametrize("layout", ["memory", "one slot", "sharded"])
def test_add_unless_exact_stores_a_text_near_a_stored_one_and_every_store_answers_alike(layout, cluster_url,
                                                                                         redis_url):
    """A kept page's other text (its re-check, content/boilerplate.py) is stored without a near search: a text
    near it but not near the page's older one finds it. An exact copy of a stored text is not stored twice."""
    from dataclasses import replace

    from scrapy_dedup.content.engine import MemoryContentStore

    fingerprinter = ContentFingerprinter()
    rng = random.Random(5)
    content, chrome, extra = (" ".join(article_words(rng, n)) for n in (60, 34, 19))
    old, new, later = (fingerprinter.fingerprint(text) for text in (f"{content} {chrome}", content,
                                                                     f"{content} {extra}"))
    new = replace(new, exact=b"\x01" * 16)  # (the re-check's own key)
    for text, answer in ((new, "near"), (later, "unique")):  # nearness is not transitive
        alone = MemoryContentStore()
        alone.check_and_add("https://h.test/a", old)
        assert alone.check_and_add("https://h.test/x", text)[0] == answer
    store = {"memory": MemoryContentStore,
             "one slot": lambda: open_redis_store(redis_url, "dedup:add:content"),
             "sharded": lambda: open_redis_store(cluster_url, "dedup:add:content", params=CLUSTER)}[layout]()
    assert store.check_and_add("https://h.test/a", old) == ("unique", None, None)
    assert store.add_unless_exact("https://h.test/a", new) == ("unique", None, None)  # stored, though near
    assert len(store) == 2
    assert store.check_and_add("https://h.test/b", later)[:2] == ("near", "https://h.test/a")
    assert store.add_unless_exact("https://h.test/c", old) == ("exact", "https://h.test/a", 0)
    assert len(store) == 2
    store.close()
