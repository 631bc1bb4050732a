"""The canonicalization benchmark runs (in --quick mode), so it never rots."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_canonicalize.py"


def test_bench_canonicalize_quick_runs_all_contenders():
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for name in ("ours (default switches)", "ours (all switches on)", "w3lib.url.canonicalize_url",
                 "url_normalize.url_normalize", "ours: CanonicalRequestFingerprinter", "scrapy: RequestFingerprinter"):
        assert name in out
    assert "ours: 0 unparsable" in out
    assert "ratio ours(default)/w3lib = " in out


def test_generated_urls_are_realistic_and_deterministic():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from bench_canonicalize import generate_urls
    finally:
        sys.path.pop(0)
    urls = generate_urls(3000)
    assert urls == generate_urls(3000)
    assert len(set(urls)) > 2900
    assert any("utm_" in u for u in urls) and any("jsessionid=" in u for u in urls)
    assert any(not u.isascii() for u in urls) and any("#" in u for u in urls)
