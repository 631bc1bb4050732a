"""Configuration mistakes and refused start-ups, as a user meets them: real ``scrapy crawl`` processes.

Several bad ``DEDUP_*`` settings are all named at once, one line each, without a traceback, and
the command exits with a non-zero status (before, the first error alone was printed under the
event loop's 20-line traceback). A refused fingerprint generation (a JOBDIR resumed under another
URL policy) ends the same way. A dupefilter of ours without our fingerprinter warns at start,
naming the setting.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from urllib.parse import urlsplit
from pathlib import Path

import pytest
import scrapy
from pytest_twisted import inlineCallbacks

from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite, Page

ROOT = Path(__file__).resolve().parent.parent

SPIDER = '''
import scrapy


class OneSpider(scrapy.Spider):
    name = "one"

    def __init__(self, start_url="http://127.0.0.1:9/", **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [start_url]

    def parse(self, response):
        yield {"url": response.url}
        yield from response.follow_all(css="a")
'''


def project(tmp: Path, extra: str = "") -> Path:
    root = tmp / "project"
    (root / "proj" / "spiders").mkdir(parents=True)
    (root / "scrapy.cfg").write_text("[settings]\ndefault = proj.settings\n")
    (root / "proj" / "__init__.py").write_text("")
    (root / "proj" / "spiders" / "__init__.py").write_text("")
    (root / "proj" / "spiders" / "one.py").write_text(SPIDER)
    (root / "proj" / "settings.py").write_text(textwrap.dedent("""\
        BOT_NAME = "proj"
        SPIDER_MODULES = ["proj.spiders"]
        ROBOTSTXT_OBEY = False
        TELNETCONSOLE_ENABLED = False
        ADDONS = {"scrapy_dedup.Addon": 0}
        """) + textwrap.dedent(extra))
    return root


def scrapy_crawl(root: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Exit status and everything printed (stdout and stderr) of ``scrapy crawl one``."""
    inherited = {name: value for name, value in os.environ.items() if name != "SCRAPY_DEDUP_DEBUG"}
    full = {**inherited, "PYTHONPATH": os.pathsep.join([str(root), str(ROOT)]), **(env or {})}
    done = subprocess.run([sys.executable, "-m", "scrapy", "crawl", "one", *args], cwd=root, env=full,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    return done.returncode, done.stdout.decode(errors="replace")


def runs_twisted_crawler_process(output: str) -> bool:
    """Whether ``scrapy crawl`` ran Twisted's ``CrawlerProcess``: always before Scrapy 2.14 (which logs no line
    for it), else when it says so. Twisted then prints its own "Unhandled error in Deferred" traceback of the
    failed start on stderr after our lines (documented in docs/reliability.md)."""
    return scrapy.version_info < (2, 14) or "Using CrawlerProcess" in output


def after_ours(output: str, ours: str) -> tuple[str, str]:
    """``output`` cut where our first line ``ours`` starts: (before, from it on)."""
    at = output.index(ours)
    return output[:at], output[at:]


def ours_alone(output: str) -> str:
    """``output`` less what Twisted's ``CrawlerProcess`` prints of the failed start after our lines (its traceback
    repeats the exception's message)."""
    if not runs_twisted_crawler_process(output):
        return output
    return output.split("Unhandled error in Deferred", 1)[0]


def before_tracebacks(output: str) -> str:
    """``output`` up to the first traceback: a refusal met once the engine has a slot (a Redis seen set opened by
    the scheduler) is followed by Scrapy's own cascade of the half-open engine's close (docs/reliability.md)."""
    return ours_alone(output).split("Traceback (most recent call last)", 1)[0]


SEVERAL_ERRORS = """\
    DEDUP_BLOOM_CAPACITY = -5
    DEDUP_CONTENT_ACTION = "zap"
    DEDUP_BLOOM_ERROR_RATE = 2
    DEDUP_CONTENT_ACTON = "drop"
    """
#: what each error's line names
NAMED = ("DEDUP_BLOOM_CAPACITY must be >= 1, got -5", "DEDUP_CONTENT_ACTION must be one of",
         "DEDUP_BLOOM_ERROR_RATE", "unknown setting DEDUP_CONTENT_ACTON; did you mean DEDUP_CONTENT_ACTION?")


@pytest.mark.crawl
def test_several_configuration_errors_are_named_at_once_without_a_traceback(tmp_path):
    code, output = scrapy_crawl(project(tmp_path, SEVERAL_ERRORS))
    assert code != 0, output[-3000:]
    assert "scrapy-dedup cannot start: 4 configuration errors:" in output, output[-3000:]
    before, _ = after_ours(output, "scrapy-dedup cannot start")
    assert "Traceback" not in (before if runs_twisted_crawler_process(output) else output), output[-3000:]
    for named in NAMED:
        lines = [line for line in ours_alone(output).splitlines() if named in line]
        assert len(lines) == 1, (named, output[-3000:])  # once, on its own line
    assert "Spider opened" not in output
    # SCRAPY_DEDUP_DEBUG=1 keeps the traceback, for a bug report
    code, output = scrapy_crawl(project(tmp_path / "debug", SEVERAL_ERRORS), env={"SCRAPY_DEDUP_DEBUG": "1"})
    assert code != 0 and "Traceback" in output and "DEDUP_CONTENT_ACTON" in output, output[-3000:]


@pytest.mark.crawl
def test_scrapys_twisted_crawler_process_exits_non_zero_and_names_every_error(tmp_path):
    """``CrawlerProcess`` (a non-asyncio reactor, or FORCE_CRAWLER_PROCESS): Twisted prints its own traceback of
    the failed start on stderr (not through logging), after our lines; every error is named once, and the status is
    non-zero."""
    code, output = scrapy_crawl(project(tmp_path, SEVERAL_ERRORS + "FORCE_CRAWLER_PROCESS = True\n"))
    assert code != 0, output[-3000:]
    assert runs_twisted_crawler_process(output), output[-3000:]
    before, ours = after_ours(output, "scrapy-dedup cannot start: 4 configuration errors:")
    assert output.count("scrapy-dedup cannot start") == 1, output[-3000:]
    assert "Traceback" not in before, output[-3000:]  # ours first, then Twisted's
    for named in NAMED:
        assert named in ours, (named, output[-3000:])


@pytest.mark.crawl
def test_a_refused_fingerprint_generation_exits_non_zero_without_a_traceback(tmp_path):
    with LocalSite({("127.0.0.1", "/"): Page("<html><body><p>one page</p></body></html>")}) as site:
        root = project(tmp_path, f"JOBDIR = {str(tmp_path / 'job')!r}\n")
        code, output = scrapy_crawl(root, "-a", f"start_url={site.url('127.0.0.1')}")
        assert code == 0, output[-3000:]
        code, output = scrapy_crawl(root, "-a", f"start_url={site.url('127.0.0.1')}",
                                    "-s", 'DEDUP_URL_POLICY={"strip_www": true}')
    assert code != 0, output[-3000:]  # (under Scrapy 2.13 it was 0: its CrawlerProcess saw a spider, so a started crawl)
    before, _ = after_ours(output, "written under another canonicalization")
    assert "Traceback" not in (before if runs_twisted_crawler_process(output) else output), output[-3000:]
    told = [line for line in ours_alone(output).splitlines() if "written under another canonicalization" in line]
    assert len(told) == 1 and "DEDUP_ACCEPT_NEW_GENERATION" in told[0], output[-3000:]  # once, naming the way out


class _Spider(scrapy.Spider):
    name = "plain_fingerprinter"

    def parse(self, response):
        yield from ()


@pytest.mark.crawl
@inlineCallbacks
def test_a_dupefilter_of_ours_without_our_fingerprinter_warns_naming_the_setting(caplog):
    caplog.set_level(logging.WARNING)
    with LocalSite({("127.0.0.1", "/"): Page("<p>x</p>")}) as site:
        yield run_crawl(_Spider, {"DUPEFILTER_CLASS": "scrapy_dedup.BloomDupeFilter"}, start_urls=[site.url("127.0.0.1")])
    warnings = [r.getMessage() for r in caplog.records
                if r.levelno == logging.WARNING and r.name == "scrapy_dedup.dupefilters"]
    assert len(warnings) == 1, warnings
    assert "REQUEST_FINGERPRINTER_CLASS is scrapy.utils.request.RequestFingerprinter" in warnings[0]
    caplog.clear()
    with LocalSite({("127.0.0.1", "/"): Page("<p>x</p>")}) as site:
        yield run_crawl(_Spider, {"DUPEFILTER_CLASS": "scrapy_dedup.BloomDupeFilter",
                                  "REQUEST_FINGERPRINTER_CLASS": "scrapy_dedup.CanonicalRequestFingerprinter"},
                        start_urls=[site.url("127.0.0.1")])
    assert not [r for r in caplog.records if "REQUEST_FINGERPRINTER_CLASS is" in r.getMessage()]


@pytest.mark.crawl
@pytest.mark.redis
def test_a_redis_seen_set_refused_at_start_exits_non_zero_without_the_password(tmp_path, redis_url, redis_client):
    """A Redis dupefilter opens inside the engine's start (after the spider exists): a refusal there ended with
    exit status 0 under Scrapy 2.13. Refused credentials, and a seen set another fingerprint generation wrote."""
    parts = urlsplit(redis_url)
    wrong = f"redis://nobody:not-the-password-{os.getpid()}@{parts.hostname}:{parts.port}/0"
    key = f"startup:{os.getpid()}"
    pages = {("127.0.0.1", "/"): Page("<html><body><p>a page</p><a href='/a'>a</a></body></html>"),
             ("127.0.0.1", "/a"): Page("<html><body><p>another</p></body></html>")}
    with LocalSite(pages) as site:  # (the start request is not in the seen set: the link's is)
        start = ("-a", f"start_url={site.url('127.0.0.1')}")
        redis = (f'DUPEFILTER_CLASS = "scrapy_dedup.RedisDupeFilter"\nDEDUP_REDIS_KEY = {key!r}\n')
        code, output = scrapy_crawl(project(tmp_path / "wrong", redis + f"DEDUP_REDIS_URL = {wrong!r}\n"), *start)
        assert code != 0, output[-3000:]
        assert "not-the-password" not in output, output[-3000:]
        assert len([line for line in before_tracebacks(output).splitlines() if "cannot use Redis" in line]) == 1, \
            output[-3000:]
        root = project(tmp_path / "generation", redis + f"DEDUP_REDIS_URL = {redis_url!r}\n")
        code, output = scrapy_crawl(root, *start)
        assert code == 0, output[-3000:]
        code, output = scrapy_crawl(root, *start, "-s", 'DEDUP_URL_POLICY={"strip_www": true}')
    redis_client.delete(key, f"{key}:generation")
    assert code != 0, output[-3000:]
    told = [line for line in before_tracebacks(output).splitlines() if "another canonicalization" in line]
    assert len(told) == 1, output[-3000:]
