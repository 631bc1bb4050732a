"""The banded simhash index and the content store over Redis, shared by many processes.

Why: a crawl spread over several processes or machines must agree on which page
came first. Each call that decides ("is this page new? if so, record it") is ONE
Lua script run by Redis (``EVALSHA``), so two processes fetching near-duplicate
pages at the same moment cannot both keep theirs: Redis runs scripts one at a
time, and the check and the insert happen inside the same script.

Layout (``P`` is the key prefix, e.g. ``dedup:myspider:content``; every key
carries the hash tag ``{P}``):

``{P}:meta``            hash: ``config`` (bits, bands, layout, sketch size; a mismatch is refused, by
                        :meth:`RedisContentStore.check_config` when a crawl opens the store),
                        ``seq`` (last page id handed out)
``{P}:keys``            hash: page id -> the caller's key (URL, or tagged int)
``{P}:exact``           hash: exact hash of the normalized text -> page id
``{P}:b<i>:<hex>``      hash: the band buckets ``i`` whose block value starts with the
                        :data:`BUCKET_KEY_BITS` (9) bits ``hex``; field: the value's other
                        bits (decimal), value: a concatenation of fixed-size entries, each
                        the whole fingerprint (8 or 16 bytes, big-endian) and the page id
                        (4 bytes, big-endian). Verifying a candidate needs no second lookup.
                        512 keys a band instead of one per block value: a Redis key costs
                        about 50 bytes of its own, a field of a small hash (a listpack)
                        a few (``docs/scaling.md``).

``{P}:sketch``          hash: the verification sketches of pages ``31 k + 1`` to ``31 k + 31``
                        in field ``k``, in id order, each a 2-byte length and the sketch
                        (4-byte shingle count, then sorted 4-byte values;
                        :mod:`scrapy_dedup.content.sketch`); length 0 for a page without one.
                        31 sketches of 1,030 bytes fill one 32 KB allocation (a field per
                        page cost about 300 bytes of its own).
``{P}:m<t>:<hex>``      hash: LSH buckets of table ``t`` (16 bits of the sketch's key),
                        keys, fields and entries as in the band buckets

With a sketch, every candidate within the verify radius is decided in the same
script by the rule of :mod:`scrapy_dedup.content.sketch` (the same arithmetic in
IEEE doubles), closest then oldest first; the page's sketch is stored with it.

Lua numbers are doubles (53-bit mantissa), so a 64-bit fingerprint never
becomes a Lua number: it stays an 8-byte string and is compared in 32-bit
halves with ``bit.bxor`` and a Kernighan popcount that stops as soon as the
distance passes the threshold. The script receives every key it touches in
``KEYS`` (the bucket names are computed here, from the fingerprint) and all
data in ``ARGV``.

Redis Cluster: because every key of one index shares the hash tag ``{P}``, the
whole index lives in one hash slot, hence on one shard. On a cluster client,
:func:`scrapy_dedup.content.stores.open_redis_store` therefore builds the
:class:`~scrapy_dedup.content.stores.redis_sharded.ShardedRedisContentStore` instead
(its keys spread over every slot; its guarantees across processes are stated in
its module), unless the prefix names its own hash tag (``{...}``): then this
one-slot store, atomic per page, on the node of that slot.

TTL: with ``ttl`` set, every key a call reads or writes gets its expiry
refreshed, so an index that is no longer used disappears ``ttl`` seconds
after its last call. A bucket that receives no traffic for ``ttl`` seconds
while the crawl still runs expires on its own; choose a TTL much longer than
the crawl's quiet periods (as for the dupefilters' ``DEDUP_REDIS_TTL``).
"""
from __future__ import annotations

from typing import Any, Iterable, Optional, Union

from scrapy_dedup.content.sketch import DEFAULT_SKETCH_SIZE, Sketch, VerifyRule, lsh_keys
from scrapy_dedup._util.redis_conn import connect, delete_matching, glob_escape
from scrapy_dedup._util.redis_policy import FAIL_OPEN_CALL_SECONDS

Key = Union[str, int]


