"""The DUST miner on logs with known rules and known traps.

The logs are built here from a site model: which URLs serve which page is
decided by the model (the ground truth), and the miner sees only (URL, hash,
simhash) lines, as in a DEDUP_LOG_FILE crawl log.
"""
from __future__ import annotations

import json
import random

import pytest

from scrapy_dedup.url.dust import RuleSet
from scrapy_dedup.audit.mine_dust import mine_logs, read_log
from scrapy_dedup.cli import mine_dust_main as cli_main
from scrapy_dedup.url.mining import DustMiner, MiningConfig

HOST = "news.test"


class SiteModel:
    """Pages of a news site and the URLs that serve each one."""

    def __init__(self, seed: int = 7, stories: int = 12):
        self.rng = random.Random(seed)
        self.lines: list[dict] = []
        self.truth: dict[str, str] = {}  # url -> page id
        self.fp: dict[str, int] = {}
        for i in range(1, stories + 1):
            page = f"story-{i}"
            self.serve(f"/story?id={i}", page)
            self.serve(f"/story/{i}", page)
            self.serve(f"/story/{i}?print=1", page, chrome=True)  # print view: near duplicate
            self.serve(f"/story?id={i}&print=1", page, chrome=True)
            self.serve(f"/story?id={i}&sid=00{self.rng.randrange(100, 999)}", page)
        for name in ("alice", "bob", "carol", "dave"):
            self.serve(f"/~editors/{name}", f"editor-{name}")
            self.serve(f"/people/editors/{name}", f"editor-{name}")
        for doc in ("intro", "setup", "faq", "api"):
            self.serve(f"/docs/{doc}.htm", f"doc-{doc}")
            self.serve(f"/docs/{doc}.html", f"doc-{doc}")
        for n in range(1, 6):  # pagination: every page of the listing is different
            self.serve(f"/list?page={n}", f"list-{n}")
        self.serve("/list", "list-1")
        for cat in ("shoes", "boots", "hats", "bags"):
            self.serve(f"/shop?category={cat}", f"shop-{cat}")
            self.serve(f"/shop?category={cat}&page=1", f"shop-{cat}")
            self.serve(f"/shop?category={cat}&page=2", f"shop-{cat}-2")

    def serve(self, path: str, page: str, chrome: bool = False) -> None:
        url = f"http://{HOST}{path}"
        self.truth[url] = page
        if page not in self.fp:
            self.fp[page] = self.rng.getrandbits(64)
        simhash = self.fp[page] ^ (0b1001 if chrome else 0)  # chrome: 2 bits off
        exact = f"{page}{'-print' if chrome else ''}"
        self.lines.append({"request_url": url, "url": url, "canonical_url": url, "exact_hash": exact,
                           "simhash": format(simhash, "016x"), "words": 300, "kind": "unique"})

    def write(self, path) -> str:
        with open(path, "w", encoding="utf-8") as f:
            for line in self.lines:
                f.write(json.dumps(line) + "\n")
        return str(path)


def _rules(result) -> list:
    return result.rules.hosts.get(HOST, [])


def test_finds_the_site_rules_and_composes_them(tmp_path):
    site = SiteModel()
    result = mine_logs([site.write(tmp_path / "crawl.jsonl")])
    rules = result.rules
    kinds = {(r.kind, r.path or r.param or r.from_) for r in _rules(result)}
    assert ("drop_param", "print") in kinds
    assert ("drop_param", "sid") in kinds
    assert ("query_to_path", "/story") in kinds
    assert any(r.kind == "substitute" and r.anchor == "prefix" for r in _rules(result))
    assert any(r.kind == "substitute" and r.anchor == "suffix" for r in _rules(result))
    # the rules collapse every URL of a page onto one URL, and never two pages onto one
    by_key: dict[str, set[str]] = {}
    for url, page in site.truth.items():
        by_key.setdefault(rules.rewrite(url), set()).add(page)
    assert all(len(pages) == 1 for pages in by_key.values()), by_key
    assert len(by_key) == len(set(site.truth.values()))
    assert rules.rewrite(f"http://{HOST}/story?id=7&print=1") == rules.rewrite(f"http://{HOST}/story/7")


def test_traps_never_become_rules(tmp_path):
    site = SiteModel()
    result = mine_logs([site.write(tmp_path / "crawl.jsonl")])
    for rule in _rules(result):
        assert not (rule.kind == "drop_param" and rule.param in ("page", "category")), rule
    # page=1 is the default page of the listing: that one is a valid rule
    assert any(r.kind == "default_param" and r.param == "page" and r.value == "1" for r in _rules(result))
    rejected = [v for v in result.rejected() if v.rule.kind == "drop_param" and v.rule.param == "page"]
    assert rejected and all(v.violations > 0 for v in rejected)
    rs = result.rules
    assert rs.rewrite(f"http://{HOST}/list?page=2") != rs.rewrite(f"http://{HOST}/list")
    assert rs.rewrite(f"http://{HOST}/shop?category=shoes") != rs.rewrite(f"http://{HOST}/shop?category=boots")


def test_every_kept_rule_carries_its_evidence(tmp_path):
    result = mine_logs([SiteModel().write(tmp_path / "crawl.jsonl")])
    config = MiningConfig()
    for rule in _rules(result):
        assert rule.support_pages >= config.min_support
        assert rule.violations <= config.max_violation_rate * (rule.support + rule.violations)
        assert rule.examples, rule
        for source, target in rule.examples:
            assert HostRulesOf(result, rule).rewrite(f"http://{HOST}{source}") == f"http://{HOST}{target}"


