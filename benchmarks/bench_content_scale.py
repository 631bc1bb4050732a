#!/usr/bin/env python
"""The content layer at scale: memory per kept page (in a process and in Redis), and decisions per second
of N processes against one Redis node and against a three-node Redis Cluster.

Pages are synthetic fingerprints with the shapes real ones have (a random 64-bit
simhash, a 16-byte exact hash, a full 256-value verification sketch of a page of
400 shingles, a 40-byte URL), so memory and Redis traffic are those of a real
page of 256 words or more (the sketch is full) without fingerprinting a million
texts. A share of the pages repeat an earlier one exactly (``--exact``) or as a
near copy (``--near``: simhash 1-3 bits away, 8 sketch values changed), so the
decisions take every path (exact hit, verified near hit, new page written).

Modes::

    python benchmarks/bench_content_scale.py memory --pages 1000000
        MemoryContentStore in a fresh process: resident-set growth and the store's
        own ``nbytes`` per kept page (``--no-sketches``: without the verification stage,
        for 10^7 pages on a machine without 12 GB to spare).
    python benchmarks/bench_content_scale.py redis --pages 100000
        the same pages into the one-slot store on one redis-server and into the
        sharded store on a three-node cluster (both started here): Redis memory
        per kept page (``used_memory`` growth, summed over the nodes, and
        ``MEMORY USAGE`` of every key by family).
    python benchmarks/bench_content_scale.py throughput --pages 4000 --processes 1,2,4
        N processes, each deciding its own ``--pages`` pages (the same generator,
        processes two by two on the same pages: exact and near copies within and across processes),
        released together: total decisions per second, one node and three nodes, and
        each server's CPU time per decision (``INFO cpu``: what bounds a node's share).

redis-server and redis-cli must be on the PATH. Figures are one run on the machine it
runs on; the client processes and the Redis servers share its cores.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import sys
import time
from types import SimpleNamespace
from collections import deque
from typing import Any, Iterator

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from scrapy_dedup.content.sketch import Sketch  # noqa: E402

SKETCH_VALUES = 256
SHINGLES = 400


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def pages(n: int, seed: int, exact: float, near: float,
          sketches: bool = True) -> Iterator[tuple[str, SimpleNamespace]]:
    """``n`` (url, fingerprint) pairs; a share repeat an earlier page exactly or as a near copy.

    ``sketches=False``: fingerprints without a sketch (for a store without the verification
    stage; drawing 256 values a page was most of the time of a 10^7 run).
    """
    rng = random.Random(seed)
    values_rng = np.random.default_rng(seed)  # sketch values: 256 draws a page, vectorized
    kept: deque[SimpleNamespace] = deque(maxlen=1000)  # recent kept pages, to copy (not counted as the store's)
    for i in range(n):
        url = f"https://site{i % 97}.example/items/{seed}-{i:09d}"
        r = rng.random()
        if kept and r < exact:
            yield url, rng.choice(kept)
            continue
        if kept and r < exact + near:
            base = rng.choice(kept)
            simhash = base.simhash
            for bit in rng.sample(range(64), rng.randint(1, 3)):
                simhash ^= 1 << bit
            sketch = None
            if sketches:
                values = list(base.sketch.ints)
                for pos in rng.sample(range(len(values)), 8):
                    values[pos] = rng.getrandbits(32)
                sketch = Sketch.from_ints(sorted(set(values)), SHINGLES)
            fp = SimpleNamespace(simhash=simhash, exact=rng.randbytes(16), sketch=sketch, words=SHINGLES)
            yield url, fp
            continue
        sketch = None
        if sketches:
            values = np.unique(values_rng.integers(0, 2**32, SKETCH_VALUES + 8, dtype=np.uint32))[:SKETCH_VALUES]
            sketch = Sketch(values.astype(">u4").tobytes(), SHINGLES)
        fp = SimpleNamespace(simhash=rng.getrandbits(64), exact=rng.randbytes(16), sketch=sketch, words=SHINGLES)
        kept.append(fp)
        yield url, fp


def measure_memory(args: argparse.Namespace) -> dict[str, Any]:
    """Run in a fresh child: RSS growth of a MemoryContentStore holding ``--pages`` pages."""
    from scrapy_dedup.content.engine import MemoryContentStore
    from scrapy_dedup.content.sketch import VerifyRule

    store: Any = MemoryContentStore(verify=None if args.no_sketches else VerifyRule())  # synthetic fingerprints
    gen = pages(args.pages, 1, args.exact, args.near, sketches=not args.no_sketches)
    start = rss_bytes()
    t0 = time.perf_counter()
    kinds: dict[str, int] = {}
    for url, fp in gen:
        kind = store.check_and_add(url, fp)[0]
        kinds[kind] = kinds.get(kind, 0) + 1
    seconds = time.perf_counter() - t0
    grown = rss_bytes() - start
    kept = len(store)
    return {"pages": args.pages, "kept": kept, "kinds": kinds, "seconds": round(seconds, 1),
            "rss_per_kept": round(grown / kept, 1),
            "nbytes_per_kept": {k: round(v / kept, 1) for k, v in store.nbytes.items()},
            "nbytes_total_per_kept": round(sum(store.nbytes.values()) / kept, 1)}


def _servers(kind: str) -> list[Any]:
    from tests.support.redis_server import RedisServer, start_cluster

    if kind == "one":
        return [RedisServer().start()]
    return start_cluster(3)


def _open(kind: str, nodes: list[Any]) -> Any:
    from scrapy_dedup.content.stores import open_redis_store

    url = f"redis://127.0.0.1:{nodes[0].port}/0"
    if kind == "one":
        return open_redis_store(url, "bench:content")
    return open_redis_store(url, "bench:content", params={"redis_cls": "redis.cluster.RedisCluster"})


def _used_memory(nodes: list[Any]) -> int:
    total = 0
    for node in nodes:
        client = node.client()
        total += int(client.info("memory")["used_memory"])
        client.close()
    return total


def _cpu_seconds(nodes: list[Any]) -> list[float]:
    """Each server's CPU time so far (user + system, ``INFO cpu``)."""
    out = []
    for node in nodes:
        client = node.client()
        info = client.info("cpu")
        out.append(float(info["used_cpu_user"]) + float(info["used_cpu_sys"]))
        client.close()
    return out


