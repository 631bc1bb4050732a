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
# the duplicate-item exceptions live beside their one log line; importable from here too
from scrapy_dedup.logformatter import DuplicateItem, ExactDuplicateItem, NearDuplicateItem, duplicate_log_entry  # noqa: F401
from scrapy_dedup.settings import DedupConfigError, load_setting_object, read_settings

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.spiders import Spider
    from typing_extensions import Self

    from scrapy_dedup.content.engine import Verdict
    from scrapy_dedup.settings import DedupSettings

logger = logging.getLogger(__name__)

#: what setting a field of an item may raise: KeyError (a scrapy.Item without it declared, a dataclass or
#: attrs class without it), TypeError (an unknown item type, an attrs validator), AttributeError (a frozen
#: dataclass or attrs class), ValueError (a pydantic model's validation). The item is passed on as it is.
UNSETTABLE_FIELD = (KeyError, TypeError, AttributeError, ValueError)

MIDDLEWARE_PATH = "scrapy_dedup.middlewares.ContentFingerprintMiddleware"


def pipeline_enabled(crawler: "Crawler") -> bool:
    """Whether ``NearDuplicatePipeline`` is in the crawl's ``ITEM_PIPELINES`` (the action is the pipeline's)."""
    return _component_enabled(crawler, "ITEM_PIPELINES", NearDuplicatePipeline)


def middleware_enabled(crawler: "Crawler") -> bool:
    """Whether ``ContentFingerprintMiddleware`` is in the crawl's ``SPIDER_MIDDLEWARES`` (it judges responses)."""
    return _component_enabled(crawler, "SPIDER_MIDDLEWARES", MIDDLEWARE_PATH)  # by its path: it imports this module


def _component_enabled(crawler: "Crawler", setting: str, component: type | str) -> bool:
    """Whether ``component`` (a class, or its dotted path) is enabled in ``setting``."""
    for path, order in crawler.settings.getwithbase(setting).items():
        if order is None:
            continue
        try:
            loaded = load_setting_object(path, setting)
            if loaded is component or f"{getattr(loaded, '__module__', '')}.{getattr(loaded, '__qualname__', '')}" \
                    == component:
                return True
        except DedupConfigError:  # a path of another component that does not load: Scrapy names it at start
            continue
    return False


class DuplicateAction:
    """``DEDUP_CONTENT_ACTION`` applied to one item with its page's verdict: one place for drop, tag, log.

    Used where the verdict and the item meet: by ``ContentFingerprintMiddleware``
    for items of fingerprinted responses (the verdict is the response's, so no
    identity of the item object is needed), by ``NearDuplicatePipeline`` for
    items that carry their own content (``DEDUP_CONTENT_FIELD``).
    """

    def __init__(self, crawler: "Crawler", cfg: "DedupSettings"):
        self.action = cfg.content_action
        self.tag_field = cfg.tag_field
        self.stats = crawler.stats
        self.log_level = cfg.duplicate_log_level
        self._level = getattr(logging, self.log_level)
        self._tag_warned = False

    def apply(self, item: Any, verdict: "Verdict | None") -> Any:
        """The item to pass on (tagged in ``tag`` mode); raises a :class:`DuplicateItem` in ``drop`` mode."""
        if verdict is None or verdict.kind not in ("exact", "near"):
            return item
        if verdict.is_refetch:
            # The same request fetched again (a dont_filter request, a page in flight when a
            # crawl was killed): whether the first fetch's item was stored is unknown, so
            # the item is kept rather than risk losing it. The page still counts as redundant.
            self.stats.inc_value("dedup/items/refetch_kept")
            return item
        self.stats.inc_value(f"dedup/items/{verdict.kind}_duplicates")
        if self.action == "drop":
            cls = ExactDuplicateItem if verdict.kind == "exact" else NearDuplicateItem
            raise cls(verdict, self.log_level)
        if self.action == "tag":
            self._tag(item, verdict)
        if logger.isEnabledFor(self._level):
            entry = duplicate_log_entry(verdict, self._level, "Tagged" if self.action == "tag" else "Kept")
            logger.log(entry["level"], entry["msg"], entry["args"])
        return item

    def _tag(self, item: Any, verdict: "Verdict") -> None:
        tag = {"kind": verdict.kind, "cluster": verdict.cluster, "kept_url": verdict.kept_url,
               "representative": verdict.representative, "distance": verdict.distance}
        try:
            ItemAdapter(item)[self.tag_field] = tag
        except UNSETTABLE_FIELD as exc:
            if not self._tag_warned:
                self._tag_warned = True
                logger.warning(
                    "Cannot tag items of class %s: field %r cannot be set (%s: %s; declare it, make the class "
                    "mutable, or set DEDUP_TAG_FIELD to a field it takes); items are kept untagged",
                    type(item).__name__, self.tag_field, type(exc).__name__, exc,
                )
            self.stats.inc_value("dedup/items/untaggable")


class ParagraphsField:
    """``DEDUP_PARAGRAPHS_FIELD``: an item's field set to its page's main text less repeated blocks.

    Set where the item meets its page's text (as :class:`DuplicateAction` is applied): by
    ``ContentFingerprintMiddleware`` for items of responses, by ``NearDuplicatePipeline`` with
    ``DEDUP_CONTENT_FIELD``. An item whose class cannot take the field is passed on as it is (counted).
    """

    def __init__(self, crawler: "Crawler", name: str):
        self.name = name
        self.stats = crawler.stats
        self._warned = False

    @classmethod
    def of(cls, crawler: "Crawler", cfg: "DedupSettings") -> "ParagraphsField | None":
        """The field of the crawl, or None when ``DEDUP_PARAGRAPHS_FIELD`` is unset."""
        return cls(crawler, cfg.paragraphs_field) if cfg.paragraphs_field else None

    def fill(self, item: Any, text: str | None) -> None:
        if text is None:  # paragraph dedup off for the page's host, or no main text
            return
        try:
            ItemAdapter(item)[self.name] = text
        except UNSETTABLE_FIELD as exc:
            if not self._warned:
                self._warned = True
                logger.warning("Cannot set DEDUP_PARAGRAPHS_FIELD %r on items of class %s (%s: %s; declare the "
                               "field, or make the class mutable); items are kept without it",
                               self.name, type(item).__name__, type(exc).__name__, exc)
            self.stats.inc_value("dedup/paragraphs/unfillable_items")


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
