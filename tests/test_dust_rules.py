"""DUST rules: every kind, composition, the rules file (load, save, validation errors), idempotence."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_dedup.url.dust import DustRule, DustRulesError, RuleSet, compile_shape, shape_of_segment

H = "news.test"


def rs(*rules: DustRule, host: str = H) -> RuleSet:
    return RuleSet({host: list(rules)})


PRINT = DustRule("drop_param", param="print")
SID = DustRule("drop_param", param="sid", prefix="/story")
PAGE1 = DustRule("default_param", param="page", value="1", prefix="/list")
STORY = DustRule("query_to_path", path="/story", param="id", value="digits", to="/story/{value}")
PHP = DustRule("query_to_path", path="/index.php", param="page", value="slug", to="/{value}.html")
EDITORS = DustRule("substitute", anchor="prefix", from_="/~editors/", to="/people/editors/")
HTML = DustRule("substitute", anchor="suffix", from_=".htm", to=".html")
SESSION = DustRule("drop_segment", shape="(S(<alnum:24>))")
CASE = DustRule("case_insensitive")
ALL = (PRINT, SID, PAGE1, STORY, PHP, EDITORS, HTML, SESSION, CASE)


@pytest.mark.parametrize("rule, url, expected", [
    (PRINT, "/a?print=1", "/a"),
    (PRINT, "/a?x=1&print=1&y=2", "/a?x=1&y=2"),
    (PRINT, "/a?printer=1", "/a?printer=1"),  # a whole name, not a prefix of one
    (PRINT, "/a?print&x=1", "/a?x=1"),
    (PRINT, "/a?print=1&x=1&print=2", "/a?x=1"),
    (PRINT, "/a?&x=1&print=1", "/a?&x=1"),  # an empty part stays as it was
    (DustRule("default_param", param="page", value="1"), "/a?page=10&page=1", "/a?page=10"),
    (DustRule("default_param", param="page", value="1"), "/a?xpage=1", "/a?xpage=1"),
    (SID, "/story?id=3&sid=00544", "/story?id=3"),
    (SID, "/other?sid=00544", "/other?sid=00544"),  # only under its prefix
    (PAGE1, "/list?page=1", "/list"),
    (PAGE1, "/list?page=2", "/list?page=2"),  # only the default value
    (STORY, "/story?id=7", "/story/7"),
    (STORY, "/story?id=7&lang=en", "/story/7?lang=en"),
    (STORY, "/story?id=abc", "/story?id=abc"),  # value of another shape
    (STORY, "/story?id=1&id=2", "/story?id=1&id=2"),  # ambiguous: left alone
    (STORY, "/story/x?id=7", "/story/x?id=7"),  # the path must match exactly
    (PHP, "/index.php?page=about", "/about.html"),
    (PHP, "/index.php?page=a%2Fb", "/index.php?page=a%2Fb"),  # escapes never enter the path
    (EDITORS, "/~editors/bob", "/people/editors/bob"),
    (EDITORS, "/x/~editors/bob", "/x/~editors/bob"),  # anchored at the start
    (HTML, "/docs/intro.htm", "/docs/intro.html"),
    (HTML, "/docs/intro.html", "/docs/intro.html"),
    (HTML, "/docs/intro.htm/x", "/docs/intro.htm/x"),  # anchored at the end
    (SESSION, "/(S(abcdefghijklmnopqrstuv12))/about", "/about"),
    (SESSION, "/(S(short1))/about", "/(S(short1))/about"),
    (SESSION, "/about/(S(abcdefghijklmnopqrstuv12))", "/about/(S(abcdefghijklmnopqrstuv12))"),  # last one kept
    (CASE, "/About/Team%2f?Q=A", "/about/team%2F?Q=A"),  # query untouched, escapes keep uppercase hex
])
def test_each_kind(rule, url, expected):
    assert rs(rule).rewrite(f"http://{H}{url}") == f"http://{H}{expected}"


def test_rules_compose():
    rules = rs(*ALL)
    assert rules.rewrite(f"http://{H}/story?id=7&print=1") == f"http://{H}/story/7"
    assert rules.rewrite(f"http://{H}/story?print=1&sid=00544&id=7") == f"http://{H}/story/7"
    assert rules.rewrite(f"http://{H}/(S(abcdefghijklmnopqrstuv12))/~Editors/Bob.HTM?print=1") == \
        f"http://{H}/people/editors/bob.html"


def test_other_hosts_are_untouched():
    rules = rs(*ALL)
    assert rules.rewrite("http://other.test/story?id=7") == "http://other.test/story?id=7"
    assert rules.for_host("other.test") is None
    assert rules.apply("other.test", "/story", "id=7") == ("/story", "id=7")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["story", "~editors", "people", "editors", "(S(abcdefghijklmnopqrstuv12))",
                                 "Bob.HTM", "x.htm", "index.php", "list", "7"]), max_size=5),
       st.lists(st.sampled_from(["id=7", "print=1", "sid=00544", "page=1", "page=2", "page=about", "id=x",
                                 "lang=en", "id=8"]), max_size=4))
def test_apply_is_idempotent(segments, params):
    rules = rs(*ALL)
    path = "/" + "/".join(segments)
    query = "&".join(params)
    once = rules.apply(H, path, query)
    assert rules.apply(H, *once) == once


def test_shapes():
    assert shape_of_segment("(S(a1b2c3d4e5f6g7h8i9j0k1l2))") == "(S(<alnum:24>))"
    assert shape_of_segment("00544") == "<digits:5>"
    assert shape_of_segment("0123abcdef0123abcdef0123abcdef01") == "<hex:32>"
    assert shape_of_segment("story") is None  # words are never shapes
    assert shape_of_segment("en-us") is None
    assert compile_shape("(S(<alnum:24>))").match("(S(abcdefghijklmnopqrstuv12))")
    assert not compile_shape("(S(<alnum:24>))").match("(S(abcdefghijklmnopqrstuv1))")
    assert compile_shape("a.b").match("a.b") and not compile_shape("a.b").match("axb")  # literals escaped
    # a short token has a digit (shape_of_segment): the shape of v1 is not that of the word de
    assert compile_shape("<alnum:2>").match("v1") and compile_shape("<hex:4>").match("00ff")
    assert not compile_shape("<alnum:2>").match("de") and not compile_shape("<hex:4>").match("dead")
    # nor that of a number (its shape is <digits:N>): a rule learned from /v1/x must keep /2015/01/x, a
    # dated permalink's month (on a generated site the mined rule moved month pages onto other URLs)
    assert not compile_shape("<alnum:2>").match("01") and not compile_shape("<hex:4>").match("2024")
    assert shape_of_segment("01") == "<digits:2>" and shape_of_segment("v1") == "<alnum:2>"
    assert compile_shape("<alnum:16>").match("abcdefghijklmnop")  # 16 letters and more: a token as it is
    with pytest.raises(ValueError, match="unknown token"):
        compile_shape("<regex:.*>")


def test_file_round_trip_keeps_rules_and_evidence(tmp_path):
    rule = DustRule("drop_param", param="print", support=40, support_pages=12, violations=1,
                    examples=(("/story/7?print=1", "/story/7"),))
    original = RuleSet({H: [rule, *ALL[1:]]}, meta={"generated_by": "test"})
    path = tmp_path / "rules.json"
    original.save(path)
    loaded = RuleSet.load(path)
    assert loaded.hosts == original.hosts and loaded.meta == original.meta
    data = json.loads(path.read_text())
    assert data["hosts"][H][0] == {"kind": "drop_param", "param": "print", "prefix": "/", "support": 40,
                                   "support_pages": 12, "violations": 1,
                                   "examples": [["/story/7?print=1", "/story/7"]]}


def test_hand_written_file_with_defaults(tmp_path):
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"format": "scrapy-dedup-dust/1",
                                "hosts": {H: [{"kind": "drop_param", "param": "utm"},
                                              {"kind": "case_insensitive", "note": "IIS"}]}}))
    rules = RuleSet.load(path)
    assert rules.rewrite(f"http://{H}/A?utm=1") == f"http://{H}/a"


# --- a rules file is checked, not trusted ----------------------------------------------------

def test_a_file_without_its_format_key_is_refused(tmp_path):
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"hosts": {H: [{"kind": "drop_param", "param": "utm"}]}}))
    with pytest.raises(DustRulesError, match="no 'format' key"):
        RuleSet.load(path)


def _refused_without_hanging(path) -> str:
    """RuleSet.load(path)'s error, from a thread that must finish within 10 s (a FIFO hung the start)."""
    import threading

    outcome: list = []

    def load() -> None:
        try:
            RuleSet.load(path)
        except DustRulesError as exc:
            outcome.append(str(exc))
        except BaseException as exc:  # pragma: no cover - reported below
            outcome.append(exc)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "loading did not return"
    (message,) = outcome
    assert isinstance(message, str), message
    return message


