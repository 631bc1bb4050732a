"""``REQUEST_FINGERPRINTER_CLASS`` on the canonical URL.

Scrapy's default fingerprint is SHA-1 over ``{"method", "url", "body", "headers"}``
with the URL passed through ``w3lib.url.canonicalize_url``. This fingerprinter
keeps that exact shape (20 bytes; the same JSON document) but puts in our
canonical URL under the host's policy, so the dupefilter, the HTTP cache and
every other fingerprint user agree on which requests are the same page.

- ``dont_filter`` is untouched (the scheduler checks it, not the fingerprinter).
- ``request.meta["verbatim_url"]`` (Scrapy's own key) opts a request out: its URL is used as is.
- Results are cached per request object (a ``WeakKeyDictionary``, as Scrapy does),
  and the stats are counted once per request, not once per call.
- ``DEDUP_FALLBACK_REQUEST_FINGERPRINTER_CLASS`` names another fingerprinter to
  wrap: it receives ``request.replace(url=<canonical URL>)``, so this composes with
  plugins that have their own fingerprinter (the scrapy-zyte-api fallback pattern).
  The add-on fills it with the ``REQUEST_FINGERPRINTER_CLASS`` it finds.

This fingerprinter must be the outermost one: a fingerprinter that wraps it
(as its fallback) computes the fingerprints of the requests it handles itself
from the raw URL. An add-on that runs after ours can put its own fingerprinter
outermost that way (scrapy-zyte-api's does, keeping ours as its fallback);
:class:`OutermostCanonicalFingerprinter`, an extension the add-on enables, puts
ours back on top at start-up, with the other one as its fallback.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from scrapy_dedup.settings import DedupConfigError, load_setting_object, read_settings, refusing_start
from scrapy_dedup.url.canonical import Canonicalizer
from scrapy_dedup.url.generation import Generation, generation_of
from scrapy_dedup.url.policy import PolicyMap

if TYPE_CHECKING:  # pragma: no cover
    from scrapy import Request
    from scrapy.crawler import Crawler

__all__ = ["CanonicalRequestFingerprinter"]

logger = logging.getLogger(__name__)

STATS_CANONICALIZED = "dedup/url/canonicalized"
STATS_RULE_PREFIX = "dedup/url/rule/"
STATS_UNPARSABLE = "dedup/url/unparsable"

# strings json.dumps writes unchanged between quotes: printable ASCII without '"' and '\'
_JSON_PLAIN_RE = re.compile(r'[ !#-\[\]-~]*\Z')


def _json_string(text: str) -> str:
    return f'"{text}"' if _JSON_PLAIN_RE.match(text) else json.dumps(text)


def scrapy_shape_fingerprint(method: str, url: str, body: bytes | None) -> bytes:
    """SHA-1 of the JSON document Scrapy's default fingerprinter hashes (no headers included).

    Byte-for-byte the same as ``json.dumps({"method", "url", "body", "headers": {}}, sort_keys=True)``,
    built directly in the common case (plain ASCII) to skip the encoder.
    """
    document = (
        '{"body": "' + (body or b"").hex() + '", "headers": {}, "method": '
        + _json_string(method) + ', "url": ' + _json_string(url) + "}"
    )
    return hashlib.sha1(document.encode()).digest()  # noqa: S324 - Scrapy's fingerprint shape, not security


def _build_fallback(path: Any, crawler: Crawler) -> Any:
    fallback_cls = load_setting_object(path, "DEDUP_FALLBACK_REQUEST_FINGERPRINTER_CLASS")
    if isinstance(fallback_cls, type) and issubclass(fallback_cls, CanonicalRequestFingerprinter):
        raise DedupConfigError(
            "DEDUP_FALLBACK_REQUEST_FINGERPRINTER_CLASS must name another fingerprinter, "
            f"not {class_path(fallback_cls)} itself (it would wrap itself)"
        )
    from scrapy.utils.misc import build_from_crawler

    return build_from_crawler(fallback_cls, crawler)


def class_path(obj: Any) -> str:
    """``module.Name`` of a class (for log lines), or the value as given."""
    if isinstance(obj, type):
        return f"{obj.__module__}.{obj.__qualname__}"
    return str(obj)


#: how deep :func:`_nested_ours` looks into fingerprinters wrapping fingerprinters
MAX_WRAPPING_DEPTH = 8


def _nested_ours(fingerprinter: Any, crawler: Any) -> list[CanonicalRequestFingerprinter]:
    """The fingerprinters of ours built for ``crawler`` inside ``fingerprinter``, found through its fallback
    chain: ``fingerprinter`` itself and, recursively, every attribute of it that is a fingerprinter (an
    object with a ``fingerprint`` method: ours keeps it as ``fallback``, other add-ons under other names).
    No registry: what another fingerprinter wraps is reached from it, as it reaches it."""
    found: list[CanonicalRequestFingerprinter] = []
    seen: set[int] = set()
    todo: list[tuple[Any, int]] = [(fingerprinter, 0)]
    while todo:
        current, depth = todo.pop(0)
        if id(current) in seen or depth > MAX_WRAPPING_DEPTH:
            continue
        seen.add(id(current))
        if isinstance(current, CanonicalRequestFingerprinter) and current.crawler is crawler:
            found.append(current)
        for value in getattr(current, "__dict__", {}).values():
            if not isinstance(value, type) and callable(getattr(value, "fingerprint", None)):
                todo.append((value, depth + 1))
    return found


def _dust_rules(cfg: Any) -> Any:
    """The DUST rules of ``DEDUP_DUST_RULES`` (files merged in order); an empty set when learning online."""
    from scrapy_dedup.url.dust import DustRulesError, RuleSet

    try:
        rules = RuleSet.coerce(list(cfg.dust_rules)) if cfg.dust_rules else None
    except DustRulesError as exc:
        raise DedupConfigError(f"DEDUP_DUST_RULES: {exc}") from None
    if rules is not None:
        logger.info("DUST rules: %d rule(s) for %d host(s) from %s", len(rules), len(rules.hosts),
                    ", ".join(cfg.dust_rules))
    if rules is None and cfg.get("DEDUP_DUST_LEARN"):
        rules = RuleSet(source="<learned>")
    return rules


class CanonicalRequestFingerprinter:
    """Request fingerprints on canonical URLs; for ``REQUEST_FINGERPRINTER_CLASS``."""

    def __init__(
        self,
        crawler: Crawler | None = None,
        *,
        canonicalizer: Canonicalizer | None = None,
        fallback: Any = None,
    ):
        if canonicalizer is None:
            if crawler is not None:
                cfg = read_settings(crawler.settings)
                canonicalizer = Canonicalizer(PolicyMap.from_settings_values(cfg.url_policy, cfg.url_policies),
                                              dust_rules=_dust_rules(cfg))
            else:
                canonicalizer = Canonicalizer()
        self.canonicalizer = canonicalizer
        self.fallback = fallback
        self.crawler = crawler
        # False on one nested inside another fingerprinter under an outer one of ours:
        # the outer one counts each request, the nested one would count it again
        self.count_stats = True
        # request -> [canonical URL, fingerprint or None, switches that fired]
        self._cache: WeakKeyDictionary[Request, list] = WeakKeyDictionary()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CanonicalRequestFingerprinter:
        with refusing_start():
            fallback = read_settings(crawler.settings).fallback_request_fingerprinter_class
            return cls(crawler, fallback=_build_fallback(fallback, crawler) if fallback else None)

    @classmethod
    def around(cls, crawler: Crawler, fingerprinter: Any) -> CanonicalRequestFingerprinter:
        """A fingerprinter of ours on top of ``fingerprinter`` (its fallback).

        Fingerprinters of ours already built for ``crawler`` (nested inside ``fingerprinter``)
        lend their canonicalizer (one set of DUST rules, learned ones included) and stop counting
        stats, so each request is counted once, by the new outer one.
        """
        nested = _nested_ours(fingerprinter, crawler)
        if nested:
            for inner in nested:
                inner.count_stats = False
            return cls(crawler, canonicalizer=nested[0].canonicalizer, fallback=fingerprinter)
        outer = cls.from_crawler(crawler)
        outer.fallback = fingerprinter
        return outer

    def _entry(self, request: Request) -> list:
        entry = self._cache.get(request)
        if entry is not None:
            return entry
        fired: tuple[str, ...] = ()
        if request.meta.get("verbatim_url"):
            canonical = request.url
        else:
            result = self.canonicalizer.canonicalize_with_info(request.url)
            canonical = result.url
            fired = tuple(result.fired)
            self._count(request.url, result)
        entry = [canonical, None, fired]
        self._cache[request] = entry
        return entry

    def _count(self, original: str, result: Any) -> None:
        if not self.count_stats:
            return
        stats = getattr(self.crawler, "stats", None)
        if stats is None:
            return
        if result.unparsable:
            stats.inc_value(STATS_UNPARSABLE)
        if result.url != original:
            stats.inc_value(STATS_CANONICALIZED)
        for switch in result.fired:
            stats.inc_value(STATS_RULE_PREFIX + switch)

    def fired_switches(self, request: Request) -> tuple[str, ...]:
        """The canonicalization steps that changed ``request``'s URL (``"dust"`` for DUST rules)."""
        return self._entry(request)[2]

    def canonical_url(self, request: Request) -> str:
        """The URL this fingerprinter identifies ``request`` by (cached per request)."""
        return self._entry(request)[0]

    def fingerprint(self, request: Request) -> bytes:
        """20 bytes: Scrapy's fingerprint shape on the canonical URL, or the fallback's fingerprint of it."""
        entry = self._entry(request)
        fingerprint = entry[1]
        if fingerprint is None:
            canonical = entry[0]
            if self.fallback is not None:
                target = request if canonical == request.url else request.replace(url=canonical)
                fingerprint = self.fallback.fingerprint(target)
            else:
                fingerprint = scrapy_shape_fingerprint(request.method, canonical, request.body)
            entry[1] = fingerprint
        return fingerprint


