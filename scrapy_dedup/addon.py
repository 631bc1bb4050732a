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

from scrapy_dedup.dupefilters import RedisBloomDupeFilter, RedisDupeFilter
from scrapy_dedup.dust_learning import DustLearningMiddleware
from scrapy_dedup.extensions import DedupExtension
from scrapy_dedup.fingerprinter import CanonicalRequestFingerprinter, OutermostCanonicalFingerprinter, class_path
from scrapy_dedup.middlewares import ContentFingerprintMiddleware, CanonicalRedirectMiddleware
from scrapy_dedup.pipelines import NearDuplicatePipeline
from scrapy_dedup.settings import (
    DedupConfigError,
    SETTINGS,
    load_setting_object,
    read_settings,
    refusing_start,
    to_bool,
)

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
                    FALLBACK_SETTING, class_path(fallback_cls), name, class_path(current_cls), FALLBACK_SETTING)
    # at the priority of the value it replaces (as scrapy-zyte-api's add-on does), at least "addon"
    settings.set(name, FINGERPRINTER, max(priority, SETTINGS_PRIORITIES["addon"]))


#: the seen set of a crawl whose scheduler is scrapy-redis's (a fleet's shared queue): shared too
SHARED_DUPEFILTER = "scrapy_dedup.dupefilters.RedisDupeFilter"
CONTENT_BACKEND = "DEDUP_CONTENT_BACKEND"


def _from_redis_package(cls: Any) -> bool:
    """Whether ``cls`` is, or derives from, a class of scrapy-redis (or of scrapy-redis-bloomfilter)."""
    return isinstance(cls, type) and any(base.__module__.split(".")[0] in ("scrapy_redis", "scrapy_redis_bloomfilter")
                                         for base in cls.__mro__)


def _set_by_project(settings: "BaseSettings", name: str) -> bool:
    """Whether ``name`` was given above the add-on's priority (settings.py, a spider, the command line)."""
    from scrapy.settings import SETTINGS_PRIORITIES

    return (settings.getpriority(name) or 0) > SETTINGS_PRIORITIES["addon"]


def share_with_the_seen_set(settings: "BaseSettings") -> None:
    """Where the crawl's seen set is in Redis, put the content state in the same Redis, or refuse to start.

    The seen set is in Redis under scrapy-redis's scheduler (every process of a fleet takes requests
    from one queue; the add-on's dupefilter is then :class:`~scrapy_dedup.dupefilters.RedisDupeFilter`,
    on scrapy-redis's ``REDIS_URL``) or with a Redis dupefilter (ours or scrapy-redis's). Its processes
    fetch each other's links, so a content index in each process's memory would let through every
    duplicate met by two processes: ``DEDUP_CONTENT_BACKEND`` becomes ``redis`` (its server is
    ``DEDUP_REDIS_URL``, unset scrapy-redis's ``REDIS_URL``: the seen set's). A project that set it to
    ``memory`` itself is refused at start-up, naming the setting.
    """
    scheduler = load_setting_object(settings.get("SCHEDULER"), "SCHEDULER")
    if _from_redis_package(scheduler):
        if not _set_by_project(settings, "DUPEFILTER_CLASS"):
            settings.set("DUPEFILTER_CLASS", SHARED_DUPEFILTER, "addon")
        why = f"SCHEDULER is {settings.get('SCHEDULER')!r}"
    else:
        dupefilter = load_setting_object(settings.get("DUPEFILTER_CLASS"), "DUPEFILTER_CLASS")
        if not (_from_redis_package(dupefilter)
                or (isinstance(dupefilter, type) and issubclass(dupefilter, (RedisDupeFilter, RedisBloomDupeFilter)))):
            return
        why = f"DUPEFILTER_CLASS is {settings.get('DUPEFILTER_CLASS')!r}"
    convert = next(setting.convert for setting in SETTINGS if setting.name == CONTENT_BACKEND)
    if not _set_by_project(settings, CONTENT_BACKEND):
        settings.set(CONTENT_BACKEND, "redis", "addon")
    elif convert(settings.get(CONTENT_BACKEND), CONTENT_BACKEND) != "redis":
        raise DedupConfigError(
            f"{CONTENT_BACKEND} = {settings.get(CONTENT_BACKEND)!r} keeps the content index in each process's "
            f"memory, but the crawl's seen set is in Redis ({why}): processes sharing it would each keep their "
            f"own copy of the same page. Set {CONTENT_BACKEND} = 'redis' (the seen set's server), or leave it unset")


def warn_of_own_fingerprints(settings: "BaseSettings") -> None:
    """Warn when ``DUPEFILTER_CLASS`` fingerprints requests itself, so our canonical fingerprints never reach it.

    Scrapy's ``RFPDupeFilter`` (and ours) ask ``crawler.request_fingerprinter``; a filter with a
    ``request_fingerprint`` of its own (scrapy-redis's ``RFPDupeFilter``) does not, and canonicalizes nothing.
    """
    from scrapy.dupefilters import RFPDupeFilter

    name = "DUPEFILTER_CLASS"
    dupefilter = load_setting_object(settings.get(name), name)
    own = getattr(dupefilter, "request_fingerprint", RFPDupeFilter.request_fingerprint)
    if own is not RFPDupeFilter.request_fingerprint:
        logger.warning(
            "%s %s computes its own request fingerprints (request_fingerprint), not with REQUEST_FINGERPRINTER_CLASS: "
            "scrapy-dedup's canonical URLs never reach the seen set, so URL variants are fetched again; use one of "
            "scrapy-dedup's dupefilters (scrapy_dedup.RedisDupeFilter is scrapy-redis's drop-in)",
            name, class_path(dupefilter))


class Addon:
    """For ``ADDONS = {"scrapy_dedup.Addon": 0}``."""

    def update_settings(self, settings: "BaseSettings") -> None:
        if not to_bool(settings.get("DEDUP_ENABLED", True), "DEDUP_ENABLED"):
            return
        with refusing_start():
            read_settings(settings)  # every DEDUP_* error at once, before any component stops at its first
            compose_fingerprinter(settings)
            for name, value in CLASS_SETTINGS.items():
                settings.set(name, value, "addon")
            share_with_the_seen_set(settings)
            warn_of_own_fingerprints(settings)
            for name, component, order in COMPONENTS:
                settings.setdefault_in_component_priority_dict(name, component, order)
