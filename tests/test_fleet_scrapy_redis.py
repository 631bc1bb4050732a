"""A scrapy-redis fleet with the one ``ADDONS`` line: the seen set and the content state are shared.

Two real ``scrapy crawl`` processes of a project whose settings are scrapy-redis's
(``SCHEDULER``, ``REDIS_URL``) and the add-on's one line share one real redis-server
and crawl one local site holding exact and near copies of its pages. The add-on puts
the seen set (``RedisDupeFilter``) and the content index (``DEDUP_CONTENT_BACKEND =
'redis'``) in that Redis; before, each process kept its own (a local Bloom filter, the
content index in memory) and a page met by both was kept twice. The truth is the
site's: the pages of one product (``/p/<i>``, ``/copy/<i>``, ``/near/<i>``) are one
page, so an item beyond the first of a product is a duplicate; none may be lost.

The project is a fleet as scrapy-redis runs one: its ``RedisSpider`` (the start URL pushed to Redis;
idle, it waits ``MAX_IDLE_TIME_BEFORE_CLOSE``) and ``SCHEDULER_PERSIST = True``. A plain ``Spider``
under that scheduler closes as soon as its own view of the shared queue is empty: when the other
process had popped both start requests, it closed ``finished`` in milliseconds having fetched
nothing. And without ``SCHEDULER_PERSIST`` the first process to close flushes the shared queue and
seen set while the other still crawls, which then fetches and keeps again the pages it meets. The
site holds every page until both processes have asked for one, so both take part however late one
starts.

And the crawl-end report under scrapy-redis's scheduler: its URL counts are the
requests the spider made (before, "Requests seen" was the filtered count, 100%).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest
from pytest_twisted import inlineCallbacks
from scrapy import Request, Spider
from scrapy.settings import Settings

from scrapy_dedup.addon import Addon
from scrapy_dedup.content.report import format_percent
from scrapy_dedup.settings import DedupConfigError
from tests.reliabilitysite import LinkedSite
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite

# scrapy-redis 0.9.1 passes the deprecated spider= argument to stats (not ours to fix)
pytestmark = [pytest.mark.redis,
              pytest.mark.filterwarnings("ignore:Passing a 'spider' argument:scrapy.exceptions.ScrapyDeprecationWarning")]

ROOT = Path(__file__).resolve().parent.parent
PROCESSES = 2

SPIDER = '''
from scrapy_redis.spiders import RedisSpider


class LinkedSpider(RedisSpider):
    """One item per page but the entry page; follows every link. Its start URLs are read from Redis
    ("linked:start_urls"); idle, it waits for requests (MAX_IDLE_TIME_BEFORE_CLOSE) rather than closing."""

    name = "linked"

    def parse(self, response):
        path = "/" + response.url.split("/", 3)[3]
        if path != "/":
            yield {"url": response.url, "path": path}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)
'''


def fleet_project(tmp: Path, redis_url: str) -> Path:
    """A Scrapy project as a scrapy-redis user writes it, plus the add-on's one line."""
    project = tmp / "project"
    (project / "fleet" / "spiders").mkdir(parents=True)
    (project / "scrapy.cfg").write_text("[settings]\ndefault = fleet.settings\n")
    (project / "fleet" / "__init__.py").write_text("")
    (project / "fleet" / "spiders" / "__init__.py").write_text("")
    (project / "fleet" / "spiders" / "linked.py").write_text(SPIDER)
    (project / "fleet" / "settings.py").write_text(textwrap.dedent(f"""\
        BOT_NAME = "fleet"
        SPIDER_MODULES = ["fleet.spiders"]
        ROBOTSTXT_OBEY = False
        TELNETCONSOLE_ENABLED = False
        # scrapy-redis: the shared queue
        SCHEDULER = "scrapy_redis.scheduler.Scheduler"
        REDIS_URL = {redis_url!r}
        SCHEDULER_PERSIST = True  # else the first process to close empties the queue and seen set of the other
        MAX_IDLE_TIME_BEFORE_CLOSE = {IDLE_BEFORE_CLOSE}
        # scrapy-dedup
        ADDONS = {{"scrapy_dedup.Addon": 0}}
        """))
    return project


