"""benchmarks/bench_sketch_limit.py runs end to end on a few pairs (never rots), and its exact column is the rule."""
from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "bench_sketch_limit.py")


def test_rates_of_every_sketch_on_both_sides_of_the_limit():
    out = subprocess.run([sys.executable, SCRIPT, "--pairs", "4", "--own", "5:5,16:16"],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr
    header, *rows = out.stdout.splitlines()[1:]
    names = header.split()[2:]  # after "own a:b"
    rates = {row.split()[0]: dict(zip(names, map(float, row.split()[1:]))) for row in rows}
    assert set(rates) == {"5:5", "16:16"} and "bottom-256" in names and "odd384" in names
    assert rates["5:5"]["exact"] == rates["5:5"]["bottom-256"] == 1.0
    assert rates["16:16"]["exact"] == rates["16:16"]["bottom-256"] == 0.0
    # the syndrome sketch decodes 5:5 (d = 10 <= 28) exactly and rejects 16:16 (d = 32 > 28, equal lengths)
    assert rates["5:5"]["syn28"] == 1.0 and rates["16:16"]["syn28"] == 0.0


def test_bench_syndrome_real_runs_on_a_small_corpus():
    """benchmarks/bench_syndrome_real.py end to end: the exact sets agree with themselves, every sketch has a row."""
    script = os.path.join(ROOT, "benchmarks", "bench_syndrome_real.py")
    out = subprocess.run([sys.executable, script, "--per-source", "2", "--live-per-source", "1", "--score", "syn28"],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line.split() for line in out.stdout.splitlines() if line.startswith("  ")}
    assert rows["exact"][-1] == "0"  # "!= exact" of the exact sets themselves
    for name in ("syn28", "syn20+odd144", "syn40+odd352"):
        assert name in rows, name
    assert "deciding by syn28" in out.stdout
