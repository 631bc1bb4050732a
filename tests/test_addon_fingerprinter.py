"""The add-on composes with a fingerprinter it finds: the project's, or another add-on's, in either order.

Each case checks both behaviours on ``crawler.request_fingerprinter`` (what the dupefilter and
the HTTP cache use): URL variants of one page share a fingerprint, and requests that differ only
by what the other fingerprinter hashes (here the ``Accept-Language`` header) do not.
"""
from __future__ import annotations

import logging

import pytest
from scrapy import Request
from scrapy.utils.request import RequestFingerprinter
from scrapy.utils.test import get_crawler

from scrapy_dedup.fingerprinter import CanonicalRequestFingerprinter
from scrapy_dedup.settings import DedupConfigError
from tests.support.fingerprinters import LANGUAGE_FINGERPRINTER, LanguageFingerprinter

OURS = "scrapy_dedup.fingerprinter.CanonicalRequestFingerprinter"
FALLBACK = "DEDUP_FALLBACK_REQUEST_FINGERPRINTER_CLASS"
ADDON = "scrapy_dedup.Addon"
LANGUAGE_ADDON = "tests.support.fingerprinters.LanguageAddon"
REPLACING_ADDON = "tests.support.fingerprinters.ReplacingLanguageAddon"


def crawler_for(settings: dict):
    return get_crawler(settings_dict=settings)


def requests(lang: str) -> list[Request]:
    """Three URL strings of one page, with one Accept-Language."""
    headers = {"Accept-Language": lang}
    return [Request(url, headers=headers) for url in (
        "http://example.com/item?id=1",
        "http://example.com/item?id=1&utm_source=mail",
        "http://EXAMPLE.com:80/./item?gclid=x&id=1#top",
    )]


def assert_both_behaviours(fingerprinter) -> None:
    english = {fingerprinter.fingerprint(r) for r in requests("en")}
    german = {fingerprinter.fingerprint(r) for r in requests("de")}
    assert len(english) == 1, "URL variants of one page must share a fingerprint"
    assert len(german) == 1
    assert english != german, "the other fingerprinter's header must still count"
    # a request without the header goes down the other fingerprinter's fallback: still canonical
    plain = {fingerprinter.fingerprint(Request(r.url)) for r in requests("en")}
    assert len(plain) == 1 and plain.isdisjoint(english | german)


def test_project_fingerprinter_is_kept_as_the_fallback():
    crawler = crawler_for({"ADDONS": {ADDON: 0}, "REQUEST_FINGERPRINTER_CLASS": LANGUAGE_FINGERPRINTER})
    assert crawler.settings.get("REQUEST_FINGERPRINTER_CLASS") == OURS
    assert crawler.settings.getpriority("REQUEST_FINGERPRINTER_CLASS") == 20  # "project", as it found it
    assert crawler.settings.get(FALLBACK) == LANGUAGE_FINGERPRINTER
    fingerprinter = crawler.request_fingerprinter
    assert isinstance(fingerprinter, CanonicalRequestFingerprinter)
    assert isinstance(fingerprinter.fallback, LanguageFingerprinter)
    assert_both_behaviours(fingerprinter)


def test_a_class_object_in_settings_is_kept_too():
    crawler = crawler_for({"ADDONS": {ADDON: 0}, "REQUEST_FINGERPRINTER_CLASS": LanguageFingerprinter})
    assert crawler.settings.get(FALLBACK) is LanguageFingerprinter
    assert_both_behaviours(crawler.request_fingerprinter)


def test_scrapys_default_named_in_settings_is_replaced_without_a_fallback():
    # ours computes Scrapy's fingerprint shape itself: nothing to keep
    crawler = crawler_for({"ADDONS": {ADDON: 0},
                           "REQUEST_FINGERPRINTER_CLASS": "scrapy.utils.request.RequestFingerprinter"})
    fingerprinter = crawler.request_fingerprinter
    assert isinstance(fingerprinter, CanonicalRequestFingerprinter) and fingerprinter.fallback is None
    assert crawler.settings.get(FALLBACK) is None


def test_no_fingerprinter_set_gives_ours_without_a_fallback():
    crawler = crawler_for({"ADDONS": {ADDON: 0}})
    assert crawler.settings.get("REQUEST_FINGERPRINTER_CLASS") == OURS
    assert crawler.settings.getpriority("REQUEST_FINGERPRINTER_CLASS") == 15  # "addon"
    assert crawler.request_fingerprinter.fallback is None


class ProjectCanonicalFingerprinter(CanonicalRequestFingerprinter):
    """A project's own subclass of ours."""


def test_a_subclass_of_ours_is_left_in_place():
    path = f"{__name__}.ProjectCanonicalFingerprinter"
    crawler = crawler_for({"ADDONS": {ADDON: 0}, "REQUEST_FINGERPRINTER_CLASS": path})
    assert type(crawler.request_fingerprinter) is ProjectCanonicalFingerprinter
    assert crawler.request_fingerprinter.fallback is None


