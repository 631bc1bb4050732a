"""The crawl-verdicts benchmark runs (on the tiny generated corpus), so it never rots: two processes under
different PYTHONHASHSEED values, their crawl logs compared, and a difference would exit 1."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "crawl_verdicts.py"


def test_crawl_verdicts_tiny_compares_two_processes(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--hash-seeds", "1,2"],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    compared = re.search(r"^PYTHONHASHSEED=1 vs 2: 0 of (\d+) lines differ$", done.stdout, re.M)
    assert compared and int(compared.group(1)) > 20, done.stdout
    # one run alone writes the crawl log: every page judged, duplicates among them
    out = tmp_path / "log.jsonl"
    subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--out", str(out)], check=True, timeout=180)
    kinds = [json.loads(line)["kind"] for line in out.read_text().splitlines()]
    assert len(kinds) == int(compared.group(1)) and {"unique", "exact", "near"} <= set(kinds)