def HostRulesOf(result, rule) -> RuleSet:  # noqa: N802 - a tiny factory
    return RuleSet({HOST: [rule]})


def _soft404_log(path, real_pages: int, missing: int) -> str:
    """``/item?id=N`` and ``/item/N``: ``missing`` ids return one 'not found' page, ``real_pages`` ids exist."""
    lines = []
    rng = random.Random(3)
    for i in range(100, 100 + missing):
        for p in (f"/item?id={i}", f"/item/{i}"):
            lines.append({"url": f"http://{HOST}{p}", "exact_hash": "notfound", "simhash": "00ff00ff00ff00ff"})
    for i in range(1, real_pages + 1):
        fp = format(rng.getrandbits(64), "016x")
        for p in (f"/item?id={i}", f"/item/{i}"):
            lines.append({"url": f"http://{HOST}{p}", "exact_hash": f"item{i}", "simhash": fp})
    with open(path, "w") as f:
        f.writelines(json.dumps(x) + "\n" for x in lines)
    return str(path)


def _q2p(result) -> list:
    return [r for r in _rules(result) if r.kind == "query_to_path"]


def test_soft_404_support_is_rejected(tmp_path):
    # many URL pairs agree, but all on one page: it counts as one page, below min_support
    assert not _q2p(mine_logs([_soft404_log(tmp_path / "a.jsonl", real_pages=0, missing=8)]))
    # two real pages + the soft 404 make 3 pages behind the candidate; the soft 404 stands for 8
    # different URLs after the rewrite, so it is a page many URLs return and gives no support
    result = mine_logs([_soft404_log(tmp_path / "b.jsonl", real_pages=2, missing=8)])
    assert not _q2p(result)
    reasons = [v.reason for v in result.rejected() if v.rule.kind == "query_to_path"]
    assert reasons and "soft 404" in reasons[0]
    # a soft 404 behind 60 URLs: paired, but one page behind many rewritten URLs gives no support
    assert not _q2p(mine_logs([_soft404_log(tmp_path / "c.jsonl", real_pages=2, missing=30)]))
    # control: with enough real pages the rule is found, soft 404 or not
    found = _q2p(mine_logs([_soft404_log(tmp_path / "d.jsonl", real_pages=4, missing=8)]))
    assert [(r.path, r.to, r.support_pages) for r in found] == [("/item", "/item/{value}", 4)]


def test_session_segment_and_case_rules(tmp_path):
    rng = random.Random(5)
    lines = []
    for i in range(6):
        fp = format(rng.getrandbits(64), "016x")
        token = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(24))
        for p in (f"/(S({token}))/about/team{i}", f"/about/team{i}", f"/About/Team{i}"):
            lines.append({"url": f"http://{HOST}{p}", "exact_hash": f"t{i}", "simhash": fp})
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    result = mine_logs([str(path)])
    kinds = {r.kind: r for r in _rules(result)}
    assert kinds["drop_segment"].shape == "(S(<alnum:24>))"
    assert "case_insensitive" in kinds
    assert result.rules.rewrite(f"http://{HOST}/(S(abcdefghijklmnopqrstuv12))/About/Team9") == \
        f"http://{HOST}/about/team9"


def test_near_duplicates_count_only_within_the_threshold(tmp_path):
    site = SiteModel()
    path = site.write(tmp_path / "crawl.jsonl")
    exact_only = mine_logs([path], MiningConfig(hamming=0))
    # print views have other chrome (2 bits off): with exact matching only, print= has no support
    assert not any(r.kind == "drop_param" and r.param == "print" for r in _rules(exact_only))


def test_generic_jsonl_with_text_uses_the_content_engine(tmp_path):
    rng = random.Random(11)
    vocabulary = [f"w{i}" for i in range(500)]
    lines = []
    for i in range(5):
        text = " ".join(rng.choice(vocabulary) for _ in range(200))
        lines.append({"url": f"http://{HOST}/a/{i}.htm", "text": text})
        lines.append({"url": f"http://{HOST}/a/{i}.html", "html": f"<html><body><p>{text}</p></body></html>"})
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + "not json\n{\"url\": 5}\n")
    miner = DustMiner()
    read_log(miner, str(path))
    assert miner.stats["bad_lines"] == 1 and miner.stats["lines_without_url"] == 1
    result = miner.mine()
    assert [(r.kind, r.anchor) for r in _rules(result)] == [("substitute", "suffix")]


def test_cli_writes_a_loadable_rules_file(tmp_path, capsys):
    log = SiteModel().write(tmp_path / "crawl.jsonl")
    out = tmp_path / "rules.json"
    assert cli_main([log, "-o", str(out), "--min-support", "3"]) == 0
    rules = RuleSet.load(out)
    assert len(rules) >= 5
    assert "KEEP" in capsys.readouterr().err
    assert cli_main([log, "--max-violation-rate", "2"]) == 2
    assert cli_main([str(tmp_path / "missing.jsonl")]) == 2
    # --merge keeps the given rules and mines nothing already known
    assert cli_main([log, "--merge", str(out), "-o", str(tmp_path / "again.json")]) == 0
    again = RuleSet.load(tmp_path / "again.json")
    assert sorted(r.key for r in again.hosts[HOST]) == sorted(r.key for r in rules.hosts[HOST])


@pytest.mark.parametrize("bad", ["", "{}", '{"url": "http://a.test/x"}'])
def test_incomplete_lines_are_counted_not_fatal(tmp_path, bad):
    path = tmp_path / "bad.jsonl"
    path.write_text(bad + "\n")
    miner = DustMiner()
    read_log(miner, str(path))
    assert len(miner.mine().rules) == 0


