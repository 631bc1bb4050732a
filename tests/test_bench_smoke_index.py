"""benchmarks/bench_index.py --quick runs end to end (never rots) and every index finds near fingerprints."""
from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_bench_index_quick_runs_all_three():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_index.py"), "--quick"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    rows = {line.split("  ")[0].strip(): line for line in out.stdout.splitlines()
            if line.startswith(("ours SimhashIndex", "simhash pkg", "datasketch"))}
    assert len(rows) == 3, out.stdout
    for name, line in rows.items():
        assert "error" not in line, line
        fields = line[34:].split()
        bytes_per_page, near_found = float(fields[0]), float(fields[6])
        assert bytes_per_page > 0
        if not name.startswith("datasketch"):  # the banded indexes guarantee recall within 3 bits
            assert near_found == 1.0, line
