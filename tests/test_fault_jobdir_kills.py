"""SIGKILL with JOBDIR and the add-on's defaults, at many moments: nothing lost, only what was in flight refetched.

Real ``scrapy`` processes (:mod:`tests.faultcrawl`) against a local site, real
signals. Before each restart the test reads the killed run's frontier journal
(read-only) to know which requests were admitted and not finished; of those,
the ones the site had served are exactly the ones in flight at the kill, and
exactly those may be fetched twice. Every page must be fetched at least once.
The counts of every run are printed (``-s``) and recorded in docs/reliability.md.
"""
from __future__ import annotations

import pickle
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from scrapy.core.scheduler import Scheduler

from scrapy_dedup.jobdir import JOURNAL_FILE, QUEUE_DIR, uses_scrapys_scheduler
from scrapy_dedup.seen.journal import FrontierJournal
from tests.faultcrawl import ResumeSite
from tests.support.localsite import LocalSite
from tests.test_fault_resume import HOST, CrawlProcess, error_lines, wait_for_hits

pytestmark = pytest.mark.crawl


def pending_paths(jobdir: Path) -> set[str]:
    replay = FrontierJournal(jobdir / JOURNAL_FILE).read()
    return {urlsplit(pickle.loads(payload)["url"]).path for _, payload in replay.pending.values()}


def tracebacks(log: str) -> int:
    return log.count("Traceback (most recent call last)")


class Scenario:
    """Runs of one crawl sharing a JOBDIR, killed or stopped at given hit counts, then run to the end."""

    def __init__(self, tmp_path: Path, settings: dict | None = None, design: ResumeSite | None = None):
        self.tmp = tmp_path
        self.design = design or ResumeSite()
        self.paths = self.design.paths()
        self.jobdir = tmp_path / "job"
        self.settings = {"JOBDIR": str(self.jobdir), "CONCURRENT_REQUESTS": 2, **(settings or {})}
        self.runs: list[CrawlProcess] = []
        self.in_flight: Counter = Counter()  # paths fetched in a killed run and pending in its journal
        self.kills = 0

    def run(self, site: LocalSite, stops: list[tuple[int, signal.Signals]]) -> CrawlProcess:
        start = site.url(HOST, "/")
        for at, signum in stops:
            hits_before = Counter(site.hits)
            proc = CrawlProcess(self.tmp, f"run{len(self.runs)}", start, self.settings).start()
            self.runs.append(proc)
            wait_for_hits(site, at, proc)
            proc.proc.send_signal(signum)
            code = proc.wait()
            if signum == signal.SIGKILL:
                assert code == -signal.SIGKILL
                self.kills += 1
                served = {path for (host, path), n in site.hits.items() if n > hits_before[(host, path)]}
                self.in_flight.update(pending_paths(self.jobdir) & served)
            else:
                assert code == 0, proc.log_text()[-3000:]
        last = CrawlProcess(self.tmp, f"run{len(self.runs)}", start, self.settings).start()
        self.runs.append(last)
        assert last.wait(timeout=120) == 0, last.log_text()[-3000:]
        return last

    def check(self, site: LocalSite, last: CrawlProcess) -> dict:
        fetched = Counter({path: n for (_, path), n in site.hits.items()})
        lost = [path for path in self.paths if path not in fetched]
        twice = Counter({path: n - 1 for path, n in fetched.items() if n > 1})
        kept = Counter(urlsplit(url).path for url in last.kept())
        items_twice = Counter({path: n - 1 for path, n in kept.items() if n > 1})
        logs = "".join(run.log_text() for run in self.runs)
        counts = {"runs": len(self.runs), "kills": self.kills, "pages": len(self.paths), "lost": len(lost),
                  "fetched_twice": sum(twice.values()), "in_flight": sum(self.in_flight.values()),
                  "items_twice": sum(items_twice.values()), "tracebacks": tracebacks(logs)}
        print(f"JOBDIR kill scenario {self.settings}: {counts}")
        assert lost == [], (lost, counts)
        # a page is fetched once more per kill it was in flight at, and never otherwise
        assert twice == self.in_flight, (twice, self.in_flight)
        # an item is emitted twice only for a page that was in flight (its item had left before the kill)
        assert set(items_twice) <= set(self.in_flight), (items_twice, self.in_flight)
        assert counts["tracebacks"] == 0
        assert error_lines(last.log_text()) == []
        assert last.stats()["finish_reason"] == "finished"
        # every original or its near duplicate kept: of each pair, exactly one URL (more only if refetched)
        families = Counter(path.replace("/b/", "/a/") for path in kept if path.startswith(("/a/", "/b/")))
        assert set(families) == set(self.design.originals)
        return counts


#: (hits before the kill as a fraction of the site, checkpoint seconds): before any checkpoint (the
#: add-on's 300 s default) and with checkpoints and journal compactions every 0.2 s
KILL_POINTS = [(0.15, 300), (0.5, 300), (0.85, 300), (0.3, 0.2), (0.7, 0.2)]


@pytest.mark.parametrize("fraction,checkpoint", KILL_POINTS, ids=[f"{f}-{c}s" for f, c in KILL_POINTS])
def test_sigkill_at_a_moment_loses_nothing_and_refetches_only_what_was_in_flight(tmp_path, fraction, checkpoint):
    scenario = Scenario(tmp_path, {"DEDUP_CHECKPOINT_SECONDS": checkpoint})
    with LocalSite(scenario.design.route) as site:
        last = scenario.run(site, [(int(len(scenario.paths) * fraction), signal.SIGKILL)])
        counts = scenario.check(site, last)
    log = last.log_text()
    assert "did not close cleanly" in log and log.count("] WARNING:") >= 1
    assert last.stats()["dedup/jobdir/unclean_resumes"] == 1
    assert last.stats().get("dedup/jobdir/readmitted", 0) >= counts["in_flight"]