def test_online_learner_activates_explores_and_deactivates():
    from scrapy_dedup.url.canonical import Canonicalizer
    from scrapy_dedup.url.learner import OnlineDustLearner

    rules = RuleSet()
    key_of = Canonicalizer(dust_rules=rules).canonicalize
    learner = OnlineDustLearner(rules, key_of, every=6, explore=0.5)
    activated = []
    for i in range(3):  # ?ref= never changes these pages
        activated += learner.record(f"http://{HOST}/p{i}", f"page{i}", None)
        activated += learner.record(f"http://{HOST}/p{i}?ref=home", f"page{i}", None)
    assert [(v.rule.kind, v.rule.param) for v in activated] == [("drop_param", "ref")]
    assert key_of(f"http://{HOST}/p1?ref=x") == f"http://{HOST}/p1"  # the live rule set is the canonicalizer's
    assert learner.is_fetched(f"http://{HOST}/p1")
    # distinct URLs the rule collapses: the first is let through, then every second one (explore=0.5)
    decisions = [learner.should_explore(f"http://{HOST}/p{i}?ref=mail", f"http://{HOST}/p{i}") for i in range(3)]
    assert decisions == [True, False, True]
    # decided once per distinct URL: never explored again, and a URL fetched already is never explored
    assert not learner.should_explore(f"http://{HOST}/p0?ref=mail", f"http://{HOST}/p0")
    assert not learner.should_explore(f"http://{HOST}/p1?ref=home", f"http://{HOST}/p1")
    assert learner.events["explored"] == 2
    assert not learner.should_explore(f"http://{HOST}/new?ref=a", f"http://{HOST}/new")  # not fetched: not collapsed
    # the explored page is another page: the rule is wrong after all and goes, for good
    removed = learner.check_explored(f"http://{HOST}/p0?ref=mail", "another page", None)
    assert [r.param for r in removed] == ["ref"]
    assert key_of(f"http://{HOST}/p1?ref=x") == f"http://{HOST}/p1?ref=x"
    for i in range(3, 6):
        learner.record(f"http://{HOST}/p{i}", f"page{i}", None)
        learner.record(f"http://{HOST}/p{i}?ref=home", f"page{i}", None)
    assert len(rules) == 0 and learner.events["deactivated"] == 1
    # an explored page that agrees changes nothing
    rules2 = RuleSet()
    learner2 = OnlineDustLearner(rules2, Canonicalizer(dust_rules=rules2).canonicalize, every=6, explore=0.01)
    for i in range(3):
        learner2.record(f"http://{HOST}/q{i}", f"q{i}", None)
        learner2.record(f"http://{HOST}/q{i}?ref=home", f"q{i}", None)
    assert len(rules2) == 1
    assert learner2.should_explore(f"http://{HOST}/q1?ref=1", f"http://{HOST}/q1")  # a rule's first is explored
    assert learner2.check_explored(f"http://{HOST}/q1?ref=1", "q1", None) == []
    assert learner2.events["explore_agreed"] == 1


def _learner_with_a_version_segment_rule(explore: float):
    """An online learner that has learned "drop path segment <alnum:2>" from three pages under ``/v1/``."""
    from scrapy_dedup.url.canonical import Canonicalizer
    from scrapy_dedup.url.learner import OnlineDustLearner

    rules = RuleSet()
    key_of = Canonicalizer(dust_rules=rules).canonicalize
    learner = OnlineDustLearner(rules, key_of, every=6, explore=explore)
    for name in ("start", "update", "modify"):
        learner.record(f"http://{HOST}/topics/{name}.html", name, None)
        learner.record(f"http://{HOST}/v1/topics/{name}.html", name, None)
    assert [(r.kind, r.shape) for r in rules.hosts[HOST]] == [("drop_segment", "<alnum:2>")]
    return learner, key_of


def test_a_version_segment_rule_learned_online_keeps_translations_apart():
    """Generated site 17 (tuning), one learn crawl in about six: ``/v1/topics/x.html`` (an old scheme) is the
    page of ``/topics/x.html``, so "drop path segment <alnum:2>" was learned; it also dropped ``/de/`` (a
    translation, another page: ``de`` is a word, not a token), and the crawl's first explorations of it were
    ``/v1/`` URLs, which agreed: every German page was lost. A shape matches the segments it was mined from."""
    learner, key_of = _learner_with_a_version_segment_rule(explore=0.0)
    assert learner.is_fetched(key_of(f"http://{HOST}/v1/topics/start.html"))
    assert key_of(f"http://{HOST}/v2/topics/start.html") == f"http://{HOST}/topics/start.html"
    for lang in ("de", "fr", "en"):
        key = key_of(f"http://{HOST}/{lang}/topics/start.html")
        assert key == f"http://{HOST}/{lang}/topics/start.html" and not learner.is_fetched(key)


def test_exploration_checks_each_value_of_a_dropped_segment():
    """A rule that drops a path segment of a shape is explored on the first URL of each segment it drops (up to
    ``min_support`` of them), as a dropped parameter's values are: ``/v1/`` agreeing says nothing of ``/v2/``
    (on generated site 17 the first explorations of "drop path segment <alnum:2>" were all ``/v1/`` URLs,
    while the rule also dropped ``/de/``). Generated tokens all count as one value."""
    learner, key_of = _learner_with_a_version_segment_rule(explore=0.01)

    def explored(url: str) -> bool:
        return learner.should_explore(url, key_of(url))

    for name in "abcd":
        learner.record(f"http://{HOST}/topics/{name}.html", name, None)
    assert explored(f"http://{HOST}/v1/topics/a.html")  # the rule's first collapsed URL
    assert not explored(f"http://{HOST}/v1/topics/b.html")  # v1 checked already, the budget spent
    assert explored(f"http://{HOST}/v2/topics/b.html")  # another segment: checked too
    assert not explored(f"http://{HOST}/v2/topics/c.html")
    assert explored(f"http://{HOST}/v3/topics/c.html")
    assert not explored(f"http://{HOST}/v4/topics/d.html")  # min_support segments checked: enough


