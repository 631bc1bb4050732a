"""Fingerprint generations: a JOBDIR or a Redis seen set resumed under another canonicalization is refused.

Real crawls against a local site, a real redis-server. The first crawl writes the store; the
second changes one input of the request fingerprints (the URL policy, the DUST rules, the
fingerprinter chain, or w3lib's version, simulated by editing the recorded generation) and
must stop before its first request with one line naming what changed, or, with
``DEDUP_ACCEPT_NEW_GENERATION``, record the new generation and crawl with a WARNING.
"""
from __future__ import annotations

import json
import logging
import signal
from pathlib import Path

import pytest
import scrapy
from pytest_twisted import inlineCallbacks

from scrapy_dedup.jobdir import GENERATION_FILE, JOURNAL_FILE
from scrapy_dedup.seen.journal import FrontierJournal
from scrapy_dedup.url.generation import Generation
from tests.faultcrawl import ResumeSite
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite, Page
from tests.test_fault_resume import HOST as RESUME_HOST
from tests.test_fault_resume import CrawlProcess, wait_for_hits

pytestmark = pytest.mark.crawl

HOST = "gen.test"
PAGES = 15
ADDON = {"ADDONS": {"scrapy_dedup.Addon": 0}}


def router(host: str, path: str) -> Page | None:
    if host != HOST:
        return None
    if path == "/":
        return Page("".join(f'<a href="/p/{n}?ref=home">p</a>' for n in range(PAGES)))
    if path.startswith("/p/"):
        return Page(f"<html><body><p>page {path}</p></body></html>")
    return None


class LinkSpider(scrapy.Spider):
    name = "generations"

    def parse(self, response):
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)


def rules_file(tmp_path: Path) -> str:
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"format": "scrapy-dedup-dust/1",
                                "hosts": {HOST: [{"kind": "drop_param", "param": "ref"}]}}))
    return str(path)


def old_w3lib(record: str | bytes) -> str:
    """The recorded generation as a crawl under another w3lib would have written it."""
    data = json.loads(record)
    data["w3lib"] = "2.1.0"
    return json.dumps(data)


#: change name -> (settings of the second crawl, what the refusal names); "w3lib" edits the record instead
CHANGES = {
    "url_policy": ({"DEDUP_URL_POLICY": {"strip_www": True}}, "the URL policies"),
    "dust_rules": ({"DEDUP_DUST_RULES": "<rules>"}, "the DUST rules"),
    "fingerprinter": ({"DEDUP_FALLBACK_REQUEST_FINGERPRINTER_CLASS":
                       "tests.support.fingerprinters.LanguageFingerprinter"}, "the fingerprinter chain"),
    "w3lib": ({}, "w3lib (its canonicalize_url) 2.1.0 -> "),
}


def changed_settings(change: str, tmp_path: Path) -> dict:
    settings = dict(CHANGES[change][0])
    if settings.get("DEDUP_DUST_RULES") == "<rules>":
        settings["DEDUP_DUST_RULES"] = rules_file(tmp_path)
    return settings


def fetched(site: LocalSite) -> int:
    return sum(site.hits.values())


@inlineCallbacks
def crawl_twice(site: LocalSite, settings: dict, second: dict, edit_record) -> tuple:
    """A first crawl, the record edited by ``edit_record``, then the second crawl: (its crawler or the exception
    it failed with, the hits of the second crawl)."""
    start = [site.url(HOST, "/")]
    first = yield run_crawl(LinkSpider, {**ADDON, **settings}, start_urls=start)
    assert first.stats.get_value("finish_reason") == "finished"
    edit_record()
    before = fetched(site)
    try:
        result = yield run_crawl(LinkSpider, {**ADDON, **settings, **second}, start_urls=start)
    except Exception as exc:  # the refused start
        result = exc
    return result, fetched(site) - before


def refusal_lines(caplog, where: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR and where in r.getMessage()
            and "DEDUP_ACCEPT_NEW_GENERATION" in r.getMessage()]


# --- JOBDIR ---

@pytest.mark.parametrize("change", list(CHANGES))
@inlineCallbacks
def test_a_jobdir_resumed_under_another_generation_is_refused_before_any_request(tmp_path, caplog, change):
    jobdir = tmp_path / "job"
    record = jobdir / GENERATION_FILE

    def edit():
        if change == "w3lib":
            record.write_text(old_w3lib(record.read_text()))

    with LocalSite(router) as site:
        result, hits = yield crawl_twice(site, {"JOBDIR": str(jobdir)}, changed_settings(change, tmp_path), edit)
    assert hits == 0, "the refused crawl fetched pages"
    assert not hasattr(result, "stats") or result.stats.get_value("downloader/request_count") is None
    lines = refusal_lines(caplog, f"JOBDIR {jobdir}")
    assert len(lines) == 1, [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert CHANGES[change][1] in lines[0]
    assert GENERATION_FILE not in lines[0]


@inlineCallbacks
def test_a_jobdir_resumed_unchanged_starts_and_a_new_generation_is_accepted_when_asked(tmp_path, caplog):
    jobdir = tmp_path / "job"
    with LocalSite(router) as site:
        result, hits = yield crawl_twice(site, {"JOBDIR": str(jobdir)}, {}, lambda: None)
        assert result.stats.get_value("finish_reason") == "finished" and hits == 1  # the start URL only
        recorded = Generation.from_json((jobdir / GENERATION_FILE).read_text())
        settings = {"JOBDIR": str(jobdir), "DEDUP_ACCEPT_NEW_GENERATION": True,
                    "DEDUP_URL_POLICY": {"strip_tracking": False}}
        crawler = yield run_crawl(LinkSpider, {**ADDON, **settings}, start_urls=[site.url(HOST, "/")])
    assert crawler.stats.get_value("finish_reason") == "finished"
    now = Generation.from_json((jobdir / GENERATION_FILE).read_text())
    assert recorded is not None and now is not None and now.url_policies != recorded.url_policies
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
                and "a new generation is recorded" in r.getMessage()]
    assert len(warnings) == 1 and "the URL policies" in warnings[0]


