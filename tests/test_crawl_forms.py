"""Real crawls of pages whose text is inside a <form>: an ASP.NET WebForms site (the whole body in one form)
and wiki history lists (a list in a form). Each page is judged by its text: distinct pages all keep their
item, a copy of one under another URL is dropped."""
from __future__ import annotations

import logging
import random

import pytest
import scrapy
from pytest_twisted import inlineCallbacks

from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite, Page

pytestmark = pytest.mark.crawl

ADDON = {"ADDONS": {"scrapy_dedup.Addon": 0}}  # defaults: duplicates' items dropped
VOCAB = ("river bridge lantern orchard harbor meadow copper violin glacier canyon pepper saddle thunder "
         "marble compass falcon garden ladder mirror puzzle quartz rocket signal timber velvet walnut anchor "
         "biscuit candle dolphin engine feather goblin hammer island jacket kettle lemon magnet needle").split()
# the site's chrome outside the forms: the same on every page (more than min_words words)
CHROME = ('<div class="masthead">Example Intranet portal for the whole company: news, documents, people '
          "directory, travel requests and the service desk, all in one place for every employee</div>"
          '<div class="foot">Example Corporation internal site, maintained by the web team; report problems '
          "to the service desk at any time of day or night</div>")
SEARCH = '<div class="search"><input name="q" type="text"><input type="submit" value="Search"></div>'


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(n))


def webforms_page(n: int) -> str:
    rng = random.Random(f"article-{n}")
    paragraphs = "".join(f"<p>{_words(rng, 40)}.</p>" for _ in range(3))
    return (f"<html><head><title>Article {n}</title></head><body>{CHROME}"
            f'<form method="post" action="./article.aspx?id={n}" id="aspnetForm">'
            f'<input type="hidden" name="__VIEWSTATE" value="{rng.getrandbits(64):x}">{SEARCH}'
            f'<div id="content"><h1>Article {n}</h1>{paragraphs}</div></form></body></html>')


def history_page(n: int) -> str:
    rng = random.Random(f"history-{n}")
    rows = "".join(f"<li>{rng.randint(1, 28)} March 2026 {rng.choice(['Alice', 'Bob', 'Chen', 'Dana'])} "
                   f"({_words(rng, 6)})</li>" for _ in range(8))
    return (f"<html><head><title>Page {n}: history</title></head><body>{CHROME}"
            f'<form action="/index.php" id="searchform">{SEARCH}</form>'
            f'<form action="/index.php" id="mw-history-compare"><input type="submit" value="Compare revisions">'
            f'<ul id="pagehistory">{rows}</ul></form></body></html>')


class PageSpider(scrapy.Spider):
    name = "pages"

    def parse(self, response):
        yield {"url": response.url}


def router(host: str, path: str) -> Page | None:
    if path.startswith("/article/"):  # /article/N, and /article/N?utm_source=x: the same page again
        return Page(webforms_page(int(path.split("/")[2].split("?")[0])))
    if path.startswith("/history/"):
        return Page(history_page(int(path.split("/")[2])))
    if path.startswith("/empty/"):  # a page with nothing but the site's chrome (its own text left out)
        return Page(f"<html><head><title>Empty {path.split('/')[2]}</title></head><body>{CHROME}"
                    f"<form>{SEARCH}</form></body></html>")
    return None


@inlineCallbacks
def test_pages_inside_forms_are_judged_by_their_text(caplog):
    caplog.set_level(logging.INFO)
    articles, histories = range(12), range(12)
    with LocalSite(router) as site:
        urls = ([site.url("forms.test", f"/article/{n}") for n in articles]
                + [site.url("forms.test", f"/history/{n}") for n in histories]
                + [site.url("forms.test", f"/article/{n}?utm_source=mail") for n in (3, 7)]
                + [site.url("forms.test", f"/empty/{n}") for n in range(3)])
        crawler = yield run_crawl(PageSpider, {**ADDON, "CONCURRENT_REQUESTS": 1}, start_urls=urls)
    kept = {item["url"].split(":", 2)[2].split("/", 1)[1] for item in crawler.items}
    assert {f"article/{n}" for n in articles} <= kept  # every WebForms page keeps its item
    assert {f"history/{n}" for n in histories} <= kept  # every history list too
    assert not {f"article/{n}?utm_source=mail" for n in (3, 7)} & kept  # its copies are duplicates
    stats = crawler.stats.get_stats()
    assert stats["dedup/content/exact"] == 2
    # pages of nothing but the host's template (past its warm-up) cannot be judged: kept, counted, named
    assert {f"empty/{n}" for n in range(3)} <= kept
    assert stats["dedup/content/undecidable"] == 3
    assert sum("Undecidable page kept" in r.getMessage() for r in caplog.records) == 3
    report = [r.getMessage() for r in caplog.records if "Undecidable pages:" in r.getMessage()]
    assert len(report) == 1 and all(f"/empty/{n}" in report[0] for n in range(3))  # the crawl-end report
