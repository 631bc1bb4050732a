"""``scrapy_dedup.Addon``: one ``ADDONS`` line enables every piece.

Class settings (``REQUEST_FINGERPRINTER_CLASS``, ``DUPEFILTER_CLASS``) are set
at add-on priority, so a value from the user's ``settings.py`` (a Redis
dupefilter, another fingerprinter) wins. Component dicts are merged with
``setdefault_in_component_priority_dict``: a plain ``set`` at add-on priority
would be silently ignored whenever ``settings.py`` defines the same dict.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy_dedup.dust_learning import DustLearningMiddleware
from scrapy_dedup.extensions import DuplicationReportExtension
from scrapy_dedup.middlewares import ContentFingerprintMiddleware
from scrapy_dedup.pipelines import NearDuplicatePipeline
from scrapy_dedup.settings import to_bool

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

#: (setting, component, order) merged into the user's component dicts
COMPONENTS = (
    ("SPIDER_MIDDLEWARES", ContentFingerprintMiddleware, 950),
    ("ITEM_PIPELINES", NearDuplicatePipeline, 200),
    ("EXTENSIONS", DuplicationReportExtension, 500),
    # switches itself off (NotConfigured) unless DEDUP_DUST_LEARN = True
    ("DOWNLOADER_MIDDLEWARES", DustLearningMiddleware, 100),
)

CLASS_SETTINGS = {
    "REQUEST_FINGERPRINTER_CLASS": "scrapy_dedup.fingerprinter.CanonicalRequestFingerprinter",
    "DUPEFILTER_CLASS": "scrapy_dedup.dupefilters.BloomDupeFilter",
    # one line per duplicate item instead of the item's whole content; a project's LOG_FORMATTER wins
    "LOG_FORMATTER": "scrapy_dedup.logformatter.DedupLogFormatter",
}


class Addon:
    """For ``ADDONS = {"scrapy_dedup.Addon": 0}``."""

    def update_settings(self, settings: "BaseSettings") -> None:
        if not to_bool(settings.get("DEDUP_ENABLED", True), "DEDUP_ENABLED"):
            return
        for name, value in CLASS_SETTINGS.items():
            settings.set(name, value, "addon")
        for name, component, order in COMPONENTS:
            settings.setdefault_in_component_priority_dict(name, component, order)
