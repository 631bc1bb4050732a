"""Four crawler processes share the Redis dupefilter and the Redis content index and crawl one site at once.

Each process is a real OS process (``tests/reliability_worker.py``, a
``CrawlerProcess``); a start barrier makes them begin together, and the
site's entry page links to every page, so all four race for every URL and
for every pair of near-duplicate pages (the server holds the entry page
until all four have asked for it). The truth is counted on the HTTP
server: every path must be fetched exactly once in total (the entry page is
also a start request, ``dont_filter``: once more per process, counted apart), and of
each (page, near copy) pair exactly one item kept over all processes.

The same runs against a real three-node Redis Cluster started here
(``redis-server --cluster-enabled yes``, ``redis-cli --cluster create``).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from pytest_twisted import inlineCallbacks

from tests.reliabilitysite import LinkedSite
from tests.support.localsite import LocalSite

pytestmark = [pytest.mark.redis, pytest.mark.crawl]

ROOT = Path(__file__).resolve().parent.parent
WORKERS = 4


class EntryBarrier:
    """Hold the entry page's responses until every process has asked for it: all then race for all links."""

    def __init__(self, router, parties: int = WORKERS):
        self.router = router
        self.barrier = threading.Barrier(parties, timeout=60)
        self.entered = 0
        self.lock = threading.Lock()

    def __call__(self, host: str, path: str):
        if path == "/":
            with self.lock:
                self.entered += 1
                first_round = self.entered <= self.barrier.parties
            if first_round:
                self.barrier.wait()
        return self.router(host, path)


def run_workers(site_url: str, settings: dict, tmp: Path, n: int = WORKERS) -> list[dict]:
    """Start ``n`` crawler processes, release them together, return each one's kept paths and stats."""
    return run_workers_each([site_url] * n, settings, tmp)


def check_race(site: LocalSite, linked: LinkedSite, results: list[dict], name: str) -> None:
    hits = Counter(path for _, path in site.fetched())
    kept = Counter(path for r in results for path in r["kept"])
    new = [r["stats"].get("dedup/seen/new", 0) for r in results]
    print(f"\n[reliability] {name}: {len(results)} processes, pages={len(linked.paths)}, "
          f"fetches={sum(hits[p] for p in linked.paths)}, fetched_twice={sum(1 for p in linked.paths if hits[p] > 1)}, "
          f"lost={sum(1 for p in linked.paths if not hits[p])}, entry page fetches={hits['/']}, "
          f"new per process={new}, items kept={sum(kept.values())}, "
          f"pairs kept twice={sum(1 for a, b in linked.pairs() if kept[a] + kept[b] > 1)}, "
          f"redis errors={sum(r['stats'].get('dedup/redis/errors', 0) for r in results)}")
    # the entry page: a start request (dont_filter) once per process, plus once through the filter, as
    # the pages' "Home" link; the 404 "/cart" link only through the filter
    assert hits["/"] == len(results) + 1
    assert hits["/cart"] == 1
    assert {p: hits[p] for p in linked.paths if hits[p] != 1} == {}  # every page exactly once in total
    assert sum(new) == len(linked.paths) + 2  # each URL ("/", "/cart" too) "new" to exactly one process
    # every process asked about every link of the entry page (they raced for them; Redis picked one each)
    checked = [r["stats"].get("dedup/seen/checked", 0) for r in results]
    assert min(checked) >= len(linked.paths), checked
    paired = {p for pair in linked.pairs() for p in pair}
    assert {p: kept[p] for p in linked.paths if p not in paired and kept[p] != 1} == {}
    assert [(a, b, kept[a], kept[b]) for a, b in linked.pairs() if kept[a] + kept[b] != 1] == []
    for r in results:
        assert r["stats"]["finish_reason"] == "finished"
        assert "dedup/content/store_errors" not in r["stats"]
        assert "dedup/redis/errors" not in r["stats"]


