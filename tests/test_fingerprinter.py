"""CanonicalRequestFingerprinter on a real Scrapy crawler (settings, stats, fallback)."""
from __future__ import annotations

import gc

import pytest
from scrapy import FormRequest, Request
from scrapy.utils.request import RequestFingerprinter, fingerprint
from scrapy.utils.test import get_crawler

from scrapy_dedup import CanonicalRequestFingerprinter
from scrapy_dedup.fingerprinter import scrapy_shape_fingerprint
from scrapy_dedup.settings import DedupConfigError

FP_PATH = "scrapy_dedup.CanonicalRequestFingerprinter"
TOKEN = "0123456789abcdef0123456789abcdef"


def make(settings: dict | None = None):
    crawler = get_crawler(settings_dict={"REQUEST_FINGERPRINTER_CLASS": FP_PATH, **(settings or {})})
    fingerprinter = crawler.request_fingerprinter
    assert isinstance(fingerprinter, CanonicalRequestFingerprinter)
    return crawler, fingerprinter


class HeaderAwareFingerprinter:
    """A plugin's own fingerprinter: Scrapy's shape plus the Accept-Language header."""

    seen_urls: list[str] = []

    @classmethod
    def from_crawler(cls, crawler):
        return cls()

    def fingerprint(self, request):
        type(self).seen_urls.append(request.url)
        return fingerprint(request, include_headers=["Accept-Language"])


def test_same_shape_as_scrapy_on_an_already_canonical_url():
    _, fp = make()
    for request in (
        Request("http://example.com/a?a=1&b=2"),
        Request("http://example.com/p", method="POST", body=b"x=1\x00\xff"),
        FormRequest("http://example.com/form", formdata={"q": "é"}),
        Request("http://example.com/a%22b%5Cc"),
    ):
        ours = fp.fingerprint(request)
        assert len(ours) == 20
        assert ours == fingerprint(request)


def test_shape_function_matches_json_dumps_even_for_non_plain_strings():
    import hashlib
    import json

    for method, url, body in [("GET", 'odd"url\\é', b""), ("PATCH", "http://x/\x01", b"\x00")]:
        document = json.dumps({"method": method, "url": url, "body": body.hex(), "headers": {}}, sort_keys=True)
        assert scrapy_shape_fingerprint(method, url, body) == hashlib.sha1(document.encode()).digest()


def test_variants_of_one_page_share_a_fingerprint():
    _, fp = make()
    variants = [
        "http://Example.com/shop/item?id=7&utm_source=news",
        "http://example.com:80/shop/./item?utm_medium=x&id=7#reviews",
        f"http://example.com/shop/item;jsessionid={TOKEN}?id=7",
        "http://example.com/shop/%69tem?id=7&gclid=abc",
    ]
    prints = {fp.fingerprint(Request(u)) for u in variants}
    assert len(prints) == 1
    assert fp.fingerprint(Request("http://example.com/shop/item?id=8")) not in prints
    assert fp.fingerprint(Request("http://example.com/shop/item?id=7", method="POST")) not in prints


def test_scrapy_default_would_not_collapse_them():
    # the baseline this package exists for: Scrapy's fingerprint keeps tracking parameters
    assert fingerprint(Request("http://example.com/?id=7&utm_source=a")) != \
        fingerprint(Request("http://example.com/?id=7&utm_source=b"))


def test_canonical_url_is_public_and_uses_the_host_policy():
    _, fp = make({"DEDUP_URL_POLICY": {"strip_www": True},
                  "DEDUP_URL_POLICIES": {"keep.test": {"strip_tracking": False}}})
    assert fp.canonical_url(Request("http://www.example.com/?utm_source=x")) == "http://example.com/"
    assert fp.canonical_url(Request("http://a.keep.test/?utm_source=x")) == "http://a.keep.test/?utm_source=x"


def test_verbatim_url_opts_out():
    crawler, fp = make()
    request = Request("http://example.com/?utm_source=x&b=1&a=1", meta={"verbatim_url": True})
    assert fp.canonical_url(request) == request.url
    assert fp.fingerprint(request) != fp.fingerprint(Request("http://example.com/?a=1&b=1"))
    assert crawler.stats.get_value("dedup/url/canonicalized") is None


