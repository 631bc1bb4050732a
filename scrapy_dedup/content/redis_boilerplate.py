"""Per-host block counts shared through Redis: the processes of one crawl learn one template per host.

:class:`RedisBlockTable` has the interface of :class:`~scrapy_dedup.content.boilerplate.BlockTable`
(``pages``, ``counts``, ``is_boilerplate``, ``add_page``, ``boilerplate``), kept in three Redis keys
per host under the content index's hash tag (its slot: a Redis Cluster runs the script, and one
node holds the index and the tables): a hash of block hash ->
count, capped at ``capacity`` fields; a set of the boilerplate hashes (at most ``capacity // 4``,
never removed: once boilerplate, always, as in the local table); a counter of the pages counted.
``add_page`` is one Lua script, so two processes counting pages at once never lose a count; past
the cap the fields of lowest count are deleted (down to three quarters of it: counts stay at or
below the truth, as in the local table; among equal counts Redis picks, not the least recent).
``refresh`` reads the page count and the boilerplate set in one round trip; the learner calls it
before each page, so a page is judged with what every process has learnt so far.

Block hashes must be alike in every process: BLAKE2b keyed by a random salt stored once in Redis
(:func:`shared_salt`), not Python's per-process hash. Memory in Redis per host: at most
``capacity`` hash fields (a 19-digit key and a small count: about 40-70 bytes each with Redis's
overhead, about 200 KiB at the default 4,096) plus ``capacity // 4`` set members. No Scrapy imports.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from scrapy_dedup.content.boilerplate import BoilerplateRule, in_sorted
from scrapy_dedup.content.stores.redis_index import hash_tagged
from scrapy_dedup._util.redis_access import PROBE_TTL, probe_key

__all__ = ["PROBE_HOST", "RedisBlockTable", "salt_key", "shared_salt", "table_prefix", "tables_permission_probes"]

#: the host of the table the start-up probes use: a reserved name (RFC 2606), never a crawled host's
PROBE_HOST = "probe.invalid"

# KEYS: counts hash, boilerplate set, pages counter. ARGV: min_pages, capacity, ttl (0: none), hashes...
# Returns {pages, grown hashes...}.
LUA_ADD_PAGE = """
local min_pages, capacity, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local pages = redis.call('INCR', KEYS[3])
local room = math.floor(capacity / 4) - redis.call('SCARD', KEYS[2])
local out = {pages}
for i = 4, #ARGV do
  local count = redis.call('HINCRBY', KEYS[1], ARGV[i], 1)
  if count >= min_pages and room > 0 and redis.call('SADD', KEYS[2], ARGV[i]) == 1 then
    room = room - 1
    out[#out + 1] = ARGV[i]
  end
end
local fields = redis.call('HLEN', KEYS[1])
if fields > capacity then
  local all = redis.call('HGETALL', KEYS[1])
  local items = {}
  for j = 1, #all, 2 do items[#items + 1] = {all[j], tonumber(all[j + 1])} end
  table.sort(items, function(a, b) return a[2] < b[2] end)
  for j = 1, fields - math.floor(capacity * 3 / 4) do redis.call('HDEL', KEYS[1], items[j][1]) end
end
if ttl > 0 then
  for k = 1, 3 do redis.call('EXPIRE', KEYS[k], ttl) end
end
return out
"""


def table_prefix(index_key: str, host: str) -> str:
    """The key prefix of ``host``'s table: under the content index's hash tag, in its slot (one Redis Cluster
    node holds the whole content index, the tables with it)."""
    return f"{hash_tagged(index_key)}:boilerplate:{host}"


def salt_key(index_key: str) -> str:
    """The Redis key of :func:`shared_salt`, under the content index's hash tag."""
    return f"{hash_tagged(index_key)}:boilerplate:salt"


def shared_salt(client: Any, index_key: str) -> bytes:
    """The key of the block hashes, the same for every process of the crawl: 16 random bytes set once."""
    key = salt_key(index_key)
    client.set(key, os.urandom(16), nx=True)
    salt = client.get(key)
    if not isinstance(salt, bytes) or len(salt) != 16:
        raise ValueError(f"{key} in Redis is not a 16-byte salt")
    return salt


class RedisBlockTable:
    """One host's block counts and boilerplate in Redis (see the module doc)."""

    def __init__(self, client: Any, prefix: str, rule: BoilerplateRule = BoilerplateRule(), ttl: int | None = None):
        self.client = client
        self.capacity, self.min_pages, self.ttl = rule.capacity, rule.min_pages, ttl or 0
        self.keys = (f"{prefix}:counts", f"{prefix}:boilerplate", f"{prefix}:pages")
        self._add = client.register_script(LUA_ADD_PAGE)
        self.pages = 0
        self._boiler = np.zeros(0, dtype=np.uint64)

    def permission_probes(self) -> tuple[list[tuple[Any, ...]], list[str]]:
        """The commands this table sends (its script, the commands the script runs, its reads), each on a probe key
        shaped like the key it goes to (in its slot, under a key-pattern ACL as it is), and those keys: for
        :func:`scrapy_dedup._util.redis_access.missing_permissions` at start."""
        counts, boiler, pages = keys = [probe_key(key) for key in self.keys]
        probes: list[tuple[Any, ...]] = [
            ("EVALSHA", "0" * 40, 3, *keys),  # NOSCRIPT when allowed: the script is not run
            ("SCRIPT", "LOAD", "return 1"),
            ("INCR", pages), ("GET", pages), ("SADD", boiler, "1"), ("SCARD", boiler), ("SMEMBERS", boiler),
            *((command, counts, *args) for command, *args in (
                ("HINCRBY", "1", 1), ("HMGET", "1"), ("HLEN",), ("HGETALL",), ("HDEL", "1"))),
            *(("EXPIRE", key, PROBE_TTL) for key in keys if self.ttl)]
        return probes, keys

    def refresh(self) -> None:
        """Read the page count and the boilerplate of every process (one round trip)."""
        pipe = self.client.pipeline(transaction=False)
        pipe.get(self.keys[2])
        pipe.smembers(self.keys[1])
        pages, members = pipe.execute()
        self.pages = int(pages or 0)
        self._boiler = np.array(sorted(int(m) for m in members), dtype=np.uint64)

    def __len__(self) -> int:
        return int(self.client.hlen(self.keys[0]))

    @property
    def nbytes(self) -> int:
        """Bytes held in this process (the boilerplate hashes read last); the counts are in Redis."""
        return self._boiler.nbytes

    @property
    def boilerplate(self) -> np.ndarray:
        return self._boiler

    def counts(self, hashes: np.ndarray) -> np.ndarray:
        hashes = np.asarray(hashes, dtype=np.uint64)
        if not len(hashes):
            return np.zeros(0, dtype=np.uint32)
        values = self.client.hmget(self.keys[0], [str(h) for h in hashes.tolist()])
        return np.array([int(v or 0) for v in values], dtype=np.uint32)

    def is_boilerplate(self, hashes: np.ndarray) -> np.ndarray:
        return in_sorted(self._boiler, hashes)

    def add_page(self, hashes: np.ndarray) -> np.ndarray:
        """Count one page in Redis; returns the hashes that became boilerplate (by this call)."""
        page = np.unique(np.asarray(hashes, dtype=np.uint64))
        page = page[page != 0]
        out = self._add(keys=list(self.keys), args=[self.min_pages, self.capacity, self.ttl,
                                                    *(str(h) for h in page.tolist())])
        self.pages = int(out[0])
        grown = np.array([int(h) for h in out[1:]], dtype=np.uint64)
        if len(grown):
            self._boiler = np.union1d(self._boiler, grown)
        return grown


def tables_permission_probes(client: Any, index_key: str, rule: BoilerplateRule = BoilerplateRule(),
                             ttl: int | None = None) -> tuple[list[tuple[Any, ...]], list[str]]:
    """What boilerplate learning sends through ``client`` under the content index ``index_key``: a table's
    commands (:meth:`RedisBlockTable.permission_probes`, on the keys of :data:`PROBE_HOST`) and the salt's
    (``SET NX``, ``GET``), on probe keys; and those keys."""
    probes, keys = RedisBlockTable(client, table_prefix(index_key, PROBE_HOST), rule, ttl).permission_probes()
    salt = probe_key(salt_key(index_key))
    return [*probes, ("SET", salt, "probe", "NX"), ("GET", salt)], [*keys, salt]
