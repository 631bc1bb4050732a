"""A crawl over a site of hostile responses: every item kept, the oddities counted, no ERROR, bounded memory.

The site serves a 50 MB page, an empty body, binary bodies as ``text/html``, wrong and
unknown charsets, invalid UTF-8, NUL bytes, markup nested 10,000 deep, and links Scrapy
accepts but no sane site has. The content layer must fingerprint what it can, skip and
count what it cannot, and never stop the crawl; the 50 MB page is fingerprinted on its
first ``DEDUP_MAX_BYTES`` bytes only (a page holding exactly those bytes is its exact
duplicate), and the crawl's peak memory stays far below what parsing 50 MB would cost.
"""
from __future__ import annotations

import logging
import random

import pytest
from pytest_twisted import inlineCallbacks

from tests import textgen
from tests.faultcrawl import FollowSpider
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite, Page
from tests.test_fault_resume import CrawlProcess

HOST = "127.0.0.1"
MAX_BYTES = 2_000_000  # DEDUP_MAX_BYTES's default
BIG = 50_000_000


def article(seed: int, words: int = 400) -> str:
    return " ".join(textgen.article_words(random.Random(seed), words))


def big_page() -> tuple[bytes, bytes]:
    """A 50 MB page and its first MAX_BYTES bytes (cut between two paragraphs, padded with spaces)."""
    head = b"<html><head><title>big</title></head><body><article>"
    paragraphs = [f"<p>{article(1000 + i)}</p>".encode() for i in range(20)]
    prefix = bytearray(head)
    i = 0
    while len(prefix) + len(paragraphs[i % 20]) < MAX_BYTES:
        prefix += paragraphs[i % 20]
        i += 1
    prefix += b" " * (MAX_BYTES - len(prefix))
    filler = f"<p>{article(99, 2000)}</p>".encode()
    tail = filler * ((BIG - len(prefix)) // len(filler))
    body = bytes(prefix) + tail + b"</article></body></html>"
    return body, bytes(prefix)


def hostile_pages() -> dict[str, Page]:
    big, prefix = big_page()
    rng = random.Random(5)
    deep = "<div>" * 10_000 + article(3) + "</div>" * 10_000
    return {
        "/big": Page(big),
        "/prefix": Page(prefix),
        "/empty": Page(b""),
        "/random-bytes": Page(rng.randbytes(100_000)),
        "/gif-as-html": Page(b"GIF89a\x01\x00\x01\x00\x80\x00\x00" + rng.randbytes(5000)),
        "/pdf-as-html": Page(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n" + rng.randbytes(5000)),
        "/declared-shift-jis-is-utf8": Page(f"<p>{article(4)} Grüße 東京</p>".encode(),
                                            content_type="text/html; charset=shift_jis"),
        "/unknown-charset": Page(f"<p>{article(5)}</p>".encode(), content_type="text/html; charset=x-klingon"),
        "/meta-charset-lies": Page(f'<meta charset="utf-16"><p>{article(6)}</p>'.encode()),
        "/invalid-utf8": Page(b"<p>" + article(7).encode() + b" \xff\xfe\xc3\x28 \xed\xa0\x80 end</p>"),
        "/nul-bytes": Page(b"<p>" + article(8).encode().replace(b" ", b" \x00") + b"</p>"),
        "/utf16-without-bom": Page(f"<p>{article(9)}</p>".encode("utf-16-le")),
        "/deep-10000": Page(f"<html><body><p>{article(10, 50)}</p>{deep}</body></html>".encode()),
        "/unclosed": Page(("<div><p><b><i><table><tr><td>" * 500 + article(11)).encode()),
    }


@pytest.fixture(scope="module")
def pages():
    return hostile_pages()


# Links Scrapy accepts (or refuses itself) that no sane site has; they lead to 404s.
ODD_LINKS = ["/%zz?\x01=\xff#frag", "/&#xD800;/x", "/..%2f..%2f", "http://[::1", "/" + "a" * 5000,
             "/\u00e4?\u00f6=\u00fc", "javascript:alert(1)", "/x\t\ny", "/?a=1&&&=&b", "/#\x00"]


def index(pages: dict[str, Page]) -> Page:
    links = [*pages, *ODD_LINKS]
    return Page("<html><body>" + "".join(f'<a href="{href}">{i}</a>' for i, href in enumerate(links)) + "</body></html>")


@pytest.mark.crawl
@inlineCallbacks
def test_hostile_site_every_item_kept_oddities_counted_no_error(pages, caplog):
    routes = {"/": index(pages), **pages}
    with LocalSite(lambda host, path: routes.get(path)) as site:
        with caplog.at_level(logging.INFO):
            crawler = yield run_crawl(FollowSpider, {"ADDONS": {"scrapy_dedup.Addon": 0}, "CONCURRENT_REQUESTS": 1,
                                                     "DOWNLOAD_WARNSIZE": 0},
                                      start_url=site.url(HOST, "/"), follow="index")
        fetched = {path for _, path in site.fetched()}
    stats = crawler.stats.get_stats()
    assert set(routes) <= fetched
    assert len(fetched) > len(routes)  # some odd links were fetched (404)
    kept = {item["url"].split(str(site.port), 1)[1] for item in crawler.items}
    # Every page's item is kept but one: of /big and /prefix, whichever came second is an exact duplicate.
    assert len(kept) == len(routes) - 1 and len({"/big", "/prefix"} & kept) == 1
    assert stats["dedup/content/exact"] == 1
    assert stats["dedup/content/truncated"] == 1
    # at least the random bytes and the GIF; NULs between words and UTF-16 without BOM look binary too
    assert stats["dedup/content/skipped_non_text"] >= 2
    assert stats.get("dedup/content/extraction_errors", 0) == 0
    assert not [k for k in stats if k.startswith("spider_exceptions")]
    assert stats.get("log_count/ERROR", 0) == 0
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


@pytest.mark.crawl
def test_a_50_mb_page_is_fingerprinted_in_bounded_memory(pages, tmp_path):
    """Peak memory (VmHWM) of crawls in their own processes: Scrapy alone, then with the add-on.

    Scrapy itself holds the 50 MB body, its download buffers and the spider's data; what
    the add-on adds on top is its fixed structures (the Bloom filter, about 40 MB at the
    default sizing, measured on a 1 KB page) and the work on the first DEDUP_MAX_BYTES of
    the body. Asserted: the add-on's extra peak on the 50 MB page exceeds its extra peak on
    the 1 KB page by less than 10 x DEDUP_MAX_BYTES (parsing all 50 MB would take several
    hundred MB).
    """
    routes = {"/big": pages["/big"], "/small": Page(f"<p>{article(1)}</p>")}
    peaks = {}
    with LocalSite(lambda host, path: routes.get(path)) as site:
        for page in ("small", "big"):
            for addon in (False, True):
                settings = {"DOWNLOAD_WARNSIZE": 0, "DEDUP_ENABLED": addon}
                run = CrawlProcess(tmp_path, f"{page}-{addon}", site.url(HOST, f"/{page}"), settings,
                                   spider_args={"follow": "none"})
                assert run.start().wait(timeout=120) == 0
                stats = run.stats()
                assert stats["finish_reason"] == "finished"
                assert stats.get("dedup/content/fingerprinted") == (1 if addon else None)
                peaks[page, addon] = stats["peak_rss_kb"] * 1024
    assert stats["dedup/content/truncated"] == 1
    extra_small = peaks["small", True] - peaks["small", False]
    extra_big = peaks["big", True] - peaks["big", False]
    print("peak RSS MB: " + ", ".join(f"{page} page {'with' if addon else 'without'} the add-on "
                                      f"{value / 1e6:.0f}" for (page, addon), value in peaks.items())
          + f"; the add-on adds {extra_small / 1e6:.0f} MB on the 1 KB page, {extra_big / 1e6:.0f} MB on the 50 MB page")
    assert extra_big - extra_small < 10 * MAX_BYTES


@pytest.mark.crawl
@pytest.mark.slow
def test_without_the_cap_the_50_mb_page_costs_far_more(pages, tmp_path):
    """The control of the test above: with DEDUP_MAX_BYTES above the page size the whole body is parsed."""
    routes = {"/big": pages["/big"]}
    peaks = {}
    with LocalSite(lambda host, path: routes.get(path)) as site:
        for max_bytes in (MAX_BYTES, 2 * BIG):
            run = CrawlProcess(tmp_path, f"big-{max_bytes}", site.url(HOST, "/big"),
                               {"DOWNLOAD_WARNSIZE": 0, "DEDUP_MAX_BYTES": max_bytes}, spider_args={"follow": "none"})
            assert run.start().wait(timeout=300) == 0
            peaks[max_bytes] = run.stats()["peak_rss_kb"] * 1024
    print(f"peak RSS of the 50 MB page: DEDUP_MAX_BYTES={MAX_BYTES} {peaks[MAX_BYTES] / 1e6:.0f} MB, "
          f"DEDUP_MAX_BYTES={2 * BIG} {peaks[2 * BIG] / 1e6:.0f} MB")
    assert peaks[2 * BIG] - peaks[MAX_BYTES] > 10 * MAX_BYTES
