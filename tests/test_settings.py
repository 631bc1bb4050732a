"""The DEDUP_* settings table: defaults, validation at start-up, and the settings reference kept in sync."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from scrapy_dedup.settings import SETTINGS, DedupConfigError, markdown_table, read_settings

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "settings.md"


def test_defaults_are_valid_and_read_once_into_a_frozen_object():
    cfg = read_settings({})
    for setting in SETTINGS:
        assert setting.name in cfg
    assert cfg.hamming_threshold == 3 and cfg.bands == 4 and cfg.shingle_size == 5
    assert cfg.fingerprint_bits == 64 and cfg.bloom_error_rate == 1e-6
    with pytest.raises(AttributeError):
        cfg.bands = 5


def test_the_settings_reference_table_matches_the_code():
    text = REFERENCE.read_text(encoding="utf-8")
    block = re.search(r"<!-- settings-table:start -->\n(.*?)\n<!-- settings-table:end -->", text, re.S)
    assert block, "docs/settings.md lost its settings-table markers"
    assert block.group(1) == markdown_table(), "regenerate it: python -m scrapy_dedup.settings docs/settings.md"


def test_the_generator_rewrites_the_table_between_its_markers_and_refuses_a_page_without_them(tmp_path):
    from scrapy_dedup.settings import update_table

    page = tmp_path / "settings.md"
    page.write_text("# Settings\n\n<!-- settings-table:start -->\nstale\n<!-- settings-table:end -->\nafter\n",
                    encoding="utf-8")
    update_table(str(page))
    assert page.read_text(encoding="utf-8") == (
        "# Settings\n\n<!-- settings-table:start -->\n" + markdown_table() + "\n<!-- settings-table:end -->\nafter\n")
    other = tmp_path / "README.md"
    other.write_text("no table here\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no settings-table markers"):
        update_table(str(other))
    assert other.read_text(encoding="utf-8") == "no table here\n"


def test_every_setting_is_documented_and_prefixed():
    for setting in SETTINGS:
        assert setting.name.startswith("DEDUP_")
        assert len(setting.doc) > 20, setting.name


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"DEDUP_BLOOM_ERROR_RATE": 0}, "DEDUP_BLOOM_ERROR_RATE"),
        ({"DEDUP_BLOOM_ERROR_RATE": "often"}, "DEDUP_BLOOM_ERROR_RATE"),
        ({"DEDUP_BLOOM_CAPACITY": -5}, "DEDUP_BLOOM_CAPACITY"),
        ({"DEDUP_BLOOM_CAPACITY": 2.5}, "DEDUP_BLOOM_CAPACITY"),
        ({"DEDUP_HAMMING_THRESHOLD": 4}, "DEDUP_BANDS"),  # 4 bands cannot guarantee k=4
        ({"DEDUP_FINGERPRINT_BITS": 96}, "DEDUP_FINGERPRINT_BITS"),
        ({"DEDUP_MIN_WORDS": 2}, "DEDUP_MIN_WORDS"),
        ({"DEDUP_CONTENT_ACTION": "delete"}, "DEDUP_CONTENT_ACTION"),
        ({"DEDUP_CONTENT_BACKEND": "mongo"}, "DEDUP_CONTENT_BACKEND"),
        ({"DEDUP_REDIS_URL": "http://localhost"}, "DEDUP_REDIS_URL"),
        ({"DEDUP_ENABLED": "maybe"}, "DEDUP_ENABLED"),
        ({"DEDUP_STRIP_TAGS": [1, 2]}, "DEDUP_STRIP_TAGS"),
        ({"DEDUP_CONTENT_POLICIES": {"shop.test": {"colour": 1}}}, "DEDUP_CONTENT_POLICIES.*colour"),
        ({"DEDUP_CONTENT_POLICIES": {"shop.test": {"min_words": "x"}}}, "DEDUP_CONTENT_POLICIES.*min_words"),
        ({"DEDUP_BLOOM_CAPACTY": 10}, "unknown setting DEDUP_BLOOM_CAPACTY.*DEDUP_BLOOM_CAPACITY"),
    ],
)
def test_bad_values_fail_naming_the_setting(settings, message):
    with pytest.raises(DedupConfigError, match=message):
        read_settings(settings)


def test_values_from_the_command_line_are_converted():
    cfg = read_settings({"DEDUP_ENABLED": "0", "DEDUP_BANDS": "6", "DEDUP_HAMMING_THRESHOLD": "5",
                         "DEDUP_STRIP_SELECTORS": ".ad, .promo",
                         "DEDUP_CONTENT_POLICIES": '{"Shop.Test.": {"min_words": 30}}'})
    assert cfg.enabled is False and cfg.bands == 6 and cfg.hamming_threshold == 5
    assert cfg.strip_selectors == (".ad", ".promo")
    assert cfg.content_policies == {"shop.test": {"min_words": 30}}


def test_scrapy_settings_object_is_accepted():
    from scrapy.settings import Settings

    cfg = read_settings(Settings({"DEDUP_REDIS_URL": "redis://:secret@127.0.0.1:6379/1"}))
    assert cfg.redis_url.endswith("/1")
    with pytest.raises(DedupConfigError) as info:
        read_settings(Settings({"DEDUP_REDIS_URL": "ftp://:secret@host/"}))
    assert "secret" not in str(info.value)


@pytest.mark.parametrize("typo,meant", [
    ("DEDUP_CONTENT_ACTON", "DEDUP_CONTENT_ACTION"),  # was DEDUP_CONTENT_BACKEND: the first close name
    ("DEDUP_BLOOM_CAPACTY", "DEDUP_BLOOM_CAPACITY"),
    ("DEDUP_REDIS_URLS", "DEDUP_REDIS_URL"),
    ("DEDUP_HAMMING_TRESHOLD", "DEDUP_HAMMING_THRESHOLD"),
])
def test_an_unknown_setting_names_the_closest_known_one(typo, meant):
    with pytest.raises(DedupConfigError, match=f"unknown setting {typo}; did you mean {meant}\\?"):
        read_settings({typo: 1})


@pytest.mark.parametrize("given,url,source", [
    ({}, "redis://localhost:6379/0", "default"),
    ({"REDIS_URL": "redis://r.test:6380/2"}, "redis://r.test:6380/2", "REDIS_URL"),
    ({"REDIS_HOST": "r.test"}, "redis://r.test:6379/0", "REDIS_HOST/REDIS_PORT"),
    ({"REDIS_HOST": "r.test", "REDIS_PORT": 7000}, "redis://r.test:7000/0", "REDIS_HOST/REDIS_PORT"),
    ({"REDIS_PORT": "7001"}, "redis://localhost:7001/0", "REDIS_HOST/REDIS_PORT"),
    ({"REDIS_HOST": "::1"}, "redis://[::1]:6379/0", "REDIS_HOST/REDIS_PORT"),
    ({"REDIS_URL": "redis://a.test/0", "REDIS_HOST": "b.test"}, "redis://a.test/0", "REDIS_URL"),
    ({"DEDUP_REDIS_URL": "redis://mine.test/1", "REDIS_URL": "redis://a.test/0"}, "redis://mine.test/1",
     "DEDUP_REDIS_URL"),
])
def test_the_redis_url_falls_back_to_scrapy_redis_settings(given, url, source):
    cfg = read_settings(given)
    assert cfg.redis_url == url
    assert cfg.source_of("DEDUP_REDIS_URL") == source


def test_redis_params_fall_back_to_scrapy_redis_settings_and_errors_name_the_source():
    cfg = read_settings({"REDIS_PARAMS": {"socket_timeout": 5}})
    assert cfg.redis_params == {"socket_timeout": 5}
    assert cfg.source_of("DEDUP_REDIS_PARAMS") == "REDIS_PARAMS"
    assert read_settings({"REDIS_PARAMS": {"a": 1}, "DEDUP_REDIS_PARAMS": {"b": 2}}).redis_params == {"b": 2}
    with pytest.raises(DedupConfigError, match="^REDIS_URL"):
        read_settings({"REDIS_URL": "http://not-redis.test/"})


def test_every_error_is_reported_at_once_one_line_each():
    """Before, read_settings raised at the first bad value: a user fixed one mistake per start."""
    from scrapy_dedup.settings import DedupConfigError, read_settings

    with pytest.raises(DedupConfigError) as caught:
        read_settings({"DEDUP_BLOOM_CAPACITY": 0, "DEDUP_CONTENT_ACTION": "zap", "DEDUP_CANARY_SIZE": 1,
                       "DEDUP_BLOM_ERROR_RATE": 1e-6})
    errors = caught.value.errors
    assert len(errors) == 4, errors
    assert [e.split()[0] for e in errors[:3]] == ["DEDUP_BLOOM_CAPACITY", "DEDUP_CONTENT_ACTION", "DEDUP_CANARY_SIZE"]
    assert errors[3] == "unknown setting DEDUP_BLOM_ERROR_RATE; did you mean DEDUP_BLOOM_ERROR_RATE?"
    assert str(caught.value).splitlines() == ["4 configuration errors:", *(f"  {e}" for e in errors)]
    with pytest.raises(DedupConfigError) as one:  # a single error reads as before
        read_settings({"DEDUP_CONTENT_ACTION": "zap"})
    assert str(one.value).startswith("DEDUP_CONTENT_ACTION must be one of") and len(one.value.errors) == 1
