"""What the Scrapy adapters share about a duplicate: one module, so that none imports another sideways.

``ContentFingerprintMiddleware`` (``middlewares.py``), ``NearDuplicatePipeline`` (``pipelines.py``),
``DedupLogFormatter`` (``logformatter.py``), ``DustLearningMiddleware`` (``dust_learning.py``) and the
JOBDIR frontier (``jobdir.py``) meet here:

* the verdict types (the engine's :class:`~scrapy_dedup.content.engine.Verdict`, the judge's
  :class:`~scrapy_dedup.content.judge.PageVerdict`);
* the duplicate-item exceptions and the one log line of a duplicate item (:func:`duplicate_log_entry`);
* :class:`DuplicateAction` (``DEDUP_CONTENT_ACTION`` applied to an item) and :class:`ParagraphsField`,
  applied by the middleware to items of responses and by the pipeline to items with their own content;
* whether the middleware or the pipeline is enabled (by their paths);
* every request meta key the components set (``dedup_*``).

The former homes (``logformatter.py``, ``pipelines.py``, ``middlewares.py``, ``dust_learning.py``,
``jobdir.py``) re-export what moved here.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy.exceptions import DropItem

from scrapy_dedup.content.engine import Verdict
from scrapy_dedup.content.judge import PageVerdict
from scrapy_dedup.settings import DedupConfigError, load_setting_object

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.logformatter import LogFormatterResult

    from scrapy_dedup.settings import DedupSettings

__all__ = ["Verdict", "PageVerdict", "DUPLICATE_MSG", "duplicate_log_entry", "DuplicateItem", "ExactDuplicateItem",
           "NearDuplicateItem", "DuplicateAction", "ParagraphsField", "UNSETTABLE_FIELD", "MIDDLEWARE_PATH",
           "PIPELINE_PATH", "pipeline_enabled", "middleware_enabled", "RELEASE_META", "ALIAS_META",
           "SAME_KEY_REDIRECT_META", "RESENT_META", "REWRITTEN_META", "DEFERRED_META", "DUST_KEY_META",
           "UNJOURNALED_META", "FRONTIER_SEQ_META"]

logger = logging.getLogger("scrapy_dedup.pipelines")  # the logger the action's lines were always written under

# --- request meta keys ---

#: request meta key of a request that sends held items on (the id of their cluster)
RELEASE_META = "dedup_release"
#: request meta key of a request sent to its alias target (the URL it was for)
ALIAS_META = "dedup_dust_alias_of"
#: request meta key of a request whose redirect stays within its canonical key (``dont_filter`` set here)
SAME_KEY_REDIRECT_META = "dedup_same_key_redirect"
#: request meta key of a request sent again after the rule that dropped it was deactivated
RESENT_META = "dedup_dust_resent"
#: request meta key of a request sent to the URL a learned redirect rule gives it (the URL it was for)
REWRITTEN_META = "dedup_dust_rewritten_from"
#: request meta key of a request that was deferred (another form of a URL already met), then released
DEFERRED_META = "dedup_dust_deferred"
#: request meta key of the URL key DUST learning gave a request before its download (popped with its response)
DUST_KEY_META = "dedup_dust_key"
#: request meta key of a request the crawl makes for itself that fetches no page (held items sent on by
#: ``ContentFingerprintMiddleware``): not journaled (its callback is no spider method: it could not be)
UNJOURNALED_META = "dedup_unjournaled"
#: request meta key of a journaled request (JOBDIR): its sequence number in the frontier journal
FRONTIER_SEQ_META = "dedup_frontier_seq"


# --- the one line of a duplicate item, and its exceptions ---

DUPLICATE_MSG = ("%(action)s item of %(kind)s duplicate %(url)s (of %(kept_url)s, distance %(distance)s"
                 "%(representative)s)")


def duplicate_log_entry(duplicate: Any, level: int | str, action: str = "Dropped") -> LogFormatterResult:
    """The log formatter result (``level``, ``msg``, ``args``) for an item of a duplicate page.

    ``duplicate`` is a :class:`DuplicateItem` or a verdict
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


# --- the verdict applied to an item ---

#: what setting a field of an item may raise: KeyError (a scrapy.Item without it declared, a dataclass or
#: attrs class without it), TypeError (an unknown item type, an attrs validator), AttributeError (a frozen
#: dataclass or attrs class), ValueError (a pydantic model's validation). The item is passed on as it is.
UNSETTABLE_FIELD = (KeyError, TypeError, AttributeError, ValueError)

MIDDLEWARE_PATH = "scrapy_dedup.middlewares.ContentFingerprintMiddleware"
PIPELINE_PATH = "scrapy_dedup.pipelines.NearDuplicatePipeline"


def pipeline_enabled(crawler: "Crawler") -> bool:
    """Whether ``NearDuplicatePipeline`` is in the crawl's ``ITEM_PIPELINES`` (the action is the pipeline's)."""
    return _component_enabled(crawler, "ITEM_PIPELINES", PIPELINE_PATH)


def middleware_enabled(crawler: "Crawler") -> bool:
    """Whether ``ContentFingerprintMiddleware`` is in the crawl's ``SPIDER_MIDDLEWARES`` (it judges responses)."""
    return _component_enabled(crawler, "SPIDER_MIDDLEWARES", MIDDLEWARE_PATH)  # by path: both import this module


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