def test_the_values_a_rule_was_learned_from_are_not_explored_again():
    """Exploration checks what the evidence did not show: ``drop ?lang=`` learned from pages fetched with and
    without ``lang=en`` has ``en`` checked already, so a URL with ``lang=en`` is not fetched to check it again
    (past the rule's first collapsed URL and its share), while ``de`` still is."""
    from scrapy_dedup.url.canonical import Canonicalizer
    from scrapy_dedup.url.learner import OnlineDustLearner

    rules = RuleSet()
    key_of = Canonicalizer(dust_rules=rules).canonicalize
    learner = OnlineDustLearner(rules, key_of, every=6, explore=0.01)
    for i in range(3):
        learner.record(f"http://{HOST}/p{i}", f"page{i}", None)
        learner.record(f"http://{HOST}/p{i}?lang=en", f"page{i}", None)
    assert [(r.kind, r.param) for r in rules.hosts[HOST]] == [("drop_param", "lang")]
    for i in range(3, 6):
        learner.record(f"http://{HOST}/p{i}", f"page{i}", None)

    def explored(url: str) -> bool:
        return learner.should_explore(url, key_of(url))

    assert explored(f"http://{HOST}/p3?lang=fr")  # the rule's first collapsed URL (and a value not seen)
    assert not explored(f"http://{HOST}/p4?lang=en")  # en: in the evidence already
    assert explored(f"http://{HOST}/p5?lang=de")


def test_a_rule_confirmed_on_parked_requests_counts_them_as_its_first_explorations():
    """Requests for other forms of pages met are parked, not dropped, and a few are fetched as evidence: the
    rule mined from them was confirmed on requests it would have dropped, which is what its first
    explorations would do. They count as explored; a value they did not show is still explored."""
    from scrapy_dedup.url.canonical import Canonicalizer
    from scrapy_dedup.url.learner import OnlineDustLearner

    rules = RuleSet()
    key_of = Canonicalizer(dust_rules=rules).canonicalize
    learner = OnlineDustLearner(rules, key_of, every=50, explore=0.01)
    for i in range(5):
        page = f"http://{HOST}/p{i}"
        assert not learner.deferral.consider(page, key_of(page), page)  # scheduled (its name is new) ...
        learner.record(page, f"page{i}", None)  # ... and fetched
    for i in range(5):
        url = f"http://{HOST}/p{i}?ref=home"
        assert learner.deferral.consider(url, key_of(url), url)  # parked: its page's name was met
    evidence = learner.release_deferred()
    assert len(evidence) == 3 and learner.deferral.parked  # min_support of them; the rest stays parked
    for url in evidence:
        learner.record(url, f"page{url.split('/p')[1][0]}", None)
    assert [(r.kind, r.param) for r in rules.hosts[HOST]] == [("drop_param", "ref")]
    rest = list(learner.deferral.parked)
    assert all(learner.is_fetched(key_of(url)) for url in rest)  # folded now
    assert not any(learner.should_explore(url, key_of(url)) for url in rest)  # confirmed on three already
    assert learner.should_explore(f"http://{HOST}/p0?ref=mail", f"http://{HOST}/p0")  # mail: not shown


def test_a_rule_learned_from_redirects_counts_them_as_its_first_explorations():
    """A URL that redirected to a page fetched is that page by the server's own word: a rule learned from such
    pairs (``/a`` answers a redirect to ``/a/``: ``'/' -> ''``) was confirmed on them, and its first collapsed
    URL is not fetched once more to check it."""
    from scrapy_dedup.url.canonical import Canonicalizer
    from scrapy_dedup.url.learner import OnlineDustLearner

    rules = RuleSet()
    key_of = Canonicalizer(dust_rules=rules).canonicalize
    learner = OnlineDustLearner(rules, key_of, every=3, explore=0.01)
    for i in range(3):
        learner.record(f"http://{HOST}/a{i}/", f"page{i}", None, redirect_urls=[f"http://{HOST}/a{i}"])
    assert rules.hosts[HOST], "a rule joining /aN and /aN/"
    learner.record(f"http://{HOST}/b", "page b", None)
    assert learner.is_fetched(key_of(f"http://{HOST}/b/"))  # /b/ is collapsed onto /b ...
    assert not learner.should_explore(f"http://{HOST}/b/", key_of(f"http://{HOST}/b/"))  # ... not explored


