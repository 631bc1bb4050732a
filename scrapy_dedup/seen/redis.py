"""Seen-key stores shared through Redis: an exact set, and a Bloom filter in bitmaps.

Both are safe for many processes at once: the per-key operation is one atomic
Redis command (``SADD``, ``BITFIELD``), so two workers that meet the same new
fingerprint at the same moment get "new" for exactly one of them. Both keep a
small local cache of fingerprints Redis confirmed (a key stays in Redis until
the key is deleted, so answering "seen" from it is exact and saves the round
trip of a recurring link), and send the per-request command pre-encoded on a
:class:`~scrapy_dedup._util.redis_conn.PinnedConnection` where the client has a
plain pool (docs/seen-stores.md's "The Redis filters" gives the figures).

No Scrapy imports here. The client is any redis-py client (``Redis``,
``RedisCluster``); the store does not own it and never closes it (it gives
back the one connection it pinned, at :meth:`close`).
"""
from __future__ import annotations

import logging
import math
import struct
import time
from collections.abc import Iterable
from typing import Any

from scrapy_dedup._util.batching import batches
from scrapy_dedup._util.redis_access import PROBE_TTL, probe_key
from scrapy_dedup._util.redis_conn import PinnedConnection, bulk, command_prefix
from scrapy_dedup.seen.base import (
    KeyHashing,
    SeenSet,
    bloom_size,
    digest_pair,
    false_positive_rate,
    structural_excess,
)

logger = logging.getLogger(__name__)

DEFAULT_CACHE_SIZE = 50_000
#: past this multiple of its error rate (expected, from the keys counted) a Redis Bloom filter refuses new keys
FULL_AT_RATE_MULTIPLE = 10
BATCH_SIZE = 1000
#: Redis strings (bitmaps) hold at most 2**32 bits
MAX_SHARD_BITS = 2 ** 32


class ConfirmedCache:
    """Fingerprints known to be in Redis; two generations, so memory stays bounded without LRU bookkeeping.

    Holds between ``size`` and ``2 * size`` keys: when the young generation is
    full it becomes the old one and the previous old one is dropped. A hit in
    the old generation is copied to the young one, so keys that keep recurring
    stay.
    """

    __slots__ = ("size", "young", "old")

    def __init__(self, size: int = DEFAULT_CACHE_SIZE):
        self.size = max(0, int(size))
        self.young: set[bytes] = set()
        self.old: set[bytes] = set()

    def __contains__(self, key: bytes) -> bool:
        if key in self.young:
            return True
        if key in self.old:
            self.add(key)
            return True
        return False

    def add(self, key: bytes) -> None:
        if not self.size:
            return
        young = self.young
        if len(young) >= self.size:
            self.old = young
            young = self.young = set()
        young.add(key)

    def clear(self) -> None:
        self.young = set()
        self.old = set()

    def __len__(self) -> int:
        return len(self.young | self.old)


