"""Every ``DEDUP_*`` setting given odd values, generated from the settings table (real crawls).

The oracle is the project's rule for configuration: a value either works (the crawl of a
small site ends with every unique page's item kept and no ERROR line) or fails at start-up
with an error naming the setting. Never a traceback mid-crawl, never a start-up crash that
leaves the user guessing which setting it was.
"""
from __future__ import annotations

import logging
import random
from typing import Any

import pytest
import scrapy
from pytest_twisted import inlineCallbacks

from scrapy_dedup.settings import SETTINGS, DedupConfigError
from tests import textgen
from tests.contentsite import template
from tests.support.crawl import run_crawl
from tests.support.localsite import LocalSite, Page


class _Opaque:
    def __repr__(self) -> str:
        return "_Opaque()"


#: values of every type and range a settings.py or a command line may hold
ODD_VALUES: tuple[Any, ...] = (
    "", " ", "nonsense", "-1", "0", "nan", "1e9999", b"bytes", 0, 1, -1, 2, 10**30, -(10**30), 0.5, -0.5, 1e300,
    float("nan"), float("inf"), float("-inf"), True, False, [], [1], ["a", 1], {}, {"a": 1}, {1: 2},
    {"example.test": 5}, {"example.test": {"nosuch": 1}}, {"": {}}, _Opaque(), 3 + 4j, "%(foo)s", "%d", "100%",
    '{"a": 1}', "{bad json", "::bad((", ["::bad(("], {"example.test": {"min_words": -1}},
    {"example.test": {"strip_selectors": ["::bad(("]}}, {"lowercase": "maybe"}, {"tracking_params": 5},
)


def _converter_outcome(setting, value) -> str:
    try:
        setting.convert(value, setting.name)
    except DedupConfigError as exc:
        assert setting.name in str(exc), (setting.name, value, str(exc))
        return "refused"
    return "accepted"


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.name)
def test_a_converter_refuses_with_the_settings_name_or_accepts(setting):
    """No converter lets another exception out (an OverflowError, a TypeError: a start-up traceback)."""
    outcomes = {repr(v): _converter_outcome(setting, v) for v in ODD_VALUES}
    assert "refused" in outcomes.values() or setting.name in ("DEDUP_REDIS_PARAMS",), outcomes


@pytest.mark.parametrize("setting", [s for s in SETTINGS if _converter_outcome(s, "x") == "accepted"
                                     and s.convert("x", s.name) == "x"], ids=lambda s: s.name)
def test_a_blank_string_is_no_path_or_field_name(setting):
    """DEDUP_AUDIT_FILE = " " wrote a file named " " in the working directory; a blank name is unset (or refused)."""
    try:
        value = setting.convert("  ", setting.name)
    except DedupConfigError as exc:
        assert setting.name in str(exc)
        return
    assert value in (None, (), setting.default)


# --- real crawls: an accepted value works, a refused one stops the crawl at start-up naming the setting ---

def _article(seed: int) -> str:
    return " ".join(textgen.article_words(random.Random(seed), 300))


#: three unique pages and an exact copy of the first (whichever of the two comes first is kept)
UNIQUE_PATHS = ("/b", "/c")
PAIR = ("/a", "/copy")
PAGES = {path: Page(template(_article(i), title=f"Article {i}")) for i, path in enumerate(("/a", *UNIQUE_PATHS))}
PAGES["/copy"] = Page(template(_article(0), title="Article 0 again"))


class OneItemPerPageSpider(scrapy.Spider):
    name = "adversary_settings"

    def parse(self, response):
        yield {"url": response.url, "html": response.text}


#: settings in force with the Redis ones (their group is "redis", or they name a Redis-only path)
REDIS_CONTEXT = {"DUPEFILTER_CLASS": "scrapy_dedup.dupefilters.RedisBloomDupeFilter", "DEDUP_CONTENT_BACKEND": "redis",
                 "DEDUP_REDIS_STARTUP_SECONDS": 1.0, "DEDUP_REDIS_RETRY_SECONDS": 1.0}


def _context(setting, redis_url: str | None) -> dict[str, Any]:
    if setting.group == "redis" or setting.name == "DEDUP_CONTENT_BACKEND":
        assert redis_url is not None
        return {**REDIS_CONTEXT, "DEDUP_REDIS_URL": redis_url}
    if setting.name == "DEDUP_TIMESTAMP_FIELD":
        return {"DEDUP_REPRESENTATIVE": "newest", "DEDUP_CONTENT_FIELD": "html"}
    # the setting's feature switched on, so that its value is used
    if setting.name.startswith("DEDUP_PARAGRAPHS_"):
        return {"DEDUP_PARAGRAPHS": True}
    if setting.name.startswith("DEDUP_BOILERPLATE_"):
        return {"DEDUP_BOILERPLATE": True}
    if setting.name.startswith("DEDUP_DUST_") and setting.name != "DEDUP_DUST_RULES":
        return {"DEDUP_DUST_LEARN": True}
    if setting.group == "seen":
        return {"JOBDIR": "jobdir"}
    return {}


class _ErrorLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage()[:300])


def _chain(exc: BaseException | None) -> str:
    """The error and those it was raised while handling, as a traceback shows them: an error Scrapy's
    start-up raises while closing the engine (2.19: "Engine slot not assigned") masks the first one."""
    messages = []
    while exc is not None:
        messages.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__
    return " <- ".join(messages)