class ContentIndexMismatch(ValueError):
    """The key prefix holds a content index written with another config: bits, bands, key layout or sketch size.

    Raised by ``check_config`` (one read of ``{P}:meta`` when a crawl opens the store) and by
    the sharded store's first decision; ``hint`` is what to do when the layouts differ in kind.
    """

    def __init__(self, prefix: str, stored: str, wanted: str, hint: str = ""):
        super().__init__(f"content index {prefix!r}: DEDUPCONFIG index was created with {stored}, not {wanted}{hint}")
        self.prefix, self.stored, self.wanted, self.hint = prefix, stored, wanted, hint


def config_fields(config: str) -> dict[str, str]:
    """``"bits=64;bands=4;layout=2"`` -> ``{"bits": "64", "bands": "4", "layout": "2"}``."""
    return dict(part.partition("=")[::2] for part in config.split(";") if part)

#: bump when the layout of the Redis keys changes (part of the stored config);
#: 2: buckets grouped in hashes of :data:`BUCKET_KEY_BITS`, sketches packed 31 to a field
LAYOUT_VERSION = 2
#: top bits of a bucket value that name its key; the other bits name the field
BUCKET_KEY_BITS = 9
#: sketches per field of the sketch hash (31 x 1,030 bytes fit a 32 KB allocation)
SKETCHES_PER_FIELD = 31
#: bytes of the page id stored in each bucket entry
ID_BYTES = 4
MAX_ID = 2 ** (8 * ID_BYTES) - 1

