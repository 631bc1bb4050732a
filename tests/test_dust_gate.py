"""The hot path's gate never hides a rule: HostRules.changes/apply equal the rules run pass by pass.

``HostRules.changes`` first runs cheap literal prechecks (one per rule family) and only then
the rules; a precheck that is not a superset of its family would silently skip a rewrite. The
reference here is the ungated pass (``_once``) repeated to a fixed point, on random rule sets
of every kind and URLs built from the same pieces as the rules (so rules do fire).
"""
from __future__ import annotations

import random

import pytest

from scrapy_dedup.url.dust import MAX_PASSES, RULE_KINDS, VALUE_SHAPES, DustRule, DustRulesError, RuleSet

NAMES = ["id", "idx", "i", "page", "sid", "print", "p", "junk1", "x", "ID"]
SEGMENTS = ["a", "b", "story", "Item", "s1", "~ed", "people", "x.htm", "x.html", "(S(abcdefghijklmnopqrstuvwx))",
            "00544", "%2F", "A%2fb", "", "docs", "p.h9"]
PREFIXES = ["/", "/a/", "/s1/", "/story", "/x"]


def random_rule(rng: random.Random) -> DustRule:
    kind = rng.choice(RULE_KINDS)
    if kind == "drop_param":
        return DustRule(kind, param=rng.choice(NAMES), prefix=rng.choice(PREFIXES))
    if kind == "default_param":
        return DustRule(kind, param=rng.choice(NAMES), value=rng.choice(["1", "0", ""]), prefix=rng.choice(PREFIXES))
    if kind == "query_to_path":
        return DustRule(kind, path=rng.choice(["/story", "/a", "/", "/Item"]), param=rng.choice(NAMES),
                        value=rng.choice(list(VALUE_SHAPES)),
                        to=rng.choice(["/story/{value}", "/{value}.html", "/a/{value}/b"]))
    if kind == "substitute":
        if rng.random() < 0.5:
            return DustRule(kind, anchor="prefix", from_=rng.choice(["/~ed/", "/a/", "/s", "/story/", "/x"]),
                            to=rng.choice(["/people/", "/b/", "/t", "/Item/"]))
        return DustRule(kind, anchor="suffix", from_=rng.choice([".htm", ".h9", "x", "/", "b"]),
                        to=rng.choice([".html", ".html9", "y", "/index", "c"]))
    if kind == "drop_segment":
        return DustRule(kind, shape=rng.choice(["(S(<alnum:24>))", "<digits:5>", "<digits>"]),
                        prefix=rng.choice(PREFIXES))
    return DustRule(kind)


def random_url(rng: random.Random) -> tuple[str, str]:
    path = "/" + "/".join(rng.choice(SEGMENTS) for _ in range(rng.randint(0, 4)))
    parts = []
    for _ in range(rng.randint(0, 5)):
        name = rng.choice(NAMES + [""])
        parts.append(rng.choice([name, f"{name}={rng.choice(['1', '0', '', '7', 'abc', 'a=b', '12345'])}"]))
    query = "&".join(parts)
    return path, ("&" + query if rng.random() < 0.1 else query)


def ungated(host_rules, path: str, query: str) -> tuple[str, str]:
    """The rules pass by pass to a fixed point, without the gate (at most MAX_PASSES passes)."""
    for _ in range(MAX_PASSES):
        new = host_rules._once(path, query)
        if new == (path, query):
            break
        path, query = new
    return path, query


@pytest.mark.parametrize("seed", range(4))
def test_gated_rules_equal_the_ungated_passes(seed):
    _compare(random.Random(seed), random_rule)


def random_rule_with_leads(rng: random.Random) -> DustRule:
    """As :func:`random_rule`, a segment token also after a literal lead segment (``/s1/<token>/``)."""
    rule = random_rule(rng)
    if rule.kind == "drop_segment" and rng.random() < 0.7:
        return DustRule("drop_segment", shape=rule.shape, lead=rng.choice(["s1", "a", "story"]), prefix=rule.prefix)
    return rule


@pytest.mark.parametrize("seed", range(2))
def test_gated_rules_with_lead_segments_equal_the_ungated_passes(seed):
    _compare(random.Random(100 + seed), random_rule_with_leads)


def _compare(rng: random.Random, make_rule) -> None:
    checked = fired = 0
    for _ in range(300):
        rules = []
        for _ in range(rng.randint(1, 25)):
            rule = make_rule(rng)
            try:
                rule.check()
            except ValueError:
                continue
            rules.append(rule)
        try:
            host_rules = RuleSet.from_json(RuleSet({"h.test": rules}).to_json()).for_host("h.test")
        except DustRulesError:  # substitutions that undo each other: refused at load
            continue
        if host_rules is None:
            continue
        for _ in range(40):
            path, query = random_url(rng)
            want = ungated(host_rules, path, query)
            assert host_rules.apply(path, query) == want, (rules, path, query)
            assert host_rules.changes(path, query) == (None if want == (path, query) else want), (path, query)
            checked += 1
            fired += want != (path, query)
    assert fired > checked // 10  # the rules did fire: the comparison is not vacuous