def test_a_cancelled_exploration_gives_its_value_back_to_the_rule():
    """Generated site 19 (tuning; one learn crawl in about four before the deferral, 84% recall): ``drop ?sort=``
    (learned from the default ``sort=date``) was explored on ``/browse?sort=title&start=0``, whose key is an
    alias of ``/browse``: the exploration was cancelled (an alias sends it elsewhere), but ``title`` counted
    as checked, no other URL sorted by title was explored, and the eight pages sorted by title were lost."""
    from scrapy_dedup.url.canonical import Canonicalizer
    from scrapy_dedup.url.learner import OnlineDustLearner

    rules = RuleSet()
    key_of = Canonicalizer(dust_rules=rules).canonicalize
    learner = OnlineDustLearner(rules, key_of, every=6, explore=0.01)
    for i in range(3):
        learner.record(f"http://{HOST}/p{i}", f"page{i}", None)
        learner.record(f"http://{HOST}/p{i}?ref=home", f"page{i}", None)
    assert [r.param for r in rules.hosts[HOST]] == ["ref"]
    learner.record(f"http://{HOST}/browse", "browse", None)
    rules.aliases[HOST] = {"/browse?start=0": "/browse"}
    rules.recompile()
    url = f"http://{HOST}/browse?ref=mail&start=0"
    assert key_of(url) == f"http://{HOST}/browse"
    assert learner.should_explore(url, key_of(url)) and not learner.take_exploration(url)  # cancelled
    assert learner.should_explore(f"http://{HOST}/p1?ref=mail", f"http://{HOST}/p1")  # mail: still to check
    assert not learner.should_explore(f"http://{HOST}/p2?ref=mail", f"http://{HOST}/p2")  # checked now


def test_a_request_dropped_before_its_key_was_fetched_is_explored_when_the_crawl_runs_dry():
    """A request a learned rule dropped while its key's page was only being fetched met no fetched key, so no
    exploration decision was ever taken for it; held, it came back only if the rule was deactivated, which
    nothing would do when such requests are all a wrong rule drops of a value. Judged once the key is fetched."""
    from scrapy_dedup.url.canonical import Canonicalizer
    from scrapy_dedup.url.learner import OnlineDustLearner

    rules = RuleSet()
    key_of = Canonicalizer(dust_rules=rules).canonicalize
    learner = OnlineDustLearner(rules, key_of, every=6, explore=0.01)
    for i in range(3):
        learner.record(f"http://{HOST}/p{i}", f"page{i}", None)
        learner.record(f"http://{HOST}/p{i}?sort=date", f"page{i}", None)
    assert [r.param for r in rules.hosts[HOST]] == ["sort"]
    url = f"http://{HOST}/list?sort=title"
    assert not learner.should_explore(url, key_of(url))  # /list is not fetched yet (in flight)
    request = object()
    assert learner.hold(url, request)  # dropped: its key is in flight
    assert learner.explore_held() == []  # the key's page not fetched yet: nothing to compare with
    learner.record(f"http://{HOST}/list", "list by date", None)
    assert learner.explore_held() == [request] and url in learner.exploring
    assert learner.explore_held() == []  # decided once
    assert learner.take_exploration(url)
    assert [r.param for r in learner.check_explored(url, "list by title", None)] == ["sort"]
    assert learner.resend == [request]  # sent again (checked before download, fetched by then)


def test_requests_a_learned_rule_dropped_are_given_back_when_it_is_deactivated():
    """A wrong rule delays pages, never loses them: what it made the crawl drop is handed back, each URL once,
    never a URL fetched since (it would be fetched twice), nothing for loaded rules (not learned here)."""
    from scrapy_dedup.url.canonical import Canonicalizer
    from scrapy_dedup.url.learner import OnlineDustLearner

    rules = RuleSet()
    learner = OnlineDustLearner(rules, Canonicalizer(dust_rules=rules).canonicalize, every=6, explore=0.0)
    for i in range(3):
        learner.record(f"http://{HOST}/p{i}", f"page{i}", None)
        learner.record(f"http://{HOST}/p{i}?lang=en", f"page{i}", None)
    assert [r.param for r in rules.hosts[HOST]] == ["lang"]
    held = {u: object() for u in (f"http://{HOST}/p1?lang=de", f"http://{HOST}/p2?lang=de")}
    for url, request in held.items():
        assert learner.hold(url, request)
    assert learner.hold(f"http://{HOST}/p1?lang=de", object())  # the same URL again: the first request stays
    assert not learner.hold(f"http://{HOST}/p1?lang=en", object())  # fetched: nothing to lose
    assert not learner.hold(f"http://{HOST}/other", object())  # no learned rule collapses it
    learner.record(f"http://{HOST}/p2?lang=de", "page2-de", None)  # fetched meanwhile (linked again)
    learner.exploring[f"http://{HOST}/p0?lang=de"] = f"http://{HOST}/p0"
    removed = learner.check_explored(f"http://{HOST}/p0?lang=de", "page0-de", None)
    assert [r.param for r in removed] == ["lang"]
    assert learner.resend == [held[f"http://{HOST}/p1?lang=de"]]
    assert learner.events["released"] == 1


def test_canonicals_every_listing_page_declaring_page_one_is_a_misconfigured_host():
    from collections import Counter

    from scrapy_dedup.url.learner import DeclaredCanonicals

    events: Counter = Counter()
    canonicals = DeclaredCanonicals(DustMiner(), MiningConfig(), events)
    canonicals.fetched(f"http://{HOST}/list", ("page1", None))
    for n in range(2, 6):  # page n is another page, and says it is page 1
        canonicals.fetched(f"http://{HOST}/list?page={n}", (f"page{n}", None))
        canonicals.declared(f"http://{HOST}/list?page={n}", f"http://{HOST}/list", (f"page{n}", None))
    assert canonicals.hosts[HOST].state == "misconfigured" and canonicals.changes == [(HOST, "misconfigured", 0, 3)]
    assert events["canonical_refused"] == 3 and events["canonical_ignored"] == 1 and not events["canonical_used"]


