"""Real crawls where the add-on meets another fingerprinter: both behaviours hold, in either add-on order.

- URL strings that differ only by tracking parameters (and escapes, dot segments, port) are
  fetched once: ours canonicalizes.
- Requests that differ only by what the other fingerprinter looks at are both fetched: a
  project's (or a plugin add-on's) fingerprinter that hashes ``Accept-Language``, checked on
  the local server's side; scrapy-zyte-api's fingerprinter, which hashes the Zyte API
  parameters (``geolocation``), checked on the side of a local stand-in for the Zyte API.

Each has baselines showing both differences are real: without ours the URL variants are
fetched again, without the other fingerprinter the two languages (or countries) merge.
"""
from __future__ import annotations

from collections import Counter
from urllib.parse import parse_qsl, urlsplit

import pytest
import scrapy
from pytest_twisted import inlineCallbacks

from tests.support.crawl import run_crawl
from tests.support.fingerprinters import LANGUAGE_FINGERPRINTER
from tests.support.localsite import LocalSite, Page
from tests.support import require_module

ADDON = "scrapy_dedup.Addon"
LANGUAGE_ADDON = "tests.support.fingerprinters.LanguageAddon"
REPLACING_ADDON = "tests.support.fingerprinters.ReplacingLanguageAddon"

# URL strings of two pages; /item?id=1 in four forms, /item?id=2 in two
VARIANTS = [
    "/item?id=1",
    "/item?id=1&utm_source=mail",
    "/./item?utm_medium=social&id=1&gclid=abc",
    "/%69tem?id=1#reviews",
    "/item?id=2",
    "/item?fbclid=x&id=2",
]
PAGES = {"1", "2"}


def logical_page(path: str) -> str:
    """The page a raw path asks for, as the server reads it: the id parameter."""
    return dict(parse_qsl(urlsplit(path).query)).get("id", "")


class LanguageSpider(scrapy.Spider):
    """Every variant once per language; nothing is dont_filter, so the dupefilter decides."""

    name = "languages"
    languages = ("en", "de")

    async def start(self):  # Scrapy >= 2.13
        for lang in self.languages:
            for path in VARIANTS:
                yield scrapy.Request(self.base + path, headers={"Accept-Language": lang})

    def parse(self, response):
        return None


def router(host: str, path: str) -> Page | None:
    page = logical_page(path)
    return Page(f"<h1>item {page}</h1>") if page in PAGES else None


@inlineCallbacks
def crawl_languages(settings: dict):
    with LocalSite(router, record_headers=True) as site:
        crawler = yield run_crawl(LanguageSpider, settings, base=f"http://shop.test:{site.port}")
    fetched = Counter((logical_page(path), headers.get("Accept-Language")) for _, path, headers in site.requests)
    return fetched, crawler


ONCE_PER_PAGE_AND_LANGUAGE = Counter({(page, lang): 1 for page in PAGES for lang in ("en", "de")})

COMPOSED = {
    "project fingerprinter in settings.py": {"ADDONS": {ADDON: 0}, "REQUEST_FINGERPRINTER_CLASS": LANGUAGE_FINGERPRINTER},
    "composing add-on runs first": {"ADDONS": {LANGUAGE_ADDON: 0, ADDON: 10}},
    "composing add-on runs last": {"ADDONS": {ADDON: 0, LANGUAGE_ADDON: 10}},
    "replacing add-on runs first": {"ADDONS": {REPLACING_ADDON: 0, ADDON: 10}},
    "replacing add-on runs last": {"ADDONS": {ADDON: 0, REPLACING_ADDON: 10}},
}


@pytest.mark.crawl
@pytest.mark.parametrize("case", COMPOSED)
@inlineCallbacks
def test_canonical_urls_merge_and_the_header_still_counts(case):
    fetched, crawler = yield crawl_languages(COMPOSED[case])
    assert fetched == ONCE_PER_PAGE_AND_LANGUAGE
    stats = crawler.stats
    assert stats.get_value("dupefilter/filtered") == 2 * (len(VARIANTS) - len(PAGES))
    assert stats.get_value("dedup/url/rule/strip_tracking") == 2 * 3  # each language: 3 variants carry tracking parameters


