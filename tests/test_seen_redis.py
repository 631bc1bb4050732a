"""RedisSeenSet and RedisBloomSeenSet against a real redis-server."""
from __future__ import annotations

import hashlib
import math
import multiprocessing
import random

import pytest
import redis
from redis.crc import key_slot

from scrapy_dedup.seen.base import bloom_size
from scrapy_dedup.seen.redis import (
    BloomLayoutMismatch,
    ConfirmedCache,
    RedisBloomSeenSet,
    RedisSeenSet,
    jemalloc_size,
)

pytestmark = pytest.mark.redis

NON_MEMBERS = 1_000_000


def fingerprints(n: int, prefix: str = "u") -> list[bytes]:
    return [hashlib.sha1(f"{prefix}{i}".encode()).digest() for i in range(n)]


def random_keys(n: int, seed: int) -> list[bytes]:
    blob = random.Random(seed).randbytes(20 * n)
    return [blob[i:i + 20] for i in range(0, 20 * n, 20)]


def binomial_bound(rate: float, trials: int, z: float = 4.5) -> float:
    return rate * trials + z * math.sqrt(trials * rate * (1 - rate))


def server_calls(client, command: str) -> int:
    """How many times the server ran ``command`` since the last CONFIG RESETSTAT (round trips, measured by Redis)."""
    return int(client.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


# --- exact set -------------------------------------------------------------------------------

def test_exact_set_stores_binary_members(redis_client):
    seen = RedisSeenSet(redis_client, "t:seen")
    keys = fingerprints(100)
    assert all(seen.add(k) for k in keys)
    assert not any(seen.add(k) for k in keys)
    assert len(seen) == 100
    assert redis_client.smembers("t:seen") == set(keys)  # 20-byte binary members, not hex
    assert all(k in seen for k in keys) and b"x" * 20 not in seen


def test_exact_set_local_cache_saves_round_trips_but_a_fresh_process_asks_redis(redis_client):
    seen = RedisSeenSet(redis_client, "t:seen")
    keys = fingerprints(50)
    redis_client.config_resetstat()
    for _ in range(3):  # each key recurs three times
        for k in keys:
            seen.add(k)
    assert server_calls(redis_client, "sadd") == 50  # one SADD per key, the recurrences answered locally

    other = RedisSeenSet(redis_client, "t:seen")  # another process: no cache, Redis says "seen"
    assert not any(other.add(k) for k in keys)


def test_exact_set_shared_by_two_clients(redis_url):
    a = RedisSeenSet(redis.Redis.from_url(redis_url), "t:shared")
    b = RedisSeenSet(redis.Redis.from_url(redis_url), "t:shared")
    assert a.add(b"1" * 20)
    assert not b.add(b"1" * 20)
    assert b.add(b"2" * 20)
    assert not a.add(b"2" * 20)


def test_exact_set_batches_and_clear(redis_client):
    seen = RedisSeenSet(redis_client, "t:seen")
    keys = fingerprints(2500)
    assert seen.add_many(keys[:1500]) == [True] * 1500
    assert seen.add_many(keys) == [False] * 1500 + [True] * 1000
    assert seen.contains_many([keys[0], b"z" * 20]) == [True, False]
    seen.clear()
    assert not redis_client.exists("t:seen")
    assert seen.add(keys[0])  # the local cache was cleared too


def test_exact_set_ttl_is_set_and_refreshed(redis_client):
    seen = RedisSeenSet(redis_client, "t:seen", ttl=100)
    seen.add(b"a" * 20)
    assert 0 < redis_client.ttl("t:seen") <= 100
    redis_client.expire("t:seen", 5)
    seen._next_ttl_refresh = 0.0  # as if ttl/10 seconds had passed
    seen.add(b"b" * 20)
    assert redis_client.ttl("t:seen") > 50


@pytest.mark.parametrize("store", ["set", "bloom"])
def test_add_many_keeps_the_ttl_armed_as_add_does(redis_client, store):
    # A batch writer (add_many) must re-arm the expiry like add(): before, the Bloom
    # store's add_many never did, so keys written only in batches expired mid-crawl.
    if store == "set":
        seen = RedisSeenSet(redis_client, "t:ttl", ttl=100)
    else:
        seen = RedisBloomSeenSet(redis_client, "t:ttl", capacity=1000, error_rate=1e-3, shards=2, ttl=100)
    seen.add_many([b"a" * 20])
    for name in seen.data_keys():
        redis_client.expire(name, 5)
    seen._next_ttl_refresh = 0.0  # as if ttl/10 seconds had passed
    seen.add_many([b"b" * 20, b"c" * 20])
    assert all(redis_client.ttl(name) > 50 for name in seen.data_keys())


def test_exact_set_size_bytes_is_redis_memory(redis_client):
    seen = RedisSeenSet(redis_client, "t:seen")
    seen.add_many(fingerprints(10_000))
    per_key = seen.size_bytes() / 10_000
    assert 20 < per_key < 100, per_key


def test_confirmed_cache_is_bounded_and_keeps_recurring_keys():
    cache = ConfirmedCache(size=3)
    for key in (b"a", b"b", b"c"):
        cache.add(key)
    cache.add(b"d")  # young {a,b,c} becomes old
    assert b"a" in cache  # found in old: copied to young
    for key in (b"e", b"f", b"g"):
        cache.add(key)
    assert b"a" in cache and b"b" not in cache
    assert len(cache) <= 6


# --- Bloom in Redis --------------------------------------------------------------------------

@pytest.mark.parametrize("capacity", [100_000, 1_000_000])
def test_bloom_allocates_up_front_and_records_its_layout(redis_client, capacity):
    bloom = RedisBloomSeenSet(redis_client, "t:bloom", capacity=capacity, error_rate=1e-6)
    bloom.prepare()
    bits, hashes = bloom_size(capacity, 1e-6)
    lengths = [redis_client.strlen(name) for name in bloom.shard_keys]
    assert all(length * 8 == bloom.shard_bits for length in lengths)
    assert sum(lengths) * 8 >= bits  # at least the bits the sizing asks for
    used = sum(redis_client.memory_usage(name, samples=0) for name in bloom.shard_keys)
    assert used / capacity <= 4  # at most 4 bytes of Redis memory per URL of capacity at 1e-6
    meta = redis_client.hgetall("t:bloom:meta")
    assert meta[b"hashes"] == str(hashes).encode() and meta[b"shards"] == str(bloom.shards).encode()


def test_allocator_size_classes_match_redis(redis_client):
    for nbytes in (1000, 20_000, 3_590_000, 3_750_000, 37_500_000):
        redis_client.delete("t:bits")
        redis_client.setbit("t:bits", nbytes * 8 - 1, 0)
        used = redis_client.memory_usage("t:bits", samples=0)
        assert jemalloc_size(nbytes + 9) <= used <= jemalloc_size(nbytes + 9) + 128


def test_bloom_add_and_contains(redis_client):
    bloom = RedisBloomSeenSet(redis_client, "t:bloom", capacity=10_000, error_rate=1e-6)
    keys = fingerprints(3000)
    assert all(bloom.add(k) for k in keys)
    assert not any(bloom.add(k) for k in keys)
    fresh = RedisBloomSeenSet(redis_client, "t:bloom", capacity=10_000, error_rate=1e-6)  # no cache
    assert not any(fresh.add(k) for k in keys)
    assert fresh.contains_many(keys) == [True] * 3000
    assert abs(len(fresh) - 3000) < 30  # estimated from the bits set


def test_a_process_that_starts_keeps_every_bit_another_set(redis_client):
    """prepare() allocated the bitmap with SETBIT of its last bit to 0: a process starting mid-crawl cleared
    the bit another had set, and the keys with a position there were new again."""
    bloom = RedisBloomSeenSet(redis_client, "t:bloom", capacity=10_000, error_rate=1e-6, shards=2)
    bloom.prepare()
    for name in bloom.shard_keys:
        redis_client.setbit(name, bloom.shard_bits - 1, 1)
    RedisBloomSeenSet(redis_client, "t:bloom", capacity=10_000, error_rate=1e-6, shards=2).prepare()
    assert [redis_client.getbit(name, bloom.shard_bits - 1) for name in bloom.shard_keys] == [1] * bloom.shards
    assert all(redis_client.strlen(name) * 8 == bloom.shard_bits for name in bloom.shard_keys)


@pytest.mark.parametrize("pinned", [True, False], ids=["pinned", "client-commands"])
def test_bloom_one_command_per_new_key(redis_client, pinned):
    bloom = RedisBloomSeenSet(redis_client, "t:bloom", capacity=10_000, error_rate=1e-6)
    if not pinned:
        bloom._pinned = None  # the path cluster clients take: redis-py's own commands
    bloom.prepare()
    keys = fingerprints(100)
    redis_client.config_resetstat()
    for _ in range(3):
        for k in keys:
            bloom.add(k)
    assert server_calls(redis_client, "bitfield") == 100  # one round trip per new key, none for recurrences
    assert sum(server_calls(redis_client, c) for c in ("setbit", "getbit", "evalsha", "eval")) == 0
    fresh = RedisBloomSeenSet(redis_client, "t:bloom", capacity=10_000, error_rate=1e-6)
    if not pinned:
        fresh._pinned = None
    assert fresh.contains_many(keys + fingerprints(50, "other")) == [True] * 100 + [False] * 50
    assert fresh.add_many(keys[:10] + fingerprints(5, "new")) == [False] * 10 + [True] * 5
    assert server_calls(redis_client, "bitfield_ro") == 150


def test_bloom_reads_with_plain_bitfield_where_bitfield_ro_is_unknown(redis_client):
    """Redis before 6.2 has no BITFIELD_RO: membership falls back to BITFIELD with GETs only."""
    bloom = RedisBloomSeenSet(redis_client, "t:bloom", capacity=10_000, error_rate=1e-6)
    keys = fingerprints(30)
    bloom.add_many(keys[:20])
    redis_client.config_resetstat()
    bloom._read_command = "BITFIELD_RO_UNKNOWN"  # what an old server answers for BITFIELD_RO
    assert bloom.contains_many(keys) == [True] * 20 + [False] * 10
    assert bloom._read_command == "BITFIELD"
    assert server_calls(redis_client, "bitfield") == 30
    assert bloom.contains_many(keys[25:]) == [False] * 5  # nothing set by the reads


@pytest.mark.parametrize("kind", ["exact", "bloom"])
def test_store_pins_one_connection_and_gives_it_back_at_close(redis_server, kind):
    """The per-key command uses one connection of the client's pool, returned by close()."""
    # the pool's connections are told apart by name: the session's server may hold other tests' clients
    name = f"pin-{kind}"
    pool = redis.BlockingConnectionPool.from_url(redis_server.url, max_connections=2, timeout=0.5, client_name=name)
    client = redis.Redis(connection_pool=pool)
    client.flushdb()
    store = (RedisSeenSet(client, "t:pin") if kind == "exact"
             else RedisBloomSeenSet(client, "t:pin", capacity=10_000, error_rate=1e-6))
    assert all(store.add(k) for k in fingerprints(50))
    # the pinned one and the pool's other
    assert sum(c["name"] == name for c in client.client_list()) == 2
    held = pool.get_connection()  # the pool's last free connection
    with pytest.raises(redis.ConnectionError):
        client.ping()  # none left: the store still holds its own
    pool.release(held)
    store.close()
    held = pool.get_connection()
    assert client.ping()  # the store's connection is back in the pool
    pool.release(held)
    pool.disconnect()


@pytest.mark.parametrize("kind", ["exact", "bloom"])
def test_store_replaces_a_connection_the_server_closed_before_sending(redis_client, kind):
    """A connection closed by the server (restart, CLIENT KILL, idle timeout) is noticed before sending, not after."""
    store = (RedisSeenSet(redis_client, "t:k") if kind == "exact"
             else RedisBloomSeenSet(redis_client, "t:k", capacity=10_000, error_rate=1e-6))
    keys = fingerprints(4)
    assert store.add(keys[0])
    for key in keys[1:]:
        assert redis_client.client_kill_filter(_type="normal", skipme=True) >= 1
        assert store.add(key)  # no error: the closed connection was replaced before the command went out
    fresh = (RedisSeenSet(redis_client, "t:k") if kind == "exact"
             else RedisBloomSeenSet(redis_client, "t:k", capacity=10_000, error_rate=1e-6))
    assert not any(fresh.add(k) for k in keys)


def test_bloom_refuses_another_layout(redis_client):
    RedisBloomSeenSet(redis_client, "t:bloom", capacity=10_000, error_rate=1e-6).prepare()
    other = RedisBloomSeenSet(redis_client, "t:bloom", capacity=20_000, error_rate=1e-6)
    with pytest.raises(BloomLayoutMismatch, match="DEDUP_BLOOM_CAPACITY"):
        other.prepare()
    other.clear()  # flush: the new layout is accepted
    other.prepare()


def test_bloom_shards_use_distinct_cluster_slots(redis_client):
    bloom = RedisBloomSeenSet(redis_client, "t:bloom", capacity=50_000, error_rate=1e-4, shards=8)
    keys = fingerprints(8000)
    assert bloom.add_many(keys).count(True) >= 7995
    assert len({key_slot(name.encode()) for name in bloom.shard_keys}) == 8
    per_shard = [redis_client.bitcount(name) for name in bloom.shard_keys]
    assert min(per_shard) > 0.7 * max(per_shard)  # fingerprints spread over the shards
    fresh = RedisBloomSeenSet(redis_client, "t:bloom", capacity=50_000, error_rate=1e-4, shards=8)
    assert not any(fresh.add(k) for k in keys[:500])


def test_bloom_too_big_for_its_shards_names_the_setting(redis_client):
    with pytest.raises(ValueError, match="DEDUP_REDIS_BLOOM_SHARDS"):
        RedisBloomSeenSet(redis_client, "t:bloom", capacity=10**10, error_rate=1e-6, shards=1)


def test_bloom_delete_removes_every_key(redis_client):
    bloom = RedisBloomSeenSet(redis_client, "t:bloom", capacity=1000, error_rate=1e-3, shards=2, ttl=60)
    bloom.add(b"a" * 20)
    assert all(0 < redis_client.ttl(name) <= 60 for name in bloom.data_keys())
    bloom.delete()
    assert not redis_client.keys("*")


@pytest.mark.parametrize("rate,assert_it", [(1e-3, True), (1e-4, True), (1e-6, False)])
def test_bloom_false_positive_rate_on_a_million_non_members(redis_client, rate, assert_it):
    capacity = 100_000
    bloom = RedisBloomSeenSet(redis_client, "t:bloom", capacity=capacity, error_rate=rate, shards=2)
    assert bloom.shards >= 2
    bloom.add_many(random_keys(capacity, seed=2))
    false_positives = sum(bloom.contains_many(random_keys(NON_MEMBERS, seed=1)))
    predicted = bloom.expected_false_positive_rate(capacity)
    print(f"\nRedis Bloom at {rate:g}: {false_positives} false positives in {NON_MEMBERS} "
          f"(rate {false_positives / NON_MEMBERS:.3g}, predicted {predicted:.3g}; "
          f"estimated from bits {bloom.estimated_false_positive_rate():.3g})")
    if assert_it:
        # at most the configured rate (the bitmaps fill their allocator size class, so often less),
        # and what the sizing formula predicts for the bits actually allocated
        assert false_positives <= binomial_bound(rate, NON_MEMBERS)
        assert abs(false_positives - predicted * NON_MEMBERS) <= (
            binomial_bound(predicted, NON_MEMBERS) - predicted * NON_MEMBERS)
        assert predicted <= rate


# --- atomic across processes -----------------------------------------------------------------

def _race(url: str, kind: str, seed: int, queue, barrier) -> None:
    client = redis.Redis.from_url(url)
    client.ping()
    keys = fingerprints(3000)
    random.Random(seed).shuffle(keys)
    if kind == "exact":
        store = RedisSeenSet(client, "t:race")
    else:
        store = RedisBloomSeenSet(client, "t:race", capacity=100_000, error_rate=1e-6)
    barrier.wait(60)  # all connected and ready: start together
    queue.put([k for k in keys if store.add(k)])


@pytest.mark.parametrize("kind", ["exact", "bloom"])
def test_racing_processes_get_new_exactly_once(redis_url, kind):
    if kind == "bloom":  # lay it out first so the racers only race on keys
        RedisBloomSeenSet(redis.Redis.from_url(redis_url), "t:race", capacity=100_000, error_rate=1e-6).prepare()
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    barrier = ctx.Barrier(4)
    procs = [ctx.Process(target=_race, args=(redis_url, kind, seed, queue, barrier)) for seed in range(4)]
    for proc in procs:
        proc.start()
    results = [queue.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(30)
    new_keys = [k for result in results for k in result]
    assert len(new_keys) == len(set(new_keys)) == 3000  # every key new for exactly one process
    assert all(len(result) > 0 for result in results)  # they really raced


# --- Redis Bloom past its capacity: warned at the moment, refused past the limit, counted ------

def test_bloom_warns_the_moment_it_passes_its_capacity(redis_client, caplog):
    bloom = RedisBloomSeenSet(redis_client, "t:bloom", capacity=1000, error_rate=1e-3)
    keys = random_keys(1200, seed=21)
    with caplog.at_level("WARNING", logger="scrapy_dedup.seen.redis"):
        new = 0
        for key in keys:
            new += bloom.add(key)
            passed = [r.getMessage() for r in caplog.records if "passed its capacity" in r.getMessage()]
            assert bool(passed) == (new >= 1000)  # not before, and at once
    (line,) = passed
    assert "'t:bloom'" in line and "sized for 1000" in line and "% of its bits set" in line
    assert "wrongly skipped as seen at about" in line


def test_bloom_refuses_new_keys_past_its_limit_and_counts_what_it_was_offered(redis_client, caplog):
    """At 100x its capacity a filter that kept setting bits lost 93% of new URLs; this one stops at the limit."""
    rate, capacity = 1e-3, 1000
    bloom = RedisBloomSeenSet(redis_client, "t:bloom", capacity=capacity, error_rate=rate)
    offered = random_keys(100 * capacity, seed=22)
    with caplog.at_level("WARNING", logger="scrapy_dedup.seen.redis"):
        answers = bloom.add_many(offered[:capacity]) + [bloom.add(key) for key in offered[capacity:]]
    assert bloom.full and bloom.full_at < 3 * capacity
    ones = bloom.bits_set()
    after_full = answers[bloom.full_at + 100:]
    lost = after_full.count(False)
    # the loss stays at the limit's rate (10 x the error rate), not the 93% of a filter that kept filling
    assert lost <= binomial_bound(10 * rate, len(after_full))
    assert bloom.refused >= after_full.count(True) > 0.9 * len(after_full)
    assert not any(bloom.add(key) for key in offered[-500:])  # a refused key met again here is still filtered
    assert bloom.bits_set() == ones  # no more bits set
    full_lines = [r.getMessage() for r in caplog.records if "is full" in r.getMessage()]
    assert len(full_lines) == 1 and "refuses new keys" in full_lines[0]
    # another process learns it at its first count, and the count at close is not capped
    other = RedisBloomSeenSet(redis_client, "t:bloom", capacity=capacity, error_rate=rate)
    other.prepare()
    assert other.full
    bloom.close()
    # every key answered "new" is counted, refused ones too: not capped at 10x (the close used to say
    # "about 10000" when 100,000 were offered)
    assert len(other) >= 0.98 * len(offered)