def base_settings(url: str, dupefilter: str, **extra) -> dict:
    return {
        "ADDONS": {"scrapy_dedup.Addon": 0},
        "DUPEFILTER_CLASS": dupefilter,
        "DEDUP_REDIS_URL": url,
        "DEDUP_CONTENT_BACKEND": "redis",
        "DEDUP_BLOOM_CAPACITY": 100_000,
        "CONCURRENT_REQUESTS": 4,
        **extra,
    }


def test_four_processes_one_redis_exact_filter_and_content_index(redis_url, tmp_path):
    linked = LinkedSite(pages=40, near=10, delay=0.01)
    with LocalSite(EntryBarrier(linked)) as site:
        results = run_workers(site.url("127.0.0.1"), base_settings(redis_url, "scrapy_dedup.RedisDupeFilter"),
                              tmp_path)
    check_race(site, linked, results, "4 processes, one Redis, RedisDupeFilter")


@pytest.mark.parametrize("dupefilter,extra", [
    ("scrapy_dedup.RedisDupeFilter", {}),
    ("scrapy_dedup.RedisBloomDupeFilter", {"DEDUP_REDIS_BLOOM_SHARDS": 3}),
], ids=["exact", "bloom-3-shards"])
def test_four_processes_on_a_three_node_redis_cluster(redis_cluster, tmp_path, dupefilter, extra):
    """The content index in one slot (its key names a hash tag): one script per decision, exact for near pairs."""
    import redis

    url = f"redis://127.0.0.1:{redis_cluster[0].port}/0"
    params = {"redis_cls": "redis.cluster.RedisCluster"}
    client = redis.cluster.RedisCluster.from_url(url)
    client.flushall()
    linked = LinkedSite(pages=40, near=10, delay=0.01)
    with LocalSite(EntryBarrier(linked)) as site:
        results = run_workers(site.url("127.0.0.1"),
                              base_settings(url, dupefilter, DEDUP_REDIS_PARAMS=params,
                                            DEDUP_REDIS_INDEX_KEY="{dedup:%(spider)s:content}", **extra), tmp_path)
    check_race(site, linked, results, f"4 processes, 3-node Redis Cluster, {dupefilter.rsplit('.', 1)[1]}")
    # the data really is spread over the nodes: Bloom shards on more than one node; the content index in one slot
    keys_per_node = [set(k.decode() for k in redis.Redis(port=n.port).keys("*")) for n in redis_cluster]
    content_nodes = [i for i, keys in enumerate(keys_per_node) if any(":content" in k for k in keys)]
    assert len(content_nodes) == 1  # one hash tag: the whole index on one node
    if "Bloom" in dupefilter:
        shard_nodes = [i for i, keys in enumerate(keys_per_node) if any(k.startswith("{dedup:") for k in keys)]
        assert len(shard_nodes) >= 2
    client.close()