@pytest.mark.crawl
@inlineCallbacks
def test_baseline_the_header_fingerprinter_alone_fetches_every_variant():
    fetched, _ = yield crawl_languages({"REQUEST_FINGERPRINTER_CLASS": LANGUAGE_FINGERPRINTER})
    assert set(fetched) == set(ONCE_PER_PAGE_AND_LANGUAGE)
    # Scrapy's URL canonicalization (w3lib) merges the escape and fragment variant, not the tracking ones
    assert fetched[("1", "en")] == 3 and fetched[("2", "de")] == 2


@pytest.mark.crawl
@inlineCallbacks
def test_baseline_ours_alone_merges_the_languages():
    fetched, _ = yield crawl_languages({"ADDONS": {ADDON: 0}})
    assert sum(fetched.values()) == len(PAGES)  # one language per page: the header is not in our fingerprint


# --- scrapy-zyte-api, its real add-on and fingerprinter, against a local Zyte API stand-in

def zyte_settings(addons: dict, api_url: str, **extra) -> dict:
    return {
        **extra,
        "ADDONS": addons,
        "ZYTE_API_KEY": "test-key",  # the stand-in does not check it
        "ZYTE_API_URL": api_url,
        "CONCURRENT_REQUESTS": 4,
    }


class CountrySpider(scrapy.Spider):
    """Every variant once per country, sent through Zyte API with a geolocation parameter."""

    name = "countries"

    async def start(self):  # Scrapy >= 2.13
        for country in ("US", "DE"):
            for path in VARIANTS:
                yield scrapy.Request("http://shop.test" + path, meta={"zyte_api_automap": {"geolocation": country}})

    def parse(self, response):
        return None


@inlineCallbacks
def crawl_countries(addons: dict, **extra):
    require_module("scrapy_zyte_api", "pip install scrapy-zyte-api (Python >= 3.10)")
    from tests.support.zyte_api import ZyteApiStub

    with ZyteApiStub() as api:
        crawler = yield run_crawl(CountrySpider, zyte_settings(addons, api.api_url, **extra))
    fetched = Counter((logical_page(q["url"]), q.get("geolocation")) for q in api.requests)
    return fetched, crawler


ZYTE_ADDON = "scrapy_zyte_api.Addon"
ONCE_PER_PAGE_AND_COUNTRY = Counter({(page, country): 1 for page in PAGES for country in ("US", "DE")})


@pytest.mark.crawl
@pytest.mark.parametrize("order", ["ours first", "ours last"])
@inlineCallbacks
def test_scrapy_zyte_api_in_either_order(order):
    # scrapy-zyte-api's documented value is 500; ours is documented as 0 (ours first)
    addons = {ADDON: 0, ZYTE_ADDON: 500} if order == "ours first" else {ZYTE_ADDON: 500, ADDON: 600}
    fetched, crawler = yield crawl_countries(addons)
    assert fetched == ONCE_PER_PAGE_AND_COUNTRY
    assert crawler.stats.get_value("dupefilter/filtered") == 2 * (len(VARIANTS) - len(PAGES))


@pytest.mark.crawl
@inlineCallbacks
def test_baseline_scrapy_zyte_api_alone_fetches_every_variant():
    fetched, _ = yield crawl_countries({ZYTE_ADDON: 500})
    assert set(fetched) == set(ONCE_PER_PAGE_AND_COUNTRY)
    assert fetched[("1", "US")] == 3  # as with Scrapy's fingerprinter: only the tracking variants differ



@pytest.mark.crawl
@inlineCallbacks
def test_without_the_extension_scrapy_zyte_api_after_ours_hashes_raw_urls():
    """What OutermostCanonicalFingerprinter is for: scrapy-zyte-api's add-on, run after ours, keeps ours
    only as its fallback, which it never calls for Zyte API requests."""
    fetched, _ = yield crawl_countries(
        {ADDON: 0, ZYTE_ADDON: 500},
        EXTENSIONS={"scrapy_dedup.fingerprinter.OutermostCanonicalFingerprinter": None})
    assert fetched[("1", "US")] == 3


@pytest.mark.crawl
@inlineCallbacks
def test_baseline_without_scrapy_zyte_apis_fingerprinter_the_countries_merge():
    # an explicit fallback displaces scrapy-zyte-api's fingerprinter (with a warning): geolocation no longer counts
    fetched, _ = yield crawl_countries({ZYTE_ADDON: 500, ADDON: 600},
                                       DEDUP_FALLBACK_REQUEST_FINGERPRINTER_CLASS="scrapy.utils.request.RequestFingerprinter")
    assert sum(fetched.values()) == len(PAGES)