def crawl_processes(project: Path, n: int) -> list[tuple[int, str, Path]]:
    """``n`` concurrent ``scrapy crawl`` runs, the ``i``-th with the User-Agent ``agent(i)``: each one's exit
    status, log and items file."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(project), str(ROOT)])}
    runs = []
    for i in range(n):
        items, log = project / f"items-{i}.jsonl", project / f"crawl-{i}.log"
        with open(log, "wb") as out:  # the child has its own copy of the descriptor
            proc = subprocess.Popen([sys.executable, "-m", "scrapy", "crawl", "linked", "-O", str(items),
                                     "-s", "LOG_LEVEL=INFO", "-s", f"USER_AGENT={agent(i)}"],
                                    cwd=project, env=env, stdout=out, stderr=subprocess.STDOUT)
        runs.append((proc, items, log))
    done = []
    for proc, items, log in runs:
        try:
            code = proc.wait(240)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        done.append((code, log.read_text(errors="replace"), items))
    return done


#: seconds a spider idles before it closes (counted from its start): the other process's entry page and one
#: engine heartbeat (5 s, when an idle engine asks the shared queue again) fit in it
IDLE_BEFORE_CLOSE = 10


def agent(process: int) -> str:
    return f"fleet-{process}"


class EveryProcessIn:
    """Hold every page but the entry page until each of ``parties`` processes (told apart by User-Agent) has
    asked for one: all then take part however late one starts, or one polls the shared queue."""

    def __init__(self, router, parties: int, timeout: float = 60.0):
        self.router = router
        self.agents = {agent(i) for i in range(parties)}
        self.timeout = timeout
        self.site: LocalSite | None = None  # set once served; it records every request's headers

    def __call__(self, host: str, path: str):
        if path != "/":
            deadline = time.monotonic() + self.timeout
            while not self.agents <= self.asking() and time.monotonic() < deadline:
                time.sleep(0.05)
        return self.router(host, path)

    def asking(self) -> set[str]:
        """The User-Agents that asked for a page (the site records a request before it routes it)."""
        assert self.site is not None
        with self.site.lock:
            return {headers.get("User-Agent", "") for _, path, headers in self.site.requests if path != "/"}


def edited_copies_keep_their_title(site: LinkedSite):
    """``site`` with each near copy under its original's ``<title>``: a page edited keeps its title (one with a
    title of its own is a sibling, kept: docs/content.md)."""
    def route(host: str, path: str):
        page = site(host, path)
        if page is not None and path.startswith("/near/"):
            page.body = str(page.body).replace(f">{path}<", f">/p/{path.rsplit('/', 1)[1]}<")
        return page

    return route


@pytest.mark.crawl
def test_two_processes_with_the_one_line_keep_at_most_one_percent_duplicates(redis_url, redis_client, tmp_path):
    truth = LinkedSite(pages=150, near=50, copies=50, delay=0.3)
    barrier = EveryProcessIn(edited_copies_keep_their_title(truth), PROCESSES)
    with LocalSite(barrier, record_headers=True) as site:
        barrier.site = site
        project = fleet_project(tmp_path, redis_url)
        redis_client.lpush("linked:start_urls", site.url("127.0.0.1"))
        runs = crawl_processes(project, PROCESSES)
    assert barrier.asking() == barrier.agents, "a process never asked for a page: the two did not crawl together"
    fetches = Counter(path for _, path in site.fetched())
    assert {path: fetches[path] for path in truth.paths if fetches[path] != 1} == {}, "one seen set: each page once"
    for code, log, _ in runs:
        assert code == 0, log[-3000:]
        assert "scrapy-dedup duplication report" in log
    paths = [[json.loads(line)["path"] for line in items.read_text().splitlines()] for _, _, items in runs]
    assert all(paths), "a process kept no item: the two did not crawl together"
    product = Counter(re.sub(r"^/(?:copy|near)/", "/p/", path) for path in sum(paths, []))
    items = sum(product.values())
    duplicates = items - len(product)
    assert set(product) == {f"/p/{i}" for i in range(truth.pages)}, "a page was lost"
    assert duplicates <= 0.01 * items, f"{duplicates} duplicate items of {items}: {product.most_common(5)}"


@pytest.mark.parametrize("given, refused", [
    ({"SCHEDULER": "scrapy_redis.scheduler.Scheduler"}, False),
    ({"SCHEDULER": "scrapy_dedup.redis_queue.AckScheduler"}, False),
    ({"DUPEFILTER_CLASS": "scrapy_dedup.RedisBloomDupeFilter"}, False),
    ({"DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter"}, False),
    ({"SCHEDULER": "scrapy_redis.scheduler.Scheduler", "DEDUP_CONTENT_BACKEND": "redis"}, False),
    ({"SCHEDULER": "scrapy_redis.scheduler.Scheduler", "DEDUP_CONTENT_BACKEND": "memory"}, True),
    ({"DUPEFILTER_CLASS": "scrapy_dedup.RedisDupeFilter", "DEDUP_CONTENT_BACKEND": " Memory"}, True),
])
def test_a_seen_set_in_redis_brings_the_content_state_there_or_the_start_is_refused(given, refused):
    settings = Settings(given, priority="project")
    settings.set("ADDONS", {"scrapy_dedup.Addon": 0}, "project")
    if refused:
        with pytest.raises(DedupConfigError, match="^DEDUP_CONTENT_BACKEND = .* the crawl's seen set is in Redis"):
            Addon().update_settings(settings)
        return
    Addon().update_settings(settings)
    assert settings.get("DEDUP_CONTENT_BACKEND") == "redis"
    # under scrapy-redis's scheduler the add-on's dupefilter is the shared one; one the project chose stays
    assert settings.get("DUPEFILTER_CLASS") == given.get("DUPEFILTER_CLASS", "scrapy_dedup.dupefilters.RedisDupeFilter")


@pytest.mark.parametrize("given", [{}, {"DUPEFILTER_CLASS": "scrapy_dedup.BloomDupeFilter"},
                                   {"DEDUP_CONTENT_BACKEND": "memory"}])
def test_a_local_seen_set_keeps_the_content_state_local(given):
    settings = Settings(given, priority="project")
    Addon().update_settings(settings)
    assert settings.get("DEDUP_CONTENT_BACKEND", "memory") == "memory"
    assert settings.get("DUPEFILTER_CLASS") == given.get("DUPEFILTER_CLASS", "scrapy_dedup.dupefilters.BloomDupeFilter")


class CountingSpider(Spider):
    """Follows every link of the linked site and counts the requests it makes (each is checked once)."""

    name = "counting"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.requests = 0

    def parse(self, response):
        for href in response.css("a::attr(href)").getall():
            self.requests += 1
            yield Request(response.urljoin(href))


def report_numbers(text: str) -> tuple[int, int, str]:
    seen = re.search(r"Requests seen: +(\d+)", text)
    filtered = re.search(r"Filtered as duplicates: +(\d+) +\(([\d.]+%)\)", text)
    assert seen and filtered, text
    return int(seen.group(1)), int(filtered.group(1)), filtered.group(2)


@pytest.mark.crawl
@pytest.mark.parametrize("dupefilter", [None, "scrapy_redis.dupefilter.RFPDupeFilter"])
@inlineCallbacks
def test_the_report_counts_the_requests_under_scrapy_redis_scheduler(dupefilter, redis_url, caplog):
    """The report's URL half under scrapy-redis's scheduler, with the add-on's dupefilter and with
    scrapy-redis's own: the requests the spider made, and those not fetched (the site counts the fetches)."""
    settings = {"ADDONS": {"scrapy_dedup.Addon": 0}, "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
                "REDIS_URL": redis_url}
    if dupefilter:
        settings["DUPEFILTER_CLASS"] = dupefilter
    truth = LinkedSite(pages=30, near=5)
    with caplog.at_level("INFO", logger="scrapy_dedup.extensions"), LocalSite(truth) as site:
        crawler = yield run_crawl(CountingSpider, settings, start_urls=[site.url("127.0.0.1")])
    # every request but the start one (dont_filter: never checked) was checked once; those not filtered were
    # fetched (the entry page once more: its start request does not mark it seen, and the pages link to it)
    fetched = len(site.fetched()) - 1
    assert fetched > len(truth.paths)
    report = "\n".join(r.getMessage() for r in caplog.records if "duplication report" in r.getMessage())
    seen, filtered, share = report_numbers(report)
    requests = crawler.spider.requests
    assert (seen, filtered) == (requests, requests - fetched)
    assert share == format_percent(filtered, seen)