@pytest.mark.parametrize("dupefilter", ["RedisDupeFilter", "RedisBloomDupeFilter"])
@pytest.mark.parametrize("fraction", [0.3, 0.7])
def test_sigkill_with_a_redis_dupefilter_and_scrapys_disk_queue_loses_nothing(tmp_path, redis_url, dupefilter,
                                                                               fraction):
    """The seen set in Redis survives the kill, Scrapy's disk queue does not: the journal (written before each
    mark in Redis) schedules the pending requests again. Before it, they were seen in Redis and never fetched."""
    settings = {"DUPEFILTER_CLASS": f"scrapy_dedup.{dupefilter}", "DEDUP_REDIS_URL": redis_url,
                "DEDUP_BLOOM_CAPACITY": 100_000, "DEDUP_CHECKPOINT_SECONDS": 0.3}
    scenario = Scenario(tmp_path, settings)
    with LocalSite(scenario.design.route) as site:
        last = scenario.run(site, [(int(len(scenario.paths) * fraction), signal.SIGKILL)])
        scenario.check(site, last)
    assert last.stats()["dedup/jobdir/unclean_resumes"] == 1


def test_sigint_resume_sigkill_resume_finishes(tmp_path):
    """The third run used to never end (a disk-queue state from the SIGINT close, reopened after the queue changed)."""
    scenario = Scenario(tmp_path)
    n = len(scenario.paths)
    with LocalSite(scenario.design.route) as site:
        last = scenario.run(site, [(n // 4, signal.SIGINT), (n // 2, signal.SIGKILL)])
        scenario.check(site, last)


def test_repeated_kills_then_a_clean_finish(tmp_path):
    scenario = Scenario(tmp_path, {"DEDUP_CHECKPOINT_SECONDS": 0.5})
    n = len(scenario.paths)
    with LocalSite(scenario.design.route) as site:
        last = scenario.run(site, [(n // 5, signal.SIGKILL), (2 * n // 5, signal.SIGKILL),
                                   (3 * n // 5, signal.SIGINT), (4 * n // 5, signal.SIGKILL)])
        scenario.check(site, last)


def test_temporary_files_of_an_interrupted_checkpoint_are_removed_at_start(tmp_path):
    """What a kill during a checkpoint leaves (a temporary file named by the dead writer's PID) is cleaned up."""
    scenario = Scenario(tmp_path)
    scenario.jobdir.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    leftovers = [scenario.jobdir / f"seen.bloom.tmp-{dead.pid}-x1y2z3",
                 scenario.jobdir / f"dedup-content.idx.tmp-{dead.pid}-abc",
                 scenario.jobdir / f"{JOURNAL_FILE}.tmp-{dead.pid}-q"]
    for path in leftovers:
        path.write_bytes(b"\0" * 100_000)
    keep = scenario.jobdir / "notes.tmp-draft"  # not ours: left alone
    keep.write_text("mine")
    with LocalSite(scenario.design.route) as site:
        last = scenario.run(site, [])
    assert not any(path.exists() for path in leftovers)
    assert keep.exists()
    assert last.stats()["dedup/jobdir/stale_temporaries_removed"] == 3
    assert [p.name for p in scenario.jobdir.iterdir() if ".tmp-" in p.name] == [keep.name]


def test_a_clean_close_keeps_scrapys_queue_and_readmits_nothing(tmp_path):
    scenario = Scenario(tmp_path)
    with LocalSite(scenario.design.route) as site:
        last = scenario.run(site, [(len(scenario.paths) // 2, signal.SIGTERM)])
        scenario.check(site, last)
    assert "did not close cleanly" not in last.log_text()
    assert "dedup/jobdir/readmitted" not in last.stats()
    assert (scenario.jobdir / QUEUE_DIR).exists()


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(20))
def test_sigkill_at_random_moments_over_many_runs(tmp_path, seed):
    rng = random.Random(seed)
    scenario = Scenario(tmp_path, {"DEDUP_CHECKPOINT_SECONDS": rng.choice([0.2, 1, 300]),
                                   "CONCURRENT_REQUESTS": rng.choice([1, 2, 4, 8])})
    n = len(scenario.paths)
    points = sorted(rng.sample(range(2, n - 2), rng.randrange(1, 4)))
    stops = [(p, rng.choice([signal.SIGKILL, signal.SIGKILL, signal.SIGINT])) for p in points]
    with LocalSite(scenario.design.route) as site:
        last = scenario.run(site, stops)
        scenario.check(site, last)


class SchedulerSubclass(Scheduler):
    """A project's own scheduler built on Scrapy's (its disk queue the same)."""


@pytest.mark.parametrize(("scheduler", "scrapys"), [
    ("scrapy.core.scheduler.Scheduler", True),
    ("tests.test_fault_jobdir_kills.SchedulerSubclass", True),
    ("scrapy_redis.scheduler.Scheduler", False),  # its queue is in Redis: no JOBDIR queue to make kill-safe
    ("scrapy_dedup.redis_queue.AckScheduler", False),
    ("no.such.Scheduler", False),
])
def test_only_scrapys_scheduler_and_its_subclasses_count_as_scrapys(scheduler, scrapys):
    """Scrapy's BaseScheduler metaclass makes any class with the scheduler methods pass issubclass(); the
    frontier journal (and DUST learning's deferral) took scrapy-redis's scheduler for Scrapy's own."""
    from scrapy.utils.test import get_crawler

    assert uses_scrapys_scheduler(get_crawler(settings_dict={"SCHEDULER": scheduler})) is scrapys

