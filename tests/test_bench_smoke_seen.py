"""The seen-store benchmark runs (in --quick mode) with every contender, so it never rots."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_seen.py"


def test_bench_seen_quick_runs_all_contenders(redis_server):
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--redis-url", redis_server.url],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    for name in ("Scrapy RFPDupeFilter", "BloomDupeFilter (Scrapy fingerprinter)",
                 "BloomDupeFilter + CanonicalRequestFingerprinter", "scrapy-redis RFPDupeFilter",
                 "RedisDupeFilter (Scrapy fingerprinter)", "RedisBloomDupeFilter (Scrapy fingerprinter)",
                 "scrapy-redis-bloomfilter"):
        row = re.search(rf"^{re.escape(name)}\s+([\d.]+)\s+(\d+)\s", out, re.M)
        assert row, f"{name} missing from:\n{out}"
        assert float(row.group(1)) > 0 and int(row.group(2)) > 0
    assert "Bloom check alone" in out
    variants = re.findall(r"^  (Lua script \(SETBIT per bit\)|BITFIELD \(the store\)), (python parser|hiredis)"
                          r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", out, re.M)
    assert len(variants) >= 2, out  # both commands on at least redis-py's own parser
    assert all(float(v) > 0 for row in variants for v in row[2:])  # wall, client CPU and Redis CPU measured
    assert out.count("[met]") + out.count("[MISSED]") >= 8  # every target is reported, met or not


def test_recurring_stream_repeats_each_url_three_times():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from bench_seen import recurring, urls
    finally:
        sys.path.pop(0)
    stream = urls(0, 1000)
    assert len(set(stream)) == 1000 and stream == urls(0, 1000)
    mixed = recurring(stream)
    assert len(mixed) == 3000
    assert all(count == 3 for count in __import__("collections").Counter(mixed).values())