@inlineCallbacks
def crawl_with(setting, value, redis_url: str | None, tmp_path):
    """The crawl's outcome: ("refused", message) or ("crawled", kept paths, ERROR lines, finish reason)."""
    settings = {"ADDONS": {"scrapy_dedup.Addon": 0}, **_context(setting, redis_url), setting.name: value}
    if isinstance(value, str) and setting.name.endswith(("_FILE", "_OUT")) and value.strip():
        settings[setting.name] = str(tmp_path / value)  # a name, not a place anywhere on the machine
    if "JOBDIR" in settings:
        settings["JOBDIR"] = str(tmp_path / settings["JOBDIR"])
    errors = _ErrorLines()
    logging.getLogger().addHandler(errors)
    try:
        with LocalSite({("shop.test", path): page for path, page in PAGES.items()}) as site:
            crawler = yield run_crawl(OneItemPerPageSpider, settings,
                                      start_urls=[site.url("shop.test", p) for p in PAGES])
    except Exception as exc:  # noqa: BLE001 - what reached the user is the point
        return ("refused", _chain(exc))
    finally:
        logging.getLogger().removeHandler(errors)
    from urllib.parse import urlsplit

    kept = sorted(urlsplit(item["url"]).path for item in crawler.items)
    return ("crawled", kept, errors.lines, crawler.stats.get_value("finish_reason"))


def check_outcome(setting, value, outcome) -> None:
    if outcome[0] == "refused":
        assert setting.name in outcome[1], f"{setting.name}={value!r}: start-up error not naming it: {outcome[1]}"
        return
    _, kept, error_lines, reason = outcome
    assert reason == "finished", f"{setting.name}={value!r}: crawl ended {reason!r}, errors {error_lines}"
    assert not error_lines, f"{setting.name}={value!r}: ERROR lines mid-crawl: {error_lines}"
    assert set(UNIQUE_PATHS) <= set(kept) and set(PAIR) & set(kept), f"{setting.name}={value!r}: pages lost: {kept}"


def _accepted(setting, value) -> bool:
    try:
        setting.convert(value, setting.name)
    except DedupConfigError:
        return False
    return True


#: defects the matrix found in code others own, reported rather than fixed here: each fails until fixed
#: (keyed by the value's repr: the values include unhashable ones)
KNOWN: dict[tuple[str, str], str] = {
    # (setting, repr(value)): why a case is a known defect, run as a strict xfail until it is fixed
}


def _cases():
    """Each value the setting's converter accepts (it must then work), and its first refused one (the refusal
    must reach the user from a real start-up: the converter test has the others)."""
    for setting in SETTINGS:
        refused = [v for v in ODD_VALUES if not _accepted(setting, v)]
        for value in [v for v in ODD_VALUES if _accepted(setting, v)] + refused[:1]:
            marks = [pytest.mark.redis] if setting.group == "redis" or setting.name == "DEDUP_CONTENT_BACKEND" else []
            known = KNOWN.get((setting.name, repr(value)))
            if known:
                marks.append(pytest.mark.xfail(strict=True, reason=known))
            yield pytest.param(setting, value, id=f"{setting.name}={value!r}", marks=[*marks, pytest.mark.slow])


@pytest.mark.crawl
@pytest.mark.parametrize(("setting", "value"), list(_cases()))
@inlineCallbacks
def test_an_odd_value_works_or_fails_at_start_up_naming_the_setting(setting, value, request, tmp_path):
    redis_url = request.getfixturevalue("redis_url") if request.node.get_closest_marker("redis") else None
    outcome = yield crawl_with(setting, value, redis_url, tmp_path)
    check_outcome(setting, value, outcome)


#: the values of the matrix above that found a defect (each failed before its fix), in the default run
FOUND = [("DEDUP_BLOOM_CAPACITY", float("inf")), ("DEDUP_BLOOM_CAPACITY", 10**30),
         ("DEDUP_FALLBACK_REQUEST_FINGERPRINTER_CLASS", "nonsense"), ("DEDUP_REDIS_TTL", 10**30),
         ("DEDUP_REDIS_PARAMS", {1: 2}), ("DEDUP_REDIS_STARTUP_SECONDS", 1e300),
         ("DEDUP_REDIS_INDEX_KEY", "%(foo)s"), ("DEDUP_REDIS_INDEX_KEY", "100%")]


@pytest.mark.crawl
@pytest.mark.parametrize(("name", "value"), FOUND, ids=[f"{n}={v!r}" for n, v in FOUND])
@inlineCallbacks
def test_the_values_that_found_defects_fail_at_start_up_naming_the_setting(name, value, request, tmp_path):
    from scrapy_dedup.settings import BY_NAME

    setting = BY_NAME[name]
    redis_url = request.getfixturevalue("redis_url") if setting.group == "redis" else None
    outcome = yield crawl_with(setting, value, redis_url, tmp_path)
    check_outcome(setting, value, outcome)


@pytest.mark.parametrize("capacity", [10**30, 10**18])
def test_a_paragraph_filter_too_large_to_allocate_is_refused_naming_the_setting(capacity):
    """The local paragraph seen set is allocated whole at start: too large for the machine (an OverflowError or
    a MemoryError) is a configuration error naming the setting, not a crash of the spider's opening."""
    from scrapy.utils.test import get_crawler

    from scrapy_dedup.extensions import DedupExtension

    crawler = get_crawler(scrapy.Spider, {"DEDUP_PARAGRAPHS": True, "DEDUP_PARAGRAPHS_CAPACITY": capacity})
    with pytest.raises(DedupConfigError, match="DEDUP_PARAGRAPHS_CAPACITY") as raised:
        DedupExtension(crawler).open_content()
    assert "bytes" in str(raised.value)
