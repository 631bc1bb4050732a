"""Scrapy's own dupefilter, scheduler and fingerprinter tests that apply to a third-party filter.

Follows scrapy/scrapy ``tests/test_dupefilters.py`` of 2.13.4 and of the development tree after
2.18.0 (the same expectations; 2.19.0's own test file is not in its package), what 2.19.0's
``scrapy/dupefilters.py`` adds (a subclass overriding ``request_fingerprint`` is still called,
with a deprecation warning), ``tests/test_scheduler.py`` (dequeue by priority, in memory and on
disk) and the fingerprinter tests of ``tests/test_utils_request.py`` (``TestFingerprint``,
``TestCustomRequestFingerprinter``), with our three dupefilters and
``CanonicalRequestFingerprinter``.

``test_df_from_crawler_scheduler``, ``test_filter``, ``test_dupefilter_path``,
``test_request_fingerprint``, ``test_log`` and ``test_log_debug`` are re-expressed, for all
three filters, in tests/test_dupefilters.py and not repeated here. Not applicable:
``test_df_direct_scheduler`` (a filter without ``from_crawler``), ``test_seenreq_newlines``
(the ``requests.seen`` line format; ours is a checksummed binary checkpoint) and
``TestFingerprint.test_hashes`` (hard-coded hashes of Scrapy's URL canonicalization; ours
equals Scrapy's fingerprint where the canonical URLs agree, tests/test_fingerprinter.py).
"""
from __future__ import annotations

import hashlib
import warnings

import pytest
import scrapy
from scrapy.core.scheduler import Scheduler
from scrapy.http import Request
from scrapy.spiders import Spider
from scrapy.utils.request import fingerprint as scrapy_fingerprint
from scrapy.utils.test import get_crawler

from scrapy_dedup import CanonicalRequestFingerprinter
from scrapy_dedup.dupefilters import BloomDupeFilter, RedisBloomDupeFilter, RedisDupeFilter
from scrapy_dedup.settings import DedupConfigError

CLASSES = {"bloom": BloomDupeFilter, "redis": RedisDupeFilter, "redis_bloom": RedisBloomDupeFilter}
FP_PATH = "scrapy_dedup.CanonicalRequestFingerprinter"


class SimpleSpider(Spider):
    name = "simple"


@pytest.fixture(params=list(CLASSES))
def kind(request) -> str:
    return request.param


@pytest.fixture
def base_settings(kind, request) -> dict:
    settings = {"DUPEFILTER_CLASS": CLASSES[kind], "DEDUP_BLOOM_CAPACITY": 10_000}
    if kind != "bloom":
        settings["DEDUP_REDIS_URL"] = request.getfixturevalue("redis_url")
    return settings


def open_scheduler(settings: dict) -> tuple[Scheduler, Spider]:
    """Scrapy's scheduler, opened outside a crawl (as tests/test_scheduler.py does: its priority queue, since
    the downloader-aware default of Scrapy 2.19 needs a running engine)."""
    crawler = get_crawler(SimpleSpider, settings_dict={"SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue",
                                                       **settings})
    spider = SimpleSpider.from_crawler(crawler)
    crawler.spider = spider
    scheduler = Scheduler.from_crawler(crawler)
    scheduler.open(spider)
    return scheduler, spider


# --- tests/test_dupefilters.py and scrapy/dupefilters.py --------------------------------------

def test_log_is_not_the_deprecated_base_one(kind, base_settings):
    """``TestBaseDupeFilter.test_log_deprecation``: ``BaseDupeFilter.log()`` warns that calling it is
    deprecated. Ours subclass ``BaseDupeFilter`` and implement ``log()`` (Scrapy's messages and stat),
    so the scheduler's call of it must not warn."""
    scheduler, spider = open_scheduler(base_settings)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scheduler.df.log(Request("http://scrapytest.org/1"), spider)
    assert [w for w in caught if issubclass(w.category, scrapy.exceptions.ScrapyDeprecationWarning)] == []
    assert spider.crawler.stats.get_value("dupefilter/filtered") == 1
    scheduler.close("finished")