def test_canonicals_confirmed_three_times_are_trusted_then_used_and_still_judged():
    from collections import Counter

    from scrapy_dedup.url.learner import DeclaredCanonicals

    events: Counter = Counter()
    miner = DustMiner()
    canonicals = DeclaredCanonicals(miner, MiningConfig(), events)
    for i in range(3):  # the print view declares the page, which was fetched: the same page
        canonicals.fetched(f"http://{HOST}/a{i}", (f"a{i}", None))
        canonicals.declared(f"http://{HOST}/a{i}?print=1", f"http://{HOST}/a{i}", (f"a{i}", None))
    assert canonicals.hosts[HOST].state == "trusted" and events["canonical_confirmed"] == 3
    canonicals.declared(f"http://{HOST}/b?print=1", f"http://{HOST}/b", ("b", None))  # /b not fetched: used
    assert events["canonical_used"] == 1 and "/b" in miner.hosts[HOST]
    canonicals.fetched(f"http://{HOST}/b", ("another page", None))  # fetched later: still judged
    # 1 refused of 4 is past the rate: no longer used (misconfigured takes 3 refusals)
    assert events["canonical_refused"] == 1 and canonicals.hosts[HOST].state == "untrusted"
    canonicals.declared(f"http://{HOST}/c?print=1", f"http://{HOST}/c", ("c", None))
    assert events["canonical_used"] == 1


def _generated_log(seed: int) -> list[dict]:
    """A crawl log of a generated DUST site (tests/dustgen.py) with every URL a crawler can meet: the pages
    with their ground truth as the engine's cluster, the redirects as the crawl log writes them."""
    from tests import dustgen

    dustgen.require_content()
    site = dustgen.generate(seed)
    lines = []
    for url, truth in sorted(site.universe().items()):
        full = f"http://{site.host}{url}"
        if truth.kind == "redirect":
            lines.append({"kind": "redirect", "request_url": full, "status": truth.status,
                          "url": f"http://{site.host}{truth.location}"})
        elif truth.kind == "page":
            lines.append({"url": full, "request_url": full, "cluster": truth.page, "words": 300})
    return lines


@pytest.mark.parametrize("seed", [101, 104, 107])
def test_the_rules_do_not_depend_on_the_order_of_the_log(seed):
    """One log in three orders gives one rules file. Before, the first URLs of a page in the log's order were
    the ones paired, equal candidate counts were taken in the order they were found, and two URLs a rule
    rewrote onto one kept the first one's page: on generated sites the rules and aliases changed with the
    crawl order (8 concurrent requests), and so did the second crawl's waste."""
    lines = _generated_log(seed)
    outputs = set()
    for order in range(3):
        shuffled = list(lines)
        random.Random(order).shuffle(shuffled)
        miner = DustMiner()
        for line in shuffled:
            miner.add_record(line)
        rules = miner.mine().rules
        assert rules.hosts, "the generated site gives rules"
        outputs.add(rules.dumps())
    assert len(outputs) == 1


def test_an_explored_violation_deactivates_only_the_rules_not_proven_innocent():
    """``/b?lang=de&sid=x`` is the German page: ``drop ?lang=`` is wrong, ``drop ?sid=`` is not, and the fetched
    ``/b?lang=de`` (the URL ``drop ?sid=`` alone gives) holds that very page. Both rules fired on the explored
    URL; both were deactivated for good, and every session URL was fetched again for the rest of the crawl."""
    from scrapy_dedup.url.canonical import Canonicalizer
    from scrapy_dedup.url.learner import OnlineDustLearner

    rules = RuleSet()
    key_of = Canonicalizer(dust_rules=rules).canonicalize
    learner = OnlineDustLearner(rules, key_of, every=100, explore=1.0)
    activated = []
    for i in range(3):
        activated += learner.record(f"http://{HOST}/p{i}", f"page{i}", None)
        activated += learner.record(f"http://{HOST}/p{i}?lang=en", f"page{i}", None)
        activated += learner.record(f"http://{HOST}/p{i}?sid=s{i}", f"page{i}", None)
    activated += learner.mine_now()
    assert sorted(v.rule.param for v in activated) == ["lang", "sid"]
    learner.record(f"http://{HOST}/b", "b in English", None)
    learner.record(f"http://{HOST}/b?lang=de", "b in German", None)
    explored = f"http://{HOST}/b?lang=de&sid=s9"
    assert learner.should_explore(explored, key_of(explored))
    removed = learner.check_explored(explored, "b in German", None)
    assert [r.param for r in removed] == ["lang"]
    assert [r.param for r in rules.hosts[HOST]] == ["sid"]


def test_a_loaded_alias_within_its_key_is_no_claim_to_explore():
    """Generated site 6205 (a noise site): ``mine-dust`` writes redirect aliases the rules explain (the source's
    key is the target's: ``/guide/x/ -> /amp/guide/x/;sid=T``), so that the crawl requests the target at once.
    Such an alias merges nothing the rules do not; on trial as a claim of its own, each first URL it sent
    elsewhere was fetched, a redirect hop and the page again (mined waste 8% before the alias trial, 37% with
    it). An alias whose target has another key stays on trial."""
    from scrapy_dedup.url.canonical import Canonicalizer
    from scrapy_dedup.url.dust import DustRule
    from scrapy_dedup.url.learner import OnlineDustLearner

    rules = RuleSet({HOST: [DustRule("drop_param", param="sid")]},
                    aliases={HOST: {"/b": "/b?sid=k3b8pmb30reqppc8",
                                    "/c": "/b?sid=k3b8pmb30reqppc8"}})
    key_of = Canonicalizer(dust_rules=rules).canonicalize
    learner = OnlineDustLearner(rules, key_of, explore=0.05, learn=False)
    learner.record(f"http://{HOST}/a?sid=k3b8pmb30reqppc8", "page a", None)
    learner.record(f"http://{HOST}/b?sid=k3b8pmb30reqppc8", "page b", None)
    url = f"http://{HOST}/a?sid=mhw2tvlrkyhxgeie"
    assert learner.should_explore(url, key_of(url))  # the rule's first URL
    assert learner.take_exploration(url) and learner.check_explored(url, "page a", None) == []
    url = f"http://{HOST}/b?sid=irk55hq8zo6sqj1c"  # rule checked; alias /b -> /b?sid=T within its key: nothing to check
    assert key_of(url) == f"http://{HOST}/b" and not learner.should_explore(url, key_of(url))
    url = f"http://{HOST}/c"  # /c -> /b?sid=T merges another key: on trial
    assert key_of(url) == f"http://{HOST}/b" and learner.should_explore(url, key_of(url))