def test_four_processes_share_a_content_index_sharded_over_a_three_node_cluster(redis_cluster, tmp_path):
    """The default index key on a cluster: buckets, records and exact hashes spread over every node.

    The stated guarantees (``scrapy_dedup.content.redis_sharded``): of each exact copy pair one page
    kept at most once; no page lost; a near pair kept twice only in a race, and each such pair counted once
    (``dedup/content/near_kept_twice``, summed over the processes).
    """
    import redis

    url = f"redis://127.0.0.1:{redis_cluster[0].port}/0"
    client = redis.cluster.RedisCluster.from_url(url)
    client.flushall()
    linked = LinkedSite(pages=40, near=10, copies=10, delay=0.01)
    with LocalSite(EntryBarrier(linked)) as site:
        results = run_workers(site.url("127.0.0.1"), base_settings(
            url, "scrapy_dedup.RedisDupeFilter", DEDUP_REDIS_PARAMS={"redis_cls": "redis.cluster.RedisCluster"}),
            tmp_path)
    hits = Counter(path for _, path in site.fetched())
    kept = Counter(path for r in results for path in r["kept"])
    races = sum(r["stats"].get("dedup/content/near_kept_twice", 0) for r in results)
    twice = [(a, b) for a, b in linked.pairs() if kept[a] + kept[b] > 1]
    print(f"\n[reliability] 4 processes, content index sharded over a 3-node cluster: pages={len(linked.paths)}, "
          f"items kept={sum(kept.values())}, copy pairs kept twice="
          f"{sum(1 for a, b in linked.copy_pairs() if kept[a] + kept[b] > 1)}, near pairs kept twice={len(twice)}, "
          f"races counted={races}")
    assert {p: hits[p] for p in linked.paths if hits[p] != 1} == {}  # every page fetched once, none lost
    # /p/<i>, its exact copy and its near copy: the text of /p/<i> kept at most once (or dropped as a near
    # duplicate of /near/<i>), the group at least once, twice only in a race, and each such race counted
    groups = [(f"/p/{i}", f"/copy/{i}", f"/near/{i}") for i in range(linked.near)]
    assert [(p, kept[p], kept[c], kept[n]) for p, c, n in groups
            if not (kept[p] + kept[c] <= 1 and kept[n] <= 1 and kept[p] + kept[c] + kept[n] >= 1)] == []
    assert races == sum(1 for p, c, n in groups if kept[p] + kept[c] + kept[n] == 2)
    paired = {p for group in groups for p in group}
    assert {p: kept[p] for p in linked.paths if p not in paired and kept[p] != 1} == {}
    for r in results:
        assert r["stats"]["finish_reason"] == "finished"
        assert "dedup/content/store_errors" not in r["stats"]
    keys_per_node = [set(k.decode() for k in redis.Redis(port=n.port).keys("*")) for n in redis_cluster]
    assert all(any(":content" in k for k in keys) for keys in keys_per_node)  # the index on every node
    client.close()


@pytest.mark.parametrize("policy", ["fail_open", "retry"])
@inlineCallbacks
def test_one_cluster_node_killed_mid_crawl_and_restarted(redis_cluster, policy, caplog):
    """A partial outage: the node holding a Bloom shard is SIGKILLed at the 8th response and restarted
    (at the 16th response, or 1 s later from a thread while ``retry`` waits); its slots come back with it."""
    import logging

    import redis

    from tests.reliabilitysite import LinkedSpider
    from tests.support.crawl import run_crawl

    url = f"redis://127.0.0.1:{redis_cluster[0].port}/0"
    client = redis.cluster.RedisCluster.from_url(url)
    client.flushall()
    port = client.get_node_from_key("{dedup:linked:seen:0}").port
    client.close()
    victim = next(node for node in redis_cluster if node.port == port)
    count = {"n": 0}

    def on_response(spider, response):
        count["n"] += 1
        if count["n"] == 8:
            victim.proc.kill()
            victim.proc.wait()
            victim.proc = None
            if policy == "retry":
                threading.Timer(1.0, victim.start).start()
        if count["n"] == 16 and policy == "fail_open":
            victim.start()
            # back means serving again: a restarted node answers CLUSTERDOWN for a second or two
            # while it rejoins (a fail_open probe does not wait that out, so the test does)
            deadline = time.monotonic() + 30
            while "cluster_state:ok" not in subprocess.run(["redis-cli", "-p", str(victim.port), "cluster", "info"],
                                                           capture_output=True, text=True, timeout=10).stdout:
                assert time.monotonic() < deadline, "the restarted node did not rejoin"
                time.sleep(0.1)

    linked = LinkedSite(pages=30, near=5, delay=0.01, entry_links_all=False)
    settings = {**base_settings(url, "scrapy_dedup.RedisBloomDupeFilter", DEDUP_REDIS_BLOOM_SHARDS=3,
                                DEDUP_REDIS_PARAMS={"redis_cls": "redis.cluster.RedisCluster"},
                                DEDUP_REDIS_ON_ERROR=policy),
                "CONCURRENT_REQUESTS": 2}
    try:
        with LocalSite(linked) as site:
            crawler = yield run_crawl(LinkedSpider, settings, start_urls=[site.url("site.test")],
                                      on_response=on_response)
    finally:
        if victim.proc is None:
            victim.start()
    hits = Counter(path for _, path in site.fetched())
    stats = crawler.stats.get_stats()
    print(f"\n[reliability] cluster node killed, {policy}: lost={sum(1 for p in linked.paths if not hits[p])} "
          f"fetched_twice={sum(1 for p in linked.paths if hits[p] > 1)} finish_reason={stats['finish_reason']} "
          + str({k: v for k, v in sorted(stats.items()) if k.startswith(('dedup/redis/', 'dedup/content/store'))}))
    assert [p for p in linked.paths if not hits[p]] == []
    assert [p for p in linked.paths if hits[p] > 1] == []
    assert stats["finish_reason"] == "finished"
    assert stats["dedup/redis/errors"] >= 1
    if policy == "fail_open":
        assert stats["dedup/redis/replayed"] == stats["dedup/redis/fail_open"]
    else:
        assert "dedup/redis/fail_open" not in stats
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.name for r in errors].count("scrapy_dedup._util.redis_policy") == 1
    assert not [r for r in caplog.records if r.exc_info], "a traceback reached the log"


