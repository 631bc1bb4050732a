"""The Bloom false-positive, the rules-loading and the saved-fetches benchmarks run (in --quick mode), so they never rot."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _run(script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, str(BENCHMARKS / script), "--quick", *args], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_bench_bloom_rate_quick_measures_every_filter():
    out = _run("bench_bloom_rate.py")
    for name in ("ours", "ours, version 1 hashing", "pybloom-live BloomFilter", "pybloom-live ScalableBloomFilter"):
        rows = re.findall(rf"^\s+1,000\s+1e-03\s+\d+x\s+{re.escape(name)}\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+(ok|ABOVE)",
                          out, re.M)
        assert rows, f"{name} missing from:\n{out}"
    ours = re.findall(r"^\s+1,000\s+1e-03\s+\d+x\s+ours\s+[\d.]+\s+[\d.]+\s+\d+\s+(ok|ABOVE)", out, re.M)
    assert ours == ["ok", "ok"], out  # at 1x and 10x the capacity, within the bound


def test_bench_bloom_rate_memory_rows_size_the_filter_to_the_crawl():
    out = _run("bench_bloom_rate.py", "--memory")
    rows = {(int(n.replace(",", "")), label.split(" (")[0]): float(mib) for n, label, mib in re.findall(
        r"^\s+([\d,]+)\s+(unset \(starts 100,000\)|[\d,]+ \(the crawl\)|10,000,000 \(former\))\s+([\d.]+)\s+\d+"
        r"\s+[\d.]+\s+\d+\s+ok$", out, re.M)}
    assert len(rows) == 6, out  # each size and sizing, every one within the rate's bound
    assert rows[(2_000, "unset")] < 1 < rows[(2_000, "10,000,000")]  # a small crawl: a small filter
    assert rows[(200_000, "unset")] < 3 * rows[(200_000, "200,000")]  # grown: within 3x of sizing it right


def test_bench_rules_load_quick_loads_each_size():
    out = _run("bench_rules_load.py")
    rows = re.findall(r"^\s+([\d,]+)\s+[\d.]+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", out, re.M)
    assert [r[0] for r in rows] == ["1,000", "4,000"], out


def test_bench_saved_fetches_quick_measures_both_streams():
    out = _run("bench_saved_fetches.py")
    rows = re.findall(r"^\s+(\d+)x\s+([\d.]+)\s+([\d.]+)\s+[+-][\d.]+$", out, re.M)
    assert [r[0] for r in rows] == ["1", "10"], out
