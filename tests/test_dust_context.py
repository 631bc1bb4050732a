"""Context rules (``drop_param_when``) and acceptance against the site's own noise, at the miner's level."""
from __future__ import annotations

import pytest

from scrapy_dedup.url.dust import DustRule, DustRulesError, RuleSet
from scrapy_dedup.url.mining import DustMiner

H = "wiki.test"


@pytest.mark.parametrize(("url", "expected"), [
    ("/doku.php?id=a&do=recent", "/doku.php?do=recent"),
    ("/doku.php?do=recent&id=b", "/doku.php?do=recent"),
    ("/doku.php?id=a", "/doku.php?id=a"),  # no context: id names the page
    ("/doku.php?id=a&do=edit", "/doku.php?id=a&do=edit"),  # another value
    ("/doku.php?id=a&do=recently", "/doku.php?id=a&do=recently"),  # the value is literal, whole
    ("/other/x.php?id=a&do=recent", "/other/x.php?id=a&do=recent"),  # outside the prefix
])
def test_a_context_rule_drops_its_parameter_only_under_its_context(url, expected):
    rules = RuleSet({H: [DustRule("drop_param_when", param="id", when="do=recent", prefix="/doku.php")]})
    assert rules.rewrite(f"http://{H}{url}") == f"http://{H}{expected}"
    assert rules.rewrite(rules.rewrite(f"http://{H}{url}")) == f"http://{H}{expected}"  # idempotent


def test_a_context_rule_round_trips_and_is_checked_at_load():
    rule = DustRule("drop_param_when", param="returnto", when="title=Special:UserLogin", prefix="/")
    data = RuleSet({H: [rule]}).to_json()
    assert RuleSet.from_json(data).hosts[H] == [rule]
    for when in ("do", "=recent", "returnto=x", "a=b&c=d"):  # no value, no name, its own parameter, two parameters
        data["hosts"][H][0]["when"] = when
        with pytest.raises(DustRulesError, match="when must be another query parameter"):
            RuleSet.from_json(data)


def _wiki(miner: DustMiner, noise: bool = False) -> None:
    for i in range(30):
        miner.add_record({"url": f"http://{H}/doku.php?id=p{i}", "cluster": f"p{i}", "simhash": f"{i * 0x1111:016x}"})
        # recent changes: one page whatever the id
        miner.add_record({"url": f"http://{H}/doku.php?id=p{i}&do=recent", "cluster": "recent",
                          "simhash": "00000000000000ff"})


def test_a_context_rule_is_mined_from_the_urls_of_one_view():
    miner = DustMiner()
    _wiki(miner)
    result = miner.mine()
    assert [(r.kind, r.param, r.when) for r in result.rules.hosts[H]] == [("drop_param_when", "id", "do=recent")]
    # one page behind many URLs is no evidence for the plain drop (a soft 404 would look the same)
    assert not any(v.rule.kind == "drop_param" and v.kept for v in result.validations)


def _media(miner: DustMiner, far: bool) -> None:
    """``image=`` is irrelevant on 20 pages (80 agreeing URLs) and names the image on ``/media`` (3 violations,
    other clusters: 3.6%, under the fixed 5% rate). ``far``: the media views' texts are far apart (simhash)."""
    for i in range(20):
        sim = f"{(i + 1) * 0x0101010101010101 & 0xFFFFFFFFFFFFFFFF:016x}"
        miner.add_record({"url": f"http://{H}/p?id={i}", "cluster": f"p{i}", "simhash": sim})
        for n in range(1, 5):
            miner.add_record({"url": f"http://{H}/p?id={i}&image={n}", "cluster": f"p{i}", "simhash": sim,
                              "kind": "exact"})
    miner.add_record({"url": f"http://{H}/media", "cluster": "media", "simhash": "0000000000000000"})
    for n in range(1, 4):
        sim = (0xFFFFFFFF << (8 * n % 32)) if far else (1 << n)  # 32 bits apart, or one
        miner.add_record({"url": f"http://{H}/media?image={n}", "cluster": f"media{n}", "simhash": f"{sim & (2**64 - 1):016x}"})


def test_a_rule_the_judge_proves_merges_distinct_pages_is_refused():
    miner = DustMiner()
    _media(miner, far=True)
    verdict = next(v for v in miner.mine().validations if v.rule.kind == "drop_param" and v.rule.param == "image")
    assert not verdict.kept and "proves distinct" in verdict.reason
    assert verdict.violations == 3