class _RedisStore(SeenSet):
    """What both Redis stores share: the client, the cache, the TTL refresh."""

    def __init__(self, client: Any, key: str, *, ttl: int | None = None,
                 cache_size: int = DEFAULT_CACHE_SIZE):
        if not key:
            raise ValueError("key must be a non-empty string")
        self.client = client
        self.key = key
        self.ttl = ttl
        self.cache = ConfirmedCache(cache_size)
        self._next_ttl_refresh = 0.0
        self._pinned = PinnedConnection.of(client)

    def data_keys(self) -> list[str]:
        """Every Redis key this store writes (for TTL, delete, memory)."""
        return [self.key]

    def key_types(self) -> dict[str, str]:
        """The Redis type (as ``TYPE`` names it) each of :meth:`data_keys` must have."""
        raise NotImplementedError

    def wrong_types(self) -> list[tuple[str, str, str]]:
        """``(key, type found, type expected)`` for each key holding a value of another type (one round trip).

        Why: a key written by another program (or another dupefilter class) makes
        every command fail with ``WRONGTYPE``; found at start-up it is a
        configuration error named clearly, not a crawl that starts and fails.
        """
        expected = self.key_types()
        pipe = self.client.pipeline(transaction=False)
        for name in expected:
            pipe.type(name)
        found = [t.decode() if isinstance(t, bytes) else str(t) for t in pipe.execute()]
        return [(name, kind, want) for (name, want), kind in zip(expected.items(), found) if kind not in ("none", want)]

    def _refresh_ttl(self) -> None:
        """Re-arm the expiry of the keys every ttl/10 seconds (at most one extra round trip then)."""
        now = time.monotonic()
        if now >= self._next_ttl_refresh:
            self._next_ttl_refresh = now + max(1.0, (self.ttl or 0) / 10)
            pipe = self.client.pipeline(transaction=False)
            for name in self.data_keys():
                pipe.expire(name, self.ttl)
            pipe.execute()

    def clear(self) -> None:
        """Delete the Redis keys (every process sharing them starts over) and the local cache.

        ``UNLINK``: the server frees a large set or bitmap in the background instead of
        blocking every client (and outlasting their socket timeouts) while it does.
        """
        self.client.unlink(*self.data_keys())
        self.cache.clear()
        self._next_ttl_refresh = 0.0

    delete = clear

    # --- for a caller that adds keys in its own Lua script (scrapy_dedup.redis_queue) ---------

    #: how :meth:`script_args` is to be read: "set" (SADD the argument) or "bloom" (set the packed bits)
    script_kind = "set"

    def script_args(self, key: bytes) -> tuple[str, bytes]:
        """``(redis_key, argument)``: what a Lua script needs to add ``key`` itself, in one step with other work."""
        raise NotImplementedError

    def confirmed(self, key: bytes) -> None:
        """``key`` is in Redis (added here, or by someone else's script): remember it locally, keep the TTL armed."""
        self.cache.add(key)
        if self.ttl:
            self._refresh_ttl()

    def size_bytes(self) -> int:
        """Redis memory of the keys (``MEMORY USAGE``; sampled for large sets)."""
        total = 0
        for name in self.data_keys():
            used = self.client.memory_usage(name)
            total += int(used or 0)
        return total

    def close(self) -> None:
        self.cache.clear()
        if self._pinned is not None:
            self._pinned.release()


class RedisSeenSet(_RedisStore):
    """An exact set in one Redis key: 20-byte binary members, one ``SADD`` per new key.

    About 55-70 bytes of Redis memory per key (a hashtable set of 20-byte
    strings), against about 100 for scrapy-redis's 40-character hex members.
    """

    def __init__(self, client: Any, key: str, *, ttl: int | None = None,
                 cache_size: int = DEFAULT_CACHE_SIZE):
        super().__init__(client, key, ttl=ttl, cache_size=cache_size)
        self._sadd_prefix = command_prefix("SADD", key)

    def add(self, key: bytes) -> bool:
        if key in self.cache:
            return False
        if self._pinned is not None:
            added = self._pinned.execute(self._sadd_prefix + bulk(key))
        else:
            added = self.client.sadd(self.key, key)
        self.confirmed(key)
        return added == 1

    def key_types(self) -> dict[str, str]:
        return {self.key: "set"}

    def script_args(self, key: bytes) -> tuple[str, bytes]:
        """The set's key and the fingerprint itself (the script runs ``SADD``)."""
        return self.key, key

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, bytes):
            return False
        return key in self.cache or bool(self.client.sismember(self.key, key))

    def __len__(self) -> int:
        return int(self.client.scard(self.key))

    def _pipelined(self, command: str, keys: Iterable[bytes], cache: bool) -> list[bool]:
        """``command`` (SADD or SISMEMBER) per key, one pipelined round trip per batch; in the order of ``keys``."""
        result: list[bool] = []
        for batch in batches(keys, BATCH_SIZE):
            pipe = self.client.pipeline(transaction=False)
            for key in batch:
                pipe.execute_command(command, self.key, key)
            result.extend(reply == 1 for reply in pipe.execute())
            if cache:
                for key in batch:
                    self.cache.add(key)
        return result

    def add_many(self, keys: Iterable[bytes]) -> list[bool]:
        """One pipelined round trip per batch of keys; keeps the order of ``keys``."""
        result = self._pipelined("SADD", keys, cache=True)
        if self.ttl and result:
            self._refresh_ttl()
        return result

    def contains_many(self, keys: Iterable[bytes]) -> list[bool]:
        return self._pipelined("SISMEMBER", keys, cache=False)


