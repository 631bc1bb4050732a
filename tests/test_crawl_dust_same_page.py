"""URL-level learning needs a stronger "same page" than an item drop (real local site, real crawls).

A blog lists its posts two at a time under two indexes: all posts (``/all/<n>``) and the posts of one tag
(``/tag/howto/<n>``, linked from the last page of all posts), each index a chain of pages linked by "next",
each with its own heading and blurb. Once boilerplate learning knows the blog's template (each index's
heading and blurb, "Page N of M"), a tag page and the page of all posts that shows the same two posts have
the same text less boilerplate: the content layer calls one a near duplicate of the other (its item may
go), where their whole texts (other headings and blurbs) are not alike. But they are two pages: each links
to the next page of its own index. A mined alias or rule that merged their URLs would skip the tag page's
fetch, and the tag page after it (linked from it only) would be lost.
"""
from __future__ import annotations

import json

import pytest
import scrapy
from pytest_twisted import inlineCallbacks

from scrapy_dedup.cli import mine_dust_main
from scrapy_dedup.content.boilerplate import BoilerplateJudge, BoilerplateLearner, BoilerplateRule
from scrapy_dedup.content.engine import ContentDeduplicator
from scrapy_dedup.url.mining import REDUCED_BASIS, DustMiner, normal_text_hash, same_page_evidence
from tests.contentsite import words
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite, Page

HOST = "blog.test"
POSTS = 20
PER_PAGE = 2
# the posts that carry the tag: its pages 1-4 show pairs no page of all posts shows, its pages 5 and 6 the
# posts of pages 9 and 10 of all posts
TAGGED = (1, 3, 5, 7, 9, 11, 13, 15, 16, 17, 18, 19)
ALL_PAGES = POSTS // PER_PAGE
TAG_PAGES = len(TAGGED) // PER_PAGE


def _post_words(i: int) -> list[str]:
    return words(4100 + i, 90)


def _page(main: str, links: list[str]) -> Page:
    nav = "".join(f'<a href="{href}">{label}</a> ' for label, href in links)
    return Page(f"<!DOCTYPE html><html><head><title>Example blog</title></head><body>"
                f"<main>{main}</main><nav>{nav}</nav></body></html>")


def _listing(index: str, heading: str, blurb: list[str], posts: list[int], n: int, pages: int) -> Page:
    """A page of an index: its heading and blurb (the same on every page of the index), then its posts'
    titles and teasers."""
    teasers = "".join(f"<h2>Post number {i}</h2><p>{' '.join(_post_words(i)[:30])}</p>" for i in posts)
    links = [(f"Post {i}", f"/post/{i}") for i in posts]
    if n < pages:
        links.append(("Next", f"/{index}/{n + 1}"))
    elif index == "all":  # the tag's index is linked from the last page of all posts only
        links.append(("Posts tagged howto", "/tag/howto/1"))
    return _page(f"<h1>{heading}</h1><p>{' '.join(blurb)}</p><p>Page {n} of {pages}</p>{teasers}", links)


def router(host: str, path_qs: str) -> Page | None:
    if path_qs == "/":
        return _page("<p>" + " ".join(words(4000, 40)) + "</p>", [("All posts", "/all/1")])
    parts = path_qs.strip("/").split("/")
    if len(parts) == 2 and parts[0] == "post" and parts[1].isdigit() and int(parts[1]) < POSTS:
        return _page("<p>" + " ".join(_post_words(int(parts[1]))) + "</p>", [("Home", "/")])
    if len(parts) == 2 and parts[0] == "all" and parts[1].isdigit() and 1 <= int(parts[1]) <= ALL_PAGES:
        n = int(parts[1])
        return _listing("all", "All posts of the blog", words(4200, 25), list(range((n - 1) * PER_PAGE, n * PER_PAGE)),
                        n, ALL_PAGES)
    if len(parts) == 3 and parts[:2] == ["tag", "howto"] and parts[2].isdigit() and 1 <= int(parts[2]) <= TAG_PAGES:
        n = int(parts[2])
        # under the same heading as the index of all posts (a heading of its own keeps the judge from merging
        # them: the precondition below wants a merge on the texts less boilerplate)
        return _listing("tag/howto", "All posts of the blog", words(4300, 25),
                        list(TAGGED[(n - 1) * PER_PAGE:][:PER_PAGE]), n, TAG_PAGES)
    return None


def every_page() -> set[str]:
    return ({"/"} | {f"/post/{i}" for i in range(POSTS)} | {f"/all/{n}" for n in range(1, ALL_PAGES + 1)}
            | {f"/tag/howto/{n}" for n in range(1, TAG_PAGES + 1)})


class BlogSpider(scrapy.Spider):
    name = "blog"

    def parse(self, response):
        yield {"url": response.url}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)


# one request at a time: the index of all posts is fetched (the blog's template learnt) before the tag pages
SETTINGS = {"ADDONS": {"scrapy_dedup.Addon": 0}, "CONCURRENT_REQUESTS": 1, "DEDUP_BOILERPLATE": True}


