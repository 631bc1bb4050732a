"""benchmarks/bench_report.py --quick runs end to end in seconds (so the benchmark never rots)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_report_quick():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_report.py"), "--quick"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.split("SUMMARY ", 1)[1])
    methods = [row["method"] for row in summary["pages"]]
    assert methods == ["ours", "textbook", "datasketch"]
    assert all(row["pages"] == summary["pages"][0]["pages"] > 0 for row in summary["pages"])
    # --jobs must not change the answer: same pages flagged with 1 and 2 workers
    assert len({row["flagged"] for row in summary["jobs_curve"]}) == 1
    assert summary["jobs_curve"][0]["flagged"] > 0
    assert [row["method"] for row in summary["index"]][:3] == ["ours", "textbook", "datasketch"]
    # the generated duplicates are within the threshold of their source: both indexes find the same ones
    assert summary["index"][0]["flagged"] == summary["index"][1]["flagged"] > 0
    assert [row["method"] for row in summary["memory"]] == ["ours", "datasketch"]
    assert summary["memory"][0]["pages"] == summary["memory"][1]["pages"] > 0  # same pages for both
    assert summary["index"][0]["fingerprints"] == summary["index"][2]["fingerprints"]  # same count as datasketch


def test_bench_report_ours_report_counts_one_parse_a_page(tmp_path):
    """The real part's method (the report command's path end to end, mirrors report included) runs on any dump
    and counts the pages parsed end to end: one a page."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_report import generate_dump

    dump = tmp_path / "dump.jsonl"
    generate_dump(dump, 40)
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_report.py"), "--_run", "ours-report",
                           "--dump", str(dump)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    assert row["method"] == "ours-report" and row["pages"] == 40 and row["pages_parsed"] == 40
    assert row["flagged"] > 0
