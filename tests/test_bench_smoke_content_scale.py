"""benchmarks/bench_content_scale.py runs end to end on small sizes (never rots), and its figures add up."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "bench_content_scale.py")


def run(*args: str) -> dict:
    out = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    return json.loads("\n".join(lines[lines.index("{"):]))  # the JSON document after the progress lines


def test_memory_mode_counts_every_decision():
    result = run("memory", "--pages", "3000")
    assert sum(result["kinds"].values()) == 3000
    assert result["kept"] == result["kinds"]["unique"]
    assert result["kinds"]["exact"] > 0 and result["kinds"]["near"] > 0
    assert result["nbytes_total_per_kept"] > result["nbytes_per_kept"]["sketches"] > 0
    plain = run("memory", "--pages", "3000", "--no-sketches")  # the pages carry no sketch at all
    assert sum(plain["kinds"].values()) == 3000 and plain["kinds"]["near"] > 0
    assert plain["nbytes_per_kept"]["sketches"] == 0


@pytest.mark.redis
def test_redis_and_throughput_modes_on_one_node_and_a_cluster(redis_server):  # redis_server: skips without it
    result = run("redis", "--pages", "600")
    assert result["one"]["kept"] == result["cluster"]["kept"]  # the same decisions in both layouts
    assert len(result["cluster"]["keys_per_node"]) == 3 and min(result["cluster"]["keys_per_node"]) > 0
    speed = run("throughput", "--pages", "150", "--processes", "2")
    for name in ("one x2", "cluster x2"):
        assert sum(speed[name]["kinds"].values()) == 300 and speed[name]["decisions_per_s"] > 0
    assert len(speed["cluster x2"]["redis_cpu_us_per_decision_by_node"]) == 3