def test_paths_that_are_not_regular_files_are_refused_before_a_byte_is_read(tmp_path):
    import os

    fifo = tmp_path / "rules.fifo"
    os.mkfifo(fifo)
    assert "not a regular file (a FIFO)" in _refused_without_hanging(fifo)
    assert "not a regular file (a character device)" in _refused_without_hanging("/dev/zero")
    assert "not a regular file (a directory)" in _refused_without_hanging(tmp_path)


def test_a_file_past_the_size_limit_is_refused_from_its_size(tmp_path):
    from scrapy_dedup.url import dust

    path = tmp_path / "big.json"
    with open(path, "wb") as out:
        out.truncate(dust.MAX_FILE_BYTES + 1)  # sparse: refused from its size, never read
    assert f"more than the {dust.MAX_FILE_BYTES:,}" in _refused_without_hanging(path)


def test_parameter_rules_are_sorted_into_sets_and_a_64000_rule_file_loads(tmp_path):
    """Loading is linear: each parameter's family is a set lookup (a list made 64,000 rules take 39 s).

    The time is benchmarks/bench_rules_load.py's figure; here, the structure and the result.
    """
    import sys
    from pathlib import Path

    from scrapy_dedup.url.dust import _param_families

    root_drop, root_default, narrow = _param_families({"a": [("/", None)], "b": [("/x/", None)],
                                                       "c": [("/", "1")], "a2": [("/", None), ("/y/", None)]})
    assert isinstance(root_drop, frozenset) and isinstance(narrow, frozenset)
    assert (root_drop, root_default, narrow) == ({"a", "a2"}, ["c=1"], {"b"})
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    try:
        from bench_rules_load import write_file
    finally:
        sys.path.pop(0)
    path = str(tmp_path / "rules.json")
    write_file(path, 64_000)
    rules = RuleSet.load(path)
    assert len(rules) == 64_000
    assert rules.rewrite("http://big.example/x?p0=1&p5=2&keep=3") == "http://big.example/x?keep=3"
    assert rules.rewrite("http://big.example/s7/a?q7=1&p1=1") == "http://big.example/s7/a"