@pytest.mark.crawl
@inlineCallbacks
def test_a_listing_page_matched_only_less_boilerplate_is_not_merged_by_mined_rules(tmp_path):
    log = tmp_path / "crawl.jsonl"
    with LocalSite(router) as site:
        first = yield run_crawl(BlogSpider, {**SETTINGS, "DEDUP_LOG_FILE": str(log)}, start_urls=[site.url(HOST)])
        assert {path for _, path in site.fetched()} == every_page()
    records = {_path(r["url"]): r for r in map(json.loads, log.open())}
    # the precondition: boilerplate learning judged tag pages 5 and 6 near duplicates of pages 9 and 10 of all
    # posts (the content layer's verdict, which drops their items)
    near = {path: _path(r["cluster"]) for path, r in records.items() if r["kind"] == "near"}
    assert near == {"/tag/howto/5": "/all/9", "/tag/howto/6": "/all/10"}, near
    assert first.stats.get_value("dedup/content/boilerplate/reduced") > 0

    rules = tmp_path / "rules.json"
    assert mine_dust_main([str(log), "-o", str(rules)]) == 0
    with LocalSite(router) as site:
        yield run_crawl(BlogSpider, {**SETTINGS, "DEDUP_DUST_RULES": str(rules)}, start_urls=[site.url(HOST)])
        fetched = {path for _, path in site.fetched()}
    assert fetched == every_page(), (sorted(every_page() - fetched), rules.read_text())
    # the log says why those verdicts were no evidence: they rested on the texts less boilerplate
    assert {path for path, r in records.items() if r.get("basis") == "reduced"} == set(near)


def _path(url: str) -> str:
    return "/" + url.split("://", 1)[1].partition("/")[2]


def test_a_verdict_less_boilerplate_joins_two_urls_only_when_the_whole_texts_are_alike():
    """A crawl log's near verdict with ``"basis": "reduced"`` joins a URL to its kept page only when both whole
    texts have the same ``normal_hash`` (a re-fetch whose per-fetch line differs in its numbers); else the
    page is one of its own (a listing page of another index)."""
    miner = DustMiner()
    base = "http://blog.test"
    kept = normal_text_hash(["Posts tagged howto", "Page 5 of 6", "Post number 16"])
    assert kept == normal_text_hash(["Posts tagged howto", "Page 1 of 9", "Post number 3"])  # numbers only
    assert miner.add_record({"url": f"{base}/tag/howto/5", "kind": "unique", "cluster": f"{base}/tag/howto/5",
                             "normal_hash": kept})
    other_index = normal_text_hash(["All posts of the blog", "Page 9 of 10", "Post number 16"])
    assert miner.add_record({"url": f"{base}/all/9", "kind": "near", "cluster": f"{base}/tag/howto/5",
                             "basis": "reduced", "normal_hash": other_index})
    assert miner.add_record({"url": f"{base}/tag/howto/5?sid=1", "kind": "near", "cluster": f"{base}/tag/howto/5",
                             "basis": "reduced", "normal_hash": kept})
    assert miner.add_record({"url": f"{base}/tag/howto/5?ref=2", "kind": "near", "cluster": f"{base}/tag/howto/5"})
    urls = miner.hosts["blog.test"]
    assert urls["/tag/howto/5?sid=1"] == urls["/tag/howto/5?ref=2"] == urls["/tag/howto/5"]  # the same page
    assert urls["/all/9"] != urls["/tag/howto/5"]  # a page of its own
    assert miner.stats["reduced_verdicts"] == 1


def test_a_whole_text_matched_with_a_kept_pages_text_less_boilerplate_is_marked_reduced():
    """The judge's second check (the whole text against the store) may meet a kept page's entry of its text
    less boilerplate: the page of another index whose whole text is the posts the kept page shows less its
    template. That verdict rests on a reduction too (Judgement.reduced_match), so URL learning asks more."""
    judge = BoilerplateJudge(ContentDeduplicator.in_memory(), BoilerplateLearner(BoilerplateRule()))
    template = ["All posts of the blog", " ".join(words(4200, 25)), "Page 1 of 10"]
    for n in range(12):  # the host's template is learnt (its warm-up ends, its blocks become boilerplate)
        assert judge.check(f"http://blog.test/all/{n}", template + [" ".join(words(5000 + n, 60))]).verdict.kind \
            == "unique"
    posts = [" ".join(words(6000, 40)), " ".join(words(6001, 40))]
    kept = judge.check("http://blog.test/all/12", template + posts)
    assert kept.verdict.kind == "unique" and kept.reduction.state == "reduced"
    other = judge.check("http://blog.test/tag/howto/5", ["Posts tagged howto"] + posts)
    assert other.verdict.kind == "near" and other.verdict.kept_url == "http://blog.test/all/12"
    assert other.reduction.state == "whole" and other.reduced_match
    assert not same_page_evidence(other.verdict.kind, REDUCED_BASIS, normal_text_hash(["Posts tagged howto"] + posts),
                                  normal_text_hash(template + posts))
