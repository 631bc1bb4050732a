"""Stop and resume: graceful stops (SIGINT, SIGTERM) with JOBDIR, a hard kill (SIGKILL) with the queue in Redis.

Each crawl is a real ``scrapy`` process (:mod:`tests.faultcrawl`) against a local,
slow-ish site (:class:`tests.faultcrawl.ResumeSite`); the test signals it once the
site has served a given number of pages, then starts it again with the same config.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.faultcrawl import ResumeSite
from tests.support.localsite import LocalSite

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"


class CrawlProcess:
    """One ``python -m tests.faultcrawl`` run; stderr (the Scrapy log) kept in a file."""

    def __init__(self, tmp: Path, name: str, start_url: str, settings: dict):
        self.dir = tmp
        self.name = name
        self.config = tmp / f"{name}.json"
        self.kept_file = tmp / "kept.jsonl"  # shared by the runs: the union is what the user got
        self.stats_file = tmp / f"{name}-stats.json"
        self.log_file = tmp / f"{name}.log"
        self.config.write_text(json.dumps({"start_url": start_url, "settings": settings,
                                           "kept_file": str(self.kept_file), "stats_file": str(self.stats_file)}))
        self.proc: subprocess.Popen | None = None

    def start(self) -> "CrawlProcess":
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.log = open(self.log_file, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.faultcrawl", str(self.config)],
                                     cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        return self

    def wait(self, timeout: float = 90) -> int:
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.log.close()
        return code

    def stats(self) -> dict:
        return json.loads(self.stats_file.read_text())

    def log_text(self) -> str:
        return self.log_file.read_text(errors="replace")

    def kept(self) -> list[str]:
        if not self.kept_file.exists():
            return []
        return [json.loads(line)["url"] for line in self.kept_file.read_text().splitlines() if line.endswith("}")]


def wait_for_hits(site: LocalSite, count: int, proc: CrawlProcess, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while sum(site.hits.values()) < count:
        assert proc.proc.poll() is None, f"crawl ended before {count} pages:\n{proc.log_text()[-3000:]}"
        assert time.monotonic() < deadline, "the crawl did not reach the stop point in time"
        time.sleep(0.01)


def error_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if "] ERROR:" in line or line.startswith("Traceback")]


@pytest.mark.crawl
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_graceful_stop_and_resume_fetches_every_page_once_and_remembers_content(tmp_path, signum):
    design = ResumeSite()
    paths = design.paths()
    with LocalSite(design.route) as site:
        settings = {"JOBDIR": str(tmp_path / "job"), "CONCURRENT_REQUESTS": 2}
        start = site.url(HOST, "/")
        first = CrawlProcess(tmp_path, "first", start, settings).start()
        wait_for_hits(site, len(paths) // 2, first)
        first.proc.send_signal(signum)
        assert first.wait() == 0, first.log_text()[-3000:]
        fetched_first = Counter(site.hits)
        second = CrawlProcess(tmp_path, "second", start, settings).start()
        assert second.wait() == 0, second.log_text()[-3000:]
        fetched_all = Counter(site.hits)

    stats1, stats2 = first.stats(), second.stats()
    assert stats1["finish_reason"] == "shutdown"
    assert stats2["finish_reason"] == "finished"
    # The stop landed mid-crawl: both runs fetched pages.
    assert 0 < sum(fetched_first.values()) < len(paths)
    # No page fetched twice, none lost (the start page included: its request is not dont_filter).
    assert fetched_all == Counter({(HOST, path): 1 for path in paths})
    # Every original kept once, every near duplicate dropped, whichever run fetched it.
    kept = first.kept()
    assert sorted(kept) == sorted(site.url(HOST, path) for path in design.originals)
    # The content index came back: near duplicates fetched in the second run of originals kept in the first
    # were caught by the restored index.
    across = [b for b in design.near if (HOST, b) not in fetched_first and (HOST, "/a/" + b[3:]) in fetched_first]
    assert across, "the stop should fall between an original and its near duplicate"
    assert stats2["dedup/content/restored"] == sum(1 for a in design.originals if (HOST, a) in fetched_first)
    assert stats2["dedup/content/near"] >= len(across)
    assert "BloomDupeFilter: resumed" in second.log_text()
    assert error_lines(first.log_text()) == [] and error_lines(second.log_text()) == []