def test_a_subclass_overriding_request_fingerprint_fails_at_start(kind, base_settings):
    """Replaces Scrapy 2.19's ``RFPDupeFilter`` contract for a subclass that overrides
    ``request_fingerprint()`` (still called, with a deprecation warning; scrapy-redis's filter calls it
    too). Ours fingerprint with ``crawler.request_fingerprinter`` only, so such an override would be
    silently ignored: the start-up fails instead, naming ``REQUEST_FINGERPRINTER_CLASS``."""
    class CaseInsensitive(CLASSES[kind]):
        def request_fingerprint(self, request):
            return hashlib.sha1(request.url.lower().encode()).hexdigest()

    crawler = get_crawler(SimpleSpider, settings_dict={**base_settings, "DUPEFILTER_CLASS": CaseInsensitive})
    with pytest.raises(DedupConfigError, match="REQUEST_FINGERPRINTER_CLASS"):
        Scheduler.from_crawler(crawler)


# --- Scrapy's scheduler with our filters (tests/test_scheduler.py; Scheduler.enqueue_request) ----

@pytest.mark.parametrize("on_disk", [False, True])
def test_scrapys_scheduler_filters_and_dequeues_by_priority(kind, base_settings, on_disk, tmp_path):
    """``test_dequeue_priorities`` (in memory and with ``JOBDIR``) with one of our dupefilters, plus the
    scheduler's contract with a dupefilter: a duplicate is refused and logged (``dupefilter/filtered``),
    a ``dont_filter`` request is queued without asking the filter."""
    settings = {**base_settings, **({"JOBDIR": str(tmp_path)} if on_disk else {})}
    scheduler, spider = open_scheduler(settings)
    for url, priority in [("http://a.test/1", 1), ("http://a.test/2", 3), ("http://a.test/3", 2)]:
        assert scheduler.enqueue_request(Request(url, priority=priority))
    assert not scheduler.enqueue_request(Request("http://a.test/1"))
    assert scheduler.enqueue_request(Request("http://a.test/1", dont_filter=True, priority=-1))
    stats = spider.crawler.stats
    assert stats.get_value("dupefilter/filtered") == 1
    assert scheduler.df.checked == 4  # the dont_filter request was never checked
    assert len(scheduler) == 4
    assert [scheduler.next_request().url for _ in range(4)] == [
        "http://a.test/2", "http://a.test/3", "http://a.test/1", "http://a.test/1"]
    assert scheduler.next_request() is None
    scheduler.close("finished")


# --- tests/test_utils_request.py, TestFingerprint, on CanonicalRequestFingerprinter ---------------

@pytest.fixture
def fingerprinter() -> CanonicalRequestFingerprinter:
    fingerprinter = get_crawler(settings_dict={"REQUEST_FINGERPRINTER_CLASS": FP_PATH}).request_fingerprinter
    assert isinstance(fingerprinter, CanonicalRequestFingerprinter)
    return fingerprinter


VERBATIM = {"verbatim_url": True}


@pytest.mark.parametrize("first, second, same", [
    # test_query_string_key_order
    (Request("http://www.example.com/query?id=111&cat=222"), Request("http://www.example.com/query?cat=222&id=111"),
     True),
    # test_query_string_key_without_value
    (Request("http://www.example.com/hnnoticiaj1.aspx?78132,199"),
     Request("http://www.example.com/hnnoticiaj1.aspx?78160,199"), False),
    # test_header, test_headers: headers are not part of the fingerprint
    (Request("http://www.example.com/members/offers.html"),
     Request("http://www.example.com/members/offers.html", headers={"SESSIONID": b"somehash",
                                                                    "Accept-Language": b"en"}), True),
    # test_fragment: a plain fragment is dropped
    (Request("http://www.example.com/test.html"), Request("http://www.example.com/test.html#fragment"), True),
    # test_verbatim_url: the URL as given, fragment included
    (Request("http://www.example.com/query?a=1&b=2", meta=VERBATIM),
     Request("http://www.example.com/query?b=2&a=1", meta=VERBATIM), False),
    (Request("http://www.example.com/test#fragment", meta=VERBATIM),
     Request("http://www.example.com/test", meta=VERBATIM), False),
    # test_method_and_body
    (Request("http://www.example.com"), Request("http://www.example.com", method="POST"), False),
    (Request("http://www.example.com", method="POST"),
     Request("http://www.example.com", method="POST", body=b"request body"), False),
    # test_part_separation
    (Request("http://www.example.com/foo"), Request("http://www.example.com/f", body=b"oo"), False),
])
def test_fingerprint_expectations(fingerprinter, first, second, same):
    assert fingerprinter.fingerprint(first) == fingerprinter.fingerprint(first)
    assert (fingerprinter.fingerprint(first) == fingerprinter.fingerprint(second)) is same