def test_violations_within_the_sites_own_variation_are_judged_by_the_rate():
    """Other clusters only one bit apart, where the site's same pages vary more: not proven distinct (the judge
    may have missed a same page under per-fetch noise), so the fixed rate decides."""
    miner = DustMiner()
    _media(miner, far=False)
    verdict = next(v for v in miner.mine().validations if v.rule.kind == "drop_param" and v.rule.param == "image")
    assert verdict.kept, verdict.reason


def test_the_sites_measured_noise_allows_as_many_distinct_violations():
    """Two of the four URLs the crawl fetched twice were judged another page: the site is that noisy, and a
    rule with 3 of 83 pairs proven distinct is within it."""
    miner = DustMiner()
    _media(miner, far=True)
    for i in range(4):
        again = f"p{i}" if i < 2 else f"changed{i}"
        miner.add_record({"url": f"http://{H}/p?id={i}", "cluster": again, "simhash": "0000000000000001"})
    assert miner.noise(H) == (2, 4)
    verdict = next(v for v in miner.mine().validations if v.rule.kind == "drop_param" and v.rule.param == "image")
    assert verdict.kept, verdict.reason


def test_a_page_under_two_keys_gets_a_content_alias_only_when_its_texts_are_exact_copies():
    """On a host that serves its pages' texts exactly (three pages fetched under two URLs, the same text each
    time), two revisions of a wiki page the judge joins as near duplicates are one page for items, not a proof
    that one URL stands for the other: no alias. The same text under an opaque id and a slug: an alias."""
    for texts, aliased in ((("a1", "a1"), True), (("a1", "a2"), False)):
        miner = DustMiner()
        for i in range(3):
            for url in (f"http://{H}/p{i}", f"http://{H}/p{i}?ref=x"):
                miner.add_record({"url": url, "cluster": f"p{i}", "exact_hash": f"t{i}"})
        miner.add_record({"url": f"http://{H}/shoes/blue-runner", "cluster": "c", "exact_hash": texts[0]})
        miner.add_record({"url": f"http://{H}/item.php?id=4711", "cluster": "c", "exact_hash": texts[1]})
        result = miner.mine()
        assert (result.rules.aliases.get(H) == {"/item.php?id=4711": "/shoes/blue-runner"}) is aliased
        assert miner.stats["content_aliases_inexact"] == (not aliased)


def test_an_exploration_within_the_sites_noise_keeps_the_rule_and_one_proven_distinct_withdraws_it():
    """A per-fetch footer makes the explored page another page at the URL-level strictness while the judge keeps
    it in its key's cluster: the site's noise, not a violation (a loaded rule was withdrawn for it, and the
    crawl with mined rules fetched every variant). Another cluster too: withdrawn."""
    from scrapy_dedup.url.canonical import Canonicalizer
    from scrapy_dedup.url.learner import OnlineDustLearner

    for explored_item, kept in (("cluster-q1", True), ("cluster-other", False)):
        rules = RuleSet()
        learner = OnlineDustLearner(rules, Canonicalizer(dust_rules=rules).canonicalize, every=6, explore=0.01)
        for i in range(3):
            learner.record(f"http://{H}/q{i}", f"q{i}", None, item=f"cluster-q{i}")
            learner.record(f"http://{H}/q{i}?ref=home", f"q{i}", None, item=f"cluster-q{i}")
        assert len(rules) == 1
        assert learner.should_explore(f"http://{H}/q1?ref=1", f"http://{H}/q1")
        removed = learner.check_explored(f"http://{H}/q1?ref=1", "http://wiki.test/q1?ref=1", None, explored_item)
        assert (removed == []) is kept
        assert learner.events["explore_undecided"] == kept


def test_a_generated_token_is_never_a_default_value():
    """cgit's ``tree/X?id=<commit>`` is ``tree/X`` for the newest commit only; a rule that made that commit the
    default sent the next crawl to an old commit's tree (10 of 60 pages reached)."""
    miner = DustMiner()
    head = "4a43e24157694e22bf1f9c338a6e4112e4867882"
    for i in range(5):
        miner.add_record({"url": f"http://{H}/tree/p{i}.md", "cluster": f"p{i}"})
        miner.add_record({"url": f"http://{H}/tree/p{i}.md?id={head}", "cluster": f"p{i}"})
        miner.add_record({"url": f"http://{H}/tree/p{i}.md?id={i:040d}", "cluster": f"old{i}"})  # an old commit
    assert not any(r.kind == "default_param" for r in miner.mine().rules.hosts.get(H, []))