def test_an_explicit_fallback_wins_and_the_displaced_class_is_named(caplog):
    caplog.set_level(logging.WARNING, logger="scrapy_dedup.addon")
    crawler = crawler_for({"ADDONS": {ADDON: 0}, "REQUEST_FINGERPRINTER_CLASS": LANGUAGE_FINGERPRINTER,
                           FALLBACK: "scrapy.utils.request.RequestFingerprinter"})
    assert isinstance(crawler.request_fingerprinter.fallback, RequestFingerprinter)
    [record] = [r for r in caplog.records if r.name == "scrapy_dedup.addon"]
    assert FALLBACK in record.getMessage() and LANGUAGE_FINGERPRINTER in record.getMessage()


def test_the_same_class_as_explicit_fallback_is_no_warning(caplog):
    caplog.set_level(logging.WARNING, logger="scrapy_dedup.addon")
    crawler = crawler_for({"ADDONS": {ADDON: 0}, "REQUEST_FINGERPRINTER_CLASS": LANGUAGE_FINGERPRINTER,
                           FALLBACK: LANGUAGE_FINGERPRINTER})
    assert_both_behaviours(crawler.request_fingerprinter)
    assert not [r for r in caplog.records if r.name == "scrapy_dedup.addon"]


def test_a_fingerprinter_that_cannot_be_loaded_fails_naming_the_setting():
    with pytest.raises(DedupConfigError, match="REQUEST_FINGERPRINTER_CLASS.*no_such_module"):
        crawler_for({"ADDONS": {ADDON: 0}, "REQUEST_FINGERPRINTER_CLASS": "no_such_module.Fingerprinter"})


def test_disabled_add_on_leaves_the_project_fingerprinter_alone():
    crawler = crawler_for({"ADDONS": {ADDON: 0}, "DEDUP_ENABLED": False,
                           "REQUEST_FINGERPRINTER_CLASS": LANGUAGE_FINGERPRINTER})
    assert type(crawler.request_fingerprinter) is LanguageFingerprinter


# (our add-on's ADDONS value, the other add-on's): lower runs first
ORDERS = {"ours first": (0, 500), "ours last": (600, 500)}


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("other", [LANGUAGE_ADDON, REPLACING_ADDON])
def test_another_add_on_in_either_order(order, other):
    ours, theirs = ORDERS[order]
    crawler = crawler_for({"ADDONS": {ADDON: ours, other: theirs}})
    fingerprinter = crawler.request_fingerprinter
    assert isinstance(fingerprinter, CanonicalRequestFingerprinter)
    assert isinstance(fingerprinter.fallback, LanguageFingerprinter)
    assert_both_behaviours(fingerprinter)


@pytest.mark.parametrize("order", ORDERS)
def test_another_add_on_and_a_project_fingerprinter(order):
    """Project fingerprinter, other add-on and ours: all three apply, in either order."""
    ours, theirs = ORDERS[order]
    crawler = crawler_for({"ADDONS": {ADDON: ours, LANGUAGE_ADDON: theirs},
                           "REQUEST_FINGERPRINTER_CLASS": "tests.test_addon_fingerprinter.MethodFingerprinter"})
    fingerprinter = crawler.request_fingerprinter
    assert isinstance(fingerprinter, CanonicalRequestFingerprinter)
    assert_both_behaviours(fingerprinter)
    # a request without Accept-Language reaches the project's fingerprinter, on the canonical URL
    MethodFingerprinter.seen.clear()
    fingerprinter.fingerprint(Request("http://example.com/item?utm_source=x&id=1"))
    assert MethodFingerprinter.seen == ["http://example.com/item?id=1"]


class MethodFingerprinter(RequestFingerprinter):
    """A project fingerprinter that records the URLs it is given."""

    seen: list[str] = []

    def fingerprint(self, request):
        type(self).seen.append(request.url)
        return super().fingerprint(request)


def test_stats_are_counted_once_when_ours_is_put_back_on_top():
    # ours first: the other add-on wraps ours, and the extension wraps it again in a new one of ours
    crawler = crawler_for({"ADDONS": {ADDON: 0, LANGUAGE_ADDON: 500}})
    fingerprinter = crawler.request_fingerprinter
    nested = fingerprinter.fallback.fallback
    assert isinstance(nested, CanonicalRequestFingerprinter)
    assert nested.canonicalizer is fingerprinter.canonicalizer  # one set of DUST rules
    fingerprinter.fingerprint(Request("http://example.com/?utm_source=x&id=1"))  # reaches the nested one
    fingerprinter.fingerprint(Request("http://exa mple.com/"))  # unparsable
    assert crawler.stats.get_value("dedup/url/canonicalized") == 1
    assert crawler.stats.get_value("dedup/url/rule/strip_tracking") == 1
    assert crawler.stats.get_value("dedup/url/unparsable") == 1


def test_without_the_extension_an_add_on_after_ours_stays_on_top():
    """What the extension prevents: the later add-on's fingerprinter hashes its requests' raw URLs."""
    crawler = crawler_for({"ADDONS": {ADDON: 0, LANGUAGE_ADDON: 500},
                           "EXTENSIONS": {"scrapy_dedup.fingerprinter.OutermostCanonicalFingerprinter": None}})
    fingerprinter = crawler.request_fingerprinter
    assert isinstance(fingerprinter, LanguageFingerprinter)
    assert len({fingerprinter.fingerprint(r) for r in requests("en")}) == 3
