"""The paragraph seen-set benchmark runs (in --quick mode), so it never rots, and its two contenders agree."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_paragraphs.py"


def test_bench_paragraphs_quick_runs_both_seen_sets():
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick"], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {m.group(1): (float(m.group(2)), int(m.group(3)))
            for m in re.finditer(r"^(exact set|Bloom filter \(1e-6\))\s+[\d.]+\s+\d+\s+([\d.]+)\s+[\d.]+\s+(\d+)$",
                                 done.stdout, re.M)}
    assert set(rows) == {"exact set", "Bloom filter (1e-6)"}, done.stdout
    assert rows["exact set"][1] > 0 and rows["Bloom filter (1e-6)"][1] >= rows["exact set"][1]
    assert "Bloom / exact: memory" in done.stdout