def test_loaded_rules_with_the_miners_evidence_are_explored_within_a_share_of_the_hosts_pages():
    """A rule the file shows confirmed on ``min_support`` pages or more (what ``mine-dust`` writes) is explored
    within ``explore`` of its host's fetched pages, taken by the rule explored least; a rule without recorded
    evidence from its first URL and each value it drops, as before."""
    from scrapy_dedup.url.canonical import Canonicalizer
    from scrapy_dedup.url.dust import DustRule
    from scrapy_dedup.url.learner import OnlineDustLearner

    mined = [DustRule("drop_param", param="sid", support=30, support_pages=20),
             DustRule("drop_param", param="ref", support=30, support_pages=20)]
    bare = "hand.test"
    rules = RuleSet({HOST: mined, bare: [DustRule("drop_param", param="sid")]})
    key_of = Canonicalizer(dust_rules=rules).canonicalize
    learner = OnlineDustLearner(rules, key_of, explore=0.05, learn=False)
    explored = []
    for i in range(60):
        learner.record(f"http://{HOST}/p{i}", f"page {i}", None)
        for param in ("sid", "ref"):
            url = f"http://{HOST}/p{i}?{param}=v{i}"
            if learner.should_explore(url, key_of(url)):
                explored.append((i, param))
    assert explored == [(19, "sid"), (39, "ref"), (59, "sid")]  # one per 20 pages, each rule in turn
    learner.record(f"http://{bare}/a", "page a", None)
    url = f"http://{bare}/a?sid=1"
    assert learner.should_explore(url, key_of(url))  # no evidence in the file: its first URL


def test_an_exploration_redirected_to_its_keys_page_under_the_other_rules_agrees_without_a_fetch():
    """Generated site 6204: an explored opaque id of the loaded alias table (``/content.asp?cid=N -> /guide/x``)
    answered a redirect to ``/en/guide/x``, the page under a locale prefix another rule folds; the page was
    fetched again to compare (two fetches for one check). The server's redirect to the URL the key's page was
    fetched at, under the rules less the claims checked, is the agreement; a redirect elsewhere is followed."""
    from scrapy_dedup.url.canonical import Canonicalizer
    from scrapy_dedup.url.dust import DustRule
    from scrapy_dedup.url.learner import OnlineDustLearner

    rules = RuleSet({HOST: [DustRule("substitute", anchor="prefix", from_="/en/", to="/")]},
                    aliases={HOST: {"/content.asp?cid=1": "/guide/x", "/content.asp?cid=2": "/guide/y"}})
    key_of = Canonicalizer(dust_rules=rules).canonicalize
    for cid, target, agrees in ((1, "/en/guide/x", True), (2, "/en/guide/z", False), (2, "/guide/x", False)):
        learner = OnlineDustLearner(rules, key_of, explore=0.05, learn=False)
        learner.record(f"http://{HOST}/guide/x", "page x", None)
        learner.record(f"http://{HOST}/guide/y", "page y", None)
        url = f"http://{HOST}/content.asp?cid={cid}"
        assert learner.should_explore(url, key_of(url)) and learner.take_exploration(url)
        assert learner.redirect_agrees(url, f"http://{HOST}{target}") is agrees
        assert (url in learner.exploring) is not agrees  # (else followed: judged on the page it leads to)
        assert learner.events["explore_agreed"] == int(agrees)


def test_a_withdrawn_mined_rule_does_not_stop_the_turns_of_the_others():
    """The turn goes to the mined rule explored least among those in force: one withdrawn at its first
    exploration (explored once) must not hold the others, explored more since, from their turns."""
    from scrapy_dedup.url.canonical import Canonicalizer
    from scrapy_dedup.url.dust import DustRule
    from scrapy_dedup.url.learner import OnlineDustLearner

    mined = [DustRule("drop_param", param=p, support=30, support_pages=20) for p in ("sid", "ref", "tab")]
    rules = RuleSet({HOST: mined})
    key_of = Canonicalizer(dust_rules=rules).canonicalize
    learner = OnlineDustLearner(rules, key_of, explore=0.05, learn=False)
    explored = []
    for i in range(140):
        learner.record(f"http://{HOST}/p{i}", f"page {i}", None)
        for param in ("sid", "ref", "tab"):
            url = f"http://{HOST}/p{i}?{param}=v{i}"
            if learner.should_explore(url, key_of(url)):
                explored.append(param)
                assert learner.take_exploration(url)
                page = "another page" if param == "tab" else f"page {i}"  # ?tab= shows another page
                learner.check_explored(url, page, None)
    assert explored[:3] == ["sid", "ref", "tab"] and learner.events["loaded_withdrawn"] == 1
    assert explored[3:] == ["sid", "ref", "sid", "ref"]  # the two in force take turns to the end


