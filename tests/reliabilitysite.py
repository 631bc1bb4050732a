"""A small linked site for the reliability tests (Redis faults, racing processes), and its spider.

``/`` is the entry page (a start request: ``dont_filter``, never linked to)
and links to every other page, so racing processes all try to claim every
page at once (or only to ``/p/0``, so that pages are discovered, and Redis
asked about new URLs, all through the crawl). ``/p/<i>`` are distinct pages; ``/near/<i>`` is ``/p/<i>``
with one word changed (a near duplicate); ``/copy/<i>`` (``copies`` of them, none by
default) is ``/p/<i>`` again, word for word (an exact duplicate). Every page also links to three
others, closing many cycles, so the same URL is met again and again: a
dupefilter that forgets fetches pages twice, one that fails closed loses them.

Counting the truth: every path but ``/`` should be fetched exactly once per
crawl (shared by all processes), and of each pair ``/p/<i>``, ``/near/<i>``
exactly one item kept.
"""
from __future__ import annotations

import time

import scrapy

from tests.contentsite import edited_text, product_text, template
from tests.support.localsite import Page


class LinkedSite:
    """Router for LocalSite (any host); ``delay`` seconds per response keeps a crawl running a while."""

    def __init__(self, pages: int = 40, near: int = 10, delay: float = 0.0, entry_links_all: bool = True,
                 copies: int = 0):
        assert near <= pages and copies <= pages
        self.copies = copies
        self.entry_links_all = entry_links_all
        self.pages = pages
        self.near = near
        self.delay = delay
        self.texts: dict[str, str] = {f"/p/{i}": product_text(i) for i in range(pages)}
        self.texts.update({f"/near/{i}": edited_text(i) for i in range(near)})
        self.texts.update({f"/copy/{i}": product_text(i) for i in range(copies)})

    @property
    def paths(self) -> list[str]:
        """Every path but the entry page: each must be fetched once, none lost."""
        return list(self.texts)

    def pairs(self) -> list[tuple[str, str]]:
        return [(f"/p/{i}", f"/near/{i}") for i in range(self.near)]

    def copy_pairs(self) -> list[tuple[str, str]]:
        return [(f"/p/{i}", f"/copy/{i}") for i in range(self.copies)]

    def _links(self, path: str) -> list[str]:
        if path == "/" and not self.entry_links_all:  # pages are discovered as the crawl goes
            return ["/p/0"]
        if path == "/":
            # interleaved, so the near copies are claimed while their originals are
            order: list[str] = []
            for i in range(self.pages):
                order.append(f"/p/{i}")
                if i < self.near:
                    order.append(f"/near/{i}")
                if i < self.copies:
                    order.append(f"/copy/{i}")
            return order
        i = int(path.rsplit("/", 1)[1])
        n = self.pages
        links = [f"/p/{(i + 1) % n}", f"/p/{(3 * i + 1) % n}", f"/p/{(i * 7 + 5) % n}"]
        if i < self.near:
            links.append(f"/near/{(i + 1) % self.near}")
        return links

    def __call__(self, host: str, path: str) -> Page | None:
        path = path.split("?")[0]
        if path != "/" and path not in self.texts:
            return None
        if self.delay:
            time.sleep(self.delay)
        links = " ".join(f'<a href="{href}">{href}</a>' for href in self._links(path))
        if path == "/":
            return Page(f"<html><body><h1>Index</h1>{links}</body></html>")
        # a copy and a near copy (an edit) keep their page's title, as the same page edited does; the
        # content judge does not merge two pages of one host whose titles name different pages
        body = template(self.texts[path], title=path.replace("/copy/", "/p/").replace("/near/", "/p/"))
        return Page(body.replace("</main>", f"</main><div class='links'>{links}</div>"))


class LinkedSpider(scrapy.Spider):
    """One item per page (its URL); follows every link. ``on_response(spider, response)`` hook for fault tests."""

    name = "linked"
    on_response = None

    def parse(self, response):
        if self.on_response is not None:
            self.on_response(self, response)
        if response.url.rstrip("/").count("/") > 2:  # not the entry page
            yield {"url": response.url, "path": "/" + response.url.split("/", 3)[3]}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)
