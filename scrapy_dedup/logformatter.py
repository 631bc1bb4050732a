"""One log line per duplicate item, never the item itself (``LOG_FORMATTER``).

Scrapy's :class:`~scrapy.logformatter.LogFormatter` logs a dropped item whole: with
items that carry a page's HTML, logs of 50-130 MB. Here a duplicate is one line at
``DEDUP_DUPLICATE_LOG_LEVEL``. A project's own ``LOG_FORMATTER`` wins (the add-on sets
this one at add-on priority); where it overrides ``dropped``, our components call it for
duplicates too, else they log the one line themselves (docs/usage.md: "Which URL names a cluster").
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.logformatter import LogFormatter

# the one line of a duplicate item and its exceptions, shared with the middleware and the pipeline
from scrapy_dedup.duplicates import (  # noqa: F401 (re-exported: their former home)
    DUPLICATE_MSG,
    DuplicateItem,
    ExactDuplicateItem,
    NearDuplicateItem,
    duplicate_log_entry,
)

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self

#: the longest item text :meth:`DedupLogFormatter.scraped` logs (Scrapy logs every kept item at DEBUG)
SCRAPED_ITEM_CHARS = 1000

def formatter_logs_duplicates_itself(formatter: Any) -> bool:
    """Whether a project's log formatter has its own ``dropped`` (then it is used for duplicates too)."""
    dropped = getattr(type(formatter), "dropped", None)
    return dropped is not None and dropped not in (LogFormatter.dropped, DedupLogFormatter.dropped)


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
