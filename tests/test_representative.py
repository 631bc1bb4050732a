"""The representative policy: which member names a duplicate cluster (content/representative.py)."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_dedup.content.representative import (
    POLICIES,
    ClusterRepresentatives,
    Member,
    choose_representative,
    rank_members,
)
from scrapy_dedup.url.preference import url_preference

SESSION = "sessionid=4f8a2c9e1b7d3a6f0c5e"


def members(*urls: str, stamps=None, declares=None) -> list[Member]:
    stamps = stamps or [None] * len(urls)
    declares = declares or [None] * len(urls)
    return [Member(u, i, t, d) for i, (u, t, d) in enumerate(zip(urls, stamps, declares))]


# (policy, URLs in arrival order, the representative), in the style of w3lib's tables
CANONICAL_TABLE = [
    (["http://a.test/p?utm_source=x", "http://a.test/p"], "http://a.test/p"),
    (["http://a.test/p?gclid=1", "http://a.test/p?fbclid=2", "http://a.test/p"], "http://a.test/p"),
    ([f"http://a.test/p?{SESSION}", "http://a.test/p?page=1"], "http://a.test/p?page=1"),
    (["http://a.test/p;jsessionid=0A56A3EAD497F099D787460243004968", "http://a.test/p"], "http://a.test/p"),
    # a short value under a session name is no session token (the canonicalizer's own rule): fewer params wins
    (["http://a.test/p?sessionid=7&b=1", "http://a.test/p?b=1"], "http://a.test/p?b=1"),
    (["http://a.test/p?a=1&b=2", "http://a.test/p?ab=12345678"], "http://a.test/p?ab=12345678"),
    (["http://a.test/product/long-name", "http://a.test/p/1"], "http://a.test/p/1"),
    # https is not beaten by its own "s"
    (["http://a.test/p", "https://a.test/p"], "https://a.test/p"),
    # equal in everything but the string: the smaller string, whatever came first
    (["http://b.test/p", "http://a.test/p"], "http://a.test/p"),
    (["http://a.test/p", "http://b.test/p"], "http://a.test/p"),
]


@pytest.mark.parametrize("urls,expected", CANONICAL_TABLE)
def test_canonical_table(urls, expected):
    assert choose_representative(members(*urls), "canonical", url_preference).url == expected


@pytest.mark.parametrize("urls,expected", CANONICAL_TABLE)
def test_first_is_the_first_arrival(urls, expected):
    assert choose_representative(members(*urls), "first").url == urls[0]


def test_a_declared_canonical_target_in_the_cluster_wins_over_a_cleaner_url():
    urls = ["http://a.test/p/1", "http://a.test/product/1-blue-shoe?utm_source=x", "http://a.test/product/1-blue-shoe"]
    target = "http://a.test/product/1-blue-shoe"
    plain = members(*urls)
    assert choose_representative(plain, "canonical", url_preference).url == "http://a.test/p/1"
    declared = members(*urls, declares=[target, target, target])
    assert choose_representative(declared, "canonical", url_preference).url == target


def test_a_declaration_is_not_trusted_when_the_target_is_not_in_the_cluster_or_names_itself():
    urls = ["http://a.test/p?utm_source=x", "http://a.test/p"]
    elsewhere = members(*urls, declares=["http://evil.test/", "http://evil.test/"])
    assert choose_representative(elsewhere, "canonical", url_preference).url == "http://a.test/p"
    # a page that declares itself (an echo of its own URL, tracking parameters and all) vouches for nothing
    selfish = members(*urls, declares=[urls[0], None])
    assert choose_representative(selfish, "canonical", url_preference).url == "http://a.test/p"


def test_newest_takes_the_latest_timestamp_then_the_canonical_order():
    urls = ["http://a.test/p", "http://a.test/p?utm_source=x", "http://b.test/p"]
    assert choose_representative(members(*urls, stamps=[1.0, 3.0, 2.0]), "newest", url_preference).url == urls[1]
    assert choose_representative(members(*urls, stamps=[5.0, 5.0, 5.0]), "newest", url_preference).url == "http://a.test/p"
    # a member without a timestamp comes after every member with one
    assert choose_representative(members(*urls, stamps=[None, None, 0.0]), "newest", url_preference).url == urls[2]


def test_url_preference_reads_the_canonicalizers_tables():
    assert url_preference("http://a.test/p?utm_medium=x")[0] == 1
    assert url_preference("http://a.test/p?PHPSESSID=0a1b2c3d4e5f6a7b8c9d0e1f2a")[0] == 1
    assert url_preference("http://a.test/p?source=home")[0] == 0  # a generic word is no tracking parameter


def test_an_unknown_policy_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match="'first', 'canonical', 'newest'"):
        rank_members(members("http://a.test/"), "oldest", url_preference)
    with pytest.raises(ValueError, match="'first', 'canonical', 'newest'"):
        ClusterRepresentatives("best", url_key=url_preference)


def test_a_policy_that_ranks_urls_needs_the_callers_url_key():
    """content/ knows nothing of URLs (it imports no url/): the URL sort key comes from the caller."""
    with pytest.raises(ValueError, match="pass url_key"):
        ClusterRepresentatives("canonical")
    with pytest.raises(ValueError, match="pass url_key"):
        choose_representative(members("http://a.test/p", "http://a.test/q"), "newest")
    assert ClusterRepresentatives("first").representative("x") is None  # ``first`` ranks by arrival only
    by_length = choose_representative(members("http://a.test/pp", "http://a.test/p?utm_source=x"), "canonical",
                                      lambda url: (len(url),))
    assert by_length.url == "http://a.test/pp"  # the caller's key, not a table of this module's own


# --- properties ---------------------------------------------------------------------------------

HOSTS = st.sampled_from(["a.test", "b.test", "www.a.test"])
PATHS = st.sampled_from(["/", "/p", "/p/1", "/product/1"])
QUERIES = st.sampled_from(["", "?utm_source=x", "?b=1", "?a=1&b=2", f"?{SESSION}", "?gclid=7"])
URLS = st.builds(lambda s, h, p, q: f"{s}://{h}{p}{q}", st.sampled_from(["http", "https"]), HOSTS, PATHS, QUERIES)
PAGES = st.lists(st.tuples(URLS, st.one_of(st.none(), st.integers(0, 5).map(float)),
                           st.one_of(st.none(), URLS)), min_size=1, max_size=8)


def as_members(pages) -> list[Member]:
    return [Member(u, i, t, d) for i, (u, t, d) in enumerate(pages)]


@settings(max_examples=300, deadline=None)
@given(PAGES, st.sampled_from(POLICIES), st.randoms(use_true_random=False))
def test_the_order_is_total_and_the_representative_does_not_depend_on_arrival(pages, policy, rnd):
    ranked = rank_members(as_members(pages), policy, url_preference)
    keys = [(m.url, m.arrival) for m in ranked]
    assert len(set(keys)) == len(keys)  # a strict total order: no two members compare equal
    if policy == "first":
        return
    shuffled = list(pages)
    rnd.shuffle(shuffled)
    assert choose_representative(as_members(shuffled), policy, url_preference).url == ranked[0].url


@settings(max_examples=300, deadline=None)
@given(PAGES, st.sampled_from(POLICIES))
def test_the_incremental_bookkeeping_equals_the_pure_choice(pages, policy):
    reps = ClusterRepresentatives(policy, url_key=url_preference)
    (kept, stamp, declares), rest = pages[0], pages[1:]
    reps.note_kept(kept, stamp, declares)
    got = kept
    for url, t, d in rest:
        got = reps.join(kept, kept, url, t, d)
    assert got == choose_representative(as_members(pages), policy, url_preference).url


def test_merged_clusters_keep_the_best_of_both():
    reps = ClusterRepresentatives("canonical", url_key=url_preference)
    reps.join("http://a.test/p?utm_source=1", "http://a.test/p?utm_source=1", "http://a.test/p?utm_source=2")
    reps.join("http://b.test/p?gclid=1", "http://b.test/p?gclid=1", "http://a.test/p")
    merged = reps.join("http://a.test/p?utm_source=1", "http://a.test/p?utm_source=1", "http://a.test/p?utm_source=3",
                       merged=["http://b.test/p?gclid=1"])
    assert merged == "http://a.test/p"
    assert reps.representative("http://b.test/p?gclid=1") is None


def test_a_declaration_that_arrives_after_its_target_promotes_it():
    reps = ClusterRepresentatives("canonical", url_key=url_preference)
    kept, target = "http://a.test/p/1", "http://a.test/product/1-blue-shoe"
    assert reps.join(kept, kept, target) == kept  # shorter wins while nobody vouches for the target
    assert reps.join(kept, kept, "http://a.test/x?utm_source=y", declares=target) == target


def test_random_arrival_orders_of_one_cluster_agree():
    urls = ["http://a.test/p?utm_source=x", "http://a.test/p", f"http://a.test/p?{SESSION}", "https://a.test/p"]
    seen = set()
    for seed in range(20):
        order = urls[:]
        random.Random(seed).shuffle(order)
        reps = ClusterRepresentatives("canonical", url_key=url_preference)
        rep = order[0]
        for url in order[1:]:
            rep = reps.join(order[0], order[0], url)
        seen.add(rep)
    assert seen == {"https://a.test/p"}


# --- in the engine ------------------------------------------------------------------------------

def engine_run(policy: str, pages) -> list:
    """Verdicts of one page's text under ``pages`` [(url, timestamp, declares)], in that order."""
    from scrapy_dedup import ContentDeduplicator
    from scrapy_dedup.content.engine import ContentFingerprinter, MemoryContentStore
    from tests.textgen import article_words

    text = " ".join(article_words(random.Random(7), 300))
    dedup = ContentDeduplicator(ContentFingerprinter(), MemoryContentStore(), representative=policy, url_key=url_preference)
    return [dedup.check_fingerprint(url, dedup.fingerprint(text), timestamp=t, declares=d) for url, t, d in pages]