def crawl_generation(fingerprinter: Any, learning: bool = False) -> Generation:
    """The fingerprint generation of a crawl whose ``crawler.request_fingerprinter`` is ``fingerprinter``:
    its chain (each ``fallback``, outermost first) and the canonicalizer of the first of ours in it."""
    chain: list[str] = []
    canonicalizer = None
    while fingerprinter is not None and len(chain) < 10:
        chain.append(class_path(type(fingerprinter)))
        if canonicalizer is None and isinstance(fingerprinter, CanonicalRequestFingerprinter):
            canonicalizer = fingerprinter.canonicalizer
        fingerprinter = getattr(fingerprinter, "fallback", None)
    if canonicalizer is None:
        return generation_of(None, None, chain, learning=learning)
    return generation_of(canonicalizer.policies, canonicalizer.dust, chain, learning=learning)


class OutermostCanonicalFingerprinter:
    """Extension (the add-on enables it): keeps :class:`CanonicalRequestFingerprinter` outermost.

    Scrapy builds ``crawler.request_fingerprinter`` from ``REQUEST_FINGERPRINTER_CLASS`` after
    every add-on has run and before the extensions, so an add-on listed after ours (a higher
    ``ADDONS`` value) has the last word on that setting. When it put another fingerprinter there,
    this wraps that one in ours, before any component (dupefilter, HTTP cache) reads it: canonical
    URLs still merge, and the other fingerprinter still adds what it hashes.
    """

    def __init__(self, crawler: Crawler):
        self.wrapped: str | None = None
        from scrapy_dedup.engine_hook import internal

        current = internal(crawler, "request_fingerprinter", who="OutermostCanonicalFingerprinter")
        if not isinstance(current, CanonicalRequestFingerprinter):
            crawler.request_fingerprinter = CanonicalRequestFingerprinter.around(crawler, current)
            self.wrapped = class_path(type(current))
            logger.info(
                "REQUEST_FINGERPRINTER_CLASS is %s (an add-on after scrapy_dedup.Addon set it): "
                "CanonicalRequestFingerprinter now wraps it and hands it canonical requests",
                self.wrapped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> OutermostCanonicalFingerprinter:
        return cls(crawler)
