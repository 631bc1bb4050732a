"""``DEDUP_REPRESENTATIVE`` on the example site: real crawls (run_demo.py: real site server, real Scrapy).

The URL layer is told to keep tracking and session parameters, so that every
``?utm_*``, ``;jsessionid=`` and ``?PHPSESSID=`` link is fetched and only the
content layer sees that it is the same page. Checked against the site's truth file
(which URL carries which variant), never against numbers scrapy_dedup computes.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import scrapy
from pytest_twisted import inlineCallbacks

from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite, Page
from tests.test_demo import portless, run_demo

pytestmark = pytest.mark.crawl

KEEP_PARAMETERS = ("-s", 'DEDUP_URL_POLICY={"strip_trailing_slash": true, "strip_tracking": false, '
                         '"strip_session": false}')
NOISE = {"tracking", "session"}


@pytest.fixture(scope="module")
def variants():
    from demosite import load

    return {p["url"]: set(p["variants"]) for p in load()["pages"]}


def noisy(url: str, variants: dict) -> bool:
    return bool(variants[portless(url)] & NOISE)


def clusters_of(tmp_path: Path) -> dict[str, tuple[set, str]]:
    """Cluster id -> (members, the representative named last), from the audit file (one line per duplicate)."""
    out: dict[str, tuple[set, str]] = {}
    for line in (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        members, _ = out.get(row["cluster"], ({row["cluster"]}, ""))
        members.add(row["url"])
        out[row["cluster"]] = (members, row["representative"])
    return out


def test_canonical_names_a_cluster_by_its_clean_url_whatever_came_first(tmp_path, variants):
    _, items, _ = run_demo(tmp_path, *KEEP_PARAMETERS, "-s", "DEDUP_CONTENT_ACTION=tag")
    clusters = clusters_of(tmp_path)
    first_noisy = 0
    for cluster, (members, representative) in clusters.items():
        assert representative in members
        if any(not noisy(url, variants) for url in members):
            assert not noisy(representative, variants), (cluster, representative)
            first_noisy += noisy(cluster, variants)
    assert first_noisy >= 5, first_noisy  # the case this is about: a tracking or session link fetched first
    # every tag names the representative the audit line of the same page names, beside the stable cluster id
    named = {}
    for line in (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        named.setdefault(row["url"], set()).add((row["cluster"], row["representative"]))
    tagged = [item for item in items if "dedup" in item]
    assert tagged
    for item in tagged:
        tag = item["dedup"]
        assert (tag["cluster"], tag["representative"]) in named[item["url"]], item["url"]


def test_first_keeps_the_first_arrival_as_the_representative(tmp_path, variants):
    _, _, _ = run_demo(tmp_path, *KEEP_PARAMETERS, "-s", "DEDUP_CONTENT_ACTION=tag", "-s",
                       "DEDUP_REPRESENTATIVE=first")
    clusters = clusters_of(tmp_path)
    assert clusters and all(rep == cluster for cluster, (_, rep) in clusters.items())
    assert sum(noisy(cluster, variants) for cluster in clusters) >= 5  # named by a noisy URL: today's behaviour


def test_in_drop_mode_the_policy_names_the_cluster_but_the_first_pages_item_stays(tmp_path, variants):
    # drop and canonical: the defaults
    proc, items, stats = run_demo(tmp_path, *KEEP_PARAMETERS, "-s", "DEDUP_DUPLICATE_LOG_LEVEL=INFO")
    stored = [item["url"] for item in items]
    assert len(stored) == stats["item_scraped_count"]
    assert len(stored) == stats["dedup/content/unique"] + stats["dedup/content/degenerate"] \
        + stats.get("dedup/items/refetch_kept", 0)
    clusters = clusters_of(tmp_path)
    renamed = [(cluster, rep) for cluster, (_, rep) in clusters.items() if rep != cluster]
    assert renamed
    for cluster, representative in renamed:
        assert cluster in stored  # the first page's item was kept ...
        assert representative not in stored  # ... and the representative's item was the one dropped
    # the log line of a dropped item says both: the page kept and the cluster's representative
    lines = [line for line in proc.stderr.splitlines() if "Dropped item of " in line]
    assert any(f"(of {cluster}, distance" in line and f"; representative {rep})" in line
               for line in lines for cluster, rep in renamed)


class DatedCopiesSpider(scrapy.Spider):
    """One page read once, given as four items at four URLs with their own dates (an archive's copies)."""

    name = "dated"
    copies = [("http://shop.test/p?v=1", "2024-01-01T00:00:00Z"), ("http://shop.test/p", "2024-02-01T00:00:00Z"),
              ("http://shop.test/p?v=3", "2024-06-01T00:00:00Z"), ("http://shop.test/p?v=4", "not a date")]

    def parse(self, response):
        for url, date in self.copies:
            yield {"url": url, "html": response.text, "archived_at": date}


@pytest.mark.parametrize("policy,expected", [("newest", "http://shop.test/p?v=3"), ("canonical", "http://shop.test/p"),
                                             ("first", "http://shop.test/p?v=1")])
@inlineCallbacks
def test_newest_reads_the_items_timestamp_field(policy, expected):
    from tests.contentsite import product_text

    html = f"<html><body><main><p>{product_text(1)}</p></main></body></html>"
    settings = {"ITEM_PIPELINES": {"scrapy_dedup.NearDuplicatePipeline": 300},
                "EXTENSIONS": {"scrapy_dedup.DedupExtension": 500}, "DEDUP_CONTENT_FIELD": "html",
                "DEDUP_CONTENT_ACTION": "tag", "DEDUP_REPRESENTATIVE": policy, "DEDUP_TIMESTAMP_FIELD": "archived_at"}
    with LocalSite({("shop.test", "/p"): Page(html)}) as site:
        crawler = yield run_crawl(DatedCopiesSpider, settings, start_urls=[f"http://shop.test:{site.port}/p"])
    tags = [item["dedup"] for item in crawler.items if "dedup" in item]
    assert len(crawler.items) == 4 and len(tags) == 3  # tag mode keeps every item; the first is not a duplicate
    assert {t["cluster"] for t in tags} == {"http://shop.test/p?v=1"}
    assert tags[-1]["representative"] == expected
    # the unreadable date is counted (newest only reads it), and that copy ranks after the dated ones
    assert crawler.stats.get_value("dedup/content/undated_items", 0) == (1 if policy == "newest" else 0)


@pytest.mark.parametrize("head,expected", [
    ('<link rel="canonical" href="/p/1">', "http://shop.test/p/1"),
    ('<link rel="Alternate CANONICAL" href=" https://shop.test/p/1 ">', "https://shop.test/p/1"),
    ('<link rel="canonical-ish" href="/x"><link rel="stylesheet" href="/s.css">', None),
    ("", None),
])
def test_the_declared_canonical_link_of_a_response(head, expected):
    from scrapy.http import HtmlResponse

    from scrapy_dedup.responses import declared_canonical

    body = f"<html><head><title>t</title>{head}</head><body><p>text</p></body></html>".encode()
    response = HtmlResponse("http://shop.test/p/1?utm_source=x", body=body)
    assert declared_canonical(response, 1 << 20) == expected
    assert declared_canonical(response, 10) is None  # over max_bytes: not parsed whole, declares nothing
