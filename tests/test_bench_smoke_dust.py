"""benchmarks/bench_dust.py --quick runs end to end (never rots): its miner finds the generated DUST of the
log, and its crawls of generated DUST sites report every figure."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_dust.py"


def test_bench_dust_quick_runs_and_reports_every_figure():
    done = subprocess.run([sys.executable, str(SCRIPT), "--no-sites", "--quick", "--lines", "8000"],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for needle in ("mining:", "mining memory: peak RSS", "canonicalize, no rules:", "100 rules on the host",
                   "ratio with 100 rules / without = "):
        assert needle in out, out
    assert "40/40 hosts got drop_param + query_to_path + substitute" in out, out
    assert "trap rules (page=, category=): 0" in out, out


@pytest.mark.crawl
def test_bench_dust_sites_quick_crawls_generated_sites_with_every_contender(tmp_path):
    from tests import dustgen

    dustgen.require_content()
    figures = tmp_path / "sites.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--sites-only", "--quick", "--json", str(figures)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for needle in ("summary over 2 site(s), seeds 0, 1", "per URL form (all sites)", "per trap (all sites)",
                   "mine-dust exit status non-zero on"):
        assert needle in out, out
    results = json.loads(figures.read_text())
    assert [r["seed"] for r in results] == [0, 1]
    for r in results:
        assert set(r["contenders"]) == {"scrapy", "addon", "mined", "learn"}, r["mine_dust"]
        plain = r["contenders"]["scrapy"]
        # plain Scrapy follows every link: it reaches every page, and every page response becomes an item
        assert plain["recall"] == 1.0 and plain["distinct"] == r["reachable"]
        assert plain["duplicate_items"] == plain["fetches"] - plain["redirects"] - plain["distinct"]
        for name, c in r["contenders"].items():
            assert c["fetches"] == c["distinct"] + c["wasted"], name
            assert f"  {name:7} fetches {c['fetches']:5}" in out, (name, out)


@pytest.mark.crawl
def test_mined_rules_of_the_worst_tuning_sites_hold_for_every_visitor_and_lose_nothing(tmp_path):
    """Generated sites 6208 and 6213, the worst of the tuning seeds (mined waste 45% and 51%): on 6208 the miner
    wrote rules whose literal held one visitor's ``;JSESSIONID=<token>`` (``.html -> /;JSESSIONID=<token>``),
    on 6213 no alias for pages under three keys (the canonical URL, ``/?p=<n>``, ``/content.asp?cid=<n>``).
    The crawl with the mined rules must waste less than a quarter of its fetches and lose no page, no trap; so
    must the crawl of 1012, a held-out site (not tuned on) with the same three keys per page and a session."""
    from tests import dustgen

    dustgen.require_content()
    figures = tmp_path / "sites.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--sites-only", "--seeds", "6208,6213,1012", "--contenders",
                           "addon,mined", "--json", str(figures)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for r in json.loads(figures.read_text()):
        mined = r["contenders"]["mined"]
        literals = [{k: v for k, v in rule.items() if k not in ("examples", "param")}
                    for rule in r["mine_dust"]["rules"]]
        assert not any(";" in json.dumps(rule) for rule in literals), (r["seed"], literals)
        assert mined["recall"] == 1.0, r["seed"]
        assert all(fetched == reachable for reachable, fetched in mined["per_trap"].values()), r["seed"]
        assert mined["waste"] < 0.25, (r["seed"], mined["waste"], r["mine_dust"]["rules"])
