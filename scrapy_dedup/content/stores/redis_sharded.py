"""The content store over a Redis Cluster: buckets, sketches and exact hashes spread over the hash slots.

Why: :class:`~scrapy_dedup.content.stores.redis_index.RedisContentStore` decides each page
in one Lua script, so every key it touches must share one hash slot: on a cluster
the whole index (its memory and every decision of every process) sits on one node.
Here each key carries its own hash tag, so the keys, hence the memory and the
commands, spread over every node of the cluster; a decision is then a few pipelined
round trips instead of one script, and its guarantees are stated below.

Layout (``P`` is the key prefix; the part in braces decides the slot):

``{P}:meta``            hash: ``config`` (a mismatch is refused), ``seq`` (last page id
                        handed out: each process takes ids 64 at a time), ``kept``
                        (pages kept)
``{P}:races``           hash: ``"<id>:<id>"`` of each pair of near duplicates that were
                        both kept because they were decided at the same moment
``{P:x:<hhhh>}``        hash: exact hash (its last 14 bytes) -> page id (4 bytes); the first
                        2 bytes of the exact hash name the key (65,536 keys)
``{P:b<i>:<hex>}``      hash: band buckets ``i`` grouped as in the one-slot layout (the top 9
                        bits of the block value name the key, the other bits the field),
                        entries as there (fingerprint, then the 4-byte page id)
``{P:m<t>:<hex>}``      hash: LSH buckets of table ``t``, same grouping and entries
``{P:r:<hex>}``         hash: the records of pages ``128 * hex`` to ``128 * hex + 127``:
                        field ``id % 128`` -> 2-byte sketch length, sketch, encoded URL
                        (many pages per key: a Redis key costs about 50 bytes of its own)

A bucket's slot follows from its band and block value, a record's from its page id,
an exact hash's from its first two bytes: all three spread evenly over the slots.

One decision (:meth:`ShardedRedisContentStore.check_and_add`):

1. read, in one pipeline: the page's exact hash and every bucket of its simhash bands
   and sketch; then the records of the candidates within the verify radius;
   verify them (closest, then oldest first) with the rule of
   :mod:`scrapy_dedup.content.sketch`, the same code the memory store runs;
2. an exact hash found: ``exact``; a candidate accepted: ``near``; neither: a new page:
3. take an id (from this process's block of 64), write its record, then claim its exact hash with
   ``HSETNX``; a process that loses the claim answers ``exact`` (the winner's record
   was written before its claim, so the winner's URL is there to name) and
   deletes its record;
4. append the page to its buckets and read the buckets back (one small script per
   bucket key, :data:`LUA_APPEND_FIELD`: a hash field has no ``APPEND``), in one pipeline.

Guarantees, across every process on every machine:

* an exact duplicate is kept exactly once: ``HSETNX`` on the exact hash's own key
  lets one page win it (a copy decided later may be answered ``near`` at distance 0
  instead of ``exact`` if it reads between the winner's claim and its bucket entries);
* no page is ever dropped as a duplicate of a page that is not stored: a page is found
  in a bucket only after its record and its exact claim are written, and only a page
  that won its exact claim is appended to buckets;
* a double keep under a race is possible, bounded and counted: two near duplicates
  whose steps 1 to 4 overlap can both be kept. Of two such pages, at least one reads
  the other back in step 4 (they share a bucket, the bucket key orders their appends,
  and the second appender reads after both); that process records the pair with
  ``HSETNX`` in ``{P}:races`` and counts it in :attr:`ShardedRedisContentStore.races_kept_twice`
  only if it was first to record it, so each pair is counted once over the fleet.
  With one decision in flight per process (the Scrapy engine decides one page at a
  time), a group of near duplicates is kept at most once per process racing for it.

A Redis error part way (a node down) leaves at most a record that no bucket names
(never found by a near check), a claimed exact hash (its copies answered ``exact``),
or a page in some of its buckets only (found through those); the caller fails open
and keeps the page. A decision touches keys on every node, so while one node is
down every page is kept unjudged (``dedup/content/store_errors``).

TTL: every key read or written by a decision gets its expiry refreshed.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Iterator, Optional

from scrapy_dedup.content.stores.redis_index import (
    ID_BYTES, MAX_ID, BandedLayout, ContentIndexMismatch, band_bucket_slots, decode_key,
    encode_key, lsh_bucket_slots,
)
from scrapy_dedup.content.sketch import DEFAULT_SKETCH_SIZE, Sketch, VerifyRule
from scrapy_dedup._util.redis_access import PROBE_TTL
from scrapy_dedup._util.redis_conn import delete_matching, glob_escape

logger = logging.getLogger(__name__)

#: bump when the layout of the sharded keys changes (part of the stored config); 2: buckets grouped in hashes
SHARDED_LAYOUT_VERSION = 2
#: pages per record key (a small hash; see the module doc)
RECORDS_PER_KEY = 128
#: page ids a process takes at a time (one HINCRBY per block; at most this many left unused per process)
ID_BLOCK = 64
#: bytes of the exact hash that name its key
EXACT_KEY_BYTES = 2

StoreAnswer = tuple[str, Optional[str], Optional[int]]

#: append ARGV[2] to field ARGV[1] of hash KEYS[1] and return the field's new value (atomic on its node)
LUA_APPEND_FIELD = """
local old = redis.call('HGET', KEYS[1], ARGV[1]) or ''
local v = old .. ARGV[2]
redis.call('HSET', KEYS[1], ARGV[1], v)
return v
"""


class ShardedRedisContentStore(BandedLayout):
    """The content store of :class:`scrapy_dedup.content.engine.ContentDeduplicator` over a Redis Cluster.

    Same interface and decision rule as :class:`~scrapy_dedup.content.stores.redis_index.RedisContentStore`;
    its guarantees across processes are in the module doc. Works on a single Redis too
    (the tests use it there), but there the one-script store is atomic and faster.
    """

    def __init__(self, client: Any, prefix: str, *, threshold: int = 3, bands: int = 4, bits: int = 64,
                 ttl: Optional[int] = None, allow_approximate: bool = False, owns_client: bool = False,
                 sketch_size: int = DEFAULT_SKETCH_SIZE, verify: Optional[VerifyRule] = VerifyRule()):
        super().__init__(client, prefix, threshold=threshold, bands=bands, bits=bits, ttl=ttl,
                         allow_approximate=allow_approximate)
        if "{" in prefix or "}" in prefix:
            raise ValueError(f"the key prefix {prefix!r} of a sharded content index must not contain braces: "
                             "the store puts its own hash tags in every key name")
        if verify is not None and not sketch_size:
            raise ValueError("verification needs sketches: sketch_size must be > 0 when verify is set")
        self.verify = verify
        self.sketch_size = sketch_size if verify is not None else 0
        self.meta_key = f"{{{prefix}}}:meta"
        self.races_key = f"{{{prefix}}}:races"
        self._config = f"bits={bits};bands={bands};layout=sharded{SHARDED_LAYOUT_VERSION}"
        if self.sketch_size:
            self._config += f";sketch={self.sketch_size}"
        self._config_checked = False
        self._ids: Iterator[int] = iter(())
        self._owns_client = owns_client
        #: pairs of near duplicates both kept in a race, counted by this store (each pair once over the fleet)
        self.races_kept_twice = 0
        self._lock = threading.Lock()

    # -- key names ------------------------------------------------------------
    def bucket_keys(self, fp: int, sketch: Optional[Sketch]) -> list[tuple[str, str]]:
        """``(key, field)`` of the page's buckets: its simhash bands, then (with verification) its LSH tables."""
        p = self.prefix
        names = [(f"{{{p}:b{i}:{hx}}}", field) for i, hx, field in band_bucket_slots(fp, self._bands)]
        if sketch is not None and self.verify is not None:
            names += [(f"{{{p}:m{t}:{hx}}}", field) for t, hx, field in lsh_bucket_slots(sketch)]
        return names

    def _record_slot(self, page_id: int) -> tuple[str, str]:
        return f"{{{self.prefix}:r:{page_id // RECORDS_PER_KEY:x}}}", str(page_id % RECORDS_PER_KEY)

    def _exact_slot(self, exact: bytes) -> tuple[str, bytes]:
        return f"{{{self.prefix}:x:{exact[:EXACT_KEY_BYTES].hex()}}}", exact[EXACT_KEY_BYTES:]

    def permission_probes(self) -> tuple[list[tuple[Any, ...]], list[str]]:
        """The commands this store sends (with its append script, run for real), each on a probe key shaped like
        the keys it sends it to, so in their slots and under a key-pattern ACL as they are; and those keys: for
        :func:`scrapy_dedup._util.redis_access.missing_permissions` at start."""
        p = self.prefix
        meta, exact, record, bucket = f"{{{p}}}:probe:meta", f"{{{p}:x:probe}}", f"{{{p}:r:probe}}", f"{{{p}:b0:probe}}"
        sketches = [f"{{{p}:m0:probe}}"] if self.sketch_size else []
        expire = [("EXPIRE", key, PROBE_TTL) for key in (meta, exact, record, bucket, *sketches)] if self.ttl else []
        probes: list[tuple[Any, ...]] = [
            ("HSETNX", meta, "f", "1"), ("HGET", meta, "f"), ("HINCRBY", meta, "f", 1), ("HLEN", meta),
            ("HGET", exact, "f"), ("HSETNX", exact, "f", "1"), ("HSET", exact, "f", "1"),
            ("HSET", record, "f", "1"), ("HGET", record, "f"), ("HDEL", record, "f"),
            *((command, key, *args) for key in (bucket, *sketches) for command, *args in (
                ("HGET", "f"), ("HSET", "f", "1"))),
            *(("EVAL", LUA_APPEND_FIELD, 1, key, "f", "1") for key in (bucket, *sketches)), *expire]
        return probes, [meta, exact, record, bucket, *sketches]

    # -- the store interface ----------------------------------------------------
    @property
    def index(self) -> "ShardedRedisContentStore":
        """The store is its own index (``len``, ``clear``), as the one-script store's ``index`` is."""
        return self

    def check_and_add(self, url: str, fp: Any) -> StoreAnswer:
        """``("unique", None, None)`` after recording ``url``, or ``("exact" | "near", kept_url, distance)``."""
        with self._lock:  # one client, one decision at a time per store (as the Lua store's script)
            return self._decide(url, fp)

    def _decide(self, url: str, fp: Any) -> StoreAnswer:
        self._check_config()
        simhash = fp.simhash
        if isinstance(simhash, bool) or not isinstance(simhash, int) or simhash < 0 or simhash >> self.bits:
            raise ValueError(f"fingerprint does not fit in {self.bits} bits: {simhash!r}")
        exact = fp.exact if isinstance(fp.exact, bytes) else int(fp.exact).to_bytes(16, "big")
        sketch: Optional[Sketch] = getattr(fp, "sketch", None) if self.verify is not None else None
        buckets = self.bucket_keys(simhash, sketch)
        exact_key, exact_field = self._exact_slot(exact)
        limit = self.threshold if sketch is None or self.verify is None else max(self.threshold, self.verify.radius)
        touched = [self.meta_key, exact_key, *(name for name, _ in buckets)]

        pipe = self.client.pipeline(transaction=False)
        pipe.hget(exact_key, exact_field)
        for name, field in buckets:
            pipe.hget(name, field)
        found, *blobs = pipe.execute()
        if found is not None:
            kept_url = self._url_of(int.from_bytes(found, "big"), touched)
            if kept_url is not None:  # (None: the kept page's record expired with its TTL; decide afresh)
                self._touch(touched)
                return "exact", kept_url, 0
        seen = self._candidates(blobs, simhash, limit)
        match = self._verified(seen, sketch, touched)
        if match is not None:
            self._touch(touched)
            return "near", match[0], match[1]

        page_id = self._next_id()
        id_bytes = page_id.to_bytes(ID_BYTES, "big")
        record_key, record_field = self._record_slot(page_id)
        blob = sketch.to_bytes() if sketch is not None else b""
        record = len(blob).to_bytes(2, "big") + blob + encode_key(url).encode("utf-8", "surrogateescape")
        self.client.hset(record_key, record_field, record)
        touched.append(record_key)
        if not self.client.hsetnx(exact_key, exact_field, id_bytes):
            # another process kept the same text first: its record was written before its claim
            winner = self.client.hget(exact_key, exact_field)
            kept_url = self._url_of(int.from_bytes(winner, "big"), touched) if winner is not None else None
            if kept_url is not None:
                self.client.hdel(record_key, record_field)
                self._touch(touched)
                return "exact", kept_url, 0
            self.client.hset(exact_key, exact_field, id_bytes)  # the winner's record expired (TTL): take over

        entry = simhash.to_bytes(self._fp_bytes, "big") + id_bytes
        pipe = self.client.pipeline(transaction=False)
        for name, field in buckets:
            pipe.execute_command("EVAL", LUA_APPEND_FIELD, 1, name, field, entry)  # the bucket after this append
        pipe.hincrby(self.meta_key, "kept", 1)
        after = pipe.execute()[:len(buckets)]
        concurrent = {pid: d for pid, d in self._candidates(after, simhash, limit).items()
                      if pid != page_id and pid not in seen}
        if concurrent:
            self._count_races(page_id, concurrent, sketch, touched)
        self._touch(touched)
        return "unique", None, None

    def _next_id(self) -> int:
        """A page id never handed out before: ids are taken ``ID_BLOCK`` at a time, one round trip per block."""
        page_id = next(self._ids, None)
        if page_id is None:
            last = int(self.client.hincrby(self.meta_key, "seq", ID_BLOCK))
            if last > MAX_ID:
                raise ValueError(f"content index {self.prefix!r}: DEDUPFULL index holds the maximum number of pages")
            self._ids = iter(range(last - ID_BLOCK + 1, last + 1))
            page_id = next(self._ids)
        return page_id

    def check_config(self) -> None:
        """Refuse an index written with another config (:class:`ContentIndexMismatch`): one read of ``{P}:meta``
        when the crawl opens the store, so a mismatch stops it before any page is judged (an empty index passes)."""
        stored = self.client.hget(self.meta_key, "config")
        if stored is not None:
            self._refuse_other(stored)

    def _check_config(self) -> None:
        if self._config_checked:
            return
        self.client.hsetnx(self.meta_key, "config", self._config)
        self._refuse_other(self.client.hget(self.meta_key, "config"))
        self._config_checked = True

    def _refuse_other(self, stored: Any) -> None:
        stored = stored.decode() if isinstance(stored, bytes) else stored
        if stored != self._config:
            hint = ""
            if stored is not None and "layout=sharded" not in stored:
                hint = (f"; it is a one-slot index: to go on using it on this cluster, name its hash tag in "
                        f"DEDUP_REDIS_INDEX_KEY ('{{{self.prefix}}}'), or choose another key")
            raise ContentIndexMismatch(self.prefix, str(stored), self._config, hint)

    def _records(self, ids: list[int], touched: list[str]) -> list[Optional[tuple[Optional[Sketch], str]]]:
        """``(sketch or None, url)`` of each page id (None: no record, e.g. a page that lost its exact claim)."""
        pipe = self.client.pipeline(transaction=False)
        for page_id in ids:
            key, field = self._record_slot(page_id)
            pipe.hget(key, field)
            touched.append(key)
        out: list[Optional[tuple[Optional[Sketch], str]]] = []
        for raw in pipe.execute():
            if raw is None:
                out.append(None)
                continue
            size = int.from_bytes(raw[:2], "big")
            kept_sketch = Sketch.from_bytes(raw[2:2 + size]) if size else None
            out.append((kept_sketch, str(decode_key(raw[2 + size:]))))
        return out

    def _accepts(self, sketch: Optional[Sketch], kept: Optional[Sketch], distance: int) -> bool:
        if sketch is None or kept is None or self.verify is None:
            return distance <= self.threshold
        return self.verify.near(sketch, kept, self.sketch_size)

    def _verified(self, seen: dict[int, int], sketch: Optional[Sketch],
                  touched: list[str]) -> Optional[tuple[str, int]]:
        """``(kept_url, distance)`` of the closest, then oldest, candidate the rule accepts."""
        ids = sorted(seen, key=lambda pid: (seen[pid], pid))
        for pid, record in zip(ids, self._records(ids, touched)):
            if record is not None and self._accepts(sketch, record[0], seen[pid]):
                return record[1], seen[pid]
        return None

    def _url_of(self, page_id: int, touched: list[str]) -> Optional[str]:
        record = self._records([page_id], touched)[0]
        return record[1] if record is not None else None

    def _count_races(self, page_id: int, concurrent: dict[int, int], sketch: Optional[Sketch],
                     touched: list[str]) -> None:
        ids = sorted(concurrent)
        for pid, record in zip(ids, self._records(ids, touched)):
            if record is None or not self._accepts(sketch, record[0], concurrent[pid]):
                continue
            pair = f"{min(pid, page_id)}:{max(pid, page_id)}"
            if self.client.hsetnx(self.races_key, pair, 1):
                self.races_kept_twice += 1
                logger.debug("Near duplicates kept twice (decided at the same moment): %s and pages %s",
                             record[1], pair)
        touched.append(self.races_key)

    def _touch(self, keys: list[str]) -> None:
        if not self.ttl:
            return
        pipe = self.client.pipeline(transaction=False)
        for name in dict.fromkeys(keys):
            pipe.expire(name, self.ttl)
        pipe.execute()

    def __len__(self) -> int:
        return int(self.client.hget(self.meta_key, "kept") or 0)

    def races(self) -> int:
        """Pairs of near duplicates kept twice in a race, over every process of the index."""
        return int(self.client.hlen(self.races_key))

    def clear(self) -> None:
        """Delete every key of this index (found with SCAN on every node)."""
        escaped = glob_escape(self.prefix)
        delete_matching(self.client, (f"\\{{{escaped}\\}}:*", f"\\{{{escaped}:*"))

    def close(self) -> None:
        """Close the Redis connection if this store opened it (a client passed in stays open)."""
        if self._owns_client:
            self.client.close()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(prefix={self.prefix!r}, threshold={self.threshold}, bands={self.bands}, "
                f"bits={self.bits}, ttl={self.ttl}, sketch_size={self.sketch_size}, verify={self.verify!r})")
