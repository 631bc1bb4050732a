"""`scrapy-dedup report` names what causes a dump's mirrors and prints what removes them.

Dumps from generated DUST sites (tests/dustgen.py: the ground truth of every URL) and small synthetic
ones. The loop is closed by running the printed ``mine-dust`` command on the dump and loading what it
wrote the way ``DEDUP_DUST_RULES`` does, with the suggested ``DEDUP_URL_POLICIES``.
Seeds here are neither the DUST benchmark's (0..19, 1000..1019) nor test_dustgen's (100..211).
"""
from __future__ import annotations

import ast
import io
import json
import shlex
import sys
from contextlib import redirect_stderr
from pathlib import Path

import pytest

from scrapy_dedup.audit.mirrors import explain_mirrors
from scrapy_dedup.cli import main
from scrapy_dedup.url.canonical import Canonicalizer
from scrapy_dedup.url.mining import MiningConfig
from scrapy_dedup.url.policy import PolicyMap
from tests import dustgen
from tests.test_cli_report import body_words, html_page, write_dump

SEEDS = (300, 303, 304, 306, 307, 324)  # 324: pages 2 and 3 of a list only beside a session (issue 14)


def report_json(capsys, *args: str) -> dict:
    assert main(["report", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["mirrors"]


def site_dump(tmp_path: Path, seed: int) -> tuple[Path, dustgen.DustSite, dict[str, dustgen.Truth]]:
    """Every page URL of the site with the HTML it serves: a crawl that fetched everything it met."""
    dustgen.require_content()
    site = dustgen.generate(seed, docs=12)
    lines, truth = [], {}
    for i, (path, t) in enumerate(sorted(site.universe().items())):
        if t.kind == "page":
            url = f"http://{site.host}{path}"
            truth[url] = t
            lines.append({"url": url, "html": site.page_html(t.page, t.view, i)})
    return write_dump(tmp_path / "dump.jsonl", lines), site, truth


def parameter_vocabulary(site: dustgen.DustSite) -> dict[str, set[str]]:
    """The DUST parameter names the site's families use, by family (lowercased, as the report writes them)."""
    names = {
        "tracking": set(site.tracking_names),
        "session-param": {site.session_param_name},
        "session-pathparam": {site.pathparam_name},
        "view-query": {name for name, _, _ in site.view_queries},
        "default-param": {site.default_param_pair[0]},
        "locale-query": {site.locale_param},
    }
    return {family: {n.lower() for n in ns} for family, ns in names.items() if family in site.families}


def named_parameters(mirrors: dict) -> tuple[set[str], set[str]]:
    """(parameters the report says to drop, parameters it says have a default value)."""
    dropped = {c["value"] for c in mirrors["settings"]["causes"] if c["setting"].endswith("_params")}
    defaults = set()
    for rule in mirrors["dust_rules"]["rules"]:
        text = rule["rule"]
        if rule["kind"] == "drop_param":
            dropped.add(text.split("?", 1)[1].split("=", 1)[0].lower())
        elif rule["kind"] == "drop_pathparam":
            dropped.add(text.split(";", 1)[1].split("=", 1)[0].lower())
        elif rule["kind"] == "default_param":
            defaults.add(text.split("?", 1)[1].split("=", 1)[0].lower())
    return dropped, defaults


@pytest.mark.parametrize("seed", SEEDS)
def test_report_names_the_forms_the_site_uses_and_not_the_others(tmp_path, capsys, seed):
    dump, site, truth = site_dump(tmp_path, seed)
    mirrors = report_json(capsys, str(dump))
    assert mirrors["hosts"] == [site.host]
    assert mirrors["pairs"] > 0
    vocabulary = parameter_vocabulary(site)
    known = set().union(*vocabulary.values()) if vocabulary else set()
    traps = {site.page_param, site.part_param, site.sort_param, site.category_param}
    dropped, defaults = named_parameters(mirrors)
    # parameters: only the site's own DUST parameters are dropped, never a trap's (pages, parts, facets)
    assert dropped <= known, (dropped - known, site.describe())
    assert not dropped & traps
    allowed_defaults = known | ({site.locale_param} if "language" in site.traps else set()) \
        | (traps - {site.category_param} if "default-trap-param" in site.families else set())
    assert defaults <= allowed_defaults, (defaults, site.describe())
    # every DUST parameter the default canonicalization leaves in some URL of a mirror is named
    plain = Canonicalizer()
    for family, names in vocabulary.items():
        for name in names:
            survives = any(f"{name}=" in plain.canonicalize(url).lower().partition("?")[2]
                           for url, t in truth.items() if family in t.forms)
            if survives:
                assert name in dropped | defaults, (family, name, dropped, defaults)
    # path forms: each kind named only where the site has a family of that kind, and the case family named
    kinds = {rule["kind"] for rule in mirrors["dust_rules"]["rules"]}
    assert ("case_insensitive" in kinds) == ("case" in site.families)
    if "drop_segment" in kinds:
        assert "session-path" in site.families
    if "query_to_path" in kinds:
        assert {"querypath", "wikiquery", "view-prefix", "locale-prefix"} & set(site.families)
    assert mirrors["merged_distinct"]["urls"] == 0
    text_out = _report_text(capsys, dump)
    by_file = mirrors["dust_rules"]["pairs"] + mirrors["aliases"]
    assert (f"scrapy-dedup mine-dust {dump} -o dust-rules.json" in text_out) == (by_file > 0)
    assert ("DEDUP_DUST_RULES = 'dust-rules.json'" in text_out) == (by_file > 0)


def _report_text(capsys, dump: Path) -> str:
    assert main(["report", str(dump)]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("seed", (300, 307))
def test_the_printed_command_gives_rules_that_fold_the_mirrors(tmp_path, capsys, monkeypatch, seed):
    """The loop closes: run the printed mine-dust command on the dump, load its file as DEDUP_DUST_RULES
    does, with the suggested DEDUP_URL_POLICIES: every pair the report explains folds, the unexplained
    ones do not, and no two distinct pages of the site get one URL."""
    dump, site, truth = site_dump(tmp_path, seed)
    pairs_file = tmp_path / "pairs.jsonl"
    mirrors = report_json(capsys, str(dump), "--pairs", str(pairs_file))
    command = shlex.split(mirrors["command"])
    assert command[:2] == ["scrapy-dedup", "mine-dust"]
    monkeypatch.chdir(tmp_path)
    with redirect_stderr(io.StringIO()):
        assert main(command[1:]) == 0
    assert "DEDUP_DUST_RULES = 'dust-rules.json'" in mirrors["settings_lines"]
    settings: dict = {}
    for line in mirrors["settings_lines"]:
        name, _, value = line.partition(" = ")  # a line of settings.py: NAME = a Python literal
        settings[name] = ast.literal_eval(value)
    policies = PolicyMap.from_settings_values({}, settings.get("DEDUP_URL_POLICIES", {}))
    crawl = Canonicalizer(policies, dust_rules=settings["DEDUP_DUST_RULES"])
    pairs = [json.loads(line) for line in pairs_file.read_text().splitlines()]
    mirror_pairs = [p for p in pairs if p["url_a"] != p["url_b"]]
    assert len(mirror_pairs) == mirrors["pairs"]
    folded = [p for p in mirror_pairs if crawl.canonicalize(p["url_a"]) == crawl.canonicalize(p["url_b"])]
    explained = mirrors["pairs"] - mirrors["unexplained"]["pairs"]
    assert explained > mirrors["default_canonicalization"] + mirrors["settings"]["pairs"]  # the rules did work
    assert len(folded) == explained
    for a, b in mirrors["unexplained"]["examples"]:
        assert crawl.canonicalize(a) != crawl.canonicalize(b)
    pages: dict[str, str] = {}
    for url, t in truth.items():
        assert pages.setdefault(crawl.canonicalize(url), t.page) == t.page, url
    # without the rules file, the settings alone fold only what the report gives them
    settings_only = Canonicalizer(policies)
    alone = sum(settings_only.canonicalize(p["url_a"]) == settings_only.canonicalize(p["url_b"]) for p in mirror_pairs)
    assert alone == mirrors["default_canonicalization"] + mirrors["settings"]["pairs"]


def _page(seed: int) -> str:
    return html_page(body_words(seed))


def shop_dump(tmp_path: Path) -> Path:
    """Mirrors each one setting off by default folds, one the defaults fold, and a trap: ``?page=1`` is
    the list, but ``?page=2`` is another page, so dropping ``page`` would lose it."""
    rows = [
        ("http://www.shop.test/a", 1), ("http://shop.test/a", 1),  # strip_www
        ("http://shop.test/b/", 2), ("http://shop.test/b", 2),  # strip_trailing_slash
        ("http://shop.test/c/index.html", 3), ("http://shop.test/c/", 3),  # drop_index
        ("http://shop.test/d?ref=nav", 4), ("http://shop.test/d?ref=footer", 4), ("http://shop.test/d", 4),
        ("https://shop.test/e", 5), ("http://shop.test/e", 5),  # ignore_scheme
        ("http://shop.test/f?utm_source=feed", 6), ("http://shop.test/f", 6),  # the defaults
        ("http://shop.test/list", 7), ("http://shop.test/list?page=1", 7), ("http://shop.test/list?page=2", 8),
        ("http://www.shop.test/g/", 9), ("http://shop.test/g", 9),  # strip_www and strip_trailing_slash
        ("http://www.shop.test/h/", 10), ("http://www.shop.test/h", 10),  # a slash under www.: one domain key
    ]
    return write_dump(tmp_path / "shop.jsonl", [{"url": url, "html": _page(900 + n)} for url, n in rows])


def test_settings_suggested_fold_their_mirrors_and_never_merge_distinct_pages(tmp_path, capsys):
    dump = shop_dump(tmp_path)
    mirrors = report_json(capsys, str(dump))
    policies = mirrors["settings"]["DEDUP_URL_POLICIES"]
    assert policies == {"shop.test": {"strip_www": True, "strip_trailing_slash": True, "drop_index": True,
                                      "ignore_scheme": True, "tracking_params": ["ref"]}}
    assert mirrors["default_canonicalization"] == 1
    assert mirrors["settings"]["pairs"] == 8  # a, b, c, two of d, e, g, h
    assert sum(cause["pairs"] for cause in mirrors["settings"]["causes"]) == 8
    # ?page=1 beside the list: no setting may drop page (page 2 is another page), no rule has the support;
    # the miner's alias table holds it (a page under exactly two URLs)
    assert mirrors["dust_rules"]["pairs"] == 0 and mirrors["aliases"] == 1
    assert mirrors["unexplained"] == {"pairs": 0, "across_hosts": 0, "examples": []}
    crawl = Canonicalizer(PolicyMap.from_settings_values({}, policies))
    for a, b in (("http://www.shop.test/a", "http://shop.test/a"), ("http://shop.test/b/", "http://shop.test/b"),
                 ("http://shop.test/c/index.html", "http://shop.test/c/"),
                 ("http://shop.test/d?ref=nav", "http://shop.test/d"), ("https://shop.test/e", "http://shop.test/e"),
                 ("http://www.shop.test/g/", "http://shop.test/g"), ("http://www.shop.test/h/", "http://www.shop.test/h")):
        assert crawl.canonicalize(a) == crawl.canonicalize(b)
    assert crawl.canonicalize("http://shop.test/list?page=2") != crawl.canonicalize("http://shop.test/list")
    text_out = _report_text(capsys, dump)
    assert "DEDUP_URL_POLICIES = {'shop.test': {" in text_out
    assert "tracking parameter ?ref= on shop.test" in text_out and "?page=" not in text_out


def test_no_mirrors_one_host_stdin_and_other_field_names_are_said(tmp_path, capsys, monkeypatch):
    distinct = write_dump(tmp_path / "distinct.jsonl",
                          [{"url": f"http://one.test/{i}", "html": _page(950 + i)} for i in range(3)]
                          + [{"url": "http://one.test/0", "html": _page(950)}])  # the same URL fetched twice
    mirrors = report_json(capsys, str(distinct))
    assert mirrors["pairs"] == 0 and mirrors["same_url"] == 1
    assert "Mirrors: none (no duplicate at another URL); 1 duplicate(s) at the URL" in _report_text(capsys, distinct)
    one_host = write_dump(tmp_path / "one.jsonl", [{"url": "http://one.test/x", "html": _page(960)},
                                                   {"url": "http://one.test/y", "html": _page(960)}])
    mirrors = report_json(capsys, str(one_host))
    assert mirrors["hosts"] == ["one.test"] and mirrors["aliases"] == 1
    assert "on 1 host(s): one.test" in _report_text(capsys, one_host)
    # two sites: rules and aliases are per host, so the pair stays unexplained, counted as across hosts;
    # URLs the canonicalizer cannot parse are counted apart, never dropped silently
    two = write_dump(tmp_path / "two.jsonl", [{"url": "http://a.test/x", "html": _page(970)},
                                              {"url": "http://b.test/x", "html": _page(970)},
                                              {"url": "no url at all", "html": _page(971)},
                                              {"url": "neither is this", "html": _page(971)}])
    mirrors = report_json(capsys, str(two))
    assert mirrors["pairs"] == 1 and mirrors["unusable_urls"] == 1
    assert mirrors["unexplained"] == {"pairs": 1, "across_hosts": 1, "examples": [["http://a.test/x", "http://b.test/x"]]}
    assert "1 duplicate page(s) without a usable URL" in _report_text(capsys, two)
    # the audit's own engine parameters: mine-dust takes --min-words, and is said to judge with the defaults
    mirrors = report_json(capsys, str(one_host), "--min-words", "30", "-k", "2")
    assert mirrors["command"] == f"scrapy-dedup mine-dust {one_host} --min-words 30 -o dust-rules.json"
    assert "this audit with hamming_threshold 2" in mirrors["command_note"]
    # standard input: mine-dust cannot read it again; the report says what to do
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(one_host.read_bytes())))
    mirrors = report_json(capsys, "-")
    assert mirrors["command"] is None and "save it to a file" in mirrors["command_note"]
    # other field names: mine-dust reads url and html or text only
    renamed = write_dump(tmp_path / "renamed.jsonl", [{"link": "http://one.test/x", "body": _page(960)},
                                                      {"link": "http://one.test/y", "body": _page(960)}])
    mirrors = report_json(capsys, str(renamed), "--url-field", "link", "--html-field", "body")
    assert mirrors["command"] is None and "'link', 'body'" in mirrors["command_note"]


def test_rules_that_would_merge_distinct_pages_are_named_with_a_warning():
    """A miner allowed to keep bad rules (support 1, violations up to 99%) drops ?page=: the report counts the
    list's pages 2 and 3 that would share the URL of page 1, names the rule, and shows them."""
    urls = ["http://list.test/list", "http://list.test/list?page=1", "http://list.test/list?page=2",
            "http://list.test/list?page=3"]
    roots = [0, 0, 2, 3]
    permissive = MiningConfig(min_support=1, max_violation_rate=0.99, content_aliases=False)
    report = explain_mirrors(urls, roots, [(0, 1)], lambda i: True, mining=permissive)
    assert report.pairs == 1 and report.by_rules == 1
    assert report.merged == 2
    assert report.merged_rules == [("list.test: drop ?page= under /", 2)]
    assert report.merged_examples == [(urls[0], urls[2]), (urls[0], urls[3])]
    assert "warning: 2 URL(s) of distinct pages" in "\n".join(report.lines())
    # the miner's own thresholds keep no such rule: nothing merged, nothing to warn about
    strict = explain_mirrors(urls, roots, [(0, 1)], lambda i: True, mining=MiningConfig(content_aliases=False))
    assert strict.merged == 0 and strict.unexplained == 1


def test_a_warc_dump_gets_a_command_that_reads_it(tmp_path, capsys, monkeypatch):
    """A WARC's mirrors: its revisits at tracking URLs are the defaults' to fold, its /amp/ copies a path rule
    that the printed command, run on the WARC itself, writes."""
    from tests.test_audit_warc import Warc

    w = Warc(gz=True)
    for n in range(1, 6):
        html = html_page(body_words(980 + n))
        w.response(f"http://news.test/story/{n}", html.encode())
        digest = w.header("WARC-Payload-Digest")
        w.response(f"http://news.test/amp/story/{n}", html.encode())
        w.revisit(f"http://news.test/story/{n}?utm_source=feed", digest=digest)
    warc = w.save(tmp_path / "news.warc.gz")
    mirrors = report_json(capsys, str(warc))
    assert mirrors["pairs"] == 10 and mirrors["default_canonicalization"] == 5
    assert [r["rule"] for r in mirrors["dust_rules"]["rules"]] == ["path prefix '/amp/' -> '/'"]
    assert mirrors["dust_rules"]["pairs"] == 5 and mirrors["unexplained"]["pairs"] == 0
    monkeypatch.chdir(tmp_path)
    with redirect_stderr(io.StringIO()):
        assert main(shlex.split(mirrors["command"])[1:]) == 0
    crawl = Canonicalizer(dust_rules="dust-rules.json")
    for n in range(1, 6):
        assert crawl.canonicalize(f"http://news.test/amp/story/{n}") == f"http://news.test/story/{n}"


def test_the_mirrors_report_mines_the_audits_reading_of_the_dump(tmp_path, capsys, monkeypatch):
    """The mirrors report mines its rules from the records the audit read (the miner fed in dump order, as
    the printed mine-dust command reads the dump), not by reading the dump again: each page is extracted
    once end to end and ``pages_parsed`` says so; the report is the one a second reading gives."""
    import scrapy_dedup.audit.runner as runner
    import scrapy_dedup.content.extract as extract

    calls = []
    for name in ("page_text", "page_blocks_titled"):  # every extraction, the audit's and the miner's
        original = getattr(extract, name)
        monkeypatch.setattr(extract, name, lambda *a, _f=original, **kw: calls.append(1) or _f(*a, **kw))
    dump, _, _ = site_dump(tmp_path, 300)
    pages = len(dump.read_text().splitlines())

    def run() -> dict:
        assert main(["report", str(dump), "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    once = run()
    assert len(calls) == pages and once["pages_parsed"] == pages
    assert once["mirrors"]["dust_rules"]["pairs"] > 0  # the rules explain mirrors
    calls.clear()
    monkeypatch.setattr(runner, "feeds_miner", lambda *args: False)  # the miner reads the dump itself
    again = run()
    assert len(calls) == 2 * pages and again["pages_parsed"] == 2 * pages
    assert again["mirrors"] == once["mirrors"]


def test_url_variants_and_another_port_are_named_mirrors_and_counted_as_hosts(tmp_path, capsys):
    """Near copies of a page under variants of its URL (letter case, trailing slash, a print view, an index file)
    are URL variant mirrors, not possible templated siblings; a copy on another port of the same host is a mirror
    host, and the Mirrors block counts that port as a host of its own. Two products on one template stay siblings."""
    from tests.test_cli_report import edit_to_distance

    pairs = [  # (kept URL, its near copy's URL, the category the pair must get)
        ("http://shop.test/Guide/Intro", "http://shop.test/guide/intro", "URL variant mirror"),
        ("http://shop.test/docs/setup/", "http://shop.test/docs/setup", "URL variant mirror"),
        ("http://shop.test/article/5", "http://shop.test/print/article/5", "URL variant mirror"),
        ("http://shop.test/news/", "http://shop.test/news/index.html", "URL variant mirror"),
        ("http://shop.test/p/9", "http://shop.test:8080/p/9", "mirror host"),
        ("http://shop.test/p/1", "http://shop.test/p/2", "possible templated siblings"),
    ]
    lines = []
    for seed, (kept, copy, _) in enumerate(pairs, start=40):
        words = body_words(seed)
        lines.append({"url": kept, "html": html_page(words)})
        lines.append({"url": copy, "html": html_page(edit_to_distance(words, 2, seed))})
    dump = write_dump(tmp_path / "dump.jsonl", lines)
    assert main(["report", str(dump), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["numbers"]["near"] == len(pairs), data["numbers"]
    expected: dict[str, int] = {}
    for _, _, category in pairs:
        expected[category] = expected.get(category, 0) + 1
    assert data["categories"] == expected
    assert sorted(data["mirrors"]["hosts"]) == ["shop.test", "shop.test:8080"]
    assert main(["report", str(dump)]) == 0
    text = capsys.readouterr().out
    assert "on 2 host(s): shop.test, shop.test:8080" in text or "on 2 host(s): shop.test:8080, shop.test" in text
    assert "regional mirror" not in text


def test_the_mirrors_examples_show_no_visitors_session():
    """The report lists unexplained pairs and the mine-dust command to run: the crawl's URLs as they were
    carried its visitor's session ids and tokens (a live credential on an authenticated crawl)."""
    token = "9f8e7d6c5b4a39281706f5e4"
    urls = [f"http://a.test/x;JSESSIONID={token}?utm_source=news", f"http://b.test/x?PHPSESSID={token}&id=17",
            f"http://user:secret@c.test/s/{token}/x"]
    report = explain_mirrors(urls, [0, 0, 0], [(0, 1), (0, 2)], lambda i: True)
    text = "\n".join(report.lines()) + json.dumps(report.to_dict())
    assert token not in text and "secret" not in text
    assert report.examples == [("http://a.test/x;JSESSIONID=<token>?utm_source=<token>",
                                "http://b.test/x?PHPSESSID=<token>&id=17"),
                               ("http://a.test/x;JSESSIONID=<token>?utm_source=<token>", "http://c.test/s/<token>/x")]
