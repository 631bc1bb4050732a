"""The Bloom false-positive and the rules-loading benchmarks run (in --quick mode), so they never rot."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _run(script: str) -> str:
    done = subprocess.run([sys.executable, str(BENCHMARKS / script), "--quick"], capture_output=True, text=True,
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


def test_bench_rules_load_quick_loads_each_size():
    out = _run("bench_rules_load.py")
    rows = re.findall(r"^\s+([\d,]+)\s+[\d.]+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", out, re.M)
    assert [r[0] for r in rows] == ["1,000", "4,000"], out
