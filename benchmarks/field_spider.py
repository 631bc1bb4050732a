"""The field benchmark's spider (run by ``bench_field.py`` as ``scrapy runspider``): follows every same-host
link (``<a href>``) up to ``DEPTH_LIMIT``, yields one item per HTML response (its URL and its text), and
records every response it receives (URL, status, content type, the body compressed) for the ground truth.

Settings come from the environment variable ``FIELD_SETTINGS`` (JSON), at spider priority.
"""
from __future__ import annotations

import base64
import json
import os
import zlib
from urllib.parse import urlsplit

import scrapy
from scrapy import signals


class FieldSpider(scrapy.Spider):
    name = "field"

    @classmethod
    def update_settings(cls, settings):
        super().update_settings(settings)
        settings.setdict(json.loads(os.environ.get("FIELD_SETTINGS", "{}")), priority="spider")

    def __init__(self, start: str = "", record: str = "", stats: str = "", **kw):
        super().__init__(**kw)
        self.start_urls = [start]
        self.allowed_domains = [urlsplit(start).hostname or ""]
        self.record = open(record, "w", encoding="utf-8")  # noqa: SIM115 - closed when the spider closes
        self.stats_path = stats

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.response_received, signals.response_received)
        return spider

    def response_received(self, response, request, spider):
        if response.url.startswith("data:"):  # the add-on's item keeper sending held items on: no fetch
            return
        ctype = response.headers.get(b"Content-Type", b"").decode("latin-1").lower()
        self.record.write(json.dumps({
            "url": response.url, "status": response.status, "ctype": ctype,
            "location": response.headers.get(b"Location", b"").decode("latin-1"),
            "body": base64.b64encode(zlib.compress(response.body, 1)).decode("ascii"),
        }) + "\n")

    def parse(self, response):
        if not isinstance(response, scrapy.http.HtmlResponse):
            return
        yield {"url": response.url, "text": " ".join(" ".join(response.xpath("//body//text()").getall()).split())}
        for href in response.xpath("//a/@href").getall():
            if not href.startswith(("javascript:", "mailto:", "#")):
                yield response.follow(href)

    def closed(self, reason):
        self.record.close()
        if self.stats_path:
            with open(self.stats_path, "w", encoding="utf-8") as f:
                json.dump({k: v for k, v in self.crawler.stats.get_stats().items()
                           if isinstance(v, (int, float, str))}, f)