def test_the_engine_names_clusters_by_the_policy_and_keeps_the_first_page():
    clean = "https://shop.test/p"
    pages = [(f"{clean}?utm_source=x", 3.0, clean),
             (f"{clean};jsessionid=0A56A3EAD497F099D787460243004968", 1.0, clean),
             (clean, 2.0, clean), (f"{clean}?b=1", 0.5, None)]
    for policy, expected in (("first", pages[0][0]), ("canonical", clean), ("newest", pages[0][0])):
        verdicts = engine_run(policy, pages)
        assert verdicts[0].kind == "unique" and all(v.kind == "exact" for v in verdicts[1:])
        # the store names the kept page, whatever the policy; the cluster id is the first page
        assert {v.kept_url for v in verdicts[1:]} == {v.cluster for v in verdicts[1:]} == {pages[0][0]}
        assert verdicts[-1].representative == expected, policy
    # before the clean page arrived, the best so far: the session URL has no query parameter
    assert engine_run("canonical", pages)[1].representative == pages[1][0]


def test_the_kept_pages_declaration_vouches_for_a_longer_target():
    target = "https://shop.test/product/1-blue-shoe"
    verdicts = engine_run("canonical", [("https://shop.test/p/1", None, target), (target, None, target)])
    assert verdicts[1].representative == target
    unvouched = engine_run("canonical", [("https://shop.test/p/1", None, None), (target, None, None)])
    assert unvouched[1].representative == "https://shop.test/p/1"