# KEYS[1] meta, KEYS[2] keys, KEYS[3] exact, KEYS[4] sketches, KEYS[5..] buckets (simhash bands, then LSH)
# ARGV[1] mode: "a" add, "n" add_if_new, "c" check_and_add (exact hash first), "s" add_unless_exact (the exact
# hash, then no near search)
# ARGV[2] fingerprint (W bytes)   ARGV[3] threshold   ARGV[4] encoded key
# ARGV[5] exact hash bytes ("" for none)   ARGV[6] ttl seconds (0: none)
# ARGV[7] config string (bits, bands, layout version, sketch size)
# ARGV[8] sketch of the page ("" for none: plain threshold rule)   ARGV[9] radius
# ARGV[10] jaccard   ARGV[11] max_diff   ARGV[12] min_jaccard   ARGV[13] sketch size (0: sketches not stored)
# ARGV[14] long_page   ARGV[15..] the field of each bucket key, in the order of KEYS[5..]
# Returns {kind, kept_key or false, distance or false}; kind "unique", "exact", "near".
LUA_CHECK_AND_ADD = r"""
local meta, keyhash, exacthash, sketchhash = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local mode, fp, threshold = ARGV[1], ARGV[2], tonumber(ARGV[3])
local ukey, exact, ttl, config = ARGV[4], ARGV[5], tonumber(ARGV[6]), ARGV[7]
local sketch, radius = ARGV[8], tonumber(ARGV[9])
local min_j, max_diff, low_j, size = tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12]), tonumber(ARGV[13])
local long_page = tonumber(ARGV[14])

local stored = redis.call('HGET', meta, 'config')
if not stored then
  redis.call('HSET', meta, 'config', config)
elseif stored ~= config then
  return redis.error_reply('DEDUPCONFIG index was created with ' .. stored .. ', not ' .. config)
end

local function touch()
  if ttl > 0 then
    for i = 1, #KEYS do redis.call('EXPIRE', KEYS[i], ttl) end
  end
end

local function u32(s, p)
  local a, b, c, d = string.byte(s, p, p + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

-- a sketch: 4-byte shingle count, then sorted 4-byte values (all big-endian)
local function parse(blob)
  local values = {}
  for i = 1, (#blob - 4) / 4 do values[i] = u32(blob, 4 * i + 1) end
  return u32(blob, 1), values
end

-- the verification rule of scrapy_dedup.content.sketch (resemblance + VerifyRule.accepts), same arithmetic
local mine_n, mine_v
local function near(kept_blob)
  local kept_n, kept_v = parse(kept_blob)
  local la, lb = #mine_v, #kept_v
  local jac, only_a, only_b
  if la == 0 or lb == 0 then
    if la == lb then jac = 1.0 else jac = 0.0 end
    only_a, only_b = mine_n, kept_n
  else
    local i, j, taken, m = 1, 1, 0, 0
    while taken < size and (i <= la or j <= lb) do
      if j > lb or (i <= la and mine_v[i] < kept_v[j]) then
        i = i + 1
      elseif i > la or kept_v[j] < mine_v[i] then
        j = j + 1
      else
        m = m + 1
        i = i + 1
        j = j + 1
      end
      taken = taken + 1
    end
    jac = m / taken
    local common = jac * (mine_n + kept_n) / (1 + jac)
    only_a, only_b = mine_n - common, kept_n - common
  end
  if jac >= min_j and math.min(mine_n, kept_n) >= long_page then return true end
  return jac >= low_j and math.min(only_a, only_b) <= max_diff + 1e-9
end

local PER = SKETCHES_PER_FIELD
local function u16(s, p)
  local a, b = string.byte(s, p, p + 1)
  return a * 256 + b
end
-- the sketch record of page id (nil: none), from field floor((id - 1) / PER), cached per call
local fields = {}
local function get_sketch(id)
  local field = tostring(math.floor((id - 1) / PER))
  local v = fields[field]
  if v == nil then
    v = redis.call('HGET', sketchhash, field) or ''
    fields[field] = v
  end
  local o = 1
  for _ = 1, (id - 1) % PER do
    if o > #v then return nil end
    o = o + 2 + u16(v, o)
  end
  if o > #v or u16(v, o) == 0 then return nil end
  return string.sub(v, o + 2, o + 1 + u16(v, o))
end
-- append page id's record (ids are handed out in order; a missing one before it is left empty)
local function put_sketch(id, blob)
  local field = tostring(math.floor((id - 1) / PER))
  local v = redis.call('HGET', sketchhash, field) or ''
  local n, o = 0, 1
  while o <= #v do
    o = o + 2 + u16(v, o)
    n = n + 1
  end
  local slot = (id - 1) % PER
  if n > slot then return end
  local packed = v .. string.rep('\0\0', slot - n) .. string.char(math.floor(#blob / 256), #blob % 256) .. blob
  redis.call('HSET', sketchhash, field, packed)
end

local W = #fp
local E = W + 4
local buckets = {}  -- bucket contents read, by KEYS index
local halves = W / 4
local q = {}
for h = 0, halves - 1 do q[h + 1] = u32(fp, 4 * h + 1) end

local exact_first = (mode == 'c' or mode == 's') and exact ~= ''
if exact_first then
  local id = redis.call('HGET', exacthash, exact)
  if id then
    touch()
    return {'exact', redis.call('HGET', keyhash, id), 0}
  end
end

local limit = threshold
if sketch ~= '' then
  mine_n, mine_v = parse(sketch)
  if radius > limit then limit = radius end
end

local best_d, best_id = nil, nil
if mode ~= 'a' and mode ~= 's' then
  local bxor, band = bit.bxor, bit.band
  local cand, list = {}, {}
  for i = 5, #KEYS do
    local s = redis.call('HGET', KEYS[i], ARGV[10 + i])
    buckets[i] = s or ''
    if s then
      for o = 1, #s, E do
        local dist = 0
        for h = 0, halves - 1 do
          local x = bxor(u32(s, o + 4 * h), q[h + 1])
          while x ~= 0 and dist <= limit do
            x = band(x, x - 1)
            dist = dist + 1
          end
          if dist > limit then break end
        end
        if dist <= limit then
          local id = u32(s, o + W)
          if cand[id] == nil then
            cand[id] = dist
            list[#list + 1] = id
          end
        end
      end
    end
  end
  table.sort(list, function(x, y)
    if cand[x] ~= cand[y] then return cand[x] < cand[y] end
    return x < y
  end)
  for _, id in ipairs(list) do
    local d = cand[id]
    local ok
    if sketch == '' then
      ok = d <= threshold
    else
      local kept = get_sketch(id)
      if kept then ok = near(kept) else ok = d <= threshold end
    end
    if ok then
      best_d, best_id = d, id
      break
    end
  end
end

if best_d ~= nil then
  touch()
  local kept = redis.call('HGET', keyhash, tostring(best_id))
  return {'near', kept, best_d}
end

local id = redis.call('HINCRBY', meta, 'seq', 1)
if id > MAX_ID then
  return redis.error_reply('DEDUPFULL index holds the maximum number of pages')
end
local idbytes = string.char(math.floor(id / 16777216) % 256, math.floor(id / 65536) % 256,
                      math.floor(id / 256) % 256, id % 256)
redis.call('HSET', keyhash, tostring(id), ukey)
if exact_first then
  redis.call('HSET', exacthash, exact, id)
end
if size > 0 then
  put_sketch(id, sketch)
end
local entry = fp .. idbytes
for i = 5, #KEYS do
  local old = buckets[i]
  if old == nil then old = redis.call('HGET', KEYS[i], ARGV[10 + i]) or '' end
  local appended = old .. entry
  redis.call('HSET', KEYS[i], ARGV[10 + i], appended)
end
touch()
return {'unique', false, false}
""".replace("MAX_ID", str(MAX_ID)).replace("SKETCHES_PER_FIELD", str(SKETCHES_PER_FIELD))