@pytest.mark.parametrize("host_rules, message", [
    ([{"kind": "regex", "pattern": ".*"}], "unknown rule kind 'regex'"),
    ([{"kind": "drop_param"}], "needs 'param'"),
    ([{"kind": "drop_param", "param": "a", "pattern": "x"}], "unknown key(s) 'pattern'"),
    ([{"kind": "drop_param", "param": "a=b"}], "param must be a query parameter name"),
    ([{"kind": "drop_param", "param": "a", "prefix": "story"}], "prefix must start with '/'"),
    ([{"kind": "query_to_path", "path": "/s", "param": "id", "value": ".*", "to": "/s/{value}"}], "value must be"),
    ([{"kind": "query_to_path", "path": "/s", "param": "id", "value": "digits", "to": "/s/"}], "{value}"),
    ([{"kind": "substitute", "anchor": "prefix", "from": "/a/", "to": "/a/b/"}], "fire again"),
    ([{"kind": "substitute", "anchor": "middle", "from": "a", "to": "b"}], "anchor must be"),
    ([{"kind": "substitute", "anchor": "suffix", "from": ".htm", "to": ".html"},
      {"kind": "substitute", "anchor": "suffix", "from": ".html", "to": ".htm"}], "undo each other"),
    ([{"kind": "drop_segment", "shape": "<alnum:3"}], "unknown token"),
    ([{"kind": "drop_param", "param": "a", "support": -1}], "non-negative integer"),
    ("drop print", "must be a list of rules"),
])
def test_validation_errors_name_the_file_and_rule(tmp_path, host_rules, message):
    path = tmp_path / "bad-rules.json"
    path.write_text(json.dumps({"format": "scrapy-dedup-dust/1", "hosts": {H: host_rules}}))
    with pytest.raises(DustRulesError) as info:
        RuleSet.load(path)
    text = str(info.value)
    assert str(path) in text and message in text
    if isinstance(host_rules, list) and len(host_rules) == 1:
        assert f"hosts['{H}'] rule 1" in text


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    ('{"format": "other/2", "hosts": {}}', "unknown format"),
    ('{"format": "scrapy-dedup-dust/1", "hosts": {"News.Test:80": []}}', "is not a host name"),
    ('{"format": "scrapy-dedup-dust/1", "hosts": {}, "rules": []}', "unknown top-level key"),
    ('{"hosts": {}}', "no 'format' key"),
    ("[]", "a rules file is a JSON object"),
])
def test_file_level_errors(tmp_path, content, message):
    path = tmp_path / "r.json"
    path.write_text(content)
    with pytest.raises(DustRulesError, match=message):
        RuleSet.load(path)
    with pytest.raises(DustRulesError, match="cannot read"):
        RuleSet.load(tmp_path / "missing.json")


