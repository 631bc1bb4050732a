"""One log line per duplicate item, never the item itself (``LOG_FORMATTER``).

Scrapy's :class:`~scrapy.logformatter.LogFormatter` logs a dropped item whole: with
items that carry a page's HTML, logs of 50-130 MB. Here a duplicate is one line at
``DEDUP_DUPLICATE_LOG_LEVEL``. A project's own ``LOG_FORMATTER`` wins (the add-on sets
this one at add-on priority); where it overrides ``dropped``, our components call it for
duplicates too, else they log the one line themselves (docs/usage.md: "Which URL names a cluster").
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import DropItem
from scrapy.logformatter import LogFormatter

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.logformatter import LogFormatterResult
    from typing_extensions import Self

    from scrapy_dedup.content.engine import Verdict

#: the longest item text :meth:`DedupLogFormatter.scraped` logs (Scrapy logs every kept item at DEBUG)
SCRAPED_ITEM_CHARS = 1000
DUPLICATE_MSG = ("%(action)s item of %(kind)s duplicate %(url)s (of %(kept_url)s, distance %(distance)s"
                 "%(representative)s)")


def duplicate_log_entry(duplicate: Any, level: int | str, action: str = "Dropped") -> LogFormatterResult:
    """The log formatter result (``level``, ``msg``, ``args``) for an item of a duplicate page.

    ``duplicate`` is a :class:`~scrapy_dedup.pipelines.DuplicateItem` or a verdict
    (anything with ``kind``, ``url``, ``kept_url``, ``distance``, ``representative``); ``action`` is
    ``Dropped``, ``Tagged`` or ``Kept``. The cluster's representative is named when it is
    not the kept URL (``DEDUP_REPRESENTATIVE`` preferred another member).
    """
    representative = getattr(duplicate, "representative", None)
    note = f"; representative {representative}" if representative and representative != duplicate.kept_url else ""
    return {
        "level": getattr(logging, level) if isinstance(level, str) else level,
        "msg": DUPLICATE_MSG,
        "args": {"action": action, "kind": duplicate.kind, "url": duplicate.url, "kept_url": duplicate.kept_url,
                 "distance": duplicate.distance, "representative": note},
    }


def formatter_logs_duplicates_itself(formatter: Any) -> bool:
    """Whether a project's log formatter has its own ``dropped`` (then it is used for duplicates too)."""
    dropped = getattr(type(formatter), "dropped", None)
    return dropped is not None and dropped not in (LogFormatter.dropped, DedupLogFormatter.dropped)


class DuplicateItem(DropItem):
    """An item of a page whose content was already kept; logged as one line at ``DEDUP_DUPLICATE_LOG_LEVEL``."""

    log_level: str  # always given (DropItem's may be None)

    def __init__(self, verdict: "Verdict", log_level: str = "DEBUG"):
        self.kind, self.url, self.kept_url, self.distance = (verdict.kind, verdict.url, verdict.kept_url,
                                                             verdict.distance)
        self.representative = verdict.representative
        super().__init__(f"{verdict.kind} duplicate of {verdict.kept_url} (distance {verdict.distance}, "
                         f"page {verdict.url})", log_level=log_level)


class ExactDuplicateItem(DuplicateItem):
    """The page's main text is identical to a kept page's."""


class NearDuplicateItem(DuplicateItem):
    """The page's simhash is within DEDUP_HAMMING_THRESHOLD bits of a kept page's."""


class _Shortened:
    """An item whose log text is cut to ``SCRAPED_ITEM_CHARS`` (formatted only if the line is emitted)."""

    __slots__ = ("item",)

    def __init__(self, item: Any):
        self.item = item

    def __str__(self) -> str:
        text = str(self.item)
        if len(text) <= SCRAPED_ITEM_CHARS:
            return text
        return f"{text[:SCRAPED_ITEM_CHARS]}... ({len(text) - SCRAPED_ITEM_CHARS} more characters)"


class DedupLogFormatter(LogFormatter):
    """Scrapy's log formatter, with one line per duplicate item and kept items cut to 1,000 characters."""

    def __init__(self, level: str = "DEBUG"):
        super().__init__()
        self.duplicate_level = level

    @classmethod
    def from_crawler(cls, crawler: "Crawler") -> "Self":
        from scrapy_dedup.settings import read_settings

        return cls(read_settings(crawler.settings).duplicate_log_level)

    def dropped(self, item: Any, exception: BaseException, response: Any, spider: Any) -> Any:
        if isinstance(exception, DuplicateItem):
            return duplicate_log_entry(exception, self.duplicate_level)
        return super().dropped(item, exception, response, spider)

    def scraped(self, item: Any, response: Any, spider: Any) -> Any:
        entry = super().scraped(item, response, spider)
        args = entry.get("args") if isinstance(entry, dict) else None
        if isinstance(args, dict) and "item" in args:
            entry["args"] = {**args, "item": _Shortened(args["item"])}
        return entry