def test_a_refetch_that_joins_two_clusters_keeps_the_best_of_both():
    from scrapy_dedup import ContentDeduplicator
    from scrapy_dedup.content.engine import ContentFingerprinter, MemoryContentStore
    from tests.textgen import article_words

    a, b = (" ".join(article_words(random.Random(seed), 300)) for seed in (1, 2))
    dedup = ContentDeduplicator(ContentFingerprinter(), MemoryContentStore(), representative="canonical", url_key=url_preference)
    check = dedup.check
    check("https://a.test/x?utm_source=1", a)
    check("https://a.test/x?utm_source=2", a)  # cluster A: no clean URL
    check("https://b.test/y?gclid=1", b)
    assert check("https://b.test/y", b).representative == "https://b.test/y"  # cluster B, named by its clean URL
    # A's second URL now shows B's text: A and B are one cluster, whose id is A's (seen first)
    merged = check("https://a.test/x?utm_source=2", b)
    assert merged.cluster == "https://a.test/x?utm_source=1"
    assert merged.representative == "https://b.test/y"
    assert check("https://a.test/x?utm_source=3", a).representative == "https://b.test/y"


def test_a_bad_setting_fails_at_start_naming_it():
    from scrapy_dedup.settings import DedupConfigError, read_settings

    assert read_settings({}).representative == "canonical"
    with pytest.raises(DedupConfigError, match="DEDUP_REPRESENTATIVE must be one of 'first', 'canonical', 'newest'"):
        read_settings({"DEDUP_REPRESENTATIVE": "oldest"})


