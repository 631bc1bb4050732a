"""Per-domain toggles (DEDUP_URL_POLICIES, DEDUP_CONTENT_POLICIES) against odd host spellings.

A matrix of how a domain may be written in settings (case, dots around, spaces, IDN in
Unicode or punycode, IP literals) against how a host may appear in a request's URL (case,
trailing dot, port, subdomain, IDN): the policy applies exactly when the host is the domain
or under it. A key that can match no host (a port, a scheme, a path, a wildcard) fails at
start-up naming the setting, rather than being silently ignored.
"""
from __future__ import annotations

import pytest
from scrapy import Spider
from scrapy.http import HtmlResponse, Request
from scrapy.utils.test import get_crawler

from scrapy_dedup.extensions import DedupExtension
from scrapy_dedup.fingerprinter import CanonicalRequestFingerprinter
from scrapy_dedup.settings import DedupConfigError
from tests.contentsite import product_text, template

#: how a user may write the domain shop.test in a settings dict
SHOP_KEYS = ("shop.test", "SHOP.TEST", "Shop.Test.", ".shop.test", " shop.test ", "shop.test.")
#: how a URL may name a host, and whether it is shop.test or under it
SHOP_HOSTS = {
    "shop.test": True, "SHOP.test": True, "shop.test.": True, "shop.test:8080": True, "www.shop.test": True,
    "WWW.Shop.Test.:81": True, "eu.www.shop.test": True,
    "notshop.test": False, "shop.test.evil.test": False, "test": False, "shop.tes": False,
}
IDN_KEYS = ("bücher.test", "BÜCHER.test", "xn--bcher-kva.test", "XN--BCHER-KVA.TEST")
IDN_HOSTS = {"bücher.test": True, "BÜCHER.test": True, "xn--bcher-kva.test": True, "www.bücher.test": True,
             "buecher.test": False, "bucher.test": False}
IP_CASES = [  # (key, URL host, applies)
    ("127.0.0.1", "127.0.0.1", True), ("127.0.0.1", "127.0.0.1:8080", True), ("127.0.0.1", "127.0.0.2", False),
    ("0.0.1", "127.0.0.1", False),  # an IP matches only exactly, never as a "parent domain"
    ("::1", "[::1]", True), ("[::1]", "[::1]:8080", True), ("[::1]", "[::2]", False),
    ("[2001:DB8::1]", "[2001:db8::1]", True),
]
#: keys that name no host: refused at start-up
UNMATCHABLE_KEYS = ("shop.test:8080", "http://shop.test", "https://shop.test/", "shop.test/path", "*.shop.test",
                    "shop test", "shop.test?x=1", "user@shop.test")

CASES = ([(k, h, a) for k in SHOP_KEYS for h, a in SHOP_HOSTS.items()]
         + [(k, h, a) for k in IDN_KEYS for h, a in IDN_HOSTS.items()] + IP_CASES)


def _fingerprinter(settings: dict) -> CanonicalRequestFingerprinter:
    return CanonicalRequestFingerprinter.from_crawler(get_crawler(Spider, settings))


@pytest.mark.parametrize(("key", "host", "applies"), CASES, ids=[f"{k!r}->{h}" for k, h, _ in CASES])
def test_a_url_policy_applies_to_its_domain_however_either_is_written(key, host, applies):
    fingerprinter = _fingerprinter({"DEDUP_URL_POLICIES": {key: {"sort_query": False}}})
    one, other = Request(f"http://{host}/x?b=2&a=1"), Request(f"http://{host}/x?a=1&b=2")
    kept_apart = fingerprinter.fingerprint(one) != fingerprinter.fingerprint(other)
    assert kept_apart == applies


@pytest.mark.parametrize(("key", "host", "applies"), CASES, ids=[f"{k!r}->{h}" for k, h, _ in CASES])
def test_a_content_policy_applies_to_its_domain_however_either_is_written(key, host, applies):
    crawler = get_crawler(Spider, {"DEDUP_CONTENT_POLICIES": {key: {"min_words": 100_000}}})
    extension = DedupExtension.from_crawler(crawler).open_content()
    try:
        url = Request(f"http://{host}/p").url  # as Scrapy writes it (punycode), the URL its response gets
        response = HtmlResponse(url, body=template(product_text(1)).encode(), encoding="utf-8")
        degenerate = extension.fingerprint_of_response(response) is None  # too few words under the policy
    finally:
        extension.close()
    assert degenerate == applies


@pytest.mark.parametrize("setting", ["DEDUP_URL_POLICIES", "DEDUP_CONTENT_POLICIES"])
@pytest.mark.parametrize("key", UNMATCHABLE_KEYS)
def test_a_domain_key_that_names_no_host_fails_at_start_up_naming_the_setting(setting, key):
    overrides = {"sort_query": False} if setting == "DEDUP_URL_POLICIES" else {"min_words": 100}
    with pytest.raises(DedupConfigError, match=setting):
        crawler = get_crawler(Spider, {setting: {key: overrides}})
        _fingerprinter(crawler.settings.copy_to_dict())
        DedupExtension.from_crawler(crawler)