def _popcount(x: int) -> int:
    return bin(x).count("1")  # int.bit_count needs Python 3.10


def hash_tagged(prefix: str) -> str:
    """Return the key prefix with a Redis Cluster hash tag: ``p`` -> ``{p}``.

    A prefix that already contains a ``{...}`` tag is used unchanged, so a user
    can choose which part decides the slot.
    """
    start = prefix.find("{")
    if start != -1 and prefix.find("}", start + 2) != -1:
        return prefix
    return "{" + prefix + "}"


def is_cluster_client(client: Any) -> bool:
    """Whether ``client`` is a redis-py Redis Cluster client (its keys may live on several nodes)."""
    try:
        from redis.cluster import RedisCluster
    except ImportError:  # redis-py without cluster support cannot have made one
        return False
    return isinstance(client, RedisCluster)


def band_widths(bits: int, bands: int) -> list[int]:
    """Widths of the ``bands`` blocks a ``bits``-bit fingerprint is cut into (as even as possible)."""
    base, extra = divmod(bits, bands)
    return [base + (1 if i < extra else 0) for i in range(bands)]


def band_slices(bits: int, bands: int) -> list[tuple[int, int, int]]:
    """``(shift, mask, width)`` of each band of a ``bits``-bit fingerprint, top band first."""
    slices = []
    shift = bits
    for width in band_widths(bits, bands):
        shift -= width
        slices.append((shift, (1 << width) - 1, width))
    return slices


def bucket_slot(value: int, width: int) -> tuple[str, str]:
    """``(hex, field)`` of a ``width``-bit bucket value: its top :data:`BUCKET_KEY_BITS` bits name
    the key (a small hash of at most ``2**(width - BUCKET_KEY_BITS)`` fields), the rest the field."""
    low = max(width - BUCKET_KEY_BITS, 0)
    return f"{value >> low:x}", str(value & ((1 << low) - 1))


def band_bucket_slots(fp: int, bands: list[tuple[int, int, int]]) -> list[tuple[int, str, str]]:
    """``(band, hex, field)`` of the band buckets of ``fp`` (see :func:`bucket_slot`)."""
    return [(i, *bucket_slot((fp >> shift) & mask, width)) for i, (shift, mask, width) in enumerate(bands)]


def lsh_bucket_slots(sketch: Sketch) -> list[tuple[int, str, str]]:
    """``(table, hex, field)`` of the LSH buckets of a sketch (16 bits of each table key)."""
    return [(t, *bucket_slot(key >> 16, 16)) for t, key in enumerate(lsh_keys(sketch))]


