"""Spider middleware: fingerprint each response once, before the spider parses it.

The decision (unique, exact or near duplicate, degenerate) is taken in
``process_spider_input``, so that ``DEDUP_DROP_DUPLICATE_RESPONSES`` can stop a
duplicate page before its callback runs (its links are then not followed
either). Every item the callback yields inherits the response's decision: the
pipeline reads it from the crawl's :class:`~scrapy_dedup.content_layer.ContentLayer`
without the item being modified.
"""
from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.exceptions import IgnoreRequest, NotConfigured

from scrapy_dedup.content_layer import ContentLayer

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.spiders import Spider
    from typing_extensions import Self

logger = logging.getLogger(__name__)


class DuplicateResponse(IgnoreRequest):
    """A response whose page was already seen, dropped before parsing (DEDUP_DROP_DUPLICATE_RESPONSES)."""


class ContentFingerprintMiddleware:
    """For ``SPIDER_MIDDLEWARES``: content fingerprints of responses, decided once per response."""

    def __init__(self, crawler: "Crawler"):
        self.layer = ContentLayer.for_crawler(crawler)
        cfg = self.layer.cfg
        if cfg.content_field:
            # Items carry their own content: the pipeline fingerprints them, responses are left alone.
            raise NotConfigured  # (no message: an intended state, not worth a warning)
        self.drop_duplicates = cfg.drop_duplicate_responses
        self.stats = crawler.stats

    @classmethod
    def from_crawler(cls, crawler: "Crawler") -> "Self":
        return cls(crawler)

    def process_spider_input(self, response: "Response", spider: "Spider | None" = None) -> None:
        verdict = self.layer.verdict_for_response(response)
        if self.drop_duplicates and verdict is not None and verdict.kind in ("exact", "near"):
            self.stats.inc_value(f"dedup/content/dropped_responses/{verdict.kind}")
            raise DuplicateResponse(
                f"{verdict.kind} duplicate of {verdict.kept_url} (distance {verdict.distance})"
            )

    async def process_spider_output(
        self, response: "Response", result: AsyncIterator[Any], spider: "Spider | None" = None
    ) -> AsyncIterator[Any]:
        verdict = self.layer.verdict_for_response(response)
        async for obj in result:
            if not isinstance(obj, Request):
                self.layer.remember_item(obj, verdict)
            yield obj

    def process_spider_exception(
        self, response: "Response", exception: Exception, spider: "Spider | None" = None
    ) -> Iterable[Any] | None:
        if isinstance(exception, DuplicateResponse):
            logger.debug("Ignoring duplicate response %s: %s", response, exception)
            return []
        return None