def test_coerce_merges_lists_of_files(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    rs(PRINT).save(a)
    RuleSet({"other.test": [HTML]}).save(b)
    merged = RuleSet.coerce([a, str(b)])
    assert merged.rewrite(f"http://{H}/x?print=1") == f"http://{H}/x"
    assert merged.rewrite("http://other.test/x.htm") == "http://other.test/x.html"
    assert RuleSet.coerce(None) is None
    with pytest.raises(TypeError):
        RuleSet.coerce(42)


def test_add_and_remove_recompile():
    rules = RuleSet()
    assert not rules
    assert rules.add(H, PRINT) and not rules.add(H, PRINT)
    assert rules.rewrite(f"http://{H}/x?print=1") == f"http://{H}/x"
    assert rules.remove(H, PRINT)
    assert rules.rewrite(f"http://{H}/x?print=1") == f"http://{H}/x?print=1"


def test_rewrite_never_raises_on_bad_urls():
    rules = rs(*ALL)
    for url in ("http://[::1/x", "", "not a url", "http://news.test:99999999/"):
        assert isinstance(rules.rewrite(url), str)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["story", "~editors", "index.htm", "(S(abcdefghijklmnopqrstuv12))", "Bob.HTM",
                                 "x.htm", "", ";jsessionid=0123456789abcdef0123", "7"]), max_size=5),
       st.lists(st.sampled_from(["id=7", "print=1", "sid=00544", "page=1", "utm_source=x", "b=2"]), max_size=4),
       st.sampled_from(["news.test", "www.news.test", "NEWS.test:80"]),
       st.booleans(), st.booleans(), st.booleans())
def test_canonicalize_with_dust_rules_is_idempotent(segments, params, host, slash, index, www):
    from scrapy_dedup.url.canonical import Canonicalizer
    from scrapy_dedup.url.policy import UrlPolicy

    c = Canonicalizer(UrlPolicy(strip_trailing_slash=slash, drop_index=index, strip_www=www),
                      dust_rules=rs(*ALL))
    url = f"http://{host}/" + "/".join(segments) + ("?" + "&".join(params) if params else "")
    once = c.canonicalize(url)
    assert c.canonicalize(once) == once


def test_canonicalize_dust_rules_argument(tmp_path):
    from scrapy_dedup import canonicalize

    path = tmp_path / "rules.json"
    rs(PRINT, STORY).save(path)
    assert canonicalize("HTTP://News.Test/story?print=1&id=7", dust_rules=str(path)) == f"http://{H}/story/7"
    assert canonicalize(f"http://{H}/story?id=7", dust_rules=rs(STORY), sort_query=False) == f"http://{H}/story/7"
    assert canonicalize(f"http://{H}/story?id=7") == f"http://{H}/story?id=7"  # no rules, no rewrite
    with pytest.raises(DustRulesError, match="dust_rules: .*missing.json"):
        canonicalize(f"http://{H}/", dust_rules=str(tmp_path / "missing.json"))


def test_bad_rules_file_fails_the_crawl_at_start_naming_the_setting(tmp_path):
    from scrapy.utils.test import get_crawler

    from scrapy_dedup.fingerprinter import CanonicalRequestFingerprinter
    from scrapy_dedup.settings import DedupConfigError

    bad = tmp_path / "rules.json"
    bad.write_text(json.dumps({"format": "scrapy-dedup-dust/1", "hosts": {H: [{"kind": "regex", "pattern": ".*"}]}}))
    with pytest.raises(DedupConfigError, match=r"DEDUP_DUST_RULES: .*rules.json: hosts\['news.test'\] rule 1"):
        CanonicalRequestFingerprinter.from_crawler(get_crawler(settings_dict={"DEDUP_DUST_RULES": str(bad)}))
    # not a regular file, or no format key: refused at start in one line naming the setting
    for path, message in (("/dev/zero", "not a regular file"), (str(tmp_path), "not a regular file")):
        with pytest.raises(DedupConfigError, match=f"^DEDUP_DUST_RULES: {path}: {message}[^\n]*$"):
            CanonicalRequestFingerprinter.from_crawler(get_crawler(settings_dict={"DEDUP_DUST_RULES": path}))
    good = tmp_path / "good.json"
    rs(PRINT).save(good)
    fingerprinter = CanonicalRequestFingerprinter.from_crawler(
        get_crawler(settings_dict={"DEDUP_DUST_RULES": [str(good)]}))
    import scrapy

    assert fingerprinter.canonical_url(scrapy.Request(f"http://{H}/a?print=1")) == f"http://{H}/a"
