"""The crawl-end duplication report, in the Scrapy log (one INFO block) and in stats under ``dedup/``."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals

from scrapy_dedup.content_layer import ContentLayer

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.spiders import Spider
    from typing_extensions import Self

logger = logging.getLogger(__name__)


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "0.0%"


class DuplicationReportExtension:
    """For ``EXTENSIONS``: log the duplication numbers of both layers when the spider closes."""

    def __init__(self, crawler: "Crawler"):
        self.crawler = crawler
        self.stats = crawler.stats
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: "Crawler") -> "Self":
        return cls(crawler)

    def url_lines(self) -> list[str]:
        get = self.stats.get_value
        filtered = get("dupefilter/filtered", 0)
        seen = get("dedup/seen/checked")
        if seen is None:  # a dupefilter other than ours: every scheduled request was checked once
            seen = get("scheduler/enqueued", 0) + filtered
        lines = [
            "URL layer:",
            f"  Requests seen:           {seen}",
            f"  Filtered as duplicates:  {filtered}  ({_pct(filtered, seen)})",
        ]
        stats = self.stats.get_stats()
        by_switch = sorted(
            (key.rsplit("/", 1)[-1], value) for key, value in stats.items()
            if key.startswith("dedup/url/filtered/")
        )
        if by_switch:
            lines.append("  Filtered after a switch changed the URL: "
                         + ", ".join(f"{name} {count}" for name, count in by_switch))
        lines.append(f"  URLs canonicalized:      {get('dedup/url/canonicalized', 0)}")
        lines.append(f"  Unparsable URLs:         {get('dedup/url/unparsable', 0)}")
        return lines

    def content_lines(self, layer: ContentLayer | None) -> list[str]:
        if layer is None:
            return ["Content layer: not enabled (add NearDuplicatePipeline / ContentFingerprintMiddleware)"]
        report = layer.engine.report()
        report_stats: dict[str, Any] = report.to_stats(prefix="dedup/content/")
        for key, value in report_stats.items():
            self.stats.set_value(key, value)
        lines = ["Content layer:"]
        lines += ["  " + line for line in report.to_text().splitlines()]
        if layer.counts.get("extraction_errors"):
            lines.append(f"  Extraction errors:     {layer.counts['extraction_errors']}")
        return lines

    def spider_closed(self, spider: "Spider", reason: str) -> None:
        layer = ContentLayer.existing(self.crawler)
        lines = ["scrapy-dedup duplication report", *self.url_lines(), *self.content_lines(layer)]
        logger.info("\n".join(lines), extra={"spider": spider})