@pytest.mark.parametrize("value,expected", [
    (1700000000, 1700000000.0), (1.5, 1.5), ("1700000000", 1700000000.0),
    ("2024-01-02T03:04:05Z", 1704164645.0), ("2024-01-02T03:04:05+01:00", 1704161045.0),
    ("2024-01-02T03:04:05", 1704164645.0),  # no offset: UTC
    ("2024-01-02", 1704153600.0),
])
def test_parse_timestamp(value, expected):
    from scrapy_dedup.content.representative import parse_timestamp

    assert parse_timestamp(value) == expected


@pytest.mark.parametrize("value", ["", "yesterday", True, None, [1], float("nan"), "inf"])
def test_parse_timestamp_refuses(value):
    from scrapy_dedup.content.representative import parse_timestamp

    with pytest.raises(ValueError):
        parse_timestamp(value)


def test_with_fetch_times_newest_keeps_nothing_per_kept_page_and_still_names_the_last_fetched():
    reps = ClusterRepresentatives("newest", times_are_arrivals=True, url_key=url_preference)
    reps.note_kept("http://a.test/p", 1.0)
    assert reps._kept == {}  # nothing held for the (many) kept pages
    assert reps.join("http://a.test/p", "http://a.test/p", "http://a.test/p?b=1", 2.0) == "http://a.test/p?b=1"
    assert reps.join("http://a.test/p", "http://a.test/p", "http://a.test/p?utm_source=x", 3.0) \
        == "http://a.test/p?utm_source=x"


def test_a_kept_page_that_joins_a_cluster_through_a_refetched_member_is_a_candidate():
    from scrapy_dedup import ContentDeduplicator
    from scrapy_dedup.content.engine import ContentFingerprinter, MemoryContentStore
    from tests.textgen import article_words

    b, k = (" ".join(article_words(random.Random(seed), 300)) for seed in (3, 4))
    dedup = ContentDeduplicator(ContentFingerprinter(), MemoryContentStore(), representative="canonical", url_key=url_preference)
    dedup.check("https://b.test/y?gclid=1", b)
    dedup.check("https://b.test/y?gclid=2", b)
    assert dedup.check("https://b.test/k", k).kind == "unique"  # kept, in no cluster yet
    verdict = dedup.check("https://b.test/y?gclid=2", k)  # B's member now shows k's text
    assert (verdict.kept_url, verdict.cluster) == ("https://b.test/k", "https://b.test/y?gclid=1")
    assert verdict.representative == "https://b.test/k"