def _fossil_like_log(path, checkins: list[str], lone_tickets: int = 0) -> str:
    """Fossil's scheme: a ticket under ``/tktview/<10-digit id>`` and ``/info/<id>`` (Fossil's info page hands
    a ticket's id to the ticket view), a check-in or a wiki version under ``/info/<its hash>`` only (Fossil
    never links ``/tktview/<hash>``: an empty ticket form). ``lone_tickets``: tickets seen under
    ``/info/<id>`` alone."""
    rng = random.Random(5)
    lines = []

    def serve(url_path: str, page: str) -> None:
        lines.append({"url": f"http://{HOST}{url_path}", "exact_hash": page, "kind": "unique", "words": 300,
                      "simhash": format(hash(page) & (2 ** 64 - 1), "016x")})

    for i in range(12 + lone_tickets):
        ticket = f"{rng.getrandbits(40):010x}"
        serve(f"/info/{ticket}", f"ticket-{i}")
        if i < 12:
            serve(f"/tktview/{ticket}", f"ticket-{i}")
    for n, commit in enumerate(checkins):
        serve(f"/info/{commit}", f"commit-{n}")
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


@pytest.mark.parametrize("checkins", [["c45b2e096d9d82b1"], ["c45b2e096d9d82b1", "1346ab6ff160b9b657a602b0204430715f"
                                                             "81951b5e8ccc5db340683ce5cb612b"]])
def test_a_substitution_is_not_believed_on_urls_of_a_form_its_evidence_never_had(tmp_path, checkins):
    """Twelve tickets agree that ``/info/<id>`` is ``/tktview/<id>``; the check-ins' ``/info/<hash>`` (another
    form: a 16- or 64-digit hash) were never seen beside a ``/tktview/`` URL, and the rule would name them
    empty ticket forms. Counted as violations, they refuse that direction; the other (``/tktview/`` ->
    ``/info/``: true wherever Fossil links it) is kept. Before, ``/info/`` -> ``/tktview/`` was kept with 0
    violations (the longer target wins a tie)."""
    result = mine_logs([_fossil_like_log(tmp_path / "f.jsonl", checkins)])
    rules = RuleSet({HOST: _rules(result)}, aliases={})
    for commit in checkins:
        url = f"http://{HOST}/info/{commit}"
        assert rules.rewrite(url) == url
    assert rules.rewrite(f"http://{HOST}/tktview/c0ffee1234") == f"http://{HOST}/info/c0ffee1234"
    refused = [v for v in result.validations if v.rule.kind == "substitute" and v.rule.from_ == "/info/"]
    assert refused and not refused[0].kept and refused[0].violations == len(checkins)


def test_urls_of_the_evidences_form_whose_twin_was_never_fetched_do_not_count_against_a_substitution(tmp_path):
    result = mine_logs([_fossil_like_log(tmp_path / "f.jsonl", [], lone_tickets=2)])
    assert [(r.kind, r.from_, r.to) for r in _rules(result)] == [("substitute", "/info/", "/tktview/")]


def _login_form_log(path, same_text: bool, path_forms: int) -> str:
    """Crawl-log lines of a wiki's login form as the crawl writes them with boilerplate learning: linked with
    every page's name (``returnto``), all template, so kept undecided: each line a unique page of its own,
    ``same_text``: one exact text (the form), else each its own (a view that names the page). ``path_forms``:
    shorter URLs of the form logged before it (the engine's exact duplicates of the first)."""
    lines = []
    first = f"http://{HOST}/index.php/Special:Form0"
    for n in range(path_forms):
        url = f"http://{HOST}/index.php/Special:Form{n}"
        lines.append({"url": url, "kind": "unique" if n == 0 else "exact", "cluster": first,
                      "exact_hash": "form", "words": 60})
    for i in range(20):
        url = f"http://{HOST}/index.php?title=Special:UserLogin&returnto=Page{i}"
        lines.append({"url": url, "kind": "unique", "cluster": url, "exact_hash": "form" if same_text else f"p{i}",
                      "words": 60})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


@pytest.mark.parametrize("path_forms", [0, 1, 8])
@pytest.mark.parametrize("same_text", [True, False])
def test_unique_pages_of_one_exact_text_are_one_page(tmp_path, same_text, path_forms):
    """Before, each undecided page was a page of its own (no rule), and with 8 shorter path forms the query forms
    were paired with the shortest URL only (no context candidate)."""
    result = mine_logs([_login_form_log(tmp_path / "l.jsonl", same_text, path_forms)])
    rules = [(r.kind, r.param, r.when) for r in _rules(result)]
    assert rules == ([("drop_param_when", "returnto", "title=Special:UserLogin")] if same_text else [])


def test_pages_one_only_by_their_exact_text_get_no_content_alias(tmp_path):
    """MediaWiki's create-page and create-section forms of a missing page show one text, both undecided: one
    page for the rules' evidence, but an alias would stand on that one pair and merge two resources."""
    base = f"http://{HOST}/index.php?title=User_talk:Reader&action=edit"
    lines = [{"url": url, "kind": "unique", "cluster": url, "exact_hash": "form", "words": 120}
             for url in (f"{base}&section=new", base)]
    path = tmp_path / "l.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = mine_logs([str(path)])
    assert result.stats["unique_pages_same_text"] == 1
    assert not result.rules.aliases.get(HOST)