class EntriesBarrier:
    """Hold the responses of the processes' own entry pages ``/?w=<i>`` until all have asked for theirs."""

    def __init__(self, router, parties: int):
        self.router = router
        self.barrier = threading.Barrier(parties, timeout=60)

    def __call__(self, host: str, path: str):
        if path.startswith("/?w="):
            self.barrier.wait()
        return self.router(host, path)


def run_workers_each(site_urls: list[str], settings: dict, tmp: Path) -> list[dict]:
    """One crawler process per start URL, released together; each one's kept paths and stats."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    outs = [tmp / f"worker{i}.json" for i in range(len(site_urls))]
    procs = [subprocess.Popen([sys.executable, "-m", "tests.reliability_worker", url, str(out), json.dumps(settings)],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for url, out in zip(site_urls, outs)]
    deadline = time.monotonic() + 90
    while not all(Path(str(o) + ".ready").exists() for o in outs):
        dead = [p for p in procs if p.poll() is not None]
        assert not dead, dead[0].stdout.read().decode(errors="replace")
        assert time.monotonic() < deadline, "workers did not get ready"
        time.sleep(0.05)
    (tmp / "go").touch()
    results = []
    for proc, out in zip(procs, outs):
        output, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, output.decode(errors="replace")
        results.append(json.loads(out.read_text()))
    return results


@pytest.mark.parametrize("workers,dupefilter", [
    (2, "scrapy_dedup.RedisDupeFilter"),
    (4, "scrapy_dedup.RedisDupeFilter"),
    (4, "scrapy_dedup.RedisBloomDupeFilter"),
], ids=["2-exact", "4-exact", "4-bloom"])
def test_processes_sharing_the_redis_queue_and_the_dupefilter_fetch_every_page_once(
        redis_url, tmp_path, workers, dupefilter):
    """scrapy-redis's scheduler with AckPriorityQueue on the dupefilter's server (one script marks and queues):
    the processes share one queue and one seen set. Each starts at its own entry URL (``/?w=<i>``, the entry
    page, held until all asked), so all parse the entry page at once and race for its links, in the seen set
    and then in the queue; every page must be fetched once in total."""
    linked = LinkedSite(pages=40, near=10, delay=0.05)
    settings = base_settings(redis_url, dupefilter,
                             SCHEDULER="scrapy_redis.scheduler.Scheduler", SCHEDULER_PERSIST=True,
                             SCHEDULER_QUEUE_CLASS="scrapy_dedup.redis_queue.AckPriorityQueue", REDIS_URL=redis_url)
    with LocalSite(EntriesBarrier(linked, workers)) as site:
        results = run_workers_each([site.url("127.0.0.1", f"/?w={i}") for i in range(workers)], settings, tmp_path)
    hits = Counter(path for _, path in site.fetched())
    kept = Counter(path for r in results for path in r["kept"])
    new = [r["stats"].get("dedup/seen/new", 0) for r in results]
    one_step = [r["stats"].get("dedup/queue/marked_and_pushed", 0) for r in results]
    dequeued = [r["stats"].get("scheduler/dequeued/redis", 0) for r in results]
    print(f"\n[reliability] {workers} processes, shared Redis queue and {dupefilter.rsplit('.', 1)[1]}: "
          f"fetches={sum(hits[p] for p in linked.paths)} of {len(linked.paths)} pages, new per process={new}, "
          f"one-step pushes={one_step}, dequeued per process={dequeued}")
    assert {p: hits[p] for p in linked.paths if hits[p] != 1} == {}  # every page exactly once in total
    assert {f"/?w={i}": hits[f"/?w={i}"] for i in range(workers)} == {f"/?w={i}": 1 for i in range(workers)}
    assert hits["/"] == 1 and hits["/cart"] == 1  # the pages' "Home" link and the 404 link, through the filter
    # each URL ("/", "/cart" too) new to exactly one process (entries: dont_filter)
    assert sum(new) == len(linked.paths) + 2
    assert one_step == new  # every new request was marked and queued in one step
    paired = {p for pair in linked.pairs() for p in pair}
    assert {p: kept[p] for p in linked.paths if p not in paired and kept[p] != 1} == {}
    assert [(a, b, kept[a], kept[b]) for a, b in linked.pairs() if kept[a] + kept[b] != 1] == []
    for r in results:
        assert r["stats"]["finish_reason"] == "finished"
        assert "dedup/redis/errors" not in r["stats"] and "dedup/queue/reclaimed" not in r["stats"]
    import redis

    client = redis.Redis.from_url(redis_url)
    assert client.zcard("linked:requests") == 0 and list(client.scan_iter(match="linked:requests:inflight:*")) == []
    client.close()


@pytest.mark.parametrize("dedup_key,dupefilter,capacity,pairs", [
    ("{crawl}:seen", "scrapy_dedup.RedisDupeFilter", 10_000, True),
    ("{crawl}:seen", "scrapy_dedup.RedisBloomDupeFilter", 50_000, True),  # a bitmap the allocator keeps in one key
    ("{crawl}:seen", "scrapy_dedup.RedisBloomDupeFilter", 10_000, False),  # split in 3 keys, each its own tag
    ("dedup:%(spider)s:seen", "scrapy_dedup.RedisDupeFilter", 10_000, False),  # no shared tag
], ids=["shared-tag-exact", "shared-tag-bloom-one-key", "shared-tag-bloom-3-keys", "default-key"])
def test_on_redis_cluster_the_one_step_push_needs_one_hash_slot(redis_cluster, caplog, dedup_key, dupefilter,
                                                                 capacity, pairs):
    """On a real three-node cluster the queue pairs with the dupefilter only if their keys share a slot;
    otherwise the two calls stay (and work), with the WARNING."""
    import redis
    from scrapy import Request, Spider
    from scrapy.utils.misc import load_object
    from scrapy.utils.test import get_crawler

    from scrapy_dedup.redis_queue import AckPriorityQueue

    url = f"redis://127.0.0.1:{redis_cluster[0].port}/0"
    client = redis.cluster.RedisCluster.from_url(url)
    client.flushall()
    crawler = get_crawler(Spider, {"DEDUP_REDIS_URL": url, "DEDUP_REDIS_KEY": dedup_key,
                                   "DEDUP_REDIS_PARAMS": {"redis_cls": "redis.cluster.RedisCluster"},
                                   "DEDUP_BLOOM_CAPACITY": capacity})
    spider = Spider.from_crawler(crawler, name="q")
    dupefilter = load_object(dupefilter).from_crawler(crawler)
    queue = AckPriorityQueue(client, spider, "{crawl}:requests")  # the queue's own scripts need a tag anyway
    try:
        assert queue.pair(dupefilter) is pairs
        assert dupefilter.request_seen(Request("http://a.test/x")) is False
        queue.push(Request("http://a.test/x"))
        assert len(queue) == 1
        assert queue.stats.get_value("dedup/queue/marked_and_pushed") == (1 if pairs else None)
        if not pairs:
            assert any("different hash slots" in r.getMessage() for r in caplog.records)
    finally:
        queue._spider_closed(spider, "finished")
        dupefilter.close("finished")
        client.close()