def _family(name: bytes) -> str:
    text = name.decode()
    tail = text.split("bench:content", 1)[1].lstrip("}:")
    return tail.split(":", 1)[0].rstrip("0123456789") or tail


def measure_redis(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in args.layouts.split(","):
        nodes = _servers(kind)
        try:
            before = _used_memory(nodes)
            store = _open(kind, nodes)
            t0 = time.perf_counter()
            for url, fp in pages(args.pages, 1, args.exact, args.near):
                store.check_and_add(url, fp)
            seconds = time.perf_counter() - t0
            kept = len(store)
            grown = _used_memory(nodes) - before
            families: dict[str, int] = {}
            keys = 0
            per_node = []
            for node in nodes:
                client = node.client()
                node_keys = 0
                for name in client.scan_iter(count=1000):
                    family = _family(name)
                    families[family] = families.get(family, 0) + int(client.memory_usage(name, samples=0) or 0)
                    node_keys += 1
                per_node.append(node_keys)
                keys += node_keys
                client.close()
            store.close()
            out[kind] = {"pages": args.pages, "kept": kept, "seconds": round(seconds, 1),
                         "used_memory_per_kept": round(grown / kept, 1),
                         "memory_usage_per_kept": round(sum(families.values()) / kept, 1),
                         "by_family_per_kept": {k: round(v / kept, 1) for k, v in sorted(families.items())},
                         "keys": keys, "keys_per_node": per_node}
        finally:
            for node in nodes:
                node.stop()
    return out


def _throughput_worker(kind: str, ports: list[int], worker: int, n: int, exact: float, near: float,
                       barrier: Any, results: Any) -> None:
    from scrapy_dedup.content.stores import open_redis_store

    url = f"redis://127.0.0.1:{ports[0]}/0"
    params = {"redis_cls": "redis.cluster.RedisCluster"} if kind == "cluster" else None
    store = open_redis_store(url, "bench:content", params=params)
    work = list(pages(n, 100 + worker // 2, exact, near))  # processes 0 and 1 (2 and 3) get the same pages
    barrier.wait()
    t0 = time.perf_counter()
    kinds: dict[str, int] = {}
    for page_url, fp in work:
        k = store.check_and_add(f"{page_url}#w{worker}", fp)[0]
        kinds[k] = kinds.get(k, 0) + 1
    results.put((time.perf_counter() - t0, kinds, getattr(store, "races_kept_twice", 0)))
    store.close()


def measure_throughput(args: argparse.Namespace) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    out: dict[str, Any] = {}
    for kind in ("one", "cluster"):
        for procs in [int(p) for p in args.processes.split(",")]:
            nodes = _servers(kind)
            try:
                barrier, results = ctx.Barrier(procs), ctx.Queue()
                workers = [ctx.Process(target=_throughput_worker,
                                       args=(kind, [n.port for n in nodes], w, args.pages, args.exact, args.near,
                                             barrier, results)) for w in range(procs)]
                cpu_before = _cpu_seconds(nodes)
                for w in workers:
                    w.start()
                got = [results.get(timeout=1800) for _ in workers]
                cpu = [after - before for after, before in zip(_cpu_seconds(nodes), cpu_before)]
                for w in workers:
                    w.join(60)
                wall = max(seconds for seconds, _, _ in got)
                kinds: dict[str, int] = {}
                for _, k, _ in got:
                    for name, count in k.items():
                        kinds[name] = kinds.get(name, 0) + count
                decisions = procs * args.pages
                per_node_us = [round(c / decisions * 1e6) for c in cpu]
                out[f"{kind} x{procs}"] = {"decisions_per_s": round(decisions / wall), "wall_s": round(wall, 1),
                                           "redis_cpu_us_per_decision_by_node": per_node_us,
                                           "kinds": kinds, "races_kept_twice": sum(r for _, _, r in got)}
                print(f"  {kind:7s} {procs} processes: {decisions / wall:8.0f} decisions/s, Redis CPU per decision "
                      f"by node {per_node_us} us, {kinds}", flush=True)
            finally:
                for node in nodes:
                    node.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("memory", "redis", "throughput"))
    ap.add_argument("--pages", type=int, default=None,
                    help="pages (memory 1,000,000; redis 100,000; throughput 4,000 per process)")
    ap.add_argument("--processes", default="1,2,4", help="throughput: comma-separated process counts")
    ap.add_argument("--layouts", default="one,cluster",
                    help="redis: 'one' (the one-slot store, one node), 'cluster' (sharded, three nodes), or both")
    ap.add_argument("--exact", type=float, default=0.15, help="share of pages repeating an earlier one exactly")
    ap.add_argument("--near", type=float, default=0.15, help="share of pages that are near copies of an earlier one")
    ap.add_argument("--no-sketches", action="store_true",
                    help="memory: a store without the verification stage (index, exact hashes and URLs only; the "
                         "sketches cost a fixed 1,030 bytes a kept page), for sizes whose sketches do not fit")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.pages is None:
        args.pages = {"memory": 1_000_000, "redis": 100_000, "throughput": 4_000}[args.mode]
    if args.mode == "memory" and not args.child:
        import subprocess

        proc = subprocess.run([sys.executable, __file__, "memory", "--child", "--pages", str(args.pages),
                               "--exact", str(args.exact), "--near", str(args.near),
                               *(["--no-sketches"] if args.no_sketches else [])],
                              capture_output=True, text=True, check=True)
        result = json.loads(proc.stdout)
    elif args.mode == "memory":
        print(json.dumps(measure_memory(args)))
        return
    elif args.mode == "redis":
        result = measure_redis(args)
    else:
        result = measure_throughput(args)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
