"""The crawl-overhead benchmark runs (in --quick mode: one plain and one add-on crawl), so it never rots."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_crawl.py"


def test_bench_crawl_quick_reports_both_cpu_figures():
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    result = json.loads(out.strip().splitlines()[-1])
    plain, addon = result["summary"]["plain"], result["summary"]["addon"]
    assert plain["fetched"] > addon["fetched"] > 0  # the add-on fetches fewer pages of the duplicate-rich site
    assert plain["items"] == plain["fetched"] and 0 < addon["items"] < addon["fetched"]
    for row in (plain, addon):
        # the spider's open..close window is part of the whole process
        assert 0 < row["spider_cpu"] <= row["cpu"]
        assert 0 < row["spider_cpu_per_page_ms"] <= row["cpu_per_page_ms"]
    for key in ("ratio_per_page", "ratio_per_page_spider", "ratio_per_page_min", "ratio_per_page_spider_min",
                "ratio_per_page_paired", "ratio_per_page_spider_paired"):
        assert result[key] > 0
    assert "whole process" in out and "spider_opened .. spider_closed" in out
