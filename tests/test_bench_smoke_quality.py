"""benchmarks/bench_quality.py --quick runs end to end (never rots); the scoring sees obvious facts."""
from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_bench_quality_quick_runs_and_scores_md5_correctly():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_quality.py"), "--quick",
                          "--no-install", "--ideas"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for name in ("ours", "MD5 of raw HTML", "simhash pkg", "datasketch MinHashLSH", "textbook simhash", "idea:"):
        assert name in text, name
    # Facts of the corpus that do not depend on the code measured: the "tracking" duplicates are the
    # same bytes (MD5 finds every one), the "csrf" ones differ in bytes (MD5 finds none).
    md5_kinds = [line for line in text.splitlines() if line.startswith("MD5 of raw HTML")][-1]
    tracking, csrf = (float(v) for v in md5_kinds.split()[4:6])
    assert (tracking, csrf) == (1.0, 0.0)
    # every table row has precision, recall and F1 in [0, 1]
    rows = [line for line in text.splitlines() if re.match(r"^(ours|MD5|simhash|datasketch|textbook|idea)", line)]
    assert len(rows) >= 14
    for line in rows[: len(rows) // 2]:
        numbers = re.findall(r"\s(\d\.\d{3})\s", line)
        assert len(numbers) >= 3 and all(0.0 <= float(v) <= 1.0 for v in numbers[:3]), line