@inlineCallbacks
def test_a_jobdir_without_a_record_but_with_fingerprints_is_refused(tmp_path, caplog):
    """A JOBDIR an earlier version wrote (no record): what wrote its keys is unknown."""
    jobdir = tmp_path / "job"
    with LocalSite(router) as site:
        result, hits = yield crawl_twice(site, {"JOBDIR": str(jobdir)}, {},
                                         lambda: (jobdir / GENERATION_FILE).unlink())
    assert hits == 0
    lines = refusal_lines(caplog, f"JOBDIR {jobdir}")
    assert len(lines) == 1 and "no generation is recorded" in lines[0]


# --- Redis ---

@pytest.mark.parametrize("dupefilter", ["RedisDupeFilter", "RedisBloomDupeFilter"])
@pytest.mark.parametrize("change", list(CHANGES))
@inlineCallbacks
def test_a_redis_seen_set_resumed_under_another_generation_is_refused(tmp_path, caplog, redis_url, redis_client,
                                                                      dupefilter, change):
    key = "gen:seen"
    settings = {"DUPEFILTER_CLASS": f"scrapy_dedup.{dupefilter}", "DEDUP_REDIS_URL": redis_url,
                "DEDUP_REDIS_KEY": key, "DEDUP_BLOOM_CAPACITY": 10_000}

    def edit():
        if change == "w3lib":
            redis_client.set(f"{key}:generation", old_w3lib(redis_client.get(f"{key}:generation")))

    with LocalSite(router) as site:
        result, hits = yield crawl_twice(site, settings, changed_settings(change, tmp_path), edit)
    assert hits == 0, "the refused crawl fetched pages"
    lines = refusal_lines(caplog, f"Redis key {key!r}")
    assert len(lines) == 1, [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert CHANGES[change][1] in lines[0] and "is unavailable" not in lines[0]


@inlineCallbacks
def test_a_redis_seen_set_accepts_a_new_generation_when_asked_and_a_flush_starts_one(redis_url, redis_client):
    key = "gen:seen"
    settings = {"DUPEFILTER_CLASS": "scrapy_dedup.RedisDupeFilter", "DEDUP_REDIS_URL": redis_url,
                "DEDUP_REDIS_KEY": key}
    with LocalSite(router) as site:
        start = [site.url(HOST, "/")]
        yield run_crawl(LinkSpider, {**ADDON, **settings}, start_urls=start)
        first = Generation.from_json(redis_client.get(f"{key}:generation"))
        for extra in ({"DEDUP_ACCEPT_NEW_GENERATION": True, "DEDUP_URL_POLICY": {"strip_tracking": False}},
                      {"DEDUP_REDIS_FLUSH_ON_START": True, "DEDUP_URL_POLICY": {"sort_query": False}}):
            crawler = yield run_crawl(LinkSpider, {**ADDON, **settings, **extra}, start_urls=start)
            assert crawler.stats.get_value("finish_reason") == "finished"
            now = Generation.from_json(redis_client.get(f"{key}:generation"))
            assert now is not None and first is not None and now.url_policies != first.url_policies
            first = now


# --- a kill, then a change: the old journal entries are marked done ---

def test_after_a_kill_and_an_accepted_change_every_pending_request_is_readmitted_and_finished(tmp_path):
    design = ResumeSite()
    jobdir = tmp_path / "job"
    settings = {"JOBDIR": str(jobdir), "CONCURRENT_REQUESTS": 2}
    with LocalSite(design.route) as site:
        start = site.url(RESUME_HOST, "/")
        first = CrawlProcess(tmp_path, "first", start, settings).start()
        wait_for_hits(site, len(design.paths()) // 2, first)
        first.proc.send_signal(signal.SIGKILL)
        first.wait()
        pending = len(FrontierJournal(jobdir / JOURNAL_FILE).read().pending)
        assert pending > 0
        renames = [{"kind": "substitute", "anchor": "prefix", "from": old, "to": new}
                   for old, new in (("/list/", "/lists/"), ("/a/", "/art/"), ("/b/", "/bee/"))]
        rules = tmp_path / "renames.json"  # every page's canonical URL (so its fingerprint) changes, none merge
        rules.write_text(json.dumps({"format": "scrapy-dedup-dust/1", "hosts": {RESUME_HOST: renames}}))
        changed = {**settings, "DEDUP_ACCEPT_NEW_GENERATION": True, "DEDUP_DUST_RULES": str(rules)}
        second = CrawlProcess(tmp_path, "second", start, changed).start()
        assert second.wait(timeout=120) == 0, second.log_text()[-3000:]
    stats = second.stats()
    assert stats["finish_reason"] == "finished"
    assert stats["dedup/jobdir/readmitted"] == pending
    assert FrontierJournal(jobdir / JOURNAL_FILE).read().pending == {}
    assert {path for (_, path) in site.hits} == set(design.paths())
