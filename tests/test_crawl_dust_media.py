"""A raw file and the HTML page that renders it are two resources (real local site, real crawls).

A repository browser (cgit, Gitweb, Gitea, GitHub's ``/blob/`` and ``/raw/``) shows each file twice: an
HTML page rendering it (``/repo/tree/<file>``) and the raw file (``/repo/plain/<file>``, ``text/plain``).
Their texts are the same, so the content layer may call one a duplicate of the other (an item may go);
but a URL rule folding ``/plain/`` onto ``/tree/`` (or the reverse) would never fetch the other form of
any file, and a crawl that wants raw files (or rendered pages) loses them. The URL-level sameness asks
that the two pages be of one media kind (HTML, or another text), so learning never learns that rule.
"""
from __future__ import annotations

import pytest
import scrapy
from pytest_twisted import inlineCallbacks
from scrapy.http import HtmlResponse

from scrapy_dedup.content.engine import ContentDeduplicator
from scrapy_dedup.content.judge import PageJudge
from scrapy_dedup.content.pages import media_kind
from tests.contentsite import words
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite, Page

HOST = "git.test"
FILES = 30


def _text(n: int) -> str:
    return " ".join(words(8100 + n, 150))


def router(host: str, path_qs: str) -> Page | None:
    if path_qs == "/":
        links = "".join(f'<li><a href="/repo/tree/file{n}.md">file{n}.md</a></li>' for n in range(FILES))
        return Page(f"<html><head><title>repo</title></head><body><main><ul>{links}</ul></main></body></html>")
    for view in ("tree", "plain"):
        prefix = f"/repo/{view}/file"
        if path_qs.startswith(prefix) and path_qs.endswith(".md") and path_qs[len(prefix):-3].isdigit():
            n = int(path_qs[len(prefix):-3])
            if n >= FILES:
                return None
            if view == "plain":
                return Page(_text(n), content_type="text/plain; charset=utf-8")
            return Page(f"<html><head><title>file{n}.md</title></head><body><main><pre>{_text(n)}</pre></main>"
                        f'<nav><a href="/repo/plain/file{n}.md">plain</a> <a href="/">repo</a></nav></body></html>')
    return None


def every_url() -> set[str]:
    return {"/"} | {f"/repo/{view}/file{n}.md" for view in ("tree", "plain") for n in range(FILES)}


class RepoSpider(scrapy.Spider):
    name = "repo"

    def parse(self, response):
        yield {"url": response.url}
        if isinstance(response, HtmlResponse):
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href)


@pytest.mark.crawl
@inlineCallbacks
def test_learning_never_folds_raw_files_onto_the_html_pages_that_render_them():
    settings = {"ADDONS": {"scrapy_dedup.Addon": 0}, "CONCURRENT_REQUESTS": 1, "DEDUP_DUST_LEARN": True}
    with LocalSite(router) as site:
        crawler = yield run_crawl(RepoSpider, settings, start_urls=[site.url(HOST)])
        fetched = [path for _, path in site.fetched()]
    assert set(fetched) == every_url(), sorted(every_url() - set(fetched))
    assert len(fetched) == len(set(fetched))  # none twice
    assert not crawler.stats.get_value("dedup/dust/activated")  # no rule: every pair of views is a violation


def test_the_url_level_sameness_holds_only_between_pages_of_one_media_kind():
    judge = PageJudge(ContentDeduplicator.in_memory(), url_sameness=True)
    fp = judge.engine.fingerprint(_text(1))
    raw = judge.judge_text("http://git.test/repo/plain/file1.md", fp, media="text")
    assert raw.verdict.kind == "unique"
    page = judge.judge_text("http://git.test/repo/tree/file1.md", fp, media="html")
    assert page.verdict.kind == "exact"  # one text: an item-level duplicate
    assert page.page("url") == "http://git.test/repo/tree/file1.md" and not page.url_same  # another resource
    again = judge.judge_text("http://git.test/repo/tree/file1.md?id=2", fp, media="html")
    assert again.page("url") == page.page("url")  # the rendered page again: its own page at the URL strictness
    raw_again = judge.judge_text("http://git.test/repo/plain/file1.md?h=main", fp, media="text")
    assert raw_again.url_same and raw_again.page("url") == raw.page("url")
    untold = judge.judge_text("http://git.test/repo/file1.md", fp)  # media not told: as before, the kept page
    assert untold.url_same


def test_media_kind_reads_the_content_type_then_the_body():
    assert media_kind(b"text/html; charset=utf-8", b"x") == "html"
    assert media_kind(b"application/xhtml+xml", b"x") == "html"
    assert media_kind(b"text/plain", b"<html>") == "text"
    assert media_kind(None, b"  <!DOCTYPE html><html>") == "html"
    assert media_kind(b"", b"# A title") == "text"
