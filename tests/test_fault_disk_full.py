"""A full disk under JOBDIR: the crawl ends with ``dedup_disk_full`` and one ERROR line; a resume loses nothing.

Real ``scrapy`` processes (:mod:`tests.faultcrawl`) against a local site. The disk: a
real tmpfs of 1 MiB mounted for the test (as root), pre-filled to leave a few KiB, so
the frontier journal and Scrapy's disk queue run out of room mid-crawl; where mounting
is not allowed, the same crawl under ``RLIMIT_FSIZE`` (a file may not grow past a few
KiB: the same ``OSError`` family). Both mechanisms run here; none skips. Then the space
comes back and the same JOBDIR is resumed: every page is fetched.
"""
from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.faultcrawl import ResumeSite
from tests.support.localsite import LocalSite
from tests.test_fault_resume import HOST, ROOT, CrawlProcess

pytestmark = pytest.mark.crawl

LINE = "no room left on its disk"


class LimitedCrawl(CrawlProcess):
    """A crawl process whose files may not grow past ``fsize`` bytes (None: no limit)."""

    fsize: int | None = None

    def start(self) -> "LimitedCrawl":
        limit = self.fsize

        def limit_files() -> None:
            if limit is not None:
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        self.log = open(self.log_file, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.faultcrawl", str(self.config)], cwd=ROOT,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=self.log,
                                     stderr=subprocess.STDOUT, preexec_fn=limit_files)
        return self


class SmallDisk:
    """A tmpfs of 1 MiB with ``free`` bytes left, mounted at ``where``; ``release()`` frees the space."""

    def __init__(self, where: Path, free: int):
        self.where, self.filler = where, where / "filler"
        where.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)], check=True,
                       capture_output=True)
        stat = os.statvfs(where)
        self.filler.write_bytes(b"\0" * (stat.f_bavail * stat.f_frsize - free))

    def release(self) -> None:
        self.filler.unlink()

    def unmount(self) -> None:
        subprocess.run(["umount", str(self.where)], check=False, capture_output=True)


def can_mount(tmp_path: Path) -> bool:
    try:
        SmallDisk(tmp_path / "probe", 0).unmount()
        return True
    except (subprocess.CalledProcessError, FileNotFoundError, OSError):
        return False


def run_out_of_room_then_resume(tmp_path: Path, mechanism: str) -> dict:
    design = ResumeSite(lists=20, per_list=5, delay=0.01)
    disk = None
    if mechanism == "tmpfs":  # checkpoints and compactions every 0.2 s, 64 KiB free: full mid-crawl
        disk = SmallDisk(tmp_path / "disk", free=64 * 1024)
        jobdir, checkpoint = disk.where / "job", 0.2
    else:  # no checkpoint before the close: the journal grows past the limit mid-crawl
        jobdir, checkpoint = tmp_path / "job", 300
    settings = {"JOBDIR": str(jobdir), "CONCURRENT_REQUESTS": 2, "DEDUP_CHECKPOINT_SECONDS": checkpoint,
                "DEDUP_BLOOM_CAPACITY": 5_000}  # a checkpoint of 18 KiB, which the small disk holds
    try:
        with LocalSite(design.route) as site:
            start = site.url(HOST, "/")
            first = LimitedCrawl(tmp_path, "full", start, settings)
            first.fsize = 16 * 1024 if mechanism == "fsize" else None  # the log (10 KiB) still fits
            assert first.start().wait(timeout=120) == 0, first.log_text()[-3000:]
            fetched_first = sum(site.hits.values())
            if disk is not None:
                disk.release()
            second = LimitedCrawl(tmp_path, "resumed", start, settings).start()
            assert second.wait(timeout=120) == 0, second.log_text()[-3000:]
    finally:
        if disk is not None:
            disk.unmount()
    log = first.log_text()
    fetched = Counter({path: n for (_, path), n in site.hits.items()})
    counts = {"pages": len(design.paths()), "fetched_before_full": fetched_first,
              "lost": len([p for p in design.paths() if p not in fetched]),
              "fetched_twice": sum(n - 1 for n in fetched.values()),
              "our_lines": sum(LINE in line for line in log.splitlines()),
              "error_lines": sum("] ERROR:" in line for line in log.splitlines()),
              "tracebacks_full_run": log.count("Traceback (most recent call last)"),
              "first_reason": first.stats()["finish_reason"], "second_reason": second.stats()["finish_reason"],
              "held_back": first.stats().get("dedup/jobdir/held_back_disk_full", 0),
              "readmitted": second.stats().get("dedup/jobdir/readmitted", 0)}
    print(f"disk full under JOBDIR ({mechanism}): {counts}")
    kept = Counter(urlsplit(url).path.replace("/b/", "/a/") for url in second.kept())
    assert set(kept) >= set(design.originals)  # every original or its near duplicate delivered
    return counts


@pytest.mark.parametrize("mechanism", ["disk", "fsize"])
def test_a_full_disk_ends_the_crawl_with_a_named_reason_and_the_resume_loses_nothing(tmp_path, mechanism):
    if mechanism == "disk":
        mechanism = "tmpfs" if can_mount(tmp_path) else "fsize"
    counts = run_out_of_room_then_resume(tmp_path, mechanism)
    assert counts["first_reason"] == "dedup_disk_full"
    assert 0 < counts["fetched_before_full"] < counts["pages"]
    assert counts["our_lines"] == 1 and counts["error_lines"] == 1 and counts["tracebacks_full_run"] == 0
    assert counts["second_reason"] == "finished"
    assert counts["lost"] == 0
