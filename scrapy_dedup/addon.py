"""``scrapy_dedup.Addon``: one ``ADDONS`` line enables every piece.

``DUPEFILTER_CLASS`` is set at add-on priority, so a value from the user's
``settings.py`` (a Redis dupefilter) wins. ``REQUEST_FINGERPRINTER_CLASS`` composes
instead (:func:`compose_fingerprinter`): a fingerprinter already there is kept as
``DEDUP_FALLBACK_REQUEST_FINGERPRINTER_CLASS`` and ours goes on top, as scrapy-zyte-api's
add-on does; docs/usage.md ("Ours runs first") has how either add-on order ends with ours
outermost (:class:`~scrapy_dedup.fingerprinter.OutermostCanonicalFingerprinter`).

Component dicts are merged with ``setdefault_in_component_priority_dict``: a
plain ``set`` at add-on priority would be silently ignored whenever
``settings.py`` defines the same dict.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy_dedup.dust_learning import DustLearningMiddleware
from scrapy_dedup.extensions import DedupExtension
from scrapy_dedup.fingerprinter import CanonicalRequestFingerprinter, OutermostCanonicalFingerprinter, _class_path
from scrapy_dedup.middlewares import ContentFingerprintMiddleware, CanonicalRedirectMiddleware
from scrapy_dedup.pipelines import NearDuplicatePipeline
from scrapy_dedup.settings import load_setting_object, to_bool

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

FINGERPRINTER = "scrapy_dedup.fingerprinter.CanonicalRequestFingerprinter"
FALLBACK_SETTING = "DEDUP_FALLBACK_REQUEST_FINGERPRINTER_CLASS"

#: (setting, component, order) merged into the user's component dicts
COMPONENTS = (
    ("SPIDER_MIDDLEWARES", ContentFingerprintMiddleware, 950),
    ("ITEM_PIPELINES", NearDuplicatePipeline, 200),
    # the content state the three content components share, and the report (built before them)
    ("EXTENSIONS", DedupExtension, 500),
    # first of the extensions: it may replace crawler.request_fingerprinter, which others read
    ("EXTENSIONS", OutermostCanonicalFingerprinter, -1000),
    # switches itself off (NotConfigured) unless DEDUP_DUST_LEARN = True
    ("DOWNLOADER_MIDDLEWARES", DustLearningMiddleware, 100),
    # sees a redirect before RedirectMiddleware (600) does
    ("DOWNLOADER_MIDDLEWARES", CanonicalRedirectMiddleware, 650),
)

CLASS_SETTINGS = {
    "DUPEFILTER_CLASS": "scrapy_dedup.dupefilters.BloomDupeFilter",
    # one line per duplicate item instead of the item's whole content; a project's LOG_FORMATTER wins
    "LOG_FORMATTER": "scrapy_dedup.logformatter.DedupLogFormatter",
}


def compose_fingerprinter(settings: "BaseSettings") -> None:
    """Put ours in ``REQUEST_FINGERPRINTER_CLASS``, keeping the fingerprinter found there as our fallback.

    Kept: any class set above default priority other than Scrapy's default (ours computes
    Scrapy's shape itself) and ours (or a subclass, left in place). A fallback the user set
    explicitly wins; the class it displaces is named in a warning.
    """
    from scrapy.settings import SETTINGS_PRIORITIES
    from scrapy.settings.default_settings import REQUEST_FINGERPRINTER_CLASS as SCRAPY_DEFAULT

    name = "REQUEST_FINGERPRINTER_CLASS"
    current: Any = settings.get(name)
    priority = settings.getpriority(name) or 0
    if priority > SETTINGS_PRIORITIES["default"] and current:
        current_cls = load_setting_object(current, name)
        if isinstance(current_cls, type) and issubclass(current_cls, CanonicalRequestFingerprinter):
            return  # ours already, or the project's own subclass of it
        if current_cls is not load_setting_object(SCRAPY_DEFAULT, name):
            explicit = settings.get(FALLBACK_SETTING)
            if not explicit:
                settings.set(FALLBACK_SETTING, current, "addon")
            elif (fallback_cls := load_setting_object(explicit, FALLBACK_SETTING)) is not current_cls:
                logger.warning(
                    "%s is %s, so the %s %s is not used; set %s to it to keep it",
                    FALLBACK_SETTING, _class_path(fallback_cls), name, _class_path(current_cls), FALLBACK_SETTING)
    # at the priority of the value it replaces (as scrapy-zyte-api's add-on does), at least "addon"
    settings.set(name, FINGERPRINTER, max(priority, SETTINGS_PRIORITIES["addon"]))


class Addon:
    """For ``ADDONS = {"scrapy_dedup.Addon": 0}``."""

    def update_settings(self, settings: "BaseSettings") -> None:
        if not to_bool(settings.get("DEDUP_ENABLED", True), "DEDUP_ENABLED"):
            return
        compose_fingerprinter(settings)
        for name, value in CLASS_SETTINGS.items():
            settings.set(name, value, "addon")
        for name, component, order in COMPONENTS:
            settings.setdefault_in_component_priority_dict(name, component, order)
