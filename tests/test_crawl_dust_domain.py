"""A learned rule right on one part of its domain and wrong on another is found out (real local site, real crawls).

A repository browser (cgit) serves every file and every directory at any commit: ``/repo/tree/<path>?id=<commit>``.
A file that did not change between two commits is the same page at both, so the files' history links teach
``drop ?id=``; a directory listing is another page at each commit (the files it held then, the commit's
message). A learning crawl meets the files' history first (parked, then fetched as the rule's evidence), learns
the rule, and folds the directory listings of older commits onto the newest one. Its evidence was of files only,
and the share of its folded URLs it explores was taken by that evidence, so before the exploration checked what a
rule folds by shape (a directory, a file) no listing was ever fetched again: the cgit field run missed up to 15
trees of older commits Scrapy fetched. Now the first directory it folds is explored, holds another page, the rule
is withdrawn and what it dropped is fetched: every listing, none twice, no more fetches than the add-on's.
"""
from __future__ import annotations

import hashlib

import pytest
from pytest_twisted import inlineCallbacks

from tests.contentsite import words
from tests.support.crawl import LinkSpider, run_crawl
from tests.support.localsite import LocalSite, Page

HOST = "git.test"
FILES = 12
DIRS = 3
COMMITS = [hashlib.sha1(f"commit {n}".encode()).hexdigest() for n in range(6)]  # the newest last
HISTORY = 3  # each file links itself at the three newest commits but the last


def _page(title: str, body: str, links: list[str]) -> Page:
    nav = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    return Page(f"<html><head><title>{title}</title></head><body><main><p>{body}</p></main>"
                f"<nav><ul>{nav}</ul></nav></body></html>")


def router(host: str, path_qs: str) -> Page | None:
    path, _, query = path_qs.partition("?")
    commit = query[len("id="):] if query.startswith("id=") else COMMITS[-1]
    if (query and not query.startswith("id=")) or commit not in COMMITS:
        return None
    if path == "/":  # the files first (the crawl is breadth-first: the files' history before the listings')
        return _page("repo", "a repository", [f"/repo/tree/file{n}.md" for n in range(FILES)]
                     + [f"/repo/tree/d{d}/" for d in range(DIRS)])
    for d in range(DIRS):
        if path == f"/repo/tree/d{d}/":  # a listing: another page at every commit
            k = COMMITS.index(commit)
            body = " ".join(words(7300 + 10 * d + k, 160))
            older = [f"/repo/tree/d{d}/?id={c}" for c in COMMITS[:-1]]
            return _page(f"d{d}", body, older if not query else [])
    for n in range(FILES):
        if path == f"/repo/tree/file{n}.md":  # a file unchanged at every commit: one page
            history = [f"/repo/tree/file{n}.md?id={c}" for c in COMMITS[-1 - HISTORY:-1]]
            return _page(f"file{n}.md", " ".join(words(7100 + n, 160)), history if not query else [])
    return None


def every_url() -> set[str]:
    return ({"/"} | {f"/repo/tree/d{d}/" for d in range(DIRS)} | {f"/repo/tree/file{n}.md" for n in range(FILES)}
            | {f"/repo/tree/d{d}/?id={c}" for d in range(DIRS) for c in COMMITS[:-1]}
            | {f"/repo/tree/file{n}.md?id={c}" for n in range(FILES) for c in COMMITS[-1 - HISTORY:-1]})


def listings() -> set[str]:
    """The directory listings of older commits: distinct pages a wrong ``drop ?id=`` folds."""
    return {f"/repo/tree/d{d}/?id={c}" for d in range(DIRS) for c in COMMITS[:-1]}


@pytest.mark.crawl
@inlineCallbacks
def test_a_learned_rule_wrong_on_directories_is_found_out_on_the_first_one_it_folds():
    # Breadth-first, one request at a time: the same order under every Scrapy version (2.13 fetches a page's
    # first link before it queues the others, so a LIFO crawl's order depended on timing there).
    addon = {"ADDONS": {"scrapy_dedup.Addon": 0}, "CONCURRENT_REQUESTS": 1, "DEPTH_PRIORITY": 1,
             "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
             "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue"}
    with LocalSite(router) as site:
        yield run_crawl(LinkSpider, addon, start_urls=[site.url(HOST)])
        addon_fetched = [path for _, path in site.fetched()]
    assert set(addon_fetched) == every_url()  # the add-on alone fetches every URL (each its own key)

    with LocalSite(router) as site:
        crawler = yield run_crawl(LinkSpider, {**addon, "DEDUP_DUST_LEARN": True}, start_urls=[site.url(HOST)])
        fetched = [path for _, path in site.fetched()]
    stats = crawler.stats
    assert stats.get_value("dedup/dust/activated"), "the files' history teaches a rule of ?id="
    assert listings() <= set(fetched), sorted(listings() - set(fetched))  # every listing of an older commit
    assert stats.get_value("dedup/dust/deactivated") >= 1  # found out on a directory it folded
    assert len(fetched) == len(set(fetched))  # no URL twice
    assert len(fetched) <= len(addon_fetched)  # learning never fetches more than the add-on