def check_index_config(prefix: str, *, threshold: int, bands: int, bits: int, ttl: Optional[int],
                       allow_approximate: bool) -> None:
    """Refuse (ValueError) what the Redis content indexes cannot store or would search with lost recall."""
    if bits not in (64, 128):
        raise ValueError(f"bits must be 64 or 128, got {bits}")
    if not 1 <= bands <= bits:
        raise ValueError(f"bands must be between 1 and {bits}, got {bands}")
    if threshold < 0 or threshold > bits:
        raise ValueError(f"threshold must be between 0 and {bits}, got {threshold}")
    if bands <= threshold and not allow_approximate:
        raise ValueError(
            f"bands ({bands}) must be greater than threshold ({threshold}): otherwise two "
            "fingerprints within the threshold may share no band and be missed; pass "
            "allow_approximate=True to accept probabilistic recall")
    if ttl is not None and ttl < 1:
        raise ValueError(f"ttl must be a positive number of seconds or None, got {ttl}")
    if not prefix:
        raise ValueError("the key prefix must not be empty")


class BandedLayout:
    """What both Redis content indexes are: a client, a key prefix and a checked banded layout of
    ``bits``-bit fingerprints (:func:`check_index_config`), whose bucket entries are the fingerprint's
    bytes and a page id's; the one-slot index (:class:`RedisSimhashIndex`) and the sharded store
    (:class:`~scrapy_dedup.content.stores.redis_sharded.ShardedRedisContentStore`) lay their keys out
    their own way on top."""

    def __init__(self, client: Any, prefix: str, *, threshold: int, bands: int, bits: int, ttl: Optional[int],
                 allow_approximate: bool):
        check_index_config(prefix, threshold=threshold, bands=bands, bits=bits, ttl=ttl,
                           allow_approximate=allow_approximate)
        self.client = client
        self.prefix = prefix
        self.threshold = threshold
        self.bands = bands
        self.bits = bits
        self.ttl = ttl
        self.allow_approximate = allow_approximate
        self._fp_bytes = bits // 8
        self._bands = band_slices(bits, bands)

    def _candidates(self, blobs: Iterable[Optional[bytes]], fp: int, limit: int) -> dict[int, int]:
        """Page id -> simhash distance of every bucket entry within ``limit`` bits of ``fp``."""
        width = self._fp_bytes + ID_BYTES
        found: dict[int, int] = {}
        for blob in blobs:
            if not blob:
                continue
            for off in range(0, len(blob), width):
                dist = _popcount(int.from_bytes(blob[off:off + self._fp_bytes], "big") ^ fp)
                if dist <= limit:
                    found[int.from_bytes(blob[off + self._fp_bytes:off + width], "big")] = dist
        return found


def encode_key(key: Key) -> str:
    """Store ints and strings apart so that ``7`` and ``"7"`` stay different keys."""
    if isinstance(key, bool) or not isinstance(key, (int, str)):
        raise TypeError(f"index keys are str or int, got {type(key).__name__}")
    return f"i:{key}" if isinstance(key, int) else f"s:{key}"


def decode_key(raw: Any) -> Key:
    text = raw.decode("utf-8", "surrogateescape") if isinstance(raw, bytes) else str(raw)
    return int(text[2:]) if text.startswith("i:") else text[2:]


