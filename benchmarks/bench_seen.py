"""Seen-URL stores: ours against Scrapy's RFPDupeFilter, scrapy-redis and scrapy-redis-bloomfilter.

    python benchmarks/bench_seen.py --urls 1000000        # filters holding 1M URLs
    python benchmarks/bench_seen.py --urls 10000000       # 10M (long: see --sample)
    python benchmarks/bench_seen.py --quick               # seconds; the smoke test runs this

Two numbers per filter, in one run, printed with ratios:

* **bytes per URL** once the filter holds ``--urls`` fingerprints. To reach 10M
  in reasonable time, filters are *filled* with SHA-1 digests of generated URLs
  (uniform 20-byte keys, what a fingerprinter yields) through the cheapest path
  each offers: Scrapy's set directly, pipelined ``SADD`` for the Redis sets (hex
  members for scrapy-redis, as it stores them), our batch API for our stores.
  Process memory: the set's table (``sys.getsizeof``) plus each 20-byte bytes
  object (53 bytes, 64 with pymalloc's 16-byte alignment); ours: the bit arrays.
  Redis memory: ``MEMORY USAGE key SAMPLES 0`` (exact).
  scrapy-redis-bloomfilter allocates a fixed bitmap (``BLOOMFILTER_BIT``,
  2**30 bits = 128 MiB by default) whatever the count, so its figure is that
  size over ``--urls``; it is not filled (12 round trips per key: hours at 10M).
* **request_seen calls per second**, the whole path (fingerprint + check), on
  ``--sample`` fresh ``Request`` objects against the filled filter. Local
  filters see each URL once; Redis filters see each URL three times, the later
  times a few thousand calls apart (as links recur), a new ``Request`` object
  each time. Request construction is outside the timed part. Plus "Bloom check
  alone": ``BloomSeenSet.add`` on precomputed fingerprints, microseconds per call.

Redis runs on loopback (a redis-server started by this script unless
``--redis-url`` is given). scrapy-redis-bloomfilter 0.8.1 imports fine with
scrapy-redis 0.9.1; if it ever stops importing, it is skipped and reported.
"""
from __future__ import annotations

import argparse
import gc
import hashlib
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import warnings  # noqa: E402

from scrapy.exceptions import ScrapyDeprecationWarning  # noqa: E402

warnings.filterwarnings("ignore", category=ScrapyDeprecationWarning)

from scrapy.http import Request  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

from scrapy_dedup.seen.bloom import BloomSeenSet  # noqa: E402

WORDS = ("products shoes news article story category blog archive 2024 about help search item detail view "
         "list page docs api images forum thread user profile cart catalog sale men women kids").split()
PARAMS = ("id", "page", "q", "sort", "lang", "ref", "size", "color", "utm_source", "utm_campaign")


CPU = time.process_time


def urls(start: int, count: int, seed: int = 7) -> list[str]:
    """``count`` distinct, realistic URLs numbered from ``start`` (deterministic)."""
    rng = random.Random(seed * 1_000_003 + start)
    out = []
    for i in range(start, start + count):
        host = f"{'www.' if i % 3 == 0 else ''}site{i % 977}.example.{('com', 'org', 'de')[i % 3]}"
        path = "/".join(rng.choice(WORDS) for _ in range(1 + i % 4))
        query = "&".join(f"{rng.choice(PARAMS)}={rng.randint(0, 999)}" for _ in range(i % 4))
        out.append(f"https://{host}/{path}/{i}" + (f"?{query}" if query else ""))
    return out


def digests(start: int, count: int) -> Iterable[bytes]:
    sha1 = hashlib.sha1
    for i in range(start, start + count):
        yield sha1(b"fill-%d" % i).digest()


def recurring(stream: list[str], times: int = 3, spread: int = 3000, seed: int = 3) -> list[str]:
    """Each URL ``times`` times, the repeats a few thousand positions later (links recur)."""
    rng = random.Random(seed)
    placed: list[tuple[float, str]] = []
    for i, url in enumerate(stream):
        placed.append((i, url))
        for _ in range(times - 1):
            placed.append((i + rng.uniform(1, spread), url))
    placed.sort(key=lambda pair: pair[0])
    return [url for _, url in placed]


# --- redis ----------------------------------------------------------------------------------

