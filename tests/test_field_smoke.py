"""benchmarks/bench_field.py runs one real application end to end (DokuWiki from Debian, a few pages): its
set-up fills the wiki, every contender crawls it in its own process, the ground truth is read from the
wiki's own data, and the servers it started are gone afterwards.

Slow (a real PHP application, four crawls): ``scripts/test.sh -m slow -k field``. The Debian packages are
installed by the benchmark's set-up when missing (as root), or the test fails naming them."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "bench_field.py"
PAGES = 12


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{pid}: {cmdline}")
    return found


@pytest.mark.slow
@pytest.mark.crawl
def test_bench_field_crawls_dokuwiki_with_every_contender_and_reads_its_ground_truth(tmp_path):
    state = tmp_path / "state"
    figures = tmp_path / "field.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--apps", "dokuwiki", "--pages", str(PAGES), "--depth", "3",
                           "--state", str(state), "--json", str(figures)],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert f"dokuwiki: {PAGES} imported pages, {PAGES + 1} content pages, depth 3" in out, out
    for label in ("| fetches |", "| fetch waste |", "| content pages with an item |", "|   their items lost |",
                  "| CPU / scrapy |", "  mine-dust: exit 0"):
        assert label in out, out
    [result] = json.loads(figures.read_text())
    assert result["app"] == "dokuwiki"
    assert set(result["contenders"]) == {"scrapy", "addon", "learn", "mined"}
    plain = result["contenders"]["scrapy"]
    # the start page links every page: Scrapy's defaults reach them all and keep an item of each under its URL
    assert plain["content_pages"] == plain["reached"] == plain["with_item"] == plain["own_url"] == PAGES + 1
    assert plain["noncontent_lost"] == 0
    # the ground truth was read from the wiki: its history lists, diffs and source views are told apart from
    # the pages, and the old revisions (one page in three was saved three times) are views of their page
    views = plain["noncontent_by_view"]
    for view in ("do-revisions", "do-diff", "source"):
        assert views.get(view, 0) > 0, views
    assert "oldrev" not in views, views
    # at most the two older revisions of each page saved three times (which are reached depends on the crawl
    # order: a URL first met at the depth limit is not followed)
    assert 0 < plain["views"] <= 2 * len(range(0, PAGES, 3)), plain["views"]
    for name, c in result["contenders"].items():
        assert 0 <= c["wasted"] < c["fetches"], name
        assert c["reached_by"][-1] == c["reached"] and len(c["reached_by"]) == c["fetches"], name
        assert c["cpu"] > 0 and c["wall"] > 0, name
        assert c["unmapped_items"] == 0, name
    assert not _processes_mentioning(str(state)), "a server the benchmark started is still running"
