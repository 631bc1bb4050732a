"""``NearDuplicatePipeline``: drop, tag or only log items of pages already seen (``DEDUP_CONTENT_ACTION``).

The first page of a cluster is kept. The decision comes from the response and is applied
to its items by :mod:`scrapy_dedup.middlewares` as they leave the callback, when this
pipeline is enabled; with ``DEDUP_CONTENT_FIELD`` it comes from a field of the item, here.
``DEDUP_REPRESENTATIVE`` only names the cluster in tags and log lines, never changes
which item is kept. docs/usage.md ("How a response's decision reaches its items", "Which
URL names a cluster") has the modes, the tag's fields and why.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter

from scrapy_dedup.extensions import DedupExtension
from scrapy_dedup.duplicates import (  # noqa: F401 (re-exported: their former home)
    MIDDLEWARE_PATH,
    UNSETTABLE_FIELD,
    DuplicateAction,
    DuplicateItem,
    ExactDuplicateItem,
    NearDuplicateItem,
    ParagraphsField,
    duplicate_log_entry,
    middleware_enabled,
    pipeline_enabled,
)
from scrapy_dedup.settings import DedupConfigError, read_settings

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.spiders import Spider
    from typing_extensions import Self

    from scrapy_dedup.content.engine import Verdict

logger = logging.getLogger(__name__)

class NearDuplicatePipeline:
    """For ``ITEM_PIPELINES``: enabling it enables ``DEDUP_CONTENT_ACTION`` (see the module doc for where it is
    applied); items with ``DEDUP_CONTENT_FIELD`` carry their own content and are judged here."""

    def __init__(self, crawler: "Crawler"):
        cfg = read_settings(crawler.settings)
        self.content_field = cfg.content_field
        self.timestamp_field = cfg.timestamp_field if cfg.representative == "newest" else None
        if not self.content_field and not middleware_enabled(crawler):
            raise DedupConfigError(
                "NearDuplicatePipeline needs the responses' content fingerprints: add "
                f"SPIDER_MIDDLEWARES = {{'{MIDDLEWARE_PATH}': 950}} (or use ADDONS = "
                "{'scrapy_dedup.Addon': 0}), or set DEDUP_CONTENT_FIELD to an item field holding "
                "the page's HTML or text"
            )
        self.content = DedupExtension.of(crawler, "NearDuplicatePipeline").open_content()
        self.stats = crawler.stats
        self.decide = DuplicateAction(crawler, cfg)
        self.paragraphs_field = ParagraphsField.of(crawler, cfg)

    @classmethod
    def from_crawler(cls, crawler: "Crawler") -> "Self":
        return cls(crawler)

    def process_item(self, item: Any, spider: "Spider | None" = None) -> Any:
        if not self.content_field:  # decided by the middleware, next to the response
            return item
        return self.decide.apply(item, self._verdict_of_content_field(item))

    def _verdict_of_content_field(self, item: Any) -> "Verdict | None":
        adapter = ItemAdapter(item)
        value = adapter.get(self.content_field)
        if value is None:
            self.stats.inc_value("dedup/items/missing_content_field")
            return None
        timestamp = adapter.get(self.timestamp_field) if self.timestamp_field else None
        verdict, unique_text = self.content.judge_content(str(adapter.get("url") or ""), value, timestamp)
        if self.paragraphs_field is not None:
            self.paragraphs_field.fill(item, unique_text)
        return verdict