class LocalRedis:
    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise SystemExit("redis-server not found (apt-get install redis-server) or pass --redis-url")
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.dir = tempfile.mkdtemp(prefix="bench-seen-redis-")
        self.proc = subprocess.Popen([binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--dir", self.dir, "--loglevel", "warning"],
                                     stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


def redis_bytes(client: Any, keys: list[str]) -> int:
    return sum(int(client.memory_usage(k, samples=0) or 0) for k in keys)


def pipelined(client: Any, command: str, key: str, members: Iterable[Any], batch: int = 10_000) -> None:
    pipe = client.pipeline(transaction=False)
    n = 0
    for member in members:
        getattr(pipe, command)(key, member)
        n += 1
        if n % batch == 0:
            pipe.execute()
    pipe.execute()


# --- the Redis Bloom's per-key command: why BITFIELD, why hiredis ---------------------------

# The design first sketched for the Redis Bloom filter: one Lua script per key, SETBIT per position.
LUA_SETBIT_ADD = """
local key = KEYS[1]
local packed = ARGV[1]
local new = 0
for i = 1, #packed, 4 do
  if redis.call('SETBIT', key, (struct.unpack('<I4', packed, i)), 1) == 0 then new = 1 end
end
return new
"""


def bloom_command_variants(redis_url: str, keys_each: int) -> None:
    """One new key's add, four ways, interleaved: Lua script or BITFIELD; redis-py's Python or hiredis parser.

    Prints wall and client CPU per new key (this process) and Redis CPU per
    command (``INFO commandstats``), all on the same pinned connection path
    the store uses, against the same 10M-capacity layout.
    """
    import struct

    import redis
    from redis._parsers import _RESP2Parser

    from scrapy_dedup._util.redis_conn import PinnedConnection, bulk, command_prefix
    from scrapy_dedup.seen.redis import RedisBloomSeenSet

    try:
        from redis._parsers import _HiredisParser
        from redis.utils import HIREDIS_AVAILABLE
    except ImportError:
        HIREDIS_AVAILABLE = False
    parsers = [("python parser", _RESP2Parser)] + ([("hiredis", _HiredisParser)] if HIREDIS_AVAILABLE else [])
    admin = redis.Redis.from_url(redis_url)
    sha = admin.script_load(LUA_SETBIT_ADD)
    variants = []
    for parser_name, parser in parsers:
        client = redis.Redis.from_url(redis_url, parser_class=parser)
        store = RedisBloomSeenSet(client, "bench:variants", capacity=10_000_000, error_rate=1e-6, cache_size=0)
        store.prepare()
        pinned = PinnedConnection.of(client)
        pack = struct.Struct(f"<{store.hashes}I").pack
        lua_prefix = {name: command_prefix("EVALSHA", sha, 1, name) for name in store.shard_keys}

        def lua_add(key: bytes, store: Any = store, pinned: Any = pinned, pack: Any = pack,
                    lua_prefix: Any = lua_prefix) -> bool:
            shard, where = store._locate(key)
            return pinned.execute(lua_prefix[shard] + bulk(pack(*where))) == 1

        variants.append((f"Lua script (SETBIT per bit), {parser_name}", lua_add, "evalsha"))
        variants.append((f"BITFIELD (the store), {parser_name}", store.add, "bitfield"))
    wall = {name: 0.0 for name, *_ in variants}
    cpu = dict(wall)
    server = {name: [0, 0] for name, *_ in variants}
    chunk = 250
    rounds = max(1, keys_each // chunk)
    base = 7 * 10**9
    for _ in range(rounds):
        for name, add, command in variants:
            keys = list(digests(base, chunk))
            base += chunk
            admin.config_resetstat()
            gc.disable()
            w, c = time.perf_counter(), CPU()
            for key in keys:
                add(key)
            wall[name] += time.perf_counter() - w
            cpu[name] += CPU() - c
            gc.enable()
            stat = admin.info("commandstats").get(f"cmdstat_{command}", {})
            server[name][0] += int(stat.get("usec", 0))
            server[name][1] += int(stat.get("calls", 0))
    total = rounds * chunk
    print(f"\n  Redis Bloom, one new key's add ({total:,} keys each, interleaved, 10M capacity at 1e-6):")
    print(f"  {'variant':44} {'wall us':>8} {'client CPU us':>14} {'Redis CPU us':>13}")
    for name, *_ in variants:
        usec, calls = server[name]
        print(f"  {name:44} {wall[name] / total * 1e6:8.1f} {cpu[name] / total * 1e6:14.1f} "
              f"{usec / max(calls, 1):13.1f}")
    admin.delete("bench:variants", "bench:variants:meta", *[f"{{bench:variants:{i}}}" for i in range(16)])
    admin.close()


# --- the run --------------------------------------------------------------------------------

def crawler_for(settings: dict) -> Any:
    if "twisted.internet.reactor" not in sys.modules:  # Scrapy 2.13's get_crawler wants one installed
        from scrapy.utils.reactor import install_reactor

        install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    return get_crawler(settings_dict={"TELNETCONSOLE_ENABLED": False, **settings})


def race(contenders: list[tuple[str, Callable[[Any], bool], list[str], Callable[[], float]]],
         rounds: int = 200) -> dict[str, float]:
    """Calls per second of each contender, timed in interleaved chunks spread over the whole run.

    Each stream is cut into ``rounds`` chunks (a short stream into short
    chunks), and round ``i`` runs chunk ``i`` of every contender, in rotating
    order, so that all of them see the same machine load from start to end (on
    a shared machine the load changes by the minute; timing one contender after
    another, or a short stream only at the start, would compare the minutes,
    not the filters). Request objects are built untimed.
    """
    elapsed = {name: 0.0 for name, *_ in contenders}
    calls = {name: 0 for name, *_ in contenders}
    for i in range(rounds):
        shift = i % len(contenders)
        for name, request_seen, stream, clock in contenders[shift:] + contenders[:shift]:
            part = stream[len(stream) * i // rounds:len(stream) * (i + 1) // rounds]
            if not part:
                continue
            requests = [Request(u) for u in part]
            gc.disable()
            began = clock()
            for request in requests:
                request_seen(request)
            elapsed[name] += clock() - began
            gc.enable()
            calls[name] += len(part)
    return {name: calls[name] / elapsed[name] for name in elapsed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=1_000_000, help="URLs each filter holds (default 1M)")
    parser.add_argument("--error-rate", type=float, default=1e-6)
    parser.add_argument("--sample", type=int, default=100_000,
                        help="distinct URLs in each timed request_seen stream (x3 for Redis filters)")
    parser.add_argument("--peer-bloom-sample", type=int, default=3000,
                        help="distinct URLs timed for scrapy-redis-bloomfilter (12 round trips per new URL)")
    parser.add_argument("--redis-url", default=None)
    parser.add_argument("--no-redis", action="store_true")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, a few seconds")
    args = parser.parse_args(argv)
    if args.quick:
        args.urls, args.sample, args.peer_bloom_sample = 10_000, 1_000, 100
    n, p = args.urls, args.error_rate
    sample = min(args.sample, n // 10)
    print(f"bench_seen: filters holding {n:,} URLs, error rate {p:g}, timed streams of {sample:,} distinct URLs "
          f"(Redis: each 3 times), contenders interleaved; python {sys.version.split()[0]}")
    rows: dict[str, dict[str, Any]] = {}
    canonical = "scrapy_dedup.fingerprinter.CanonicalRequestFingerprinter"
    try:
        crawler_for({"REQUEST_FINGERPRINTER_CLASS": canonical}).request_fingerprinter  # noqa: B018 - builds it
    except Exception as exc:
        print(f"  (CanonicalRequestFingerprinter not available: {exc})")
        canonical = None

    # --- local filters: fill ----------------------------------------------------------------
    from scrapy.dupefilters import RFPDupeFilter

    from scrapy_dedup.dupefilters import BloomDupeFilter

    rfp = RFPDupeFilter.from_crawler(crawler_for({}))
    fps = rfp._fingerprints if hasattr(rfp, "_fingerprints") else rfp.fingerprints  # (Scrapy 2.13: fingerprints)
    for d in digests(0, n):
        fps.add(d)
    per_member = -(-sys.getsizeof(b"x" * 20) // 16) * 16
    rows["Scrapy RFPDupeFilter"] = {"bytes": (sys.getsizeof(fps) + len(fps) * per_member) / n}

    bloom_df = BloomDupeFilter.from_crawler(crawler_for({"DEDUP_BLOOM_CAPACITY": n, "DEDUP_BLOOM_ERROR_RATE": p}))
    store: BloomSeenSet = bloom_df.store
    add = store.add
    # leave room for the timed keys, so the filter is at (not past) its capacity at the end
    check = list(digests(2 * 10**9, min(n // 10, 200_000)))
    reserve = len(check) + 2 * sample
    began = time.perf_counter()
    for d in digests(0, n - reserve):
        add(d)
    fill_seconds = time.perf_counter() - began
    # five equal parts, each timed on its own: the median is the figure, the spread is printed with it
    gc.disable()
    part_us = []
    for part in range(5):
        keys = check[len(check) * part // 5:len(check) * (part + 1) // 5]
        began = CPU()
        for d in keys:
            add(d)
        part_us.append((CPU() - began) / len(keys) * 1e6)
    gc.enable()
    check_us = sorted(part_us)[2]
    local = [("Scrapy RFPDupeFilter", rfp.request_seen, urls(10**9, sample), CPU),
             ("BloomDupeFilter (Scrapy fingerprinter)", bloom_df.request_seen, urls(2 * 10**9, sample), CPU)]
    rows["BloomDupeFilter (Scrapy fingerprinter)"] = {"bytes": store.size_bytes() / n}
    if canonical:
        bloom_canon = BloomDupeFilter.from_crawler(crawler_for({
            "DEDUP_BLOOM_CAPACITY": n, "DEDUP_BLOOM_ERROR_RATE": p, "REQUEST_FINGERPRINTER_CLASS": canonical}))
        bloom_canon.store = store  # the same filled filter; its stream is other URLs
        local.append(("BloomDupeFilter + CanonicalRequestFingerprinter", bloom_canon.request_seen,
                      urls(3 * 10**9, sample), CPU))
        rows["BloomDupeFilter + CanonicalRequestFingerprinter"] = {"bytes": store.size_bytes() / n}
    for name, rate in race(local, rounds=10 if args.quick else 50).items():
        rows[name]["calls"] = rate
    print(f"  Bloom check alone (BloomSeenSet.add on fingerprints, filter of {n:,}): {check_us:.2f} us/call "
          f"(median of 5 parts, {min(part_us):.2f}-{max(part_us):.2f}) "
          f"(CPU time); filled {n - reserve:,} in {fill_seconds:.1f}s; {len(store):,} keys at the end; "
          f"estimated false-positive rate now {store.estimated_false_positive_rate():.2g}")
    del fps, rfp, store, bloom_df, local
    bloom_canon = None
    gc.collect()

    # --- redis filters --------------------------------------------------------------------------
    server = None
    if not args.no_redis:
        import redis

        from scrapy_dedup.dupefilters import RedisBloomDupeFilter, RedisDupeFilter

        if args.redis_url:
            redis_url = args.redis_url
        else:
            server = LocalRedis()
            redis_url = server.url
        client = redis.Redis.from_url(redis_url)
        client.flushall()
        # the stores are filled with synthetic fingerprints first (no crawl wrote them, so no generation is
        # recorded), then opened under two fingerprinters: accept the generation, as a user would for a new store
        settings = {"DEDUP_REDIS_URL": redis_url, "DEDUP_BLOOM_CAPACITY": n, "DEDUP_BLOOM_ERROR_RATE": p,
                    "DEDUP_ACCEPT_NEW_GENERATION": True}
        contenders = []
        base = 4
        try:
            from scrapy_redis.dupefilter import RFPDupeFilter as ScrapyRedisFilter

            peer = ScrapyRedisFilter(client, "bench:scrapy-redis")
            pipelined(client, "sadd", peer.key, (d.hex() for d in digests(0, n)))
            rows["scrapy-redis RFPDupeFilter"] = {"bytes": redis_bytes(client, [peer.key]) / n}
            contenders.append(("scrapy-redis RFPDupeFilter", peer.request_seen))
        except ImportError as exc:
            print(f"  (scrapy-redis not importable: {exc})")
        pipelined(client, "sadd", "bench:exact", digests(0, n))
        exact_bytes = redis_bytes(client, ["bench:exact"]) / n
        bloom_bytes = None
        for label, extra in (("(Scrapy fingerprinter)", {}),
                             ("+ CanonicalRequestFingerprinter", {"REQUEST_FINGERPRINTER_CLASS": canonical})):
            if label.startswith("+") and canonical is None:
                continue
            exact = RedisDupeFilter.from_crawler(crawler_for({**settings, **extra, "DEDUP_REDIS_KEY": "bench:exact"}))
            exact.open()
            rows[f"RedisDupeFilter {label}"] = {"bytes": exact_bytes}
            contenders.append((f"RedisDupeFilter {label}", exact.request_seen))
            rbloom = RedisBloomDupeFilter.from_crawler(
                crawler_for({**settings, **extra, "DEDUP_REDIS_KEY": "bench:bloom"}))
            rbloom.open()
            if bloom_bytes is None:
                rbloom.store.add_many(digests(0, n - 4 * sample))
                rbloom.store.cache.clear()
                bloom_bytes = redis_bytes(client, rbloom.store.shard_keys) / n
            rows[f"RedisBloomDupeFilter {label}"] = {"bytes": bloom_bytes}
            contenders.append((f"RedisBloomDupeFilter {label}", rbloom.request_seen))
        try:
            from scrapy_redis_bloomfilter.dupefilter import RFPDupeFilter as BloomPeer

            peer_bloom = BloomPeer(client, "bench:srbf", False, 30, 6)
            rows["scrapy-redis-bloomfilter"] = {
                "bytes": 2**30 / 8 / n,
                "note": f"timed on {3 * min(args.peer_bloom_sample, sample):,} calls, not filled"}
            contenders.append(("scrapy-redis-bloomfilter", peer_bloom.request_seen))
        except Exception as exc:  # an unmaintained peer: report, do not fail
            print(f"  (scrapy-redis-bloomfilter skipped: {exc.__class__.__name__}: {exc})")
        # Not a filter: the fingerprint every contender above computes per call with Scrapy's
        # fingerprinter. Its calls/s is the ceiling for any filter that uses it.
        fingerprint_only = "(Scrapy's fingerprint alone, no filter)"
        rows[fingerprint_only] = {"bytes": 0.0, "note": "the ceiling for a filter using Scrapy's fingerprinter"}
        contenders.append((fingerprint_only, crawler_for({}).request_fingerprinter.fingerprint))
        timed = []
        for name, request_seen in contenders:
            size = min(args.peer_bloom_sample, sample) if name == "scrapy-redis-bloomfilter" else sample
            base += 1
            timed.append((name, request_seen, recurring(urls(base * 10**9, size)), time.perf_counter))
        for name, rate in race(timed, rounds=10 if args.quick else 200).items():
            rows[name]["calls"] = rate
        bloom_command_variants(redis_url, 500 if args.quick else 20_000)
        client.close()
        if server:
            server.stop()

    # --- report ---------------------------------------------------------------------------------
    base_local = rows["Scrapy RFPDupeFilter"]
    base_redis = rows.get("scrapy-redis RFPDupeFilter")
    print(f"\n{'filter':50} {'bytes/URL':>10} {'calls/s':>10} {'vs Scrapy':>18} {'vs scrapy-redis':>18}")
    for name, row in rows.items():
        vs_local = f"{row['calls'] / base_local['calls']:.2f}x c, {row['bytes'] / base_local['bytes']:.3f}x B"
        vs_redis = (f"{row['calls'] / base_redis['calls']:.2f}x c, {row['bytes'] / base_redis['bytes']:.3f}x B"
                    if base_redis else "-")
        print(f"{name:50} {row['bytes']:10.2f} {row['calls']:10.0f} {vs_local:>18} {vs_redis:>18}"
              + (f"  ({row['note']})" if "note" in row else ""))
    print("\ntargets:")
    canon_row = rows.get("BloomDupeFilter + CanonicalRequestFingerprinter")
    checks = [
        ("Bloom bytes/URL <= 1/20 of RFPDupeFilter",
         rows["BloomDupeFilter (Scrapy fingerprinter)"]["bytes"] * 20 <= base_local["bytes"]),
        ("Bloom check alone < 3 us", check_us < 3.0),
    ]
    if canon_row:
        checks.append(("Bloom + Canonical calls/s >= 0.9 x RFPDupeFilter (default fingerprinter)",
                       canon_row["calls"] >= 0.9 * base_local["calls"]))
    if base_redis:
        exact = rows["RedisDupeFilter (Scrapy fingerprinter)"]
        rbloom = rows["RedisBloomDupeFilter (Scrapy fingerprinter)"]
        checks += [
            ("RedisDupeFilter calls/s >= 1.5 x scrapy-redis", exact["calls"] >= 1.5 * base_redis["calls"]),
            ("RedisDupeFilter bytes/URL < scrapy-redis", exact["bytes"] < base_redis["bytes"]),
            ("RedisBloomDupeFilter calls/s >= scrapy-redis", rbloom["calls"] >= base_redis["calls"]),
            ("RedisBloomDupeFilter bytes/URL of capacity <= 4", rbloom["bytes"] <= 4.0),
        ]
        if "scrapy-redis-bloomfilter" in rows:
            peer_calls = rows["scrapy-redis-bloomfilter"]["calls"]
            rbloom_canon = rows.get("RedisBloomDupeFilter + CanonicalRequestFingerprinter")
            if rbloom_canon:
                checks.append(("RedisBloomDupeFilter + CanonicalRequestFingerprinter (as the add-on sets it) "
                               "calls/s >= 10 x scrapy-redis-bloomfilter", rbloom_canon["calls"] >= 10 * peer_calls))
            checks.append(("RedisBloomDupeFilter (Scrapy fingerprinter) calls/s >= 10 x scrapy-redis-bloomfilter",
                           rbloom["calls"] >= 10 * peer_calls))
    for label, ok in checks:
        print(f"  [{'met' if ok else 'MISSED'}] {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
