"""A plugin with its own request fingerprinter and add-on, built the way scrapy-zyte-api's are.

:class:`LanguageFingerprinter` fingerprints a request that carries an ``Accept-Language``
header itself, from the raw URL plus that header (Scrapy's ``fingerprint(...,
include_headers=...)``), and hands every other request to its fallback: the same shape as
scrapy-zyte-api's fingerprinter, which hashes its own request parameters for Zyte API
requests and falls back for the rest. :class:`LanguageAddon` installs it as scrapy-zyte-api's
add-on does: a fingerprinter it finds in ``REQUEST_FINGERPRINTER_CLASS`` (other than Scrapy's
default) is kept as its fallback, and it takes that setting's priority.
:class:`ReplacingLanguageAddon` sets it and keeps nothing (a plugin that does not compose).
"""
from __future__ import annotations

from scrapy.settings.default_settings import REQUEST_FINGERPRINTER_CLASS as SCRAPY_DEFAULT
from scrapy.utils.misc import build_from_crawler, load_object
from scrapy.utils.request import fingerprint

LANGUAGE_FINGERPRINTER = "tests.support.fingerprinters.LanguageFingerprinter"
LANGUAGE_FALLBACK = "LANG_FALLBACK_REQUEST_FINGERPRINTER_CLASS"
NAME = "REQUEST_FINGERPRINTER_CLASS"


class LanguageFingerprinter:
    def __init__(self, crawler):
        fallback = crawler.settings.get(LANGUAGE_FALLBACK) or SCRAPY_DEFAULT
        self.fallback = build_from_crawler(load_object(fallback), crawler)

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def fingerprint(self, request) -> bytes:
        if request.headers.get("Accept-Language") is not None:
            return fingerprint(request, include_headers=["Accept-Language"])
        return self.fallback.fingerprint(request)


class LanguageAddon:
    def update_settings(self, settings) -> None:
        current = settings.get(NAME)
        if not settings.get(LANGUAGE_FALLBACK) and load_object(current) is not load_object(SCRAPY_DEFAULT):
            settings.set(LANGUAGE_FALLBACK, current, "addon")
            settings.set(NAME, LANGUAGE_FINGERPRINTER, settings.getpriority(NAME))
        else:
            settings.set(NAME, LANGUAGE_FINGERPRINTER, "addon")


class ReplacingLanguageAddon:
    def update_settings(self, settings) -> None:
        settings.set(NAME, LANGUAGE_FINGERPRINTER, "addon")
