"""One "same page" for the crawl, the miner and the learner (real crawls of generated sites of real pages).

The crawl's clusters at the URL-level strictness (``content/judge.py``: a verdict's cluster, or the page's
own URL when the sameness does not hold on the whole texts) are what the crawl log tells ``mine-dust``
and what the online learner learns from. Whenever they put two URLs together, the miner and the learner
must too, and the reverse; and a page fetched under several URLs whose whole texts differ only in a
per-fetch line must be one page at that strictness, as it is one page for an item drop.

The sites: ``tests/dustgen.py`` (Debian documentation pages under DUST URL forms), with a per-fetch
greeting in every page's main text (words, which boilerplate learning's normal form does not map to one
placeholder): the case where a match of the texts less boilerplate used to be refused as URL evidence
although the whole texts are near duplicates by the engine's own rule.
"""
from __future__ import annotations

import json
from collections import defaultdict
from urllib.parse import urlsplit

import pytest
import scrapy
from pytest_twisted import inlineCallbacks

from scrapy_dedup.url.mining import DustMiner, same_page_evidence
from scrapy_dedup.dust_learning import DustLearningMiddleware
from scrapy_dedup.url.learner import OnlineDustLearner
from tests import dustgen
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite

ADDON = {"ADDONS": {"scrapy_dedup.Addon": 0}, "CONCURRENT_REQUESTS": 4, "LOG_LEVEL": "ERROR"}
#: two of the tuning seeds 0..19: sites with session path segments and no per-fetch number in the main text
SEEDS = (0, 4)


class SiteSpider(scrapy.Spider):
    name = "same-page"

    def parse(self, response):
        yield {"url": response.url}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)


def _path(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def url_level_pages(records: list[dict]) -> dict[str, str]:
    """URL -> the page it serves at the URL-level strictness, as the crawl log says (its pages, in order)."""
    kept_normal: dict[str, str] = {}
    out: dict[str, str] = {}
    for r in records:
        if r.get("kind") in ("redirect", "degenerate") or not r.get("cluster"):
            continue
        if r["kind"] == "unique" and "normal_hash" in r:
            kept_normal[r["cluster"]] = r["normal_hash"]
        if r.get("page"):  # the crawl's own page at the URL strictness
            out.setdefault(r["url"], r["page"])
            continue
        same = same_page_evidence(r["kind"], r.get("basis"), r.get("normal_hash"), kept_normal.get(r["cluster"]))
        out.setdefault(r["url"], r["cluster"] if same else r["url"])
    return out


def partition(page_of: dict[str, object]) -> set[frozenset[str]]:
    groups: dict[object, set[str]] = defaultdict(set)
    for url, page in page_of.items():
        groups[page].add(url)
    return {frozenset(g) for g in groups.values()}


def _crawl(site, settings):
    site.reset_log()
    with LocalSite(site.router) as local:
        crawler = yield run_crawl(SiteSpider, {**ADDON, **settings}, start_urls=[local.url(site.host)],
                                  allowed_domains=[site.host])
    return crawler


@pytest.mark.crawl
@pytest.mark.parametrize("seed", SEEDS)
@inlineCallbacks
def test_the_crawls_url_level_clusters_the_miner_and_the_learner_agree(seed, tmp_path, monkeypatch):
    dustgen.require_content()
    site = dustgen.generate(seed, docs=20, greeting_in_main=True)
    learners: list[DustLearningMiddleware] = []
    init = DustLearningMiddleware.__init__

    def keeping(self, crawler):
        init(self, crawler)
        learners.append(self)

    monkeypatch.setattr(DustLearningMiddleware, "__init__", keeping)
    # each rule deactivation: (the explored URL, the first URL fetched of the key it was folded onto)
    deactivations: list[tuple[str, str | None]] = []
    check_explored = OnlineDustLearner.check_explored

    def checking(self, url, *args, **kwargs):
        first = self.first_url.get(self.exploring.get(url))
        removed = check_explored(self, url, *args, **kwargs)
        deactivations.extend((url, first) for _ in removed)
        return removed

    monkeypatch.setattr(OnlineDustLearner, "check_explored", checking)

    # 1. A crawl without learning: its log, read by the miner as mine-dust reads it
    log = tmp_path / "crawl.jsonl"
    crawler = yield from _crawl(site, {"DEDUP_LOG_FILE": str(log)})
    records = [json.loads(line) for line in log.open()]
    assert crawler.stats.get_value("dedup/content/boilerplate/reduced", 0) > 0  # the template was learnt
    pages = url_level_pages(records)
    item_level = {r["url"]: r["cluster"] for r in records if r.get("cluster") and r["kind"] != "degenerate"}
    # the precondition: the content layer joined URLs whose whole texts differ (the greeting), on the texts
    # less boilerplate
    assert any(r.get("kind") == "near" for r in records)

    # a page that the item level joins under several URLs of one true page is one page at the URL level too
    for members in partition(item_level):
        by_truth: dict[str, set[str]] = defaultdict(set)
        for url in members:
            by_truth[site.truth(_path(url)).page].add(pages[url])
        split = {page: keys for page, keys in by_truth.items() if len(keys) > 1}
        assert not split, (seed, split)

    miner = DustMiner()
    for r in records:
        miner.add_record(r)
    host = urlsplit(records[0]["url"]).hostname
    ids = miner.hosts[host]
    mined = {url: miner._contents.representative(ids[_path(url)]) for url in pages}
    assert partition(mined) == partition(pages)  # the miner groups URLs as the crawl's URL-level clusters

    # 2. The same site with online learning: every page the learner met, named as the crawl's log names it
    log2 = tmp_path / "learn.jsonl"
    crawler = yield from _crawl(site, {"DEDUP_LOG_FILE": str(log2), "DEDUP_DUST_LEARN": True})
    learner = learners[-1].learner
    pages2 = url_level_pages([json.loads(line) for line in log2.open()])
    learned = {url: value[0] for url, value in learner.fetched.items() if url in pages2}
    assert learned and partition(learned) == partition({url: pages2[url] for url in learned})
    # no rule withdrawn for an explored URL that serves its key's page (whole texts alike). A rule withdrawn for
    # one that holds another page is learning working, and depends on the crawl order: "drop ?locale=" learnt
    # from ?locale=en pages before any ?locale=de page arrived is withdrawn by the first real translation.
    assert len(deactivations) == crawler.stats.get_value("dedup/dust/deactivated", 0)
    wrong = [(url, first) for url, first in deactivations
             if first is None or site.truth(_path(url)).page == site.truth(_path(first)).page]
    assert not wrong, (seed, wrong)
