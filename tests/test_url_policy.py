"""UrlPolicy validation, the generic per-domain lookup, and the settings that build them."""
from __future__ import annotations

import pytest

from scrapy_dedup.settings import DedupConfigError, read_settings
from scrapy_dedup.url.policy import SWITCHES, DomainMap, PolicyMap, UrlPolicy


def test_defaults_match_the_issue():
    policy = UrlPolicy()
    assert policy.switches() == {
        "strip_tracking": True, "strip_session": True, "sort_query": True, "drop_fragment": True,
        "strip_trailing_slash": False, "strip_www": False, "ignore_scheme": False, "drop_index": False,
    }
    assert list(SWITCHES) == list(policy.switches())


def test_from_mapping_overrides_and_extends():
    base = UrlPolicy.from_mapping({"strip_www": True, "tracking_params": ["a_id", "trk_*"]})
    assert base.strip_www is True and base.tracking_params == ("a_id", "trk_*")
    child = UrlPolicy.from_mapping({"sort_query": False, "tracking_params": "B_ID, a_id"}, base=base)
    assert child.strip_www is True and child.sort_query is False
    assert child.tracking_params == ("a_id", "b_id", "trk_*")  # extended, lowercased, deduplicated


def test_policy_is_frozen_and_hashable():
    policy = UrlPolicy()
    with pytest.raises(AttributeError):
        policy.strip_www = True  # type: ignore[misc]
    assert {policy: 1}[UrlPolicy()] == 1


@pytest.mark.parametrize("mapping, words", [
    ({"strip_wwww": True}, ["MY_SETTING", "'strip_wwww'"]),
    ({"strip_www": "yes"}, ["MY_SETTING", "'strip_www'", "True or False"]),
    ({"strip_www": 1}, ["MY_SETTING", "'strip_www'"]),
    ({"tracking_params": 5}, ["MY_SETTING", "tracking_params"]),
    ({"session_params": [1]}, ["MY_SETTING", "session_params"]),
    ({"tracking_params": ["a*b"]}, ["MY_SETTING", "'a*b'"]),
    ({"tracking_params": ["*"]}, ["MY_SETTING"]),
    ({"tracking_params": ["a=b"]}, ["MY_SETTING"]),
])
def test_from_mapping_errors_name_setting_and_key(mapping, words):
    with pytest.raises(ValueError) as info:
        UrlPolicy.from_mapping(mapping, setting="MY_SETTING")
    for word in words:
        assert word in str(info.value)


def test_from_mapping_rejects_non_dict():
    with pytest.raises(ValueError, match="MY_SETTING"):
        UrlPolicy.from_mapping(["strip_www"], setting="MY_SETTING")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- DomainMap

def test_domain_map_most_specific_wins():
    m = DomainMap("default", {"example.com": "site", "shop.example.com": "shop"})
    assert m.lookup("example.com") == "site"
    assert m.lookup("www.example.com") == "site"
    assert m.lookup("shop.example.com") == "shop"
    assert m.lookup("eu.shop.example.com") == "shop"
    assert m.lookup("notexample.com") == "default"
    assert m.lookup("example.com.evil.org") == "default"
    assert m.lookup("com") == "default"
    assert m.lookup("") == "default"


def test_domain_map_normalizes_configured_domains_and_looked_up_hosts():
    m = DomainMap(0, {".Example.COM.": 1, "bücher.de": 2})
    assert m.lookup("www.example.com") == 1
    assert m.lookup("WWW.EXAMPLE.COM.") == 1
    assert m.lookup("xn--bcher-kva.de") == 2  # configured as Unicode, hosts come as punycode


def test_domain_map_ip_addresses_match_exactly():
    m = DomainMap("default", {"10.0.0.1": "ip", "0.0.1": "suffix-like", "::1": "v6"})
    assert m.lookup("10.0.0.1") == "ip"
    assert m.lookup("10.0.0.2") == "default"
    assert m.lookup("1.0.0.1") == "default"  # no label walking on an IP address
    assert m.lookup("[::1]") == "v6"


def test_domain_map_caches_per_host_and_stays_bounded():
    m = DomainMap("default", {"example.com": "site"}, max_cache=3)
    for i in range(10):
        assert m.lookup(f"h{i}.example.com") == "site"
        assert len(m._cache) <= 3
    m.per_domain["example.com"] = "changed"  # the cached answer is returned for a cached host
    assert m.lookup("h9.example.com") == "site"


# --------------------------------------------------------------------------- PolicyMap

def test_policy_map_domains_override_the_default_not_the_builtin():
    pm = PolicyMap.from_settings_values({"strip_www": True, "tracking_params": ["x_*"]},
                                        {"shop.test": {"strip_tracking": False, "tracking_params": ["y"]}})
    assert pm.default.strip_www is True
    shop = pm.lookup("eu.shop.test")
    assert shop.strip_www is True and shop.strip_tracking is False
    assert shop.tracking_params == ("x_*", "y")
    assert pm.lookup("other.test") is pm.default


def test_policy_map_errors_name_the_domain():
    with pytest.raises(ValueError, match=r"DEDUP_URL_POLICIES\['shop.test'\].*'strip_trackin'"):
        PolicyMap.from_settings_values({}, {"shop.test": {"strip_trackin": False}})
    with pytest.raises(ValueError, match="DEDUP_URL_POLICIES"):
        PolicyMap.from_settings_values({}, {"": {}})


# --------------------------------------------------------------------------- settings.py integration

def test_read_settings_accepts_empty_and_valid_policies():
    read_settings({})
    cfg = read_settings({"DEDUP_URL_POLICY": {"strip_www": True},
                         "DEDUP_URL_POLICIES": {"Shop.Test": {"strip_tracking": False}}})
    pm = PolicyMap.from_settings_values(cfg.url_policy, cfg.url_policies)
    assert pm.lookup("eu.shop.test").strip_tracking is False
    assert pm.lookup("eu.shop.test").strip_www is True


def test_read_settings_rejects_a_typo_naming_setting_and_key():
    with pytest.raises(DedupConfigError) as info:
        read_settings({"DEDUP_URL_POLICY": {"strip_wwww": True}})
    assert "DEDUP_URL_POLICY" in str(info.value) and "strip_wwww" in str(info.value)
    with pytest.raises(DedupConfigError) as info:
        read_settings({"DEDUP_URL_POLICIES": {"shop.test": {"sort_query": "no"}}})
    assert "DEDUP_URL_POLICIES" in str(info.value) and "sort_query" in str(info.value)


def test_read_settings_accepts_json_strings_from_the_command_line():
    cfg = read_settings({"DEDUP_URL_POLICY": '{"strip_www": true}'})
    assert UrlPolicy.from_mapping(cfg.url_policy).strip_www is True