@pytest.mark.parametrize("first, second", [
    ("http://www.example.com/query?a=1&a=2", "http://www.example.com/query?a=2&a=1"),
    ("http://www.example.com/app#!/a", "http://www.example.com/app#!/b"),
])
def test_where_our_canonical_url_keeps_apart_what_scrapys_merges(fingerprinter, first, second):
    """Replaces two consequences of ``test_fragment`` / w3lib's ``canonicalize_url`` for our documented
    URL rules (docs/canonicalization.md, "Switches"): ``sort_query`` sorts by key only, as repeated keys' order is data
    to many applications, and ``drop_fragment`` keeps route fragments (``#!``, ``#/``), which single-page
    sites route on."""
    assert scrapy_fingerprint(Request(first)) == scrapy_fingerprint(Request(second))
    assert fingerprinter.fingerprint(Request(first)) != fingerprinter.fingerprint(Request(second))


def test_caching_and_request_replace(fingerprinter):
    """``test_caching`` (one computation per request object) and ``test_request_replace`` (a copy with
    another URL is fingerprinted anew)."""
    request = Request("http://www.example.com/hnnoticiaj1.aspx?78160,199")
    first = fingerprinter.fingerprint(request)
    assert fingerprinter.fingerprint(request) is first
    assert fingerprinter.fingerprint(request.replace(url="http://www.example.com/other")) != first


# --- TestCustomRequestFingerprinter: the custom fingerprinter as our fallback ------------------------

def with_fallback(fallback, **settings) -> CanonicalRequestFingerprinter:
    """Ours in REQUEST_FINGERPRINTER_CLASS with the project's own one kept as its fallback (what the add-on does)."""
    crawler = get_crawler(settings_dict={"REQUEST_FINGERPRINTER_CLASS": FP_PATH,
                                         "DEDUP_FALLBACK_REQUEST_FINGERPRINTER_CLASS": fallback, **settings})
    return crawler.request_fingerprinter


def test_custom_include_headers():
    class HeaderFingerprinter:
        def fingerprint(self, request):
            return scrapy_fingerprint(request, include_headers=["X-ID"])

    fp = with_fallback(HeaderFingerprinter)
    assert (fp.fingerprint(Request("http://www.example.com", headers={"X-ID": "1"}))
            != fp.fingerprint(Request("http://www.example.com", headers={"X-ID": "2"})))


def test_custom_dont_canonicalize():
    """The fallback hashes the URL it is given, which is our canonical URL: parameter order no longer
    tells requests apart, the order of a repeated key's values still does (as in upstream's test)."""
    class RawUrlFingerprinter:
        def fingerprint(self, request):
            return hashlib.sha1(request.url.encode()).digest()

    fp = with_fallback(RawUrlFingerprinter)
    assert (fp.fingerprint(Request("http://www.example.com?a=1&a=2"))
            != fp.fingerprint(Request("http://www.example.com?a=2&a=1")))
    assert (fp.fingerprint(Request("http://www.example.com?b=1&a=1"))
            == fp.fingerprint(Request("http://www.example.com?a=1&b=1")))


def test_custom_meta():
    class MetaFingerprinter:
        def fingerprint(self, request):
            if "fingerprint" in request.meta:
                return request.meta["fingerprint"]
            return scrapy_fingerprint(request)

    fp = with_fallback(MetaFingerprinter)
    fp1 = fp.fingerprint(Request("http://www.example.com"))
    fp2 = fp.fingerprint(Request("http://www.example.com", meta={"fingerprint": "a"}))
    fp3 = fp.fingerprint(Request("http://www.example.com", meta={"fingerprint": "a"}))
    fp4 = fp.fingerprint(Request("http://www.example.com", meta={"fingerprint": "b"}))
    assert len({fp1, fp2, fp4}) == 3
    assert fp2 == fp3


def test_custom_from_crawler():
    class SettingFingerprinter:
        @classmethod
        def from_crawler(cls, crawler):
            return cls(crawler)

        def __init__(self, crawler):
            self._fingerprint = crawler.settings["FINGERPRINT"]

        def fingerprint(self, request):
            return self._fingerprint

    fp = with_fallback(SettingFingerprinter, FINGERPRINT=b"fingerprint")
    assert fp.fingerprint(Request("http://www.example.com")) == b"fingerprint"