# One key's bits as one BITFIELD command: SET u1 <position> 1 per bit. Redis runs a command alone,
# so the check (the old values it returns) and the insert are one atomic step: two workers adding
# the same new key see "some bit was 0" exactly once. Measured (docs/benchmarks.md): 8.8 µs of
# Redis CPU per new key, against 40 µs for the same SETBITs in a Lua script.
_SET_BIT = b"$3\r\nSET\r\n$2\r\nu1\r\n$%d\r\n%d\r\n$1\r\n1\r\n"
_GET_BIT = b"$3\r\nGET\r\n$2\r\nu1\r\n$%d\r\n%d\r\n"


def jemalloc_size(nbytes: int) -> int:
    """The size class jemalloc (Redis's allocator on Linux) rounds an allocation of ``nbytes`` up to.

    Above 16 KiB there are four classes per power of two, so a bitmap can cost up
    to 25% more than its length: 3.75 MB takes 4 MiB.
    """
    if nbytes <= 16384:
        return -(-nbytes // 16) * 16
    spacing = 1 << ((nbytes - 1).bit_length() - 3)
    return -(-nbytes // spacing) * spacing


#: bytes of a Redis string's allocation that are not bits (sds header and terminator), with room to spare
_SDS_SLACK = 32


def fit_to_allocator(total_bits: int, min_keys: int, extra_keys: int = 8) -> tuple[int, int]:
    """``(keys, bits_per_key)`` holding at least ``total_bits`` in the fewest allocated bytes.

    Redis pays for a bitmap in jemalloc size classes, so the bitmap is split over
    between ``min_keys`` and ``min_keys + extra_keys`` keys, whichever count
    wastes least, and each key's bits fill its size class (more bits than asked:
    a lower false-positive rate for the same memory). ``(0, 0)`` if even the
    largest count needs keys above Redis's 2**32-bit limit.
    """
    best: tuple[int, int, int] | None = None  # (allocated bytes, keys, bits per key)
    needed_bytes = -(-total_bits // 8)
    for keys in range(min_keys, min_keys + extra_keys + 1):
        per_key = -(-needed_bytes // keys)
        allocated = jemalloc_size(per_key + _SDS_SLACK)
        bits = min((allocated - _SDS_SLACK) * 8, MAX_SHARD_BITS)
        if bits < per_key * 8:
            continue
        if best is None or keys * allocated < best[0] * 0.97:  # another key only for a clear saving
            best = (keys * allocated, keys, bits)
    return (best[1], best[2]) if best else (0, 0)


class BloomLayoutMismatch(ValueError):
    """The Redis key holds a Bloom filter of another size or layout than this crawl is configured for."""


class RedisBloomSeenSet(_RedisStore):
    """A Bloom filter in Redis bitmaps, shared and atomic, one ``BITFIELD`` command per new key.

    The bitmap is allocated in full when first opened (``SETBIT`` of its last
    bit), so memory is known from the start; it does not grow, so past
    ``capacity`` its false-positive rate rises: size it for the crawl. Its bits
    are split over ``shards`` keys or a few more (:func:`fit_to_allocator`:
    fewer bytes of Redis's allocator classes), ``{<key>:<i>}``, each its own
    Cluster slot; a fingerprint's bits all live in one shard, so each command
    runs on one node. The layout is stored in ``<key>:meta``: a process
    configured differently is refused (:class:`BloomLayoutMismatch`) rather
    than reading the bits wrongly.

    Past its capacity, by a documented policy rather than in silence: the keys
    answered "new" are counted in ``<key>:meta`` (field ``added``, flushed
    every ``flush_every`` new keys, so the count is exact past any fill); the
    process whose count passes ``capacity`` logs one WARNING then, with the
    fill and the expected loss. At ``full_at`` keys (where the expected loss
    reaches ``FULL_AT_RATE_MULTIPLE`` times the error rate) the filter
    *refuses new keys*: it sets no more bits, so the loss of new URLs stays
    where it is; a key whose bits are not all set is answered "new" and kept
    in this process's :attr:`overflow` (an exact set: a link met again in this
    process is still filtered; another process may fetch it once more), each
    counted in :attr:`refused`; one WARNING per process says so. Paired with
    :class:`~scrapy_dedup.redis_queue.AckPriorityQueue` (whose script sets the
    bits itself) nothing is counted: the estimate from the bits stands in at
    close, and the filter neither warns at the moment nor refuses.
    """

    def __init__(self, client: Any, key: str, capacity: int = 10_000_000, error_rate: float = 1e-6,
                 *, shards: int = 1, ttl: int | None = None, cache_size: int = DEFAULT_CACHE_SIZE):
        super().__init__(client, key, ttl=ttl, cache_size=cache_size)
        if not isinstance(shards, int) or shards < 1:
            raise ValueError(f"shards must be an integer >= 1, got {shards!r}")
        requested_shards = shards
        total_bits, hashes = bloom_size(capacity, error_rate)
        keys, shard_bits = fit_to_allocator(total_bits, shards)
        if keys == 0:
            needed = math.ceil(total_bits / MAX_SHARD_BITS)
            raise ValueError(
                f"a Redis Bloom filter for {capacity} keys at {error_rate} needs {total_bits} bits, "
                f"more than {shards} Redis strings of at most 2**32 bits hold: use at least {needed} shards "
                "(DEDUP_REDIS_BLOOM_SHARDS)")
        shards = keys
        self.capacity = capacity
        self.error_rate = error_rate
        self.shards = shards
        self.shard_bits = shard_bits
        self.hashes = hashes
        #: a key's positions in its shard (one progression from its digest unless the shard is small)
        self.hashing = KeyHashing.for_filter(shard_bits, hashes, -(-capacity // shards), error_rate)
        self.shard_keys = [f"{{{key}:{i}}}" for i in range(shards)] if shards > 1 else [key]
        self.requested_shards = requested_shards
        self.meta_key = f"{key}:meta"
        # the whole command for a key as one format: its positions and their digit counts fill it in
        self._set_formats = {name: command_prefix("BITFIELD", name, trailing=4 * hashes) + _SET_BIT * hashes
                             for name in self.shard_keys}
        self._read_command = "BITFIELD_RO"  # Redis >= 6.2; plain BITFIELD (GET only) on older servers
        self._prepared = False
        #: keys counted in Redis at which the expected loss of new keys is FULL_AT_RATE_MULTIPLE x error_rate
        self.full_at = keys_at_rate(shard_bits * shards, hashes, min(0.5, FULL_AT_RATE_MULTIPLE * error_rate))
        self.flush_every = max(1, min(1000, capacity // 1000))
        self._unflushed = 0  # keys this process answered "new" not yet counted in Redis
        self.counted = 0  # the count Redis gave at the last flush
        self.full = False
        #: keys answered "new" after the filter was full (never written to its bits)
        self.overflow: set[bytes] = set()
        self.refused = 0

    # --- layout -------------------------------------------------------------------------

    def layout(self) -> dict[str, str]:
        from scrapy_dedup.seen.bloom import HASHING, LEGACY_HASHING

        hashing = self.hashing
        # one progression from the digest places keys as version 1 did: such a filter keeps its name
        scheme = LEGACY_HASHING if hashing.salt is None else f"{HASHING}:{hashing.groups}:{hashing.salt}"
        return {"format": "scrapy-dedup-redis-bloom", "hashing": scheme, "bits_per_shard": str(self.shard_bits),
                "hashes": str(self.hashes), "shards": str(self.shards), "capacity": str(self.capacity),
                "error_rate": repr(float(self.error_rate))}

    def data_keys(self) -> list[str]:
        return [*self.shard_keys, self.meta_key]

    def key_types(self) -> dict[str, str]:
        return {**{name: "string" for name in self.shard_keys}, self.meta_key: "hash"}

    def prepare(self) -> None:
        """Check or record the layout, and allocate every shard's bitmap up front (idempotent)."""
        mine = self.layout()
        stored = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
                  for k, v in (self.client.hgetall(self.meta_key) or {}).items()}
        if stored:
            fields = ("format", "hashing", "bits_per_shard", "hashes", "shards")
            if any(stored.get(f) != mine[f] for f in fields):
                raise BloomLayoutMismatch(
                    f"Redis key {self.key!r} holds a Bloom filter laid out as "
                    f"{ {f: stored.get(f) for f in fields + ('capacity', 'error_rate')} }, this crawl is configured "
                    f"for { {f: mine[f] for f in fields + ('capacity', 'error_rate')} }: use the same "
                    "DEDUP_BLOOM_CAPACITY, DEDUP_BLOOM_ERROR_RATE and DEDUP_REDIS_BLOOM_SHARDS as the processes "
                    "that made it, another DEDUP_REDIS_KEY, or DEDUP_REDIS_FLUSH_ON_START=True to start over")
        else:
            self.client.hset(self.meta_key, mapping=mine)
        pipe = self.client.pipeline(transaction=False)
        for name in self.shard_keys:
            # allocates the bitmap in full, keeping the last bit as it is (a SETBIT to 0 here cleared a bit
            # another process had set: every key with a position there was "new" again to that process)
            pipe.execute_command("BITFIELD", name, "INCRBY", "u1", self.shard_bits - 1, 0)
        pipe.execute()
        if self.ttl:
            self._next_ttl_refresh = 0.0
            self._refresh_ttl()
        self._prepared = True
        self.flush_count()  # a filter filled by earlier crawls is full (or past its capacity) from the start

    def permission_probes(self) -> tuple[list[tuple[Any, ...]], list[str]]:
        """The commands this filter sends: its writes on probe keys shaped like its keys, its reads on its keys; and
        the probe keys: for :func:`scrapy_dedup._util.redis_access.missing_permissions` at start."""
        meta = probe_key(self.meta_key)
        shards = [probe_key(name) for name in self.shard_keys]
        writes: list[tuple[Any, ...]] = [("HSET", meta, "probe", "1"), ("HINCRBY", meta, "added", 0),
                                         *(("BITFIELD", shard, "SET", "u1", 0, 1) for shard in shards)]
        if self.ttl:
            writes += [("EXPIRE", key, PROBE_TTL) for key in (meta, *shards)]
        reads = [("HGETALL", self.meta_key), *((self._read_command, name, "GET", "u1", 0) for name in self.shard_keys)]
        return writes + reads, [meta, *shards]

    def clear(self) -> None:
        super().clear()
        self._prepared = False
        self._unflushed = self.counted = self.refused = 0
        self.full = False
        self.overflow = set()

    def close(self) -> None:
        if self._unflushed:
            try:
                self.flush_count()
            except Exception:  # the count is best-effort at close (Redis may be gone): the bits are what matter
                pass
        super().close()

    delete = clear

    # --- the set ------------------------------------------------------------------------

    def _locate(self, key: bytes) -> tuple[str, list[int]]:
        """(shard key, bit positions) of a fingerprint."""
        shard = digest_pair(key)[2] % self.shards if self.shards > 1 else 0
        hashing = self.hashing
        return self.shard_keys[shard], hashing.positions(hashing.values(key))

    script_kind = "bloom"

    def script_args(self, key: bytes) -> tuple[str, bytes]:
        """The key's shard and its bit positions packed as little-endian uint32 (the script sets those bits).

        Positions fit: a shard holds at most 2**32 bits. The filter is allocated
        (:meth:`prepare`) first, as :meth:`add` does.
        """
        if not self._prepared:
            self.prepare()
        shard_key, where = self._locate(key)
        return shard_key, struct.pack(f"<{len(where)}I", *where)

    def _encode_set(self, shard_key: str, where: list[int]) -> bytes:
        fill: list[int] = []
        for position in where:
            fill += (len(str(position)), position)
        return self._set_formats[shard_key] % tuple(fill)

    def _encode_get(self, shard_key: str, where: list[int]) -> bytes:
        parts = [command_prefix(self._read_command, shard_key, trailing=3 * len(where))]
        parts += [_GET_BIT % (len(str(position)), position) for position in where]
        return b"".join(parts)

    def add(self, key: bytes) -> bool:
        if key in self.cache:
            return False
        if not self._prepared:
            self.prepare()
        if self.full:
            return self._refuse([key])[0]
        shard_key, where = self._locate(key)
        if self._pinned is not None:
            old = self._pinned.execute(self._encode_set(shard_key, where))
        else:
            old = self.client.execute_command("BITFIELD", shard_key, *_set_args(where))
        self.confirmed(key)
        new = 0 in old
        if new:
            self.count_new(1)
        return new

    # --- past the capacity -----------------------------------------------------------------

    def count_new(self, n: int) -> None:
        """``n`` keys were answered "new" here: count them in Redis every ``flush_every`` (and check the limits)."""
        self._unflushed += n
        if self._unflushed >= self.flush_every:
            self.flush_count()

    def flush_count(self) -> int:
        """Add this process's new keys to the shared count; warn when it passes the capacity or the limit."""
        pending, self._unflushed = self._unflushed, 0
        total = int(self.client.hincrby(self.meta_key, "added", pending))
        before, self.counted = total - pending, total
        if before < self.capacity <= total:
            fill = self.bits_set() / (self.shard_bits * self.shards)
            logger.warning(
                "Redis Bloom filter %r passed its capacity: %d keys counted in a filter sized for %d "
                "(DEDUP_BLOOM_CAPACITY), %.1f%% of its bits set; new URLs are now wrongly skipped as seen at "
                "about %.2g (DEDUP_BLOOM_ERROR_RATE %g), more as it fills; at %d keys it refuses new keys",
                self.key, total, self.capacity, 100 * fill, self.expected_false_positive_rate(total),
                self.error_rate, self.full_at)
        if total >= self.full_at and not self.full and self._prepared:
            self.full = True
            logger.warning(
                "Redis Bloom filter %r is full: %d keys counted (capacity %d), the expected loss of new URLs "
                "has reached %.2g, %d times DEDUP_BLOOM_ERROR_RATE; it refuses new keys from now on (no more "
                "bits set, so the loss stays there): a URL not in it is fetched and remembered in this process "
                "only, and another process may fetch it once more. Raise DEDUP_BLOOM_CAPACITY for the next "
                "crawl (with a fresh key)", self.key, total, self.capacity,
                self.expected_false_positive_rate(total), FULL_AT_RATE_MULTIPLE)
        return total

    def _refuse(self, keys: list[bytes]) -> list[bool]:
        """The answers of a full filter: read its bits, set none; a key not in them is new, kept in :attr:`overflow`."""
        absent = self._run_many([key for key in keys if key not in self.overflow], write=False)
        answers = iter(absent)
        out = []
        for key in keys:
            if key in self.overflow:
                out.append(False)
                continue
            new = next(answers)
            if new:
                self.overflow.add(key)
                self.refused += 1
            out.append(new)
        if any(out):
            self.count_new(sum(out))  # offered keys are counted still: the count at close is what came
        return out

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, bytes):
            return False
        return key in self.cache or self.contains_many([key])[0]

    def _replies(self, located: list[tuple[str, list[int]]], write: bool) -> list[Any]:
        """One BITFIELD per key, all pipelined in one round trip; each reply is the old bit values."""
        if self._pinned is not None:
            encode = self._encode_set if write else self._encode_get
            return self._pinned.execute_many([encode(shard, where) for shard, where in located])
        pipe = self.client.pipeline(transaction=False)
        for shard, where in located:
            if write:
                pipe.execute_command("BITFIELD", shard, *_set_args(where))
            else:
                pipe.execute_command(self._read_command, shard, *_get_args(where))
        return pipe.execute()

    def _run_many(self, keys: Iterable[bytes], write: bool) -> list[bool]:
        """For each key, in order: was some bit clear? (Set them too when ``write``.) 1000 keys per round trip."""
        if not self._prepared:
            self.prepare()
        result: list[bool] = []
        for batch in batches(keys, BATCH_SIZE):
            located = [self._locate(key) for key in batch]
            try:
                replies = self._replies(located, write)
            except Exception as exc:
                if write or self._read_command == "BITFIELD" or not _unknown_command(exc):
                    raise
                self._read_command = "BITFIELD"  # a Redis older than 6.2: BITFIELD with GETs only reads too
                replies = self._replies(located, write)
            result.extend(0 in old for old in replies)
        return result

    def add_many(self, keys: Iterable[bytes]) -> list[bool]:
        """Add a batch of keys (pipelined, 1000 per round trip); True where a key was new."""
        keys = list(keys)
        if not self._prepared:
            self.prepare()
        if self.full:
            return self._refuse(keys)
        flags = self._run_many(keys, write=True)
        for key in keys:
            self.cache.add(key)
        if self.ttl and keys:
            self._refresh_ttl()
        if any(flags):
            self.count_new(sum(flags))
        return flags

    def contains_many(self, keys: Iterable[bytes]) -> list[bool]:
        """Membership of many keys, read-only (``BITFIELD_RO``, pipelined, 1000 per round trip)."""
        return [not some_clear for some_clear in self._run_many(keys, write=False)]

    def _bit_counts(self) -> list[int]:
        """The bits set in each shard (one pipelined round trip)."""
        pipe = self.client.pipeline(transaction=False)
        for name in self.shard_keys:
            pipe.bitcount(name)
        return [int(n or 0) for n in pipe.execute()]

    def bits_set(self) -> int:
        return sum(self._bit_counts())

    def __len__(self) -> int:
        """Keys held: the keys counted (every process's "new" answers) or, where larger (a filter written
        before the count, or processes that have not flushed yet), the estimate from the bits set (Swamidass
        and Baldi, 2007); never capped: a filter whose every bit is set says its count."""
        total_bits = self.shard_bits * self.shards
        counted = int(self.client.hget(self.meta_key, "added") or 0) + self._unflushed
        ones = self.bits_set()
        if ones >= total_bits:
            return counted
        return max(counted, int(round(-total_bits / self.hashes * math.log1p(-ones / total_bits))))

    def estimated_false_positive_rate(self) -> float:
        """``fill ** hashes`` per shard, averaged over shards (a key lands in each with equal probability)."""
        return sum((n / self.shard_bits) ** self.hashes for n in self._bit_counts()) / self.shards

    def expected_false_positive_rate(self, keys: int) -> float:
        """The rate the sizing formula predicts once ``keys`` keys are held."""
        return (false_positive_rate(self.shard_bits * self.shards, self.hashes, keys)
                + structural_excess(self.shard_bits, self.hashes, -(-keys // self.shards), self.hashing.groups))


def keys_at_rate(bits: int, hashes: int, rate: float) -> int:
    """The keys at which a ``bits``/``hashes`` filter's expected false-positive rate reaches ``rate``."""
    return max(1, int(-bits / hashes * math.log1p(-rate ** (1.0 / hashes))))


def _set_args(where: list[int]) -> list[Any]:
    return [arg for position in where for arg in ("SET", "u1", position, 1)]


def _get_args(where: list[int]) -> list[Any]:
    return [arg for position in where for arg in ("GET", "u1", position)]


def _unknown_command(exc: BaseException) -> bool:
    """A Redis older than 6.2 refusing ``BITFIELD_RO``."""
    return "unknown command" in str(exc).lower()