class RedisSimhashIndex(BandedLayout):
    """The banded simhash index of :class:`scrapy_dedup.SimhashIndex`, stored in Redis.

    Same guarantee: with ``bands >= threshold + 1``, every stored fingerprint
    within ``threshold`` bits of a query is found (two fingerprints that
    differ in at most ``threshold`` bits agree on at least one of the
    ``threshold + 1`` blocks, and that block's bucket is read). Configurations
    that break it are refused unless ``allow_approximate=True``.

    ``add_if_new`` and :meth:`check_and_add` are one Lua script call each:
    atomic across every process and machine using the same Redis and prefix.
    """

    def __init__(self, client: Any, prefix: str, *, threshold: int = 3, bands: int = 4,
                 bits: int = 64, ttl: Optional[int] = None, allow_approximate: bool = False):
        super().__init__(client, prefix, threshold=threshold, bands=bands, bits=bits, ttl=ttl,
                         allow_approximate=allow_approximate)
        self._tag = hash_tagged(prefix)
        self.meta_key = f"{self._tag}:meta"
        self.keys_key = f"{self._tag}:keys"
        self.exact_key = f"{self._tag}:exact"
        self.sketch_key = f"{self._tag}:sketch"
        self._config = f"bits={bits};bands={bands};layout={LAYOUT_VERSION}"
        self._script = client.register_script(LUA_CHECK_AND_ADD)

    def permission_probes(self) -> tuple[list[tuple[Any, ...]], list[str]]:
        """The commands this index sends (its script, and the commands the script runs), on probe keys under its
        hash tag, and those keys: for :func:`scrapy_dedup._util.redis_access.missing_permissions` at start."""
        hashed, counter, members = (f"{self._tag}:probe:{kind}" for kind in ("hash", "count", "set"))
        probes: list[tuple[Any, ...]] = [
            ("EVALSHA", "0" * 40, 1, hashed),  # NOSCRIPT when allowed: the script is not run
            ("SCRIPT", "LOAD", "return 1"),
            *((command, hashed, *args) for command, *args in (
                ("HSET", "f", "1"), ("HGET", "f"), ("HINCRBY", "f", 1), ("HLEN",), ("HGETALL",), ("HDEL", "f"),
                ("EXPIRE", 60))),
            ("INCR", counter), ("SADD", members, "m"), ("SCARD", members)]
        return probes, [hashed, counter, members]

    # -- constructors -------------------------------------------------------
    @classmethod
    def from_redis(cls, client_or_url: Any, prefix: str, threshold: int = 3, bands: int = 4,
                   bits: int = 64, ttl: Optional[int] = None, *,
                   params: Optional[dict[str, Any]] = None, allow_approximate: bool = False
                   ) -> "RedisSimhashIndex":
        """Build from a redis-py client, or a URL opened with :func:`scrapy_dedup._util.redis_conn.connect`.

        A client opened here bounds each call to :data:`~scrapy_dedup._util.redis_policy.FAIL_OPEN_CALL_SECONDS`
        (unless ``params`` set timeouts): the content index fails open, so a hung
        server must cost a page a short pause, not a 30 s socket timeout.
        """
        client = (connect(client_or_url, params, timeout=FAIL_OPEN_CALL_SECONDS) if isinstance(client_or_url, str)
                  else client_or_url)
        return cls(client, prefix, threshold=threshold, bands=bands, bits=bits, ttl=ttl,
                   allow_approximate=allow_approximate)

    def config_for(self, sketch_size: int = 0) -> str:
        """The config string stored in ``{P}:meta`` by a store with sketches of ``sketch_size`` (0: none)."""
        return f"{self._config};sketch={sketch_size}" if sketch_size else self._config

    def check_config(self, sketch_size: int = 0) -> None:
        """Refuse an index written with another config (:class:`ContentIndexMismatch`): one read of ``{P}:meta``.

        Why at open: the script refuses it too, but only when a page is judged, and then every
        page (the caller fails open: each kept unjudged). An empty index passes; its first
        page writes the config.
        """
        stored = self.client.hget(self.meta_key, "config")
        stored = stored.decode() if isinstance(stored, bytes) else stored
        wanted = self.config_for(sketch_size)
        if stored is not None and stored != wanted:
            raise ContentIndexMismatch(self.prefix, stored, wanted)

    # -- the index interface ------------------------------------------------
    def bucket_keys(self, fp: int) -> list[tuple[str, str]]:
        """``(key, field)`` of the band buckets of ``fp`` (all keys share the index's hash tag)."""
        return [(f"{self._tag}:b{i}:{hx}", field) for i, hx, field in band_bucket_slots(fp, self._bands)]

    def _fp_to_bytes(self, fp: int) -> bytes:
        if isinstance(fp, bool) or not isinstance(fp, int):
            raise TypeError(f"fingerprints are ints, got {type(fp).__name__}")
        if fp < 0 or fp >> self.bits:
            raise ValueError(f"fingerprint does not fit in {self.bits} bits: {fp!r}")
        return fp.to_bytes(self._fp_bytes, "big")

    def lsh_bucket_keys(self, sketch: Sketch) -> list[tuple[str, str]]:
        """``(key, field)`` of the LSH buckets of a page's sketch (same hash tag)."""
        return [(f"{self._tag}:m{t}:{hx}", field) for t, hx, field in lsh_bucket_slots(sketch)]

    def _call(self, mode: str, key: Key, fp: int, exact: bytes = b"", threshold: Optional[int] = None,
              sketch: Optional[Sketch] = None, verify: Optional[VerifyRule] = None,
              sketch_size: int = 0) -> tuple[str, Optional[Key], Optional[int]]:
        buckets = self.bucket_keys(fp)
        config = self.config_for(sketch_size if verify is not None else 0)
        verify_args: list[Any] = ["", 0, 1.0, 0, 0.0, 0, 0]
        if verify is not None and sketch_size:
            verify_args = ["", verify.radius, repr(float(verify.jaccard)), repr(float(verify.max_diff)),
                           repr(float(verify.min_jaccard)), sketch_size, verify.long_page]
            if sketch is not None:  # (none: the page's record is stored empty, its id keeps its place)
                buckets.extend(self.lsh_bucket_keys(sketch))
                verify_args[0] = sketch.to_bytes()
        keys = [self.meta_key, self.keys_key, self.exact_key, self.sketch_key, *(name for name, _ in buckets)]
        args = [mode, self._fp_to_bytes(fp), self.threshold if threshold is None else threshold,
                encode_key(key), exact, self.ttl or 0, config, *verify_args, *(field for _, field in buckets)]
        try:
            kind, kept, distance = self._script(keys=keys, args=args)
        except Exception as exc:  # redis.exceptions.ResponseError; redis is imported lazily
            if "DEDUPCONFIG" in str(exc) or "DEDUPFULL" in str(exc):
                raise ValueError(f"content index {self.prefix!r}: {exc}") from exc
            raise
        kind = kind.decode() if isinstance(kind, bytes) else kind
        if kind == "unique":
            return "unique", None, None
        return kind, decode_key(kept) if kept is not None else None, int(distance)

    def add(self, key: Key, fp: int) -> None:
        """Insert ``fp`` under ``key`` without checking for near duplicates."""
        self._call("a", key, fp)

    def add_if_new(self, key: Key, fp: int) -> Optional[tuple[Key, int]]:
        """Atomically: return ``(kept_key, distance)`` of the closest stored fingerprint within
        the threshold (first stored wins a tie), or insert ``fp`` under ``key`` and return None."""
        kind, kept, distance = self._call("n", key, fp)
        return None if kind == "unique" else (kept, distance)  # type: ignore[return-value]

    def query(self, fp: int) -> list[tuple[Key, int]]:
        """Every stored ``(key, distance)`` within the threshold of ``fp``, closest first."""
        self._fp_to_bytes(fp)  # validates
        pipe = self.client.pipeline(transaction=False)
        for name, field in self.bucket_keys(fp):
            pipe.hget(name, field)
        found = self._candidates(pipe.execute(), fp, self.threshold)
        if not found:
            return []
        ids = sorted(found, key=lambda i: (found[i], i))
        keys = self.client.hmget(self.keys_key, [str(i) for i in ids])
        return [(decode_key(k), found[i]) for i, k in zip(ids, keys) if k is not None]

    def __len__(self) -> int:
        return int(self.client.hlen(self.keys_key))

    def clear(self) -> None:
        """Delete every key of this index (buckets are found with SCAN on the prefix)."""
        delete_matching(self.client, (glob_escape(self._tag) + ":*",))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(prefix={self.prefix!r}, threshold={self.threshold}, "
                f"bands={self.bands}, bits={self.bits}, ttl={self.ttl})")