@pytest.mark.parametrize("dupefilter, warns", [
    ("scrapy_redis.dupefilter.RFPDupeFilter", True),  # fingerprints with its own request_fingerprint()
    ("scrapy_redis_bloomfilter.dupefilter.RFPDupeFilter", True),
    ("scrapy.dupefilters.RFPDupeFilter", False),  # asks crawler.request_fingerprinter: ours
    ("scrapy_dedup.RedisDupeFilter", False),
    (None, False),  # the add-on's
])
def test_a_dupefilter_that_fingerprints_by_itself_is_named_at_start(dupefilter, warns, caplog):
    settings = Settings({"DUPEFILTER_CLASS": dupefilter} if dupefilter else {}, priority="project")
    with caplog.at_level("WARNING", logger="scrapy_dedup.addon"):
        Addon().update_settings(settings)
    said = [r.getMessage() for r in caplog.records if r.name == "scrapy_dedup.addon"]
    assert said == ([f"DUPEFILTER_CLASS {dupefilter} computes its own request fingerprints (request_fingerprint), "
                     "not with REQUEST_FINGERPRINTER_CLASS: scrapy-dedup's canonical URLs never reach the seen set, "
                     "so URL variants are fetched again; use one of scrapy-dedup's dupefilters "
                     "(scrapy_dedup.RedisDupeFilter is scrapy-redis's drop-in)"] if warns else [])
