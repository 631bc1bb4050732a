"""benchmarks/bench_dust.py --quick runs end to end (never rots) and its miner finds the generated DUST."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_dust.py"


def test_bench_dust_quick_runs_and_reports_every_figure():
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--lines", "8000"], capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for needle in ("mining:", "mining memory: peak RSS", "canonicalize, no rules:", "100 rules on the host",
                   "ratio with 100 rules / without = "):
        assert needle in out, out
    assert "40/40 hosts got drop_param + query_to_path + substitute" in out, out
    assert "trap rules (page=, category=): 0" in out, out
