"""One source of engine parameters: the crawl's DEDUP_* settings and the audit's config keys agree."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrapy_dedup.audit.config import AuditConfigError, build_config
from scrapy_dedup.content.params import ENGINE_PARAMS
from scrapy_dedup.settings import DedupConfigError, read_settings


def crawl(values: dict):
    try:
        cfg = read_settings({f"DEDUP_{k.upper()}": v for k, v in values.items()})
    except DedupConfigError:
        return "refused"
    return {p.key: cfg[f"DEDUP_{p.key.upper()}"] for p in ENGINE_PARAMS}


def audit(values: dict):
    try:
        cfg = build_config(values)
    except AuditConfigError:
        return "refused"
    return {p.key: getattr(cfg, p.key) for p in ENGINE_PARAMS}


@pytest.mark.parametrize("values", [
    {"verify_min_jaccard": 0.0},  # was accepted by the crawl, refused by the audit
    {"verify_max_diff": 2.5},  # likewise
    {"verify_radius": 2},  # with the default threshold 3: was refused by the crawl, accepted by the audit
    {"verify_radius": 2, "sketch_size": 0},  # no verification: the radius does not matter
    {"hamming_threshold": 4, "bands": 4},
    {"hamming_threshold": 4, "bands": 5},
    {"min_words": 4},
    {"min_words": 5},
    {"fingerprint_bits": 96},
    {"fingerprint_bits": 128, "bands": 100},
    {"verify_jaccard": 0.0},
    {"verify_jaccard": 1.0, "verify_min_jaccard": 1.0},
    {"verify_min_jaccard": 0.9},
    {"strip_tags": "nav, footer"},
    {"max_bytes": 1023},
    {"shingle_size": "7"},
])
def test_the_crawl_and_the_audit_accept_and_refuse_the_same_values(values):
    assert crawl(values) == audit(values)


def test_the_drifted_values_are_judged_the_same_way():
    assert crawl({"verify_min_jaccard": 0.0}) != "refused"
    assert crawl({"verify_max_diff": 2.5})["verify_max_diff"] == 2.5
    assert audit({"verify_radius": 2}) == "refused"


# (None is left out: in the crawl it means "not set", Scrapy's convention; a config file's null is refused)
_value = st.one_of(st.integers(-5, 300), st.floats(-1, 3, allow_nan=False), st.sampled_from(["", "x", "5", "0.5"]),
                   st.booleans())


@given(st.dictionaries(st.sampled_from([p.key for p in ENGINE_PARAMS if not p.key.startswith("strip")]), _value,
                       max_size=4))
def test_any_values_are_judged_alike(values):
    assert crawl(values) == audit(values)
