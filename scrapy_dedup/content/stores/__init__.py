"""The content stores, and the one factory that opens them: :func:`open_store`.

A content store answers ``check_and_add(url, fingerprint)`` atomically (the engine's
``ContentStore`` protocol, ``content/engine.py``). Three are built here:

* :class:`~scrapy_dedup.content.engine.MemoryContentStore`: this process's banded index;
* :class:`~scrapy_dedup.content.stores.redis_index.RedisContentStore`: one Redis hash slot,
  one Lua call per page (crawl processes share it);
* :class:`~scrapy_dedup.content.stores.redis_sharded.ShardedRedisContentStore`: keys spread
  over a Redis Cluster's slots.

:func:`open_store` builds the one the parameters and the backend ask for (the crawl's
extension and :func:`scrapy_dedup.content.judge.build_engine` call it); :func:`open_redis_store`
chooses the Redis layout from the client. The store modules import nothing of each other but
the sharded store's use of the one-slot store's key helpers (one direction, no cycle).
"""
from __future__ import annotations

from typing import Any

from scrapy_dedup.content.engine import MemoryContentStore, verify_rule_from_settings
from scrapy_dedup.content.sketch import DEFAULT_SKETCH_SIZE, VerifyRule
from scrapy_dedup.content.stores.redis_index import (
    ContentIndexMismatch,
    RedisContentStore,
    RedisSimhashIndex,
    config_fields,
    hash_tagged,
    is_cluster_client,
)
from scrapy_dedup.content.stores.redis_sharded import ShardedRedisContentStore
from scrapy_dedup._util.redis_conn import connect
from scrapy_dedup._util.redis_policy import FAIL_OPEN_CALL_SECONDS

__all__ = ["BACKENDS", "open_store", "open_redis_store", "memory_store", "MemoryContentStore", "RedisContentStore",
           "RedisSimhashIndex", "ShardedRedisContentStore", "ContentIndexMismatch", "mismatch_message"]

#: the content backends (``DEDUP_CONTENT_BACKEND``)
BACKENDS = ("memory", "redis")


def memory_store(params: Any) -> MemoryContentStore:
    """The in-memory content store of ``params`` (threshold, bands, bits, sketch, verification rule)."""
    return MemoryContentStore(threshold=params.hamming_threshold, bands=params.bands, bits=params.fingerprint_bits,
                              allow_approximate=getattr(params, "allow_approximate", False),
                              sketch_size=params.sketch_size, verify=verify_rule_from_settings(params))


def open_redis_store(client_or_url: Any, prefix: str, threshold: int = 3, bands: int = 4, bits: int = 64,
                     ttl: int | None = None, *, params: dict[str, Any] | None = None, allow_approximate: bool = False,
                     sketch_size: int = DEFAULT_SKETCH_SIZE, verify: VerifyRule | None = VerifyRule(),
                     sharded: bool | None = None) -> RedisContentStore | ShardedRedisContentStore:
    """A Redis content store from a redis-py client or a URL (opened with
    :func:`scrapy_dedup._util.redis_conn.connect`, closed by the store's ``close``).

    ``sharded`` None (the default) picks the layout: on a Redis Cluster client, the
    :class:`ShardedRedisContentStore` (keys spread over every node), unless ``prefix`` names
    its own hash tag (``{...}``: the user asked for one slot); on one Redis node, the
    one-script :class:`RedisContentStore`.
    """
    owns_client = isinstance(client_or_url, str)
    client = connect(client_or_url, params, timeout=FAIL_OPEN_CALL_SECONDS) if owns_client else client_or_url
    if sharded is None:
        sharded = is_cluster_client(client) and hash_tagged(prefix) != prefix
    if sharded:
        return ShardedRedisContentStore(client, prefix, threshold=threshold, bands=bands, bits=bits, ttl=ttl,
                                        allow_approximate=allow_approximate, owns_client=owns_client,
                                        sketch_size=sketch_size, verify=verify)
    return RedisContentStore(RedisSimhashIndex(client, prefix, threshold=threshold, bands=bands, bits=bits, ttl=ttl,
                                               allow_approximate=allow_approximate),
                             owns_client=owns_client, sketch_size=sketch_size, verify=verify)


def open_store(params: Any, backend: str = "memory", *, url: str | None = None, key: str | None = None,
               redis_params: dict[str, Any] | None = None, ttl: int | None = None,
               sharded: bool | None = None) -> MemoryContentStore | RedisContentStore | ShardedRedisContentStore:
    """The content store of the engine's ``params`` (threshold, bands, bits, sketch, verification rule)
    on ``backend``: ``memory``, or ``redis`` at ``url`` under the key prefix ``key`` (``redis_params``:
    the client's options; ``ttl``: the keys' expiry; ``sharded``: as for :func:`open_redis_store`)."""
    if backend == "memory":
        return memory_store(params)
    if backend != "redis":
        raise ValueError(f"content backend must be one of {', '.join(map(repr, BACKENDS))}, got {backend!r}")
    if not url or not key:
        raise ValueError("the redis content backend needs the server's url and the index's key prefix")
    return open_redis_store(url, key, params=redis_params, threshold=params.hamming_threshold, bands=params.bands,
                            bits=params.fingerprint_bits, ttl=ttl,
                            allow_approximate=getattr(params, "allow_approximate", False),
                            sketch_size=params.sketch_size, verify=verify_rule_from_settings(params))


def mismatch_message(exc: ContentIndexMismatch, where: str) -> str:
    """What to tell when the index at ``where`` (a masked URL) was written with another config, and what to do."""
    stored, wanted = config_fields(exc.stored), config_fields(exc.wanted)
    if stored.get("layout") != wanted.get("layout"):
        why = (f"its keys are in layout {stored.get('layout')} (written by an earlier scrapy-dedup, or by the "
               f"other store: one slot or sharded over a cluster), this crawl reads and writes layout "
               f"{wanted.get('layout')}{exc.hint}")
    else:
        why = ("use the DEDUP_FINGERPRINT_BITS, DEDUP_BANDS and DEDUP_SKETCH_SIZE of the processes "
               "that wrote it")
    return (f"DEDUP_REDIS_INDEX_KEY {exc.prefix!r} at {where} holds an index written with {exc.stored}; this crawl "
            f"needs {exc.wanted}: {why}. To start over, delete the index's keys (open_redis_store(<DEDUP_REDIS_URL>, "
            f"{exc.prefix!r}, params=<DEDUP_REDIS_PARAMS>).clear(), from scrapy_dedup.content.stores, or "
            "DEDUP_REDIS_FLUSH_ON_START=True for one start), or set DEDUP_REDIS_INDEX_KEY "
            "to a new key (the pages of the old index are then not found)")
