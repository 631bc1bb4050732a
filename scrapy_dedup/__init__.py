"""scrapy-dedup: stop Scrapy crawlers from fetching and storing the same page twice.

Public names are loaded lazily, so that using the core (``canonicalize``,
``simhash``, the seen sets, the content index) never imports Scrapy.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    # URL core
    "canonicalize": "scrapy_dedup.url.canonical",
    "Canonicalizer": "scrapy_dedup.url.canonical",
    "UrlPolicy": "scrapy_dedup.url.policy",
    # seen-URL stores
    "BloomSeenSet": "scrapy_dedup.seen.bloom",
    "RedisSeenSet": "scrapy_dedup.seen.redis",
    "RedisBloomSeenSet": "scrapy_dedup.seen.redis",
    # content core
    "page_text": "scrapy_dedup.content.text",
    "simhash": "scrapy_dedup.content.simhash",
    "SimhashIndex": "scrapy_dedup.content.index",
    "RedisSimhashIndex": "scrapy_dedup.content.stores.redis_index",
    "open_store": "scrapy_dedup.content.stores",
    "DuplicationReport": "scrapy_dedup.content.report",
    "ContentDeduplicator": "scrapy_dedup.content.engine",
    "ContentFingerprinter": "scrapy_dedup.content.engine",
    "MemoryContentStore": "scrapy_dedup.content.engine",
    "Verdict": "scrapy_dedup.content.engine",
    "PageJudge": "scrapy_dedup.content.judge",
    # Scrapy layer
    "Addon": "scrapy_dedup.addon",
    "CanonicalRequestFingerprinter": "scrapy_dedup.fingerprinter",
    "BloomDupeFilter": "scrapy_dedup.dupefilters",
    "RedisDupeFilter": "scrapy_dedup.dupefilters",
    "RedisBloomDupeFilter": "scrapy_dedup.dupefilters",
    "NearDuplicatePipeline": "scrapy_dedup.pipelines",
    "ContentFingerprintMiddleware": "scrapy_dedup.middlewares",
    "DedupExtension": "scrapy_dedup.extensions",
    "DuplicationReportExtension": "scrapy_dedup.extensions",
    "DustLearningMiddleware": "scrapy_dedup.dust_learning",
    "AckPriorityQueue": "scrapy_dedup.redis_queue",
    "DedupLogFormatter": "scrapy_dedup.logformatter",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'scrapy_dedup' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # cache: the next access skips __getattr__
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only (kept equal to _EXPORTS by a test)
    from scrapy_dedup.addon import Addon  # noqa: F401
    from scrapy_dedup.content.engine import (  # noqa: F401
        ContentDeduplicator,
        ContentFingerprinter,
        MemoryContentStore,
        Verdict,
    )
    from scrapy_dedup.content.index import SimhashIndex  # noqa: F401
    from scrapy_dedup.content.judge import PageJudge  # noqa: F401
    from scrapy_dedup.content.stores import open_store  # noqa: F401
    from scrapy_dedup.content.stores.redis_index import RedisSimhashIndex  # noqa: F401
    from scrapy_dedup.content.simhash import simhash  # noqa: F401
    from scrapy_dedup.content.text import page_text  # noqa: F401
    from scrapy_dedup.dupefilters import BloomDupeFilter, RedisBloomDupeFilter, RedisDupeFilter  # noqa: F401
    from scrapy_dedup.dust_learning import DustLearningMiddleware  # noqa: F401
    from scrapy_dedup.extensions import DedupExtension, DuplicationReportExtension  # noqa: F401
    from scrapy_dedup.fingerprinter import CanonicalRequestFingerprinter  # noqa: F401
    from scrapy_dedup.logformatter import DedupLogFormatter  # noqa: F401
    from scrapy_dedup.middlewares import ContentFingerprintMiddleware  # noqa: F401
    from scrapy_dedup.pipelines import NearDuplicatePipeline  # noqa: F401
    from scrapy_dedup.redis_queue import AckPriorityQueue  # noqa: F401
    from scrapy_dedup.content.report import DuplicationReport  # noqa: F401
    from scrapy_dedup.seen.bloom import BloomSeenSet  # noqa: F401
    from scrapy_dedup.seen.redis import RedisBloomSeenSet, RedisSeenSet  # noqa: F401
    from scrapy_dedup.url.canonical import Canonicalizer, canonicalize  # noqa: F401
    from scrapy_dedup.url.policy import UrlPolicy  # noqa: F401
