"""Offline, a page's text is the crawl's: the audit and the DUST miner extract as the crawl does.

Each page below is served at two URLs (``/a/N.htm`` and ``/a/N.html``) that differ
only in what the crawl's default extraction leaves out: the ``<nav>`` (a default
``DEDUP_STRIP_TAGS`` element) and the words after the first ``DEDUP_MAX_BYTES``
bytes. The crawl finds the two URLs exact duplicates; so must the audit, and the
miner must find the ``.htm`` ~ ``.html`` rule that says so.
"""
from __future__ import annotations

import json
import random

from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from scrapy_dedup.audit.config import AuditConfig
from scrapy_dedup.audit.mine_dust import mine_logs
from scrapy_dedup.audit.runner import audit_dump
from scrapy_dedup.content.params import BY_KEY
from scrapy_dedup.extensions import DedupExtension

PAGES = 4
MAX_BYTES = BY_KEY["max_bytes"].default


def _pages() -> list[tuple[str, str]]:
    rng = random.Random(3)
    vocabulary = [f"w{i}" for i in range(2000)]

    def some_words(n: int) -> str:
        return " ".join(rng.choice(vocabulary) for _ in range(n))

    filler = "<script>" + "x" * MAX_BYTES + "</script>"  # left out of the text; the cut falls inside it
    out = []
    for i in range(PAGES):
        main = some_words(200)
        for suffix in (".htm", ".html"):
            html = (f"<html><body><nav>{some_words(40)}</nav><p>{main}</p>{filler}"
                    f"<p>{some_words(60)}</p></body></html>")
            out.append((f"http://shop.test/a/{i}{suffix}", html))
    return out


def test_the_audit_and_the_miner_extract_as_the_crawl_does(tmp_path):
    pages = _pages()
    crawler = get_crawler(settings_dict={"EXTENSIONS": {"scrapy_dedup.DedupExtension": 500}})
    layer = crawler.get_extension(DedupExtension).open_content()
    kinds = [layer.verdict_for_response(HtmlResponse(url, body=html.encode(), encoding="utf-8")).kind
             for url, html in pages]
    layer.close()
    assert kinds == ["unique", "exact"] * PAGES  # the crawl: the nav and what lies past max_bytes do not count

    dump = tmp_path / "pages.jsonl"
    dump.write_text("".join(json.dumps({"url": url, "html": html}) + "\n" for url, html in pages))
    result, _, _ = audit_dump(str(dump), AuditConfig())
    assert (result.report.exact, result.report.unique) == (PAGES, PAGES)

    mined = mine_logs([str(dump)])
    assert [(r.kind, r.anchor, r.from_, r.to) for rules in mined.rules.hosts.values() for r in rules] == \
        [("substitute", "suffix", ".htm", ".html")]