def test_stats_are_counted_once_per_request():
    crawler, fp = make()
    request = Request(f"http://example.com/a;jsessionid={TOKEN}?utm_source=x&b=1&a=1#top")
    for _ in range(3):
        fp.fingerprint(request)
        fp.canonical_url(request)
    unchanged = Request("http://example.com/plain")
    fp.fingerprint(unchanged)
    stats = crawler.stats
    assert stats.get_value("dedup/url/canonicalized") == 1
    assert stats.get_value("dedup/url/rule/strip_tracking") == 1
    assert stats.get_value("dedup/url/rule/strip_session") == 1
    assert stats.get_value("dedup/url/rule/sort_query") == 1
    assert stats.get_value("dedup/url/rule/drop_fragment") == 1
    assert stats.get_value("dedup/url/rule/strip_www") is None
    assert stats.get_value("dedup/url/unparsable") is None


def test_unparsable_url_is_counted_and_fingerprinted_as_is():
    crawler, fp = make()
    request = Request("http://exa mple.com/x")  # Scrapy accepts it; a host cannot contain a space
    assert fp.canonical_url(request) == request.url
    assert fp.fingerprint(request) == fingerprint(request)
    assert crawler.stats.get_value("dedup/url/unparsable") == 1


def test_cache_is_weak():
    _, fp = make()
    request = Request("http://example.com/?utm_source=x")
    fp.fingerprint(request)
    assert len(fp._cache) == 1
    del request
    gc.collect()
    assert len(fp._cache) == 0


def test_fallback_receives_the_canonical_url():
    HeaderAwareFingerprinter.seen_urls.clear()
    _, fp = make({"DEDUP_FALLBACK_REQUEST_FINGERPRINTER_CLASS": f"{__name__}.HeaderAwareFingerprinter"})
    assert isinstance(fp.fallback, HeaderAwareFingerprinter)
    en1 = Request("http://example.com/?utm_source=x&id=1", headers={"Accept-Language": "en"})
    en2 = Request("http://EXAMPLE.com/?id=1", headers={"Accept-Language": "en"})
    de = Request("http://example.com/?id=1", headers={"Accept-Language": "de"})
    assert fp.fingerprint(en1) == fp.fingerprint(en2)
    assert fp.fingerprint(en1) != fp.fingerprint(de)
    assert HeaderAwareFingerprinter.seen_urls == ["http://example.com/?id=1"] * 3


def test_fallback_to_scrapys_default_fingerprinter():
    crawler, fp = make({"DEDUP_FALLBACK_REQUEST_FINGERPRINTER_CLASS": "scrapy.utils.request.RequestFingerprinter"})
    assert isinstance(fp.fallback, RequestFingerprinter)
    request = Request("http://example.com/?utm_source=x&id=1")
    assert fp.fingerprint(request) == fingerprint(Request("http://example.com/?id=1"))


def test_fallback_cannot_be_itself():
    with pytest.raises(DedupConfigError, match="DEDUP_FALLBACK_REQUEST_FINGERPRINTER_CLASS"):
        make({"DEDUP_FALLBACK_REQUEST_FINGERPRINTER_CLASS": FP_PATH})


def test_a_fallback_that_does_not_load_fails_at_start_naming_the_setting():
    with pytest.raises(DedupConfigError, match="DEDUP_FALLBACK_REQUEST_FINGERPRINTER_CLASS.*no_such_module"):
        make({"DEDUP_FALLBACK_REQUEST_FINGERPRINTER_CLASS": "no_such_module.Fingerprinter"})


def test_bad_policy_fails_at_start_up_naming_setting_and_key():
    with pytest.raises(DedupConfigError, match=r"DEDUP_URL_POLICY.*strip_wwww"):
        make({"DEDUP_URL_POLICY": {"strip_wwww": True}})


def test_without_crawler_uses_the_default_policy():
    fp = CanonicalRequestFingerprinter()
    assert fp.canonical_url(Request("HTTP://Example.com/?utm_source=1")) == "http://example.com/"
