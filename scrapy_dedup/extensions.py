"""The crawl-end duplication report, in the Scrapy log (one INFO block) and in stats under ``dedup/``."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals

from scrapy_dedup.content_layer import ContentLayer
from scrapy_dedup.report import format_percent

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.spiders import Spider
    from typing_extensions import Self

logger = logging.getLogger(__name__)


def _pct(part: int, whole: int) -> str:
    return format_percent(part, whole)


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
        bucket = self._bucket_canary(layer)
        if bucket:
            lines.append(f"  WARNING: one index bucket holds {bucket} pages (template canary, see the log)")
        if layer.counts.get("extraction_errors"):
            lines.append(f"  Extraction errors:     {layer.counts['extraction_errors']}")
        return lines

    def _bucket_canary(self, layer: ContentLayer) -> int:
        """Size of an index bucket far above chance (0 if none): many pages share a fingerprint block.

        Random fingerprints spread evenly over the 2**(bits/bands) keys of a band; a
        bucket above DEDUP_CANARY_SIZE and 8 times the even share means many pages
        fingerprint alike: usually boilerplate (a template, a cookie wall) in the text.
        """
        index = getattr(layer.store, "index", None)
        largest = getattr(index, "largest_bucket", None)
        if largest is None:
            return 0
        cfg = layer.cfg
        size = largest()
        even_share = len(layer.store) / 2 ** (cfg.fingerprint_bits // cfg.bands)
        if size <= max(cfg.canary_size, 8 * even_share):
            return 0
        self.stats.set_value("dedup/content/largest_bucket", size)
        logger.warning(
            "One bucket of the content index holds %d pages (DEDUP_CANARY_SIZE %d): many kept pages "
            "share a fingerprint block, usually because their text is mostly boilerplate; check "
            "DEDUP_STRIP_SELECTORS for the site, or audit with DEDUP_CONTENT_ACTION='tag'",
            size, cfg.canary_size,
        )
        return size

    def spider_closed(self, spider: "Spider", reason: str) -> None:
        layer = ContentLayer.existing(self.crawler)
        lines = ["scrapy-dedup duplication report", *self.url_lines(), *self.content_lines(layer)]
        logger.info("\n".join(lines), extra={"spider": spider})