class RedisContentStore:
    """The content store of :class:`scrapy_dedup.content.engine.ContentDeduplicator`, over Redis.

    ``check_and_add(url, fp)`` is one Lua script call: the exact hash of the page
    text is looked up first (an exact duplicate), then the band buckets of the
    simhash and the LSH buckets of the page's sketch; every candidate within
    ``verify.radius`` bits is verified against the kept page's sketch (the rule of
    :mod:`scrapy_dedup.content.sketch`, the same arithmetic in Lua), closest then
    oldest first, and only a new page is recorded (with its sketch). Atomic across
    every process and machine that shares the Redis server and key prefix, so of
    two processes racing with duplicate pages exactly one keeps its page.
    ``verify=None`` is the plain rule: a candidate within ``threshold`` bits.
    """

    def __init__(self, index: RedisSimhashIndex, *, owns_client: bool = False,
                 sketch_size: int = DEFAULT_SKETCH_SIZE, verify: Optional[VerifyRule] = VerifyRule()):
        if verify is not None and not sketch_size:
            raise ValueError("verification needs sketches: sketch_size must be > 0 when verify is set")
        self.index = index
        self.verify = verify
        self.sketch_size = sketch_size if verify is not None else 0
        self._owns_client = owns_client

    @property
    def threshold(self) -> int:
        return self.index.threshold

    @property
    def bits(self) -> int:
        return self.index.bits

    @property
    def bands(self) -> int:
        return self.index.bands

    @property
    def allow_approximate(self) -> bool:
        return self.index.allow_approximate

    @classmethod
    def from_redis(cls, client_or_url: Any, prefix: str, threshold: int = 3, bands: int = 4,
                   bits: int = 64, ttl: Optional[int] = None, *,
                   params: Optional[dict[str, Any]] = None, allow_approximate: bool = False,
                   sketch_size: int = DEFAULT_SKETCH_SIZE,
                   verify: Optional[VerifyRule] = VerifyRule()) -> RedisContentStore:
        """This one-slot store, from a redis-py client or a URL (opened with
        :func:`scrapy_dedup._util.redis_conn.connect`). The layout for a client (sharded over a
        cluster's slots, or one slot) is chosen by :func:`scrapy_dedup.content.stores.open_redis_store`.
        """
        client = (connect(client_or_url, params, timeout=FAIL_OPEN_CALL_SECONDS) if isinstance(client_or_url, str)
                  else client_or_url)
        owns_client = isinstance(client_or_url, str)
        return cls(RedisSimhashIndex(client, prefix, threshold=threshold, bands=bands, bits=bits, ttl=ttl,
                                     allow_approximate=allow_approximate),
                   owns_client=owns_client, sketch_size=sketch_size, verify=verify)

    @classmethod
    def from_url(cls, url: str, prefix: str, *, params: Optional[dict[str, Any]] = None, threshold: int = 3,
                 bands: int = 4, bits: int = 64, ttl: Optional[int] = None, allow_approximate: bool = False,
                 sketch_size: int = DEFAULT_SKETCH_SIZE,
                 verify: Optional[VerifyRule] = VerifyRule()) -> RedisContentStore:
        """Keyword form of :meth:`from_redis` for a URL (the connection is closed by :meth:`close`)."""
        return cls.from_redis(url, prefix, threshold, bands, bits, ttl, params=params,
                              allow_approximate=allow_approximate, sketch_size=sketch_size, verify=verify)

    def check_and_add(self, url: str, fp: Any) -> tuple[str, Optional[str], Optional[int]]:
        """``("unique", None, None)`` after recording ``url``, or ``("exact" | "near", kept_url, distance)``."""
        return self._decide("c", url, fp)

    def add_unless_exact(self, url: str, fp: Any) -> tuple[str, Optional[str], Optional[int]]:
        """``("exact", kept_url, 0)``, or ``("unique", None, None)`` after recording ``url`` with no near search."""
        return self._decide("s", url, fp)

    def _decide(self, mode: str, url: str, fp: Any) -> tuple[str, Optional[str], Optional[int]]:
        exact = fp.exact if isinstance(fp.exact, bytes) else int(fp.exact).to_bytes(16, "big")
        kind, kept, distance = self.index._call(mode, url, fp.simhash, exact=exact,
                                                sketch=getattr(fp, "sketch", None), verify=self.verify,
                                                sketch_size=self.sketch_size)
        return kind, (None if kept is None else str(kept)), distance

    def check_config(self) -> None:
        """Refuse an index written with another config (:class:`ContentIndexMismatch`): one read at open."""
        self.index.check_config(self.sketch_size)

    def __len__(self) -> int:
        return len(self.index)

    def clear(self) -> None:
        self.index.clear()

    def close(self) -> None:
        """Close the Redis connection if this store opened it (a client passed in stays open)."""
        if self._owns_client:
            self.index.client.close()

    def __repr__(self) -> str:
        return f"RedisContentStore({self.index!r}, sketch_size={self.sketch_size}, verify={self.verify!r})"
