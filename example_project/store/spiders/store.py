"""The example spider: crawl the shop, its mirrors and the blog; one item per page."""
from __future__ import annotations

import os
import re

import scrapy
from scrapy.http import HtmlResponse

from store.items import PageItem

START_HOSTS = ("shop.test", "eu.shop.test", "blog.test")
_SPACES = re.compile(r"\s+")


class StoreSpider(scrapy.Spider):
    """Follow every link within the example site's hosts and yield a :class:`PageItem` per page.

    Arguments (``-a name=value``): ``port``, the port the example site listens on
    (default: the ``DEMO_SITE_PORT`` environment variable, else 8080); ``html=1`` to
    also store the page's HTML in the item (for ``DEDUP_CONTENT_FIELD = "html"``).
    The spider itself knows nothing about duplicates: scrapy-dedup, enabled in
    ``settings.py``, decides which requests are sent and which items are kept.
    """

    name = "store"
    # subdomains included: www.shop.test and eu.shop.test
    allowed_domains = ["shop.test", "blog.test"]

    def __init__(self, port: str | int | None = None, html: str = "0", *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.port = int(port or os.environ.get("DEMO_SITE_PORT") or 8080)
        self.include_html = str(html).lower() in ("1", "true", "yes")
        self.start_urls = [f"http://{host}:{self.port}/" for host in START_HOSTS]

    async def start(self):
        # Not Scrapy's default (dont_filter=True): the home pages are linked from the
        # site too, and should be fetched once, like any other page.
        for url in self.start_urls:
            yield scrapy.Request(url, callback=self.parse)

    def parse(self, response):
        if not isinstance(response, HtmlResponse):
            return
        main = response.xpath(
            "//main//text()[not(ancestor::form) and not(ancestor::script) and not(ancestor::style)]"
        ).getall()
        item = PageItem(
            url=response.url,
            title=_SPACES.sub(" ", response.css("title::text").get("")).strip(),
            main=_SPACES.sub(" ", " ".join(main)).strip(),
        )
        if self.include_html:
            item["html"] = response.text
        yield item
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, callback=self.parse)
